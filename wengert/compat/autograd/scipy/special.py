"""``autograd.scipy.special``: ``wengert.scipy.special`` (every name of ``scipy.special``)."""
from ....scipy import special as _special
from ....scipy.special import *  # noqa: F401,F403


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_special, name)
