"""The graph itself: a Wengert list of nodes, one primitive per node.

A ``Node`` is an input, a constant, one primitive applied to earlier nodes
(``op``), or the ``j``-th result of a primitive with several results (``proj``).
Every node keeps the value it had when the graph was traced: shapes, dtypes and
Python types are fixed by the example arguments, and the simplifier and the code
generator read them.  ``guards`` lists the boolean nodes the traced program
branched on, with the branch it took.
"""
from __future__ import annotations

import numpy as np

from ..core import Tracer
from ..tree import flatten, unflatten

__all__ = ["Node", "Graph", "GuardFailure"]


class GuardFailure(Exception):
    """The inputs take another branch than the one the graph was traced along."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index


class Node:
    __slots__ = ("kind", "prim", "args", "params", "value")

    def __init__(self, kind, prim=None, args=(), params=None, value=None):
        self.kind = kind          # "input" | "const" | "op" | "proj"
        self.prim = prim          # the Primitive of an "op" node
        self.args = args          # indices of the argument nodes
        self.params = params or {}  # static keyword parameters ("index" for proj)
        self.value = value        # the value at trace time

    def __repr__(self):
        if self.kind == "op":
            return f"Node(op {self.prim.name}{self.args})"
        if self.kind == "proj":
            return f"Node(proj {self.args[0]}[{self.params['index']}])"
        return f"Node({self.kind})"


def _describe(v):
    if isinstance(v, np.ndarray):
        return f"{v.dtype}{list(v.shape)}"
    return type(v).__name__


class Graph:
    """A straight-line program of primitives, traced from a Python function.

    ``g(*args)`` evaluates it (by generated code on plain values, primitive by
    primitive on traced ones, so transforms of a graph work); ``g.grad()``,
    ``g.jvp()``, ``g.jacobian()``, ``g.hessian()`` give derivative graphs;
    ``g.simplify()``, ``g.source()``, ``g.compile()``, ``g.to_dot()`` as named.

    The graph is specialised to the example arguments' structure, shapes and
    dtypes, and to the branches they took (``guards``).
    """

    def __init__(self, nodes, in_def, leaf_slots, input_nodes, arg_names, out_def, outputs,
                 guards, name="f", example_args=()):
        self.nodes = nodes              # list of Node, in evaluation order
        self.in_def = in_def            # treedef of the positional-argument tuple
        self.leaf_slots = leaf_slots    # per argument leaf: input number, or ("static", value)
        self.input_nodes = input_nodes  # node index of each input
        self.arg_names = arg_names      # a Python name per positional argument
        self.out_def = out_def
        self.outputs = outputs          # node index per output leaf
        self.guards = guards            # list of (node index, expected bool)
        self.name = name
        self.example_args = example_args
        self.stats = None
        self._compiled = None

    # -- basics ---------------------------------------------------------------------
    def __len__(self):
        return len(self.nodes)

    def __repr__(self):
        ops = sum(1 for n in self.nodes if n.kind == "op")
        return (f"<wengert Graph {self.name}: {len(self.input_nodes)} inputs, {ops} primitive "
                f"nodes, {len(self.nodes)} nodes in all, {len(self.outputs)} outputs"
                + (f", {len(self.guards)} guards" if self.guards else "") + ">")

    def __str__(self):
        return self.source()

    @property
    def num_ops(self):
        return sum(1 for n in self.nodes if n.kind == "op")

    # -- evaluation -------------------------------------------------------------------
    def _input_leaves(self, args):
        leaves, d = flatten(tuple(args))
        if d != self.in_def:
            raise ValueError(f"{self.name}: the graph was traced for arguments structured as "
                             f"{self.in_def!r}, got {d!r}")
        out = []
        for x, s in zip(leaves, self.leaf_slots):
            if not isinstance(s, tuple):
                out.append(x)
            elif not (x is s[1] or (type(x) is type(s[1]) and x == s[1])):
                raise ValueError(f"{self.name}: the graph was traced with the static argument "
                                 f"{s[1]!r}, got {x!r}; trace again (wg.compile does)")
        return out

    def __call__(self, *args):
        leaves = self._input_leaves(args)
        if any(isinstance(x, Tracer) for x in leaves):
            return self.evaluate(leaves)
        if self._compiled is None:
            from .codegen import build_function
            self._compiled = build_function(self)
        try:
            return self._compiled(*args)
        except GuardFailure:
            raise ValueError(
                f"{self.name}: these inputs take another branch than the one the graph was "
                "traced along (a guard failed); trace again, or use wg.compile, which "
                "re-traces by itself") from None

    def evaluate(self, leaves, check_guards=True):
        """Run the nodes one primitive call at a time on ``leaves`` (the inputs).

        With traced inputs the calls dispatch to the active transforms, so an outer
        ``grad``, ``jvp`` or ``trace`` sees every primitive of the graph.
        """
        env = [None] * len(self.nodes)
        for pos, i in enumerate(self.input_nodes):
            env[i] = leaves[pos]
        guards = dict(self.guards) if check_guards else {}
        for i, n in enumerate(self.nodes):
            k = n.kind
            if k == "op":
                env[i] = n.prim(*[env[a] for a in n.args], **n.params)
            elif k == "const":
                env[i] = n.value
            elif k == "proj":
                env[i] = env[n.args[0]][n.params["index"]]
            if i in guards and bool(env[i]) != guards[i]:
                raise GuardFailure(i)
        return unflatten(self.out_def, [env[o] for o in self.outputs])

    # -- derivatives as graphs -------------------------------------------------------------
    def grad(self, argnums=0):
        """The gradient program of a scalar-valued graph, as a new graph (reverse mode)."""
        from .differentiate import grad_graph
        return grad_graph(self, argnums)

    def jvp(self):
        """The forward-mode program: arguments ``(*primals, *tangents)``, result ``(out, tangent)``."""
        from .differentiate import jvp_graph
        return jvp_graph(self)

    def vjp(self):
        """The reverse-mode program: arguments ``(*primals, cotangent)``, result a tuple."""
        from .differentiate import vjp_graph
        return vjp_graph(self)

    def jacobian(self, argnums=0, mode="auto"):
        from .differentiate import jacobian_graph
        return jacobian_graph(self, argnums, mode)

    def hessian(self, argnums=0):
        from .differentiate import hessian_graph
        return hessian_graph(self, argnums)

    # -- rewriting, code, pictures ---------------------------------------------------------
    def simplify(self, *, fast_math=False, report=False):
        from .simplify import simplify
        return simplify(self, fast_math=fast_math, report=report)

    def source(self):
        """Readable Python: one assignment per primitive node, over NumPy."""
        from .codegen import generate
        return generate(self).text

    def compile(self):
        """A Python function generated from :meth:`source` (same arguments as the graph)."""
        from .codegen import build_function
        fn = build_function(self)
        graph = self

        def compiled(*args):
            graph._input_leaves(args)  # the structure check
            try:
                return fn(*args)
            except GuardFailure:
                raise ValueError(f"{graph.name}: these inputs take another branch than the "
                                 "traced one (a guard failed)") from None
        compiled.__name__ = self.name
        compiled.source = fn.source
        compiled.raw = fn
        return compiled

    def to_dot(self, values=True):
        from .dot import graph_to_dot
        return graph_to_dot(self, values=values)

    def describe_inputs(self):
        return [(self.input_name(k), _describe(self.nodes[i].value))
                for k, i in enumerate(self.input_nodes)]

    def input_name(self, k):
        from .codegen import leaf_names
        return leaf_names(self)[k]
