"""What the SciPy solver wrappers share: one ``Problem`` for a SciPy call, its warnings, and
the traced fields of SciPy's result.

On the floor built on transforms (6), with ``wengert.implicit_diff``: the residuals here are
written with ``wg.grad``/``wg.vjp`` of the user's functions.
"""
from __future__ import annotations

import copy
import os
import sys
import warnings

import scipy as _sp_any

import numpy as np

from .. import numpy as wnp
from ..core import SolverWarning, Tracer, plain, shape_of
from ..implicit_diff import Captured, Problem, running, solve_implicit, unraveler

__all__ = ["SciPyProblem", "solved", "warn_failure", "first", "vector", "with_fields",
           "bound_arrays", "bound_flags", "near_bounds", "bound_residual"]


def first(out):
    """A function's value where it may return ``(value, derivative)`` (``jac=True``)."""
    return out[0] if isinstance(out, tuple) else out


def vector(x):
    """``x`` as a 1-D (traced) array."""
    return wnp.reshape(x, (-1,))


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCIPY = os.path.dirname(os.path.abspath(_sp_any.__file__))


def _caller_level():
    """The stack level of the first frame outside wengert and SciPy: the user's call."""
    frame, level = sys._getframe(2), 2
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith(_PACKAGE) or path.startswith(_SCIPY)):
            return level
        frame, level = frame.f_back, level + 1
    return 2


def warn_failure(name, message):
    warnings.warn(f"{name}: SciPy reports failure ({message}); the derivative is taken at the "
                  "point it returned, which may not be a solution. Tighten or loosen the "
                  "tolerances, raise maxiter, or start closer.", SolverWarning,
                  stacklevel=_caller_level())


class SciPyProblem(Problem):
    """A SciPy call: ``run(objs) -> (x, result, active)`` on plain values, ``equation(objs,
    x, active) -> 1-D residual`` on traced ones, where ``objs`` is the pytree of functions and
    arrays the call was given, rebuilt around the leaves (``Captured``).  ``x`` may carry
    extra unknowns (multipliers) after the solution's own ``size`` entries."""

    def __init__(self, name, objs, run, equation, like=None):
        super().__init__(Captured(objs))
        self.name, self.run, self.equation = name, run, equation
        self.unravel = None if like is None else unraveler(like)
        self.extra = 0

    def solve(self, leaves):
        objs = self.captured.build([plain(v) for v in leaves])
        x, result, active = running(self.name, self.run, objs)
        self.result = result
        x = np.asarray(x, dtype=float)
        if self.unravel is None:
            self.unravel = unraveler(x[()] if x.ndim == 0 else x)
        z = np.ravel(x)
        if getattr(self, "multipliers", None) is not None:
            z = np.concatenate([z, self.multipliers])
        return z, np.zeros(0) if active is None else active

    def residual(self, z, active, leaves):
        return self.equation(self.captured.build(leaves), z, active)


def solved(problem):
    """``(x, traced)``: the solution (traced when a captured value is) and whether it is."""
    z, active = solve_implicit(problem)
    if not problem.captured.leaves:
        return None, False
    n = shape_of(z)[0] - problem.extra
    return problem.unravel(z[:n] if problem.extra else z), True


def with_fields(result, **fields):
    """A shallow copy of SciPy's result with the traced ``fields`` in place."""
    out = copy.copy(result)
    for k, v in fields.items():
        if isinstance(out, dict):
            out[k] = v
        else:
            setattr(out, k, v)
    return out


# -- bounds: the active set ----------------------------------------------------------------------
def bound_arrays(bounds, n):
    """``(lb, ub)`` arrays of length ``n`` (``±inf`` for none) from SciPy's bound forms: a
    ``Bounds`` object, a sequence of ``(lo, hi)`` pairs, or ``(lb, ub)`` (least_squares)."""
    if bounds is None:
        return np.full(n, -np.inf), np.full(n, np.inf)
    if hasattr(bounds, "lb") and hasattr(bounds, "ub"):
        lb, ub = bounds.lb, bounds.ub
    elif len(bounds) == n and all(isinstance(b, (tuple, list)) and len(b) == 2 for b in bounds) \
            and not (n == 2 and not isinstance(bounds[0], (tuple, list))):
        lb = [-np.inf if b[0] is None else b[0] for b in bounds]
        ub = [np.inf if b[1] is None else b[1] for b in bounds]
    else:
        lb, ub = bounds
    lb = wnp.broadcast_to(-np.inf if lb is None else lb, (n,))
    ub = wnp.broadcast_to(np.inf if ub is None else ub, (n,))
    return lb, ub


def near_bounds(x, lb, ub, near=1e-4):
    """Where ``x`` is within ``near`` (relative) of a finite bound."""
    x, lb, ub = (np.asarray(plain(v), dtype=float) for v in (x, lb, ub))
    scale_l = 1.0 + np.abs(np.where(np.isfinite(lb), lb, 0.0))
    scale_u = 1.0 + np.abs(np.where(np.isfinite(ub), ub, 0.0))
    return (np.isfinite(lb) & (x - lb <= near * scale_l)) | \
        (np.isfinite(ub) & (ub - x <= near * scale_u))


def bound_flags(x, lb, ub, grad=None, rtol=1e-8, near=1e-4):
    """1 where ``x`` sits on its lower bound, 2 on its upper, else 0.  Without a gradient:
    within ``rtol``.  With one (the bound's multiplier): within ``near`` (interior-point
    methods stop short of a bound) and pushed outwards by a slope that is not round-off,
    so an interior optimum that comes close to a bound stays free."""
    x, lb, ub = (np.asarray(plain(v), dtype=float) for v in (x, lb, ub))
    scale_l = 1.0 + np.abs(np.where(np.isfinite(lb), lb, 0.0))
    scale_u = 1.0 + np.abs(np.where(np.isfinite(ub), ub, 0.0))
    if grad is None:
        at_l = np.isfinite(lb) & (x - lb <= rtol * scale_l)
        at_u = np.isfinite(ub) & (ub - x <= rtol * scale_u)
    else:
        g = np.asarray(grad, dtype=float)
        slope = 1e-6 * (1.0 + np.max(np.abs(g), initial=0.0))
        at_l = np.isfinite(lb) & (x - lb <= near * scale_l) & (g > slope)
        at_u = np.isfinite(ub) & (ub - x <= near * scale_u) & (g < -slope)
    return np.where(at_l, 1, np.where(at_u, 2, 0)).astype(np.int8)


def bound_residual(x, flags, lb, ub, free):
    """``x - bound`` where a bound is active, ``free`` (a stationarity row) elsewhere."""
    lb0 = wnp.where(wnp.isfinite(lb), lb, 0.0) if isinstance(lb, Tracer) else \
        np.where(np.isfinite(lb), lb, 0.0)
    ub0 = wnp.where(wnp.isfinite(ub), ub, 0.0) if isinstance(ub, Tracer) else \
        np.where(np.isfinite(ub), ub, 0.0)
    return wnp.where(flags == 1, x - lb0, wnp.where(flags == 2, x - ub0, free))
