"""Checkpointing benchmark: time and peak memory of a long scan's gradient, per strategy.

    python benchmarks/bench_checkpoint.py                 # N = 10,000 steps, size 1,000
    python benchmarks/bench_checkpoint.py --steps 2000 --size 300

The loop is ``x <- x + 0.01 * tanh(W x)`` and the gradient is taken with respect to
the weight matrix ``W`` the step closes over (loss: ``sum(x_N)``).  Each strategy
is run once for time (no tracing of allocations) and once under ``tracemalloc``
for the peak.  Memory is reported in units of one state (``size`` floats) above a
*floor*: the peak of the same gradient for a 2-step scan with strategy "all" minus
its one stored state — what any strategy needs (W, its cotangent accumulator, one
step's tape).  Targets checked (and printed as ok / MISSED):

* ctz: extra states <= floor(log2 N) + 3 and time <= (ceil(log2 N) + 1) x "all";
* binomial (snapshots 20): time <= 3 x "all".

Every schedule's time is also given as a ratio to the revolve bound for as many stored
states: its own time with only revolve's count of recomputed steps (``revolve_cost``), each
costing a step without a tape (timed on the value-only loop); "ctz-revolve" (ctz's forward
phase, each stretch reversed by revolve) is run beside the others.

"online" (dynamic checkpointing, N not known in advance) runs with the same
snapshots for comparison.

    python benchmarks/bench_checkpoint.py --compiled      # N = 2,000 steps, size 100

compares the schedules under ``wg.compile(wg.grad(loss))``: the scan is one node of the
generated program, running the compiled step and its VJP in a loop that follows the
schedule.  The step is an invertible coupling ``p <- p + h tanh(W q); q <- q + h tanh(W p)``
(so "invert" runs the same chain); printed per strategy: the first call (trace and
compile), the best of ``--repeat`` rounds (each times every strategy once), the most
states stored at once (counted by the compiled loop) and the peak memory of a call in
states (tracemalloc).  Targets: ctz within 2x of "all" in time, with at most
floor(log2 N) + 1 stored states.

A row per strategy then times a reverse Jacobian, ``wg.compile(wg.jacobian(f,
mode="reverse"))`` of the first ``--rows`` entries of the final ``p``: every row pulled
back at once, so the VJPs take cotangents with a batch axis (the first call, the best of
``--repeat``, and whether the reverse phase ran in the Numba loop).

With Numba (the fused loop), a second table says whether that target is reachable: the
measured cost of a step (s, or s_r keeping its residuals), of a VJP from residuals (v,
what "all" runs) and of a VJP that recomputes its step (v_full, what every other schedule
runs), timed inside the compiled loop on the real trajectory; per schedule the counted
work (steps run, VJPs, states stored) and the time it predicts; and the least time any
schedule storing as many states as ctz can take (revolve's optimal count of steps,
``revolve_cost``), with the fewest stored states for which revolve's count fits in 2x.
"""
import argparse
import math
import os
import sys
import time
import tracemalloc

# one BLAS thread: the steps are matrix-vector products, and threaded BLAS on a shared
# machine makes their time erratic (set the variables yourself to override)
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402


def make_loss(n_steps, x0, how, snapshots):
    def step(x, _):
        return x + 0.01 * wnp.tanh(W_ref[0] @ x), None

    W_ref = [None]

    def loss(W):
        W_ref[0] = W
        x, _ = wg.scan(step, x0, length=n_steps, checkpoint=how, snapshots=snapshots)
        return wnp.sum(x)
    return loss


def make_loop_loss(n_steps, x0):
    def loss(W):
        x = x0
        for _ in range(n_steps):
            x = x + 0.01 * wnp.tanh(W @ x)
        return wnp.sum(x)
    return loss


def measure(loss, W, trace_memory):
    if trace_memory:
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    g = wg.grad(loss)(W)
    dt = time.perf_counter() - t0
    peak = None
    if trace_memory:
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return g, dt, peak


def make_coupled_loss(n_steps, p0, q0, how, snapshots, h=0.01):
    def loss(W):
        def step(c, _):
            p, q = c
            p = p + h * wnp.tanh(W @ q)
            q = q + h * wnp.tanh(W @ p)
            return (p, q), None

        def inverse(c, _):
            p, q = c
            q = q - h * wnp.tanh(W @ p)
            p = p - h * wnp.tanh(W @ q)
            return p, q
        (p, q), _ = wg.scan(step, (p0, q0), length=n_steps, checkpoint=how,
                            snapshots=snapshots, inverse=inverse)
        return wnp.sum(p) + wnp.sum(q)
    return loss


def make_coupled_rows(n_steps, p0, q0, how, snapshots, rows):
    """The first ``rows`` entries of the coupled scan's final ``p``: a vector function."""
    def f(W):
        def step(c, _):
            p, q = c
            p = p + 0.01 * wnp.tanh(W @ q)
            q = q + 0.01 * wnp.tanh(W @ p)
            return (p, q), None
        (p, q), _ = wg.scan(step, (p0, q0), length=n_steps, checkpoint=how,
                            snapshots=snapshots)
        return p[:rows]
    return f


def jacobian_rows(args, hows, W, p0, q0):
    """The reverse Jacobian rows: first call, best of --repeat, fused reverse or not."""
    n = args.steps
    print(f"wg.compile(wg.jacobian(f, mode='reverse')), f = the first {args.rows} entries of "
          f"p_N: {args.rows} cotangents pulled back at once")
    for how in hows:
        if how == "invert":
            continue  # (the step's inverse is not given to f)
        snaps = args.snapshots if how in ("binomial", "online") else None
        t0 = time.perf_counter()
        cf = wg.compile(wg.jacobian(make_coupled_rows(n, p0, q0, how, snaps, args.rows),
                                    mode="reverse"))
        cf(W)
        first = time.perf_counter() - t0
        best = math.inf
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            cf(W)
            best = min(best, time.perf_counter() - t0)
        fl = _plan_of(cf).fused()
        fused = fl is not None and any(isinstance(k, tuple) for k in fl.calls)
        print(f"jacobian {how:16s} first call {first:6.2f} s  time {best * 1e3:8.1f} ms  "
              f"reverse phase {'fused (Numba loop)' if fused else 'Python loop'}", flush=True)


def _plan_of(cf):
    plans_of = sys.modules["wengert.checkpoint.compiled"].plans_of
    (plan,) = [p for gr in cf.graphs for p in plans_of(gr)]
    return plan


def _probe_without_residuals(n, p0, q0, W):
    """"all" whose VJPs recompute their step (no residuals kept): its reverse phase times
    the VJP the other schedules run, on the same trajectory."""
    fused = sys.modules["wengert.checkpoint.fused"]
    old, fused.KEEP_RESIDUALS = fused.KEEP_RESIDUALS, False
    try:
        cf = wg.compile(wg.grad(make_coupled_loss(n, p0, q0, "all", None)))
        cf(W)
    finally:
        fused.KEEP_RESIDUALS = old
    return cf


def compiled_main(args):
    revolve_cost = sys.modules["wengert.checkpoint.schedules"].revolve_cost
    n, m = args.steps, args.size
    rng = np.random.default_rng(0)
    W = rng.standard_normal((m, m)) / math.sqrt(m)
    p0, q0 = rng.standard_normal(m), rng.standard_normal(m)
    state_bytes = p0.nbytes + q0.nbytes
    print(f"wg.compile(wg.grad(loss)) of a {n}-step scan, state of 2 x {m} floats, "
          f"numpy {np.__version__}")
    hows = args.strategies.split(",")
    fns, first, best, phases = {}, {}, {}, {}
    for how in hows:
        snaps = args.snapshots if how in ("binomial", "online") else None
        t0 = time.perf_counter()
        fns[how] = wg.compile(wg.grad(make_coupled_loss(n, p0, q0, how, snaps)))
        fns[how](W)
        first[how] = time.perf_counter() - t0
    fused_ok = all(_plan_of(cf).fused() is not None for cf in fns.values())
    if fused_ok:  # the split of a step's cost: see split_of
        fns["probe"] = _probe_without_residuals(n, p0, q0, W)
        fns["value"] = wg.compile(make_coupled_loss(n, p0, q0, "ctz", None))
        fns["value"](W)
    # rounds over the strategies, best of each: the machine's load drifts alike for all
    for _ in range(args.repeat):
        for how, cf in fns.items():
            t0 = time.perf_counter()
            cf(W)
            dt = time.perf_counter() - t0
            if dt < best.get(how, math.inf):
                best[how] = dt
                fl = _plan_of(cf).fused()
                phases[how] = dict(fl.times) if fl is not None else {}
    rows = {}
    ref = None
    for how in hows:
        snaps = args.snapshots if how in ("binomial", "online") else None
        cf = fns[how]
        plan = _plan_of(cf)
        plan.stats["max_stored"] = 0
        tracemalloc.start()
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        g = cf(W)
        peak = (tracemalloc.get_traced_memory()[1] - base) / state_bytes
        tracemalloc.stop()
        ref = g if ref is None else ref
        err = float(np.max(np.abs(g - ref)) / float(np.max(np.abs(ref))))
        rows[how] = (best[how], plan.stats["max_stored"])
        label = how if snaps is None else f"{how}(s={snaps})"
        vs_all = f" ({best[how] / best['all']:4.2f} x all)" if "all" in best else ""
        print(f"{label:16s} first call {first[how]:6.2f} s  time {best[how] * 1e3:8.1f} ms{vs_all}"
              f"  stored <= {plan.stats['max_stored']:5d} states  peak {peak:7.1f} states"
              f"  rel.diff {err:.1e}", flush=True)
    if args.rows:
        jacobian_rows(args, hows, W, p0, q0)
    if args.eager:
        for how in args.strategies.split(","):
            snaps = args.snapshots if how in ("binomial", "online") else None
            t0 = time.perf_counter()
            wg.grad(make_coupled_loss(n, p0, q0, how, snaps))(W)
            print(f"eager {how:10s} time {(time.perf_counter() - t0) * 1e3:8.1f} ms", flush=True)
    if "all" in rows and "ctz" in rows:
        ratio = rows["ctz"][0] / rows["all"][0]
        bound = n.bit_length()
        print(f"compiled ctz time / all = {ratio:.2f} (target <= 2): "
              f"{'ok' if ratio <= 2 else 'MISSED'}; stored {rows['ctz'][1]} states "
              f"(target <= floor(log2 N) + 1 = {bound}): "
              f"{'ok' if rows['ctz'][1] <= bound else 'MISSED'}")
        if fused_ok:
            work_table(n, hows, fns, best, phases, revolve_cost)
        else:
            print("(no Numba: the split of the time into steps and VJPs is not measured)")


def split_of(n, phases):
    """Per-step costs, in seconds, from the phases of the best rounds: ``s`` a step
    without residuals (the value-only ctz run), ``s_r`` with them ("all"'s forward),
    ``v`` a VJP from residuals ("all"'s reverse), ``v_full`` a VJP that recomputes its
    step (the probe's reverse: "all" without residuals), ``copy`` storing one state (the
    probe's forward minus the run)."""
    s = phases["value"]["run"] / n
    return {"s": s, "s_r": phases["all"]["forward"] / n, "v": phases["all"]["reverse"] / n,
            "v_full": phases["probe"]["reverse"] / n,
            "copy": max(0.0, phases["probe"]["forward"] / n - s)}


def work_table(n, hows, fns, best, phases, revolve_cost):
    """The counted work of each schedule, the time it predicts from the measured split,
    and the least any schedule storing as many states as ctz can do (revolve's count)."""
    sp = split_of(n, phases)
    s, v_full, t_all = sp["s"], sp["v_full"], best["all"]
    us = {k: f"{v * 1e6:.2f}" for k, v in sp.items()}
    print(f"\nmeasured per step (us): step s = {us['s']}, step keeping residuals s_r = "
          f"{us['s_r']}, VJP from residuals v = {us['v']}, VJP recomputing its step v_full = "
          f"{us['v_full']}, storing a state = {us['copy']}")
    print("predicted = steps run x s + VJPs x v_full (+ stores; 'all': N x (s_r + v))")
    print(f"{'schedule':24s} {'stored':>7s} {'steps run':>10s} {'VJPs':>6s} {'measured':>14s} "
          f"{'predicted':>15s}")

    def row(label, stored, steps, vjps, measured, predicted, note=""):
        mt = f"{measured * 1e3:6.1f} ms {measured / t_all:4.2f}x" if measured else "-"
        pt = f"{predicted * 1e3:6.1f} ms {predicted / t_all:4.2f}x"
        print(f"{label:24s} {stored:7d} {steps:10d} {vjps:6d} {mt:>14s} {pt:>15s} {note}")
    def bound(states):  # the least time for a schedule storing ``states`` states
        return (revolve_cost(n, states - 1) + 1) * s + n * v_full

    for how in hows:
        fl = _plan_of(fns[how]).fused()
        c = fl.counts
        inv = c["fwd_inverted"] + c["rev_inverted"]  # an inverse step counted as a step
        steps = c["fwd_steps"] + c["rev_steps"] + inv
        if how == "all":
            pred = n * (sp["s_r"] + sp["v"])
        else:
            pred = steps * s + n * v_full + c["stores"] * sp["copy"]
        note = "" if how == "invert" else \
            f"{best[how] / bound(max(fl.max_stored, 1)):4.2f} x revolve bound"
        row(how if how not in ("binomial", "online") else f"{how}(s={fl.max_stored - 1})",
            fl.max_stored, steps, n, best[how], pred,
            note + (f" ({inv} of them inverse steps)" if inv else ""))
    probe = _plan_of(fns["probe"]).fused()
    row("all, no residuals", probe.max_stored, n, n, best["probe"], n * (s + v_full + sp["copy"]))
    k = _plan_of(fns["ctz"]).fused().max_stored if "ctz" in fns else n.bit_length()

    row(f"revolve, {k} states", k, revolve_cost(n, k - 1) + 1, n, None, bound(k),
        "<- the least any schedule storing as many states as ctz can do")
    need = next((j for j in range(2, n + 1) if bound(j) <= 2 * t_all), None)
    if need is None:
        print("no schedule fits in 2x of all: even storing every state, its VJPs recompute")
    else:
        row(f"revolve, {need} states", need, revolve_cost(n, need - 1) + 1, n, None,
            bound(need), "<- the fewest states for 2x")
    most = (2 * t_all - n * v_full) / s
    least = revolve_cost(n, k - 1) + 1
    ctz = ""
    if "ctz" in fns:
        c = _plan_of(fns["ctz"]).fused().counts
        ctz = f"; ctz runs {c['fwd_steps'] + c['rev_steps']}"
    print(f"within 2x of all ({2 * t_all * 1e3:.1f} ms) a schedule may run at most {most:.0f} "
          f"steps ({most / n:.2f} N) beside its {n} VJPs{ctz}; storing {k} states, none "
          f"runs fewer than {least} ({least / n:.2f} N)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=1_000)
    ap.add_argument("--snapshots", type=int, default=20)
    ap.add_argument("--strategies", default="all,ctz,ctz-revolve,binomial,online",
                    help="comma-separated; 'loop' adds a plain Python loop on the tape")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    ap.add_argument("--compiled", action="store_true",
                    help="compare the schedules under wg.compile (defaults: --steps 2000 "
                    "--size 100 --strategies all,ctz,ctz-revolve,binomial,invert)")
    ap.add_argument("--repeat", type=int, default=7,
                    help="timed rounds over the strategies (--compiled)")
    ap.add_argument("--rows", type=int, default=8,
                    help="with --compiled: rows of the reverse Jacobian timed (0: none)")
    ap.add_argument("--eager", action="store_true",
                    help="with --compiled: time the eager gradients too, once each")
    args = ap.parse_args(argv)
    revolve_cost = sys.modules["wengert.checkpoint.schedules"].revolve_cost
    if args.compiled:
        given = set(argv if argv is not None else sys.argv[1:])
        if "--steps" not in given:
            args.steps = 2000
        if "--size" not in given:
            args.size = 100
        if "--strategies" not in given:
            args.strategies = "all,ctz,ctz-revolve,binomial,invert"
        return compiled_main(args)
    n, m = args.steps, args.size
    rng = np.random.default_rng(0)
    W = rng.standard_normal((m, m)) / math.sqrt(m)
    x0 = rng.standard_normal(m)
    state_bytes = x0.nbytes
    print(f"gradient of a {n}-step scan, x of size {m} (one state = {state_bytes / 1e3:.0f} kB), "
          f"numpy {np.__version__}")

    floor = None
    measure(make_loss(2, x0, "all", None), W, False)  # warm up: imports, caches
    if not args.no_memory:
        _, _, p2 = measure(make_loss(2, x0, "all", None), W, True)
        floor = p2 - state_bytes
        print(f"floor (2-step 'all' minus one state): {floor / 1e6:.1f} MB")

    rows = {}
    ref = None
    # a step's cost without a tape: what a recomputation costs, for the revolve bound below
    value_only = make_loss(n, x0, "ctz", None)
    t0 = time.perf_counter()
    value_only(W)
    s_step = (time.perf_counter() - t0) / n
    for how in args.strategies.split(","):
        snaps = args.snapshots if how in ("binomial", "online") else None
        loss = make_loop_loss(n, x0) if how == "loop" else make_loss(n, x0, how, snaps)
        g, dt, _ = measure(loss, W, False)
        peak = None
        if not args.no_memory:
            _, _, peak = measure(loss, W, True)
        if ref is None:
            ref = g
        err = float(np.max(np.abs(g - ref)) / max(1e-300, float(np.max(np.abs(ref)))))
        st = None
        if how in ("all", "ctz", "ctz-revolve", "binomial", "online"):
            st = wg.checkpoint_schedule(n, how, snaps).stats()
        rows[how] = (dt, peak, err, st)
        label = how if snaps is None else f"{how}(s={snaps})"
        extra = "" if peak is None else (
            f"  peak {peak / 1e6:8.1f} MB = floor + {(peak - floor) / state_bytes:8.1f} states")
        sched = ""
        if st is not None:
            # the revolve bound for as many stored states: this run's time with only
            # revolve's count of recomputed steps (each costing a tape-free step)
            k = st["max_stored"]
            extra_steps = st["advanced"] - revolve_cost(n, k - 1)
            vs = dt / max(dt - extra_steps * s_step, 1e-12)
            sched = (f"  stored<={k:5d}  advanced {st['advanced']:7d} steps  "
                     f"{vs:4.2f} x revolve bound({k} states)")
        print(f"{label:16s} time {dt:8.2f} s{extra}{sched}  rel.diff {err:.1e}", flush=True)

    if "all" in rows:
        t_all = rows["all"][0]
        lg_f, lg_c = n.bit_length() - 1, (n - 1).bit_length()
        if "ctz" in rows:
            dt, peak, _, _ = rows["ctz"]
            print(f"ctz time / all = {dt / t_all:.2f} (target <= {lg_c + 1}): "
                  f"{'ok' if dt / t_all <= lg_c + 1 else 'MISSED'}")
            if peak is not None:
                extra = (peak - floor) / state_bytes
                print(f"ctz extra states = {extra:.1f} (target <= {lg_f + 3}): "
                      f"{'ok' if extra <= lg_f + 3 else 'MISSED'}")
        if "binomial" in rows:
            dt = rows["binomial"][0]
            print(f"binomial time / all = {dt / t_all:.2f} (target <= 3): "
                  f"{'ok' if dt / t_all <= 3 else 'MISSED'}")


if __name__ == "__main__":
    main()
