"""``autograd.scipy.stats.multivariate_normal``: ``wengert.scipy.stats.multivariate_normal``'s functions."""
from .....scipy.stats import multivariate_normal as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
