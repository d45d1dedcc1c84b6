"""Unrolled loops under ``wg.compile``, rolled back into scans or not (issue 32, item 3).

    python benchmarks/bench_roll.py                       # every row, fused and not
    python benchmarks/bench_roll.py --rows chain-500 --fuse 0

Each cell runs in a new process with an empty kernel cache (a temporary
``WENGERT_CACHE_DIR``; Numba imported before timing): the first call of the compiled
function (trace, roll, simplify, generate, compile kernels, run once) and then the median of
later calls.  ``roll``: ``roll=True`` (rolled wherever exact; the default, ``roll=None``, rolls the
short rows only where their loops fuse); ``unrolled``: ``roll=False`` (or a
wengert without rolling: run the same command with ``PYTHONPATH`` set to that checkout).
The rows: the chain ``x <- x + 0.01 tanh(W x)`` (x of size 10) unrolled 500 and 2,000 steps,
its gradient in ``(x, W)``, and the gradient of an unrolled LSTM cell (4 units, 1,023 steps,
each step's input a row of a constant array).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROWS = ("chain-500", "chain-2000", "chain-grad-500", "chain-grad-2000", "lstm-grad-1023")


def lstm_loss(steps, n=4, seed=0):
    """An unrolled LSTM cell's loss in ``(w, b)`` (``n`` units, each step's input a row of a
    constant array) and arguments for it; tests/test_roll.py rolls the same loop."""
    import wengert.numpy as wnp
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((steps, n))
    w = rng.standard_normal((4 * n, 2 * n)) * 0.3
    b = rng.standard_normal(4 * n) * 0.1

    def sigmoid(z):
        return 1 / (1 + wnp.exp(-z))

    def lstm(w, b):
        h = c = wnp.zeros(n)
        total = 0.0
        for t in range(steps):  # xs[t]: a per-step constant (NumPy's, not traced)
            z = w @ wnp.concatenate([h, xs[t]]) + b
            i, f, o, g = (sigmoid(z[:n]), sigmoid(z[n:2 * n]), sigmoid(z[2 * n:3 * n]),
                          wnp.tanh(z[3 * n:]))
            c = f * c + i * g
            h = o * wnp.tanh(c)
            total = total + wnp.sum(h * h)
        return total
    return lstm, (w, b)


def program(row):
    import wengert as wg
    import wengert.numpy as wnp
    name, steps = row.rsplit("-", 1)
    steps = int(steps)
    rng = np.random.default_rng(0)
    if name.startswith("chain"):
        W = rng.standard_normal((10, 10)) / 10
        x = rng.standard_normal(10)

        def chain(x, W):
            for _ in range(steps):
                x = x + 0.01 * wnp.tanh(W @ x)
            return wnp.sum(x * x)
        return (chain if name == "chain" else wg.grad(chain, argnums=(0, 1))), (x, W)
    loss, args = lstm_loss(steps)
    return wg.grad(loss, argnums=(0, 1)), args


def cell(row, fuse, roll):
    """In a new process: the first call and the steady call, as JSON on stdout."""
    import inspect
    import numba  # noqa: F401  (imported before timing)
    import wengert as wg
    fn, args = program(row)
    kw = {"fuse": fuse == "1"}
    if "roll" in inspect.signature(wg.compile).parameters:
        kw["roll"] = roll == "1"  # rolled wherever exact, or never
    cf = wg.compile(fn, **kw)
    t0 = time.perf_counter()
    cf(*args)
    first = time.perf_counter() - t0
    runs = []
    for _ in range(7):
        t0 = time.perf_counter()
        cf(*args)
        runs.append(time.perf_counter() - t0)
    print(json.dumps({"first": first, "run": float(np.median(runs)),
                      "rolled": len(getattr(cf, "rolled", ())),
                      "nodes": len(cf.graph(*args).nodes)}))


def main(argv):
    rows = ROWS
    fuses = ("0", "1")
    if "--rows" in argv:
        rows = argv[argv.index("--rows") + 1].split(",")
    if "--fuse" in argv:
        fuses = (argv[argv.index("--fuse") + 1],)
    rolls = ("1", "0")
    if "--roll" in argv:
        rolls = (argv[argv.index("--roll") + 1],)
    timeout = float(argv[argv.index("--timeout") + 1]) if "--timeout" in argv else 600
    print("| program | fuse | roll | first call (s) | run (ms) | loops | nodes |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for row in rows:
        for fuse in fuses:
            for roll in rolls:
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, WENGERT_CACHE_DIR=cache)
                    try:
                        out = subprocess.run([sys.executable, __file__, "--cell", row, fuse, roll],
                                             capture_output=True, text=True, env=env,
                                             timeout=timeout)
                        r = json.loads(out.stdout.strip().splitlines()[-1])
                        print(f"| {row} | {fuse} | {roll} | {r['first']:.2f} | "
                              f"{1e3 * r['run']:.3f} | {r['rolled']} | {r['nodes']} |", flush=True)
                    except subprocess.TimeoutExpired:
                        print(f"| {row} | {fuse} | {roll} | over {timeout:.0f} | | | |", flush=True)
                    except (IndexError, ValueError):
                        print(f"| {row} | {fuse} | {roll} | failed: {out.stderr[-300:]!r} | | | |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cell"]:
        cell(*sys.argv[2:5])
    else:
        main(sys.argv[1:])
