"""The right-hand side of a differentiable ODE solve, traced once into a graph (:class:`Rhs`):
generated code on plain values, the graph's primitives on traced ones.  The traced values it
closes over become the graph's extra inputs (closure conversion, as JAX's), and structurally
identical graphs share their generated code and what is derived from them (the adjoint's
vjp, the Jacobian), so a loss called again regenerates nothing.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .. import numpy as wnp
from ..batching import BatchTracer
from ..core import Tracer
from ..graph.codegen import build_function
from ..graph.graph import Graph
from ..graph.ir import GuardFailure
from ..graph.trace import GraphTrace
from ..tree import flatten, unflatten

__all__ = ["Rhs", "trace_rhs", "example_of", "batched"]


def example_of(x):
    """One example's plain value: the primal under every trace, and under ``wg.vmap`` its
    first example (a batched value's plain array carries the batch axes in front)."""
    nb = 0
    while isinstance(x, Tracer):
        nb += isinstance(x, BatchTracer)
        x = x.value
    return x[(0,) * nb] if nb else x


def batched(*trees):
    """Whether any leaf is mapped by a ``wg.vmap``."""
    for t in trees:
        for x in flatten(t)[0]:
            while isinstance(x, Tracer):
                if isinstance(x, BatchTracer):
                    return True
                x = x.value
    return False


# -- the right-hand side as a graph, closures converted -------------------------------------------
class _CaptureTrace(GraphTrace):
    """A graph trace that turns values of outer transforms into inputs (instead of refusing
    them): the closure's traced values become the graph's extra arguments."""

    def __init__(self):
        super().__init__()
        self.captured = []
        self._taken = {}

    def take(self, a):
        hit = self._taken.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1]
        t = self.input(example_of(a))
        self._taken[id(a)] = (a, t)
        self.captured.append(a)
        return t

    def process(self, prim, args, params):
        args = [self.take(a) if isinstance(a, Tracer) and a._trace is not self else a
                for a in args]
        return super().process(prim, args, params)


_BRANCH = ("the right-hand side took another branch than the one it was traced along: "
           "wengert traces it once per solve (an `if` on the state, the time or a parameter "
           "is not allowed); write the branch with wnp.where")


class Rhs:
    """A traced function ``(t, y, *params, *captured)``: generated code on plain values,
    the graph's primitives (so every transform sees them) on traced ones.

    ``shared`` is what every structurally identical graph shares (:func:`_shared`): its
    generated code and the graphs derived from it (adjoint, Jacobian), so that a loss called
    again with new values, which re-traces its right-hand side, regenerates nothing."""

    def __init__(self, graph, captured, shared=None):
        self.graph, self.captured = graph, captured
        self.shared = {} if shared is None else shared

    def __call__(self, *leaves):
        if any(isinstance(x, Tracer) for x in leaves):
            try:
                return self.graph.evaluate(list(leaves))
            except GuardFailure:
                raise ValueError(_BRANCH) from None
        return self.plain(*leaves)

    def plain(self, *leaves):
        fast = self.shared.get("fast")
        if fast is None:
            fast = self.shared["fast"] = build_function(self.graph)
        try:
            return fast(*leaves)
        except GuardFailure:
            raise ValueError(_BRANCH) from None

    def bare(self):
        """This function with nothing captured held (for what outlives the call)."""
        return Rhs(self.shared.get("graph", self.graph), [], self.shared)

    def simplified(self):
        """This function with its graph simplified (``Graph.simplify``: identity reshapes and
        the like gone), sharing generated code with structurally identical ones."""
        g = self.graph.simplify()
        return Rhs(g, self.captured, _shared(g))

    def hoisted(self, k):
        """``(prelude, body)``: what reads only the inputs after the first ``k`` (the
        parameters) computed by ``prelude(*params)`` once, and ``body(*inputs, *hoisted)``
        the rest, for a function called many times with the same parameters (a transpose of
        a weight matrix at every stage of every step, once).  None where nothing is
        hoisted."""
        g = self.graph
        if g.guards:
            return None
        nodes = g.nodes
        fixed = [False] * len(nodes)
        for pos, i in enumerate(g.input_nodes):
            fixed[i] = pos >= k
        for i, nd in enumerate(nodes):
            if nd.kind == "const":
                fixed[i] = True
            elif nd.kind == "op":
                fixed[i] = all(fixed[a] for a in nd.args) and not nd.prim.impure
            elif nd.kind == "proj":
                fixed[i] = fixed[nd.args[0]]
        needed = set()   # fixed values a varying node (or an output) reads
        for i, nd in enumerate(nodes):
            if not fixed[i]:
                needed.update(a for a in nd.args if fixed[a] and nodes[a].kind in ("op", "proj"))
        needed.update(o for o in g.outputs if fixed[o] and nodes[o].kind in ("op", "proj"))
        hoist = sorted(needed)
        if not hoist:
            return None
        examples = list(g.example_args)
        leaves = flatten(tuple(examples))[0]

        def run(vals, subst, pre):
            """The nodes on ``vals``: the fixed ones only (``pre``), or the varying ones
            with the hoisted values substituted."""
            env = [None] * len(nodes)
            for pos, i in enumerate(g.input_nodes):
                env[i] = vals[pos]
            for i, nd in enumerate(nodes):
                if i in subst:
                    env[i] = subst[i]
                elif nd.kind == "const":
                    env[i] = nd.value
                elif fixed[i] != pre or nd.kind == "input":
                    continue
                elif nd.kind == "op":
                    env[i] = nd.prim(*[env[a] for a in nd.args], **nd.params)
                else:
                    env[i] = env[nd.args[0]][nd.params["index"]]
            return env

        def pre(*params):
            env = run([None] * k + list(params), {}, True)
            return tuple(env[i] for i in hoist)

        def body(*args):
            m = len(g.input_nodes)
            env = run(list(args[:m]), dict(zip(hoist, args[m:])), False)
            return unflatten(g.out_def, [env[o] for o in g.outputs])

        prelude = trace_rhs(pre, leaves[k:], g.name + "_prelude", flat=False)
        main = trace_rhs(body, leaves + [nodes[i].value for i in hoist], g.name, flat=False)
        return prelude, main

    def derived(self, key, make):
        """``make()`` once per structure of this graph (and ``key``): a graph traced from
        this one (it closes over nothing, so it holds no traced values of any call)."""
        hit = self.shared.get(key)
        if hit is None:
            hit = self.shared[key] = make()
        return hit


# generated code and derived graphs, shared between structurally identical right-hand sides
_SHARED = OrderedDict()
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 64


def _freeze(v):
    """A hashable stand-in for a node's value or parameter, equal only for equal ones."""
    if isinstance(v, np.ndarray):
        return ("nd", v.shape, v.dtype.str, v.tobytes())
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _freeze(x)) for k, x in v.items())
    if isinstance(v, slice):   # not hashable before Python 3.12
        return ("slice", _freeze(v.start), _freeze(v.stop), _freeze(v.step))
    if v is None or isinstance(v, (bool, int, float, complex, str, np.generic, np.dtype,
                                   type)):
        return (type(v), repr(v)) if isinstance(v, (float, complex, np.generic)) else (type(v), v)
    return ("id", id(v))   # kept alive by the cached graph, so the id stays its own


def _signature(g):
    """Everything of a graph its generated code reads: primitives, wiring, parameters,
    constants, every node's type, shape and dtype, guards, names."""
    sig = [g.name, repr(g.in_def), repr(g.out_def), tuple(g.input_nodes), tuple(g.outputs),
           tuple(g.guards)]
    for n in g.nodes:
        v = n.value
        shape = (type(v), getattr(v, "shape", None), getattr(v, "dtype", None))
        if n.kind == "const":
            sig.append(("c", _freeze(v)))
        else:
            sig.append((n.kind, n.prim, n.args, _freeze(n.params), shape))
    return tuple(sig)


def _shared(g):
    try:
        key = _signature(g)
        hash(key)
    except TypeError:   # a parameter that cannot be compared: nothing shared
        return None
    with _SHARED_LOCK:
        hit = _SHARED.get(key)
        if hit is not None:
            _SHARED.move_to_end(key)
            return hit
        hit = _SHARED[key] = {"graph": g}
        while len(_SHARED) > _SHARED_MAX:
            _SHARED.popitem(last=False)
    return hit


def trace_rhs(fn, example, name="rhs", flat=True):
    """Trace ``fn(*example)`` into a :class:`Rhs`; the traced values it closes over are
    appended to its arguments (``rhs.captured``, to pass after ``example``'s)."""
    tr = _CaptureTrace()
    ins = [tr.input(example_of(x)) for x in example]
    try:
        out = fn(*ins)
        if flat:
            out = wnp.reshape(wnp.asarray(out), (-1,))
    finally:
        tr.finished = True
        tr.finish("wengert.scipy.integrate", fn)
    leaves, out_def = flatten(out)
    outputs = tr.output_nodes(leaves, tr.take, lambda o: np.asarray(o, dtype=float))
    inputs = [t.node for t in ins] + [tr._taken[id(c)][1].node for c in tr.captured]
    values = [example_of(x) for x in example] + [example_of(c) for c in tr.captured]
    in_def = flatten(tuple(values))[1]
    names = [f"a{i}" for i in range(len(values))]
    g = Graph(tr.nodes, in_def, list(range(len(values))), inputs, names, out_def, outputs,
              tr.guards, name=name, example_args=tuple(values))
    return Rhs(g, list(tr.captured), _shared(g))
