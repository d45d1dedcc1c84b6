"""Set operations: intersect1d, union1d, setdiff1d, setxor1d, the array-API unique_* functions
and sort_complex.

Which values a set operation keeps, and in which order, is decided by NumPy on the plain
values (guarded under graph tracing, so other inputs re-trace).  Each output value is then
gathered from one input entry equal to it, so its derivative is 1 with respect to that entry
and 0 for every other: a value occurring several times is differentiated at its first
occurrence, as ``unique`` and JAX do.  Counts, indices and inverse indices stay plain integers.

Values are NumPy's to the bit, dtype and signed zeros included; a NaN keeps its input entry's
payload (NumPy's SIMD sort itself writes -nan as nan).  NumPy treats +0.0 and -0.0 as one
value, and its sorts may hand back either zero (even one the input's entry at that place did
not have): the zero is then gathered from its first occurrence too, and given NumPy's sign by
an exact operation of slope 1.
"""
import numpy as np

from ..arrays import host_values
from ..core import Tracer
from .conversion import _dtype, _plain, _traced, astype
from .creation import array
from .indexing import gather
from .joining import concatenate
from .nondiff import concrete
from .reshaping import ravel

__all__ = ["intersect1d", "union1d", "setdiff1d", "setxor1d", "unique_values", "unique_counts",
           "unique_inverse", "unique_all", "sort_complex"]


# -- locating NumPy's outputs in the inputs (plain values only) ------------------------------------
def _parts(a):
    return (a.real, a.imag) if a.dtype.kind == "c" else (a,)


def _keys(a):
    """Sort keys of the entries of ``a``, equal for equal values: +0.0 and -0.0 alike, and
    any two NaNs."""
    a = np.asarray(a).reshape(-1)
    if a.dtype.kind not in "fc":
        return [a]
    keys = []
    for part in _parts(a):
        nan = np.isnan(part)
        keys += [np.where(nan, 0, part), nan]
    return keys


def _groups(keys, n):
    """A number per entry, the same for entries with equal keys."""
    order = np.lexsort(keys[::-1])
    new = np.zeros(n, bool)
    new[:1] = True
    for k in keys:
        k = k[order]
        new[1:] |= k[1:] != k[:-1]
    gid = np.empty(n, np.intp)
    gid[order] = np.cumsum(new) - 1
    return gid


def _locate(ref, src):
    """The position in ``src`` (flat) of each entry of ``ref`` (flat): the k-th entry of
    ``ref`` with a given value is the k-th entry of ``src`` with it.  A value NumPy keeps once
    is so found at its first occurrence; NaNs that NumPy's array-API functions keep apart,
    and sort_complex's equal values, are matched one to one, in order."""
    ref, src = np.ravel(ref), np.ravel(src).astype(ref.dtype, copy=False)
    gid = _groups([np.concatenate(p) for p in zip(_keys(src), _keys(ref))], src.size + ref.size)
    gs, gr = gid[:src.size], gid[src.size:]
    order_s = np.argsort(gs, kind="stable")
    sorted_s = gs[order_s]
    order_r = np.argsort(gr, kind="stable")
    sorted_r = gr[order_r]
    k = np.empty(len(gr), np.intp)  # how many earlier entries of ref are the same
    k[order_r] = np.arange(len(gr)) - np.searchsorted(sorted_r, sorted_r, "left")
    pos = np.searchsorted(sorted_s, gr, "left") + k
    if np.any(pos >= np.searchsorted(sorted_s, gr, "right")):  # pragma: no cover - a bug
        raise AssertionError("wengert.rules.sets: an output value not found in the input")
    return order_s[pos]


def _cat(ar1, ar2):
    return np.concatenate((ar1, ar2), axis=None)


# Each plan gives (NumPy's result, a flat source, positions such that source[positions] is
# the result up to the sign of zeros and NaN payloads).
def _union_plan(ar1, ar2):
    ref, src = np.union1d(ar1, ar2), _cat(ar1, ar2)
    return ref, src, _locate(ref, src)


def _setdiff_plan(ar1, ar2, assume_unique):
    ref, src = np.setdiff1d(ar1, ar2, assume_unique), np.ravel(ar1)
    return ref, src, _locate(ref, src)


def _setxor_plan(ar1, ar2, assume_unique):
    """NumPy's xor sorts the unique values of each input together: a NaN in both inputs is
    kept twice, once from each, so the outputs are located among those unique values."""
    ref = np.setxor1d(ar1, ar2, assume_unique)
    a1, a2 = np.ravel(ar1), np.ravel(ar2)
    src = _cat(a1, a2)
    if assume_unique:
        return ref, src, _locate(ref, src)
    u1, u2 = np.unique(a1), np.unique(a2)
    pos = np.concatenate([_locate(u1, a1), a1.size + _locate(u2, a2)]).astype(np.intp)
    return ref, src, pos[_locate(ref, _cat(u1, u2))]


def _intersect_plan(ar1, ar2, assume_unique, return_indices):
    """NumPy's ``return_indices`` algorithm (a stable sort of the two inputs' unique values,
    ``ar1``'s first) run on the positions: a common value is taken from ``ar1``, at NumPy's
    ``ar1_indices``, whichever zero NumPy's own sort kept."""
    ref = np.intersect1d(ar1, ar2, assume_unique, return_indices)
    a1, a2 = np.ravel(ar1), np.ravel(ar2)
    if assume_unique:
        u1, i1, u2, i2 = a1, np.arange(a1.size), a2, np.arange(a2.size)
    else:
        u1, i1 = np.unique(a1, return_index=True)
        u2, i2 = np.unique(a2, return_index=True)
    aux = np.concatenate((u1, u2))
    src = np.concatenate([i1, a1.size + i2]).astype(np.intp)
    order = np.argsort(aux, kind="mergesort")
    aux = aux[order]
    return ref[0] if return_indices else ref, _cat(a1, a2), src[order[:-1][aux[1:] == aux[:-1]]]


def _unique_plan(x, kind):
    ref = getattr(np, kind)(x)
    ref = ref if kind == "unique_values" else ref.values
    return ref, np.ravel(x), _locate(ref, x)


def _sort_complex_plan(a):
    """NumPy's sort does not move entries bit for bit (its SIMD sort may turn +0.0 into
    -0.0): equal values are matched in order, each keeping the row it is in."""
    ref = np.sort_complex(a)
    return ref, np.ravel(a), _locate(ref, a)


_PLANS = {"union1d": _union_plan, "setdiff1d": _setdiff_plan, "setxor1d": _setxor_plan,
          "intersect1d": _intersect_plan, "unique": _unique_plan,
          "sort_complex": _sort_complex_plan}

# Where the entry gathered is a zero of the other sign than NumPy's: -(c - x) + d with
# c, d = -0.0, -0.0 is x for every x but NaN; with -0.0, +0.0 it is +0.0 for x = -0.0; with
# +0.0, -0.0 it is -0.0 for x = +0.0.  NumPy's sign, and slope 1 (a where() would cut the
# derivative).
_KEEP, _PLUS_ZERO, _MINUS_ZERO = 0, 1, 2
_C = np.array([-0.0, -0.0, 0.0])
_D = np.array([-0.0, 0.0, -0.0])


def _plan(*args, op, **flags):
    """One integer array for ``concrete``: the positions, then per part (real, imaginary)
    of each output the sign its zero needs (_KEEP: none)."""
    ref, src, pos = _PLANS[op](*args, **flags)
    ref = np.ravel(ref)
    got = np.ravel(src).astype(ref.dtype, copy=False)[pos]
    out = np.zeros((1 + len(_parts(ref)), ref.size), np.intp)
    out[0] = pos
    for j, (r, g) in enumerate(zip(_parts(ref), _parts(got))):
        if np.any((r != g) & ~(np.isnan(r) & np.isnan(g))):  # pragma: no cover - a bug
            raise AssertionError(f"wengert.rules.sets.{op}: values differ from NumPy's")
        flip = (r == 0) & (np.signbit(r) != np.signbit(g))
        out[1 + j, flip] = np.where(np.signbit(r[flip]), _MINUS_ZERO, _PLUS_ZERO)
    return out


def _signed(out, codes, shape):
    """``out`` with each zero given NumPy's sign (``codes`` from _plan), as -(c - out) + d."""
    if not np.any(codes):
        return out
    dt = _dtype(out)
    c, d = np.empty(codes.shape[1], dt), np.empty(codes.shape[1], dt)
    for code, cj, dj in zip(codes, _parts(c), _parts(d)):
        cj[...], dj[...] = _C[code], _D[code]
    return -(c.reshape(shape) - out) + d.reshape(shape)


# -- building the traced results ------------------------------------------------------------------
def _arg(a):
    """A list holding traced values becomes one traced array."""
    return array(a) if isinstance(a, (list, tuple)) and _traced(a) else a


def _flat(a, dt):
    """``ravel(a)`` in dtype ``dt`` (NumPy's promotion when it joins the inputs)."""
    if isinstance(a, Tracer):
        r = ravel(a)
        return r if _dtype(r) == dt else astype(r, dt)
    return np.ravel(np.asarray(a)).astype(dt, copy=False)


def _result_dtype(np_fn, *args):
    """The dtype of NumPy's result: it does not depend on the values (but a Python scalar is
    weak in some of these functions and not in others)."""
    r = np_fn(*(_plain(a) for a in args))
    return (r[0] if isinstance(r, tuple) else r).dtype


def _build(op, np_fn, sources, *args, **flags):
    """NumPy's result of ``np_fn(*args, **flags)``, each entry gathered from the traced
    ``sources`` (flattened, joined) where _plan finds it."""
    plan = concrete(_plan, *args, op=op, **flags)
    pos, codes = plan[0], plan[1:]
    if op == "sort_complex":  # the only result that is not 1-D: the input's shape
        pos = pos.reshape(np.shape(_plain(args[0])))
    dt = _result_dtype(np_fn, *args, *flags.values())
    sizes = [int(np.size(_plain(s))) for s in sources]
    while len(sources) > 1 and (pos.size == 0 or pos.max() < sum(sizes[:-1])):
        sources, sizes = sources[:-1], sizes[:-1]  # only join the inputs reached
    flats = [_flat(s, dt) for s in sources]
    src = flats[0] if len(flats) == 1 else concatenate(flats)
    out = gather(src, pos) if isinstance(src, Tracer) else src[pos]
    return _signed(out, codes, pos.shape)


def union1d(ar1, ar2):
    """``np.union1d``: each value from its first occurrence in ``ar1`` then ``ar2``
    (flattened)."""
    ar1, ar2 = _arg(ar1), _arg(ar2)
    if not _traced(ar1, ar2):
        return np.union1d(ar1, ar2)
    return _build("union1d", np.union1d, (ar1, ar2), ar1, ar2)


def setdiff1d(ar1, ar2, assume_unique=False):
    """``np.setdiff1d``: values from their first occurrence in ``ar1``; ``ar2`` only decides
    which values are dropped, so it gets no derivative."""
    ar1, ar2 = _arg(ar1), _arg(ar2)
    if not _traced(ar1, ar2):
        return np.setdiff1d(ar1, ar2, assume_unique)
    return _build("setdiff1d", np.setdiff1d, (ar1,), ar1, ar2,
                  assume_unique=bool(assume_unique))


def setxor1d(ar1, ar2, assume_unique=False):
    """``np.setxor1d``: each value from its first occurrence in the input that holds it."""
    ar1, ar2 = _arg(ar1), _arg(ar2)
    if not _traced(ar1, ar2):
        return np.setxor1d(ar1, ar2, assume_unique)
    return _build("setxor1d", np.setxor1d, (ar1, ar2), ar1, ar2,
                  assume_unique=bool(assume_unique))


def _intersect_indices(ar1, ar2, assume_unique, which):
    return np.intersect1d(ar1, ar2, assume_unique, True)[which]


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False):
    """``np.intersect1d``: a common value is in both inputs, but its derivative goes to
    ``ar1`` only, at its first occurrence (NumPy's ``ar1_indices``, and JAX's choice): as
    with ``unique``, one entry carries each output.  The indices are NumPy's, plain."""
    ar1, ar2 = _arg(ar1), _arg(ar2)
    if not _traced(ar1, ar2):
        return np.intersect1d(ar1, ar2, assume_unique, return_indices)
    flags = dict(assume_unique=bool(assume_unique), return_indices=bool(return_indices))
    out = _build("intersect1d", np.intersect1d, (ar1, ar2), ar1, ar2, **flags)
    if not return_indices:
        return out
    return (out, *(concrete(_intersect_indices, ar1, ar2, assume_unique=flags["assume_unique"],
                            which=j) for j in (1, 2)))


# -- the array-API unique functions ---------------------------------------------------------------
_RESULT = {name: type(getattr(np, name)(np.zeros(1)))
           for name in ("unique_counts", "unique_inverse", "unique_all")}


def _unique_field(x, kind, field):
    return getattr(getattr(np, kind)(x), field)


def _unique(x, kind):
    x = _arg(x)
    np_fn = getattr(np, kind)
    if not _traced(x):
        return np_fn(x)
    host_values(x, f"wnp.{kind}")
    values = _build("unique", lambda x, kind: _values(np_fn(x)), (x,), x, kind=kind)
    if kind == "unique_values":
        return values
    rest = (concrete(_unique_field, x, kind=kind, field=f) for f in _RESULT[kind]._fields[1:])
    return _RESULT[kind](values, *rest)


def _values(r):
    return r if isinstance(r, np.ndarray) else r.values


def unique_values(x, /):
    """``np.unique_values`` (NumPy's order, NaNs kept apart): each value from its first
    occurrence, each NaN from its own entry."""
    return _unique(x, "unique_values")


def unique_counts(x, /):
    """``np.unique_counts``: traced ``values`` (as ``unique_values``), plain ``counts``."""
    return _unique(x, "unique_counts")


def unique_inverse(x, /):
    """``np.unique_inverse``: traced ``values``, plain ``inverse_indices``."""
    return _unique(x, "unique_inverse")


def unique_all(x, /):
    """``np.unique_all``: traced ``values`` (from the entries ``indices`` points at), plain
    ``indices``, ``inverse_indices`` and ``counts``."""
    return _unique(x, "unique_all")


# -- sort_complex ---------------------------------------------------------------------------------
def sort_complex(a):
    """``np.sort_complex``: a gather by NumPy's sort (along the last axis), in NumPy's
    complex dtype (complex128 also for float32).  Equal values are matched in order."""
    a = _arg(a)
    if not _traced(a):
        return np.sort_complex(a)
    z = a
    if _dtype(a).kind != "c":
        # adding -0.0-0.0j is NumPy's cast to complex to the bit (x + -0.0 is x, even for
        # -0.0) and leaves a real cotangent (astype would warn, discarding its imaginary part)
        cdt = np.result_type(np.sort_complex(np.zeros(1, _dtype(a))))
        z = a + cdt.type(complex(-0.0, -0.0))
    return _build("sort_complex", np.sort_complex, (z,), a)
