"""gmm: the log posterior of a Gaussian mixture with a Wishart prior, and its gradient.

The eval README's simplified form: precisions Qₖᵀ Qₖ with Qₖ lower triangular (exp(qₖ) on
the diagonal, lₖ below it column by column), log-sum-exps by the max trick.
"""
import functools
import math

import numpy as np
import scipy.special

import wengert as wg
import wengert.numpy as wnp

from ._common import array, maybe_compile, to_float


@functools.cache
def _lower_index(d):
    """(d, d) positions into [0, l₁, l₂, …]: 0 on and above the diagonal, 1 + index below."""
    index = np.zeros((d, d), dtype=np.int64)
    ii = 1
    for j in range(d):
        for i in range(j + 1, d):
            index[i, j] = ii
            ii += 1
    return index


def logsumexp(v, axis):
    a = wnp.max(v, axis=axis, keepdims=True)
    return wnp.log(wnp.sum(wnp.exp(v - a), axis=axis)) + wnp.squeeze(a, axis=axis)


def log_posterior(alpha, mu, q, l, x, m, gamma):
    n, d = x.shape
    k = alpha.shape[0]
    lpad = wnp.concatenate([wnp.zeros((k, 1)), l], axis=1)
    Q = lpad[:, _lower_index(d)] + wnp.exp(q)[:, :, None] * np.eye(d)      # (k, d, d)
    centred = wnp.transpose(x[None, :, :] - mu[:, None, :], (0, 2, 1))   # (k, d, n)
    mahalanobis = wnp.sum(wnp.matmul(Q, centred) ** 2, axis=1)            # (k, n)
    beta = (alpha + wnp.sum(q, axis=1))[:, None] - 0.5 * mahalanobis
    loglik = (-n * (0.5 * d * math.log(2 * math.pi) + logsumexp(alpha, 0))
              + wnp.sum(logsumexp(beta, 0)))
    dof = d + m + 1
    frobenius = wnp.sum(wnp.exp(q) ** 2) + wnp.sum(l * l)
    logprior = (k * (dof * d * math.log(gamma / math.sqrt(2))  # gamma: a plain float
                     - scipy.special.multigammaln(0.5 * dof, d))
                - 0.5 * gamma * gamma * frobenius + m * wnp.sum(q))
    return loglik + logprior


def _prepare(raw):
    return (array(raw["alpha"]), array(raw["mu"]), array(raw["q"]), array(raw["l"]).reshape(
        len(raw["l"]), -1), array(raw["x"]), int(raw["m"]), float(raw["gamma"]))


def _gradient_json(g):
    return {name: np.asarray(v).tolist() for name, v in zip(("alpha", "mu", "q", "l"), g)}


def functions(options):
    grad = wg.grad(log_posterior, argnums=(0, 1, 2, 3))
    return {"objective": (_prepare, maybe_compile(options, log_posterior), to_float),
            "jacobian": (_prepare, maybe_compile(options, grad), _gradient_json)}
