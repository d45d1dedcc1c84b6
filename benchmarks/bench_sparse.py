"""Sparse Jacobians: the W4 residual (1-D diffusion plus x², tridiagonal Jacobian; the
dense 200 x 200 Jacobian of bench_arrays.py) at n = 200, 10⁴ and 10⁶.

For each n: one evaluation of F, the hand-written sparse Jacobian (``scipy.sparse``
from the three diagonals, what one writes by hand), and ``wg.sparse_jacobian``, eager
and under ``wg.compile``, as time ÷ F and ÷ the hand-written Jacobian; dense
``wg.jacobian`` beside it where it fits in memory (n = 200). The pattern and its
colouring (3 colours at any n) are worked out once per input signature: their time is
shown apart, as "plan".

Targets (issue 20): compiled ≤ 1× the hand-written Jacobian, and the cost relative to F
flat in n.

    python benchmarks/bench_sparse.py [--quick]     (--quick: n up to 10⁴)
"""
import sys
import time

from _util import fmt, paired_time, row  # first: sets BLAS to one thread

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402


def residual(m):
    def F(x):
        pad = m.concatenate([m.zeros(1), x, m.zeros(1)])
        return pad[:-2] - 2.0 * x + pad[2:] + x * x
    return F


def hand_jacobian(x):
    """The tridiagonal Jacobian of F, written by hand."""
    off = np.ones(x.size - 1)
    return sp.diags_array([off, -2.0 + 2.0 * x, off], offsets=[-1, 0, 1], format="csr")


def check(jac, x):
    diff = abs(jac - hand_jacobian(x)).max()
    assert diff < 1e-12, diff


def main():
    sizes = (200, 10 ** 4) if "--quick" in sys.argv else (200, 10 ** 4, 10 ** 6)
    F = residual(np)
    print("W4 residual: sparse Jacobian time ÷ one evaluation of F and ÷ the hand-written "
          "Jacobian (µs; medians)")
    row("", "µs", "÷ F", "÷ hand", width=40)
    for n in sizes:
        x = np.random.default_rng(0).standard_normal(n)
        eager = wg.sparse_jacobian(residual(wnp))
        t = time.perf_counter()
        plan = eager.plan(x)
        t_plan = time.perf_counter() - t
        compiled = wg.compile(eager)
        check(eager(x), x)
        check(compiled(x), x)
        t_hand, t_f, hand_over_f = paired_time(hand_jacobian, F, x)
        print(f"n = {n}: {plan.num_colors} colours ({plan.mode}), plan {t_plan * 1e3:.1f} ms "
              f"once; F {fmt(t_f * 1e6)} µs")
        row("  hand-written (scipy.sparse.diags_array)", fmt(t_hand * 1e6), fmt(hand_over_f),
            fmt(1.0), width=40)
        for label, fn in (("wg.sparse_jacobian", eager),
                          ("wg.compile(wg.sparse_jacobian)", compiled)):
            t_fn, _, over_f = paired_time(fn, F, x)
            _, _, over_hand = paired_time(fn, hand_jacobian, x)
            row(f"  {label}", fmt(t_fn * 1e6), fmt(over_f), fmt(over_hand), width=40)
        if n <= 2000:
            for mode in ("forward", "reverse"):
                dense = wg.jacobian(residual(wnp), mode=mode)
                np.testing.assert_allclose(dense(x), hand_jacobian(x).toarray(), atol=1e-12)
                t_fn, _, over_f = paired_time(dense, F, x)
                _, _, over_hand = paired_time(dense, hand_jacobian, x)
                row(f"  dense wg.jacobian({mode})", fmt(t_fn * 1e6), fmt(over_f),
                    fmt(over_hand), width=40)


if __name__ == "__main__":
    main()
