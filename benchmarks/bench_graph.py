"""Compiled gradients against the plain function and the eager tape.

    python benchmarks/bench_graph.py

(a) the extended Rosenbrock function over 100 elements, written with Python loops over
    elements: on a NumPy array (indexing) and on a list of 100 Python floats;
(d) the derivative of the Babylonian square root (10 iterations).

Targets: (a) compiled gradient <= 3x the plain function and >= 20x faster than the eager
gradient; (d) <= 5x the plain function.
"""
import timeit

import numpy as np

import wengert as wg


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def babylonian(x, n=10):
    t = (1 + x) / 2
    for _ in range(n):
        t = (t + x / t) / 2
    return t


def best(fn, *args):
    """Seconds per call: the minimum over many short runs (robust on a busy machine)."""
    t = timeit.timeit(lambda: fn(*args), number=1)
    number = max(1, int(0.002 / max(t, 1e-7)))
    return min(timeit.repeat(lambda: fn(*args), number=number, repeat=100)) / number


def row(name, f, args):
    plain = best(f, *args)
    eager = best(wg.grad(f), *args)
    cg = wg.compile(wg.grad(f))
    out = cg(*args)
    want = wg.grad(f)(*args)
    exact = all(np.array_equal(a, b) for a, b in zip(np.atleast_1d(out), np.atleast_1d(want)))
    compiled = best(cg, *args)
    g = cg.graphs[0]
    print(f"{name:34s} plain {plain * 1e6:9.1f} us | eager grad {eager * 1e6:10.1f} us | "
          f"compiled grad {compiled * 1e6:9.1f} us | compiled/plain {compiled / plain:5.2f}x | "
          f"eager/compiled {eager / compiled:7.1f}x | nodes {g.stats['before']}->"
          f"{g.stats['after']} | same bits: {exact}")
    return compiled / plain, eager / compiled


if __name__ == "__main__":
    x = np.linspace(-1.2, 1.3, 100)
    ra = row("(a) Rosenbrock, ndarray[100]", rosenbrock, (x,))
    rl = row("(a) Rosenbrock, list of 100 floats", rosenbrock, (x.tolist(),))
    rd = row("(d) Babylonian sqrt, float", babylonian, (2.0,))
    plain = best(babylonian, 2.0)
    fwd = wg.compile(wg.derivative(babylonian))
    fwd(2.0)
    rf = best(fwd, 2.0) / plain
    print(f"{'(d) same, wg.compile(wg.derivative)':34s} compiled/plain {rf:5.2f}x")
    print()
    print(f"(a) array: {ra[0]:.2f}x plain (target <= 3), {ra[1]:.0f}x faster than eager "
          f"(target >= 20)")
    print(f"(a) list:  {rl[0]:.2f}x plain (target <= 3), {rl[1]:.0f}x faster than eager "
          f"(target >= 20)")
    print(f"(d):       {rd[0]:.2f}x plain by reverse mode, {rf:.2f}x by forward mode "
          f"(target <= 5)")
