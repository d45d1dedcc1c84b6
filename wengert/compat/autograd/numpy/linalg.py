"""``autograd.numpy.linalg``: ``wengert.numpy.linalg``."""
from ....numpy import linalg as _linalg
from ....numpy.linalg import *  # noqa: F401,F403


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_linalg, name)
