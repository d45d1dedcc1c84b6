"""Shape and joining: concatenate, astype and copy are primitives; the rest compose them
with reshape / transpose / broadcast_to (rules/shape.py) and indexing (rules/indexing.py).

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..core import Tracer, _real_for_real, ndim_of, primitive, shape_of
from .indexing import (_TRACED_INDEX, gather, getitem_basic, index_writer,
                       positions, register_view, reshape_writer, scatter_basic,
                       transpose_writer)
from .nondiff import concrete, recorded
from .shape import broadcast_to, reshape, transpose

__all__ = ["concatenate", "astype", "copy", "ravel", "flatten", "swapaxes", "moveaxis",
           "expand_dims", "squeeze", "stack", "hstack", "vstack", "dstack", "column_stack",
           "row_stack", "split", "array_split", "hsplit", "vsplit", "dsplit", "tile", "repeat",
           "flip", "fliplr", "flipud", "roll", "rot90", "pad", "diag", "diagflat", "diagonal",
           "tril", "triu", "trace", "atleast_1d", "atleast_2d", "atleast_3d", "array", "asarray",
           "asanyarray", "ascontiguousarray", "zeros_like", "ones_like", "full_like",
           "empty_like", "append", "broadcast_arrays",
           "zeros", "ones", "full", "empty", "diff", "ediff1d", "gradient", "interp", "rollaxis",
           "meshgrid", "linspace", "logspace", "geomspace", "block", "unstack", "choose", "insert",
           "delete", "resize", "unwrap", "trim_zeros", "asarray_chkfinite", "asfortranarray",
           "require"]


def _plain(x):
    while isinstance(x, Tracer):
        x = x.value
    return x


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


def _axis(axis, nd):
    if not -nd <= axis < nd:
        raise np.exceptions.AxisError(axis, nd)
    return axis % nd


# -- primitives ------------------------------------------------------------------------------------
@primitive(name="concatenate")
def _concatenate(*arrays, axis=0):
    return np.concatenate(arrays, axis=axis)


@_concatenate.frule(symbolic_zeros=True)
def _concatenate_jvp(primals, tangents, axis=0):
    ans = _concatenate(*primals, axis=axis)
    lead = None
    for x, t in zip(primals, tangents):
        if t is not None:
            lead = shape_of(t)[:ndim_of(t) - ndim_of(x)]
            break
    if lead is None:
        return ans, None
    ts = [np.zeros(lead + shape_of(x), dtype=_dtype(x)) if t is None else t
          for x, t in zip(primals, tangents)]
    return ans, _concatenate(*ts, axis=axis + len(lead))


@_concatenate.rrule(needs=True)
def _concatenate_vjp(*arrays, needs, axis=0):
    ans = _concatenate(*arrays, axis=axis)
    nd = ndim_of(ans)
    bounds = np.cumsum([0] + [shape_of(a)[axis] for a in arrays])

    def pullback(g):
        nb = ndim_of(g) - nd
        pre = (slice(None),) * (nb + axis)
        return tuple(getitem_basic(g, pre + (slice(int(lo), int(hi)),)) if need else None
                     for need, lo, hi in zip(needs, bounds[:-1], bounds[1:]))
    return ans, pullback


@primitive(name="astype", nargs=1)
def _astype(x, dtype):
    return np.asarray(x).astype(dtype)


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


@primitive(name="copy")
def _copy(x):
    return np.array(x, copy=True)


@_copy.frule(symbolic_zeros=True)
def _copy_jvp(primals, tangents):
    return _copy(primals[0]), tangents[0]


@_copy.rrule
def _copy_vjp(x):
    return _copy(x), lambda g: (g,)


_copy.same_shape_identity = True  # graph simplification may drop it


# -- creation and conversion -------------------------------------------------------------------------
def astype(x, dtype, order="K", casting="unsafe", subok=True, copy=True):
    """``x.astype(dtype)``: float -> float keeps the derivative (the cotangent is cast back)."""
    if not isinstance(x, Tracer):
        return np.asarray(x).astype(dtype, order=order, casting=casting, subok=subok, copy=copy)
    if np.dtype(dtype) == _dtype(x) and not copy:
        return x
    return _astype(x, np.dtype(dtype))


def copy(a, order="K", subok=False):
    if not isinstance(a, Tracer):
        return np.copy(a, order=order, subok=subok)
    return _copy(a)


def _stack_nested(obj, dtype):
    if isinstance(obj, (list, tuple)):
        if not _traced(*obj):
            return np.array(obj, dtype=dtype)
        return stack([_stack_nested(o, dtype) for o in obj])
    if isinstance(obj, Tracer):
        return obj if dtype is None else astype(obj, dtype, copy=False)
    return np.asarray(obj, dtype=dtype)


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """``np.array``; a (nested) list holding traced values is stacked."""
    if like is not None and isinstance(like, Tracer) and not _traced(object):
        return _like_traced(np.array(object, dtype=dtype, copy=copy, order=order,
                                     ndmin=ndmin), like)
    if not _traced(object):
        return np.array(object, dtype=dtype, copy=copy, order=order, subok=subok, ndmin=ndmin)
    if isinstance(object, Tracer):
        out = _copy(object) if copy else object
        if dtype is not None and np.dtype(dtype) != _dtype(out):
            out = _astype(out, np.dtype(dtype))
    else:
        out = _stack_nested(object, dtype)
    if ndmin > ndim_of(out):
        out = reshape(out, (1,) * (ndmin - ndim_of(out)) + shape_of(out))
    return out


def asarray(a, dtype=None, order=None, *, like=None, **kwargs):
    if not _traced(a):
        if like is not None and isinstance(like, Tracer):
            return _like_traced(np.asarray(a, dtype=dtype), like)
        return np.asarray(a, dtype=dtype, order=order, **kwargs)
    if isinstance(a, Tracer):
        if dtype is not None and np.dtype(dtype) != _dtype(a):
            return _astype(a, np.dtype(dtype))
        return a
    return _stack_nested(a, dtype)


asanyarray = asarray


def ascontiguousarray(a, dtype=None, *, like=None):
    if not _traced(a):
        return np.ascontiguousarray(a, dtype=dtype)
    return asarray(a, dtype=dtype)


def asfortranarray(a, dtype=None, *, like=None):
    """A traced array has no memory layout of its own: ``asarray``."""
    if not _traced(a):
        return np.asfortranarray(a, dtype=dtype)
    return asarray(a, dtype=dtype)


def require(a, dtype=None, requirements=None, *, like=None):
    """Layout, alignment and ownership requirements are NumPy's business: a traced array
    meets them all; the dtype is honoured."""
    if not _traced(a):
        return np.require(a, dtype, requirements)
    if requirements:
        np.require(np.zeros(0), None, requirements)  # NumPy's error for an unknown one
    return asarray(a, dtype=dtype)


def asarray_chkfinite(a, dtype=None, order=None):
    if not _traced(a):
        return np.asarray_chkfinite(a, dtype, order)
    a = asarray(a, dtype=dtype)
    if _dtype(a).char in np.typecodes["AllFloat"] and not concrete(_all_finite, a):
        raise ValueError("array must not contain infs or NaNs")
    return a


def _all_finite(v):
    return bool(np.isfinite(v).all())


def _like_traced(value, like):
    """A plain ``value`` as a traced array of ``like``'s trace with zero derivative.

    ``a = wnp.zeros(n, like=x)`` makes an array that can take ``a[i] = traced``.
    """
    return _constant(like, value=np.asarray(value))


@primitive(name="constant_like", nargs=1)
def _constant(like, value):
    return value


@_constant.frule(symbolic_zeros=True)
def _constant_jvp(primals, tangents, value):
    return value, None


@_constant.rrule
def _constant_vjp(like, value):
    return value, lambda g: (None,)


def _creator(np_fn):
    def fn(*args, like=None, **kwargs):
        if like is not None and isinstance(like, Tracer):
            return _like_traced(np_fn(*args, **kwargs), like)
        return np_fn(*args, like=like, **kwargs) if like is not None else np_fn(*args, **kwargs)
    fn.__name__ = np_fn.__name__
    fn.__doc__ = (f"``np.{np_fn.__name__}``; with ``like=`` a traced array, the result is a "
                  "traced constant that accepts ``a[i] = v`` with traced ``v``.")
    return fn


zeros = _creator(np.zeros)
ones = _creator(np.ones)
empty = _creator(np.zeros)  # zeros: a traced 'empty' never exposes garbage
empty.__name__ = "empty"
_full = _creator(np.full)


def full(shape, fill_value, dtype=None, order="C", **kw):
    """``np.full``; a traced ``fill_value`` gives a traced array (its derivative: the sum)."""
    if _traced(fill_value):
        fill_value = asarray(fill_value)
        return copy(broadcast_to(astype(fill_value, dtype or _dtype(fill_value), copy=False),
                                 tuple(np.atleast_1d(shape))))
    return _full(shape, fill_value, dtype=dtype, order=order, **kw)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """A plain array of zeros (no derivative), shaped like ``a`` (traced or not)."""
    return np.zeros_like(_plain(a), dtype=dtype, order=order, subok=subok, shape=shape, **kw)


def ones_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    return np.ones_like(_plain(a), dtype=dtype, order=order, subok=subok, shape=shape, **kw)


def empty_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    return np.empty_like(_plain(a), dtype=dtype, order=order, subok=subok, shape=shape, **kw)


empty_like._nondiff = True  # uninitialised values depend on nothing: a plain array


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    if _traced(fill_value):
        s = shape_of(a) if shape is None else tuple(np.atleast_1d(shape))
        return copy(broadcast_to(astype(asarray(fill_value), dtype or _dtype(a), copy=False),
                                 s))
    return np.full_like(_plain(a), fill_value, dtype=dtype, order=order, subok=subok,
                        shape=shape, **kw)




# -- reshaping -------------------------------------------------------------------------------------------
def _view(ans, base, writer=None):
    """``ans`` shares memory with ``base`` as in NumPy; ``writer`` writes it back
    (``None``: read-only)."""
    register_view(ans, base, writer)
    return ans


def ravel(a, order="C"):
    if not isinstance(a, Tracer):
        return np.ravel(a, order=order)
    if order not in ("C", "K", "A"):
        return reshape(transpose(a), (-1,))
    return _view(reshape(a, (-1,)), a, reshape_writer)


def flatten(a, order="C"):
    if not isinstance(a, Tracer):
        return np.asarray(a).flatten(order=order)
    return _copy(ravel(a, order))


def swapaxes(a, axis1, axis2):
    if not isinstance(a, Tracer):
        return np.swapaxes(a, axis1, axis2)
    nd = ndim_of(a)
    perm = list(range(nd))
    i, j = _axis(axis1, nd), _axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return _view(transpose(a, tuple(perm)), a, transpose_writer(perm))


def moveaxis(a, source, destination):
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
    if not isinstance(a, Tracer):
        return np.expand_dims(a, axis)
    return _view(reshape(a, np.expand_dims(np.empty(shape_of(a), np.int8), axis).shape), a,
                 reshape_writer)


def squeeze(a, axis=None):
    if not isinstance(a, Tracer):
        return np.squeeze(a, axis=axis)
    return _view(reshape(a, np.squeeze(np.empty(shape_of(a), np.int8), axis=axis).shape), a,
                 reshape_writer)


def atleast_1d(*arys):
    if not _traced(*arys):
        return np.atleast_1d(*arys)
    res = [a if ndim_of(a) >= 1 else reshape(a, (1,)) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_2d(*arys):
    if not _traced(*arys):
        return np.atleast_2d(*arys)
    res = []
    for a in arys:
        s = shape_of(a)
        res.append(a if len(s) >= 2 else reshape(a, (1,) * (2 - len(s)) + s))
    return res[0] if len(res) == 1 else tuple(res)


def atleast_3d(*arys):
    if not _traced(*arys):
        return np.atleast_3d(*arys)
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


# -- joining ----------------------------------------------------------------------------------------------
def concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    if not _traced(*arrays):
        return np.concatenate(arrays, axis=axis, out=out, dtype=dtype, casting=casting)
    if out is not None:
        raise NotImplementedError("wnp.concatenate with out= is not supported on traced values")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    arrays = [a if isinstance(a, Tracer) else np.asarray(a) for a in arrays]
    nd = ndim_of(arrays[0])
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    out = _concatenate(*arrays, axis=_axis(axis, nd))
    if dtype is not None:
        out = astype(out, dtype, copy=False)
    return out


def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    arrays = list(arrays)
    if not _traced(*arrays):
        return np.stack(arrays, axis=axis, out=out, dtype=dtype, casting=casting)
    if not arrays:
        raise ValueError("need at least one array to stack")
    shapes = {shape_of(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError("all input arrays must have the same shape")
    s = shapes.pop()
    ax = _axis(axis, len(s) + 1)
    ns = s[:ax] + (1,) + s[ax:]
    return concatenate([reshape(a, ns) if isinstance(a, Tracer) else np.reshape(a, ns)
                        for a in arrays], axis=ax, dtype=dtype)


def hstack(tup, *, dtype=None, casting="same_kind"):
    tup = list(tup)
    if not _traced(*tup):
        return np.hstack(tup, dtype=dtype, casting=casting)
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, axis=0 if ndim_of(arrs[0]) == 1 else 1, dtype=dtype)


def vstack(tup, *, dtype=None, casting="same_kind"):
    tup = list(tup)
    if not _traced(*tup):
        return np.vstack(tup, dtype=dtype, casting=casting)
    return concatenate([atleast_2d(a) for a in tup], axis=0, dtype=dtype)


row_stack = vstack


def dstack(tup):
    tup = list(tup)
    if not _traced(*tup):
        return np.dstack(tup)
    return concatenate([atleast_3d(a) for a in tup], axis=2)


def column_stack(tup):
    tup = list(tup)
    if not _traced(*tup):
        return np.column_stack(tup)
    cols = []
    for a in tup:
        if ndim_of(a) < 2:
            a = reshape(a, (-1, 1)) if isinstance(a, Tracer) else np.reshape(a, (-1, 1))
        cols.append(a)
    return concatenate(cols, axis=1)


def append(arr, values, axis=None):
    if not _traced(arr, values):
        return np.append(arr, values, axis=axis)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


def block(arrays):
    """``np.block``: concatenations from the innermost lists outwards. NumPy checks the
    nesting first (on placeholders of the same shapes), so the errors are its own."""
    if not _traced(arrays):
        return np.block(arrays)

    def placeholders(a):
        if isinstance(a, list):
            return [placeholders(b) for b in a]
        if isinstance(a, Tracer):
            return np.zeros(shape_of(a), _dtype(a))
        return a
    np.block(placeholders(arrays))  # NumPy's checks: tuples, empty lists, uneven depths
    depth, a = 0, arrays
    while isinstance(a, list):
        depth, a = depth + 1, a[0]

    def leaves(a):
        return [x for b in a for x in leaves(b)] if isinstance(a, list) else [a]
    nd = max([depth] + [np.ndim(_plain(x)) for x in leaves(arrays)])

    def build(a, level):
        if level == depth:
            return reshape(a, (1,) * (nd - np.ndim(_plain(a))) + np.shape(_plain(a))) \
                if isinstance(a, Tracer) else np.array(a, ndmin=nd)
        return concatenate([build(b, level + 1) for b in a], axis=level - depth)
    return build(arrays, 0)


def unstack(x, /, *, axis=0):
    """``np.unstack``: the slices along ``axis``, as a tuple."""
    if not isinstance(x, Tracer):
        return tuple(np.moveaxis(np.asarray(x), axis, 0))
    x = moveaxis(x, axis, 0)
    return tuple(getitem_basic(x, (i,)) for i in range(shape_of(x)[0]))


def choose(a, choices, out=None, mode="raise"):
    """``np.choose``: NumPy's choice run on positions, then one gather from the stacked
    (broadcast) choices; ``a`` is an index, not differentiated."""
    if not _traced(choices):
        return np.choose(a, choices, out=out, mode=mode)
    _static_index(a, "choose")
    if out is not None:
        raise NotImplementedError("wnp.choose with out= on traced values")
    choices = list(choices)
    shape = np.broadcast_shapes(np.shape(a), *(np.shape(_plain(c)) for c in choices))
    stacked = stack([broadcast_to(c, shape) if isinstance(c, Tracer)
                     else np.broadcast_to(c, shape) for c in choices])
    pos = positions(stacked)
    return gather(stacked, np.choose(np.broadcast_to(a, shape), list(pos), mode=mode))


def _static_index(obj, name):
    if _traced(obj):
        raise TypeError(f"wnp.{name}: {_TRACED_INDEX}")
    return obj


def insert(arr, obj, values, axis=None):
    """``np.insert``: NumPy's own insert run on positions, then one gather from ``arr``
    and ``values`` (cast to ``arr``'s dtype, as NumPy casts them); both are differentiated."""
    if not _traced(arr, values):
        return np.insert(arr, obj, values, axis=axis)
    obj = _static_index(obj, "insert")
    arr = asarray(arr)
    values = astype(asarray(values), _dtype(arr))
    n = int(np.prod(shape_of(arr)))
    into = n + positions(values)  # values' positions after arr's in the joined vector
    where = np.insert(positions(arr), obj, into, axis=axis)
    return gather(concatenate([ravel(arr), ravel(values)]), where)


def delete(arr, obj, axis=None):
    """``np.delete``: a gather of the entries NumPy keeps."""
    if not isinstance(arr, Tracer):
        return np.delete(arr, obj, axis=axis)
    return gather(arr, np.delete(positions(arr), _static_index(obj, "delete"), axis=axis))


def resize(a, new_shape):
    """``np.resize``: the entries repeated in order to fill ``new_shape`` (repeats add up
    their cotangents)."""
    if not isinstance(a, Tracer):
        return np.resize(a, new_shape)
    if np.prod(shape_of(a)) == 0:
        return np.resize(_plain(a), new_shape)  # NumPy's zeros, whatever the input
    return gather(a, np.resize(positions(a), new_shape))


def _trim_bounds(v, trim, axis):
    """NumPy's ``trim_zeros`` slice, as (start, stop) rows over the axes."""
    trim = trim.lower()
    if trim not in {"fb", "bf", "f", "b"}:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    nd = v.ndim
    axes = range(nd) if axis is None else \
        [_axis(int(a), nd) for a in (axis if isinstance(axis, (tuple, list)) else (axis,))]
    nz = np.argwhere(v)
    start, stop = np.zeros(nd, np.intp), np.array(v.shape, np.intp)
    if nz.size == 0:
        stop = start.copy()
    else:
        if "f" in trim:
            start = nz.min(axis=0)
        if "b" in trim:
            stop = nz.max(axis=0) + 1
    keep = [a not in axes for a in range(nd)]
    start[keep], stop[keep] = 0, np.array(v.shape, np.intp)[keep]
    return np.stack([start, stop])


def trim_zeros(filt, trim="fb", axis=None):
    """``np.trim_zeros``: a slice found on the values (the zeros that are cut have no
    derivative to give; an entry that is zero now but is kept is differentiated)."""
    if not isinstance(filt, Tracer):
        return np.trim_zeros(filt, trim) if axis is None else np.trim_zeros(filt, trim, axis)
    if axis is not None and np.ndim(axis) == 1 and len(axis) == 0:
        return filt
    b = concrete(_trim_bounds, filt, trim=trim, axis=axis, name="trim_zeros")
    return filt[tuple(slice(int(s), int(e)) for s, e in zip(b[0], b[1]))]


def _unwrap_correction(p, discont, axis, period):
    """NumPy's ``unwrap`` up to the cumulative correction added to ``p[1:]``."""
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(dd, period)
    if np.issubdtype(dtype, np.integer):
        interval_high, rem = divmod(period, 2)
        boundary_ambiguous = rem == 0
    else:
        interval_high = period / 2
        boundary_ambiguous = True
    interval_low = -interval_high
    ddmod = np.mod(dd - interval_low, period) + interval_low
    if boundary_ambiguous:
        np.copyto(ddmod, interval_high, where=(ddmod == interval_low) & (dd > 0))
    ph_correct = ddmod - dd
    np.copyto(ph_correct, 0, where=abs(dd) < discont)
    return ph_correct.cumsum(axis)


def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """``np.unwrap``: ``p`` plus piecewise-constant multiples of ``period``, so the
    derivative is the identity; the jumps are found again on each call (and in a compiled
    graph)."""
    if not _traced(p, discont, period):
        return np.unwrap(p, discont, axis, period=period)
    if _traced(discont, period):
        raise TypeError("wnp.unwrap: discont and period cannot be traced (the result is "
                        "piecewise constant in them)")
    p = asarray(p)
    ax = _axis(axis, ndim_of(p))
    correction = recorded(_unwrap_correction, p, discont, ax, period, name="unwrap_correction")
    first = (slice(None),) * ax + (slice(None, 1),)
    rest = (slice(None),) * ax + (slice(1, None),)
    head = astype(getitem_basic(p, first), np.result_type(_dtype(p), period))  # NumPy's
    return concatenate([head, getitem_basic(p, rest) + correction], axis=ax)


def broadcast_arrays(*args, subok=False):
    if not _traced(*args):
        return np.broadcast_arrays(*args, subok=subok)
    s = np.broadcast_shapes(*(shape_of(a) for a in args))
    return tuple(broadcast_to(a, s) if shape_of(a) != s else a for a in args)


# -- splitting ---------------------------------------------------------------------------------------------
def _slice_along(a, axis, lo, hi, step=None):
    idx = (slice(None),) * axis + (slice(lo, hi, step),)
    return _view(getitem_basic(a, idx), a, index_writer(idx))


def array_split(ary, indices_or_sections, axis=0):
    if not isinstance(ary, Tracer):
        return np.array_split(ary, indices_or_sections, axis=axis)
    ax = _axis(axis, ndim_of(ary))
    n = shape_of(ary)[ax]
    if np.ndim(indices_or_sections) == 0:
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        bounds = np.cumsum([0] + sizes)
    else:
        bounds = [0] + list(indices_or_sections) + [n]
    return [_slice_along(ary, ax, int(lo), int(hi)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def split(ary, indices_or_sections, axis=0):
    if not isinstance(ary, Tracer):
        return np.split(ary, indices_or_sections, axis=axis)
    if np.ndim(indices_or_sections) == 0:
        n = shape_of(ary)[_axis(axis, ndim_of(ary))]
        if n % int(indices_or_sections):
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    if not isinstance(ary, Tracer):
        return np.hsplit(ary, indices_or_sections)
    return split(ary, indices_or_sections, axis=1 if ndim_of(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    if not isinstance(ary, Tracer):
        return np.vsplit(ary, indices_or_sections)
    return split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    if not isinstance(ary, Tracer):
        return np.dsplit(ary, indices_or_sections)
    return split(ary, indices_or_sections, axis=2)


# -- tiling, repeating, flipping ------------------------------------------------------------------------
def tile(A, reps):
    if not isinstance(A, Tracer):
        return np.tile(A, reps)
    reps = tuple(np.atleast_1d(reps).tolist())
    s = shape_of(A)
    nd = max(len(s), len(reps))
    s = (1,) * (nd - len(s)) + s
    reps = (1,) * (nd - len(reps)) + reps
    inter = tuple(v for pair in zip((1,) * nd, s) for v in pair)
    big = tuple(v for pair in zip(reps, s) for v in pair)
    x = reshape(A, inter)
    x = broadcast_to(x, big)
    return reshape(x, tuple(r * d for r, d in zip(reps, s)))


def repeat(a, repeats, axis=None):
    if not isinstance(a, Tracer):
        return np.repeat(a, repeats, axis=axis)
    if axis is None:
        a = ravel(a)
        axis = 0
    ax = _axis(axis, ndim_of(a))
    s = shape_of(a)
    if np.ndim(repeats) == 0 or np.size(repeats) == 1:
        r = int(np.ravel(repeats)[0]) if np.ndim(repeats) else int(repeats)
        x = reshape(a, s[:ax + 1] + (1,) + s[ax + 1:])
        x = broadcast_to(x, s[:ax + 1] + (r,) + s[ax + 1:])
        return reshape(x, s[:ax] + (s[ax] * r,) + s[ax + 1:])
    pos = positions(a)
    return gather(a, np.repeat(pos, repeats, axis=ax))


def flip(m, axis=None):
    if not isinstance(m, Tracer):
        return np.flip(m, axis=axis)
    nd = ndim_of(m)
    axes = range(nd) if axis is None else [_axis(a, nd) for a in np.atleast_1d(axis)]
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(nd))
    return _view(getitem_basic(m, idx), m, index_writer(idx))


def fliplr(m):
    if not isinstance(m, Tracer):
        return np.fliplr(m)
    if ndim_of(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(m, 1)


def flipud(m):
    if not isinstance(m, Tracer):
        return np.flipud(m)
    if ndim_of(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(m, 0)


def roll(a, shift, axis=None):
    if not isinstance(a, Tracer):
        return np.roll(a, shift, axis=axis)
    pos = positions(a)
    return gather(a, np.roll(pos, shift, axis=axis))


def rot90(m, k=1, axes=(0, 1)):
    if not isinstance(m, Tracer):
        return np.rot90(m, k, axes)
    pos = positions(m)
    return gather(m, np.rot90(pos, k, axes))


def pad(array, pad_width, mode="constant", **kwargs):
    """``np.pad``: ``constant`` (traced or plain fill), ``edge``, ``reflect``, ``symmetric``,
    ``wrap`` are differentiable."""
    if not _traced(array, kwargs.get("constant_values")):
        return np.pad(array, pad_width, mode=mode, **kwargs)
    array = asarray(array)
    s = shape_of(array)
    nd = len(s)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.intp).reshape(-1, 2)
                         if np.ndim(pad_width) else np.asarray(pad_width, dtype=np.intp),
                         (nd, 2))
    if mode == "constant":
        cv = kwargs.pop("constant_values", 0)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for mode 'constant': {list(kwargs)}")
        new_shape = tuple(int(d + lo + hi) for d, (lo, hi) in zip(s, pw))
        idx = tuple(slice(int(lo), int(lo + d)) for d, (lo, _) in zip(s, pw))
        out = scatter_basic(array, new_shape, idx)
        if not (np.ndim(cv) == 0 and not isinstance(cv, Tracer) and cv == 0):
            # as NumPy: axis by axis, each side's value over the whole face, later axes last
            cv = broadcast_to(asarray(cv), (nd, 2))  # plain or traced alike
            from .elementwise import where
            for ax, (lo, hi) in enumerate(pw):
                pos = np.arange(new_shape[ax]).reshape((-1,) + (1,) * (nd - ax - 1))
                for side, mask in ((0, pos < lo), (1, pos >= new_shape[ax] - hi)):
                    if mask.any():
                        out = where(mask, astype(cv[ax, side], _dtype(array), copy=False), out)
        return out
    if mode in ("edge", "reflect", "symmetric", "wrap"):
        pos = positions(array)
        return gather(array, np.pad(pos, pad_width, mode=mode, **kwargs))
    raise NotImplementedError(f"wnp.pad with mode={mode!r} on traced values (supported: "
                              "constant, edge, reflect, symmetric, wrap)")


# -- diagonals and triangles --------------------------------------------------------------------------
def diagonal(a, offset=0, axis1=0, axis2=1):
    if not isinstance(a, Tracer):
        return np.diagonal(a, offset, axis1, axis2)
    pos = positions(a)
    return _view(gather(a, np.diagonal(pos, offset, axis1, axis2)), a)


def diag(v, k=0):
    if not isinstance(v, Tracer):
        return np.diag(v, k)
    s = shape_of(v)
    if len(s) == 2:
        return diagonal(v, k)
    if len(s) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = s[0] + abs(k)
    from .indexing import scatter_add
    pos = np.diag(np.arange(1, s[0] + 1), k).ravel()
    flat = np.flatnonzero(pos)[np.argsort(pos[pos > 0], kind="stable")]
    return scatter_add(v, flat.astype(np.intp), (n, n))


def diagflat(v, k=0):
    if not isinstance(v, Tracer):
        return np.diagflat(v, k)
    return diag(ravel(v), k)


def _tri_mask(a, k, lower):
    s = shape_of(a)
    m = np.tri(s[-2], s[-1], k, dtype=bool) if lower else ~np.tri(s[-2], s[-1], k - 1, dtype=bool)
    return m


def tril(m, k=0):
    if not isinstance(m, Tracer):
        return np.tril(m, k)
    from .elementwise import where
    return where(_tri_mask(m, k, True), m, 0.0)


def triu(m, k=0):
    if not isinstance(m, Tracer):
        return np.triu(m, k)
    from .elementwise import where
    return where(_tri_mask(m, k, False), m, 0.0)


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    if not isinstance(a, Tracer):
        return np.trace(a, offset, axis1, axis2, dtype, out)
    from .shape import sum_
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1)


# -- differences, grids ------------------------------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if not _traced(a, prepend, append):
        kw = {}
        if prepend is not np._NoValue:
            kw["prepend"] = prepend
        if append is not np._NoValue:
            kw["append"] = append
        return np.diff(a, n, axis, **kw)
    a = asarray(a)
    nd = ndim_of(a)
    ax = _axis(axis, nd)
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            parts.append(a)
            continue
        if extra is np._NoValue:
            continue
        if ndim_of(extra) == 0:
            s = list(shape_of(a))
            s[ax] = 1
            extra = broadcast_to(extra, tuple(s)) if isinstance(extra, Tracer) \
                else np.broadcast_to(extra, s)
        parts.append(extra)
    if len(parts) > 1:
        a = concatenate(parts, axis=ax)
    lo = (slice(None),) * ax + (slice(None, -1),)
    hi = (slice(None),) * ax + (slice(1, None),)
    for _ in range(n):
        a = getitem_basic(a, hi) - getitem_basic(a, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    if not _traced(ary, to_end, to_begin):
        return np.ediff1d(ary, to_end, to_begin)
    d = diff(ravel(asarray(ary)))
    parts = [ravel(asarray(p)) if isinstance(p, Tracer) else np.ravel(p)
             for p in (to_begin,) if p is not None]
    parts.append(d)
    if to_end is not None:
        parts.append(ravel(to_end) if isinstance(to_end, Tracer) else np.ravel(to_end))
    return concatenate(parts) if len(parts) > 1 else d


def gradient(f, *varargs, axis=None, edge_order=1):
    """``np.gradient``, differentiable in ``f`` and in the spacings.

    Each piece is NumPy's own expression on slices, joined along the axis, so the
    value is NumPy's to the bit.  One exception: traced coordinates always take the
    non-uniform formula, whose derivative in every coordinate is the right one;
    NumPy switches to ``h = x[1] - x[0]`` when the spacing is uniform, which agrees
    in value to rounding but would see only two of the coordinates.
    """
    if not _traced(f, *varargs):
        return np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    f = asarray(f)
    nd = ndim_of(f)
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(_axis(a, nd) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and ndim_of(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = []
        for ax, x in zip(axes, varargs):
            if ndim_of(x) == 0:
                spacings.append(x)
                continue
            if ndim_of(x) != 1:
                raise ValueError("distances must be either scalars or 1d")
            if shape_of(x)[0] != shape_of(f)[ax]:
                raise ValueError("when 1d, distances must match the length of the "
                                 "corresponding dimension")
            if isinstance(x, Tracer):
                spacings.append(diff(x))
                continue
            x = np.asarray(x)
            dx = np.diff(x.astype(np.float64) if np.issubdtype(x.dtype, np.integer) else x)
            spacings.append(dx[0] if (dx == dx[0]).all() else dx)
    else:
        raise TypeError("invalid number of arguments")
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported" if edge_order > 2
                         else "'edge_order' must be 1 or 2")
    outs = [_gradient_along(f, ax, h, edge_order) for ax, h in zip(axes, spacings)]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _gradient_along(f, ax, h, edge_order):
    n = shape_of(f)[ax]
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, "
                         "at least (edge_order + 1) elements are required.")
    nd = ndim_of(f)

    def at(lo, hi=None):  # f[..., lo:hi, ...] along ax, keeping the axis
        return getitem_basic(f, (slice(None),) * ax + (slice(lo, hi),))

    def along(c):  # a 1-d coefficient shaped to broadcast along ax
        shape = [1] * nd
        shape[ax] = -1
        return reshape(c, tuple(shape)) if isinstance(c, Tracer) else np.reshape(c, shape)

    uniform = ndim_of(h) == 0
    if uniform:
        inner = (at(2) - at(None, -2)) / (2. * h)
    else:
        dx1, dx2 = h[0:-1], h[1:]
        a = along(-(dx2) / (dx1 * (dx1 + dx2)))
        b = along((dx2 - dx1) / (dx1 * dx2))
        c = along(dx1 / (dx2 * (dx1 + dx2)))
        inner = a * at(None, -2) + b * at(1, -1) + c * at(2)
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / (h if uniform else h[0])
        last = (at(-1) - at(-2, -1)) / (h if uniform else h[-1])
    else:
        if uniform:
            a, b, c = -1.5 / h, 2. / h, -0.5 / h
        else:
            dx1, dx2 = h[0], h[1]
            a = -(2. * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = - dx1 / (dx2 * (dx1 + dx2))
        first = a * at(0, 1) + b * at(1, 2) + c * at(2, 3)
        if uniform:
            a, b, c = 0.5 / h, -2. / h, 1.5 / h
        else:
            dx1, dx2 = h[-2], h[-1]
            a = (dx2) / (dx1 * (dx1 + dx2))
            b = - (dx2 + dx1) / (dx1 * dx2)
            c = (2. * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(-3, -2) + b * at(-2, -1) + c * at(-1)
    out = concatenate([first, inner, last], axis=ax)
    # NumPy writes into an array of f's dtype
    return out if _dtype(out) == _dtype(f) else astype(out, _dtype(f))


def interp(x, xp, fp, left=None, right=None, period=None):
    """``np.interp``, differentiable in ``x``, ``xp``, ``fp``, ``left`` and ``right``.

    Inside, NumPy's own expression ``slope * (x - xp[j]) + fp[j]`` with its special cases
    (the last point, a non-finite slope, its NaN fallback), so the value is NumPy's to
    the bit.  At a sample point the derivative in ``x`` is the slope on its right (zero
    at the last point, past which the function is constant), as in JAX.
    """
    if not _traced(x, xp, fp, left, right, period):
        return np.interp(x, xp, fp, left, right, period)
    if np.iscomplexobj(_plain(fp)):
        raise NotImplementedError("wnp.interp with complex fp on traced values: interpolate "
                                  "the real and imaginary parts separately")
    if isinstance(period, Tracer):
        raise NotImplementedError("wnp.interp with a traced period")

    from .elementwise import where
    from .indexing import take

    def f64(a):
        return astype(asarray(a), np.float64) if _traced(a) else np.asarray(a, np.float64)
    x, xp, fp = f64(x), f64(xp), f64(fp)
    if ndim_of(xp) != 1 or ndim_of(fp) != 1:
        raise ValueError("Data points must be 1-D sequences")
    if shape_of(xp)[0] != shape_of(fp)[0]:
        raise ValueError("fp and xp are not of the same length.")
    if shape_of(xp)[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None:  # as NumPy: fold into one period, sort, wrap one point each way
        if period == 0:
            raise ValueError("period must be a non-zero value")
        period = abs(period)
        left = right = None
        x, xp = x % period, xp % period
        order = concrete(np.argsort, xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([xp[-1:] - period, xp, xp[0:1] + period])
        fp = concatenate([fp[-1:], fp, fp[0:1]])
    n = shape_of(xp)[0]
    left = fp[0] if left is None else f64(left)
    right = fp[n - 1] if right is None else f64(right)
    if n == 1:
        return where(x < xp[0], left, where(x > xp[0], right, fp[0]))  # NaN x: fp[0]
    j = concrete(_interp_segment, x, xp)
    x0, x1, f0, f1 = take(xp, j), take(xp, j + 1), take(fp, j), take(fp, j + 1)
    slope = (f1 - f0) / (x1 - x0)
    r = slope * (x - x0) + f0
    fixes = concrete(_interp_fixes, x, x0, x1, f1, slope, f0, r)
    if fixes.any():  # NumPy's special cases, where they change the value
        r2 = slope * (x - x1) + f1
        r = where(fixes == 1, f0, where(fixes == 2, r2, r))
    return where(recorded(np.isnan, x), x, where(x < xp[0], left, where(
        x > xp[n - 1], right, where(x == xp[n - 1], fp[n - 1], r))))


def _interp_segment(x, xp):
    """The segment ``j`` with ``xp[j] <= x < xp[j + 1]`` (clamped to the first and last)."""
    return np.clip(np.searchsorted(xp, x, side="right") - 1, 0, len(xp) - 2)


def _interp_fixes(x, x0, x1, f1, slope, f0, r):
    """Where NumPy's C loop does not return ``r = slope (x - x0) + f0``: 1 for ``f0``
    (``x`` on the point, or both formulas NaN on a flat segment), 2 for the formula from
    the right end, ``slope (x - x1) + f1``."""
    same = (r == f0) & (np.signbit(r) == np.signbit(f0)) | np.isnan(r) & np.isnan(f0)
    fix = np.where((x == x0) & ~same, 1, 0)
    with np.errstate(invalid="ignore"):
        r2 = slope * (x - x1) + f1
    nan = np.isnan(r) & (x != x0)
    return np.where(nan, np.where(np.isnan(r2) & (f0 == f1), 1, 2), fix)


def rollaxis(a, axis, start=0):
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


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    if not _traced(*xi):
        return np.meshgrid(*xi, copy=copy, sparse=sparse, indexing=indexing)
    nd = len(xi)
    out = []
    shapes = [np.size(_plain(x)) for x in xi]
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
    import operator
    from .indexing import index_update
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = (num - 1) if endpoint else num
    # Python numbers stay weak, as NumPy's array converter keeps them beside arrays
    start, stop = (a if type(a) in (int, float) else asarray(a) for a in (start, stop))
    dt = np.result_type(*(a if type(a) in (int, float) else _dtype(a) for a in (start, stop)),
                        1.0)  # at least floating
    integer_dtype = dtype is not None and np.issubdtype(dtype, np.integer)
    delta = astype(stop - start, dt)
    y = np.arange(0, num, dtype=dt).reshape((-1,) + (1,) * ndim_of(delta))
    if div > 0:
        step = delta / div
        if concrete(lambda v: bool(np.any(v == 0)), step):  # NumPy's route, denormal steps
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
        from .elementwise import floor
        y = floor(y)
    if dtype is not None:
        y = astype(y, dtype)
    return (y, step) if retstep else y


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``np.logspace``: ``base ** linspace(start, stop)``, differentiable in all three."""
    if not _traced(start, stop, base):
        return np.logspace(start, stop, num, endpoint, base, dtype, axis)
    if not isinstance(base, (float, int)) and np.ndim(_plain(base)):
        nd = len(np.broadcast_shapes(*(np.shape(_plain(a)) for a in (start, stop, base))))
        start, stop, base = (reshape(a, (1,) * (nd - ndim_of(a)) + shape_of(a))
                             for a in (asarray(start), asarray(stop), asarray(base)))
        base = expand_dims(base, axis)
    from .arithmetic import power
    y = power(base, linspace(start, stop, num=num, endpoint=endpoint, axis=axis))
    return y if dtype is None else astype(y, dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """``np.geomspace`` for real ends: NumPy's logspace between the logarithms, with the
    ends put back exactly, so their derivatives are exactly 1."""
    if not _traced(start, stop):
        return np.geomspace(start, stop, num, endpoint, dtype, axis)
    from .elementwise import log10
    from .indexing import index_update
    start, stop = asarray(start), asarray(stop)
    if concrete(lambda a, b: bool(np.any(a == 0) or np.any(b == 0)), start, stop):
        raise ValueError("Geometric sequence cannot include zero")
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
