"""autograd's ``extend``: new primitives and their rules (onto ``wengert.core.Primitive``)."""
from .core import (JVPNode, SparseObject, VJPNode, VSpace, def_linear, defjvp,  # noqa: F401
                   defjvp_argnum, defjvp_argnums, defvjp, defvjp_argnum, defvjp_argnums,
                   vspace)
from .tracer import Box, notrace_primitive, primitive, register_notrace  # noqa: F401
