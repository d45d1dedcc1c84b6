"""``wg.scan`` inside ``wg.compile`` (or ``wg.trace``): the loop as one node, not N copies.

Unrolling a scan into the straight-line program would give programs of N steps and
lose the schedule's memory bound (every state a variable of the program).  So under
a graph trace the step is traced once into a graph of its own -- values it closes
over (a weight matrix being differentiated) lifted to extra inputs -- and compiled,
with its VJP and the inverse step; the loop becomes one ``scan_loop`` node holding
that *plan*.  Its reverse rule records ``scan_forward`` (the schedule's forward
phase; its last result holds the snapshots) and ``scan_reverse`` (the rest of the
schedule, each reverse action one call of the compiled VJP).  The generated program
calls them, and they run a driver loop over ``iter_schedule``'s actions through the
executor the eager scan uses (``schedules.execute``): the same schedule, the same
bound on stored states.

Other engines meeting these nodes (a graph evaluated on ``Dual``s, a second
derivative) run the eager ``wg.scan`` on the step graph.  Under ``wg.vmap`` the nodes are
mapped by the plan's batch rule, the schedule run once for the whole batch: the cotangents
alone batched (a reverse Jacobian) by each step's VJP compiled for the batch (``vmap`` over
the step's pullback; in the Numba loop too); the carry, xs or captured values batched by a
plan of the step mapped over the batch (``vmap`` of the step graph, traced once).  Once per
example only where the step cannot be mapped (the reason in ``fuse_failures``).
A step that branches on its values (a guard), or whose carry changes type, is not
lowered: the scan unrolls as before.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import transforms
from ..core import Tracer, plain, shape_of
from ..arrays import zeros_like_value
from ..batching import BatchTrace, BatchTracer, one_example, per_example, vmap
from ..numpy import broadcast_to as _broadcast, moveaxis as _moveaxis
from ..graph.codegen import build_function
from ..graph.fuse import warn_unfused
from ..graph.trace import GraphTrace, GraphTracer, active_graph_traces
from ..forward import ForwardTrace
from ..reverse import Tape
from ..rules.checkpointing import scan_loop, scan_forward, scan_reverse
from ..tree import flatten, unflatten
from .regions import _is_float, _top_trace
from .steps import (NotBatchable, mapped_step, pushed_step, step_kind,
                    trace_flat)
from .fused import FusedLoop
from .schedules import execute, forward_phase, iter_schedule

__all__ = ["lower_scan", "LoopPlan", "plans_of", "NotBatchable"]

_LOCK = threading.Lock()  # a plan's table of batched plans, shared by threads


class _Residual:
    """What ``scan_forward`` leaves the reverse phase: the current state, the snapshots and
    the rest of the schedule.  The first ``scan_reverse`` takes them (so no state is held
    twice); a later one rebuilds them by running the forward phase again."""

    __slots__ = ("cur", "stored", "rest", "plan")

    def __init__(self, cur=None, stored=None, rest=None, plan=None):
        self.cur, self.stored, self.rest, self.plan = cur, stored, rest, plan

    def take(self):
        r = self.cur, self.stored, self.rest
        self.cur = self.stored = self.rest = None
        return r

    def __repr__(self):
        return "<scan snapshots>" if self.rest is not None else "<scan snapshots, taken>"


class _Run:
    """The loop protocol of ``schedules.execute`` on plain values, by the compiled step."""

    def __init__(self, plan, xs, cap, icap):
        self.plan, self.xs, self.cap, self.icap = plan, xs, cap, icap
        self.nc = plan.n_carry

    def __call__(self, state, x):
        out = self.plan.step_fn(*state, *x, *self.cap)
        self.plan.stats["steps"] += 1
        return out[:self.nc], out[self.nc:]

    def x_at(self, k):
        return [x[k] for x in self.xs]

    def advance(self, state, start, stop, ys=None):
        """Steps ``start .. stop-1``: the recomputations, so kept lean."""
        fn, xs, cap, nc = self.plan.step_fn, self.xs, self.cap, self.nc
        keep = ys is not None and self.plan.n_y > 0
        for k in range(start, stop):
            out = fn(*state, *[x[k] for x in xs], *cap)
            state = out[:nc]
            if keep:
                ys.append(out[nc:])
        self.plan.stats["steps"] += stop - start
        return state

    def back(self, state, x):
        self.plan.stats["inverted"] += 1
        return self.plan.inv_fn(*state, *x, *self.icap)


class LoopPlan:
    """One lowered scan: its step (and VJP, inverse) compiled, its schedule, its leaves.

    ``stats``: ``max_stored`` (most snapshots held at once, as the eager scan counts
    them), ``steps`` (compiled step calls), ``vjps``, ``inverted``, over all runs.
    """

    def __init__(self, n, strategy, snapshots, loop, step_graph, n_carry, n_x, n_cap,
                 inv_graph, n_icap, y_examples, eager_scan):
        self.n, self.strategy, self.snapshots = n, strategy, snapshots
        self.carry_def, self.xs_def, self.y_def = loop.carry_def, loop.xs_def, loop.y_def
        self.user_step, self.inverse = loop.step, loop.inverse
        self.step_graph, self.inv_graph = step_graph, inv_graph
        self.n_carry, self.n_x, self.n_cap, self.n_icap = n_carry, n_x, n_cap, n_icap
        self.n_y = len(y_examples)
        ex = step_graph.example_args
        self.carry_ex = [plain(v) for v in ex[:n_carry]]
        self.y_ex = [plain(v) for v in y_examples]
        # which leaves are differentiated: float ones (as the eager scan decides)
        self.in_float = [_is_float(v) for v in ex]          # carry, x, captured
        self.out_float = [_is_float(v) for v in self.carry_ex + self.y_ex]
        self.eager_scan = eager_scan
        self.step_fn = build_function(step_graph.simplify())
        self.inv_fn = build_function(inv_graph.simplify()) if inv_graph is not None else None
        self._vjp_fns = {}  # batch shape of the cotangents -> the compiled VJP
        self.stats = {"max_stored": 0, "steps": 0, "vjps": 0, "inverted": 0}
        self._fuse = False      # wg.compile(fuse=True) turns it on: the loop inside Numba
        self._fused = None      # the FusedLoop, built on first use
        self.fuse_failures = []  # why the loop stayed a Python loop (NotExpressible...)
        self._fuse_asked = False
        self._unfused_batches = set()  # cotangent batch shapes the Numba loop refused
        self._batched = {}      # (batched arguments, size) -> the plan of the batched step
        self._pushed_plans = {}  # arguments with tangents -> (plan of the pushed step, parts)
        self.batch_size = None  # a batched plan's: the size of the batch its step maps

    def enable_fusion(self):
        """Run the whole loop in Numba where its step allows (``wg.compile``'s fuse)."""
        self._fuse = self._fuse_asked = True

    def fused(self):
        """The plan's FusedLoop, or None (fusion off, or the step is not expressible)."""
        if self._fused is None and self._fuse:
            try:
                self._fused = FusedLoop(self)
            except Exception as e:  # NotExpressible, or Numba's own refusal
                self._fuse = False
                self.fuse_failures.append(e)
                if getattr(e, "primitive", None):
                    warn_unfused([e.primitive], f"a compiled scan of {self.n} steps (its loop "
                                 "runs step by step from Python)")
        return self._fused

    def _try_fused(self, method, *args):
        """``FusedLoop.method(*args)``; on its first failure (Numba compiles on the first
        call) the fused loop is dropped, the reason recorded, and None returned."""
        fl = self.fused()
        if fl is None:
            return None
        try:
            out = getattr(fl, method)(*args)
        except Exception as e:
            if fl.calls.get(method):
                raise
            self._fused, self._fuse = None, False
            self.fuse_failures.append(e)
            return None
        fl.calls[method] = fl.calls.get(method, 0) + 1
        return out

    def __repr__(self):
        return f"<scan plan: {self.n} steps, checkpoint={self.strategy!r}>"

    # -- the leaves of scan_loop's arguments ------------------------------------------------
    @property
    def n_args(self):
        return self.n_carry + self.n_x + self.n_cap + self.n_icap

    def split(self, args):
        a, b, c = self.n_carry, self.n_carry + self.n_x, self.n_carry + self.n_x + self.n_cap
        return list(args[:a]), list(args[a:b]), list(args[b:c]), list(args[c:self.n_args])

    @property
    def float_args(self):
        """Positions of the arguments that get cotangents (the inverse's captures never do)."""
        return [i for i, f in enumerate(self.in_float) if f]

    def _stack(self, ys):
        return [np.stack([y[j] for y in ys]) for j in range(self.n_y)]

    def schedule(self):
        return iter_schedule(self.n, self.strategy, self.snapshots)

    # -- the compiled loop (plain values) -------------------------------------------------------
    def run(self, args):
        init, xs, cap, icap = self.split(args)
        out = self._try_fused("forward", init, xs, cap, icap, False)
        if out is not None:
            return tuple(out[0]) + tuple(out[1])
        ys = []
        state = _Run(self, xs, cap, icap).advance(init, 0, self.n, ys)
        return tuple(state) + tuple(self._stack(ys))

    def forward(self, args):
        init, xs, cap, icap = self.split(args)
        out = self._try_fused("forward", init, xs, cap, icap, True)
        if out is not None:
            final, ys, cur, slots = out
            return tuple(final) + tuple(ys) + (_Residual(cur, slots, "fused", self),)
        run = _Run(self, xs, cap, icap)
        cur, stored, ys, rest = forward_phase(self.schedule(), init, run, self.stats, True)
        final, y_last = run(cur, run.x_at(self.n - 1))
        if y_last:
            ys.append(y_last)
        return tuple(final) + tuple(self._stack(ys)) + (_Residual(cur, stored, rest, self),)

    def vjp_fn(self, batch=()):
        """The step's compiled VJP, for cotangents with leading axes ``batch``: ``vmap``
        over the step's pullback (a reverse Jacobian pulls back every row at once)."""
        fn = self._vjp_fns.get(batch)
        if fn is None:
            fn = self._vjp_fns.setdefault(batch, build_function(self._vjp_graph(batch).simplify()))
        return fn

    def _vjp_graph(self, batch, with_results=False):
        """The step's VJP as a graph: (carry, x, captured, cotangents of the float
        results) -> cotangents of the float arguments (after the float results themselves,
        ``with_results``)."""
        k = len(self.in_float)
        fl, outf = self.float_args, [j for j, f in enumerate(self.out_float) if f]
        step = self.step_graph

        def vjp_step(ins):
            prim, cts = ins[:k], ins[k:]

            def fn(*fv):
                full = list(prim)
                for i, v in zip(fl, fv):
                    full[i] = v
                outs = step.evaluate(full)
                return [outs[j] for j in outf]
            res, pb = transforms.vjp(fn, *[prim[i] for i in fl])
            if batch:  # one direction per example of the batch: rules see no batch axis
                pulled = list(vmap(lambda *c: pb(list(c)))(*cts))
            else:
                pulled = list(pb(list(cts)))
            return (list(res) if with_results else []) + pulled
        example = list(step.example_args) + [
            np.zeros(batch + shape_of(v), np.result_type(v)) if batch else v
            for v, f in zip(self.carry_ex + self.y_ex, self.out_float) if f]
        return trace_flat(vjp_step, example, "scan_step_vjp", self.user_step)[0]

    def batch_of(self, gs):
        """The leading batch axes of the cotangents ``gs`` of the results (``()`` for none;
        ``None`` when they disagree)."""
        batch = None
        shapes = [shape_of(v) for v in self.carry_ex] + [(self.n,) + shape_of(v)
                                                         for v in self.y_ex]
        for g, s in zip(gs, shapes):
            if g is None:
                continue
            gs_ = shape_of(g)
            if len(gs_) < len(s) or gs_[len(gs_) - len(s):] != s:
                return None
            b = gs_[:len(gs_) - len(s)]
            if batch is not None and b != batch:
                return None
            batch = b
        return batch if batch is not None else ()

    def reverse(self, args):
        na, nc = self.n_args, self.n_carry
        res, prim, gs = args[0], args[1:1 + na], args[1 + na:]
        init, xs, cap, icap = self.split(prim)
        if res.plan is not self:  # another plan's snapshots (or none): rebuild them
            res = _Residual()
        if res.rest == "fused":
            cur, slots, _ = res.take()
            batch = self.batch_of(gs)
            if batch is not None:
                out = self._fused_reverse(cur, slots, xs, cap, icap, gs, batch)
                if out is not None:
                    return tuple(out)
        run = _Run(self, xs, cap, icap)
        if res.rest is not None and res.rest != "fused":
            cur, stored, rest = res.take()
        else:  # called again: rebuild the forward phase's snapshots first
            cur, stored, _, rest = forward_phase(self.schedule(), init, run, self.stats, False)
        fl = self.float_args
        carry_f = [i for i in fl if i < nc]
        x_f = [i for i in fl if nc <= i < nc + self.n_x]
        cap_f = [i for i in fl if i >= nc + self.n_x]
        batch = self.batch_of(gs)
        nb = len(batch)
        lead = (slice(None),) * nb

        def zero(v):
            return np.zeros(batch + shape_of(v), np.result_type(v)) if nb else zeros_like_value(v)
        g_c = [gs[i] if gs[i] is not None else zero(self.carry_ex[i])
               for i in range(nc) if self.out_float[i]]
        g_y = [(gs[nc + j], zero(self.y_ex[j]))
               for j in range(self.n_y) if self.out_float[nc + j]]
        g_xs = [None] * len(x_f)
        g_cap = [None] * len(cap_f)
        owned = [False] * len(cap_f)
        vjp_fn = self.vjp_fn(batch)
        for a in rest:
            if a.kind != "reverse":
                cur = execute(a, cur, stored, run, self.stats)
                continue
            i = a.index
            x_i = run.x_at(i)
            cts = vjp_fn(*cur, *x_i, *cap, *g_c,
                         *[z if g is None else g[lead + (i,)] for g, z in g_y])
            self.stats["vjps"] += 1
            g_c = cts[:len(carry_f)]
            # the carry's non-float leaves get no cotangent: the next step's VJP takes only
            # the float ones, in the same order
            for j, c in enumerate(cts[len(carry_f):len(carry_f) + len(x_f)]):
                if g_xs[j] is None:  # stacked along the scanned axis, after the batch axes
                    sh = shape_of(c)
                    g_xs[j] = np.zeros(sh[:nb] + (self.n,) + sh[nb:], np.result_type(c))
                g_xs[j][lead + (i,)] = c
            for j, c in enumerate(cts[len(carry_f) + len(x_f):]):
                if g_cap[j] is None:
                    g_cap[j] = c
                elif owned[j]:
                    np.add(g_cap[j], c, out=g_cap[j])
                else:
                    g_cap[j] = g_cap[j] + c
                    owned[j] = type(g_cap[j]) is np.ndarray
        del cur, stored
        return tuple(g_c) + tuple(g_xs) + tuple(g_cap)

    def _fused_reverse(self, cur, slots, xs, cap, icap, gs, batch):
        """The reverse phase in the Numba loop (``None`` where it cannot run there).  A
        batch shape the loop cannot be compiled for keeps the Python loop, for that shape
        only: its reason joins ``fuse_failures``."""
        nc = self.n_carry
        g_c = [np.zeros(batch + shape_of(c), np.result_type(c)) if g is None else g
               for g, c in zip(gs[:nc], self.carry_ex)]
        g_y = [np.zeros(batch + (self.n,) + shape_of(y), np.result_type(y)) if g is None
               else g for g, y in zip(gs[nc:], self.y_ex)]
        if not batch:
            return self._try_fused("reverse", cur, slots, xs, cap, icap, g_c, g_y)
        fl = self.fused()
        if fl is None or batch in self._unfused_batches:
            return None
        try:
            out = fl.reverse(cur, slots, xs, cap, icap, g_c, g_y, batch)
        except Exception as e:
            if fl.calls.get(("reverse", batch)):
                raise
            self._unfused_batches.add(batch)
            self.fuse_failures.append(e)
            return None
        fl.calls[("reverse", batch)] = fl.calls.get(("reverse", batch), 0) + 1
        return out

    # -- rules: the compiled path on plain values and graph tracers, else the eager scan --------
    def eager(self, args):
        """``scan_loop``'s results by the eager ``wg.scan`` of the step graph (any tracers)."""
        init, xs, cap, icap = self.split(args)
        nc, step_g, inv_g = self.n_carry, self.step_graph, self.inv_graph

        def step(c, x):
            xl = flatten(x)[0] if self.xs_def is not None else []
            out = step_g.evaluate(flatten(c)[0] + xl + cap)
            return unflatten(self.carry_def, out[:nc]), unflatten(self.y_def, out[nc:])

        def inverse(c, x):
            xl = flatten(x)[0] if self.xs_def is not None else []
            return unflatten(self.carry_def, inv_g.evaluate(flatten(c)[0] + xl + icap))
        xs_tree = unflatten(self.xs_def, xs) if self.xs_def is not None else None
        c, ys = self.eager_scan(step, unflatten(self.carry_def, init), xs_tree, self.n,
                                self.strategy, self.snapshots,
                                inverse if inv_g is not None else None)
        return tuple(flatten(c)[0]) + (tuple(flatten(ys)[0]) if ys is not None else ())

    def eager_reverse(self, args):
        """``scan_reverse`` by reverse mode on the eager loop."""
        na = self.n_args
        prim, gs = list(args[1:1 + na]), args[1 + na:]
        fl = self.float_args

        def fn(*fv):
            full = list(prim)
            for i, v in zip(fl, fv):
                full[i] = v
            return list(self.eager(full))
        outs, pb = transforms.vjp(fn, *[prim[i] for i in fl])
        return tuple(pb([zeros_like_value(o) if g is None else g for g, o in zip(gs, outs)]))

    def _eager_fn(self, prim):
        if prim is scan_loop:
            return self.eager
        if prim is scan_forward:
            return lambda args: self.eager(args) + (_Residual(),)
        return self.eager_reverse

    @staticmethod
    def _compiled_ok(args):
        """Whether the compiled loop can take ``args``: plain values or graph tracers, under
        any number of ``vmap``s (whose batch rule maps the loop)."""
        for a in args:
            while isinstance(a, BatchTracer):
                a = a.value
            if isinstance(a, Tracer) and not isinstance(a, GraphTracer):
                return False
        return True

    def rrule(self, prim, args, needs):
        if prim is scan_loop and self._compiled_ok(args):
            outs = scan_forward(*args, plan=self)
            res, ans = outs[-1], outs[:-1]

            def pullback(gs):
                if self.batch_of(gs) is None:  # cotangents of unforeseen shapes
                    return _vjp_rule(self.eager, args, needs)[1](gs)
                cts = scan_reverse(res, *args, *gs, plan=self)
                full = [None] * len(args)
                for i, c in zip(self.float_args, cts):
                    full[i] = c if needs[i] else None
                return tuple(full)
            return ans, pullback
        ans, pullback = _vjp_rule(self._eager_fn(prim), args, needs)
        return (ans + (_Residual(),) if prim is scan_forward else ans), pullback

    def frule(self, prim, primals, tangents):
        if prim is scan_loop:
            out = self._pushed(primals, tangents)
            if out is not None:
                return out
        fn = self._eager_fn(prim)
        live = [i for i, (p, t) in enumerate(zip(primals, tangents))
                if t is not None and _is_float(p)]

        def f(*fv):
            full = list(primals)
            for i, v in zip(live, fv):
                full[i] = v
            return [o for o in fn(full) if not isinstance(plain(o), _Residual)]
        out, tout = transforms.jvp(f, tuple(primals[i] for i in live),
                                   tuple(tangents[i] for i in live))
        if prim is scan_forward:
            return tuple(out) + (_Residual(),), tuple(tout) + (None,)
        return tuple(out), tuple(tout)

    def _pushed(self, primals, tangents):
        """``scan_loop``'s pushforward as a loop of the pushed-forward step (the tangents
        part of its carry): compiled, and under ``wg.vmap`` over ``jvp`` (a forward
        Jacobian) mapped by the batch rule.  ``None``: the eager loop's jvp instead."""
        nc, nx = self.n_carry, self.n_x
        live = tuple(i for i in range(nc + nx + self.n_cap)
                     if tangents[i] is not None and self.in_float[i])
        if not live or not self._compiled_ok(list(primals) + [tangents[i] for i in live]):
            return None
        with _LOCK:
            known = live in self._pushed_plans
            got = self._pushed_plans.get(live)
        if not known:
            try:
                loop, g, y_ex, parts = pushed_step(self, live)
                cf, tx, tc, _ = parts
                jp = LoopPlan(self.n, "ctz" if self.strategy == "invert" else self.strategy,
                              self.snapshots, loop, g, nc + len(cf), nx + len(tx),
                              self.n_cap + len(tc), None, 0, y_ex, self.eager_scan)
                if self._fuse_asked:
                    jp.enable_fusion()
                got = (jp, parts)
            except NotBatchable as e:
                self.fuse_failures.append(e)
                got = None
            with _LOCK:
                got = self._pushed_plans.setdefault(live, got)
        if got is None:
            return None
        jp, (cf, tx, tc, yf) = got
        init, xs, cap, _ = self.split(primals)

        def tangent(i):
            t = tangents[i]
            return t if t is not None else np.zeros(shape_of(primals[i]),
                                                    np.result_type(self.carry_ex[i]))
        outs = scan_loop(*init, *[tangent(i) for i in cf], *xs, *[tangents[i] for i in tx],
                         *cap, *[tangents[i] for i in tc], plan=jp)
        n_c, ny = nc + len(cf), self.n_y
        tout = [None] * (nc + ny)
        for j, t in zip(cf + yf, list(outs[nc:n_c]) + list(outs[n_c + ny:])):
            tout[j] = t
        return tuple(outs[:nc]) + tuple(outs[n_c:n_c + ny]), tuple(tout)

    def batch(self, prim, args, batched):
        """``wg.vmap`` of a node.  ``scan_reverse`` with only its cotangents batched (a
        reverse Jacobian) runs the schedule once on the whole batch, each step's VJP
        compiled for the batch.  Anything else batched (carry, xs, captured values:
        per-example gradients, a vmap of a compiled scan) runs the schedule once too, by a
        plan of the batched step (:meth:`batched_plan`); once per example only where the
        step cannot be batched (the reason in ``fuse_failures``)."""
        off = 1 if prim is scan_reverse else 0
        size = _batch_size(args, batched, off)
        head = 1 + self.n_args
        if prim is scan_reverse and not any(batched[:head]):
            gs = [g if b or g is None else _broadcast(g, (size,) + shape_of(g))
                  for g, b in zip(args[head:], batched[head:])]
            return scan_reverse(*args[:head], *gs, plan=self)
        prim_b = batched[off:off + self.n_args]
        # differentiated (scan_forward, scan_reverse): each example's own cotangent of a
        # captured float value, so it is batched on entry too
        diff = prim is not scan_loop
        lo, hi = self.n_carry + self.n_x, self.n_carry + self.n_x + self.n_cap
        flags = tuple(b or (diff and (i < self.n_carry or lo <= i < hi and self.in_float[i]))
                      for i, b in enumerate(prim_b))
        flags = self._batched_carry(flags)
        bp = self.batched_plan(flags, size)
        if bp is None:
            self.stats["per_example"] = self.stats.get("per_example", 0) + size
            return per_example(prim, list(args), batched, {"plan": self}, size)
        ins = [self._enter(a, b, f, i, size) for i, (a, b, f) in
               enumerate(zip(args[off:off + self.n_args], prim_b, flags))]
        nc, ny = self.n_carry, self.n_y
        if prim is not scan_reverse:
            outs = list((scan_loop if prim is scan_loop else scan_forward)(*ins, plan=bp))
            for j in range(nc):  # a carry leaf no example changes: the same for each
                if not flags[j]:
                    outs[j] = _broadcast(outs[j], (size,) + shape_of(outs[j]))
            for j in range(nc, nc + ny):  # stacked ys: (n, batch, ...) -> (batch, n, ...)
                outs[j] = _moveaxis(outs[j], 0, 1)
            return tuple(outs)
        res = args[0] if batched[0] else _Residual()
        gs = []
        for j, (g, b) in enumerate(zip(args[head:], batched[head:])):
            if g is not None and not b:
                g = _broadcast(g, (size,) + shape_of(g))
            if g is not None and j >= nc:
                g = _moveaxis(g, 1, 0)
            gs.append(g)
        cts = list(scan_reverse(res, *ins, *gs, plan=bp))
        for k, i in enumerate(self.float_args):
            if self.n_carry <= i < nc + self.n_x:
                cts[k] = _moveaxis(cts[k], 0, 1)
        return tuple(cts)

    def _enter(self, a, b, f, i, size):
        """Argument ``i`` as the batched plan takes it: batched when ``f`` (broadcast if it
        was not), a batched xs leaf with the scanned axis first, (n, batch, ...)."""
        if f and not b:
            a = _broadcast(a, (size,) + shape_of(a))
        if f and self.n_carry <= i < self.n_carry + self.n_x:
            a = _moveaxis(a, 0, 1)
        return a

    def _batched_carry(self, flags):
        """``flags`` with each carry leaf batched that a batched value reaches, in some
        step: the step graph's dependencies, to a fixed point.  (The others stay one value
        for the whole batch: a forward Jacobian's primal carry is computed once, not once
        per direction.)  Every carry leaf with an inverse step (its graph maps them all)."""
        nc, g = self.n_carry, self.step_graph
        if self.inv_graph is not None:
            return tuple(f or i < nc for i, f in enumerate(flags))
        flags = list(flags)
        while True:
            dep = [False] * len(g.nodes)
            for pos, i in enumerate(g.input_nodes):
                dep[i] = flags[pos]
            for i, n in enumerate(g.nodes):
                if n.kind in ("op", "proj") and any(dep[a] for a in n.args):
                    dep[i] = True
            grown = [j for j in range(nc) if dep[g.outputs[j]] and not flags[j]]
            if not grown:
                return tuple(flags)
            for j in grown:
                flags[j] = True

    def batched_plan(self, flags, size):
        """The plan of the step mapped over a batch of ``size`` (``vmap`` of the step
        graph, traced once and compiled): the arguments batched where ``flags`` say (a
        carry leaf batched there is batched in every step).  ``None`` when the step cannot
        be batched."""
        flags = tuple(bool(f) for f in flags)
        key = (flags, size)
        with _LOCK:
            if key in self._batched:
                return self._batched[key]
        try:
            bp = _batched_plan(self, flags, size)
        except Exception as e:  # a step the batch rules cannot map
            bp = None
            self.fuse_failures.append(NotBatchable(
                f"the step mapped over a batch of {size} could not be traced ({e!r}): the "
                f"loop runs once per example"))
        with _LOCK:
            return self._batched.setdefault(key, bp)


def _batch_size(args, batched, off):
    """The batch size of a node's batched arguments (the snapshots, first of
    ``scan_reverse``'s, know it only through the plan that made them)."""
    for a, b in zip(args[off:], batched[off:]):
        if b:
            return shape_of(a)[0]
    res = plain(args[0])
    if isinstance(res, _Residual) and res.plan is not None:
        return res.plan.batch_size
    return shape_of(res)[0]


def _batched_plan(plan, flags, size):
    loop, g, inv_g, y_ex = mapped_step(plan, flags, size)
    bp = LoopPlan(plan.n, plan.strategy, plan.snapshots, loop, g, plan.n_carry, plan.n_x,
                  plan.n_cap, inv_g, plan.n_icap, y_ex, plan.eager_scan)
    bp.batch_size = size
    if plan._fuse_asked:
        bp.enable_fusion()
    return bp


def _vjp_rule(fn, args, needs):
    """``(results, pullback)`` of ``fn(args)`` by reverse mode, for the float arguments
    that need a cotangent."""
    live = [i for i, a in enumerate(args) if needs[i] and _is_float(a)]

    def f(*fv):
        full = list(args)
        for i, v in zip(live, fv):
            full[i] = v
        return [o for o in fn(full) if not isinstance(plain(o), _Residual)]
    outs, pb = transforms.vjp(f, *[args[i] for i in live])

    def pullback(gs):
        gs = list(gs)[:len(outs)]
        cts = pb([zeros_like_value(o) if g is None else g for g, o in zip(gs, outs)])
        full = [None] * len(args)
        for i, c in zip(live, cts):
            full[i] = c
        return tuple(full)
    return tuple(outs), pullback


# =====================================================================================
# wg.scan's entry
# =====================================================================================
def lower_scan(loop, init_leaves, xs_leaves, n, strategy, snapshots, eager_scan):
    """The scan as one ``scan_loop`` node when a graph trace is recording; ``None`` when it
    should unroll as before (no graph trace, another engine on top, a branching step)."""
    if not active_graph_traces():
        return None
    top = _top_trace(list(init_leaves) + list(xs_leaves))
    if top is not None and not isinstance(top, (GraphTrace, Tape, BatchTrace, ForwardTrace)):
        return None
    nc = len(init_leaves)
    x_ex = [one_example(x)[0] for x in xs_leaves]

    def step(ins):
        x = unflatten(loop.xs_def, ins[nc:]) if loop.xs_def is not None else None
        cl, yl = loop(ins[:nc], x)
        return list(cl) + list(yl)
    g, cap = trace_flat(step, list(init_leaves) + x_ex, "scan_step", loop.step)
    if g.guards:
        return None  # the step branches on its values: one graph cannot stand for it
    outs = [g.nodes[o].value for o in g.outputs]
    if [step_kind(v) for v in outs[:nc]] != [step_kind(v) for v in init_leaves]:
        return None  # the carry changes type or shape from step to step
    inv_g, icap = None, []
    if loop.inverse is not None and strategy == "invert":
        inv_g, icap = trace_flat(lambda ins: loop.back(ins[:nc], unflatten(
            loop.xs_def, ins[nc:]) if loop.xs_def is not None else None),
            outs[:nc] + x_ex, "scan_inverse", loop.inverse)
        if inv_g.guards:
            return None
    plan = LoopPlan(n, strategy, snapshots, loop, g, nc, len(xs_leaves), len(cap), inv_g,
                    len(icap), outs[nc:], eager_scan)
    res = scan_loop(*init_leaves, *xs_leaves, *cap, *icap, plan=plan)
    carry = unflatten(loop.carry_def, list(res[:nc]))
    return carry, None if loop.y_def.kind == "none" else unflatten(loop.y_def, list(res[nc:]))


def plans_of(graph):
    """The plans of the lowered scans in a ``Graph`` (their ``stats`` count what ran)."""
    found = {}
    for n in graph.nodes:
        p = n.params.get("plan") if n.kind == "op" else None
        if isinstance(p, LoopPlan):
            found[id(p)] = p
    return list(found.values())
