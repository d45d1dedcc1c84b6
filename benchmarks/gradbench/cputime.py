"""CPU time of one eval's derivative, wengert or PyTorch, called in-process on one core.

    python benchmarks/gradbench/cputime.py --gradbench PATH --eval lstm --tool wengert
    python benchmarks/gradbench/cputime.py --gradbench PATH --eval lstm --tool pytorch

On a shared machine the wall clock of ``run.py`` mostly measures the neighbours; CPU time
(``time.process_time``) of the same call does not.  The process pins itself to one CPU
before NumPy (or torch) loads, builds the eval's largest default input with GradBench's own
generator (lse, kmeans: the eval's seed; gmm: its ``generate``; lstm: seed 0, as the eval
seeds nothing), and calls the derivative as the tool does: wengert's eval module, or
GradBench's stock ``pytorch`` tool module.  Prints the best and the median of ``--repeat``
calls after one warm-up call.  Run one tool per process (torch's import would load the
other's).
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

WORKLOADS = {"lse": "n=1280000", "kmeans": "k=1000,n=1000,d=8", "gmm": "d=20,k=25,n=1000",
             "lstm": "l=2,c=1024"}
DERIVATIVE = {"lse": "gradient", "kmeans": "dir", "gmm": "jacobian", "lstm": "jacobian"}


def make_input(name, gradbench):
    import numpy as np
    if name == "lse":
        np.random.seed(31337)
        return {"x": np.random.rand(1280000).tolist()}
    if name == "kmeans":
        np.random.seed(31337)
        points = np.random.rand(1000, 8).tolist()
        return {"points": points, "centroids": points[-1000:]}
    if name == "gmm":
        from gradbench.evals.gmm.run import generate
        return generate(seed=31337, d=20, k=25, n=1000, m=0, gamma=1.0)
    if name == "lstm":
        from gradbench.evals.lstm.run import gen_lstm, read_full_text
        np.random.seed(0)
        text = read_full_text(os.path.join(gradbench, "evals/lstm/data/lstm_full.txt"), 1024)
        return gen_lstm(text, 2, 1024).to_dict()
    raise SystemExit(f"no workload for {name!r}; one of {sorted(WORKLOADS)}")


def derivative(name, tool, raw):
    """A no-argument call of the derivative on prepared inputs (preparation untimed)."""
    if tool == "wengert":
        sys.path[:0] = [HERE, ROOT]
        import importlib
        import types
        module = importlib.import_module(f"evals.{name}")
        options = types.SimpleNamespace(compile=False, jacobian="sparse", multithreaded=False)
        prepare, run, _ = module.functions(options)[DERIVATIVE[name]]
        args = prepare(raw)
        return lambda: run(*args)
    import importlib
    module = importlib.import_module(f"gradbench.tools.pytorch.{name}")
    wrapped = getattr(module, DERIVATIVE[name])
    prepare = getattr(module, "prepare_input", None) or module.prepare  # (gmm's name)
    args = prepare(raw)
    return lambda: wrapped.function(args)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gradbench", required=True, help="a local clone of GradBench")
    p.add_argument("--eval", required=True, choices=sorted(WORKLOADS))
    p.add_argument("--tool", required=True, choices=("wengert", "pytorch"))
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, [sorted(os.sched_getaffinity(0))[0]])
    gradbench = os.path.abspath(a.gradbench)
    sys.path.insert(0, os.path.join(gradbench, "python", "gradbench"))
    call = derivative(a.eval, a.tool, make_input(a.eval, gradbench))
    call()  # warm-up: imports, caches
    times = []
    for _ in range(a.repeat):
        t0 = time.process_time()
        call()
        times.append(time.process_time() - t0)
    times.sort()
    print(f"{a.eval} {WORKLOADS[a.eval]} {a.tool}: best {times[0] * 1e3:.1f} ms, "
          f"median {times[len(times) // 2] * 1e3:.1f} ms ({a.repeat} calls, CPU time)")


if __name__ == "__main__":
    main()
