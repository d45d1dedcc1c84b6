"""L2-regularised logistic regression fitted with SciPy's trust-region Newton-CG.

The objective is written once, in NumPy style; wengert gives SciPy both its
gradient (``jac``: ``wg.value_and_grad``, one reverse sweep) and Hessian-vector
products (``hessp``: ``wg.hvp``, forward over reverse) without forming the Hessian.

    python examples/logistic_regression.py
"""
import numpy as np
import scipy.optimize

import wengert as wg
import wengert.numpy as wnp


def make_data(n=500, d=5, seed=0):
    """Features, 0/1 labels drawn from a logistic model, and the true weights."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w_true = rng.standard_normal(d)
    p = 1.0 / (1.0 + np.exp(-X @ w_true))
    y = (rng.uniform(size=n) < p).astype(float)
    return X, y, w_true


def loss(w, X, y, l2=1e-2):
    """Mean negative log-likelihood plus ``l2/2 |w|^2``; stable for any logits."""
    z = X @ w
    return wnp.mean(wnp.logaddexp(0.0, z) - y * z) + 0.5 * l2 * wnp.sum(w * w)


def fit(X, y, l2=1e-2):
    """Minimise ``loss`` with ``method="trust-ncg"``; returns SciPy's result."""
    def f(w):
        return loss(w, X, y, l2)

    value_and_grad = wg.value_and_grad(f)

    def fun(w):
        v, g = value_and_grad(w)
        return float(v), np.asarray(g)

    def hessp(w, p):
        return np.asarray(wg.hvp(f, w, p))

    w0 = np.zeros(X.shape[1])
    return scipy.optimize.minimize(fun, w0, jac=True, hessp=hessp, method="trust-ncg",
                                   options={"gtol": 1e-8})


def main():
    X, y, w_true = make_data()
    res = fit(X, y)
    grad_norm = np.linalg.norm(wg.grad(loss)(res.x, X, y))
    accuracy = np.mean((X @ res.x > 0) == (y > 0.5))
    print(f"converged: {res.success} in {res.nit} iterations ({res.nhev} Hessian-vector "
          f"products); |gradient| = {grad_norm:.2e}")
    print(f"loss {res.fun:.4f}, training accuracy {accuracy:.3f}")
    print("fitted weights:", np.round(res.x, 3))
    print("true weights:  ", np.round(w_true, 3))
    return res


if __name__ == "__main__":
    main()
