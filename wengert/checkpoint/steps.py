"""A loop step as a graph of its own, and the steps derived from it.

A compiled scan (:mod:`.compiled`) traces its step once into a flat graph -- positional
inputs carry, x, captured values (what the step closes over, lifted to inputs), outputs
the new carry then the ys -- on one example's values.  The plans derived from it trace
their step from that graph: mapped over a batch (``vmap`` of the step graph, for a scan
under ``wg.vmap``).
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import transforms
from ..batching import one_example, vmap
from ..core import Tracer, plain
from ..graph.graph import Graph
from ..graph.trace import GraphTrace
from ..tree import flatten

__all__ = ["NotBatchable", "mapped_step", "pushed_step", "step_kind",
           "trace_flat"]


class NotBatchable(Exception):
    """Why a compiled scan under ``wg.vmap`` runs once per example."""


class _LiftTrace(GraphTrace):
    """A graph trace of one loop step: a value of an outer trace it meets becomes an input."""

    def __init__(self):
        super().__init__()
        self.lifted = []   # the outer values, in the order of their inputs
        self._ids = {}     # id(outer value) -> its input tracer

    def lift(self, x):
        t = self._ids.get(id(x))
        if t is None:
            t = self._ids[id(x)] = self.input(one_example(x))
            self.lifted.append(x)
        return t

    def process(self, prim, args, params):
        args = [self.lift(a) if isinstance(a, Tracer) and getattr(a, "_trace", None) is not self
                else a for a in args]
        return super().process(prim, args, params)


def flat_graph(tr, inputs, outs, name):
    """A Graph of ``tr``'s nodes: positional arguments = ``inputs`` (tracers), result =
    the list ``outs``."""
    outputs = tr.output_nodes(outs, tr.lift)
    inputs = list(inputs) + [tr._ids[id(x)] for x in tr.lifted]
    ex = tuple(t.value for t in inputs)
    in_def = flatten(tuple(0.0 for _ in inputs))[1]
    out_def = flatten([0.0 for _ in outputs])[1]
    return Graph(tr.nodes, in_def, list(range(len(inputs))), [t.node for t in inputs],
                 [f"a{i}" for i in range(len(inputs))], out_def, outputs, tr.guards,
                 name=name, example_args=ex)


def trace_flat(fn, example, name, user_fn):
    """Trace ``fn(list of tracers) -> list`` on inputs with the values ``example``; returns
    the graph (outer values it met become its last inputs) and those outer values."""
    tr = _LiftTrace()
    ins = [tr.input(one_example(v)) for v in example]
    try:
        outs = fn(ins)
        g = flat_graph(tr, ins, outs, name)
    finally:
        tr.finished = True
        tr.finish("wg.scan", user_fn)
    return g, list(tr.lifted)


def step_kind(v):
    """What must not change from step to step for one compiled step to serve them all."""
    v = one_example(v)
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype)
    if isinstance(v, (float, np.floating)):
        return ("float", np.result_type(v))
    return (type(v),)


def mapped_step(plan, flags, size):
    """The loop record, step graph, inverse graph and ys' examples of ``plan``'s step
    mapped over a batch of ``size``: the arguments batched where ``flags`` say (xs on their
    step's axis, after the scanned one; a carry leaf batched there is batched in every
    step, one not batched stays so), the ys all batched."""
    nc, nx, ncap = plan.n_carry, plan.n_x, plan.n_cap
    step_axes = tuple(0 if f else None for f in flags[:nc + nx + ncap])

    def stacked(v):
        return np.repeat(np.asarray(plain(v))[None], size, axis=0)

    def mapped(graph, axes, n_out):
        out_axes = list(axes[:nc]) + [0] * (n_out - nc)

        def fn(ins):
            return list(vmap(lambda *a: graph.evaluate(list(a)), in_axes=axes,
                             out_axes=out_axes)(*ins))
        return fn
    ex = [stacked(v) if a == 0 else v for v, a in zip(plan.step_graph.example_args, step_axes)]
    g, lifted = trace_flat(mapped(plan.step_graph, step_axes, len(plan.step_graph.outputs)),
                           ex, "scan_step_batched", plan.user_step)
    if lifted or g.guards:
        raise NotBatchable("the mapped step reads values it was not given, or branches")
    outs = [g.nodes[o].value for o in g.outputs]
    if [step_kind(v) for v in outs[:nc]] != [step_kind(v) for v in ex[:nc]]:
        raise NotBatchable("the mapped step changes its carry's type or shape")
    inv_g = None
    if plan.inv_graph is not None:
        inv_axes = step_axes[:nc + nx] + tuple(0 if f else None for f in flags[nc + nx + ncap:])
        iex = [stacked(v) if a == 0 else v
               for v, a in zip(plan.inv_graph.example_args, inv_axes)]
        inv_g, lifted = trace_flat(mapped(plan.inv_graph, inv_axes, nc), iex,
                                   "scan_inverse_batched", plan.inverse)
        if lifted or inv_g.guards:
            raise NotBatchable("the mapped inverse reads values it was not given, or branches")
    loop = SimpleNamespace(carry_def=plan.carry_def, xs_def=plan.xs_def, y_def=plan.y_def,
                           step=plan.user_step, inverse=plan.inverse)
    return loop, g, inv_g, outs[nc:]


def pushed_step(plan, live):
    """The loop record, step graph and ys' examples of ``plan``'s step pushed forward
    (``jvp`` of the step graph): its carry is the carry and the tangents of its float
    leaves, its xs and captured values those of the step and the tangents of the ``live``
    ones; its ys the ys and the tangents of the float ones.  A forward Jacobian (``vmap``
    over ``jvp``) then maps a scan of this step."""
    nc, nx, ncap = plan.n_carry, plan.n_x, plan.n_cap
    cf = [i for i in range(nc) if plan.in_float[i]]
    tx = [i for i in live if nc <= i < nc + nx]
    tc = [i for i in live if i >= nc + nx]
    ny = plan.n_y
    yf = [j for j in range(nc, nc + ny) if plan.out_float[j]]
    sizes = [nc, len(cf), nx, len(tx), ncap, len(tc)]

    def fn(ins):
        parts, k = [], 0
        for m in sizes:
            parts.append(list(ins[k:k + m]))
            k += m
        c, dc, x, dx, cp, dcp = parts
        full, pos = c + x + cp, cf + tx + tc

        def f(*fv):
            a = list(full)
            for i, v in zip(pos, fv):
                a[i] = v
            return list(plan.step_graph.evaluate(a))
        out, tout = transforms.jvp(f, tuple(full[i] for i in pos), tuple(dc + dx + dcp))
        return (list(out[:nc]) + [tout[j] for j in cf] + list(out[nc:]) +
                [tout[j] for j in yf])
    ex = list(plan.step_graph.example_args)
    example = (ex[:nc] + [ex[i] for i in cf] + ex[nc:nc + nx] + [ex[i] for i in tx] +
               ex[nc + nx:] + [ex[i] for i in tc])
    g, lifted = trace_flat(fn, example, "scan_step_jvp", plan.user_step)
    if lifted or g.guards:
        raise NotBatchable("the pushed-forward step reads values it was not given, or branches")
    outs = [g.nodes[o].value for o in g.outputs]
    n_c = nc + len(cf)
    if [step_kind(v) for v in outs[:n_c]] != [step_kind(v) for v in example[:n_c]]:
        raise NotBatchable("the pushed-forward step changes its carry's type or shape")

    def flat(k):
        return flatten([0.0] * k)[1]
    n_x = nx + len(tx)
    loop = SimpleNamespace(carry_def=flat(n_c), xs_def=flat(n_x) if n_x else None,
                           y_def=flat(len(outs) - n_c), step=plan.user_step, inverse=None)
    return loop, g, outs[n_c:], (cf, tx, tc, yf)
