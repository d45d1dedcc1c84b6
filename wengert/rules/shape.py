"""Shape primitives the engines' bookkeeping needs: reshape, sum, broadcast_to, as_float.

The tangent of a linear function is the function applied to the tangent, with
the tangent's leading batch axes kept in front.
"""
import numpy as np

from ..core import ndim_of, primitive, shape_of
from ..arrays import broadcast_view, chunks_of, sum_to
from . import patterns
from .lowering import Lowering


def _norm_axes(axis, nd):
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(a % nd if nd else 0 for a in axis))


def kept_shape(xs, axis):
    """``xs`` with its reduced axes (``axis`` as NumPy takes it) kept as 1."""
    axes = _norm_axes(axis, len(xs))
    return tuple(1 if i in axes else d for i, d in enumerate(xs))


def sum_tangent(dx, x_ndim, axis, keepdims=False):
    """The tangent of a sum over ``axis``: the same sum, past ``dx``'s batch axes."""
    nb = ndim_of(dx) - x_ndim
    return sum_(dx, axis=tuple(a + nb for a in _norm_axes(axis, x_ndim)), keepdims=keepdims)


def expand_reduced(g, ans, xs, axis, chunks=None):
    """A cotangent of a reduction over ``axis`` (batch axes in front), broadcast back
    to the reduced operand's shape ``xs`` (in its ``chunks``, when it is a Dask array)."""
    gs = shape_of(g)
    if not gs:  # 0-d, unbatched (a full reduction's seed): it broadcasts as it is
        return broadcast_to(g, tuple(xs), chunks)
    nb = len(gs) - ndim_of(ans)
    kept = kept_shape(xs, axis)
    if gs[nb:] != kept:
        g = reshape(g, gs[:nb] + kept)
    return broadcast_to(g, gs[:nb] + tuple(xs), _lead_chunks(chunks, gs[:nb]))


def _lead_chunks(chunks, lead):
    """``chunks`` with one chunk for each leading (batch) axis."""
    return None if chunks is None else tuple((d,) for d in lead) + chunks


# Numba (a compiled scan's loop, wengert/graph/numba_array.py): each written on whole arrays
# in the NumPy subset Numba compiles, or None where that subset lacks the case.  ``a``: the
# arguments' sources, ``p``: the parameters, ``v``: the arguments' traced values.
def _nb_reshape(a, p, v, out):
    if not np.ndim(v[0]):
        return None
    return f"np.ascontiguousarray({a[0]}).reshape({tuple(np.shape(out))!r})"


def _nb_sum(a, p, v, out):
    nd = np.ndim(v[0])
    if not nd:
        return None
    src = a[0]
    if len(_norm_axes(p.get("axis"), nd)) == nd:
        src = f"np.sum({src})"
    else:
        for ax in reversed(_norm_axes(p.get("axis"), nd)):
            src = f"np.sum({src}, axis={ax})"
    if p.get("keepdims") and np.ndim(out):
        src = f"np.reshape({src}, {tuple(np.shape(out))!r})" if len(
            _norm_axes(p.get("axis"), nd)) < nd else f"np.full({tuple(np.shape(out))!r}, {src})"
    return src


def _nb_broadcast_to(a, p, v, out):
    shape = tuple(np.shape(out))
    if not np.ndim(v[0]):
        return f"np.full({shape!r}, {a[0]})"
    return f"np.broadcast_to({a[0]}, {shape!r})"


def _nb_transpose(a, p, v, out):
    nd = np.ndim(v[0])
    if not nd:
        return None
    return f"np.transpose({a[0]}, {_full_axes(p.get('axes'), nd)!r})"


def _nb_as_float(a, p, v, out):
    return None if type(v[0]) is np.ndarray else f"float({a[0]})"


# reshape: the operand's elements in the same (C) order, so the fuser reads through it
@primitive(nargs=1, lowering=Lowering(array=_nb_reshape, role="flat_view"))
def reshape(x, shape):
    # the method skips np.reshape's dispatch layers: a third of the cost on small arrays
    return x.reshape(shape) if type(x) is np.ndarray else np.reshape(x, shape)


@reshape.frule(symbolic_zeros=True)
def reshape_jvp(primals, tangents, shape):
    (x,), (dx,) = primals, tangents
    ans = reshape(x, shape)
    if dx is None:
        return ans, None
    nb = ndim_of(dx) - ndim_of(x)
    return ans, reshape(dx, shape_of(dx)[:nb] + shape_of(ans))


@reshape.rrule
def reshape_vjp(x, shape):
    ans = reshape(x, shape)
    xs = shape_of(x)

    def pullback(g):
        nb = ndim_of(g) - ndim_of(ans)
        return (reshape(g, shape_of(g)[:nb] + xs),)
    return ans, pullback


@primitive(name="sum", lowering=Lowering(array=_nb_sum))
def sum_(x, axis=None, keepdims=False):
    if type(x) is np.ndarray:  # what np.sum calls, without its dispatch layers
        short = _short_last_axis(x, axis)
        if short:
            return _sum_slices(x, short, keepdims)
        return x.sum(axis=axis, keepdims=keepdims)
    return np.sum(x, axis=axis, keepdims=keepdims)


def _short_last_axis(x, axis):
    """The length of ``x``'s last axis when ``axis`` names it alone, it is short and ``x``
    is big (a point's 3 coordinates of many points); else 0. NumPy's reduction over such
    an axis runs an inner loop of that length per element: 4-10x slower than adding slices."""
    if type(axis) is tuple:
        if len(axis) != 1:
            return 0
        axis = axis[0]
    if type(axis) is not int or x.ndim == 0 or axis not in (-1, x.ndim - 1):
        return 0
    k = x.shape[-1]
    if not 2 <= k <= 7 or x.size < 4096 or x.dtype.char not in "fd":
        return 0
    return k


def _sum_slices(x, k, keepdims):
    """``x.sum(axis=-1)`` for a short last axis by adding its slices left to right: the
    order NumPy adds up to 7 terms in, so the result is the same to the bit."""
    out = x[..., 0] + x[..., 1]
    for i in range(2, k):
        out += x[..., i]
    return out[..., None] if keepdims else out


@sum_.frule(symbolic_zeros=True)
def sum_jvp(primals, tangents, axis=None, keepdims=False):
    (x,), (dx,) = primals, tangents
    ans = sum_(x, axis=axis, keepdims=keepdims)
    if dx is None:
        return ans, None
    return ans, sum_tangent(dx, ndim_of(x), axis, keepdims)


@sum_.rrule
def sum_vjp(x, axis=None, keepdims=False):
    ans = sum_(x, axis=axis, keepdims=keepdims)
    xs = shape_of(x)
    chunks = chunks_of(x)  # (a Dask operand's: its cotangent in its chunks, no rechunk)

    def pullback(g):
        return (expand_reduced(g, ans, xs, axis, chunks),)
    return ans, pullback


@primitive(nargs=1, lowering=Lowering(array=_nb_broadcast_to))
def broadcast_to(x, shape, chunks=None):
    return broadcast_view(x, shape, chunks)


@broadcast_to.frule(symbolic_zeros=True)
def broadcast_to_jvp(primals, tangents, shape, chunks=None):
    (x,), (dx,) = primals, tangents
    ans = broadcast_to(x, shape, chunks)
    if dx is None:
        return ans, None
    nb = ndim_of(dx) - ndim_of(x)
    ds = shape_of(dx)
    lift = len(shape) - ndim_of(x)
    if nb and lift:  # batch axes stay in front: the new axes go after them
        dx = reshape(dx, ds[:nb] + (1,) * lift + ds[nb:])
    return ans, broadcast_to(dx, ds[:nb] + tuple(shape), _lead_chunks(chunks, ds[:nb]))


@broadcast_to.rrule
def broadcast_to_vjp(x, shape, chunks=None):
    xs = shape_of(x)
    ans = broadcast_to(x, shape, chunks)

    def pullback(g):
        nb = ndim_of(g) - len(shape)
        return (sum_to(g, nb, xs),)
    return ans, pullback


@primitive(lowering=Lowering(array=_nb_transpose))
def transpose(x, axes=None):
    return x.transpose(axes) if type(x) is np.ndarray else np.transpose(x, axes)


def _full_axes(axes, nd):
    return tuple(range(nd))[::-1] if axes is None else tuple(a % nd for a in axes)


@transpose.frule(symbolic_zeros=True)
def transpose_jvp(primals, tangents, axes=None):
    (x,), (dx,) = primals, tangents
    ans = transpose(x, axes)
    if dx is None:
        return ans, None
    nd = ndim_of(x)
    nb = ndim_of(dx) - nd
    perm = tuple(range(nb)) + tuple(nb + a for a in _full_axes(axes, nd))
    return ans, transpose(dx, perm)


@transpose.rrule
def transpose_vjp(x, axes=None):
    nd = ndim_of(x)
    inv = tuple(np.argsort(_full_axes(axes, nd)))

    def pullback(g):
        nb = ndim_of(g) - nd
        return (transpose(g, tuple(range(nb)) + tuple(nb + int(a) for a in inv)),)
    return transpose(x, axes), pullback


def _as_float_impl(x):
    return float(x)


as_float = primitive(_as_float_impl, name="as_float",  # a 0-d value as a Python float
                     lowering=Lowering(array=_nb_as_float))
as_float.sparsity = patterns.Elementwise(hessian="linear")


@as_float.frule(symbolic_zeros=True)
def as_float_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return as_float(x), dx


@as_float.rrule
def as_float_vjp(x):
    return as_float(x), lambda g: (g,)


for _p in (reshape, sum_, broadcast_to, transpose):
    _p.linear = True  # Taylor coefficients map one by one
for _p in (reshape, broadcast_to):
    _p.same_shape_identity = True  # the identity when the result has the operand's shape
transpose.permutation_param = "axes"  # the identity for the identity permutation


# sparsity: the moves read off their implementations; sum reduces over its axes
for _p in (reshape, broadcast_to, transpose):
    _p.sparsity = patterns.MOVES
sum_.sparsity = patterns.Reduction()


# wg.vmap: a sum reduces along ``axis`` (cheaper than as a linear map); as_float is the
# identity on values (its pushforward: the batch itself)
sum_.batch = "axis"
as_float.batch = "linear"


