"""``autograd.misc.optimizers``: stochastic gradient descent with momentum, RMSProp and Adam.

Each takes ``grad(x, i)`` (``i``: the iteration), a starting point that may be any nesting of
lists, tuples and dicts of arrays (flattened with ``misc.flatten``, sorted dict keys), and an
optional ``callback(x, i, g)``; it returns the last point, structured as the first. The updates
are the published ones (Adam: Kingma & Ba, 2015, with bias correction)."""
import functools

import numpy as np

from .flatten import flatten

__all__ = ["sgd", "rmsprop", "adam", "unflatten_optimizer"]


def unflatten_optimizer(optimize):
    """An optimizer of 1-D arrays made one of nested containers."""
    @functools.wraps(optimize)
    def run(grad, x0, callback=None, *args, **kwargs):
        flat_x0, unflatten = flatten(x0)

        def flat_grad(x, i):
            return flatten(grad(unflatten(x), i))[0]
        def flat_callback(x, i, g):
            return callback(unflatten(x), i, unflatten(g))
        return unflatten(optimize(flat_grad, flat_x0, callback and flat_callback, *args,
                                 **kwargs))
    return run


@unflatten_optimizer
def sgd(grad, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Gradient descent with momentum: ``v = mass v - (1 - mass) g``, ``x += step_size v``."""
    velocity = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@unflatten_optimizer
def rmsprop(grad, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=10**-8):
    """Steps scaled by a running root mean square of the gradient."""
    mean_square = np.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        mean_square = mean_square * gamma + g ** 2 * (1 - gamma)
        x = x - step_size * g / (np.sqrt(mean_square) + eps)
    return x


@unflatten_optimizer
def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=10**-8):
    """Adam: momentum on the gradient and on its square, both bias-corrected."""
    m = np.zeros(len(x))
    v = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * (g ** 2) + b2 * v
        m_hat = m / (1 - b1 ** (i + 1))
        v_hat = v / (1 - b2 ** (i + 1))
        x = x - step_size * m_hat / (np.sqrt(v_hat) + eps)
    return x
