"""Tracing: run a function once on graph tracers and record its primitives as nodes.

A ``GraphTrace`` is one more engine: its ``process`` evaluates the primitive's
plain implementation and appends a node.  Because rules are written with
wengert operations, running a rule on graph tracers records the rule's own
primitives, so derivative graphs come from the same rule registry.

Comparisons and ``&``, ``|``, ``^``, ``~`` on a graph tracer are recorded (as
non-differentiable nodes, primitives of :mod:`wengert.rules.logic`) so that ``if``
on a traced value can record a guard: ``bool()`` gives the example's branch and
notes which node decided it.  ``int()``, ``operator.index``, ``np.asarray`` of a
comparison or a count and ``.item()`` of any value give the example's number and
guard it the same way; so, inside ``wg.compile`` only, does ``float()`` of a float value
that no derivative reaches (a hyper-parameter in ``math.log(gamma)``).  ``wg.trace``,
which makes a ``Graph`` of the nodes, is in :mod:`.graph`.
"""
from __future__ import annotations

import contextvars

import numpy as np

from .. import _dispatch, numpy as _wnp
from .._dispatch import ArrayTracer
from ..core import Tracer, new_level, Trace
from ..rules.logic import LOGIC as _LOGIC, SAME_NUMBER as _SAME_NUMBER, \
    SAME_VALUE as _SAME_VALUE, invert as _INVERT, nondiff_for as _nondiff_for
from .ir import Node

__all__ = ["GraphTrace", "GraphTracer", "ForeignTracerError", "active_graph_traces"]

# graph traces whose function is running, innermost last (wg.trace pushes them): one tuple
# per thread and per asyncio task (a contextvars context)
_ACTIVE = contextvars.ContextVar("wengert_active_graph_traces", default=())


def active_graph_traces():
    """The graph traces now recording a function in this thread (this context), innermost
    last (read by wg.scan, which then records a loop as one node instead of unrolling it)."""
    return _ACTIVE.get()


def push_active(tr):
    """Mark ``tr`` as recording (``active_graph_traces``); returns what ``pop_active`` takes."""
    outer = _ACTIVE.get()
    _ACTIVE.set(outer + (tr,))
    return outer


def pop_active(outer):
    _ACTIVE.set(outer)


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
        # wg.compile: a float no derivative reaches may be read as a number (``float(x)``,
        # ``math.log(x)``), giving the example's value under a guard, as bool() does
        self.reads_numbers = False
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

    def output_nodes(self, values, foreign, const=None):
        """The nodes a traced function's results ``values`` are: a tracer of this trace's
        own node; for a tracer of another, the node of ``foreign(value)`` (a tracer of this
        trace standing for it, or an error); a new constant node for a plain value
        (``const(value)`` where given: what the graph should hold)."""
        nodes = []
        for o in values:
            if isinstance(o, GraphTracer) and o._trace is self:
                nodes.append(o.node)
            elif isinstance(o, Tracer):
                nodes.append(foreign(o).node)
            else:
                nodes.append(self._add(Node("const", value=o if const is None else const(o))))
        return nodes

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

    def guard_value(self, tracer):
        """Record that the graph holds only while ``tracer`` has the value it has now
        (a count, an index, a number read with ``.item()``); returns that value."""
        if self.finished:
            raise self.escaped("in a conversion to a number")
        v = tracer.value
        if isinstance(v, (bool, np.bool_)) or (isinstance(v, np.ndarray) and v.dtype == bool
                                                and v.size == 1):
            self.guard(tracer)  # a boolean: the branch guard says it all
        else:
            # the guard's own copy: nothing the traced function holds can change it
            self.guard(_SAME_VALUE(tracer, v.copy() if isinstance(v, np.ndarray) else v))
        return v

    def read_number(self, tracer, how):
        """``float()`` of a float value no derivative reaches, in ``wg.compile``: the example's
        number, guarded (``SAME_NUMBER``) so that other values re-trace."""
        if self.finished:
            raise self.escaped("in a conversion to a number")
        v = tracer.value
        r = how(v)
        self.guard(_SAME_NUMBER(tracer, v.copy() if isinstance(v, np.ndarray) else v))
        return r

    def convert(self, tracer, how, args):
        """``how(value, *args)`` (``int()``, ``.item()``...) of a traced value, guarded: the
        compiled function gives the number the eager one gives, or re-traces."""
        r = how(tracer.value, *args)  # first: an error is the eager one
        self.guard_value(tracer)
        return r


def _binary(p, reflected=False):
    if reflected:
        return lambda self, other: p(other, self)
    return lambda self, other: p(self, other)


class GraphTracer(ArrayTracer):
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

    def _converted(self, how, *args):  # int(), operator.index, .item(): guarded
        return self._trace.convert(self, how, args)

    def _reads_numbers(self):  # one number: a batch of them (vmap's) has none to give
        return self._trace.reads_numbers and np.size(self.value) == 1

    def _read_number(self, how):
        return self._trace.read_number(self, how)

    def item(self, *args):
        if not hasattr(self.value, "item"):  # a Python float, as in the eager function
            raise AttributeError(f"{type(self.value).__name__!r} object has no attribute "
                                 "'item'")
        return Tracer.item(self, *args)

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
        fn = _dispatch.HANDLED.get(func)
        if fn is not None and getattr(fn, "_nondiff", False) and not any(
                isinstance(a, (list, tuple)) for a in args):
            # a non-differentiable NumPy function (argmax, any...): recorded as a node
            return _nondiff_for(func)(*args, **kwargs)
        return ArrayTracer.__array_function__(self, func, types, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = getattr(_wnp, _dispatch._UFUNC_ALIASES.get(ufunc.__name__, ufunc.__name__), None)
        if method == "__call__" and not kwargs and getattr(fn, "_nondiff", False):
            return _nondiff_for(ufunc)(*inputs)  # logical_or, isnan...: recorded as a node
        return ArrayTracer.__array_ufunc__(self, ufunc, method, *inputs, **kwargs)

    def __hash__(self):
        return id(self)
