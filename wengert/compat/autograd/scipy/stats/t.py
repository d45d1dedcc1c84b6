"""``autograd.scipy.stats.t``: ``wengert.scipy.stats.t``'s functions."""
from .....scipy.stats import t as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
