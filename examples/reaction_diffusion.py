"""A stiff reaction-diffusion system integrated with SciPy's BDF, its Jacobian from
wengert as a sparse matrix.

The Brusselator on [0, 1] (Hairer and Wanner, Solving ODEs II, section IV.1):

    u_t = A + u² v - (B + 1) u + α u_xx,     v_t = B u - u² v + α v_xx,

with u = 1, v = 3 at both ends, discretised on n interior points with the species
interleaved (u_0, v_0, u_1, v_1, ...). Diffusion couples neighbours and the reaction
couples the two species at a point, so the 2n x 2n Jacobian is banded: 5 colours, so 5
tangent directions in one forward pass, at any n. ``wg.sparse_jacobian`` reads the
pattern off ``rhs`` once and ``wg.compile`` turns the compressed pass into straight-line
code; BDF factorises the sparse matrix (``splu``) it is given.

    python examples/reaction_diffusion.py [n]
"""
import sys
import time

import numpy as np
import scipy.integrate

import wengert as wg
import wengert.numpy as wnp

A, B, ALPHA = 1.0, 3.0, 1.0 / 50.0


def rhs(t, y):
    """``dy/dt`` for the interleaved state ``y = (u_0, v_0, u_1, v_1, ...)``."""
    n = y.size // 2
    u, v = y[0::2], y[1::2]
    dx2 = (n + 1.0) ** 2
    up = wnp.concatenate([wnp.ones(1), u, wnp.ones(1)])        # boundary values u = 1
    vp = wnp.concatenate([wnp.full(1, 3.0), v, wnp.full(1, 3.0)])  # and v = 3
    uuv = u * u * v
    du = A + uuv - (B + 1.0) * u + ALPHA * dx2 * (up[:-2] - 2.0 * u + up[2:])
    dv = B * u - uuv + ALPHA * dx2 * (vp[:-2] - 2.0 * v + vp[2:])
    return wnp.reshape(wnp.stack([du, dv], axis=1), (-1,))


def initial(n):
    x = np.arange(1, n + 1) / (n + 1)
    return np.stack([1.0 + np.sin(2 * np.pi * x), np.full(n, 3.0)], axis=1).ravel()


def integrate(n=200, t_end=10.0, jac="sparse", rtol=1e-6, atol=1e-8):
    """``solve_ivp`` with BDF. ``jac``: ``"sparse"`` (wengert's), or ``"fd"`` (SciPy's
    finite differences, told the pattern wengert detected)."""
    y0 = initial(n)
    if jac == "sparse":
        options = dict(jac=wg.compile(wg.sparse_jacobian(rhs, argnums=1)))
    else:
        options = dict(jac_sparsity=wg.jacobian_sparsity(rhs, 0.0, y0, argnums=1))
    return scipy.integrate.solve_ivp(wg.compile(rhs), (0.0, t_end), y0, method="BDF",
                                     rtol=rtol, atol=atol, **options)


def main(n=1000):
    plan = wg.sparse_jacobian(rhs, argnums=1).plan(0.0, initial(n))
    print(f"Jacobian: {plan.sparsity.shape[0]}x{plan.sparsity.shape[1]}, {plan.sparsity.nnz} "
          f"entries, {plan.num_colors} colours ({plan.mode} mode)")
    for jac in ("sparse", "fd"):
        t = time.perf_counter()
        sol = integrate(n, jac=jac)
        print(f"jac={jac:6s}: {sol.message} {sol.nfev} evaluations of f, {sol.njev} "
              f"Jacobians, {sol.nlu} LU factorisations, {time.perf_counter() - t:.2f} s")
    print("u at the first points, t = 10:", np.round(sol.y[0:8:2, -1], 6))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
