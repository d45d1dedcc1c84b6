"""A neural ODE, trained through SciPy's own ``odeint`` (autograd's ``ode_net.py``, in wengert).

The data are one trajectory of a cubic spiral, ``y' = (y ** 3) @ A``.  The model is
``y' = mlp(y)``, a small tanh network whose weights reach ``odeint`` through ``args``; its
loss is the squared distance between the two trajectories at the observed times.  The
gradient of the loss goes through ``wengert.scipy.integrate.odeint``: SciPy's LSODA runs the
model forward, and the adjoint equations (vector-Jacobian products of the network, from
wengert) run backwards.

    python examples/ode_net.py          # trains for 150 steps and prints the loss
"""
import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.integrate import odeint

TRUE_A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
Y0 = np.array([2.0, 0.0])


def spiral(y, t):
    return (y ** 3) @ TRUE_A


def make_data(n_times=20, t_end=1.0):
    t = np.linspace(0.0, t_end, n_times)
    return t, odeint(spiral, Y0, t, rtol=1e-8, atol=1e-8)


def init_params(hidden=16, seed=0):
    rng = np.random.default_rng(seed)
    return {"W1": 0.1 * rng.standard_normal((2, hidden)), "b1": np.zeros(hidden),
            "W2": 0.1 * rng.standard_normal((hidden, 2)), "b2": np.zeros(2)}


def mlp(y, t, params):
    """The learned dynamics; cubing the state first, as autograd's example does."""
    h = wnp.tanh((y ** 3) @ params["W1"] + params["b1"])
    return h @ params["W2"] + params["b2"]


def loss(params, t, target):
    pred = odeint(mlp, Y0, t, args=(params,), rtol=1e-7, atol=1e-8)
    return wnp.mean((pred - target) ** 2)


def train(steps=150, lr=0.02, hidden=16, seed=0, n_times=20):
    """Adam on the loss; returns the parameters and the loss after each step."""
    t, target = make_data(n_times)
    params = init_params(hidden, seed)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(x) for k, x in params.items()}
    value_and_grad = wg.value_and_grad(loss)
    history = []
    for i in range(1, steps + 1):
        value, g = value_and_grad(params, t, target)
        for k in params:
            m[k] = 0.9 * m[k] + 0.1 * g[k]
            v[k] = 0.999 * v[k] + 0.001 * g[k] ** 2
            step = lr * (m[k] / (1 - 0.9 ** i)) / (np.sqrt(v[k] / (1 - 0.999 ** i)) + 1e-8)
            params[k] = params[k] - step
        history.append(float(value))
    return params, history


if __name__ == "__main__":
    _, history = train()
    for i in range(0, len(history), 25):
        print(f"step {i:4d}  loss {history[i]:.5f}")
    print(f"final      loss {history[-1]:.5f}")
