"""``wengert.numpy.random``: NumPy's random numbers, not differentiated."""
from numpy.random import *  # noqa: F401,F403
from numpy.random import __all__  # noqa: E402,F401  what it exports: NumPy's names
