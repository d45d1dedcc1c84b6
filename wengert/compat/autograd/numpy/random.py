"""``autograd.numpy.random``: NumPy's random numbers (not differentiated)."""
import numpy.random as _npr
from numpy.random import *  # noqa: F401,F403


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_npr, name)
