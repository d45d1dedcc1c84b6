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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=1_000)
    ap.add_argument("--snapshots", type=int, default=20)
    ap.add_argument("--strategies", default="all,ctz,binomial,online",
                    help="comma-separated; 'loop' adds a plain Python loop on the tape")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    args = ap.parse_args(argv)
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
