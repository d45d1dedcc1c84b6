"""NumPy functions that call the user's functions: piecewise, apply_along_axis,
apply_over_axes.  They need no rule of their own: each runs NumPy's algorithm with wengert's
operations, so the derivative is that of whatever the user's functions compute.

Conditions, slice positions and shapes are decided on plain values (they are not
differentiated); under graph tracing the conditions are guarded, so other inputs re-trace.
"""
import numpy as np

from ..arrays import host_values, is_foreign
from ..core import Tracer, ndim_of, shape_of
from .conversion import _dtype
from .creation import asarray
from .indexing import index_update
from .joining import stack
from .nondiff import concrete
from .reshaping import _axis, expand_dims, moveaxis
from .shape import reshape, transpose

__all__ = ["piecewise", "apply_along_axis", "apply_over_axes"]


def _traced(*xs):
    return any(isinstance(x, Tracer) for x in xs)


def _condition(c):
    host_values(c, "wnp.piecewise", "each function is applied to the entries its condition "
                "selects")
    return np.asarray(concrete(np.asarray, c, name="condition") if _traced(c) else c)


def piecewise(x, condlist, funclist, *args, **kw):
    """``np.piecewise``: each function sees only the entries its condition selects (so a
    branch that is undefined elsewhere, ``sqrt`` on the negatives, leaks no NaN)."""
    traced_funcs = [f for f in funclist if isinstance(f, Tracer)]
    if not _traced(x, *traced_funcs, *args, *kw.values()):
        return np.piecewise(x, condlist, funclist, *args, **kw)
    x = asarray(x)
    n2 = len(funclist)
    if isinstance(condlist, Tracer):
        condlist = _condition(condlist)
    # NumPy's undocumented promotion of a single condition to a list of one
    if np.isscalar(condlist) or (
            not isinstance(condlist[0], (list, np.ndarray, Tracer))
            and not is_foreign(condlist[0]) and ndim_of(x) != 0):
        condlist = [condlist]
    condlist = np.asarray([_condition(c) for c in condlist], dtype=bool)
    n = len(condlist)
    if n == n2 - 1:  # the "otherwise" condition
        condelse = ~np.any(condlist, axis=0, keepdims=True)
        condlist = np.concatenate([condlist, condelse], axis=0)
    elif n != n2:
        raise ValueError(
            f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros(shape_of(x), _dtype(x))
    for cond, func in zip(condlist, funclist):
        cond = np.broadcast_to(cond, shape_of(x))
        if not callable(func):
            y = index_update(y, cond, func)
        elif cond.any():
            y = index_update(y, cond, func(x[cond], *args, **kw))
    return y


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``np.apply_along_axis``: ``func1d`` on every 1-D slice, the results stacked where
    the axis was, in NumPy's order and shape."""
    if not _traced(arr, *args, *kwargs.values()):
        return np.apply_along_axis(func1d, axis, arr, *args, **kwargs)
    arr = asarray(arr)
    nd = ndim_of(arr)
    axis = _axis(int(axis), nd)
    view = moveaxis(arr, axis, -1)
    lead = shape_of(view)[:-1]
    if any(d == 0 for d in lead):
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    outs = [asarray(func1d(view[ind], *args, **kwargs)) for ind in np.ndindex(*lead)]
    rshape = shape_of(outs[0])
    dt = _dtype(outs[0])
    for o in outs[1:]:
        if shape_of(o) != rshape:
            raise ValueError(f"could not broadcast input array from shape {shape_of(o)} "
                             f"into shape {rshape}")
    outs = [o if _dtype(o) == dt else o.astype(dt) for o in outs]
    buff = reshape(stack(outs), lead + rshape)
    k = len(rshape)  # the result's axes go where the applied axis was
    dims = list(range(len(lead) + k))
    perm = dims[:axis] + dims[len(lead):] + dims[axis:len(lead)]
    return transpose(buff, tuple(perm)) if perm != dims else buff


def apply_over_axes(func, a, axes):
    """``np.apply_over_axes``: ``func(a, axis)`` for each axis in turn, each result kept at
    ``a``'s rank."""
    if not _traced(a):
        return np.apply_over_axes(func, a, axes)
    val = asarray(a)
    n = ndim_of(val)
    if np.ndim(axes) == 0:
        axes = (axes,)
    for axis in axes:
        if axis < 0:
            axis = n + axis
        res = func(val, axis)
        if ndim_of(res) != ndim_of(val):
            res = expand_dims(res, axis)
            if ndim_of(res) != ndim_of(val):
                raise ValueError("function is not returning an array of the correct shape")
        val = res
    return val
