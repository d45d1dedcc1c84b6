"""Indexing: ``x[idx]``, ``x[idx] = v``, take, sort, ... on two pairs of linear primitives.

* ``getitem_basic`` / ``scatter_basic``: ints, slices (with steps), ``...`` and
  ``None``.  The tangent is the same slice of the tangent (a view, no copy); the
  cotangent is placed into zeros.  Each is the other's adjoint.
* ``gather`` / ``scatter_add``: everything else (integer arrays, boolean masks,
  ``take``, ``sort``...).  The index is turned, once, into flat positions into
  ``x.ravel()``; the adjoint adds cotangents back at those positions, so repeated
  indices accumulate (``np.add.at``).  Each is the other's adjoint.

An index of integer or boolean dtype carries no derivative, so a traced one (``astype(int)``,
a comparison, ``argmax``) is used by its primal value: under the eager engines it is read off;
inside a graph being traced, an integer array indexing one axis (``x[i]``) is recorded as a
traced index (``take_dynamic``: the compiled program takes each call's own positions), and
everything else (masks, slice bounds, several index arrays) is guarded, since there its value
decides the program's shapes.  A traced float value inside an index raises ``TypeError``.

``x[idx] = v`` on a traced array is functional underneath (``set_basic`` /
``set_flat``: a copy of ``x`` with ``v`` written at ``idx``): the tracer object is
rebound to the new node, so every reference to it sees the new value, as with
NumPy.  ``x op= v`` updates a traced array in place the same way, and
``x[idx] op= v`` works as in NumPy.  Views (basic slices, transposes, reshapes)
are tracked: writing through a view (``y = x[1:3]; y[0] = v`` or ``y += v``)
raises ``ValueError``, as API.md promises, and so does using a view whose base
was modified afterwards: neither gives a silently wrong value or derivative.
"""
import weakref

import numpy as np

from ..arrays import add_at_flat, asarray as _asarray, copy_of, dtype_of, implements, \
    is_foreign, zeros
from ..core import Tracer, lift, ndim_of, primitive, shape_of
from . import patterns
from .lowering import Lowering
from .conversion import astype
from .elementwise import where
from .nondiff import _plain, concrete, concrete_or_batched, strip_eager
from .indices import _batched_index, _has_tracer, _recorded_positions, normalize_index, \
    static_index  # noqa: F401 (_has_tracer, static_index: for the modules importing them here)
from .shape import broadcast_to, reshape, transpose
from .take import put_in_library, same_library, take_along_in_library, take_dynamic, take_in_library, take_ordered

__all__ = ["getitem_basic", "scatter_basic", "gather", "scatter_add", "set_basic", "set_flat",
           "getitem", "setitem",
           "take", "take_along_axis", "compress", "extract", "sort", "select", "index_update",
           "partition"]


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _flat_positions(shape, idx):
    """Positions into ``x.ravel()`` that ``x[idx]`` reads (an int array of the result's shape)."""
    return np.arange(_prod(shape), dtype=np.intp).reshape(shape)[idx]


# -- basic indexing: slicing --------------------------------------------------------------------
def _index_text(idx, newaxis=False):
    """A static basic index as source (ints, slices, ``...``; ``None`` if newaxis) or None."""
    parts = []
    for e in idx if type(idx) is tuple else (idx,):
        if type(e) is int:
            parts.append(str(e))
        elif e is None and newaxis:
            parts.append("None")
        elif e is Ellipsis:
            parts.append("...")
        elif type(e) is slice and all(b is None or type(b) is int
                                      for b in (e.start, e.stop, e.step)):
            parts.append(":".join("" if b is None else str(b) for b in (e.start, e.stop, e.step)))
        else:
            return None
    return ", ".join(parts) if parts else None


# Numba (a compiled scan's loop, wengert/graph/numba_array.py): basic indexing as written;
# a form of several statements: a function from the name to assign to its statements
def _nb_getitem(a, p, v, out):
    text = _index_text(p["idx"], newaxis=True)  # (Numba reads x[:, None] as NumPy does)
    return None if text is None or not np.ndim(v[0]) else f"{a[0]}[{text}]"


def _nb_scatter(a, p, v, out):
    text = _index_text(p["idx"], newaxis=True)
    if text is None or type(out) is not np.ndarray:
        return None
    region = np.broadcast_to(np.empty((), out.dtype), out.shape)[p["idx"]]
    # an array region: the generated module's copy helper _copy<ndim> (wengert/graph/
    # kernel_cache.py), as slice assignment compiles seconds of Numba's error formatting
    copy = np.ndim(region) and np.shape(v[0]) == np.shape(region)
    if not copy and text != _index_text(p["idx"]):
        return None  # a new axis: written only through the view the copy helper is given
    return lambda o: [f"{o} = np.zeros({tuple(out.shape)!r}, np.{out.dtype.name})",
                      f"_copy{np.ndim(region)}({o}[{text}], {a[0]})" if copy else
                      f"{o}[{text}] = {a[0]}"]


# compiled code may read x[idx] inside a fused kernel (the result is ``x[idx]`` for a static
# basic index) ...
# Reading and writing are linear in the arrays and move elements (the implementation on element
# numbers says where each comes from: their sparsity); scatter_add adds the ones sent to the
# same place. wg.vmap maps a batch through them as a batch of tangents (linear).
# (compiled code may read x[idx] inside a fused kernel: the result is ``x[idx]`` for a static
# basic index)
@primitive(nargs=1, linear=True, sparsity=patterns.MOVES,
           lowering=Lowering(array=_nb_getitem, role="gather_at_index"))
def getitem_basic(x, idx):
    return x[idx]


# compiled code may fuse a sum of these into one buffer: gx[idx] += g
@primitive(nargs=1, linear=True, sparsity=patterns.MOVES,
           lowering=Lowering(array=_nb_scatter, role="scatter_into_zeros"))
def scatter_basic(g, shape, idx):
    """Zeros of ``shape`` with ``g`` written at ``idx`` (a basic index)."""
    out = zeros(shape, dtype_of(g), like=g)  # in g's array library (CuPy, Dask...)
    if is_foreign(g):
        g, idx = _without_newaxes(g, len(shape), idx)
    out[idx] = g
    return out


def _without_newaxes(g, nd, idx):
    """``g`` (shaped as ``out[idx]``, ``out`` of ``nd`` axes) without the unit axes that
    ``None`` entries of ``idx`` made, and ``idx`` without them: Dask refuses ``None`` in
    the index of an assignment, which NumPy takes."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if not any(i is None for i in idx):
        return g, idx
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    drop, pos = [], 0
    for i in idx:
        if i is None:
            drop.append(pos)
            pos += 1
        elif i is Ellipsis:
            pos += nd - used
        elif isinstance(i, slice):
            pos += 1
    gs = shape_of(g)
    keep = tuple(d for k, d in enumerate(gs) if k not in drop)
    return g.reshape(keep), tuple(i for i in idx if i is not None)




@getitem_basic.frule(symbolic_zeros=True)
def _getitem_basic_jvp(primals, tangents, idx):
    (x,), (dx,) = primals, tangents
    ans = getitem_basic(x, idx)
    if dx is None:
        return ans, None
    return ans, getitem_basic(dx, idx)


@getitem_basic.rrule
def _getitem_basic_vjp(x, idx):
    # a plain primal (no outer trace): NumPy's own x[idx], without a second dispatch
    ans = x[idx] if type(x) is np.ndarray else getitem_basic(x, idx)
    xs = shape_of(x)

    def pullback(g):
        if type(g) is np.ndarray:  # a plain cotangent: the rule's own impl, undispatched
            return (_scatter_basic_impl(g, xs, idx),)
        return (scatter_basic(g, xs, idx),)
    return ans, pullback


_scatter_basic_impl = scatter_basic.impl


@scatter_basic.frule(symbolic_zeros=True)
def _scatter_basic_jvp(primals, tangents, shape, idx):
    (g,), (dg,) = primals, tangents
    ans = scatter_basic(g, shape, idx)
    if dg is None:
        return ans, None
    return ans, scatter_basic(dg, shape, idx)


@scatter_basic.rrule
def _scatter_basic_vjp(g, shape, idx):
    ans = scatter_basic(g, shape, idx)

    def pullback(h):
        return (getitem_basic(h, idx),)
    return ans, pullback


# -- gather / scatter-add by flat positions -------------------------------------------------------
# the fuser's fact: reads ``x``'s elements at the flat positions ``flat`` past ``lead`` axes
@primitive(nargs=1, linear=True, sparsity=patterns.MOVES, lowering=Lowering(role="gather_flat"))
def gather(x, flat, lead=0):
    """``x.reshape(x.shape[:lead] + (-1,))[..., flat]``: past ``lead`` axes (a batch's)."""
    x = _asarray(x)
    lead, axis = x.shape[:lead], lead
    if is_foreign(x):  # a CuPy or Dask array stays one (Dask indexes by one 1-d array)
        fl = np.asarray(flat)
        out = np.take(x.reshape(lead + (-1,)), fl.ravel(), axis=axis)
        return out.reshape(lead + fl.shape)
    x = x.reshape(lead + (-1,))
    if type(flat) is np.ndarray and flat.dtype.kind in "iu":
        return np.take(x, flat, axis=-1)  # the same elements, faster than indexing
    return x[..., flat]


@primitive(nargs=1, linear=True, sparsity=patterns.ScatterAdd())
def scatter_add(g, flat, shape, lead=0):
    """Zeros of ``g.shape[:lead] + shape``; ``g`` added at the flat positions (repeats add
    up)."""
    g = _asarray(g)
    lead = g.shape[:lead]
    size = _prod(shape)
    nlead = _prod(lead)
    fl = np.asarray(flat).ravel()
    gv = g.reshape((nlead, fl.size))
    if is_foreign(g):  # in g's library (CuPy, Dask), which may have no np.add.at
        if fl.size and np.unique(fl).size == fl.size:
            out = zeros((nlead, size), g.dtype, like=g)
            out[:, fl] = gv
        else:  # repeated positions add up: put_dynamic's weighted bincount, in g's library
            out = put_in_library(*same_library(gv, fl), size, 1)
        return out.reshape(lead + tuple(shape))
    # one bincount, repeats or not: testing the positions for repeats (np.unique sorts them)
    # cost more than the sum itself
    if nlead == 1:
        out = add_at_flat(fl % size if fl.size and fl.min() < 0 else fl, gv.ravel(), size)
    else:
        pos = (np.arange(nlead, dtype=np.intp)[:, None] * size + fl[None, :] % size).ravel()
        out = add_at_flat(pos, gv.ravel(), nlead * size)
    out = out.astype(g.dtype if g.dtype.kind in "fc" else np.float64, copy=False)
    return out.reshape(lead + tuple(shape))


@gather.frule(symbolic_zeros=True)
def _gather_jvp(primals, tangents, flat, lead=0):
    (x,), (dx,) = primals, tangents
    ans = gather(x, flat, lead)
    if dx is None:
        return ans, None
    return ans, gather(dx, flat, lead)


@gather.rrule
def _gather_vjp(x, flat, lead=0):
    ans = gather(x, flat, lead)
    xs = shape_of(x)

    def pullback(g):
        return (scatter_add(g, flat, xs[lead:], lead),)
    return ans, pullback


@scatter_add.frule(symbolic_zeros=True)
def _scatter_add_jvp(primals, tangents, flat, shape, lead=0):
    (g,), (dg,) = primals, tangents
    ans = scatter_add(g, flat, shape, lead)
    if dg is None:
        return ans, None
    return ans, scatter_add(dg, flat, shape, lead)


@scatter_add.rrule
def _scatter_add_vjp(g, flat, shape, lead=0):
    ans = scatter_add(g, flat, shape, lead)

    def pullback(h):
        return (gather(h, flat, lead),)
    return ans, pullback


# -- view tracking ----------------------------------------------------------------------------------
_views_of = {}  # id(base) -> (weakref(base), [weakref(view), ...])
_base_of = {}   # id(view) -> (weakref(view), weakref(base), writer or None if read-only)


def _drop_base(bid, ref):
    ent = _views_of.get(bid)
    if ent is not None and ent[0] is ref:
        _views_of.pop(bid, None)  # (a weakref callback: it may run in any thread)


def _drop_view(vid, ref):
    ent = _base_of.get(vid)
    if ent is not None and ent[0] is ref:
        _base_of.pop(vid, None)


def index_writer(idx):
    """How a view ``base[idx]`` (basic index) writes its new value back into ``base``."""
    def write(base, new):
        return index_update(base, idx, new)
    write.idx = idx
    return write


def reshape_writer(base, new):
    return reshape(new, shape_of(base))


def transpose_writer(perm):
    inv = tuple(int(i) for i in np.argsort(perm))

    def write(base, new):
        return transpose(new, inv)
    return write


def register_view(view, base, writer=None):
    """Record that ``view`` shares memory with ``base`` (as NumPy's view would).

    ``writer(base, new_view_value)`` gives the new value of ``base`` when the view is
    assigned into (``None``: a read-only view, such as ``np.diagonal``'s).
    """
    if not isinstance(view, Tracer) or not isinstance(base, Tracer) or view is base:
        return view
    bid = id(base)
    ent = _views_of.get(bid)
    if ent is None or ent[0]() is not base:
        ent = (weakref.ref(base, lambda r, bid=bid: _drop_base(bid, r)), [])
        _views_of[bid] = ent
    vid = id(view)
    vref = weakref.ref(view, lambda r, vid=vid: _drop_view(vid, r))
    lst = ent[1]
    lst.append(vref)
    if len(lst) >= 64 and (len(lst) & (len(lst) - 1)) == 0:  # prune now and then
        lst[:] = [r for r in lst if r() is not None]
    _base_of[vid] = (vref, ent[0], writer)
    return view


def _live_base(x):
    """``(base, writer)`` if ``x`` is a view of a base that is still alive, else ``None``."""
    ent = _base_of.get(id(x))
    if ent is None or ent[0]() is not x:
        return None
    base = ent[1]()
    return None if base is None else (base, ent[2])


_STALE_MSG = (
    "this traced array is a view (a slice such as x[1:3] or x[0], x.T, a reshape) of an "
    "array that was later modified with x[idx] = v, so its value is out of date and its "
    "derivative would be wrong. Take a copy before modifying the base (y = wnp.copy(x[1:3])), "
    "or index the base again after the assignment.")

_stale_classes = {}


def _stale_class(cls):
    sc = _stale_classes.get(cls)
    if sc is None:
        def value(self):
            raise ValueError(_STALE_MSG)

        def _repr(self):
            return f"<stale view ({cls.__name__}): {_STALE_MSG}>"
        sc = type(f"Stale{cls.__name__}", (cls,), {"__slots__": (), "value": property(value),
                                                    "__repr__": _repr, "_stale": True})
        sc = _stale_classes.setdefault(cls, sc)  # (one class per cls, whichever thread made it)
    return sc


def _invalidate_views(base):
    ent = _views_of.pop(id(base), None)
    if ent is None or ent[0]() is not base:
        return
    for r in ent[1]:
        v = r()
        if v is None or getattr(type(v), "_stale", False):
            continue
        v.__class__ = _stale_class(type(v))
        _invalidate_views(v)


# -- x[idx] and x[idx] = v ------------------------------------------------------------------------------
def getitem(x, idx):
    """``x[idx]`` for a (possibly traced) array ``x``."""
    if isinstance(x, Tracer) and _plain_basic(idx):
        # x[k], x[a:b]: already what normalize_index would make of it (a loop body reads
        # rows and slices of its weights this way many times per step: issue 32's LSTM)
        nidx = (idx,)
        ans = getitem_basic(x, nidx)
        if isinstance(_plain(ans), np.ndarray):
            register_view(ans, x, index_writer(nidx))
        return ans
    if isinstance(idx, Tracer) and _batched_index(idx):
        return take_dynamic(x, idx)  # each example's own rows (wg.vmap)
    if _recorded_positions(idx) and (isinstance(x, Tracer) or hasattr(x, "shape")) \
            and ndim_of(x) >= 1:
        return take_dynamic(x, strip_eager(idx))  # traced positions: no guard, no re-trace
    nidx, adv = normalize_index(idx)
    if not isinstance(x, Tracer):
        return np.asarray(x)[nidx]
    if not adv:
        ans = getitem_basic(x, nidx)
        if isinstance(_plain(ans), np.ndarray):  # NumPy gives a view (not a scalar copy)
            register_view(ans, x, index_writer(nidx))
        return ans
    return gather(x, _flat_positions(shape_of(x), nidx))


def read_view(ans, x, idx):
    """Note ``ans = x[idx]`` as a view, as getitem does (for an engine's own shortcut)."""
    if isinstance(_plain(ans), np.ndarray):
        register_view(ans, x, index_writer(idx))
    return ans


def _plain_basic(idx):
    """Whether ``idx`` is a Python int (not a bool) or a slice of ints and ``None``s."""
    t = type(idx)
    if t is int:
        return True
    if t is not slice:
        return False
    return all(b is None or type(b) is int for b in (idx.start, idx.stop, idx.step))


@primitive(nargs=2, linear=True, sparsity=patterns.MOVES)
def set_basic(x, v, idx):
    """A copy of ``x`` with ``[idx] = v`` (a basic index; ``v`` has the selection's shape)."""
    out = copy_of(x)
    out[idx] = v
    return out


@set_basic.frule(symbolic_zeros=True)
def _set_basic_jvp(primals, tangents, idx):
    x, v = primals
    dx, dv = tangents
    ans = set_basic(x, v, idx)
    if dx is None and dv is None:
        return ans, None
    if dx is None:
        dx = np.zeros(shape_of(x), dtype=np.asarray(_plain(x)).dtype)
    return ans, set_basic(dx, 0.0 if dv is None else dv, idx)


@set_basic.rrule(needs=True)
def _set_basic_vjp(x, v, needs, idx):
    ans = set_basic(x, v, idx)

    def pullback(g):
        return (set_basic(g, 0.0, idx) if needs[0] else None,
                getitem_basic(g, idx) if needs[1] else None)
    return ans, pullback


@primitive(nargs=2, linear=True, sparsity=patterns.MOVES)
def set_flat(x, vals, flat, lead=0):
    """A copy of ``x`` with ``vals`` written at flat positions (after ``lead`` axes)."""
    axis = lead
    if is_foreign(x):  # no write-through views (Dask): assign into a flat copy
        lead, fl = shape_of(x)[:axis], np.asarray(flat).ravel()
        n = _prod(lead)
        out = x.reshape((n, -1)).copy()
        vals = np.broadcast_to(vals, lead + np.shape(flat))
        out[:, fl] = np.reshape(vals, (n, fl.size))
        return out.reshape(shape_of(x))
    out = np.array(x, copy=True)
    out.reshape(out.shape[:axis] + (-1,))[..., flat] = vals
    return out


@set_flat.frule(symbolic_zeros=True)
def _set_flat_jvp(primals, tangents, flat, lead=0):
    x, vals = primals
    dx, dv = tangents
    ans = set_flat(x, vals, flat, lead)
    if dx is None and dv is None:
        return ans, None
    if dx is None:
        dx = np.zeros(shape_of(x), dtype=np.asarray(_plain(x)).dtype)
    return ans, set_flat(dx, 0.0 if dv is None else dv, flat, lead)


@set_flat.rrule(needs=True)
def _set_flat_vjp(x, vals, needs, flat, lead=0):
    ans = set_flat(x, vals, flat, lead)

    def pullback(g):
        return (set_flat(g, 0.0, flat, lead) if needs[0] else None,
                gather(g, flat, lead) if needs[1] else None)
    return ans, pullback


def index_update(x, idx, v):
    """A new array: ``x`` with ``x[idx] = v`` (the functional form; ``x`` is unchanged)."""
    nidx, adv = normalize_index(idx)
    if not isinstance(x, Tracer) and not isinstance(v, Tracer):
        out = copy_of(x)
        out[nidx] = v
        return out
    xs = shape_of(x)
    dt = dtype_of(_plain(x))
    sel = np.broadcast_to(np.empty((), dtype=np.int8), xs)[nidx].shape
    if isinstance(v, Tracer):
        if v.dtype != dt:
            v = astype(v, dt)
        if shape_of(v) != sel:
            v = broadcast_to(v, sel)
    else:  # (a CuPy or Dask value stays one)
        v = np.broadcast_to(v.astype(dt) if is_foreign(v) else np.asarray(v, dtype=dt), sel)
    if not adv:
        return set_basic(x, v, nidx)
    owner = np.full(xs, -1, dtype=np.intp)
    owner[nidx] = np.arange(_prod(sel), dtype=np.intp).reshape(sel)
    written = np.flatnonzero(owner >= 0)
    src = owner.ravel()[written]  # the entry of v that won (the last write, as NumPy)
    vals = gather(v, src) if isinstance(v, Tracer) else np.take(v.reshape(-1), src)
    return set_flat(x, vals, written)


def _slot_names(cls):
    for c in cls.__mro__:
        s = c.__dict__.get("__slots__", ())
        if isinstance(s, str):
            s = (s,)
        for name in s:
            if name not in ("__weakref__", "__dict__"):
                yield name


def _rebind(x, new):
    """Make the tracer object ``x`` stand for ``new`` (same engine), as NumPy's in-place
    update would make every reference to ``x`` see the new values."""
    if type(new) is not type(x) or new._trace is not x._trace:
        raise TypeError(
            "an in-place update (x[idx] = v, x += v) of an array with a value traced by a "
            "transform that x is not part of (e.g. an inner wg.grad closing over an outer "
            "array). Use the functional forms: wnp.index_update(x, idx, v), x = x + v.")
    for name in _slot_names(type(x)):
        object.__setattr__(x, name, getattr(new, name))
    if hasattr(x, "__dict__") and hasattr(new, "__dict__"):
        x.__dict__.update(new.__dict__)
    _invalidate_views(x)


_WRITE_THROUGH_MSG = (
    "writing through a view of a traced array (y = x[1:3]; y[0] = v, y += v, or "
    "x.T[0] = v) is not supported: it would give a silently wrong derivative. Assign "
    "into the base instead (x[1] = v, x[1:3] += v), or take a copy first "
    "(y = wnp.copy(x[1:3])) if the base should not change.")

_READ_ONLY_MSG = ("assignment destination is read-only (a view such as wnp.diagonal(x) "
                  "or wnp.broadcast_to(x)); assign into a copy: y = wnp.copy(view)")

_pending = {}  # id(base) -> (weakref(base), weakref(new view value), index): x[idx] op= v
_pending_classes = {}


def _pending_class(cls):
    """The class of a base whose view ``x[idx]`` was just updated in place: Python is
    about to write it back (``x[idx] op= v``); any other use of the base raises."""
    pc = _pending_classes.get(cls)
    if pc is None:
        def value(self):
            raise ValueError(_WRITE_THROUGH_MSG)
        pc = type(f"Pending{cls.__name__}", (cls,), {"__slots__": (), "value": property(value),
                                                      "_pending": True})
        pc = _pending_classes.setdefault(cls, pc)
    return pc


def _check_updates_in_place(x):
    """An engine whose tracers cannot be rebound (Taylor's lazy jets) refuses by name."""
    if not getattr(x, "updates_in_place", True):
        raise NotImplementedError(
            f"an in-place update (x[idx] = v, x += v) of a value traced by "
            f"{x.in_place_refusal}. Use the functional forms: x = x + v, "
            "x = wnp.index_update(x, idx, v).")


def _assign(x, new):
    """``x`` takes the value ``new`` (its shape and dtype): the tracer is rebound, and
    every view of it goes stale.  ``x`` itself must not be a view of another array."""
    _check_updates_in_place(x)
    x.value  # a stale view raises here  # noqa: B018
    ent = _live_base(x)
    if ent is not None:
        raise ValueError(_READ_ONLY_MSG if ent[1] is None else _WRITE_THROUGH_MSG)
    _rebind(x, new)


def setitem(x, idx, v):
    """``x[idx] = v`` on a traced array: rebinds ``x`` to the updated value's node."""
    pend = _pending.pop(id(x), None)
    if pend is not None and pend[0]() is x:
        x.__class__ = type(x).__mro__[1]  # the write-back Python makes for x[idx] op= v
        nidx, adv = normalize_index(idx)
        if pend[1]() is not v or adv or not _same_index(pend[2], nidx):
            x.__class__ = _pending_class(type(x))
            raise ValueError(_WRITE_THROUGH_MSG)
    _assign(x, index_update(x, idx, v))


def _same_index(a, b):
    return len(a) == len(b) and all(type(i) is type(j) and i == j for i, j in zip(a, b))


def inplace(op, x, v):
    """``x op= v``: a traced array is updated in place (every alias of it sees the new
    value, as with NumPy); a traced scalar gives a new value (as a Python float).

    On a view ``x[idx]`` this is the first half of Python's ``x[idx] op= v``: the new
    value is returned unwritten, and the base refuses any use until Python writes it
    back with ``x[idx] = new``.  Any other in-place update of a view raises.
    """
    if ndim_of(x) == 0:
        return op(x, v)
    _check_updates_in_place(x)
    x.value  # a stale view raises here  # noqa: B018
    ent = _live_base(x)
    if ent is not None and (ent[1] is None or getattr(ent[1], "idx", None) is None):
        raise ValueError(_READ_ONLY_MSG if ent[1] is None else _WRITE_THROUGH_MSG)
    new = op(x, v)
    if shape_of(new) != shape_of(x):
        raise ValueError(f"non-broadcastable output operand with shape {shape_of(x)} doesn't "
                         f"match the broadcast shape {shape_of(new)}")
    dt = np.asarray(_plain(x)).dtype
    if np.asarray(_plain(new)).dtype != dt:
        new = astype(new, dt)
    if ent is not None:
        base = ent[0]
        _pending[id(base)] = (weakref.ref(base), weakref.ref(new), ent[1].idx)
        base.__class__ = _pending_class(type(base))
        return new
    _assign(x, new)
    return x


def sort_inplace(x, axis=-1, kind=None, order=None, *, stable=None):
    """``x.sort()``: sorts a traced array in place, as ``ndarray.sort``."""
    if ndim_of(x) == 0:
        raise np.exceptions.AxisError("axis -1 is out of bounds for array of dimension 0")
    _assign(x, sort(x, axis=axis, kind=kind, order=order))


# -- functions built on gather ------------------------------------------------------------------------
def _axis(axis, nd):
    if not -nd <= axis < max(nd, 1):
        raise np.exceptions.AxisError(axis, nd)
    return axis % nd if nd else 0


def positions(a):
    """The flat position of each entry of ``a``, in ``a``'s shape: NumPy's own rearranging
    functions run on these give the gather that rearranges a traced ``a`` the same way."""
    return np.arange(_prod(shape_of(a)), dtype=np.intp).reshape(shape_of(a))


def take(a, indices, axis=None, out=None, mode="raise"):
    if out is not None:
        raise NotImplementedError("wnp.take with out= is not supported on traced values")
    if isinstance(indices, Tracer) and mode == "raise" and _batched_index(indices):
        if axis is None:  # each example's own positions (wg.vmap), into the flattened array
            a, axis = (reshape(a, (-1,)) if isinstance(a, Tracer) else np.ravel(a)), 0
        return take_dynamic(a, indices, axis % ndim_of(a))
    if is_foreign(indices) and mode == "raise":  # positions found in a CuPy or Dask library
        return take_in_library(a, indices, axis)
    indices = static_index(indices, "take")
    if not isinstance(a, Tracer):
        return np.take(a, indices, axis=axis, mode=mode)
    pos = positions(a)
    return gather(a, np.take(pos, indices, axis=axis, mode=mode))


def take_along_axis(arr, indices, axis=-1):
    arr = lift(arr)
    if isinstance(indices, Tracer) and (isinstance(arr, Tracer) or indices.dtype.kind in "biu"):
        indices = static_index(indices, "take_along_axis")
    if not isinstance(arr, Tracer):
        return np.take_along_axis(arr, indices, axis=axis)
    pos = positions(arr)
    if axis is None:
        pos = pos.ravel()
    if is_foreign(indices):  # positions in a CuPy-like library (an argsort there)
        return take_along_in_library(arr, pos, indices, axis)
    return gather(arr, np.take_along_axis(pos, np.asarray(indices), axis=axis))


def compress(condition, a, axis=None, out=None):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.compress(condition, a, axis=axis, out=out)
    pos = positions(a)
    return gather(a, np.compress(concrete(np.asarray, condition), pos, axis=axis))


def extract(condition, arr):
    arr = lift(arr)
    if not isinstance(arr, Tracer):
        return np.extract(condition, arr)
    pos = positions(arr)
    return gather(arr, np.extract(concrete(np.asarray, condition), pos))


def sort(a, axis=-1, kind=None, order=None, stable=None):
    """Differentiable sort: a gather by ``argsort`` (ties keep the derivative of each entry)."""
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.sort(a, axis=axis, kind=kind, order=order, stable=stable)
    pos = positions(a)
    v = implements(a, np.argsort, "wnp.sort")  # (Dask has none: it would compute a)
    if axis is None:
        v, pos = reshape(a, (-1,)), pos.ravel()
        axis = -1
    perm = concrete_or_batched(np.argsort, v, axis=axis, kind=kind or "stable")
    return _take_order(a, pos, perm, axis)


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """Differentiable partition: a gather by ``argpartition``."""
    if not isinstance(a, Tracer):
        return np.partition(a, kth, axis=axis, kind=kind, order=order)
    pos = positions(a)
    v = implements(a, np.argpartition, "wnp.partition")
    if axis is None:
        v, pos = reshape(a, (-1,)), pos.ravel()
        axis = -1
    perm = concrete_or_batched(np.argpartition, v, kth, axis=axis, kind=kind)
    return _take_order(a, pos, perm, axis)


def _take_order(a, pos, perm, axis):
    """``a`` gathered at ``take_along_axis(pos, perm, axis)`` (``pos``: ``a``'s positions);
    a traced ``perm`` (one per example) or a CuPy one, by flat positions computed from it."""
    if isinstance(perm, Tracer) or is_foreign(perm):
        return take_ordered(a, pos, perm, axis)
    return gather(a, np.take_along_axis(pos, perm, axis=axis))


def select(condlist, choicelist, default=0):
    if not _has_tracer(list(choicelist)) and not isinstance(default, Tracer):
        return np.select(condlist, choicelist, default)
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    out = default
    for c, x in reversed(list(zip(condlist, choicelist))):
        out = where(strip_eager(c), x, out)
    return out


# wg.vmap: the batch axis leads; each index passes over it (one more leading axis)
_ALL = (slice(None),)


@getitem_basic.batching
def _getitem_basic_batch(args, batched, idx):
    return getitem_basic(args[0], _ALL + idx)


@scatter_basic.batching
def _scatter_basic_batch(args, batched, shape, idx):
    (g,) = args
    return scatter_basic(g, shape_of(g)[:1] + tuple(shape), _ALL + idx)


@gather.batching
def _gather_batch(args, batched, flat, lead=0):
    return gather(args[0], flat, lead + 1)


@scatter_add.batching
def _scatter_add_batch(args, batched, flat, shape, lead=0):
    return scatter_add(args[0], flat, shape, lead + 1)


def _written(x, v, batched, rank):
    """``x`` and the values ``v`` written into it, both with the batch axis in front: an
    unbatched ``x`` broadcast along it, a batched ``v`` padded after it to ``rank`` axes."""
    size = shape_of(x if batched[0] else v)[0]
    if not batched[0]:
        x = broadcast_to(x, (size,) + shape_of(x))
    if batched[1] and ndim_of(v) - 1 < rank:
        vs = shape_of(v)
        v = reshape(v, vs[:1] + (1,) * (rank - len(vs) + 1) + vs[1:])
    return x, v


@set_basic.batching
def _set_basic_batch(args, batched, idx):
    x, v = args
    sel = np.broadcast_to(np.empty((), np.int8), shape_of(x)[1 if batched[0] else 0:])[idx]
    x, v = _written(x, v, batched, np.ndim(sel))
    return set_basic(x, v, _ALL + idx)


@set_flat.batching
def _set_flat_batch(args, batched, flat, lead=0):
    x, v = args
    rank = lead + np.ndim(flat)
    x, v = _written(x, v, batched, rank)
    return set_flat(x, v, flat, lead + 1)
