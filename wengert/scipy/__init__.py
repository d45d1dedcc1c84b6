"""``wengert.scipy``: differentiable parts of SciPy (``special``, ``linalg``, ``stats``)."""
from . import linalg, special, stats  # noqa: F401
