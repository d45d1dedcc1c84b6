"""particle: Pearlmutter and Siskind's charged particle, aimed at the origin by gradient descent on w.

The particle's acceleration is −∇ₓ of the potential of two charges, one of which w
moves; Euler steps run until the particle crosses y = 0, and the outer gradient with
respect to w differentiates that whole loop, inner derivative included (nested AD).
``ff``, ``fr``, ``rf``, ``rr``: forward or reverse mode, outer then inner.  Under
``--compile`` the force (the potential's gradient) runs compiled and the outer derivative
differentiates through it; the Euler loop and the solver, whose trip counts depend on w,
stay in Python.
"""
import numpy as np

import wengert as wg
import wengert.numpy as wnp

from ._common import maybe_compile
from ._descent import argmin


def potential(x, charges):
    return wnp.sum(1 / wnp.sqrt(wnp.sum((x - charges) ** 2, axis=1)))


def spatial_gradient(mode):
    if mode == "r":
        return wg.grad(potential)
    return wg.jacobian(potential, mode="forward")


def miss(w, grad_p):
    """Squared distance from the origin where the Euler path crosses the x axis."""
    charges = wnp.stack([wnp.stack([10.0 + 0 * w, 10.0 - w]), np.array([10.0, 0.0]) + 0 * w])
    x, xdot, dt = np.array([0.0, 8.0]), np.array([0.75, 0.0]), 0.1
    while True:
        xddot = -grad_p(x, charges)
        x = x + dt * xdot
        if x[1] <= 0:
            dt_f = -x[1] / xdot[1]
            return (x[0] + dt_f * xdot[0]) ** 2
        xdot = xdot + dt * xddot


def particle(w0, outer, grad_p):
    objective = lambda w: miss(w[0], grad_p)
    if outer == "r":
        gradient = wg.grad(objective)
    else:
        gradient = wg.jacobian(objective, mode="forward")
    return argmin(objective, gradient, np.array([w0]))[0]


def functions(options):
    force = {m: maybe_compile(options, spatial_gradient(m)) for m in "fr"}
    table = {}
    for name in ("ff", "fr", "rf", "rr"):
        run = lambda w0, o=name[0], i=name[1]: particle(w0, o, force[i])
        table[name] = (lambda raw: (float(raw["w"]),), run, float)
    return table
