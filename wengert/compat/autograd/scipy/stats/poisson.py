"""``autograd.scipy.stats.poisson``: ``wengert.scipy.stats.poisson``'s functions."""
from .....scipy.stats import poisson as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
