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

Then bundle adjustment (ADBench / GradBench "ba"), the residual written in NumPy with
wengert.numpy -- reprojection through a Rodrigues rotation and radial distortion, weighted,
and the weight error 1 - w² -- at ADBench's ba1 shape (49 cameras, 7,776 points, 31,843
observations): the Jacobian (95,529 x 55,710) by ``wg.sparse_jacobian``, 14 column colours
(one pass with 14 tangents), eager and under ``wg.compile``, as time ÷ the residual's
(target, issue 32: ≤ 6.5×, ADBench's manual C++). Beside it: the row colouring's size (what
``mode="reverse"`` would sweep), and where the compiled call's time goes -- the compressed
pass (``J S``, its entries gathered in CSR order) against the ``csr_array``'s assembly --
and whether fusion backed off (``fuse_failures``); and, where Numba is installed, the same
14-tangent pass written by hand as one Numba kernel (``_ba_kernel.py``), as the reference
for what fusing across the pass's shapes would reach.

    python benchmarks/bench_sparse.py [--quick]     (--quick: n up to 10⁴, BA at p = 1,000)
"""
import sys
import time

from _util import fmt, median_time, paired_time, row  # first: sets BLAS to one thread

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402

import _ba_kernel  # noqa: E402


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


def ba_residual(m, n_cams, n_pts, cam_of, pt_of, feats):
    """ADBench's bundle-adjustment residual of the flat parameters (cameras' 11 numbers:
    Rodrigues rotation, centre, focal length, principal point, 2 radial distortion
    coefficients; points; weights): each observation's weighted reprojection error, then
    each weight's error 1 - w²."""
    def F(params):
        cams = params[:11 * n_cams].reshape(n_cams, 11)[cam_of]
        X = params[11 * n_cams:11 * n_cams + 3 * n_pts].reshape(n_pts, 3)[pt_of]
        w = params[11 * n_cams + 3 * n_pts:]
        rot, Xc = cams[:, 0:3], X - cams[:, 3:6]
        theta = m.sqrt(m.sum(rot * rot, axis=1, keepdims=True))
        axis = rot / theta
        cos, sin = m.cos(theta), m.sin(theta)
        Xr = Xc * cos + m.cross(axis, Xc) * sin + \
            axis * (m.sum(axis * Xc, axis=1, keepdims=True) * (1.0 - cos))
        p = Xr[:, :2] / Xr[:, 2:3]
        rsq = m.sum(p * p, axis=1, keepdims=True)
        dist = 1.0 + cams[:, 9:10] * rsq + cams[:, 10:11] * rsq * rsq
        proj = p * dist * cams[:, 6:7] + cams[:, 7:9]
        err = w[:, None] * (proj - feats)
        return m.concatenate([err.reshape(-1), 1.0 - w * w])
    return F


def ba_problem(n_cams, n_pts, n_obs, seed=0):
    """Random data of ADBench's shape: observation i sees camera i % n and point i % m."""
    rng = np.random.default_rng(seed)
    cams = np.c_[rng.uniform(-0.3, 0.3, (n_cams, 3)), rng.uniform(-1, 1, (n_cams, 3)),
                 rng.uniform(0.5, 2.0, (n_cams, 1)), rng.uniform(-0.1, 0.1, (n_cams, 2)),
                 rng.uniform(-0.01, 0.01, (n_cams, 2))]
    pts = rng.uniform(-1, 1, (n_pts, 3)) + np.array([0.0, 0.0, 8.0])
    params = np.concatenate([cams.ravel(), pts.ravel(), rng.uniform(0.5, 1.5, n_obs)])
    i = np.arange(n_obs)
    return params, (n_cams, n_pts, i % n_cams, i % n_pts, rng.uniform(-1, 1, (n_obs, 2)))


def bundle_adjustment(quick):
    small, shape = ba_problem(3, 10, 40)
    jac = wg.sparse_jacobian(ba_residual(wnp, *shape))(small)
    np.testing.assert_allclose(jac.toarray(), wg.jacobian(ba_residual(wnp, *shape))(small),
                               rtol=1e-10, atol=1e-12)
    n_cams, n_pts, n_obs = (5, 250, 1000) if quick else (49, 7776, 31843)
    x, shape = ba_problem(n_cams, n_pts, n_obs)
    F = ba_residual(np, *shape)
    eager = wg.sparse_jacobian(ba_residual(wnp, *shape))
    t = time.perf_counter()
    plan = eager.plan(x)
    t_plan = time.perf_counter() - t
    print(f"\nbundle adjustment p = {n_obs:,}: Jacobian {plan.sparsity.shape[0]:,} x "
          f"{plan.sparsity.shape[1]:,}, {plan.num_colors} colours ({plan.mode}), plan "
          f"{t_plan:.2f} s once")
    row("", "ms", "÷ F", width=40)
    t_fn, t_f, over_f = paired_time(eager, F, x, rounds=5)
    row("  F (NumPy)", fmt(t_f * 1e3), fmt(1.0), width=40)
    row("  wg.sparse_jacobian", fmt(t_fn * 1e3), fmt(over_f), width=40)
    compiled = wg.compile(eager)
    t = time.perf_counter()
    first = compiled(x)
    t_cold = time.perf_counter() - t
    assert abs(first - eager(x)).max() <= 1e-9 * abs(first).max()
    t_fn, _, over_f = paired_time(compiled, F, x, rounds=5)
    row(f"  wg.compile(wg.sparse_jacobian) (first call {t_cold:.1f} s)", fmt(t_fn * 1e3),
        fmt(over_f), width=40)
    run = compiled._passes[id(plan)][0]
    data = run(x)
    t_pass = median_time(run, x, repeat=5)
    t_csr = median_time(plan.assemble, data, repeat=5)
    row("    of which the compressed pass", fmt(t_pass * 1e3), width=40)
    row("    and the csr_array's assembly", fmt(t_csr * 1e3), width=40)
    backed = [str(e) for e in run.fuse_failures]
    print("    fusion: " + ("; ".join(backed) if backed else "every elementwise node fused"))
    hand = _ba_kernel.make(plan, *shape)
    if hand is not None:  # what fusion spanning every shape of the pass would reach
        hand(x)
        assert abs(hand(x) - first).max() <= 1e-9 * abs(first).max()
        t_fn, _, over_f = paired_time(hand, F, x, rounds=5)
        row("  the same pass as one Numba kernel, by hand", fmt(t_fn * 1e3), fmt(over_f),
            width=40)
    t = time.perf_counter()
    k_rows = int(wg.color(plan.sparsity, "row").max()) + 1
    t_rows = time.perf_counter() - t
    longest = int(np.bincount(plan.sparsity.indices).max())
    print(f"  row colouring (mode='reverse'): {k_rows:,} colours ({t_rows:.1f} s; at least "
          f"the longest column, {longest:,} rows), against {plan.num_colors} column colours")


if __name__ == "__main__":
    main()
    bundle_adjustment("--quick" in sys.argv)
