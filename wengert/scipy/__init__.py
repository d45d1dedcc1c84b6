"""``wengert.scipy``: differentiable parts of SciPy (``special``, ``linalg``)."""
from . import linalg, special  # noqa: F401
