"""Array bookkeeping every engine and rule shares: shapes, dtypes, zeros, broadcasting.

These helpers take any array: a plain NumPy one takes NumPy's own (fast) route, and a
traced value takes the same calls through NumPy's protocols (its methods ``.sum``,
``.reshape``, ``.real``, and NEP 18 for ``np.broadcast_to``), which lead to wengert's
primitives, so what they compute is recorded and differentiable again. That is why this
module names no primitive and imports nothing from wengert: it is the lowest floor.
"""
import numpy as np

__all__ = ["shape_of", "ndim_of", "dtype_of", "zeros_like_value", "broadcast_view", "sum_to",
           "insert_axes", "unbroadcast", "real_for_real", "fill_tangent", "expand_tangents"]


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


# -- broadcasting: what the core does for every primitive declared ``broadcasting=True`` ---
def unbroadcast(g, x, ans):
    """Sum a cotangent of ``ans`` (with leading batch axes) back to ``x``'s shape."""
    tx = type(x)
    if tx is type(g) and (tx is float or (tx is np.ndarray and x.shape == g.shape
                                          and (g.dtype.kind != "c" or x.dtype.kind == "c"))):
        return g  # the common cases, quickly
    gv = g
    while hasattr(gv, "_trace"):  # traced (forward over reverse): its dtype, underneath
        gv = gv.value
    xs = shape_of(x)  # a tracer's own shape (under wg.vmap the values underneath are batched)
    if shape_of(g) == xs and (type(gv) is float or type(gv) is not complex
                               and getattr(gv, "dtype", _FLOAT).kind != "c"):
        return g  # of the right shape, and real
    g = real_for_real(g, x)
    gs = shape_of(g)
    nb = len(gs) - ndim_of(ans)
    if nb < 0:  # a cotangent that is still a scalar broadcast
        nb = 0
    if gs[nb:] == xs:
        return g
    return sum_to(g, nb, xs)


_FLOAT = np.dtype(float)


def real_for_real(g, x):
    """A real argument's cotangent is real (``x * 1j``: JAX's complex convention)."""
    if type(g) is complex:
        return g if isinstance(x, complex) or getattr(x, "dtype", _FLOAT).kind == "c" \
            else g.real
    dg = getattr(g, "dtype", None)
    if dg is None or dg.kind != "c":
        return g
    if isinstance(x, complex) or getattr(x, "dtype", _FLOAT).kind == "c":
        return g
    return g.real  # a traced value's records the real primitive


def fill_tangent(t, ans):
    """Broadcast a tangent that only some arguments fed (e.g. ``x + c``) to ``ans``'s shape."""
    if t is None:
        return t
    a_s, ts = shape_of(ans), shape_of(t)
    if ts == a_s:
        return t  # the common case, quickly
    nb = max(0, len(ts) - len(a_s))
    if ts[nb:] == a_s:
        return t
    return broadcast_view(t, ts[:nb] + a_s)  # a traced one's records broadcast_to


def expand_tangents(primals, tangents):
    """Give a batched tangent of a lower-rank argument its broadcast axes."""
    for p, t in zip(primals, tangents):
        if t is not None and ndim_of(t) > ndim_of(p):
            break
    else:
        return tangents  # nothing batched: the common case, quickly
    nd = 0
    for p in primals:
        if type(p) is not float:
            k = ndim_of(p)
            if k > nd:
                nd = k
    if nd == 0:
        return tangents
    out = None
    for i, (p, t) in enumerate(zip(primals, tangents)):
        if t is None:
            continue
        k = ndim_of(p)
        tn = ndim_of(t)
        if k < nd and tn > k:  # batched and of lower rank than the result
            if out is None:
                out = list(tangents)
            out[i] = insert_axes(t, tn - k, nd - k)
    return tangents if out is None else out
