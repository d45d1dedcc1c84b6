"""``wengert.scipy``: differentiable parts of SciPy (``special``, ``linalg``, ``stats``, ``signal``)."""
from . import linalg, signal, special, stats  # noqa: F401
