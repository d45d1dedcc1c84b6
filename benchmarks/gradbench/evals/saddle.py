"""saddle: min over x of max over y of (x₁² + x₂²) − (y₁² + y₂²), both by gradient descent.

The outer gradient differentiates the inner argmax's iterations (nested AD); ``ff``,
``fr``, ``rf``, ``rr`` pick forward or reverse mode for the outer and inner derivative.
Under ``--compile`` the straight-line parts (f and its gradient in y) run compiled and the
outer derivative differentiates through them; the solvers' loops, whose trip counts depend
on the values, stay in Python (compiling them would re-trace at every new trip count).
"""
import numpy as np

import wengert as wg

from ._common import maybe_compile
from ._descent import argmax, argmin


def f(p1, p2):
    return (p1[0] * p1[0] + p1[1] * p1[1]) - (p2[0] * p2[0] + p2[1] * p2[1])


def gradient(mode, fn, argnums=0):
    """∇ of a scalar function of a vector, in forward or reverse mode."""
    if mode == "r":
        return wg.grad(fn, argnums=argnums)
    return wg.jacobian(fn, argnums=argnums, mode="forward")


def saddle(start, outer, inner, f, grad_y):
    def max_value(p1):
        p2 = argmax(lambda p2: f(p1, p2), lambda p2: grad_y[inner](p1, p2), start)
        return f(p1, p2)

    r1 = argmin(max_value, gradient(outer, max_value), start)
    r2 = argmax(lambda p2: f(r1, p2), lambda p2: grad_y[outer](r1, p2), start)
    return np.concatenate([np.asarray(r1), np.asarray(r2)])


def functions(options):
    fc = maybe_compile(options, f)
    grad_y = {m: maybe_compile(options, gradient(m, f, argnums=1)) for m in "fr"}
    table = {}
    for name in ("ff", "fr", "rf", "rr"):
        run = lambda start, o=name[0], i=name[1]: saddle(start, o, i, fc, grad_y)
        table[name] = (lambda raw: (np.asarray(raw["start"], float),), run,
                       lambda r: np.asarray(r).tolist())
    return table
