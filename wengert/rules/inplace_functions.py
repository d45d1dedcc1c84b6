"""NumPy's in-place functions on traced arrays: put, place, putmask, copyto, fill_diagonal,
put_along_axis.
"""
import numpy as np

from ..core import Tracer, shape_of
from .conversion import astype
from .creation import array
from .indexing import _assign, _has_tracer, gather, positions, set_flat, static_index
from .nondiff import _plain

__all__ = ["put", "place", "putmask", "copyto", "fill_diagonal", "put_along_axis"]


# -- NumPy's in-place functions: put, place, putmask, copyto, fill_diagonal, put_along_axis ----
# A traced destination is updated as by ``x[idx] = v``: the functional update, then ``x`` is
# rebound (_assign).  NumPy's own function, run on plain arrays, does the rest: on scratch
# values it raises NumPy's errors (bounds, modes, sizes, casting rules) and casts plain values
# as NumPy does; on the values' positions it says which entry lands where (cycled, clipped,
# wrapped, broadcast, the last write winning), so every rule of NumPy's holds by construction.
_PLAIN_DESTINATION = (
    "numpy.{}: the destination is a plain NumPy array, which cannot hold a traced value (its "
    "derivative would be lost). Make the destination traced (a = wnp.array(a, like=v), then "
    "update and use a), or use a functional form that returns a new array: "
    "wnp.index_update(a, idx, v) or wnp.where(mask, v, a).")


def _update_in_place(name, write, dst, values):
    """``write(dst, values)`` (NumPy's in-place function ``name`` with its static arguments
    bound) for a traced ``dst`` or ``values``; returns ``None``, as NumPy does."""
    if isinstance(values, (list, tuple)) and _has_tracer(values):
        values = array(values)
    if not isinstance(dst, Tracer):
        if isinstance(values, Tracer):
            raise TypeError(_PLAIN_DESTINATION.format(name))
        return write(dst, values)
    xs, dt = shape_of(dst), np.asarray(_plain(dst)).dtype
    scratch = np.empty(xs, dtype=dt)
    write(scratch, _plain(values))  # NumPy's errors, warnings and casts
    owner = np.full(xs, -1, dtype=np.intp)  # which entry of values.ravel() each entry took
    write(owner, positions(values if isinstance(values, Tracer) else np.asarray(values)))
    written = np.flatnonzero(owner >= 0)
    if written.size == 0:
        return None
    if isinstance(values, Tracer):
        vals = gather(astype(values, dt, copy=False), owner.ravel()[written])
    else:
        vals = scratch.ravel()[written]
    _assign(dst, set_flat(dst, vals, written))
    return None


def put(a, ind, v, mode="raise"):
    """``np.put``: ``a.flat[ind] = v`` with ``v`` cycled; ``mode`` raise, wrap or clip."""
    ind = static_index(ind, "put")
    return _update_in_place("put", lambda d, w: np.put(d, ind, w, mode=mode), a, v)


def place(arr, mask, vals):
    """``np.place``: the entries where ``mask`` is true take ``vals`` in turn (cycled)."""
    mask = static_index(mask, "place")
    return _update_in_place("place", lambda d, w: np.place(d, mask, w), arr, vals)


def putmask(a, mask, values):
    """``np.putmask``: ``a.flat[n] = values.flat[n % values.size]`` where ``mask.flat[n]``."""
    mask = static_index(mask, "putmask")
    return _update_in_place("putmask", lambda d, w: np.putmask(d, mask, w), a, values)


def copyto(dst, src, casting="same_kind", where=True):
    """``np.copyto``: ``src`` broadcast into ``dst`` where ``where`` is true, under ``casting``."""
    where = static_index(where, "copyto")
    return _update_in_place(
        "copyto", lambda d, w: np.copyto(d, w, casting=casting, where=where), dst, src)


def fill_diagonal(a, val, wrap=False):
    """``np.fill_diagonal``: the entries with all indices equal take ``val`` (cycled)."""
    return _update_in_place("fill_diagonal", lambda d, w: np.fill_diagonal(d, w, wrap=wrap),
                            a, val)


def put_along_axis(arr, indices, values, axis):
    """``np.put_along_axis``: ``values`` broadcast to ``indices`` and written along ``axis``."""
    indices = static_index(indices, "put_along_axis")
    return _update_in_place(
        "put_along_axis", lambda d, w: np.put_along_axis(d, indices, w, axis), arr, values)
