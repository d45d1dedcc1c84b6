"""Grids: meshgrid, linspace, logspace, geomspace, differentiable in their ends (and base).

NumPy's operations in NumPy's order and dtype, so the values are NumPy's to the bit.  Each
public function returns exactly what NumPy returns when no argument is traced.
"""
import operator

import numpy as np

from ..arrays import asarray as _asarray, is_foreign, underneath
from ..core import Tracer, ndim_of, shape_of
from .arithmetic import power
from .conversion import _dtype, _plain, _traced, astype
from .creation import asarray
from .elementwise import floor, log10
from .indexing import index_update
from .nondiff import concrete, recorded
from .reshaping import expand_dims, moveaxis, ravel
from .shape import broadcast_to, reshape

__all__ = ["meshgrid", "linspace", "logspace", "geomspace"]


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if not _traced(*xi):
        return np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing)
    nd = len(xi)
    out = []
    shapes = [np.size(x) for x in xi]  # a tracer's own size (wg.vmap)
    if indexing == "xy" and nd > 1:
        shapes[0], shapes[1] = shapes[1], shapes[0]
    for i, x in enumerate(xi):
        s = [1] * nd
        pos = i
        if indexing == "xy" and nd > 1 and i < 2:
            pos = 1 - i
        s[pos] = -1
        x = reshape(ravel(x), tuple(s)) if isinstance(x, Tracer) else np.reshape(x, s)
        if not sparse:
            x = broadcast_to(x, tuple(shapes)) if isinstance(x, Tracer) \
                else np.broadcast_to(x, shapes).copy()
        out.append(x)
    return tuple(out)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``np.linspace``, NumPy's operations in NumPy's order and dtype (float32 ends give
    float32), differentiable in ``start`` and ``stop``."""
    if not _traced(start, stop):
        return np.linspace(start, stop, num, endpoint, retstep, dtype, axis)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    # Python numbers stay weak, as NumPy's array converter keeps them beside arrays
    start, stop = (a if type(a) in (int, float) else _array(a) for a in (start, stop))
    dt = np.result_type(*(a if type(a) in (int, float) else _dtype(a) for a in (start, stop)),
                        1.0)  # at least floating
    integer_dtype = dtype is not None and np.issubdtype(dtype, np.integer)
    delta = astype(stop - start, dt)
    y = _asarray(np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * ndim_of(delta)),
                 like=delta)  # in a CuPy delta's library (CuPy refuses a NumPy operand)
    if div > 0:
        step = delta / div
        # NumPy's route for denormal steps; not asked of a CuPy or Dask step (a host
        # copy, a compute), which takes the ordinary route
        if not is_foreign(_plain(step)) and concrete(lambda v: bool(np.any(v == 0)), step):
            y = (y / div) * delta
        else:
            y = y * step
    else:
        step = np.nan
        y = y * delta
    y = y + start
    if endpoint and num > 1:
        y = index_update(y, (-1, Ellipsis), stop)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if integer_dtype:
        y = floor(y)
    if dtype is not None:
        y = astype(y, dtype)
    return (y, step) if retstep else y


def _array(a):
    """``a`` as an array: traced (or a list holding traced values) as wnp.asarray makes it; a
    CuPy or Dask value as it is (np.asarray would copy it to the host, or compute it)."""
    return asarray(a) if _traced(a) else _asarray(a)


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``np.logspace``: ``base ** linspace(start, stop)``, differentiable in all three."""
    if not _traced(start, stop, base):
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    if not isinstance(base, (float, int)) and np.ndim(_plain(base)):
        nd = len(np.broadcast_shapes(*(np.shape(a) for a in (start, stop, base))))
        start, stop, base = (reshape(a, (1,) * (nd - ndim_of(a)) + shape_of(a))
                             for a in (_array(start), _array(stop), _array(base)))
        base = expand_dims(base, axis)
    y = power(base, linspace(start, stop, num=num, endpoint=endpoint, axis=axis))
    return y if dtype is None else astype(y, dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``np.geomspace`` for real ends: NumPy's logspace between the logarithms, with the
    ends put back exactly, so their derivatives are exactly 1."""
    if not _traced(start, stop):
        return np.geomspace(start, stop, num, endpoint, dtype, axis)
    start, stop = _array(start), _array(stop)
    start, stop = _asarray(start, like=stop), _asarray(stop, like=start)  # (CuPy: no mix)
    if not is_foreign(underneath(start)) and not is_foreign(underneath(stop)) and \
            concrete(lambda a, b: bool(np.any(a == 0) or np.any(b == 0)), start, stop):
        raise ValueError("Geometric sequence cannot include zero")  # (CuPy, Dask: not read)
    dt = np.result_type(_dtype(start), _dtype(stop), float(num),
                        np.zeros((), dtype))
    if dt.kind == "c":
        raise NotImplementedError("wnp.geomspace of traced complex values: take the "
                                  "modulus and the angle apart")
    dtype = dt if dtype is None else np.dtype(dtype)
    start, stop = astype(start, dt), astype(stop, dt)
    out_sign = recorded(np.sign, start)
    start, stop = start / out_sign, stop / out_sign
    result = logspace(log10(start), log10(stop), num=num, endpoint=endpoint, base=10.0,
                      dtype=dt)
    if num > 0:
        result = index_update(result, (0, Ellipsis), start)
        if num > 1 and endpoint:
            result = index_update(result, (-1, Ellipsis), stop)
    result = out_sign * result
    if axis != 0:
        result = moveaxis(result, 0, axis)
    return astype(result, dtype)
