"""Jacobian of a 200-point 1-D diffusion-reaction residual, r_i = x_{i-1} - 2 x_i + x_{i+1} + x_i^2
(zero boundary values), by wg.jacobian in one vectorised pass, against a hand-written NumPy
Jacobian.  Runs are interleaved so that both see the same machine load; the median of
each is reported.

    python benchmarks/bench_arrays_jacobian.py [n] [repeats]
"""
import sys
import time

import numpy as np

import wengert as wg
import wengert.numpy as wnp


def r_pad(x):
    xp = wnp.pad(x, 1)
    return xp[:-2] - 2.0 * xp[1:-1] + xp[2:] + x ** 2


def r_concat(x):
    z = np.zeros(1)
    return wnp.concatenate([z, x[:-1]]) - 2.0 * x + wnp.concatenate([x[1:], z]) + x ** 2


def r_setitem(x):
    r = -2.0 * x + x ** 2
    r[1:] += x[:-1]
    r[:-1] += x[1:]
    return r


def hand(x):
    n = x.size
    J = np.diag(-2.0 + 2.0 * x)
    i = np.arange(n - 1)
    J[i, i + 1] = 1.0
    J[i + 1, i] = 1.0
    return J


def main(n=200, repeats=50):
    x = np.random.default_rng(0).standard_normal(n)
    cases = [(name, r, mode) for name, r in (("pad", r_pad), ("concatenate", r_concat),
                                              ("x[i] += ...", r_setitem))
             for mode in ("forward", "reverse")]
    fns = {c: wg.jacobian(c[1], mode=c[2]) for c in cases}
    for c, jf in fns.items():
        assert np.allclose(jf(x), hand(x)), c
    t_hand = {c: [] for c in cases}
    t_ad = {c: [] for c in cases}
    for _ in range(repeats):
        for c, jf in fns.items():
            t0 = time.perf_counter()
            hand(x)
            t1 = time.perf_counter()
            jf(x)
            t2 = time.perf_counter()
            t_hand[c].append(t1 - t0)
            t_ad[c].append(t2 - t1)
    print(f"n = {n}, median of {repeats} interleaved runs")
    print(f"{'residual written with':24s} {'mode':8s} {'wengert':>10s} {'by hand':>10s} {'ratio':>7s}")
    for c in cases:
        a, h = np.median(t_ad[c]) * 1e6, np.median(t_hand[c]) * 1e6
        print(f"{c[0]:24s} {c[2]:8s} {a:8.0f}us {h:8.1f}us {a / h:6.1f}x")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
