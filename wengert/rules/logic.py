"""Comparisons and logic as primitives: recorded by a tracer, never differentiated.

The graph tracer records ``x < y``, ``&``, ``|``, ``^`` and ``~`` on its values as
nodes (so that ``if`` on a traced value can record a guard), and records any
non-differentiable NumPy function (``argmax``, ``isnan``...) met on them as a node
too, through ``nondiff_for``.  Each is declared ``nondiff``: no derivative.
"""
import operator

import numpy as np

from ..core import primitive
from .lowering import Lowering

__all__ = ["LOGIC", "SAME_NUMBER", "SAME_VALUE", "invert", "nondiff_for", "same_value"]


def _nondiff_prim(impl, name):
    return primitive(impl, name=name, broadcasting=True, nondiff=True,
                     lowering=Lowering(operator=impl))


# Python's operator name -> primitive
LOGIC = {name: _nondiff_prim(getattr(operator, name), name)
         for name in ("lt", "le", "gt", "ge", "eq", "ne", "and_", "or_", "xor")}
# wg.vmap: elementwise (the comparisons are, by ``broadcasting``)
invert = primitive(operator.invert, name="invert", nondiff=True, batch="elementwise",
                   lowering=Lowering(operator=operator.invert))


_NONDIFF = {}


def nondiff_for(func):
    """The primitive recording ``func`` (a NumPy function) as not differentiated."""
    p = _NONDIFF.get(func)
    if p is None:
        p = _NONDIFF.setdefault(func, primitive(func, name=getattr(func, "__name__", "nondiff"),
                                                nondiff=True))
    return p


def same_value(a, b):
    """Whether ``a`` is ``b``: same shape and entries, NaN matching NaN and -0.0 not 0.0."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))
                and len(a) == len(b) and all(map(same_value, a, b)))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind not in "fc":
        return bool(np.all(a == b))
    same = (a == b) | ((a != a) & (b != b))
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        same &= np.signbit(a) == np.signbit(b)
    return bool(np.all(same))


SAME_VALUE = nondiff_for(same_value)  # a value guard's test: the graph holds while it is true


def same_number(a, b):
    """:func:`same_value` for a float read as a Python number (``float(x)``, ``math.log(x)``)."""
    return same_value(a, b)


# the guard of a float that wg.compile specialised on: like SAME_VALUE, and it tells a graph
# evaluated on traced values that a derivative through it would be lost (graph.py)
SAME_NUMBER = primitive(same_number, name="same_number", nondiff=True)


@SAME_NUMBER.batching
def _(args, batched):
    """Per example: whether each example's number is the one read while tracing."""
    size = next(len(x) for x, bat in zip(args, batched) if bat)
    a, b = (x if bat else [x] * size for x, bat in zip(args, batched))
    return np.array([same_value(a[k], b[k]) for k in range(size)])
