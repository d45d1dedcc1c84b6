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

"online" (dynamic checkpointing, N not known in advance) runs with the same
snapshots for comparison.

    python benchmarks/bench_checkpoint.py --compiled      # N = 2,000 steps, size 100

compares the schedules under ``wg.compile(wg.grad(loss))``: the scan is one node of the
generated program, running the compiled step and its VJP in a loop that follows the
schedule.  The step is an invertible coupling ``p <- p + h tanh(W q); q <- q + h tanh(W p)``
(so "invert" runs the same chain); printed per strategy: the first call (trace and
compile), the best of ``--repeat`` rounds (each times every strategy once), the most
states stored at once (counted by the compiled loop) and the peak memory of a call in states (tracemalloc).  Targets: ctz
within 2x of "all" in time, with at most floor(log2 N) + 1 stored states.
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


def compiled_main(args):
    plans_of = sys.modules["wengert.checkpoint.compiled"].plans_of
    n, m = args.steps, args.size
    rng = np.random.default_rng(0)
    W = rng.standard_normal((m, m)) / math.sqrt(m)
    p0, q0 = rng.standard_normal(m), rng.standard_normal(m)
    state_bytes = p0.nbytes + q0.nbytes
    print(f"wg.compile(wg.grad(loss)) of a {n}-step scan, state of 2 x {m} floats, "
          f"numpy {np.__version__}")
    hows = args.strategies.split(",")
    fns, first, best = {}, {}, {}
    for how in hows:
        snaps = args.snapshots if how in ("binomial", "online") else None
        t0 = time.perf_counter()
        fns[how] = wg.compile(wg.grad(make_coupled_loss(n, p0, q0, how, snaps)))
        fns[how](W)
        first[how] = time.perf_counter() - t0
    # rounds over the strategies, best of each: the machine's load drifts alike for all
    for _ in range(args.repeat):
        for how in hows:
            t0 = time.perf_counter()
            fns[how](W)
            best[how] = min(best.get(how, math.inf), time.perf_counter() - t0)
    rows, ref = {}, None
    for how in hows:
        snaps = args.snapshots if how in ("binomial", "online") else None
        cf = fns[how]
        (plan,) = [p for gr in cf.graphs for p in plans_of(gr)]
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=1_000)
    ap.add_argument("--snapshots", type=int, default=20)
    ap.add_argument("--strategies", default="all,ctz,binomial,online",
                    help="comma-separated; 'loop' adds a plain Python loop on the tape")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    ap.add_argument("--compiled", action="store_true",
                    help="compare the schedules under wg.compile (defaults: --steps 2000 "
                    "--size 100 --strategies all,ctz,binomial,invert)")
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds over the strategies (--compiled)")
    ap.add_argument("--eager", action="store_true",
                    help="with --compiled: time the eager gradients too, once each")
    args = ap.parse_args(argv)
    if args.compiled:
        given = set(argv if argv is not None else sys.argv[1:])
        if "--steps" not in given:
            args.steps = 2000
        if "--size" not in given:
            args.size = 100
        if "--strategies" not in given:
            args.strategies = "all,ctz,binomial,invert"
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
        if how in ("all", "ctz", "binomial", "online"):
            st = wg.checkpoint_schedule(n, how, snaps).stats()
        rows[how] = (dt, peak, err, st)
        label = how if snaps is None else f"{how}(s={snaps})"
        extra = "" if peak is None else (
            f"  peak {peak / 1e6:8.1f} MB = floor + {(peak - floor) / state_bytes:8.1f} states")
        sched = "" if st is None else (f"  stored<={st['max_stored']:5d}  "
                                       f"advanced {st['advanced']:7d} steps")
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
