"""``autograd.scipy``: ``wengert.scipy``'s rules under autograd's names."""
from . import integrate, linalg, misc, signal, special, stats  # noqa: F401
