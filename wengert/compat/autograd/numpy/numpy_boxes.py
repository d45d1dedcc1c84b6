"""``autograd.numpy.numpy_boxes``: an ``ArrayBox`` is any wengert tracer."""
from ..core import Box

ArrayBox = Box
__all__ = ["ArrayBox"]
