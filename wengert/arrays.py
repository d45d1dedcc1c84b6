"""Array bookkeeping every engine and rule shares: shapes, dtypes, zeros, summing back.

These helpers take any array: a plain NumPy one takes NumPy's own (fast) route, and a
traced value takes the same calls through NumPy's protocols (its methods ``.sum``,
``.reshape``, ``.real``, and NEP 18 for ``np.broadcast_to``), which lead to wengert's
primitives, so what they compute is recorded and differentiable again. That is why this
module names no primitive and imports nothing from wengert: it is the lowest floor.
"""
import numpy as np

__all__ = ["shape_of", "ndim_of", "dtype_of", "zeros_like_value", "broadcast_view", "sum_to",
           "insert_axes"]


def shape_of(x):
    if type(x) is float:
        return ()
    return getattr(x, "shape", ())  # one lookup: a tracer's shape is a property


def ndim_of(x):
    if type(x) is float:
        return 0
    return getattr(x, "ndim", 0)


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
    """``np.broadcast_to(x, shape)``, read-only as NumPy's; a traced ``x`` is dispatched.

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
    if axes:
        g = g.sum(axis=axes)  # NumPy's method; a traced value's records the sum primitive
    return g if shape_of(g) == want else g.reshape(want)


def insert_axes(t, nb, k):
    """Insert ``k`` unit axes after the ``nb`` batch axes of ``t``."""
    s = shape_of(t)
    return t.reshape(s[:nb] + (1,) * k + s[nb:])
