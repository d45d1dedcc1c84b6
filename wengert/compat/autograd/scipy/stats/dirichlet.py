"""``autograd.scipy.stats.dirichlet``: ``wengert.scipy.stats.dirichlet``'s functions."""
from .....scipy.stats import dirichlet as _dist


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_dist, name)
