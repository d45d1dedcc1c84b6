"""Comparisons and logic as primitives: recorded by a tracer, never differentiated.

The graph tracer records ``x < y``, ``&``, ``|``, ``^`` and ``~`` on its values as
nodes (so that ``if`` on a traced value can record a guard), and records any
non-differentiable NumPy function (``argmax``, ``isnan``...) met on them as a node
too, through ``nondiff_for``.  Their partials are ``None``: no derivative.
"""
import operator

from ..core import primitive

__all__ = ["LOGIC", "invert", "nondiff_for"]


def _nondiff_prim(impl, name):
    p = primitive(impl, name=name, broadcasting=True)
    p.partials(lambda ans, *xs, **kw: (None,) * len(xs))
    p.nondiff = True
    return p


# Python's operator name -> primitive
LOGIC = {name: _nondiff_prim(getattr(operator, name), name)
         for name in ("lt", "le", "gt", "ge", "eq", "ne", "and_", "or_", "xor")}
invert = primitive(operator.invert, name="invert")
invert.partials(lambda ans, x: (None,))


_NONDIFF = {}


def nondiff_for(func):
    """The primitive recording ``func`` (a NumPy function) as not differentiated."""
    p = _NONDIFF.get(func)
    if p is None:
        p = _NONDIFF[func] = primitive(func, name=getattr(func, "__name__", "nondiff"))
        p.partials(lambda ans, *xs, **kw: (None,) * len(xs))
        p.nondiff = True
    return p
