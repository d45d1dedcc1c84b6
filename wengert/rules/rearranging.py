"""Rearranging entries: tile, repeat, flip, roll, rot90, pad, choose, insert, delete, resize,
trim_zeros.

Most run NumPy's own function on the entries' positions and gather the traced array by the
result: one linear primitive, whose adjoint adds the cotangents back, so NumPy's rules
(modes, wrapping, repeats) hold by construction.  Each public function returns exactly what
NumPy returns when no argument is traced.
"""
import numpy as np

from ..arrays import host_values
from ..core import Tracer, lift, ndim_of, primitive, shape_of
from . import patterns
from .conversion import _dtype, _plain, _traced, astype
from .creation import asarray
from .elementwise import where
from .indexing import (static_index, gather, getitem_basic, index_writer, positions,
                       scatter_basic)
from .joining import concatenate, stack
from .nondiff import concrete
from .reshaping import _axis, _view, ravel
from .shape import broadcast_to, reshape

__all__ = ["tile", "repeat", "flip", "fliplr", "flipud", "roll", "rot90", "pad", "choose",
           "insert", "delete", "resize", "trim_zeros"]


# -- choosing, inserting, deleting, resizing, trimming ---------------------------------------------
def choose(a, choices, out=None, mode="raise"):
    """``np.choose``: NumPy's choice run on positions, then one gather from the stacked
    (broadcast) choices; ``a`` is an index, not differentiated."""
    if not _traced(choices):
        return np.choose(a, choices, out=out, mode=mode)
    a = _static_index(a, "choose")
    if out is not None:
        raise NotImplementedError("wnp.choose with out= on traced values")
    choices = list(choices)
    shape = np.broadcast_shapes(np.shape(a), *(np.shape(c) for c in choices))
    stacked = stack([broadcast_to(c, shape) if isinstance(c, Tracer)
                     else np.broadcast_to(c, shape) for c in choices])
    pos = positions(stacked)
    return gather(stacked, np.choose(np.broadcast_to(a, shape), list(pos), mode=mode))


def _static_index(obj, name):
    return static_index(obj, name) if _traced(obj) else obj


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
    host_values(filt, "wnp.trim_zeros", "where the zeros end is the output's shape")
    b = concrete(_trim_bounds, filt, trim=trim, axis=axis, name="trim_zeros")
    return filt[tuple(slice(int(s), int(e)) for s, e in zip(b[0], b[1]))]


# -- tiling, repeating, flipping ------------------------------------------------------------------------
def tile(A, reps):
    A = lift(A)
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
    a = lift(a)
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
    m = lift(m)
    if not isinstance(m, Tracer):
        return np.flip(m, axis=axis)
    nd = ndim_of(m)
    axes = range(nd) if axis is None else [_axis(a, nd) for a in np.atleast_1d(axis)]
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(nd))
    return _view(getitem_basic(m, idx), m, index_writer(idx))


def fliplr(m):
    m = lift(m)
    if not isinstance(m, Tracer):
        return np.fliplr(m)
    if ndim_of(m) < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(m, 1)


def flipud(m):
    m = lift(m)
    if not isinstance(m, Tracer):
        return np.flipud(m)
    if ndim_of(m) < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(m, 0)


def roll(a, shift, axis=None):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.roll(a, shift, axis=axis)
    if axis is not None and not isinstance(shift, Tracer) and not isinstance(axis, Tracer):
        nd = ndim_of(a)
        net = {}
        for s, ax in np.broadcast(shift, axis):
            ax = _axis(int(ax), nd)
            net[ax] = net.get(ax, 0) + int(s)
        if net:
            return _roll(a, tuple(net.values()), tuple(net))
    pos = positions(a)
    return gather(a, np.roll(pos, shift, axis=axis))


# Stencils (a fluid step, a finite difference) roll many times per step: a gather by
# positions would take the elements one by one and its cotangent would add them back one by
# one (a scatter-add); this one moves blocks both ways: its cotangent is the roll back.
@primitive(name="roll", nargs=1, linear=True, sparsity=patterns.MOVES, batch="axis")
def _roll(x, shift, axis):
    """``np.roll(x, shift, axis)``, ``shift`` and ``axis`` tuples of ints."""
    return np.roll(x, shift, axis=axis)


@_roll.frule(symbolic_zeros=True)
def _roll_jvp(primals, tangents, shift, axis):
    (x,), (dx,) = primals, tangents
    ans = _roll(x, shift, axis)
    return ans, (None if dx is None else _roll(dx, shift, axis))


@_roll.rrule
def _roll_vjp(x, shift, axis):
    back = tuple(-s for s in shift)

    def pullback(g):
        return (_roll(g, back, axis),)
    return _roll(x, shift, axis), pullback


def rot90(m, k=1, axes=(0, 1)):
    m = lift(m)
    if not isinstance(m, Tracer):
        return np.rot90(m, k, axes)
    pos = positions(m)
    return gather(m, np.rot90(pos, k, axes))


def _pad_pairs(pad_width, nd):
    """``pad_width`` as ``(before, after)`` for each of ``nd`` axes, read as NumPy reads it: one
    number for all, one pair for all (``(3,)``, ``(3, 2)``, ``((3, 2),)``), or one pair per axis
    (a ``(2, 1)`` array being one number per axis)."""
    pw = np.asarray(pad_width, dtype=np.intp)
    if pw.ndim < 3 and pw.size == 1:
        pw = pw.ravel()[[0, 0]]
    elif pw.ndim < 3 and pw.size == 2 and pw.shape != (2, 1):
        pw = pw.ravel()
    return np.broadcast_to(pw, (nd, 2))


def pad(array, pad_width, mode="constant", **kwargs):
    """``np.pad``: ``constant`` (traced or plain fill), ``edge``, ``reflect``, ``symmetric``,
    ``wrap`` are differentiable."""
    if not _traced(array, kwargs.get("constant_values")):
        return np.pad(array, pad_width, mode=mode, **kwargs)
    array = asarray(array)
    s = shape_of(array)
    nd = len(s)
    pw = _pad_pairs(pad_width, nd)
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
