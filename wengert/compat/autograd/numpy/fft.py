"""``autograd.numpy.fft``: ``wengert.numpy.fft``."""
from ....numpy import fft as _fft
from ....numpy.fft import *  # noqa: F401,F403


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_fft, name)
