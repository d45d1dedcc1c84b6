"""Gaussian-process regression: the log marginal likelihood through a Cholesky factor,
its gradient with respect to the kernel hyperparameters, and a fit with L-BFGS.

    log p(y | theta) = -1/2 y^T K^-1 y - sum(log diag L) - n/2 log(2 pi),  K = L L^T

with a squared-exponential kernel plus noise, hyperparameters on the log scale.

    python examples/gaussian_process.py
"""
import math

import numpy as np
import scipy.optimize

import wengert as wg
import wengert.numpy as wnp


def make_data(n=30, seed=0):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(-3.0, 3.0, n))
    y = np.sin(2.0 * x) + 0.1 * rng.standard_normal(n)
    return x, y


def kernel(theta, x):
    """``K = s^2 exp(-(x_i - x_j)^2 / (2 l^2)) + sigma^2 I``; theta = log(l, s, sigma)."""
    ell, sf, sn = wnp.exp(theta[0]), wnp.exp(theta[1]), wnp.exp(theta[2])
    d2 = (x[:, None] - x[None, :]) ** 2
    return sf * sf * wnp.exp(-0.5 * d2 / (ell * ell)) + sn * sn * np.eye(len(x))


def log_likelihood(theta, x, y):
    K = kernel(theta, x)
    L = wnp.linalg.cholesky(K)
    alpha = wnp.linalg.solve(L.T, wnp.linalg.solve(L, y))  # K^-1 y
    return (-0.5 * wnp.sum(y * alpha) - wnp.sum(wnp.log(wnp.diagonal(L)))
            - 0.5 * len(x) * math.log(2.0 * math.pi))


def finite_difference_gradient(f, theta, h=1e-6):
    g = np.zeros_like(theta)
    for i in range(len(theta)):
        e = np.zeros_like(theta)
        e[i] = h
        g[i] = (f(theta + e) - f(theta - e)) / (2 * h)
    return g


def closed_form_gradient(theta, x, y):
    """``1/2 tr((a a^T - K^-1) dK/dtheta_i)``, with dK/dtheta from forward mode."""
    K = kernel(theta, x)
    Kinv = np.linalg.inv(K)
    a = Kinv @ y
    dK = wg.jacobian(kernel, mode="forward")(theta, x)  # (n, n, 3)
    return 0.5 * np.einsum("ij,jik->k", np.outer(a, a) - Kinv, dK)


def fit(x, y, theta0=(0.0, 0.0, -1.0)):
    value_and_grad = wg.value_and_grad(lambda t: -log_likelihood(t, x, y))

    def fun(t):
        v, g = value_and_grad(t)
        return float(v), np.asarray(g)
    return scipy.optimize.minimize(fun, np.array(theta0), jac=True, method="L-BFGS-B")


def main():
    x, y = make_data()
    theta = np.array([0.0, 0.0, -1.0])
    g = wg.grad(log_likelihood)(theta, x, y)
    fd = finite_difference_gradient(lambda t: log_likelihood(t, x, y), theta)
    print("gradient (reverse mode):", g)
    print("finite differences:     ", fd)
    print("closed form:            ", closed_form_gradient(theta, x, y))
    res = fit(x, y)
    print(f"fitted log(lengthscale, signal, noise) = {np.round(res.x, 3)}, "
          f"log-likelihood {-res.fun:.3f}")
    return res


if __name__ == "__main__":
    main()
