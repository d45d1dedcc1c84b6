"""``wengert.numpy.random``: NumPy's random numbers, not differentiated."""
from numpy.random import *  # noqa: F401,F403
