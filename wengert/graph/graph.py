"""The graph users see: ``wg.trace`` runs a function once and returns its ``Graph``.

A ``Graph`` is a straight-line program of primitives (its nodes, :mod:`.ir`).  It
sits above the passes it offers as methods (code generation, simplification,
drawing) and above the tracer, because a graph's derivative is itself a trace:
``g.grad()`` traces ``wg.grad(g)``, which runs ``g`` node by node on tape variables
whose values are graph tracers.  The forward sweep records ``g``'s own nodes; the
reverse sweep runs each node's pullback -- the primitive's rrule, written with
wengert operations -- on graph tracers, so it is recorded too.  The result is the
seeds' augmented graph, unrolled into one straight-line program, built from the
same rules as every other engine.  Applying ``grad`` again differentiates that
program: second and higher derivatives.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..arrays import is_foreign
from .. import transforms
from ..core import plain as _plain, Tracer, check_live, plain_store_errors
from ..reverse import Var
from ..rules.logic import SAME_NUMBER
from ..tree import flatten, unflatten
from .codegen import build_function, generate
from .dot import graph_to_dot, tape_to_dot
from .ir import GuardFailure, Node, SpecialisedNumber
from .simplify import simplify as _simplify
from .trace import GraphTrace, pop_active, push_active

__all__ = ["Graph", "trace", "to_dot"]


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
        self.values_dropped = False  # see without_values

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
            self._compiled = build_function(self)
        try:
            return self._compiled(*args)
        except GuardFailure:
            raise ValueError(
                f"{self.name}: these inputs take another branch than the one the graph was "
                "traced along (a guard failed); trace again, or use wg.compile, which "
                "re-traces by itself") from None

    def evaluate(self, leaves, check_guards=True, _env=False):
        """Run the nodes one primitive call at a time on ``leaves`` (the inputs).

        With traced inputs the calls dispatch to the active transforms, so an outer
        ``grad``, ``jvp`` or ``trace`` sees every primitive of the graph.  ``_env``: return
        every node's value instead of the outputs.
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
            if i in guards:
                if n.prim is SAME_NUMBER and isinstance(env[n.args[0]], Tracer):
                    raise SpecialisedNumber(
                        f"{self.name}: the traced function read a float as a Python number "
                        "(float(x), math.*) where wg.compile specialised on its value; a "
                        "derivative through it would be lost. Use wengert.numpy there "
                        "(wnp.log(x) for math.log(x)) to differentiate through it.")
                if bool(env[i]) != guards[i]:
                    raise GuardFailure(i)
        if _env:
            return env
        return unflatten(self.out_def, [env[o].copy() if self.nodes[o].kind == "const"
                                        and isinstance(env[o], np.ndarray) else env[o]
                                        for o in self.outputs])

    # -- keeping the program, not the values ----------------------------------------------
    def without_values(self):
        """This program with each traced value (inputs, intermediates, example arguments)
        replaced by a stand-in of its shape and dtype -- NaN everywhere, no memory -- and
        its constants kept: what ``wg.compile`` keeps after generating code, so that a
        compiled function does not hold the values of its first call.  Evaluating, reading
        the source and the nodes work; derivative graphs need values (:meth:`with_values`)."""
        memo = {}  # one stand-in per shape and dtype: NumPy's broadcast_to is slow to call
        nodes = [n if n.kind == "const" else
                 Node(n.kind, n.prim, n.args, n.params, _stand_in(n.value, memo))
                 for n in self.nodes]
        leaves, d = flatten(self.example_args)
        g = Graph(nodes, self.in_def, self.leaf_slots, self.input_nodes, self.arg_names,
                  self.out_def, self.outputs, self.guards, name=self.name,
                  example_args=unflatten(d, [_stand_in(x) for x in leaves]))
        g.stats = self.stats
        g.values_dropped = True
        return g

    def with_values(self, args):
        """This program with the values it takes at ``args`` (plain values, which pass its
        guards; else ``GuardFailure``) as its traced values and example arguments."""
        env = self.evaluate(self._input_leaves(args), _env=True)
        nodes = [n if n.kind == "const" else Node(n.kind, n.prim, n.args, n.params, env[i])
                 for i, n in enumerate(self.nodes)]
        g = Graph(nodes, self.in_def, self.leaf_slots, self.input_nodes, self.arg_names,
                  self.out_def, self.outputs, self.guards, name=self.name,
                  example_args=tuple(args))
        g.stats = self.stats
        return g

    # -- derivatives as graphs: each is the trace of a transform of the graph -------------
    def _need_values(self):
        if self.values_dropped:
            raise ValueError(f"{self.name}: this graph was kept without its traced values "
                             "(wg.compile keeps the program, not the values of its first "
                             "call); take cf.graph(*args), or g.with_values(args)")

    def _retrace(self, fn, name, args=None, names=None):
        if args is None:
            self._need_values()
        return trace(fn, *(self.example_args if args is None else args),
                     _names=names or self.arg_names, _name=name)

    def grad(self, argnums=0):
        """The gradient program of a scalar-valued graph, as a new graph (reverse mode)."""
        return self._retrace(transforms.grad(self, argnums), f"grad_{self.name}")

    def jvp(self):
        """The forward-mode program: arguments ``(*primals, *tangents)``, result ``(out, tangent)``."""
        self._need_values()
        n = len(self.example_args)

        def jvp_fn(*args):
            return transforms.jvp(self, args[:n], args[n:])
        tangents = tuple(_ones_like(a) for a in self.example_args)
        names = list(self.arg_names) + [f"d{a}" for a in self.arg_names]
        return self._retrace(jvp_fn, f"jvp_{self.name}", self.example_args + tangents, names)

    def vjp(self):
        """The reverse-mode program: arguments ``(*primals, cotangent)``, result a tuple."""
        self._need_values()
        n = len(self.example_args)

        def vjp_fn(*args):
            return transforms.vjp(self, *args[:n])[1](args[n])
        out = self(*self.example_args)
        names = list(self.arg_names) + [f"g{self.name}"]
        return self._retrace(vjp_fn, f"vjp_{self.name}", self.example_args + (_ones_like(out),),
                             names)

    def jacobian(self, argnums=0, mode="auto"):
        return self._retrace(transforms.jacobian(self, argnums, mode=mode),
                             f"jacobian_{self.name}")

    def hessian(self, argnums=0):
        return self._retrace(transforms.hessian(self, argnums), f"hessian_{self.name}")

    # -- rewriting, code, pictures ---------------------------------------------------------
    def simplify(self, *, fast_math=False, report=False):
        return _simplify(self, fast_math=fast_math, report=report)

    def source(self):
        """Readable Python: one assignment per primitive node, over NumPy."""
        return generate(self).text

    def compile(self):
        """A Python function generated from :meth:`source` (same arguments as the graph)."""
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
        return graph_to_dot(self, values=values and not self.values_dropped)


def _stand_in(v, memo=None):
    """A value's shape and dtype without its data: a read-only broadcast of one NaN (one
    zero for ints and bools), so that code reading it by mistake shows it; ``memo`` shares
    one among values of the same shape and dtype."""
    if type(v) is np.ndarray:
        k = (v.shape, v.dtype)
        s = memo.get(k) if memo is not None else None
        if s is None:
            fill = np.array(np.nan if v.dtype.kind in "fc" else 0, dtype=v.dtype)
            s = np.broadcast_to(fill, v.shape)
            if memo is not None:
                memo[k] = s
        return s
    if type(v) in (tuple, list):
        return type(v)(_stand_in(e, memo) for e in v)
    return v


def _ones_like(tree):
    leaves, d = flatten(tree)
    return unflatten(d, [1.0 if isinstance(x, float) else np.ones_like(x) for x in leaves])


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
    return is_foreign(x)  # an array of another library (CuPy, Dask): an input, not a constant



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


@plain_store_errors
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
    tr.reads_numbers = _transform == "wg.compile"  # a compiled program re-traces; a Graph not
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
    outer = push_active(tr)
    try:
        out = f(*args, **kwargs)
    finally:
        pop_active(outer)
        tr.finished = True
        tr.finish(_transform, f)
    out_leaves, out_def = flatten(out)

    def foreign(o):
        check_live(o, lambda: f"returned by the function given to {_transform}")
        raise TypeError("wg.trace: the function returned a value traced by an outer "
                        "transform; trace functions of their arguments only")
    outputs = tr.output_nodes(out_leaves, foreign)
    names = _names or arg_names_of(f, len(example_args))
    plain_args = unflatten(in_def, [_plain(x) for x in leaves])
    return Graph(tr.nodes, in_def, slots, input_nodes, list(names), out_def, outputs,
                 tr.guards, name=_name or _func_name(f), example_args=tuple(plain_args))


def to_dot(obj, *example_args, values=True):
    """Graphviz DOT text for a Graph, a Var (its tape), or a function at example arguments.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> print(wg.to_dot(lambda x, y: x * y + wnp.sin(x), 0.5, 4.2))  # doctest: +ELLIPSIS
    digraph "f" {
    ...
      n2 [label="multiply\\n= 2.1", shape=box];
    ...
    """
    if isinstance(obj, Graph):
        return graph_to_dot(obj, values=values and not obj.values_dropped)
    if isinstance(obj, Var):
        return tape_to_dot(obj)
    if callable(obj):
        return graph_to_dot(trace(obj, *example_args), values=values)
    raise TypeError(f"to_dot takes a Graph, a Var or a function with example arguments, "
                    f"not {type(obj).__name__}")
