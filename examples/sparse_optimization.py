"""A constrained problem in n variables solved with SciPy's trust-constr, every derivative
from wengert as a sparse matrix.

The chained Rosenbrock function under n - 2 trigonometric-exponential equality
constraints (Lukšan and Vlček's test problem 5.1): each term and each constraint touches
two or three neighbouring variables, so the objective's Hessian is tridiagonal, the
constraints' Jacobian banded, and the Lagrangian's Hessian pentadiagonal. wengert reads
these patterns off the code once, colours them (3 colours: three Hessian-vector products
give the whole tridiagonal Hessian, at any n) and hands SciPy ``csr_array``s:

* ``hess=wg.sparse_hessian(objective)``,
* the constraint's ``jac=wg.sparse_jacobian(constraints)``,
* and its ``hess(x, v)``: the Hessian of ``v · c(x)`` in ``x``.

    python examples/sparse_optimization.py [n]
"""
import sys
import time

import numpy as np
import scipy.optimize

import wengert as wg
import wengert.numpy as wnp


def objective(x):
    """The chained Rosenbrock function."""
    return wnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def constraints(x):
    """``c_k(x) = 0``, k = 0 .. n - 3: each reads x_k, x_{k+1}, x_{k+2}."""
    a, b, c = x[:-2], x[1:-1], x[2:]
    return (3.0 * b ** 3 + 2.0 * c - 5.0 + wnp.sin(b - c) * wnp.sin(b + c) + 4.0 * b
            - a * wnp.exp(a - b) - 3.0)


def weighted_constraints(x, v):
    """``v · c(x)``, whose Hessian in ``x`` is what trust-constr asks of a constraint."""
    return v @ constraints(x)


def start(n):
    return np.where(np.arange(n) % 2 == 0, -1.2, 1.0)


def solve(n=100, compiled=True):
    """Minimise; returns SciPy's result. ``compiled``: the derivative passes run as
    generated code (``wg.compile``), their patterns and colourings worked out once."""
    wrap = wg.compile if compiled else (lambda f: f)
    value_and_grad = wrap(wg.value_and_grad(objective))
    hess = wrap(wg.sparse_hessian(objective))
    jac = wrap(wg.sparse_jacobian(constraints))
    lagrangian_hess = wrap(wg.sparse_hessian(weighted_constraints))  # argnums=0: in x only
    con = scipy.optimize.NonlinearConstraint(constraints, 0.0, 0.0, jac=jac,
                                             hess=lambda x, v: lagrangian_hess(x, v))
    return scipy.optimize.minimize(value_and_grad, start(n), jac=True, hess=hess,
                                   method="trust-constr", constraints=[con],
                                   options=dict(gtol=1e-9, xtol=1e-12, maxiter=500))


def main(n=1000):
    x0 = start(n)
    for name, f, make in [("objective Hessian", objective, wg.sparse_hessian),
                          ("constraint Jacobian", constraints, wg.sparse_jacobian)]:
        plan = make(f).plan(x0)
        rows, cols = plan.sparsity.shape
        print(f"{name}: {rows}x{cols} with {plan.sparsity.nnz} entries, "
              f"{plan.num_colors} colours ({plan.mode})")
    t = time.perf_counter()
    res = solve(n)
    print(f"n = {n}: {res.message} after {res.nit} iterations, {time.perf_counter() - t:.2f} s")
    print(f"f = {res.fun:.10f}, max |c(x)| = {np.abs(constraints(res.x)).max():.1e}, "
          f"optimality {res.optimality:.1e}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
