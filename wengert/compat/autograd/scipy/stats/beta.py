"""``autograd.scipy.stats.beta``: ``wengert.scipy.stats.beta``'s functions."""
from .....scipy.stats import beta as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
