"""autograd's tracer vocabulary on wengert's: a ``Box`` is any wengert tracer, ``getval`` its
primal, ``primitive`` a wengert primitive whose rules are the ``defvjp``/``defjvp`` ones."""
from ...core import Tracer, plain
from .core import Box, getval, isbox, notrace_primitive, primitive, register_notrace  # noqa: F401

__all__ = ["Box", "getval", "isbox", "primitive", "notrace_primitive", "register_notrace",
           "Tracer", "plain"]
