"""``r_`` and ``c_``: NumPy's index-expression concatenators, taking traced values.

``np.r_[x, 2 * x]`` turns each item into a plain array with ``np.array``, which NumPy never
dispatches, so a traced item cannot pass through NumPy's own ``r_``; ``wnp.r_`` does what it
does with wengert's ``array``, ``transpose`` and ``concatenate``. Without a traced item it is
NumPy's (same result, same errors).
"""
import numpy as np

from ..core import holds_tracer, ndim_of
from .conversion import _dtype, astype
from .creation import array
from .joining import concatenate
from .shape import transpose

__all__ = ["r_", "c_"]


class AxisConcatenator:
    """``obj[a, b, ...]``: the items as arrays of at least ``ndmin`` dimensions, joined on
    ``axis``; a first item ``"axis,ndmin,trans1d"`` changes those (as NumPy's)."""

    def __init__(self, numpy_version, axis, ndmin, trans1d):
        self._numpy = numpy_version
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __len__(self):
        return 0

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not holds_tracer(items):
            return self._numpy[key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        objs, kinds = [], []  # kinds: dtypes, or Python scalars (weak in result_type)
        for k, item in enumerate(items):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError("special directives must be the first entry.")
                axis, ndmin, trans1d = _directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice) or type(item) in np.ScalarType:
                # a range or a plain number: NumPy's own piece, dimensions and all
                piece = self._numpy[f"0,{ndmin},{trans1d}", item]
                kinds.append(item if type(item) in np.ScalarType else piece.dtype)
                objs.append(piece)
                continue
            piece = array(item, copy=None)  # a list holding traced values: stacked
            nd = ndim_of(piece)
            if nd < ndmin:
                piece = array(piece, copy=None, ndmin=ndmin)
            if trans1d != -1 and nd < ndmin:
                # the item's own axes go where trans1d says among the new leading ones
                k2, k1 = ndmin - nd, trans1d
                if k1 < 0:
                    k1 += k2 + 1
                order = list(range(ndmin))
                piece = transpose(piece, tuple(order[:k1] + order[k2:] + order[k1:k2]))
            objs.append(piece)
            kinds.append(_dtype(piece))
        if kinds:
            dt = np.result_type(*kinds)
            objs = [o if _dtype(o) == dt else astype(o, dt) for o in objs]
        return concatenate(objs, axis=axis)


def _directive(item, axis, ndmin, trans1d):
    if item in ("r", "c"):
        raise NotImplementedError("wnp.r_['r', ...] / ['c', ...] (np.matrix results) on "
                                  "traced values: use wnp.r_[...] and reshape")
    try:
        parts = [int(p) for p in item.split(",")]
    except ValueError:
        raise ValueError(f"unknown special directive {item!r}") from None
    if len(parts) == 1:
        return parts[0], ndmin, trans1d
    if len(parts) > 3:
        raise ValueError(f"unknown special directive {item!r}")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else trans1d


r_ = AxisConcatenator(np.r_, 0, 1, -1)
c_ = AxisConcatenator(np.c_, -1, 2, 0)
