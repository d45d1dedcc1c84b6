"""``autograd.scipy.misc``: ``logsumexp`` (SciPy moved it to ``scipy.special``)."""
from ....scipy.special import logsumexp  # noqa: F401

__all__ = ["logsumexp"]
