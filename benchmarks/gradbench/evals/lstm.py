"""lstm: ADBench's LSTM (diagonal weights) over a character sequence, as a wg.scan, and its gradient.

The sigmoid is SciPy's ``expit``, as PyTorch's reference calls ``torch.sigmoid``.
"""
import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.special import expit as sigmoid

from ._common import array, maybe_compile, to_float


def predict(main, extra, state, x):
    """One character through every layer: the new state (2l, b) and the prediction (b,)."""
    b = x.shape[0]
    h = x * extra[0]
    new = []
    for i in range(main.shape[0] // 2):
        w, bias = main[2 * i], main[2 * i + 1]
        hidden, cell = state[2 * i], state[2 * i + 1]
        forget = sigmoid(h * w[:b] + bias[:b])
        ingate = sigmoid(hidden * w[b:2 * b] + bias[b:2 * b])
        outgate = sigmoid(h * w[2 * b:3 * b] + bias[2 * b:3 * b])
        change = wnp.tanh(hidden * w[3 * b:] + bias[3 * b:])
        cell = cell * forget + ingate * change
        hidden = outgate * wnp.tanh(cell)
        new += [hidden, cell]
        h = hidden
    return wnp.stack(new), h * extra[1] + extra[2]


def objective(main, extra, state, sequence):
    def step(state, pair):
        x, gold = pair
        state, ypred = predict(main, extra, state, x)
        lse = wnp.log(wnp.sum(wnp.exp(ypred)) + 2)
        return state, wnp.sum(gold * (ypred - lse))

    _, totals = wg.scan(step, state, (sequence[:-1], sequence[1:]))
    return -wnp.sum(totals) / ((sequence.shape[0] - 1) * sequence.shape[1])


def _prepare(raw):
    return tuple(array(raw[k]) for k in ("main_params", "extra_params", "state", "sequence"))


def _flat(g):
    return np.concatenate([np.ravel(g[0]), np.ravel(g[1])]).tolist()


def functions(options):
    grad = wg.grad(objective, argnums=(0, 1))
    return {"objective": (_prepare, maybe_compile(options, objective), to_float),
            "jacobian": (_prepare, maybe_compile(options, grad), _flat)}
