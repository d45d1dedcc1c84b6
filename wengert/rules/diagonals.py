"""Diagonals and triangles: diagonal (a read-only view, as NumPy's), diag, diagflat, tril,
triu, trace.

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..core import Tracer, lift, shape_of
from .elementwise import where
from .indexing import gather, positions, scatter_add
from .reshaping import _view, ravel
from .shape import sum_

__all__ = ["diagonal", "diag", "diagflat", "tril", "triu", "trace"]


def diagonal(a, offset=0, axis1=0, axis2=1):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.diagonal(a, offset, axis1, axis2)
    pos = positions(a)
    return _view(gather(a, np.diagonal(pos, offset, axis1, axis2)), a)


def diag(v, k=0):
    v = lift(v)
    if not isinstance(v, Tracer):
        return np.diag(v, k)
    s = shape_of(v)
    if len(s) == 2:
        return diagonal(v, k)
    if len(s) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = s[0] + abs(k)
    pos = np.diag(np.arange(1, s[0] + 1), k).ravel()
    flat = np.flatnonzero(pos)[np.argsort(pos[pos > 0], kind="stable")]
    return scatter_add(v, flat.astype(np.intp), (n, n))


def diagflat(v, k=0):
    v = lift(v)
    if not isinstance(v, Tracer):
        return np.diagflat(v, k)
    return diag(ravel(v), k)


def _tri_mask(a, k, lower):
    s = shape_of(a)
    m = np.tri(s[-2], s[-1], k, dtype=bool) if lower else ~np.tri(s[-2], s[-1], k - 1, dtype=bool)
    return m


def tril(m, k=0):
    m = lift(m)
    if not isinstance(m, Tracer):
        return np.tril(m, k)
    return where(_tri_mask(m, k, True), m, 0.0)


def triu(m, k=0):
    m = lift(m)
    if not isinstance(m, Tracer):
        return np.triu(m, k)
    return where(_tri_mask(m, k, False), m, 0.0)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.trace(a, offset, axis1, axis2, dtype, out)
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1)
