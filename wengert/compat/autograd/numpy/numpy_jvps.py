"""``autograd.numpy.numpy_jvps``: the helpers user rules import from it."""
from .numpy_vjps import broadcast, match_complex, unbroadcast, unbroadcast_f  # noqa: F401
