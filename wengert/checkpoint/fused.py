"""A compiled scan's loop inside Numba: one function for every phase of the schedule.

The compiled scan (:mod:`.compiled`) calls its compiled step once per step from a Python
loop: a few microseconds of calls per step, which on small states is all the time.  With
fusion on (``wg.compile(fuse=True)``, Numba installed) and a step whose graph and VJP graph
are all Numba-expressible (wengert/graph/numba_array.py), the whole schedule runs in one
Numba function instead (one compilation), called for the forward phase, the last step
and the rest (the reverse sweep with its recomputations); the step, its VJP and the
inverse are Numba functions it calls.  The schedule is passed as an integer array of
actions, interpreted in the loop, and its snapshots live in preallocated slots -- as many
as it ever holds at once, so "ctz" and "binomial" keep their O(log N) bound in states.
Only "all" (O(N) states anyway) holds its O(N) action array: the other schedules' loops
ask a state machine of O(log N) ("ctz", "ctz-revolve"), O(snapshots) ("binomial", "online")
or O(1) ("invert") integers for their actions, a buffer at a time (:mod:`.machine`).  The carry
is copied into a buffer of its own each step; the cotangents of captured values
accumulate in place.  With "all" the forward loop also keeps every step's residuals
(``split_sources``), so the reverse loop does not recompute the steps.

Any leaf that is not a float (array) of at least one dimension, a node without a Numba
form, or a Numba compile error: the plan keeps its Python loop, and records why in
``plan.fuse_failures``.  Cotangents with batch axes (a reverse Jacobian pulls back every
row at once) run the same schedule in a loop function of their own, its VJP the step's
pullback mapped over the batch, compiled once per batch shape.
"""
from __future__ import annotations

import functools
import hashlib
import time
from types import SimpleNamespace

import numpy as np

from .._interrupt import interrupt_of
from ..graph.kernel_cache import copy_call, njit_module
from ..graph.numba_array import NotExpressible, float_kind, njit_source, split_sources
from . import machine
from .schedules import resolved_snapshots

__all__ = ["FusedLoop", "NotExpressible"]

ADVANCE, STORE, RESTORE, REVERSE, INVERT = range(5)
# False: "all" keeps no residuals, its VJPs recompute their step (the benchmark's probe of
# what a VJP costs in the other schedules)
KEEP_RESIDUALS = True
# the strategies whose actions the loop makes itself (machine.py)
GENERATED = {"ctz", "binomial", "invert", "online", "ctz-revolve"}


def encode(actions):
    """The actions as rows ``(kind, index, stop or slot)``, split at the first reverse one,
    with the number of slots, the most states held at once and the counts of steps."""
    rows, slot_of, free = [], {}, []
    nslots = max_stored = 0
    for a in actions:
        k = a.kind
        if k == "advance":
            rows.append((ADVANCE, a.index, a.stop))
        elif k == "store":
            s = slot_of.get(a.index)
            if s is None:
                if free:
                    s = free.pop()
                else:
                    s, nslots = nslots, nslots + 1
                slot_of[a.index] = s
            max_stored = max(max_stored, len(slot_of))
            rows.append((STORE, a.index, s))
        elif k == "restore":
            rows.append((RESTORE, a.index, slot_of[a.index]))
        elif k == "free":
            free.append(slot_of.pop(a.index))
        elif k == "reverse":
            rows.append((REVERSE, a.index, 0))
        elif k == "invert":
            rows.append((INVERT, a.index, 0))
        else:
            raise AssertionError(f"unknown action {a!r}")
    split = next(i for i, r in enumerate(rows) if r[0] == REVERSE)
    arr = np.array(rows, np.int32).reshape(-1, 3)

    def steps(part):
        return int(sum(r[2] - r[1] for r in part if r[0] == ADVANCE))
    counts = {"fwd_steps": steps(rows[:split]) + 1, "rev_steps": steps(rows[split:]),
              "fwd_inverted": sum(1 for r in rows[:split] if r[0] == INVERT),
              "rev_inverted": sum(1 for r in rows[split:] if r[0] == INVERT),
              "stores": sum(1 for r in rows if r[0] == STORE)}
    return arr[:split], arr[split:], max(nslots, 1), max_stored, counts


def _helper(g, name, accumulate=()):
    """The source of a graph as a Numba function ``name`` of its inputs, its array
    constants, its scratch arrays (allocated once by the loop function: the sources of
    their allocations) and the accumulators of the outputs ``accumulate`` it adds into
    (``done``)."""
    buffers = []
    src, consts, done = njit_source(g, name, buffers, accumulate)
    allocs = [f"np.empty({tuple(sh)!r}, np.{dt.name})" for sh, dt in buffers]
    return consts, src, allocs, done


def _set(target, src, kind, ind):
    """Copy ``src`` into the array ``target`` or rebind it (a scalar): kernel_cache's copy
    helper, as slice assignment costs seconds of compilation."""
    if kind[0] == "array":
        return ind + copy_call(len(kind[1]), target, src)
    return f"{ind}{target} = {src}"


@functools.cache
def _machine_hash():
    """machine.py's text, hashed once per process (None where it cannot be read)."""
    try:
        with open(machine.__file__, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except (OSError, TypeError, AttributeError):
        return None


def _machine_key(strategy):
    """What the loop's ``fill`` (machine.py's, compiled) stands for in the kernel cache's
    key: the strategy and machine.py's text, so an edited machine is not loaded stale."""
    h = _machine_hash()
    return None if h is None else f"fill = machine {h} {strategy}"


def _empty(lead, k):
    if k[0] == "array":
        return np.empty((lead,) + tuple(k[1]), k[2])
    return np.empty(lead, np.float64)


def _batched(k, batch):
    """The kind of a cotangent of a leaf of kind ``k`` with leading axes ``batch``."""
    if not batch:
        return k
    return ("array", tuple(batch) + (tuple(k[1]) if k[0] == "array" else ()),
            k[2] if k[0] == "array" else np.dtype(np.float64))


def _zero(k):
    return np.zeros(k[1], k[2]) if k[0] == "array" else 0.0


_NO_STATE = np.zeros(1, np.int64)  # the machine's state when acts are rows


def _writable(a):
    """An array argument as the loop function's one specialization takes it (C order,
    writable): a cotangent may be a read-only broadcast."""
    return np.require(a, requirements=["C", "W"]) if type(a) is np.ndarray else float(a)


class FusedLoop:
    """The plan's loop function (compiled on first call) and the encoded schedule."""

    def __init__(self, plan):
        self.plan = plan
        self.calls = {}  # method -> successful calls (a failure after the first is a bug)
        self.times = {}  # seconds of the last forward phase (with the last step), reverse, run
        nc, nx, ncap = plan.n_carry, plan.n_x, plan.n_cap
        ex = list(plan.step_graph.example_args)
        self.kinds = [float_kind(v) for v in ex + plan.y_ex]
        for pos, k in enumerate(self.kinds):
            if k is None:
                v = (ex + plan.y_ex)[pos]
                raise NotExpressible(f"leaf {pos} of the step is {type(v).__name__} "
                                     f"{getattr(v, 'dtype', '')}{np.shape(v)}, not a float "
                                     "(array) of at least one dimension")
        if plan.n >= 2 ** 31:
            raise NotExpressible(f"{plan.n} steps: the loop's actions are int32")
        self.carry_kinds = self.kinds[:nc]
        self.x_kinds = self.kinds[nc:nc + nx]
        self.cap_kinds = self.kinds[nc + nx:nc + nx + ncap]
        self.y_kinds = self.kinds[nc + nx + ncap:]
        # all but "all": actions made in the loop by machine.fill, no array
        self.generated = plan.strategy in GENERATED
        self.snapshots = resolved_snapshots(plan.n, plan.strategy, plan.snapshots)
        if self.generated:
            self.counts = machine.counts(plan.n, plan.strategy, self.snapshots)
            self.max_stored = self.counts.pop("max_stored")
            self.nslots = max(self.max_stored, 1)
            self.fwd_acts = self.rev_acts = None
        else:
            self.fwd_acts, self.rev_acts, self.nslots, self.max_stored, self.counts = \
                encode(plan.schedule())
        # residuals kept when every step runs once, forwards: the reverse phase reads them
        self.keep_residuals = KEEP_RESIDUALS and plan.strategy == "all" and not bool(
            np.isin(self.rev_acts[:, 0], (ADVANCE, INVERT)).any())
        # the loop function for unbatched cotangents, then one per batch shape of them
        self.kernels = {(): self._compile(())}
        self.res_kinds = self.kernels[()].res_kinds
        n = plan.n
        self.run_acts = np.array([(ADVANCE, 0, n - 1)] if n > 1 else [], np.int32).reshape(-1, 3)
        self.last_acts = np.array([(ADVANCE, n - 1, n)], np.int32)

    @property
    def fn(self):
        """The loop function for unbatched cotangents (``kernels[batch].fn`` for the others)."""
        return self.kernels[()].fn

    # -- the source ---------------------------------------------------------------------------
    def _compile(self, batch, run_only=False):
        """The loop function: the schedule's actions interpreted, the step, its VJP and
        the inverse called as Numba functions of their own (``run_only``: the step alone,
        for a loop only run -- Numba then types and compiles no VJP).  ``batch``: the leading axes
        of the cotangents (a reverse Jacobian pulls back every row at once); the VJP is
        then the step's pullback mapped over them (``plan._vjp_graph(batch)``), and the
        cotangents of the carry, of each step's xs and of the captured values carry them."""
        p = self.plan
        keep_res = self.keep_residuals and not batch and not run_only
        hk = [_batched(k, batch) for k in self.carry_kinds]      # the carry's cotangents
        xk = [_batched(k, batch) for k in self.x_kinds]          # one step's xs' cotangents
        pk = [_batched(k, batch) for k in self.cap_kinds]        # the captured values'
        ck = self.carry_kinds
        nc, nx, ny = p.n_carry, p.n_x, len(self.y_kinds)
        u = [f"u{j}" for j in range(nc)]
        x = [f"x{j}" for j in range(nx)]
        cap = [f"p{j}" for j in range(p.n_cap)]
        icap = [f"q{j}" for j in range(p.n_icap)]
        h = [f"h{j}" for j in range(nc)]
        S, Y = [f"S{j}" for j in range(nc)], [f"Y{j}" for j in range(ny)]
        GX, GY = [f"GX{j}" for j in range(nx)], [f"GY{j}" for j in range(ny)]
        gp = [f"gp{j}" for j in range(p.n_cap)]
        # the captured values' cotangents: added into gp inside the VJP where it can
        acc = [nc + nx + j for j, k in enumerate(pk) if k[0] == "array"]
        res_kinds = []
        if keep_res:  # every step's residuals kept: no recomputation in reverse
            s_buf, v_buf = [], []
            s_src, v_src, k_step, k_vjp, res, done = split_sources(
                p._vjp_graph((), True).simplify(), nc + nx + p.n_cap, nc + ny, s_buf, v_buf,
                acc)
            names = {"step": "fwd", "vjp": "bwd"}
            s_buf, v_buf = ([f"np.empty({tuple(sh)!r}, np.{dt.name})" for sh, dt in b]
                            for b in (s_buf, v_buf))
            res_kinds = [("array", sh, dt) if sh else ("scalar",) for sh, dt in res]
        else:
            names = {"step": "step", "vjp": "vjp"}
            k_step, s_src, s_buf, _ = _helper(p.step_graph.simplify(), "step")
            k_vjp, v_src, v_buf, done = ([], "", [], []) if run_only else _helper(
                p._vjp_graph(batch).simplify(), "vjp", acc)
        R = [f"R{j}" for j in range(len(res_kinds))]
        done = set(done)
        pos = [j for j in range(nc + nx + p.n_cap) if j not in done]  # what vjp returns
        strategy = p.strategy if self.generated else "none"
        functions = [(names["step"], s_src)] + ([] if run_only else [(names["vjp"], v_src)])
        ks = [f"ks{j}" for j in range(len(k_step))]
        kv = [f"kv{j}" for j in range(len(k_vjp))]
        k_inv, ki, i_src, i_buf = [], [], "", []
        if p.inv_graph is not None:
            k_inv, i_src, i_buf, _ = _helper(p.inv_graph.simplify(), "inv")
            functions.append(("inv", i_src))
            ki = [f"ki{j}" for j in range(len(k_inv))]
        call = ", ".join
        L = [f"sb{j} = {a}" for j, a in enumerate(s_buf)]
        L += [f"vb{j} = {a}" for j, a in enumerate(v_buf)]
        L += [f"ib{j} = {a}" for j, a in enumerate(i_buf)]
        ks += [f"sb{j}" for j in range(len(s_buf))]
        kv += [f"vb{j}" for j in range(len(v_buf))]
        kib = ki + [f"ib{j}" for j in range(len(i_buf))]
        # the actions: the rows of acts, or (gen) rows that fill writes into acts in turn;
        # a schedule of rows only has no call of fill (a Numba function less to type)
        if self.generated:
            L += ["a = 0", "m = 0 if gen else acts.shape[0]", "while True:", "    if a == m:",
                  "        if gen == 0:", "            break", "        m = fill(st, acts)",
                  "        a = 0", "        if m == 0:", "            break"]
        else:
            L += ["a = 0", "m = acts.shape[0]", "while True:", "    if a == m:",
                  "        break"]
        L += ["    kd = acts[a, 0]", "    i = acts[a, 1]", "    j = acts[a, 2]", "    a += 1",
              "    if kd == 0:", "        for k in range(i, j):",
             f"            r = step({call(u + [f'{v}[k]' for v in x] + cap + ks)})"]
        L += [_set(v, f"r[{j}]", ck[j], "            ") for j, v in enumerate(u)]
        if ny:
            L += ["            if record:"]
            L += [_set(f"{v}[k]", f"r[{nc + j}]", k, "                ")
                  for j, (v, k) in enumerate(zip(Y, self.y_kinds))]
        if R:
            L += ["            if record == 2:"]
            L += [_set(f"{v}[k]", f"r[{nc + ny + j}]", k, "                ")
                  for j, (v, k) in enumerate(zip(R, res_kinds))]
        L += ["    elif kd == 1:"] + [_set(f"{S[j]}[j]", v, ck[j], "        ")
                                      for j, v in enumerate(u)]
        L += ["    elif kd == 2:"] + [_set(v, f"{S[j]}[j]", ck[j], "        ")
                                      for j, v in enumerate(u)]
        L += [] if run_only else ["    elif kd == 3:", "        rv = vjp(" + call(
            u + [f"{v}[i]" for v in x] + cap + h + [f"{v}[i]" for v in GY] +
            [f"{v}[i]" for v in R] + kv +
            [gp[j - nc - nx] for j in acc]) + ")"]
        if not run_only:
            L += [_set(v, f"rv[{pos.index(j)}]", hk[j], "        ") for j, v in enumerate(h)]
            L += [_set(f"{v}[i]", f"rv[{pos.index(nc + j)}]", k, "        ")
                  for j, (v, k) in enumerate(zip(GX, xk))]
            L += [(f"        {v} += rv[{pos.index(nc + nx + j)}]" if k[0] == "array" else
                   f"        {v} = {v} + rv[{pos.index(nc + nx + j)}]")
                  for j, (v, k) in enumerate(zip(gp, pk)) if nc + nx + j not in done]
        if p.inv_graph is not None:
            L += ["    elif kd == 4:",
                  f"        ri = inv({call(u + [f'{v}[i]' for v in x] + icap + kib)})"]
            L += [_set(v, f"ri[{j}]", ck[j], "        ") for j, v in enumerate(u)]
        L.append(f"return ({''.join(r + ', ' for r in u + h + gp)})")
        sig = ", ".join(u + S + R + Y + h + GX + gp + GY + x + cap + icap +
                        [f"ks{j}" for j in range(len(k_step))] +
                        [f"kv{j}" for j in range(len(k_vjp))] + ki +
                        ["acts", "st", "gen", "record"])
        src = f"def loop({sig}):\n" + "".join(f"    {ln}\n" for ln in L)
        # one module: the loop calls the others as its globals (compiled once per process
        # and kept in the disk cache, graph/kernel_cache.py), and machine.py's fill
        aliases = {a: n for a, n in names.items() if a != n}
        extern, key = ({"fill": machine.jitted(strategy).fill}, _machine_key(strategy)) \
            if self.generated else ({}, "")
        fn = njit_module(functions + [("loop", src)], aliases, extern, key)["loop"]
        return SimpleNamespace(fn=fn, k_step=k_step, k_vjp=k_vjp, k_inv=k_inv,
                               res_kinds=res_kinds, h_kinds=hk, x_kinds=xk, cap_kinds=pk)

    # -- running ------------------------------------------------------------------------------
    def _acts(self, phase):
        """The rows of a phase of the schedule, or the phase when the loop makes them."""
        if self.generated:
            return phase
        return self.fwd_acts if phase == machine.FORWARD else self.rev_acts

    def _call(self, u, S, Y, h, GX, gp, GY, xs, cap, icap, acts, record, batch=()):
        """The loop over ``acts``: rows, or the phase (machine.FORWARD, REVERSE_PHASE)
        whose rows the loop makes itself; ``batch``: the loop function for cotangents
        with those leading axes."""
        k = self.kernels[batch]
        if isinstance(acts, int):
            p = self.plan
            st = machine.state(p.n, p.strategy, self.snapshots, acts,
                               machine.jitted(p.strategy).fill)
            gen = 1
            acts = np.empty((machine.BUFFER_ROWS, 3), np.int32)
        else:
            st, gen = _NO_STATE, 0
        try:
            out = k.fn(*u, *S, *Y, *h, *GX, *gp, *GY, *xs, *cap, *icap, *k.k_step,
                       *k.k_vjp, *k.k_inv, acts, st, gen, record)
        except SystemError as e:  # Ctrl+C in the kernel: see _interrupt
            if interrupt_of(e) is None:
                raise
            raise interrupt_of(e) from None
        nc = len(u)
        return list(out[:nc]), list(out[nc:2 * nc]), list(out[2 * nc:])

    def _dummies(self):
        """The reverse-phase arguments of a forward call: empty, of the types they have."""
        return ([_zero(k) for k in self.carry_kinds], [_empty(0, k) for k in self.x_kinds],
                [_zero(k) for k in self.cap_kinds], [_empty(0, k) for k in self.y_kinds])

    @staticmethod
    def _out(v, kind_of):
        """A result as the traced program had it (a Python float or NumPy scalar)."""
        if type(v) is np.ndarray:
            return v
        return type(kind_of)(v) if type(kind_of) in (float, np.float64) else v

    def forward(self, init, xs, cap, icap, keep=True):
        """Final carry, stacked ys, and (when ``keep``) the current state and the slots."""
        p = self.plan
        xs, cap, icap = ([_writable(a) for a in v] for v in (xs, cap, icap))
        u = [_writable(a).copy() if type(a) is np.ndarray else float(a) for a in init]
        # a run alone (no reverse phase will follow): the loop function without the VJP
        batch = () if keep else "run"
        if batch not in self.kernels:
            self.kernels.setdefault(batch, self._compile((), run_only=True))
        # the snapshots' slots, then (checkpoint="all") every step's residuals
        S = [_empty(self.nslots if keep else 0, k) for k in self.carry_kinds] + \
            [_empty(p.n, k) for k in self.kernels[batch].res_kinds]
        Y = [_empty(p.n, k) for k in self.y_kinds]
        h, GX, gp, GY = self._dummies()
        record = 2 if keep else 1  # 1: the ys, 2: the residuals too
        t0 = time.perf_counter()
        u = self._call(u, S, Y, h, GX, gp, GY, xs, cap, icap,
                       self._acts(machine.FORWARD) if keep else self.run_acts, record, batch)[0]
        cur = [a.copy() if type(a) is np.ndarray else a for a in u] if keep else None
        final = self._call(u, S, Y, h, GX, gp, GY, xs, cap, icap, self.last_acts, record,
                           batch)[0]
        self.times["forward" if keep else "run"] = time.perf_counter() - t0
        st = p.stats
        st["steps"] += self.counts["fwd_steps"] if keep else p.n
        if keep:
            st["max_stored"] = max(st["max_stored"], self.max_stored)
            st["inverted"] += self.counts["fwd_inverted"]
        return [self._out(v, e) for v, e in zip(final, p.carry_ex)], Y, cur, S

    def reverse(self, cur, slots, xs, cap, icap, g_c, g_y, batch=()):
        """The reverse phase: the cotangents of the carry, the xs and the captured values.
        ``batch``: the leading axes of the cotangents ``g_c``, ``g_y`` (a reverse Jacobian's
        rows): the same schedule in the loop function compiled for them (one compilation
        per batch shape); ``g_y``'s are ``batch + (n, ...)``, as are the xs' cotangents."""
        p = self.plan
        nb = len(batch)
        k = self.kernels.get(batch)
        if k is None:
            k = self.kernels.setdefault(batch, self._compile(batch))
        xs, cap, icap = ([_writable(a) for a in v] for v in (xs, cap, icap))
        h = [np.array(g, dtype=hk[2]) if hk[0] == "array" else float(g)
             for g, hk in zip(g_c, k.h_kinds)]
        GX = [np.zeros((p.n,) + tuple(xk[1]), xk[2]) if xk[0] == "array" else np.zeros(p.n)
              for xk in k.x_kinds]
        gp = [_zero(pk) for pk in k.cap_kinds]
        # the ys' cotangents step by step: (n, batch, ...), contiguous
        GY = [_writable(np.ascontiguousarray(np.moveaxis(np.asarray(
            g, dtype=yk[2] if yk[0] == "array" else np.float64), nb, 0)))
            for g, yk in zip(g_y, self.y_kinds)]
        Y = [_empty(0, yk) for yk in self.y_kinds]
        t0 = time.perf_counter()
        _, h, gp = self._call(cur, slots[:p.n_carry] if nb else slots, Y, h, GX, gp, GY, xs,
                              cap, icap, self._acts(machine.REVERSE_PHASE), 0, batch)
        self.times["reverse"] = time.perf_counter() - t0
        st = p.stats
        st["steps"] += self.counts["rev_steps"]
        st["vjps"] += p.n
        st["inverted"] += self.counts["rev_inverted"]
        nc, nx = p.n_carry, p.n_x
        ex = list(p.step_graph.example_args)
        if nb:  # each step's xs' cotangents were written at [i]: (n, batch, ...) -> batch first
            GX = [np.ascontiguousarray(np.moveaxis(g, 0, nb)) for g in GX]
            return h + GX + gp
        return [self._out(v, ex[j]) for j, v in enumerate(h)] + GX + \
            [self._out(v, ex[nc + nx + j]) for j, v in enumerate(gp)]
