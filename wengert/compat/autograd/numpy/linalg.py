"""``autograd.numpy.linalg``: ``wengert.numpy.linalg``."""
from .... import numpy as _wnp
from ....numpy import linalg as _linalg
from ....numpy.linalg import *  # noqa: F401,F403


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_linalg, name)


def T(x):
    """The transpose of the last two axes (autograd's helper)."""
    return _wnp.swapaxes(x, -1, -2)


def _dot(a, b):
    """Matrix products over the last two axes, stacked (autograd's helper)."""
    return _wnp.matmul(a, b)
