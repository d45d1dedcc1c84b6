"""``autograd.scipy.stats.chi2``: ``wengert.scipy.stats.chi2``'s functions."""
from .....scipy.stats import chi2 as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
