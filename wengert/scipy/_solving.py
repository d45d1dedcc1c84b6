"""What the SciPy solver wrappers share: one ``Problem`` for a SciPy call, its warnings, and
the traced fields of SciPy's result.

On the floor built on transforms (6), with ``wengert.implicit_diff``: the residuals here are
written with ``wg.grad``/``wg.vjp`` of the user's functions.
"""
from __future__ import annotations

import copy
import os
import sys
import threading
import warnings
from collections import OrderedDict

import scipy as _sp_any
import scipy.optimize as _so

import numpy as np

from .. import numpy as wnp
from ..core import SolverWarning, Tracer, plain, shape_of
from ..implicit_diff import Captured, Problem, private, running, solve_implicit, unraveler
from ..transforms import jvp, vjp
from ._fingerprint import Unkeyable, fingerprint_items
from ._ode import _shapes, trace_rhs
from ._ode_rhs import Rhs

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

    def __init__(self, name, objs, run, equation, like=None, cache=False, reads=None):
        super().__init__(Captured(objs))
        self.name, self.run, self.equation = name, run, equation
        self.unravel = None if like is None else unraveler(like)
        self.extra = 0
        # cached: a problem whose residual reads the problem only through unravel (set from
        # the solution's shape); the wrappers of root finders say so (cache=True)
        self.cacheable = cache and like is None
        # the entries of objs the equation reads (None: all): only these enter the cache key,
        # so a new starting point (a warm start) reuses the derivative code
        self.reads = reads
        self.xshape = None

    def solve(self, leaves):
        objs = self.captured.build([plain(v) for v in leaves])
        x, result, active = running(self.name, self.run, objs)
        self.result = result
        x = np.asarray(x, dtype=float)
        if self.unravel is None:
            self.unravel = unraveler(x[()] if x.ndim == 0 else x)
            self.xshape = x.shape
        if x.ndim == 0 and self.cacheable:
            # a root finder's one unknown stays 0-d: its equation and ``solved`` read it
            # through unravel only, so the number needs no indexing operation on the tape
            return x, np.zeros(0, np.int8) if active is None else active
        z = np.ravel(x)
        if getattr(self, "multipliers", None) is not None:
            z = np.concatenate([z, self.multipliers])
        return z, np.zeros(0, np.int8) if active is None else active

    def residual(self, z, active, leaves):
        return self.equation(self.captured.build(leaves), z, active)

    def plain_pullback(self, z, active, leaves, idx, gz):
        """``-(∂F/∂θ)ᵀ J⁻ᵀ z̄`` by generated code, made once per structure of the residual.

        Uncached, the residual is traced into a graph (reading this call's closure and
        globals) and the code that takes ``J``, solves and pulls back is shared by every
        graph of the same structure, constants' values included (``trace_rhs``).  Cached,
        not even that trace is made: a later call whose fingerprint (code, closure and
        globals by value, traced values by position, shapes) equals an earlier one's runs
        that call's code at once.  The eager tape's fixed cost, several times SciPy's own
        for a small problem, is then paid once, not per gradient."""
        if not self.cacheable:
            return None
        ps = [leaves[i] for i in idx]
        key = self._key(z, active, leaves, idx)
        if key is not None:
            # a read needs no lock (one C call under the GIL); the entry is moved to the
            # end, unless another thread has just evicted it
            hit = _CACHE.get(key[0])
            if hit is not None:
                try:
                    _CACHE.move_to_end(key[0])
                except KeyError:
                    pass
                return _run(hit[0], z, gz, ps)

        def residual(zz, *vals):
            full = list(leaves)
            for i, v in zip(idx, vals):
                full[i] = v
            return self.residual(zz, active, full)
        F = trace_rhs(residual, [z, *ps], "residual")
        if F.captured:   # a value of another transform, met in a place not searched
            return None
        pull = F.derived(("implicit pullback", _shapes(ps)),
                         lambda: _trace_pullback(F.bare(), z, gz, ps))
        out = _run(pull, z, gz, ps)
        if out is not None and key is not None:   # only a complete entry is ever stored
            with _LOCK:
                _CACHE[key[0]] = (pull, key[1])
                while len(_CACHE) > _CACHE_MAX:
                    _CACHE.popitem(last=False)
        return out

    def _key(self, z, active, leaves, idx):
        """``(key, keep)`` of everything the residual reads, or None where a fingerprint
        cannot vouch for it (then the residual is traced, which is always right)."""
        if self.extra or self.multipliers is not None:
            return None
        eq = self.equation
        cells = eq.__closure__
        obj = self.captured.obj
        reads = self.reads
        items = [obj[i] for i in reads] if reads is not None else [obj]
        n = len(leaves)
        if len(idx) < n:
            items.append([leaves[i] for i in range(n) if i not in idx])   # the plain leaves
        if cells is not None and len(cells) == 1 and cells[0].cell_contents is self and \
                eq.__module__ == _OPTIMIZE:
            # a wrapper's own equation reads the problem and its module's helpers only: its
            # code says the rest, so it is not walked (the code is kept alive)
            own, known = ("equation", id(eq.__code__)), None
        else:
            own, known = None, {id(self): (self, ("problem",))}
            items.append(eq)
        try:   # one walk: the user's functions, the plain leaves (the equation if not own)
            key, keep = fingerprint_items(items, self.captured._ids, known)
        except Unkeyable:
            return None
        keep.append(eq.__code__)
        shapes = tuple([("float",) if type(p) is float else
                        ("ndarray", p.shape, p.dtype.str) if type(p) is np.ndarray else
                        (type(p).__name__, np.shape(p), np.result_type(p).str)
                        for p in [leaves[i] for i in idx]])
        key = (self.name, own, key, tuple(idx), shapes, z.shape, self.xshape,
               active.tobytes() if active.size else b"")
        return key, keep


_OPTIMIZE = __package__ + ".optimize"


# fingerprint -> (the generated pullback, the objects its key names by identity)
_CACHE = OrderedDict()
_CACHE_MAX = 128
_LOCK = threading.Lock()


def _run(pull, z, gz, ps):
    try:
        return pull.plain(z, gz, *ps)
    except ValueError:   # the residual branches on its input: the eager rule re-traces
        return None


def _trace_pullback(F, z, gz, ps):
    """``(z, z̄, *θ) -> θ̄``: ``J`` by one forward pass (its ``n`` columns batched), the
    transposed solve, one reverse sweep for ``θ``."""
    n = z.size

    def pull(zz, g, *pp):
        if n == 1:   # F_x by one dual number on x: a division, no Jacobian to transpose
            lam = g / jvp(lambda y: F(y, *pp), (zz,), (np.ones(z.shape),))[1]
        else:   # J's n columns by one batched forward pass, stacked: they are Jᵀ's rows
            jt = jvp(lambda y: F(y, *pp), (zz,), (np.eye(n),), batched=True)[1]
            lam = wnp.linalg.solve(jt, g)
        return tuple(vjp(lambda *q: F(zz, *q), *pp)[1](-lam))
    traced = trace_rhs(pull, [z, gz, *ps], "implicit_pullback", flat=False)
    # exact rewrites only (reshapes to the same shape, x * 1, -(-x)): every gradient runs
    # this code, and a scalar root's is a handful of operations, each a Python call
    return Rhs(traced.graph.simplify(), traced.captured)


def solved(problem):
    """``(x, traced)``: the solution (traced when a captured value is) and whether it is.
    Nothing traced: SciPy's call on the user's own objects, and nothing else (no flat
    solution, no unraveller), so that a plain call costs what SciPy's does."""
    if not problem.captured.leaves:
        private(problem).result = running(problem.name, problem.run, problem.captured.obj)[1]
        return None, False
    z, active = solve_implicit(problem)
    if problem.extra:   # the multipliers after the solution
        z = z[:shape_of(z)[0] - problem.extra]
    return problem.unravel(z), True


def with_fields(result, **fields):
    """A shallow copy of SciPy's result with the traced ``fields`` in place."""
    # an OptimizeResult keeps its fields as dict items: copied as a dict (copy.copy's
    # reduce protocol costs more than the fields)
    out = _so.OptimizeResult(result) if type(result) is _so.OptimizeResult else \
        copy.copy(result)
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
