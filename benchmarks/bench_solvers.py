"""SciPy's solvers, differentiated (issue 29): what a derivative costs beside the solve.

Roots and optima (``bench_roots_and_optima``): the gradient of a scalar loss of the solution
with respect to the parameters, by the implicit function theorem, against one primal SciPy
call with the same options.  The gradient's own work is its time less the primal solve it
contains (``wg.grad`` runs SciPy once, then the tangent solve); the target is that work ≤ 1
primal solve.  Problems (n unknowns, θ of size n):

* ``brentq``: the scalar root of ``x³ + x - θ``;
* ``root`` (hybr, SciPy's finite-difference Jacobian): ``A x + 0.1 x³ = θ``, n = 10, 40, 200;
* ``minimize`` (BFGS, ``jac=wg.grad(f)``, gtol 1e-7): ``½ xᵀQx - θ·x + 0.1 Σ x⁴``, n = 10, 40, 200;
* ``least_squares`` (trf): a linear model with a soft-L1 loss, 60 residuals, n = 10.

    python benchmarks/bench_solvers.py
"""
from _util import fmt, paired_time, row  # first: sets BLAS to one thread

import numpy as np  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402
from wengert.scipy import optimize  # noqa: E402


def _cases():
    rng = np.random.default_rng(0)
    cases = []

    def scalar(theta):
        return optimize.brentq(lambda x: x ** 3 + x - theta, -10.0, 10.0, xtol=1e-14)
    cases.append(("brentq, n = 1", scalar, 2.0))

    for n in (10, 40, 200):
        m = rng.standard_normal((n, n)) / np.sqrt(n)
        a = m @ m.T + np.eye(n)

        def rooted(theta, a=a, n=n):
            return optimize.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(n),
                                 tol=1e-12).x
        cases.append((f"root (hybr), n = {n}", rooted, rng.standard_normal(n)))

        def f(x, theta, a=a):
            return 0.5 * x @ a @ x - theta @ x + 0.1 * wnp.sum(x ** 4)

        def argmin(theta, f=f, n=n):
            return optimize.minimize(f, np.zeros(n), args=(theta,), method="BFGS",
                                     jac=wg.grad(f), options={"gtol": 1e-7}).x
        cases.append((f"minimize (BFGS), n = {n}", argmin, rng.standard_normal(n)))

    design = rng.standard_normal((60, 10))

    def fit(y):
        return optimize.least_squares(lambda x: design @ x - y, np.zeros(10),
                                      jac=lambda x: design, loss="soft_l1", xtol=1e-12,
                                      ftol=1e-12, gtol=1e-12).x
    cases.append(("least_squares (soft_l1), n = 10", fit, rng.standard_normal(60)))
    return cases


def bench_roots_and_optima():
    """Rows of (case, primal ms, gradient ms, (gradient - primal) ÷ primal)."""
    print("Roots and optima: the gradient of sum(solution) by the implicit function theorem, "
          "beside one primal SciPy solve (ms; medians of paired runs)")
    row("", "primal", "gradient", "d ÷ primal", width=34)
    results = []
    for name, solve, theta in _cases():
        loss = wg.grad(lambda t, solve=solve: wnp.sum(solve(t)))
        t_grad, t_primal, _ = paired_time(loss, solve, theta, rounds=5)
        ratio = (t_grad - t_primal) / t_primal
        results.append((name, t_primal, t_grad, ratio))
        row(name, fmt(t_primal * 1e3), fmt(t_grad * 1e3), f"{ratio:.2f}", width=34)
    worst = max(r[3] for r in results)
    print(f"worst derivative ÷ primal: {worst:.2f} (target ≤ 1)")
    return results


def main():
    bench_roots_and_optima()


if __name__ == "__main__":
    main()
