"""Joining and splitting: concatenate is a primitive; stack, hstack, vstack, dstack,
column_stack, append, block, unstack, broadcast_arrays and the splits compose it with
reshape / broadcast_to (rules/shape.py) and basic indexing (rules/indexing.py).

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..arrays import asarray as _asarray
from ..core import Tracer, lift, ndim_of, primitive, shape_of
from . import patterns
from .lowering import Lowering
from .conversion import _dtype, _plain, _traced, astype
from .indexing import getitem_basic, index_writer
from .reshaping import _axis, _view, atleast_1d, atleast_2d, atleast_3d, moveaxis, ravel
from .shape import broadcast_to, reshape

__all__ = ["concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack",
           "append", "block", "unstack", "broadcast_arrays", "split", "array_split", "hsplit",
           "vsplit", "dsplit"]


# -- primitives ------------------------------------------------------------------------------------
# Numba (a compiled scan's step on whole arrays, wengert/graph/numba_array.py): each operand
# copied into its stretch of the result, so that a step joining its new state (``wnp.stack``
# of an LSTM's layers) runs inside Numba's loop rather than step by step from Python.
def _nb_concatenate(a, p, v, out):
    if type(out) is not np.ndarray or out.dtype.kind != "f" or not out.ndim or not all(
            type(x) is np.ndarray and x.ndim == out.ndim and x.dtype.kind in "fiu" for x in v):
        return None
    axis = p.get("axis", 0) % out.ndim
    return _JoinCopies(a, [x.shape[axis] for x in v], axis, out.shape, out.dtype)


class _JoinCopies:
    """The statements joining operands ``args`` (of ``lengths`` along ``axis``) into
    ``name``: one ``_copy<n>`` per operand into its slice (the generated module's copy helper,
    wengert/graph/kernel_cache.py: Numba's ``np.concatenate`` and slice assignment compile
    their shape checks and error messages, seconds of a step's cold compile).  ``buffer``:
    an array of the result's shape the caller keeps across calls (written over), else a new
    one."""
    buffered = True

    def __init__(self, args, lengths, axis, shape, dtype):
        self.args, self.lengths, self.axis = list(args), list(lengths), axis
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    def __call__(self, name, buffer=None):
        lines = [f"{name} = {buffer}" if buffer else
                 f"{name} = np.empty({self.shape!r}, np.{self.dtype.name})"]
        nd, lead, off = len(self.shape), ":, " * self.axis, 0
        for src, k in zip(self.args, self.lengths):
            if k:
                lines.append(f"_copy{nd}({name}[{lead}{off}:{off + k}], {src})")
            off += k
        return lines


# linear, moving elements; wg.vmap joins along ``axis``, past the batch axis
@primitive(name="concatenate", linear=True, sparsity=patterns.MOVES, batch="axis",
           lowering=Lowering(array=_nb_concatenate, role="join"))
def _concatenate(*arrays, axis=0):
    return np.concatenate(arrays, axis=axis)


@_concatenate.frule(symbolic_zeros=True)
def _concatenate_jvp(primals, tangents, axis=0):
    ans = _concatenate(*primals, axis=axis)
    if all(t is None for t in tangents):
        return ans, None
    ts = [np.zeros(shape_of(x), dtype=_dtype(x)) if t is None else t
          for x, t in zip(primals, tangents)]
    return ans, _concatenate(*ts, axis=axis)


@_concatenate.rrule(needs=True)
def _concatenate_vjp(*arrays, needs, axis=0):
    ans = _concatenate(*arrays, axis=axis)
    bounds = np.cumsum([0] + [shape_of(a)[axis] for a in arrays])

    def pullback(g):
        pre = (slice(None),) * (axis % ndim_of(ans))
        return tuple(getitem_basic(g, pre + (slice(int(lo), int(hi)),)) if need else None
                     for need, lo, hi in zip(needs, bounds[:-1], bounds[1:]))
    return ans, pullback


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
    arrays = [lift(a) for a in arrays]  # a list holding traced values: stacked
    arrays = [a if isinstance(a, Tracer) else _asarray(a) for a in arrays]  # (CuPy, Dask kept)
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
    nd = max([depth] + [np.ndim(x) for x in leaves(arrays)])

    def build(a, level):
        if level == depth:
            return reshape(a, (1,) * (nd - ndim_of(a)) + shape_of(a)) \
                if isinstance(a, Tracer) else np.array(a, ndmin=nd)
        return concatenate([build(b, level + 1) for b in a], axis=level - depth)
    return build(arrays, 0)


def unstack(x, /, *, axis=0):
    """``np.unstack``: the slices along ``axis``, as a tuple."""
    if not isinstance(x, Tracer):
        return tuple(np.moveaxis(np.asarray(x), axis, 0))
    x = moveaxis(x, axis, 0)
    return tuple(getitem_basic(x, (i,)) for i in range(shape_of(x)[0]))


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
    ary = lift(ary)
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
    ary = lift(ary)
    if not isinstance(ary, Tracer):
        return np.split(ary, indices_or_sections, axis=axis)
    if np.ndim(indices_or_sections) == 0:
        n = shape_of(ary)[_axis(axis, ndim_of(ary))]
        if n % int(indices_or_sections):
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    ary = lift(ary)
    if not isinstance(ary, Tracer):
        return np.hsplit(ary, indices_or_sections)
    return split(ary, indices_or_sections, axis=1 if ndim_of(ary) > 1 else 0)


def vsplit(ary, indices_or_sections):
    ary = lift(ary)
    if not isinstance(ary, Tracer):
        return np.vsplit(ary, indices_or_sections)
    return split(ary, indices_or_sections, axis=0)


def dsplit(ary, indices_or_sections):
    ary = lift(ary)
    if not isinstance(ary, Tracer):
        return np.dsplit(ary, indices_or_sections)
    return split(ary, indices_or_sections, axis=2)

