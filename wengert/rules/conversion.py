"""Conversions every rule module needs: ``astype`` (float -> float keeps the derivative, the
cotangent is cast back) and ``copy``, both primitives.

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..arrays import asarray as _asarray, is_foreign, real_for_real as _real_for_real
from ..core import lift, plain as _plain, Tracer, primitive
from . import patterns

__all__ = ["astype", "copy"]



def _traced(*xs):
    for x in xs:
        if isinstance(x, Tracer):
            return True
        if isinstance(x, (list, tuple)) and _traced(*x):
            return True
    return False


def _dtype(x):
    v = _plain(x)
    return v.dtype if hasattr(v, "dtype") else np.result_type(v)


# element by element; a cast rounds (piecewise linear), a copy is linear
@primitive(name="astype", nargs=1, linear="piecewise", sparsity=patterns.ELEMENTWISE,
           batch="elementwise")
def _astype(x, dtype):
    return _asarray(x).astype(dtype)  # a CuPy or Dask array stays one


def _float_kind(dt):
    return np.issubdtype(np.dtype(dt), np.inexact)


@_astype.frule(symbolic_zeros=True)
def _astype_jvp(primals, tangents, dtype):
    (x,), (dx,) = primals, tangents
    ans = _astype(x, dtype)
    if dx is None or not _float_kind(dtype):
        return ans, None
    return ans, _astype(dx, dtype)


@_astype.rrule
def _astype_vjp(x, dtype):
    ans = _astype(x, dtype)
    xdt = _dtype(x)
    ok = _float_kind(dtype)
    # real -> complex: the real argument's cotangent is the real part (no ComplexWarning)
    return ans, lambda g: (_astype(_real_for_real(g, x), xdt) if ok else None,)


@primitive(name="copy", linear=True, sparsity=patterns.ELEMENTWISE, batch="elementwise",
           identity_when=True)  # graph simplification may drop it
def _copy(x):
    return x.copy() if is_foreign(x) else np.array(x, copy=True)  # np.array would convert


@_copy.frule(symbolic_zeros=True)
def _copy_jvp(primals, tangents):
    return _copy(primals[0]), tangents[0]


@_copy.rrule
def _copy_vjp(x):
    return _copy(x), lambda g: (g,)



def astype(x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    """``x.astype(dtype)``: float -> float keeps the derivative (the cotangent is cast back)."""
    if not isinstance(x, Tracer):  # NumPy's scalars stay scalars, as np.astype keeps them
        a = x if isinstance(x, (np.ndarray, np.generic)) else _asarray(x)
        return a.astype(dtype, order=order, casting=casting, subok=subok, copy=copy)
    if np.dtype(dtype) == _dtype(x) and not copy:
        return x
    return _astype(x, np.dtype(dtype))


def copy(a, order="K", subok=False):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.copy(a, order=order, subok=subok)
    return _copy(a)

