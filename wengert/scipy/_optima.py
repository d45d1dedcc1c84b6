"""``minimize``, ``least_squares``, ``minimize_scalar``, ``linprog`` (re-exported by
``wengert.scipy.optimize``): the argmin differentiated through its optimality condition.

An unconstrained minimum solves ``∇f(x, θ) = 0``: the tangent solve is with the Hessian.  A
bound that is active at the solution fixes its variable (``x_i - bound_i = 0`` replaces the
``i``-th stationarity row); constraints enter as the Karush-Kuhn-Tucker system in ``(x, λ)``:
``∇f - Σ λ_j ∇c_j = 0`` on the free variables, ``c_j(x) = target_j`` for the active
constraints and ``λ_j = 0`` for the others.  The multipliers are read off the solution by
least squares (whatever method SciPy ran), and which bounds and constraints are active is an
output of the solver call, so a compiled program picks the active set of each call.  The
derivative is that of a regular KKT point with strict complementarity; at a degenerate one the
tangent solve is singular and raises.
"""
from __future__ import annotations

import numpy as np
import scipy.optimize as _so

from .. import numpy as wnp
from ..core import Tracer, shape_of
from ..transforms import grad, jacobian
from ._solving import (SciPyProblem, bound_arrays, bound_flags, bound_residual, first,
                       near_bounds, solved, vector, warn_failure, with_fields)

__all__ = ["minimize", "least_squares", "minimize_scalar", "linprog"]


def _concat(parts):
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else wnp.concatenate(parts)


def _where_finite(b):
    return wnp.where(wnp.isfinite(b), b, 0.0)


# -- constraints: SciPy's forms as  lo <= c(x) <= hi -----------------------------------------------
def _constraint_list(constraints):
    if constraints is None:
        return []
    if isinstance(constraints, (dict, _so.LinearConstraint, _so.NonlinearConstraint)):
        return [constraints]
    return list(constraints)


def _normal(con):
    """``(c(x) -> 1-D, lo, hi)``."""
    if isinstance(con, dict):
        fn, a = con["fun"], tuple(con.get("args", ()))
        eq = con["type"] == "eq"
        return (lambda x: vector(fn(x, *a))), 0.0, (0.0 if eq else np.inf)
    if isinstance(con, _so.LinearConstraint):
        return (lambda x: vector(con.A @ x)), con.lb, con.ub
    if isinstance(con, _so.NonlinearConstraint):
        return (lambda x: vector(con.fun(x))), con.lb, con.ub
    raise TypeError(f"minimize: a constraint must be a dict, LinearConstraint or "
                    f"NonlinearConstraint, not {type(con).__name__}")


class _Constraints:
    """Every constraint as one vector ``c(x)`` with bounds ``lo <= c <= hi``."""

    def __init__(self, constraints, x=None, sizes=None):
        self.items = [_normal(c) for c in _constraint_list(constraints)]
        self.sizes = sizes if sizes is not None else [int(np.size(fn(x))) for fn, _, _ in
                                                      self.items]
        self.m = sum(self.sizes)

    def value(self, x):
        return _concat([fn(x) for fn, _, _ in self.items])

    def limits(self):
        lo = _concat([wnp.broadcast_to(lo, (k,)) for (_, lo, _), k in zip(self.items, self.sizes)])
        hi = _concat([wnp.broadcast_to(hi, (k,)) for (_, _, hi), k in zip(self.items, self.sizes)])
        return lo, hi


def _multipliers(g, jc, free, act):
    """``λ`` with ``∇f = Jcᵀ λ`` on the free variables, zero for inactive constraints."""
    lam = np.zeros(jc.shape[0])
    rows = np.flatnonzero(act)
    if rows.size:
        a = jc[np.ix_(rows, np.flatnonzero(free))]
        lam[rows] = np.linalg.lstsq(a.T, g[free], rcond=None)[0]
    return lam


# -- minimize ---------------------------------------------------------------------------------------
def minimize(fun, x0, args=(), method=None, jac=None, hess=None, hessp=None, bounds=None,
             constraints=(), tol=None, callback=None, options=None):
    """``scipy.optimize.minimize`` (every method); ``.x`` and ``.fun`` traced.

    ``fun`` is differentiated twice at the solution (its Hessian is the tangent solve's
    matrix), so write it with ``wengert.numpy``; give SciPy ``jac=wg.grad(f)`` for an exact
    gradient and a tight ``tol``.  Bounds and constraints (dicts, ``LinearConstraint``,
    ``NonlinearConstraint``) are differentiated through their active set.
    """
    args = args if isinstance(args, tuple) else (args,)
    cons_in = constraints

    def objective(f, a):
        return lambda x: first(f(x, *a))

    def run(objs):
        f, x0_, a, j, h, hp, b, cons = objs
        res = _so.minimize(f, x0_, args=a, method=method, jac=j, hess=h, hessp=hp, bounds=b,
                           constraints=cons if cons is not None else (), tol=tol,
                           callback=callback, options=options)
        if not res.success:
            warn_failure(f"minimize(method={res.get('method', method)!r})", res.message)
        x = np.asarray(res.x, dtype=float)
        n = x.size
        lb, ub = bound_arrays(b, n)
        cs = _Constraints(cons, x)
        problem.csizes = cs.sizes
        g = np.asarray(grad(objective(f, a))(x), dtype=float).ravel()
        problem.extra = cs.m
        problem.multipliers = None
        if not cs.m:
            return x, res, bound_flags(x, lb, ub, g)
        c = np.asarray(cs.value(x), dtype=float)
        lo, hi = (np.asarray(v, dtype=float) for v in cs.limits())
        tol_c = 1e-6 * (1.0 + np.abs(np.where(np.isfinite(lo), lo, 0.0)))
        at_lo = np.isfinite(lo) & (c - lo <= tol_c)
        at_hi = np.isfinite(hi) & (hi - c <= tol_c) & ~at_lo
        cflags = np.where(at_lo, 1, np.where(at_hi, 2, 0)).astype(np.int8)
        jc = np.asarray(jacobian(cs.value)(x), dtype=float).reshape(cs.m, n)
        # the multipliers of the bounds x is near, with the active constraints':
        # g = Jcᵀ λ + Σ μ_i e_i
        near = np.flatnonzero(near_bounds(x, lb, ub))
        rows = np.concatenate([jc[cflags > 0], np.eye(n)[near]])
        mu = np.zeros(n)
        mu[near] = np.linalg.lstsq(rows.T, g, rcond=None)[0][int(np.sum(cflags > 0)):]
        flags = bound_flags(x, lb, ub, mu)
        problem.multipliers = _multipliers(g, jc, flags == 0, cflags > 0)
        return x, res, np.concatenate([flags, cflags])

    def equation(objs, z, active):
        f, _, a, _, _, _, b, cons = objs
        n = shape_of(z)[0] - problem.extra
        x = z[:n]
        obj = objective(f, a)
        lb, ub = bound_arrays(b, n)
        if not problem.extra:
            return bound_residual(x, active, lb, ub, vector(grad(obj)(x)))
        cs = _Constraints(cons, sizes=problem.csizes)
        lam = z[n:]
        stat = vector(grad(lambda xx: obj(xx) - wnp.sum(lam * cs.value(xx)))(x))
        r_x = bound_residual(x, active[:n], lb, ub, stat)
        lo, hi = cs.limits()
        act = active[n:]
        target = wnp.where(act == 2, _where_finite(hi), _where_finite(lo))
        r_c = wnp.where(act > 0, cs.value(x) - target, lam)
        return wnp.concatenate([r_x, r_c])

    cons_list = None if cons_in is None else (
        cons_in if isinstance(cons_in, (dict, _so.LinearConstraint, _so.NonlinearConstraint))
        else list(cons_in))
    problem = SciPyProblem("minimize", (fun, x0, args, jac, hess, hessp, bounds, cons_list),
                           run, equation)
    x, traced = solved(problem)
    if not traced:
        return problem.result
    f, _, a = problem.captured.build(problem.captured.leaves)[:3]
    return with_fields(problem.result, x=x, fun=first(f(x, *a)))


# -- least_squares ----------------------------------------------------------------------------------
_RHO = {
    "linear": lambda z: z,
    "soft_l1": lambda z: 2.0 * (wnp.sqrt(1.0 + z) - 1.0),
    "huber": lambda z: wnp.where(z <= 1.0, z, 2.0 * wnp.sqrt(wnp.maximum(z, 1.0)) - 1.0),
    "cauchy": lambda z: wnp.log1p(z),
    "arctan": lambda z: wnp.arctan(z),
}


def least_squares(fun, x0, jac="2-point", bounds=(-np.inf, np.inf), method="trf", *,
                  args=(), kwargs=None, loss="linear", f_scale=1.0, **options):
    """``scipy.optimize.least_squares``; ``.x``, ``.cost`` and ``.fun`` traced, through the
    optimality condition of the cost ``½ Σ f_scale² ρ(r²/f_scale²)`` (with active bounds)."""
    args = args if isinstance(args, tuple) else (args,)
    kwargs = {} if kwargs is None else kwargs
    if not isinstance(loss, str) and callable(loss):
        rho = None
    else:
        rho = _RHO[loss]

    def cost_of(f, a, kw, fs):
        def cost(x):
            r = vector(f(x, *a, **kw))
            if loss == "linear":
                return 0.5 * wnp.sum(r * r)
            return 0.5 * fs * fs * wnp.sum(rho(r * r / (fs * fs)))
        return cost

    def run(objs):
        f, x0_, a, kw, b, fs, j = objs
        res = _so.least_squares(f, x0_, jac=j, bounds=b, method=method, args=a, kwargs=kw,
                                loss=loss, f_scale=fs, **options)
        if res.status <= 0:
            warn_failure("least_squares", res.message)
        x = np.asarray(res.x, dtype=float)
        lb, ub = _ls_bounds(b, x.size)
        if rho is None and np.any(bound_flags(x, lb, ub) == 0):
            raise NotImplementedError("least_squares: a callable loss has no wengert "
                                      "derivative; use one of SciPy's named losses")
        g = np.asarray(grad(cost_of(f, a, kw, fs))(x), dtype=float).ravel() \
            if rho is not None else None
        return x, res, bound_flags(x, lb, ub, g)

    def equation(objs, z, active):
        f, _, a, kw, b, fs, _ = objs
        lb, ub = _ls_bounds(b, shape_of(z)[0])
        return bound_residual(z, active, lb, ub, vector(grad(cost_of(f, a, kw, fs))(z)))

    problem = SciPyProblem("least_squares", (fun, x0, args, kwargs, bounds, f_scale, jac), run,
                           equation)
    x, traced = solved(problem)
    if not traced:
        return problem.result
    f, _, a, kw, _, fs, _ = problem.captured.build(problem.captured.leaves)
    r = f(x, *a, **kw)
    return with_fields(problem.result, x=x, fun=r, cost=cost_of(f, a, kw, fs)(x))


def _ls_bounds(bounds, n):
    if hasattr(bounds, "lb"):
        lb, ub = bounds.lb, bounds.ub
    else:
        lb, ub = bounds
    return wnp.broadcast_to(lb, (n,)), wnp.broadcast_to(ub, (n,))


# -- minimize_scalar --------------------------------------------------------------------------------
def minimize_scalar(fun, bracket=None, bounds=None, args=(), method=None, tol=None,
                    options=None):
    """``scipy.optimize.minimize_scalar``; ``.x`` and ``.fun`` traced (``f'(x) = 0``, or the
    bound the bounded method stopped at when the slope pushes outwards)."""
    args = args if isinstance(args, tuple) else (args,)

    def run(objs):
        f, br, bd, a = objs
        res = _so.minimize_scalar(f, bracket=br, bounds=bd, args=a, method=method, tol=tol,
                                  options=options)
        if not res.success:
            warn_failure("minimize_scalar", res.message)
        x = float(res.x)
        flags = np.zeros(1, np.int8)
        if bd is not None:
            xatol = (options or {}).get("xatol", 1e-5)
            g = float(grad(lambda t: first(f(t, *a)))(x))
            lo, hi = float(bd[0]), float(bd[1])
            near = 10.0 * xatol * (1.0 + max(abs(lo), abs(hi)))
            if x - lo <= near and g > 0:
                flags[0] = 1
            elif hi - x <= near and g < 0:
                flags[0] = 2
        return np.float64(x), res, flags

    def equation(objs, z, active):
        f, _, bd, a = objs
        x = z[0]
        stat = vector(grad(lambda t: first(f(t, *a)))(x))
        if bd is None:
            return stat
        lo, hi = bd
        return bound_residual(wnp.reshape(x, (1,)), active, wnp.reshape(lo, (1,)),
                              wnp.reshape(hi, (1,)), stat)

    problem = SciPyProblem("minimize_scalar", (fun, bracket, bounds, args), run, equation)
    x, traced = solved(problem)
    if not traced:
        return problem.result
    f, _, _, a = problem.captured.build(problem.captured.leaves)
    return with_fields(problem.result, x=x, fun=first(f(x, *a)))


# -- linprog ----------------------------------------------------------------------------------------
def _lp_bounds(bounds, n):
    if bounds is None:
        bounds = (0, None)
    if hasattr(bounds, "lb"):
        return bound_arrays(bounds, n)
    if len(bounds) == 2 and not isinstance(bounds[0], (tuple, list)):
        bounds = [bounds] * n
    lb = [(-np.inf if b[0] is None else b[0]) for b in bounds]
    ub = [(np.inf if b[1] is None else b[1]) for b in bounds]
    return (wnp.stack(lb) if any(not isinstance(v, (int, float)) for v in lb) else
            np.asarray(lb, float),
            wnp.stack(ub) if any(not isinstance(v, (int, float)) for v in ub) else
            np.asarray(ub, float))


def linprog(c, A_ub=None, b_ub=None, A_eq=None, b_eq=None, bounds=(0, None), method="highs",
            callback=None, options=None, x0=None, integrality=None):
    """``scipy.optimize.linprog``; ``.x`` and ``.fun`` traced in ``c``, ``A_ub``, ``b_ub``,
    ``A_eq``, ``b_eq`` and the bounds, at a nondegenerate vertex: the active constraints'
    linear system (``x`` does not move with ``c``; ``fun = c·x`` does)."""
    def run(objs):
        c_, aub, bub, aeq, beq, bd = objs
        res = _so.linprog(c_, A_ub=aub, b_ub=bub, A_eq=aeq, b_eq=beq, bounds=bd, method=method,
                          callback=callback, options=options, x0=x0, integrality=integrality)
        if res.status != 0:
            warn_failure("linprog", res.message)
        x = np.asarray(res.x, dtype=float)
        n = x.size
        lb, ub = _lp_bounds(bd, n)
        flags = bound_flags(x, lb, ub, rtol=1e-9)
        m1 = 0 if aub is None else np.shape(aub)[0]
        m2 = 0 if aeq is None else np.shape(aeq)[0]
        act = np.zeros(m1, np.int8)
        if m1:
            slack = np.asarray(bub, float) - np.asarray(aub, float) @ x
            act = (slack <= 1e-9 * (1.0 + np.abs(np.asarray(bub, float)))).astype(np.int8)
        rows = np.zeros((m1 + m2, n))
        if m1:
            rows[:m1] = aub
        if m2:
            rows[m1:] = aeq
        live = np.concatenate([act > 0, np.ones(m2, bool)])
        problem.extra = m1 + m2
        # multipliers of  c + A_ubᵀ λ + A_eqᵀ ν = 0  on the free variables
        problem.multipliers = _multipliers(-np.asarray(c_, float), rows, flags == 0, live)
        return x, res, np.concatenate([flags, act])

    def equation(objs, z, active):
        c_, aub, bub, aeq, beq, bd = objs
        m1 = 0 if aub is None else np.shape(aub)[0]
        m2 = 0 if aeq is None else np.shape(aeq)[0]
        n = shape_of(z)[0] - m1 - m2
        x, lam, nu = z[:n], z[n:n + m1], z[n + m1:]
        stat = c_ + 0.0 * x
        if m1:
            stat = stat + wnp.transpose(aub) @ lam
        if m2:
            stat = stat + wnp.transpose(aeq) @ nu
        lb, ub = _lp_bounds(bd, n)
        parts = [bound_residual(x, active[:n], lb, ub, stat)]
        if m1:
            parts.append(wnp.where(active[n:] > 0, aub @ x - bub, lam))
        if m2:
            parts.append(aeq @ x - beq)
        return _concat(parts)

    c, A_ub, b_ub, A_eq, b_eq = (v if v is None or isinstance(v, Tracer) else
                                 np.asarray(v, dtype=float) for v in (c, A_ub, b_ub, A_eq, b_eq))
    problem = SciPyProblem("linprog", (c, A_ub, b_ub, A_eq, b_eq, bounds), run, equation)
    x, traced = solved(problem)
    if not traced:
        return problem.result
    c_ = problem.captured.build(problem.captured.leaves)[0]
    return with_fields(problem.result, x=x, fun=wnp.sum(c_ * x))


for _f in (minimize, least_squares, minimize_scalar, linprog):
    _f._wengert_solver = True  # wengert.coverage: SciPy's solver, differentiated
