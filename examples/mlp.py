"""A two-layer perceptron trained by plain gradient descent on two interleaved moons.

The parameters are a dict (a pytree); ``wg.value_and_grad`` returns the loss and
a dict of gradients of the same structure in one reverse sweep.

    python examples/mlp.py
"""
import numpy as np

import wengert as wg
import wengert.numpy as wnp


def two_moons(n=200, noise=0.1, seed=0):
    """Points on two interleaved half circles, labels 0 and 1 (no scikit-learn needed)."""
    rng = np.random.default_rng(seed)
    m = n // 2
    t = rng.uniform(0.0, np.pi, n)
    upper = np.stack([np.cos(t[:m]), np.sin(t[:m])], axis=1)
    lower = np.stack([1.0 - np.cos(t[m:]), 0.5 - np.sin(t[m:])], axis=1)
    X = np.concatenate([upper, lower]) + noise * rng.standard_normal((n, 2))
    y = np.concatenate([np.zeros(m), np.ones(n - m)])
    return X, y


def init_params(hidden=16, seed=0):
    rng = np.random.default_rng(seed)
    return {"W1": rng.standard_normal((2, hidden)) / np.sqrt(2.0), "b1": np.zeros(hidden),
            "W2": rng.standard_normal(hidden) / np.sqrt(hidden), "b2": 0.0}


def logits(params, X):
    h = wnp.tanh(X @ params["W1"] + params["b1"])
    return h @ params["W2"] + params["b2"]


def loss(params, X, y):
    """Mean binary cross-entropy, computed from the logits (stable)."""
    z = logits(params, X)
    return wnp.mean(wnp.logaddexp(0.0, z) - y * z)


def train(X, y, params=None, steps=500, lr=0.5):
    """Gradient descent; returns the final parameters and the loss at every step."""
    params = init_params() if params is None else params
    value_and_grad = wg.value_and_grad(loss)
    history = []
    for _ in range(steps):
        value, g = value_and_grad(params, X, y)
        history.append(float(value))
        params = {k: params[k] - lr * g[k] for k in params}
    return params, history


def accuracy(params, X, y):
    return float(np.mean((logits(params, X) > 0) == (y > 0.5)))


def main():
    X, y = two_moons()
    params, history = train(X, y, steps=2000)
    print(f"loss {history[0]:.4f} -> {history[-1]:.4f}, training accuracy "
          f"{accuracy(params, X, y):.3f}")
    return history


if __name__ == "__main__":
    main()
