"""A compiled scan's loop inside Numba: one function per schedule phase.

The compiled scan (:mod:`.compiled`) calls its compiled step once per step from a Python
loop: a few microseconds of calls per step, which on small states is all the time.  With
fusion on (``wg.compile(fuse=True)``, Numba installed) and a step whose graph and VJP graph
are all Numba-expressible (wengert/graph/numba_array.py), the whole schedule runs in two
Numba functions instead: the forward phase and the rest (the reverse sweep with its
recomputations).  The schedule is passed as an integer array of actions, interpreted in
the loop, and its snapshots live in preallocated slots -- as many as it ever holds at
once, so "ctz" and "binomial" keep their O(log N) bound (the action list itself is
O(N) integers).  The carry is copied into a buffer of its own each step.

Any leaf that is not a float (array) of at least one dimension, a node without a Numba
form, cotangents with batch axes, or a Numba compile error: the plan keeps its Python
loop, and records why in ``plan.fuse_failures``.
"""
from __future__ import annotations

import builtins

import numpy as np

from ..graph.fuse import numba_or_none
from ..graph.numba_array import NotExpressible, float_kind, njit_source

__all__ = ["FusedLoop", "NotExpressible"]

ADVANCE, STORE, RESTORE, REVERSE, INVERT = range(5)
_JIT = {}  # full source -> dispatcher


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
    arr = np.array(rows, np.int64).reshape(-1, 3)

    def steps(part):
        return int(sum(r[2] - r[1] for r in part if r[0] == ADVANCE))
    counts = {"fwd_steps": steps(rows[:split]) + 1, "rev_steps": steps(rows[split:]),
              "fwd_inverted": sum(1 for r in rows[:split] if r[0] == INVERT),
              "rev_inverted": sum(1 for r in rows[split:] if r[0] == INVERT)}
    return arr[:split], arr[split:], max(nslots, 1), max_stored, counts


def _jit(src, name, helpers, key=""):
    """``src``'s function ``name`` compiled (once per source and the helpers' sources in
    ``key``), with ``helpers`` (Numba functions) as its globals."""
    fn = _JIT.get(key + src)
    if fn is None:
        numba = numba_or_none()[0]
        ns = {"np": np, **helpers}
        exec(builtins.compile(src, f"<wengert fused scan {name}>", "exec"), ns)
        fn = _JIT[key + src] = numba.njit(error_model="numpy")(ns[name])
    return fn


def _helper(g, name):
    src, consts = njit_source(g, name)
    return _jit(src, name, {}), consts, src


class FusedLoop:
    """The two Numba functions of one plan (built on first use), and what to pass them."""

    def __init__(self, plan):
        self.plan = plan
        self.calls = {}  # method -> successful calls (a failure after the first is a bug)
        nc, nx, ncap = plan.n_carry, plan.n_x, plan.n_cap
        ex = plan.step_graph.example_args
        self.kinds = [float_kind(v) for v in list(ex) + plan.y_ex]
        for pos, k in enumerate(self.kinds):
            if k is None:
                v = (list(ex) + plan.y_ex)[pos]
                raise NotExpressible(f"leaf {pos} of the step is {type(v).__name__} "
                                     f"{getattr(v, 'dtype', '')}{np.shape(v)}, not a float "
                                     "(array) of at least one dimension")
        self.step, self.k_step, s_src = _helper(plan.step_graph.simplify(), "step")
        self.vjp, self.k_vjp, v_src = _helper(plan._vjp_graph(()).simplify(), "vjp")
        helpers = {"step": self.step, "vjp": self.vjp}
        i_src = ""
        if plan.inv_graph is not None:
            self.inv, self.k_inv, i_src = _helper(plan.inv_graph.simplify(), "inv")
            helpers["inv"] = self.inv
        else:
            self.k_inv = []
        ck = self.kinds[:nc]
        self.x_kinds = self.kinds[nc:nc + nx]
        self.cap_kinds = self.kinds[nc + nx:nc + nx + ncap]
        self.y_kinds = self.kinds[nc + nx + ncap:]
        self.carry_kinds = ck
        key = "\n".join([s_src, v_src, i_src])
        self.fwd_fn = _jit(self._forward_source(), "fwd", helpers, key)
        self.rev_fn = _jit(self._reverse_source(), "rev", helpers, key)
        self.fwd_acts, self.rev_acts, self.nslots, self.max_stored, self.counts = \
            encode(plan.schedule())
        n = plan.n
        self.run_acts = np.array([(ADVANCE, 0, n - 1)] if n > 1 else [], np.int64).reshape(-1, 3)

    # -- sources ------------------------------------------------------------------------------
    def _names(self):
        p = self.plan
        return ([f"c{j}" for j in range(p.n_carry)], [f"x{j}" for j in range(p.n_x)],
                [f"p{j}" for j in range(p.n_cap)], [f"q{j}" for j in range(p.n_icap)],
                [f"ks{j}" for j in range(len(self.k_step))],
                [f"kv{j}" for j in range(len(self.k_vjp))],
                [f"ki{j}" for j in range(len(self.k_inv))])

    def _state_ops(self, u, xk):
        """Source lines of the actions both phases share (after ``kd, i, j = ...``)."""
        c, x, p, q, ks, kv, ki = self._names()
        step_call = f"step({', '.join(u + [f'{v}[k]' for v in x] + p + ks)})"
        lines = []
        sets = [(f"{v}[:] = r[{j}]" if k[0] == "array" else f"{v} = r[{j}]")
                for j, (v, k) in enumerate(zip(u, self.carry_kinds))]
        lines += ["if kd == 0:", "    for k in range(i, j):", f"        r = {step_call}"]
        lines += ["        " + s for s in sets] + [f"        {ln}" for ln in xk]
        lines += ["elif kd == 1:"] + [f"    S{j}[j] = {v}" for j, v in enumerate(u)]
        lines += ["    pass", "elif kd == 2:"]
        lines += [(f"    {v}[:] = S{j}[j]" if k[0] == "array" else f"    {v} = S{j}[j]")
                  for j, (v, k) in enumerate(zip(u, self.carry_kinds))] + ["    pass"]
        if self.plan.inv_graph is not None:
            lines += ["elif kd == 4:",
                      f"    ri = inv({', '.join(u + [f'{v}[i]' for v in x] + q + ki)})"]
            lines += [(f"    {v}[:] = ri[{j}]" if k[0] == "array" else f"    {v} = ri[{j}]")
                      for j, (v, k) in enumerate(zip(u, self.carry_kinds))]
        return lines, step_call

    @staticmethod
    def _alloc(name, lead, k):
        if k[0] == "array":
            return f"{name} = np.empty(({lead},) + {tuple(k[1])!r}, np.{k[2].name})"
        return f"{name} = np.empty({lead}, np.float64)"

    @staticmethod
    def _own(name, src, k):
        return f"{name} = {src}.copy()" if k[0] == "array" else f"{name} = {src}"

    def _forward_source(self):
        c, x, p, q, ks, kv, ki = self._names()
        u = [f"u{j}" for j in range(len(c))]
        nc = len(c)
        lines = [self._alloc(f"S{j}", "nslots", k) for j, k in enumerate(self.carry_kinds)]
        lines += [self._alloc(f"Y{j}", "n", k) for j, k in enumerate(self.y_kinds)]
        lines += [self._own(v, cv, k) for v, cv, k in zip(u, c, self.carry_kinds)]
        ops, step_call = self._state_ops(u, [f"Y{j}[k] = r[{nc + j}]"
                                             for j in range(len(self.y_kinds))])
        lines += ["for a in range(acts.shape[0]):",
                  "    kd = acts[a, 0]", "    i = acts[a, 1]", "    j = acts[a, 2]"]
        lines += ["    " + ln for ln in ops]
        lines += ["k = n - 1", f"r = {step_call}"]
        lines += [f"Y{j}[k] = r[{nc + j}]" for j in range(len(self.y_kinds))]
        ret = [f"r[{j}]" for j in range(nc)] + [f"Y{j}" for j in range(len(self.y_kinds))] + \
            u + [f"S{j}" for j in range(nc)]
        lines.append(f"return ({''.join(r + ', ' for r in ret)})")
        sig = ", ".join(c + x + p + q + ks + ki + ["acts", "nslots", "n"])
        return f"\ndef fwd({sig}):\n" + "".join(f"    {ln}\n" for ln in lines)

    def _reverse_source(self):
        c, x, p, q, ks, kv, ki = self._names()
        u = c  # the current state: the forward phase's buffers, taken over
        nc, ny = len(c), len(self.y_kinds)
        g = [f"g{j}" for j in range(nc)]
        gy = [f"GY{j}" for j in range(ny)]
        h = [f"h{j}" for j in range(nc)]
        lines = [self._alloc(f"GX{j}", "n", k).replace("np.empty", "np.zeros")
                 for j, k in enumerate(self.x_kinds)]
        lines += [(f"gp{j} = np.zeros({tuple(k[1])!r}, np.{k[2].name})" if k[0] == "array"
                   else f"gp{j} = 0.0") for j, k in enumerate(self.cap_kinds)]
        lines += [self._own(v, gv, k) for v, gv, k in zip(h, g, self.carry_kinds)]
        ops, _ = self._state_ops(u, [])
        vjp_call = f"vjp({', '.join(u + [f'{v}[i]' for v in x] + p + h + [f'{v}[i]' for v in gy] + kv)})"
        rev = ["elif kd == 3:", f"    rv = {vjp_call}"]
        rev += [(f"    {v}[:] = rv[{j}]" if k[0] == "array" else f"    {v} = rv[{j}]")
                for j, (v, k) in enumerate(zip(h, self.carry_kinds))]
        rev += [f"    GX{j}[i] = rv[{nc + j}]" for j in range(len(x))]
        rev += [(f"    gp{j} += rv[{nc + len(x) + j}]" if k[0] == "array"
                 else f"    gp{j} = gp{j} + rv[{nc + len(x) + j}]")
                for j, k in enumerate(self.cap_kinds)]
        lines += ["for a in range(acts.shape[0]):",
                  "    kd = acts[a, 0]", "    i = acts[a, 1]", "    j = acts[a, 2]"]
        lines += ["    " + ln for ln in ops + rev]
        ret = h + [f"GX{j}" for j in range(len(x))] + [f"gp{j}" for j in range(len(p))]
        lines.append(f"return ({''.join(r + ', ' for r in ret)})")
        sig = ", ".join(c + [f"S{j}" for j in range(nc)] + x + p + q + ks + kv + ki + g + gy +
                        ["acts", "n"])
        return f"\ndef rev({sig}):\n" + "".join(f"    {ln}\n" for ln in lines)

    # -- running ------------------------------------------------------------------------------
    def _out(self, v, kind_of):
        """A result as the traced program had it (a Python float or NumPy scalar)."""
        if type(v) is np.ndarray:
            return v
        return type(kind_of)(v) if type(kind_of) in (float, np.float64) else v

    def forward(self, init, xs, cap, icap, keep=True):
        """Final carry, stacked ys, and (when ``keep``) the current state and the slots."""
        p, nc, ny = self.plan, self.plan.n_carry, len(self.y_kinds)
        acts = self.fwd_acts if keep else self.run_acts
        out = self.fwd_fn(*init, *xs, *cap, *icap, *self.k_step, *self.k_inv, acts,
                          self.nslots if keep else 1, p.n)
        st = p.stats
        st["steps"] += self.counts["fwd_steps"] if keep else p.n
        if keep:
            st["max_stored"] = max(st["max_stored"], self.max_stored)
            st["inverted"] += self.counts["fwd_inverted"]
        final = [self._out(v, e) for v, e in zip(out[:nc], p.carry_ex)]
        ys = list(out[nc:nc + ny])
        return final, ys, list(out[nc + ny:nc + ny + nc]), list(out[nc + ny + nc:])

    def reverse(self, cur, slots, xs, cap, icap, g_c, g_y):
        p = self.plan
        out = self.rev_fn(*cur, *slots, *xs, *cap, *icap, *self.k_step, *self.k_vjp,
                          *self.k_inv, *g_c, *g_y, self.rev_acts, p.n)
        st = p.stats
        st["steps"] += self.counts["rev_steps"]
        st["vjps"] += p.n
        st["inverted"] += self.counts["rev_inverted"]
        nc, nx = p.n_carry, p.n_x
        ex = list(p.step_graph.example_args)
        res = [self._out(v, ex[j]) for j, v in enumerate(out[:nc])]
        res += list(out[nc:nc + nx])
        res += [self._out(v, ex[nc + nx + j]) for j, v in enumerate(out[nc + nx:])]
        return res
