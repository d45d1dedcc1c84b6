"""``autograd.scipy.linalg``: ``wengert.scipy.linalg``."""
from ....scipy import linalg as _linalg
from ....scipy.linalg import *  # noqa: F401,F403


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_linalg, name)
