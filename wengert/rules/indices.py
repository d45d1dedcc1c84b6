"""What an index is: normalised to a tuple NumPy accepts, with traced integers read off.

An index of integer or boolean dtype carries no derivative, so a traced one (``astype(int)``,
a comparison, ``argmax``) is used by its primal value: under the eager engines it is read off;
inside a graph being traced it is guarded (``concrete``: another value re-traces), since there
its value decides the program's shapes, except where ``indexing.getitem`` records an integer
array as a traced index (``_recorded_positions``).  A traced float value inside an index raises
``TypeError``: its derivative would be dropped.
"""
import operator

import numpy as np

from ..arrays import host_values
from ..core import Tracer
from .nondiff import batched, concrete, strip_eager

__all__ = ["normalize_index", "static_index"]

_TRACED_INDEX = ("a traced value cannot be used inside an index: indices are not "
                 "differentiable. Use x.value (or wnp.argmax/argsort..., which give plain "
                 "integers) if the index really does not depend on the derivative.")
_INDEX_ARRAY = ("x[i] or x[i] = v by an index array", "a mask's count is the output's shape")


def normalize_index(idx):
    """``(tuple index, advanced?)`` with lists turned into arrays; rejects traced values."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    out = []
    advanced = False
    for i in idx:
        i = static_index(i)
        if i is None or i is Ellipsis:
            out.append(i)
        elif isinstance(i, slice):
            if any(isinstance(b, Tracer) for b in (i.start, i.stop, i.step)):
                i = slice(_bound(i.start), _bound(i.stop), _bound(i.step))
            out.append(i)
        elif isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            out.append(int(i))
        elif isinstance(i, np.ndarray) and i.ndim == 0 and i.dtype.kind in "iu":
            out.append(int(i))  # a traced integer's value: x[k] as NumPy's x[int(k)]
        else:
            a = np.asarray(host_values(i, *_INDEX_ARRAY))
            if a.dtype == object or not (a.dtype == bool or np.issubdtype(a.dtype, np.integer)):
                raise IndexError("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis "
                                 "(`None`) and integer or boolean arrays are valid indices")
            advanced = True
            out.append(a)
    return tuple(out), advanced


def static_index(i, name=None):
    """``i`` (an index, a mask, positions) as a plain value.  A traced value of integer or bool
    dtype has no derivative: its primal is used, guarded inside a graph being traced (another
    value re-traces); a traced float value is refused."""
    msg = _TRACED_INDEX if name is None else f"wnp.{name}: {_TRACED_INDEX}"
    if isinstance(i, Tracer):
        if not _integral(i):
            raise TypeError(msg)
        return concrete(np.asarray, host_values(strip_eager(i), *_INDEX_ARRAY))
    if isinstance(i, (list, tuple)) and _has_tracer(i):
        if not _all_integral(i):
            raise TypeError(msg)
        return [static_index(a, name) if isinstance(a, (Tracer, list, tuple)) else a for a in i]
    return i


def _integral(i):
    return np.dtype(i.dtype).kind in "biu"


def _all_integral(seq):
    return all(_all_integral(a) if isinstance(a, (list, tuple)) else
               (not isinstance(a, Tracer) or _integral(a)) for a in seq)


def _bound(b):
    """A slice bound: a traced integer is read (guarded inside a graph being traced)."""
    if isinstance(b, Tracer):
        if not _integral(b) or b.ndim:
            raise TypeError(_TRACED_INDEX)
        return operator.index(b)
    return b


def _batched_index(i):
    """Whether ``i`` is an integer index holding one value per example (a trace whose values
    are ``batched``: wg.vmap), so that no single plain index exists."""
    return np.issubdtype(i.dtype, np.integer) and batched(i)


def _recorded_positions(idx):
    """Whether ``idx`` is an integer array (not 0-d) computed inside a graph being traced: then
    ``x[idx]`` is recorded with the positions as its input, not guarded on their values."""
    if not isinstance(idx, Tracer) or idx.dtype.kind not in "iu" or idx.ndim == 0:
        return False
    return isinstance(strip_eager(idx), Tracer)


def _has_tracer(seq):
    for a in seq:
        if isinstance(a, Tracer) or (isinstance(a, (list, tuple)) and _has_tracer(a)):
            return True
    return False


