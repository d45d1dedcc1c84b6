"""``autograd.scipy.stats.norm``: ``wengert.scipy.stats.norm``'s functions."""
from .....scipy.stats import norm as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
