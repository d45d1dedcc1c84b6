"""``autograd.scipy.stats.gamma``: ``wengert.scipy.stats.gamma``'s functions."""
from .....scipy.stats import gamma as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
