"""Reshaping: ravel, flatten, swapaxes, moveaxis, expand_dims, squeeze, atleast_1d/2d/3d and
rollaxis, composed of the reshape and transpose primitives (rules/shape.py).

What NumPy returns as a view is a view here too, tracked for ``x[i] = v`` (rules/indexing.py).
Each public function returns exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..core import Tracer, lift, ndim_of, shape_of
from .conversion import _copy, _traced
from .indexing import register_view, reshape_writer, transpose_writer
from .shape import reshape, transpose

__all__ = ["ravel", "flatten", "swapaxes", "moveaxis", "expand_dims", "squeeze", "atleast_1d",
           "atleast_2d", "atleast_3d", "rollaxis"]


def _axis(axis, nd):
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd)
    return axis % nd


def _view(ans, base, writer=None):
    """``ans`` shares memory with ``base`` as in NumPy; ``writer`` writes it back
    (``None``: read-only)."""
    register_view(ans, base, writer)
    return ans


def ravel(a, order="C"):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.ravel(a, order=order)
    if order not in ("C", "K", "A"):
        return reshape(transpose(a), (-1,))
    return _view(reshape(a, (-1,)), a, reshape_writer)


def flatten(a, order="C"):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.asarray(a).flatten(order=order)
    return _copy(ravel(a, order))


def swapaxes(a, axis1, axis2):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.swapaxes(a, axis1, axis2)
    nd = ndim_of(a)
    perm = list(range(nd))
    i, j = _axis(axis1, nd), _axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return _view(transpose(a, tuple(perm)), a, transpose_writer(perm))


def moveaxis(a, source, destination):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.moveaxis(a, source, destination)
    nd = ndim_of(a)
    src = [_axis(s, nd) for s in np.atleast_1d(source)]
    dst = [_axis(d, nd) for d in np.atleast_1d(destination)]
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _view(transpose(a, tuple(order)), a, transpose_writer(order))


def expand_dims(a, axis):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.expand_dims(a, axis)
    return _view(reshape(a, np.expand_dims(np.empty(shape_of(a), np.int8), axis).shape), a,
                 reshape_writer)


def squeeze(a, axis=None):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.squeeze(a, axis=axis)
    return _view(reshape(a, np.squeeze(np.empty(shape_of(a), np.int8), axis=axis).shape), a,
                 reshape_writer)


def atleast_1d(*arys):
    if not _traced(*arys):
        return np.atleast_1d(*arys)
    arys = [lift(a) for a in arys]
    res = [a if ndim_of(a) >= 1 else reshape(a, (1,)) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_2d(*arys):
    if not _traced(*arys):
        return np.atleast_2d(*arys)
    arys = [lift(a) for a in arys]
    res = []
    for a in arys:
        s = shape_of(a)
        res.append(a if len(s) >= 2 else reshape(a, (1,) * (2 - len(s)) + s))
    return res[0] if len(res) == 1 else tuple(res)


def atleast_3d(*arys):
    if not _traced(*arys):
        return np.atleast_3d(*arys)
    arys = [lift(a) for a in arys]
    res = []
    for a in arys:
        s = shape_of(a)
        if len(s) == 0:
            s2 = (1, 1, 1)
        elif len(s) == 1:
            s2 = (1,) + s + (1,)
        elif len(s) == 2:
            s2 = s + (1,)
        else:
            s2 = s
        res.append(a if s2 == s else reshape(a, s2))
    return res[0] if len(res) == 1 else tuple(res)


def rollaxis(a, axis, start=0):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.rollaxis(a, axis, start)
    nd = ndim_of(a)
    axis = _axis(axis, nd)
    if not -nd <= start <= nd:
        raise np.exceptions.AxisError(f"start={start} is out of bounds for {nd} dimensions")
    start = start % (nd + 1) if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return a
    order = [i for i in range(nd) if i != axis]
    order.insert(start, axis)
    return _view(transpose(a, tuple(order)), a, transpose_writer(order))
