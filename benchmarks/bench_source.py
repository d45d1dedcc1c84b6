"""Generated gradient code (wg.source.grad) against the plain function and eager wg.grad.

The extended Rosenbrock function written with a Python loop over the elements of a
100-element vector, given as a list of floats and as a NumPy array.  Prints the
median time of each variant and the ratios.

    python benchmarks/bench_source.py [--n 100] [--repeat 7]
"""
import argparse
import statistics
import timeit

import numpy as np

import wengert as wg


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def median_time(fn, repeat):
    number = 1
    while True:  # enough calls per sample for ~0.05 s
        t = timeit.timeit(fn, number=number)
        if t > 0.05 or number > 10000:
            break
        number *= 2
    times = timeit.repeat(fn, number=number, repeat=repeat)
    return statistics.median(times) / number


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    x_arr = rng.uniform(-1.0, 1.0, n)
    x_list = [float(v) for v in x_arr]

    df = wg.source.grad(rosenbrock)
    eager = wg.grad(rosenbrock)
    compiled = wg.compile(wg.grad(rosenbrock))
    g_ref = eager(x_arr)
    for x in (x_list, x_arr):
        assert np.allclose(np.asarray(df(x)), g_ref, rtol=1e-12, atol=1e-12)

    print(f"extended Rosenbrock, Python loop over {n} elements; median of {args.repeat} repeats")
    print(f"{'input':6} {'plain f':>12} {'source grad':>12} {'compile(grad)':>14} "
          f"{'eager grad':>12} {'src/plain':>10} {'compiled/plain':>15} {'eager/src':>10}")
    results = {}
    for label, x in (("list", x_list), ("array", x_arr)):
        t_plain = median_time(lambda: rosenbrock(x), args.repeat)
        t_src = median_time(lambda: df(x), args.repeat)
        t_eager = median_time(lambda: eager(x), args.repeat)
        compiled(x)  # trace once for this signature
        t_comp = median_time(lambda: compiled(x), args.repeat)
        results[label] = (t_plain, t_src, t_eager, t_comp)
        print(f"{label:6} {t_plain * 1e6:10.1f}us {t_src * 1e6:10.1f}us {t_comp * 1e6:12.1f}us "
              f"{t_eager * 1e6:10.1f}us {t_src / t_plain:10.2f} {t_comp / t_plain:15.2f} "
              f"{t_eager / t_src:10.2f}")
    print()
    print("generated program (list input):")
    df(x_list)
    print(df.source)
    return results


if __name__ == "__main__":
    main()
