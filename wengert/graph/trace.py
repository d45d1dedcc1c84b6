"""Tracing: run a function once on graph tracers and record its primitives as a Graph.

A ``GraphTrace`` is one more engine: its ``process`` evaluates the primitive's
plain implementation and appends a node.  Because rules are written with
wengert operations, running a rule on graph tracers records the rule's own
primitives, so derivative graphs come from the same rule registry.

Comparisons and ``&``, ``|``, ``^``, ``~`` on a graph tracer are recorded (as
non-differentiable nodes) so that ``if`` on a traced value can record a guard:
``bool()`` gives the example's branch and notes which node decided it.
"""
from __future__ import annotations

import inspect
import operator

import numpy as np

from ..core import Tracer, check_live, new_level, primitive, Trace
from ..tree import flatten, unflatten
from .ir import Graph, Node

__all__ = ["GraphTrace", "GraphTracer", "trace"]


class ForeignTracerError(TypeError):
    """A traced function met a value of an outer transform it was not given."""


class GraphTrace(Trace):
    # non-differentiable computations (masks, argmax...) on graph tracers must be recorded,
    # not computed on the example's values: a value baked into the graph would be wrong for
    # the next inputs.  Code that strips tracers for such computations stops at tracers
    # whose trace says so.
    records_nondiff = True

    def __init__(self):
        self.level = new_level()
        self.nodes = []
        self.guards = []
        self.finished = False
        self._const_ids = {}  # id(value) -> node index, for values captured twice
        self._keep = []       # keeps those values alive while tracing

    def __repr__(self):
        return f"<GraphTrace level={self.level} with {len(self.nodes)} nodes>"

    def _add(self, node):
        self.nodes.append(node)
        return len(self.nodes) - 1

    def const(self, value):
        idx = self._const_ids.get(id(value))
        if idx is not None and self.nodes[idx].value is value:
            return idx
        idx = self._add(Node("const", value=value))
        self._const_ids[id(value)] = idx
        self._keep.append(value)
        return idx

    def input(self, value):
        return GraphTracer(value, self, self._add(Node("input", value=value)))

    def process(self, prim, args, params):
        if self.finished:
            raise self.escaped(f"in {prim.name}")  # (core.Trace: one message for every engine)
        ins = []
        vals = []
        for a in args:
            if isinstance(a, GraphTracer) and a._trace is self:
                ins.append(a.node)
                vals.append(a.value)
            elif isinstance(a, Tracer):
                raise ForeignTracerError(
                    f"wg.trace: '{prim.name}' got a value traced by an outer transform "
                    f"({type(a).__name__}), e.g. a variable the traced function closes over. "
                    "Pass it to the traced function as an argument instead.")
            else:
                ins.append(self.const(a))
                vals.append(a)
        ans = prim.impl(*vals, **params)
        idx = self._add(Node("op", prim, tuple(ins), dict(params), ans))
        if prim.multiple_results:
            return tuple(GraphTracer(a, self, self._add(Node("proj", None, (idx,), {"index": j}, a)))
                         for j, a in enumerate(ans))
        return GraphTracer(ans, self, idx)

    def guard(self, tracer):
        if self.finished:
            raise self.escaped("in an if or bool()")
        b = bool(tracer.value)
        self.guards.append((tracer.node, b))
        return b


# -- comparisons and logic: recorded, not differentiated -----------------------------------
def _nondiff_prim(impl, name):
    p = primitive(impl, name=name, broadcasting=True)
    p.partials(lambda ans, *xs, **kw: (None,) * len(xs))
    p.nondiff = True
    return p


_LOGIC = {name: _nondiff_prim(getattr(operator, name), name)
          for name in ("lt", "le", "gt", "ge", "eq", "ne", "and_", "or_", "xor")}
_INVERT = primitive(operator.invert, name="invert")
_INVERT.partials(lambda ans, x: (None,))


_NONDIFF = {}


def _nondiff_for(func):
    p = _NONDIFF.get(func)
    if p is None:
        p = _NONDIFF[func] = primitive(func, name=getattr(func, "__name__", "nondiff"))
        p.partials(lambda ans, *xs, **kw: (None,) * len(xs))
        p.nondiff = True
    return p


def _binary(p, reflected=False):
    if reflected:
        return lambda self, other: p(other, self)
    return lambda self, other: p(self, other)


class GraphTracer(Tracer):
    """A value inside a traced function: its example ``value`` and its ``node``."""

    __slots__ = ("value", "_trace", "node")

    def __init__(self, value, trace, node):
        self.value = value
        self._trace = trace
        self.node = node

    def __repr__(self):
        return f"GraphTracer({self.value!r}, node={self.node})"

    def __bool__(self):
        return self._trace.guard(self)

    __lt__ = _binary(_LOGIC["lt"])
    __le__ = _binary(_LOGIC["le"])
    __gt__ = _binary(_LOGIC["gt"])
    __ge__ = _binary(_LOGIC["ge"])
    __eq__ = _binary(_LOGIC["eq"])
    __ne__ = _binary(_LOGIC["ne"])
    __and__ = _binary(_LOGIC["and_"])
    __rand__ = _binary(_LOGIC["and_"], True)
    __or__ = _binary(_LOGIC["or_"])
    __ror__ = _binary(_LOGIC["or_"], True)
    __xor__ = _binary(_LOGIC["xor"])
    __rxor__ = _binary(_LOGIC["xor"], True)

    def __invert__(self):
        return _INVERT(self)

    def __array_function__(self, func, types, args, kwargs):
        from .. import _dispatch
        fn = _dispatch.HANDLED.get(func)
        if fn is not None and getattr(fn, "_nondiff", False) and not any(
                isinstance(a, (list, tuple)) for a in args):
            # a non-differentiable NumPy function (argmax, any...): recorded as a node
            return _nondiff_for(func)(*args, **kwargs)
        return Tracer.__array_function__(self, func, types, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from .. import _dispatch
        fn = getattr(_dispatch._wnp(), _dispatch._UFUNC_ALIASES.get(ufunc.__name__,
                                                                    ufunc.__name__), None)
        if method == "__call__" and not kwargs and getattr(fn, "_nondiff", False):
            return _nondiff_for(ufunc)(*inputs)  # logical_or, isnan...: recorded as a node
        return Tracer.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)

    def __hash__(self):
        return id(self)


# -- wg.trace --------------------------------------------------------------------------------
def _is_input(x):
    """Leaves that become graph inputs: floats and arrays.  Ints, bools, None and
    other objects are static: baked into the graph (wg.compile keys on their values)."""
    if isinstance(x, Tracer):
        return True
    if isinstance(x, (bool, int, str, bytes)) or x is None:
        return False
    if isinstance(x, (float, complex, np.ndarray, np.generic)):
        return True
    return False


def _plain(x):
    while isinstance(x, Tracer):
        x = x.value
    return x


def arg_names_of(f, nargs):
    names = []
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    for i in range(nargs):
        name = None
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                   params[i].POSITIONAL_OR_KEYWORD):
            name = params[i].name
        elif params and params[-1].kind == params[-1].VAR_POSITIONAL:
            name = f"{params[-1].name}{i - len(params) + 1}"
        names.append(name if name and name.isidentifier() else f"arg{i}")
    return names


def _func_name(f):
    n = getattr(f, "__name__", "f")
    return n if isinstance(n, str) and n.isidentifier() else "f"


def trace(f, *example_args, _names=None, _name=None, _transform="wg.trace", **kwargs):
    """Run ``f`` once on tracing values; return the :class:`~wengert.graph.Graph` it ran.

    Float and array leaves of the arguments (pytrees allowed) become graph inputs;
    ints, bools and other objects are static and baked in, as are ``kwargs``.
    Branching on a traced value records a guard.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> g = wg.trace(lambda x, y: x * y + wnp.sin(x), 0.5, 4.2)
    >>> print(g.source())
    def f(x, y):
        v1 = x * y
        v2 = sin(x)
        v3 = v1 + v2
        return v3
    >>> print(g(0.5, 4.2))
    2.579425538604203
    """
    tr = GraphTrace()
    leaves, in_def = flatten(tuple(example_args))
    slots = []
    wrapped = []
    input_nodes = []
    for x in leaves:
        if _is_input(x):
            check_live(x, lambda: f"passed to {_transform}")
            x = _plain(x)
            t = tr.input(x)
            slots.append(len(input_nodes))
            input_nodes.append(t.node)
            wrapped.append(t)
        else:
            slots.append(("static", x))
            wrapped.append(x)
    args = unflatten(in_def, wrapped)
    try:
        out = f(*args, **kwargs)
    finally:
        tr.finished = True
        tr.finish(_transform, f)
    out_leaves, out_def = flatten(out)
    outputs = []
    for o in out_leaves:
        if isinstance(o, GraphTracer) and o._trace is tr:
            outputs.append(o.node)
        elif isinstance(o, Tracer):
            check_live(o, lambda: f"returned by the function given to {_transform}")
            raise TypeError("wg.trace: the function returned a value traced by an outer "
                            "transform; trace functions of their arguments only")
        else:
            outputs.append(tr._add(Node("const", value=o)))
    names = _names or arg_names_of(f, len(example_args))
    plain_args = unflatten(in_def, [_plain(x) for x in leaves])
    return Graph(tr.nodes, in_def, slots, input_nodes, list(names), out_def, outputs,
                 tr.guards, name=_name or _func_name(f), example_args=tuple(plain_args))
