"""Taylor coefficients of ``t -> f(x + t v)``: forward mode applied ``order`` times.

Each level is one ``ForwardTrace`` seeded with the same direction, so the k-th
coefficient is the k-th directional derivative over k!.
"""
import math

from .forward import Dual, ForwardTrace
from .core import new_level
from .tree import flatten, unflatten


def taylor_coefficients(f, x, v, order):
    from .transforms import derivative

    def along(t):
        xl, d = flatten(x)
        vl, _ = flatten(v)
        return f(unflatten(d, [a + t * b for a, b in zip(xl, vl)]))

    out = []
    for k in range(order + 1):
        ck = derivative(along, k)(0.0) if k else along(0.0)
        out.append(_scale(ck, 1.0 / math.factorial(k)))
    return out


def _scale(tree, s):
    leaves, d = flatten(tree)
    return unflatten(d, [l * s if s != 1.0 else l for l in leaves])
