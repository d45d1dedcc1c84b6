"""Batching: ``wg.vmap``, a function mapped over an axis in one vectorised pass.

A ``BatchTracer`` holds the values of all the examples at once, the batch axis leading
(the trace keeps it there: a mapped input's axis is moved to the front on entry, and to
``out_axes`` on exit).  Its ``shape`` is one example's.  Every primitive it meets is mapped
by the batching fact of its record (``Primitive.batch``), read here and nowhere else:

* ``"elementwise"``: NumPy's broadcasting, once a batched argument's axes are padded after
  the batch axis to the others' rank (the default for ``broadcasting``, ``ufunc`` and
  ``partials`` primitives);
* ``("stacked", c1, c2, ...)``: a gufunc over leading axes whose arguments have ``ci`` core
  axes (``matmul``: 2, 2; ``inv``: 2); the loop axes are padded as above;
* ``"axis"``: the arguments are batched and aligned, and ``axis``/``axes`` move past the
  batch axis (``None``, every axis, becomes every axis of one example);
* a rule ``fn(args, batched, **params)`` (``@p.batching``), giving a batched result.

A primitive with none of these runs once per example and the results are stacked
(``loop_primitives`` lists which; the tests pin that list).  Linearity is no batching
kind: rules take one direction's tangent (core.py), so a linear primitive, like any
other, says how its batch axis moves.

This is the only batching mechanism: ``jacobian``, ``jvp(batched=True)``, ``hessian``
and the compressed passes of ``sparse_jacobian``/``sparse_hessian`` are ``vmap`` over
``jvp`` or over a pullback.  Python control flow on a
batched value cannot be vectorised (each example may take another branch): it raises
``TypeError`` naming ``wnp.where``, as ``jax.vmap`` does.
"""
import inspect
import operator

import numpy as np

from . import numpy as wnp
from . import tree
from ._dispatch import install_fast_paths
from ._pickling import travels
from ._validate import check_callable
from .arrays import asarray, copy_of, is_foreign, ndim_of, shape_of, zeros_like_value
from ._dispatch import ArrayTracer
from .core import Primitive, Trace, Tracer, check_live, new_level

__all__ = ["vmap", "BatchTrace", "BatchTracer", "batching_kind", "BatchedControlFlowError",
           "one_example", "per_example", "per_example_call"]


class BatchedControlFlowError(TypeError):
    """A batched value met Python control flow or a conversion to a plain number."""


_CONTROL_FLOW = (
    "a batched value inside wg.vmap was used in Python control flow (if, while, bool(), "
    "and/or) or converted to a plain number or index ({what}): each example may need another "
    "branch or value, which one vectorised pass cannot take. Select elementwise with "
    "wnp.where(cond, a, b) instead (as jax.vmap requires), or loop over the examples in "
    "Python.")


def _control_flow(what):
    return BatchedControlFlowError(_CONTROL_FLOW.format(what=what))


class BatchTrace(Trace):
    """One ``vmap``: the batch size, and a level above the transforms it runs inside."""

    __slots__ = ("level", "finished_by", "size")
    tracer_name = "batched value"
    batched = True

    def __init__(self, level, size):
        self.level, self.size, self.finished_by = level, size, None

    def __repr__(self):
        return f"<BatchTrace level={self.level} size={self.size}>"

    def process(self, prim, args, params):
        if self.finished_by is not None:
            raise self.escaped(f"in {prim.name}")
        vals, batched = [], []
        plain = True  # every value a NumPy array or a float: no trace below to dispatch to
        for a in args:
            if type(a) is BatchTracer and a._trace is self:
                a = a.value
                batched.append(True)
            else:
                batched.append(isinstance(a, BatchTracer) and a._trace is self)
            vals.append(a)
            if type(a) not in _PLAIN:
                plain = False
        if plain and not params and prim.batch is None and prim.ufunc is not None \
                and _aligned(vals, batched):
            # an elementwise ufunc whose batched arguments need no padding: NumPy's own call
            return BatchTracer(prim.ufunc(*vals), self)
        out = apply_batching(prim, vals, tuple(batched), params, self.size)
        if prim.multiple_results:
            return tuple(BatchTracer(o, self) for o in out)
        return BatchTracer(out, self)

    # ``strip_eager`` (rules/nondiff.py) keeps the tracers of a trace with ``guard``: a value
    # computed off the record (``isnan`` in a nan-reduction) then reaches ``process`` as a
    # primitive, mapped per example, instead of being read off all the examples at once
    def guard(self, tracer):
        raise _control_flow("if or bool()")

    def guard_value(self, tracer):
        raise _control_flow("an index, a count or a sort order")


def one_example(x):
    """One example's plain value of ``x``: its primal with each ``vmap``'s batch axis dropped
    (what a function is traced on when it will be mapped over the batch)."""
    drop = 0
    while isinstance(x, Tracer):
        drop += isinstance(x, BatchTracer)
        x = x.value
    return x[(0,) * drop] if drop else x


class BatchTracer(ArrayTracer):
    """The values of every example, batch axis leading; its ``shape`` is one example's."""

    __slots__ = ("value", "_trace")

    def __init__(self, value, trace):
        self.value, self._trace = value, trace

    def __repr__(self):
        return f"BatchTracer({self.value!r})"

    @property
    def shape(self):
        return shape_of(self.value)[1:]

    @property
    def ndim(self):
        return ndim_of(self.value) - 1

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    def __bool__(self):
        raise _control_flow("if or bool()")

    def _converted(self, how, *args):
        raise _control_flow(getattr(how, "__name__", "a conversion"))

    def __array__(self, dtype=None, copy=None):
        raise _control_flow("a conversion to a plain NumPy array")


def _comparison(op):
    """``x < y`` on batched values: a batched boolean, compared one level down."""
    def method(self, other):
        tr = self._trace
        if isinstance(other, Tracer) and other._trace is not tr and other._trace.level > tr.level:
            return NotImplemented  # an inner transform's value: its trace decides
        mine = isinstance(other, BatchTracer) and other._trace is tr
        a, b = _align([self.value, other.value if mine else other], (True, mine), (0, 0))
        return BatchTracer(op(a, b), tr)
    return method


for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(BatchTracer, f"__{_name}__", _comparison(getattr(operator, _name)))
BatchTracer.__hash__ = lambda self: id(self)  # (defining __eq__ removed it)


def _binary_fast_path(prim, name, reflected, general):
    """``a * b`` on a batch of plain arrays (a Jacobian's tangent arithmetic), as NumPy's
    own call: what ``BatchTrace.process`` does for an elementwise ufunc whose batched
    arguments need no padding, without the dispatch layers.  Anything else: ``general``."""
    own = BatchTracer.__dict__.get(name)
    if own is not None:  # the comparisons above: a batched boolean
        return own
    ufunc = prim.ufunc
    if ufunc is None or prim.batch is not None:
        return general
    plain = (np.ndarray, float, int)

    def method(self, other):
        tr = self._trace
        a = self.value
        if tr.finished_by is not None or type(a) is not np.ndarray:
            return general(self, other)
        to = type(other)
        if to is BatchTracer:
            if other._trace is not tr:
                return general(self, other)
            b = other.value
            if type(b) is not np.ndarray or b.ndim != a.ndim:
                return general(self, other)
        elif to in plain:
            b = other
            if to is np.ndarray and b.ndim >= a.ndim:
                return general(self, other)  # the batched argument needs padding
        else:
            return general(self, other)
        return BatchTracer(ufunc(b, a) if reflected else ufunc(a, b), tr)
    method.__name__ = name
    return method


def _unary_fast_path(prim, name, general):
    return general


install_fast_paths(BatchTracer, _binary_fast_path, _unary_fast_path)


# -- the batching facts --------------------------------------------------------------------------
def batching_kind(prim):
    """How ``prim`` is mapped: its declared ``batch``, else one read off its other facts,
    else ``"loop"`` (once per example)."""
    kind = prim.batch
    if kind is not None:
        return kind
    if prim.broadcasting or prim.ufunc is not None or (
            prim.fast_partials is not None and not prim.nondiff):
        return "elementwise"
    return "loop"


def apply_batching(prim, vals, batched, params, size):
    """``prim`` over the batch: ``vals[i]`` carries a leading batch axis where ``batched[i]``."""
    kind = batching_kind(prim)
    if callable(kind):
        return kind(vals, batched, **params)
    if kind == "elementwise":
        return prim(*_align(vals, batched, (0,) * len(vals)), **params)
    if type(kind) is tuple and kind[0] == "stacked":
        return prim(*_align(vals, batched, kind[1:]), **params)
    if kind == "axis":
        return _axis_rule(prim, vals, batched, params, size)
    if kind == "loop":
        return per_example(prim, vals, batched, params, size)
    if kind == "linear":
        raise ValueError(
            f"primitive '{prim.name}' declares batch='linear', which is no batching kind: "
            f"tangents carry no batch axes, so a linear rule cannot map a batch. Declare "
            f"'elementwise', 'axis', ('stacked', core ranks...) or a rule with "
            f"@{prim.name}.batching (docs/vmap.md), or leave batch unset to run it once per "
            f"example")
    raise ValueError(f"primitive '{prim.name}' declares an unknown batching kind {kind!r}")


_PLAIN = (np.ndarray, float)


def _aligned(vals, batched):
    """Whether broadcasting already pairs example with example: every batched argument has
    as many axes (past the batch axis) as the argument with the most."""
    least, most = None, 0
    for v, b in zip(vals, batched):
        nd = v.ndim if type(v) is np.ndarray else 0
        if b:
            nd -= 1
            least = nd if least is None or nd < least else least
        if nd > most:
            most = nd
    return least is not None and least >= most


def _align(vals, batched, cores):
    """Pad each batched argument's loop axes (those before its ``cores[i]`` core axes) with
    length-1 axes after the batch axis, up to the most any argument has: NumPy's
    broadcasting then pairs example with example and broadcasts the unbatched ones."""
    loops = [ndim_of(v) - b - (cores[i] if i < len(cores) else cores[-1])
             for i, (v, b) in enumerate(zip(vals, batched))]
    most = max(loops, default=0)
    out = list(vals)
    for i, (v, b) in enumerate(zip(vals, batched)):
        if b and loops[i] < most:
            s = shape_of(v)
            out[i] = wnp.reshape(v, s[:1] + (1,) * (most - loops[i]) + s[1:])
    return out


def _is_array(v):
    return isinstance(v, (Tracer, np.ndarray, np.generic, float, int, complex)) \
        or is_foreign(v)  # a CuPy or Dask array: an array too, not a parameter


def _batched_all(vals, batched, size):
    """Every array argument with the batch axis (an unbatched one broadcast along it)."""
    out = []
    for v, b in zip(vals, batched):
        if not b and _is_array(v):
            v = wnp.broadcast_to(v, (size,) + shape_of(v))
        out.append(v)
    return out


def _axis_rule(prim, vals, batched, params, size):
    vals = _align(_batched_all(vals, batched, size), (True,) * len(vals), (0,))
    rank = max((ndim_of(v) - 1 for v in vals if _is_array(v)), default=0)
    params = dict(params)
    for name in ("axis", "axes"):
        if name in params:
            ax = params[name]
        else:
            ax = _defaults(prim).get(name, _ABSENT)
            if ax is _ABSENT or ax is inspect.Parameter.empty:
                continue
        if ax is None:
            s = params.get("s")
            ax = tuple(range(-len(s), 0)) if s is not None else tuple(range(1, rank + 1))
        elif isinstance(ax, (tuple, list)):
            ax = type(ax)(a + 1 if a >= 0 else a for a in ax)
        else:
            ax = ax + 1 if ax >= 0 else ax
        params[name] = ax
    return prim(*vals, **params)


_ABSENT = object()


def _defaults(prim):
    got = _DEFAULTS.get(prim.impl)
    if got is None:
        try:
            got = {k: p.default for k, p in inspect.signature(prim.impl).parameters.items()}
        except (TypeError, ValueError):
            got = {}
        _DEFAULTS[prim.impl] = got
    return got


_DEFAULTS = {}  # an implementation's keyword defaults (its signature, read once)


def per_example(prim, vals, batched, params, size):
    """``prim`` once per example, the results stacked: the batching of last resort."""
    outs = [prim(*[v[i] if b else v for v, b in zip(vals, batched)], **params)
            for i in range(size)]
    if prim.multiple_results:
        return tuple(_stack(prim, [o[k] for o in outs]) for k in range(len(outs[0])))
    return _stack(prim, outs)


def per_example_call(fn, *args):
    """``fn(*args)`` for a function that cannot take batched values (SciPy's solvers, a
    user's rule that converts to NumPy): run once per example of the innermost live ``vmap``
    whose values ``args`` hold, its results stacked into that vmap's values -- the loop
    ``per_example`` runs for a primitive, for a function.  ``fn(*args)`` when they hold none.
    (A tangent of a Jacobian's pass is such a value: ``jacobian`` is ``vmap`` over ``jvp``.)"""
    leaves, treedef = tree.flatten(args)
    top = None
    for x in leaves:
        if isinstance(x, BatchTracer) and x._trace.finished_by is None and (
                top is None or x._trace.level > top.level):
            top = x._trace
    if top is None:
        return fn(*args)
    outs = []
    for i in range(top.size):
        one = [x.value[i] if isinstance(x, BatchTracer) and x._trace is top else x
               for x in leaves]
        outs.append(per_example_call(fn, *tree.unflatten(treedef, one)))
    return _stacked(outs, top, getattr(fn, "__name__", "a function"))


def _stacked(outs, trace, name):
    """Per-example results ``outs`` as one result of ``trace``'s values (``None``: a zero)."""
    if all(o is None for o in outs):
        return None
    if any(o is None for o in outs):  # a zero for some examples only
        like = next(o for o in outs if o is not None)
        outs = [tree.unflatten(tree.flatten(like)[1],
                               [zeros_like_value(v) for v in tree.flatten(like)[0]])
                if o is None else o for o in outs]
    first = outs[0]
    if isinstance(first, (tuple, list)) and all(
            type(o) is type(first) and len(o) == len(first) for o in outs):
        return type(first)(_stacked([o[k] for o in outs], trace, name)
                           for k in range(len(first)))
    flat = [tree.flatten(o) for o in outs]
    if any(d != flat[0][1] for _, d in flat):
        raise ValueError(f"wg.vmap: {name} gives results of different structures for "
                         f"different examples, which no batch can hold; loop over the "
                         f"examples in Python")
    res = []
    for k in range(len(flat[0][0])):
        vals = [f[0][k] for f in flat]
        if any(isinstance(v, BatchTracer) and v._trace is trace for v in vals):
            # it read a batched value it was not given (one it closed over): no example's
            # result is its own
            raise _control_flow(f"{name} closed over a batched value it converts")
        shapes = {shape_of(v) for v in vals}
        if len(shapes) > 1:
            raise ValueError(f"wg.vmap: {name} gives results of different shapes for "
                             f"different examples ({sorted(shapes)}), which no batch can hold; "
                             f"loop over the examples in Python")
        res.append(BatchTracer(wnp.stack(vals), trace))
    return tree.unflatten(flat[0][1], res)


def _stack(prim, outs):
    shapes = {shape_of(o) for o in outs}
    if len(shapes) > 1:
        raise ValueError(f"wg.vmap: '{prim.name}' gives results of different shapes for "
                         f"different examples ({sorted(shapes)}), which no batch can hold; "
                         f"loop over the examples in Python")
    return wnp.stack(outs)


def loop_primitives(prims):
    """The primitives among ``prims`` that ``vmap`` runs once per example."""
    return sorted({p.name for p in prims if isinstance(p, Primitive)
                   and batching_kind(p) == "loop"})


# -- vmap -------------------------------------------------------------------------------------
def vmap(f, in_axes=0, out_axes=0, *, axis_size=None):
    """``f`` mapped over an axis of its arguments, in one vectorised pass (docs/vmap.md).

    ``in_axes``: an int, ``None`` (not mapped) or a pytree of them matching the arguments
    (a prefix: one entry may stand for a whole subtree); ``out_axes`` likewise for the
    result.  ``axis_size`` is needed only when no argument is mapped.
    """
    check_callable(f, "wg.vmap")
    def mapped(*args):
        spec = in_axes
        if isinstance(spec, list) and len(args) != 1:
            spec = tuple(spec)
        if isinstance(spec, tuple) and len(spec) != len(args):
            raise ValueError(f"wg.vmap: in_axes has {len(spec)} entries but the function was "
                             f"called with {len(args)} positional arguments; give one entry "
                             f"per argument (None for an unmapped one)")
        leaves, treedef = tree.flatten(args)
        axes = _axes_for(spec, args, "in_axes")
        size = _batch_size(leaves, axes, axis_size)
        trace = BatchTrace(new_level(), size)
        ins = [x if a is None else BatchTracer(_to_front(x, a), trace)
               for x, a in zip(leaves, axes)]
        try:
            out = f(*tree.unflatten(treedef, ins))
            oleaves, otree = tree.flatten(out)
            oaxes = _axes_for(out_axes, out, "out_axes")
            res = [_output(o, a, trace) for o, a in zip(oleaves, oaxes)]
        finally:
            trace.finish("wg.vmap", f)
        return tree.unflatten(otree, res)
    mapped.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    mapped.__doc__ = f.__doc__
    return travels(mapped, vmap, f, in_axes, out_axes, axis_size=axis_size)


def _axes_for(spec, x, what):
    """One axis (int or None) per leaf of ``x``; ``spec`` is a pytree prefix of ``x``."""
    if spec is None or isinstance(spec, (int, np.integer)):
        return [spec] * len(tree.flatten(x)[0])
    xdef = tree.structure(x)
    same = type(spec) is type(x) or (isinstance(spec, (tuple, list))
                                      and isinstance(x, (tuple, list)))
    if same and xdef.kind not in ("leaf", "none") and not (
            isinstance(spec, dict) and set(spec) != set(x)):
        kids = tree.children(x, xdef)
        try:  # the spec's children, read as the value's are (keys, fields, a registered type)
            specs = tree.children(spec, xdef)
        except (KeyError, AttributeError, TypeError):
            specs = None
        if specs is not None and len(specs) == len(kids):
            return [a for s, c in zip(specs, kids) for a in _axes_for(s, c, what)]
    raise ValueError(f"wg.vmap: {what} {spec!r} does not match the structure of the values "
                     f"({type(x).__name__}); give an int, None, or a pytree of them with the "
                     f"values' structure")


def _batch_size(leaves, axes, axis_size):
    sizes = []
    for i, (x, a) in enumerate(zip(leaves, axes)):
        if a is None:
            continue
        check_live(x, "passed to wg.vmap")
        nd = ndim_of(x) if not isinstance(x, (list, tuple)) else np.ndim(x)
        if not -nd <= a < nd:
            raise ValueError(f"wg.vmap: in_axes {a} is out of range for argument leaf {i} of "
                             f"shape {shape_of(x)} (it has {nd} axes); use None to leave "
                             f"it unmapped")
        sizes.append(shape_of(x)[a])
    if not sizes:
        if axis_size is None:
            raise ValueError("wg.vmap needs at least one mapped argument (in_axes are all "
                             "None); map one, or pass axis_size=")
        return int(axis_size)
    if len(set(sizes)) != 1 or (axis_size is not None and sizes[0] != axis_size):
        raise ValueError(f"wg.vmap got inconsistent sizes for the mapped axes: {sizes}"
                         + (f" and axis_size={axis_size}" if axis_size is not None else "")
                         + "; every mapped argument needs the same length along its in_axes")
    return sizes[0]


def _to_front(x, a):
    if isinstance(x, Tracer):
        return x if a in (0, -ndim_of(x)) else wnp.moveaxis(x, a, 0)
    if type(x) is np.ndarray and a in (0, -x.ndim):
        return x
    return np.moveaxis(asarray(x), a, 0)  # a CuPy or Dask array stays one


def _output(o, a, trace):
    mine = isinstance(o, BatchTracer) and o._trace is trace
    if a is None:
        if mine:
            raise ValueError("wg.vmap: out_axes is None for a result that depends on the "
                             "mapped arguments; give it an axis to stack the examples along")
        return o
    if mine:
        v = o.value
    elif isinstance(o, Tracer):
        v = wnp.broadcast_to(o, (trace.size,) + shape_of(o))
    else:  # the same for every example (a constant): stacked, as an array of its own
        o = asarray(o)  # a CuPy or Dask array stays one
        v = copy_of(np.broadcast_to(o, (trace.size,) + o.shape))
    nd = ndim_of(v)
    if not -nd <= a < nd:
        raise ValueError(f"wg.vmap: out_axes {a} is out of range for a result with "
                         f"{nd - 1} axes")
    if a in (0, -nd):
        return v
    return wnp.moveaxis(v, 0, a) if isinstance(v, Tracer) else np.moveaxis(v, 0, a)
