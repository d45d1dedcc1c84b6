"""Helpers for the bookkeeping every engine needs: zeros, summing back, batch axes.

Written with primitives, so they are differentiable again.
"""
import numpy as np

from ..core import ndim_of, primitive, shape_of
from . import patterns


def dtype_of(x):
    if hasattr(x, "dtype"):
        return x.dtype
    return np.result_type(x)


def zeros_like_value(x):
    """A zero with ``x``'s shape and dtype (a plain value even if ``x`` is traced)."""
    v = x
    while hasattr(v, "_trace"):  # a tracer: look at the plain value underneath
        v = v.value
    if isinstance(v, float):
        return 0.0
    return np.zeros(shape_of(x), dtype=dtype_of(x))


_SCALARS = (float, np.float64, np.float32)


def broadcast_view(x, shape):
    """``np.broadcast_to(x, shape)`` on plain values, read-only as NumPy's.

    np.broadcast_to's checks cost 2 µs; a zero-stride view of a contiguous array
    takes 0.2 µs, and the engines broadcast cotangents and tangents all the time.
    """
    if type(x) in _SCALARS:
        x = np.asarray(x)
    if type(x) is np.ndarray and type(shape) is tuple and x.flags.c_contiguous \
            and x.dtype.kind in "fciub":
        k = len(shape) - x.ndim
        if k >= 0:
            strides = [0] * k
            for d, n, st in zip(x.shape, shape[k:], x.strides):
                if d == n:
                    strides.append(st)
                elif d == 1:
                    strides.append(0)
                else:
                    break
            else:
                view = np.ndarray(shape, x.dtype, x, 0, strides)
                view.flags.writeable = False
                return view
    return np.broadcast_to(x, shape)


def sum_to(g, nb, xs):
    """Sum ``g`` (``nb`` leading batch axes) down to batch + shape ``xs``."""
    gs = shape_of(g)
    rest = gs[nb:]
    lead = len(rest) - len(xs)
    axes = tuple(range(nb, nb + lead))
    for i, d in enumerate(xs):
        if d == 1 and rest[lead + i] != 1:
            axes += (nb + lead + i,)
    want = gs[:nb] + tuple(xs)
    if type(g) is np.ndarray:  # nothing to record: NumPy's own sum (what sum_ runs), directly
        if axes:
            g = g.sum(axis=axes)
        return g if g.shape == want else g.reshape(want)
    from .shape import reshape, sum_
    if axes:
        g = sum_(g, axis=axes)
    if shape_of(g) != want:
        g = reshape(g, want)
    return g


def insert_axes(t, nb, k):
    """Insert ``k`` unit axes after the ``nb`` batch axes of ``t``."""
    from .shape import reshape
    s = shape_of(t)
    return reshape(t, s[:nb] + (1,) * k + s[nb:])


def batch_ndim(t, x):
    """How many leading batch axes the tangent/cotangent ``t`` of ``x`` carries."""
    return ndim_of(t) - ndim_of(x)


def _as_float_impl(x):
    return float(x)


as_float = primitive(_as_float_impl, name="as_float")  # a 0-d value as a Python float
as_float.sparsity = patterns.Elementwise(hessian="linear")


@as_float.frule(symbolic_zeros=True)
def as_float_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return as_float(x), dx


@as_float.rrule
def as_float_vjp(x):
    return as_float(x), lambda g: (g,)
