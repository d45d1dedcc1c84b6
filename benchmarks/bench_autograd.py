"""autograd's example programs, eager, on wengert's compat layer against real autograd (issue 30).

Each example (fetched from PyPI: autograd's sdist) runs unchanged under
``python -m wengert.compat.autograd`` and under real autograd, alternately, with the same small
budget of gradient calls (tests/autograd_examples.py: synthetic MNIST, no plots); the time is the
program's own (imports excluded), its CPU time by default: on a shared machine the wall time
measures the neighbours as much as the program (``--clock wall`` for it). ``--wengert TREE``
times another checkout's wengert (a "before" figure) with this harness. Prints each example's
times and ratio, and the median ratio (the issue's target: <= 0.7). Needs a Python with autograd: ``WENGERT_AUTOGRAD_PYTHON``, or this
one if ``import autograd`` finds the real package.

    python benchmarks/bench_autograd.py [--budget N] [--repeat R] [--clock cpu|wall]
                                        [--wengert TREE] [example.py ...]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import autograd_examples as ae  # noqa: E402


def _autograd_python():
    py = os.environ.get("WENGERT_AUTOGRAD_PYTHON")
    if py:
        return py
    probe = subprocess.run([sys.executable, "-c", "import autograd, sys; "
                            "sys.exit(0 if 'wengert' not in autograd.__file__ else 1)"],
                           capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=5, help="gradient calls per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each (the median is kept)")
    ap.add_argument("--quick", action="store_true", help="budget 2 (benchmarks/run.py --quick)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="the process's CPU time (default) or the wall-clock time")
    ap.add_argument("--wengert", default=None, help="the source tree whose wengert is timed")
    ap.add_argument("only", nargs="*")
    args = ap.parse_args()
    budget = 2 if args.quick else args.budget
    clock = "cpu" if args.clock == "cpu" else "seconds"
    other = _autograd_python()
    if other is None:
        print("bench_autograd: no Python with autograd (set WENGERT_AUTOGRAD_PYTHON); skipped")
        return
    root = ae.fetch_sdist(os.path.join(tempfile.gettempdir(), "wengert-autograd-sdist"))
    if root is None:
        print("bench_autograd: PyPI unreachable (autograd's examples are fetched); skipped")
        return
    rows, ratios = [], []
    for name, path in ae.examples(root).items():
        if args.only and name not in args.only:
            continue
        w_times, a_times, agree = [], [], True
        for _ in range(args.repeat):
            a = ae.run_example(path, "autograd", budget=budget, python=other)
            w = ae.run_example(path, "wengert", budget=budget, repo=args.wengert)
            if w["seconds"] is None or a["seconds"] is None:
                agree = None
                break
            a_times.append(a[clock])
            w_times.append(w[clock])
            agree = agree and not ae.compare(w, a, tol=ae.TOLERANCE.get(name, 1e-6))
        if agree is None:
            rows.append((name, None, None, None, "did not run"))
            continue
        tw, ta = statistics.median(w_times), statistics.median(a_times)
        ratios.append(tw / ta)
        rows.append((name, tw, ta, tw / ta, "agree" if agree else "DIFFER"))
        print(f"{name:34s} wengert {tw:8.3f} s  autograd {ta:8.3f} s  ratio {tw / ta:6.2f}  "
              f"{rows[-1][-1]}", flush=True)
    if ratios:
        print(f"\n{len(ratios)} examples, budget {budget} gradient calls, "
              f"{args.clock} time: median time / autograd's = {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
