"""Shape primitives the engines' bookkeeping needs: reshape, sum, broadcast_to, as_float.

The tangent of a linear function is the function applied to the tangent.  Tangents
carry no batch axes (core.py): ``wg.vmap`` maps each of these by its batch rule below.
"""
import numpy as np

from ..core import ndim_of, primitive, shape_of
from ..arrays import broadcast_view, chunks_of, sum_to
from . import patterns
from .lowering import Lowering

__all__ = ["as_float", "as_float_jvp", "as_float_vjp", "broadcast_to", "broadcast_to_jvp",
           "broadcast_to_vjp", "expand_reduced", "kept_shape", "reshape", "reshape_jvp",
           "reshape_vjp", "sum_", "sum_jvp", "sum_tangent", "sum_vjp", "transpose",
           "transpose_jvp", "transpose_vjp"]


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
    """The tangent of a sum over ``axis``: the same sum."""
    return sum_(dx, axis=_norm_axes(axis, x_ndim), keepdims=keepdims)


def expand_reduced(g, ans, xs, axis, chunks=None):
    """A cotangent of a reduction over ``axis``, broadcast back to the reduced operand's
    shape ``xs`` (in its ``chunks``, when it is a Dask array)."""
    gs = shape_of(g)
    if gs == tuple(xs) and chunks is None:
        return g  # nothing was reduced away (a sum of a number): as sum_to's equal shapes
    if not gs:  # 0-d (a full reduction's seed): it broadcasts as it is
        return broadcast_to(g, tuple(xs), chunks)
    kept = kept_shape(xs, axis)
    if gs != kept:
        g = reshape(g, kept)
    return broadcast_to(g, tuple(xs), chunks)


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


# Taylor coefficients of the linear ones map one by one; the moves' sparsity is read off
# their implementations, a sum reduces over its axes (and wg.vmap maps it along ``axis``,
# cheaper than as a linear map); the identity when the result has the operand's shape
# (reshape: the operand's elements in the same (C) order, so the fuser reads through it)
@primitive(nargs=1, linear=True, sparsity=patterns.MOVES, identity_when=True,
           lowering=Lowering(array=_nb_reshape, role="flat_view"))
def reshape(x, shape):
    # the method skips np.reshape's dispatch layers: a third of the cost on small arrays
    return x.reshape(shape) if type(x) is np.ndarray else np.reshape(x, shape)


@reshape.frule(symbolic_zeros=True)
def reshape_jvp(primals, tangents, shape):
    (x,), (dx,) = primals, tangents
    ans = reshape(x, shape)
    if dx is None:
        return ans, None
    return ans, reshape(dx, shape_of(ans))


@reshape.rrule
def reshape_vjp(x, shape):
    ans = reshape(x, shape)
    xs = shape_of(x)

    def pullback(g):
        return (reshape(g, xs),)
    return ans, pullback


@primitive(name="sum", linear=True, sparsity=patterns.Reduction(), batch="axis",
           lowering=Lowering(array=_nb_sum, role="sum_axes"))
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
    # NumPy starts from +0.0: a row of -0.0 sums to +0.0 there, to -0.0 here; adding +0.0
    # changes only that case (x + 0.0 is x for every other x)
    out += 0.0
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


@primitive(nargs=1, linear=True, sparsity=patterns.MOVES, identity_when=True,
           lowering=Lowering(array=_nb_broadcast_to))
def broadcast_to(x, shape, chunks=None):
    return broadcast_view(x, shape, chunks)


@broadcast_to.frule(symbolic_zeros=True)
def broadcast_to_jvp(primals, tangents, shape, chunks=None):
    (x,), (dx,) = primals, tangents
    ans = broadcast_to(x, shape, chunks)
    if dx is None:
        return ans, None
    return ans, broadcast_to(dx, tuple(shape), chunks)


@broadcast_to.rrule
def broadcast_to_vjp(x, shape, chunks=None):
    xs = shape_of(x)
    ans = broadcast_to(x, shape, chunks)

    def pullback(g):
        return (sum_to(g, xs),)
    return ans, pullback


def _identity_permutation(x, axes=None):
    nd = np.ndim(x)
    return nd <= 1 if axes is None else tuple(a % nd for a in axes) == tuple(range(nd))


# the identity for the identity permutation (a transpose keeps a square matrix's shape, so
# shape alone does not tell)
@primitive(linear=True, sparsity=patterns.MOVES, identity_when=_identity_permutation,
           lowering=Lowering(array=_nb_transpose))
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
    return ans, transpose(dx, axes)


@transpose.rrule
def transpose_vjp(x, axes=None):
    nd = ndim_of(x)
    inv = tuple(np.argsort(_full_axes(axes, nd)))

    def pullback(g):
        return (transpose(g, tuple(int(a) for a in inv)),)
    return transpose(x, axes), pullback


def _as_float_impl(x):
    return float(x)


# a 0-d value as a Python float; wg.vmap maps it as the identity on values (linear)
as_float = primitive(_as_float_impl, name="as_float", linear=True,
                     sparsity=patterns.ELEMENTWISE, lowering=Lowering(array=_nb_as_float))


@as_float.frule(symbolic_zeros=True)
def as_float_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return as_float(x), dx


@as_float.rrule
def as_float_vjp(x):
    return as_float(x), lambda g: (g,)




# wg.vmap: the moves move the batch axis (leading) along


@reshape.batching
def _reshape_batch(args, batched, shape):
    (x,) = args
    shape = tuple(shape) if np.ndim(shape) else (shape,)
    return reshape(x, shape_of(x)[:1] + shape)


@broadcast_to.batching
def _broadcast_to_batch(args, batched, shape, chunks=None):
    (x,) = args
    xs = shape_of(x)
    shape = tuple(shape) if np.ndim(shape) else (shape,)
    lift = len(shape) - (len(xs) - 1)
    if lift:  # the new axes go after the batch axis
        x = reshape(x, xs[:1] + (1,) * lift + xs[1:])
    lead = xs[:1]
    return broadcast_to(x, lead + shape, None if chunks is None else ((lead[0],),) + chunks)


@transpose.batching
def _transpose_batch(args, batched, axes=None):
    (x,) = args
    return transpose(x, (0,) + tuple(a + 1 for a in _full_axes(axes, ndim_of(x) - 1)))


@as_float.batching
def _as_float_batch(args, batched):
    """One float per example: the batch as an array of float64s."""
    (x,) = args
    return x.astype(np.float64) if type(x) is np.ndarray else x * 1.0


