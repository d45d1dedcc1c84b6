"""Rows taken at positions that are themselves traced: ``x[i]`` where ``i`` differs by example.

Indices are not differentiated, so elsewhere a traced index is made plain (or guarded, in a
graph being traced).  Under ``wg.vmap`` an index holds one value per example and there is no
single plain value: ``x[i]`` is then ``take_dynamic(x, i)``, whose positions are an argument,
and its batching rule takes each example's rows from that example's array.
"""
import math

import numpy as np

from ..arrays import add_at_flat, asarray as _asarray, implements, is_foreign
from ..core import Tracer, ndim_of, primitive, shape_of
from .shape import broadcast_to, reshape, transpose

__all__ = ["take_dynamic", "put_dynamic"]


@primitive(nargs=2)
def take_dynamic(x, i, lead=0):
    """``np.take(x, i, axis=lead)``: the rows of ``x`` after ``lead`` leading axes at positions
    ``i`` (an integer array; not differentiated)."""
    return take_flat(_asarray(x, like=i), i, lead)  # NumPy x moved to a CuPy i's library


def take_in_library(a, i, axis):
    """``np.take(a, i, axis)`` (``mode="raise"``) with positions ``i`` of a CuPy or Dask
    library (a searchsorted there): taken there, a traced ``a`` by ``take_dynamic``."""
    if not isinstance(a, Tracer):  # NumPy's take dispatches on a only: a into i's library
        a = _asarray(a, like=i)
        return take_flat(np.ravel(a), i, 0) if axis is None else take_flat(a, i, axis % a.ndim)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    return take_dynamic(a, i, axis % ndim_of(a))


def take_along_in_library(arr, pos, i, axis):
    """``take_along_axis`` of a traced ``arr`` (``pos``: its positions) at positions ``i`` of
    a CuPy-like library (an argsort there): the flat positions computed there."""
    implements(i, np.take_along_axis, "wnp.take_along_axis")
    return take_dynamic(reshape(arr, (-1,)), np.take_along_axis(_asarray(pos, like=i), i, axis))


def take_ordered(a, pos, perm, axis):
    """``a`` (``pos``: its positions) in the order ``perm`` along ``axis``, by flat positions
    computed from a traced ``perm`` (one per example) or one of a CuPy-like library."""
    k = axis % pos.ndim
    first = _asarray(np.take(pos, [0], axis=k), like=perm)
    return take_dynamic(reshape(a, (-1,)), first + perm * math.prod(pos.shape[k + 1:]))


def take_flat(x, i, axis):
    """``np.take(x, i, axis)``; a foreign ``i`` of several axes taken flat, then shaped (Dask
    indexes by one-dimensional index arrays only)."""
    if not is_foreign(i) or i.ndim <= 1:
        return np.take(x, i, axis=axis)
    s = x.shape
    return np.take(x, i.reshape(-1), axis=axis).reshape(s[:axis] + i.shape + s[axis + 1:])


@primitive(nargs=2)
def put_dynamic(g, i, n, lead=0):
    """Zeros of ``g.shape[:lead] + (n,) + rest`` with ``g``'s rows added at positions ``i``
    (repeats add up): ``take_dynamic``'s transpose."""
    g, i = same_library(g, i)
    if is_foreign(g):
        return put_in_library(g, i, n, lead)
    g, i = np.asarray(g), np.asarray(i)
    out = np.zeros(g.shape[:lead] + (n,) + g.shape[lead + i.ndim:], dtype=g.dtype)
    np.add.at(out, (slice(None),) * lead + (i,), g)
    return out


def same_library(a, b):
    """``a`` and ``b`` in one library: NumPy data moved into the other's (CuPy refuses a mix)."""
    return _asarray(a, like=b), _asarray(b, like=a)


def put_in_library(g, i, n, lead):
    """``put_dynamic`` in ``g``'s library (CuPy, Dask), which may have no ``np.add.at``: a
    ``bincount`` of every entry's flat position, weighted by the entry."""
    i = i % n  # NumPy's negative positions, for bincount
    front, k = g.shape[:lead], math.prod(i.shape)
    rest = g.shape[lead + i.ndim:]
    nl, nr = math.prod(front), math.prod(rest)
    pos = (_asarray(np.arange(nl).reshape(nl, 1, 1) * n, like=i) + i.reshape(1, k, 1)) * nr \
        + _asarray(np.arange(nr).reshape(1, 1, nr), like=i)
    pos, w, size = pos.reshape(-1), g.reshape(-1), nl * n * nr
    out = add_at_flat(pos, w, size)
    return out.astype(g.dtype, copy=False).reshape(front + (n,) + rest)


@take_dynamic.frule(symbolic_zeros=True)
def _take_jvp(primals, tangents, lead=0):
    (x, i), (dx, _) = primals, tangents
    ans = take_dynamic(x, i, lead)
    if dx is None:
        return ans, None
    return ans, take_dynamic(dx, i, lead)


@take_dynamic.rrule
def _take_vjp(x, i, lead=0):
    ans = take_dynamic(x, i, lead)
    n = shape_of(x)[lead]

    def pullback(g):
        return put_dynamic(g, i, n, lead), None
    return ans, pullback


@put_dynamic.frule(symbolic_zeros=True)
def _put_jvp(primals, tangents, n, lead=0):
    (g, i), (dg, _) = primals, tangents
    ans = put_dynamic(g, i, n, lead)
    if dg is None:
        return ans, None
    return ans, put_dynamic(dg, i, n, lead)


@put_dynamic.rrule
def _put_vjp(g, i, n, lead=0):
    ans = put_dynamic(g, i, n, lead)

    def pullback(h):
        return take_dynamic(h, i, lead), None
    return ans, pullback


# -- batching (wg.vmap): the batch axis leads every batched argument and the result --------------
def _moveaxis(x, src, dst):
    if src == dst:
        return x
    order = [a for a in range(ndim_of(x)) if a != src]
    order.insert(dst, src)
    return transpose(x, tuple(order))


def _offsets(i, n):
    """Example ``b``'s positions shifted into the ``b``-th block of ``n`` rows."""
    size = shape_of(i)[0]
    return i % n + n * np.arange(size).reshape((size,) + (1,) * (ndim_of(i) - 1))


@take_dynamic.batching
def _take_batch(args, batched, lead=0):
    (x, i), (bx, bi) = args, batched
    if not bi:  # the same positions for every example: the batch is one more leading axis
        return take_dynamic(x, i, lead + 1)
    if not bx:
        return _moveaxis(take_dynamic(x, i, lead), lead, 0)
    s = shape_of(x)  # (B,) + lead axes + (n,) + rest: the examples' rows side by side, then taken
    n = s[1 + lead]
    flat = reshape(_moveaxis(x, 0, lead), s[1:1 + lead] + (s[0] * n,) + s[2 + lead:])
    return _moveaxis(take_dynamic(flat, _offsets(i, n), lead), lead, 0)


@put_dynamic.batching
def _put_batch(args, batched, n, lead=0):
    (g, i), (bg, bi) = args, batched
    if not bi:
        return put_dynamic(g, i, n, lead + 1)
    size = shape_of(i)[0]
    if not bg:
        g = broadcast_to(g, (size,) + shape_of(g))
    s = shape_of(g)  # (B,) + lead axes + index shape + rest
    rest = s[lead + ndim_of(i):]
    r = put_dynamic(_moveaxis(g, 0, lead), _offsets(i, n), size * n, lead)
    return _moveaxis(reshape(r, s[1:1 + lead] + (size, n) + rest), lead, 0)
