"""``autograd.numpy.random``: NumPy's random numbers (not differentiated), looked up in
``numpy.random`` on each use, so that what a program changes there shows here too."""
import numpy.random as _npr

__all__ = list(getattr(_npr, "__all__", [n for n in dir(_npr) if not n.startswith("_")]))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_npr, name)


def __dir__():
    return sorted(set(__all__) | set(globals()))
