"""``wengert.scipy``: differentiable parts of SciPy (``wengert.scipy.special``)."""
from . import special  # noqa: F401
