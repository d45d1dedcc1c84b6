"""``bench_compile.py --scaling``: where ``wg.compile``'s first call spends its time, by size.

Each cell (program, size, fuse) runs in a new process with an empty kernel cache, Numba
imported before timing.  Phases are measured by wrapping the functions of each pass for
the one call (time inside a wrapped function less the wrapped functions it calls), in
processor seconds (``time.process_time``), as is ``cpu``, the whole first call; ``total`` is
its wall time, which on a shared machine also counts the waits for a core -- the load's
doing, not the program's.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

PHASES = ("trace", "simplify", "passes", "codegen", "compile()", "numba", "rest")
PROGRAMS = ("chain", "chain-grad", "lstm-grad")
SIZES = (100, 1000, 10000, 100000)


def program(name, size):
    """``(function, args)`` with about ``size`` primitives in its (unsimplified) trace."""
    import wengert as wg
    import wengert.numpy as wnp
    x = np.linspace(0.1, 1.0, 10)
    if name in ("chain", "chain-grad"):
        steps = max(1, size // (3 if name == "chain" else 7))

        def chain(x):
            for _ in range(steps):
                x = wnp.tanh(x) * 0.9 + 0.1
            return wnp.sum(x)
        return (chain if name == "chain" else wg.grad(chain)), (x,)
    # an LSTM cell with diagonal weights on 4 units, unrolled: about 60 primitives a step
    steps = max(1, size // 60)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 4)) * 0.5
    xs = rng.standard_normal((steps, 4))

    def sigmoid(z):
        return 1 / (1 + wnp.exp(-z))

    def lstm(w):
        h = c = wnp.zeros(4)
        loss = 0.0
        for t in range(steps):
            f, i, o, g = (sigmoid(w[0] * h + xs[t]), sigmoid(w[1] * h + xs[t]),
                          sigmoid(w[2] * h + xs[t]), wnp.tanh(w[3] * h + xs[t]))
            c = f * c + i * g
            h = o * wnp.tanh(c)
            loss = loss + wnp.sum(h * h)
        return loss
    return wg.grad(lstm), (w,)


def _timers():
    """Wrap each phase's functions; returns the dict of seconds they fill."""
    import importlib
    import numba.core.dispatcher as nd

    def module(name):  # None where this version of wengert has no such module
        try:
            return importlib.import_module(f"wengert.graph.{name}")
        except ImportError:
            return None
    budget, codegen, cmod, fuse, graph = map(module, ("budget", "codegen", "compile", "fuse",
                                                       "graph"))
    spent = dict.fromkeys(PHASES, 0.0)
    stack = [0.0]

    def wrap(owner, attr, phase):
        fn = getattr(owner, attr, None) if owner is not None else None
        if fn is None:
            return

        def timed(*a, **k):
            stack.append(0.0)
            t0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                dt = time.process_time() - t0
                inner = stack.pop()
                spent[phase] += dt - inner
                stack[-1] += dt
        setattr(owner, attr, timed)

    wrap(cmod, "trace", "trace")
    wrap(graph.Graph, "simplify", "simplify")
    for owner, attrs in ((codegen, ("live_nodes", "accumulations", "pool_plan")),
                         (fuse, ("plan", "users", "gather_folds")), (budget, ("fit",))):
        for a in attrs:
            wrap(owner, a, "passes")
    for owner in (codegen, fuse, cmod):
        for a in ("build_function", "build_fused"):
            wrap(owner, a, "codegen")
        wrap(owner, "compile_generated", "compile()")
    wrap(fuse, "njit_module", "numba")
    wrap(nd.Dispatcher, "_compile_for_args", "numba")
    return spent, stack


def cell(name, size, fuse, roll="default"):
    """In a new process: one compiled first call, its phases as JSON on stdout; ``roll``:
    ``0`` compiles the straight line (graph/roll.py rolls a program of 20,000 nodes or more
    into loops by default, and then its phases measure one copy of the loop body)."""
    import numba  # noqa: F401  (imported before timing)
    import wengert as wg
    fn, args = program(name, int(size))
    raw = wg.trace(fn, *args)
    spent, stack = _timers()
    kw = {} if roll == "default" else {"roll": roll == "1"}
    cf = wg.compile(fn, fuse=fuse == "1", **kw)
    c0 = time.process_time()
    t0 = time.perf_counter()
    cf(*args)
    total = time.perf_counter() - t0
    cpu = time.process_time() - c0
    spent["rest"] = cpu - stack[0] + spent["rest"]
    print(json.dumps({"prims": raw.num_ops, "total": total, "cpu": cpu, "phases": spent,
                      "backed_off": [str(e) for e in cf.fuse_failures]}))


def table(argv, script):
    sizes = SIZES
    programs = PROGRAMS
    timeout = 1800
    fuses = ("0", "1")
    roll = "default"
    for j, a in enumerate(argv):
        if a == "--sizes":
            sizes = tuple(int(v) for v in argv[j + 1].split(","))
        if a == "--programs":
            programs = tuple(argv[j + 1].split(","))
        if a == "--timeout":
            timeout = float(argv[j + 1])
        if a == "--fuse":
            fuses = tuple(argv[j + 1].split(","))
        if a == "--roll":
            roll = argv[j + 1]
    print("wg.compile first call, cold (new process, empty kernel cache): processor seconds "
          "per phase and in all (cpu); total: wall seconds")
    head = ("program", "prims", "fuse") + PHASES + ("total", "cpu")
    print(" | ".join(f"{h:>9}" for h in head))
    for name in programs:
        for size in sizes:
            for fuse in fuses:
                with tempfile.TemporaryDirectory(prefix="wengert-scaling-") as cache:
                    env = dict(os.environ, WENGERT_CACHE_DIR=cache)
                    env["PYTHONPATH"] = os.pathsep.join(
                        [os.path.dirname(os.path.dirname(script))] +
                        [p for p in [os.environ.get("PYTHONPATH")] if p])
                    try:
                        out = subprocess.run([sys.executable, script, "--scaling-cell", name,
                                              str(size), fuse, roll], env=env, capture_output=True,
                                             text=True, timeout=timeout)
                    except subprocess.TimeoutExpired:
                        print(f"{name:>9} | {size:>9} | {'fused' if fuse == '1' else 'unfused':>9}"
                              f" | over {timeout:.0f} s")
                        continue
                if out.returncode:
                    print(f"{name}, {size}, fuse={fuse}: failed\n{out.stderr[-2000:]}")
                    continue
                r = json.loads(out.stdout.strip().splitlines()[-1])
                cells = [name, str(r["prims"]), "fused" if fuse == "1" else "unfused"]
                cells += [f"{r['phases'][p]:.2f}" for p in PHASES] + [f"{r['total']:.2f}",
                                                                    f"{r['cpu']:.2f}"]
                print(" | ".join(f"{c:>9}" for c in cells), flush=True)
                for m in r["backed_off"]:
                    print(f"{'':>9}   ({m[:150]})")
