"""``autograd.misc``: ``flatten`` (dict keys sorted, as autograd), optimizers, fixed points."""
from .flatten import flatten  # noqa: F401
from .tracers import const_graph  # noqa: F401
