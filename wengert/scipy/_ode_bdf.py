"""The discrete adjoint of SciPy's BDF solve (``adjoint="discrete"`` with ``method="BDF"``), on
plain NumPy values (no wengert here; the right-hand side's vjp is handed in).

SciPy's BDF carries the modified divided differences ``D`` of the solution from step to step.
Everything it does to ``D`` is linear with constant coefficients once the step sizes and
orders are fixed (rescaling to a new step size, the update after a step, the dense output),
except one implicit equation per step, ``d = c f(t_new, y_pred + d) - psi``.  The pullback
sweeps the accepted steps backwards carrying the cotangent of ``D``: the linear maps are
transposed, and the implicit equation's cotangent is ``(I - c J)^-T`` of its input, with
``J`` at the step's solution, solved by iterating with the forward solve's own LU
factorisation (transposed) as the preconditioner, as the forward Newton iterations did: one
vjp of the right-hand side and one triangular solve per iteration, no Jacobian and no new
factorisation (one is made only where that iteration stalls).

The forward solve is SciPy's own: a subclass keeps, per accepted step, its times, step
sizes, orders, the LU it solved with and its solution (O(steps x n) memory).  Step sizes
and orders are constants (SciPy's error control is not differentiated), the standard
discrete adjoint (SciMLSensitivity's for implicit methods).
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.integrate as si
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.integrate._ivp.bdf import compute_R
from scipy.linalg import lu_factor, lu_solve

from ._ode_steps import _lapack

__all__ = ["recording_bdf", "pull_bdf"]

_TOL = 1e-10        # the transposed solve's residual, relative to its solution
_ITERATIONS = 12    # then a factorisation at the step's own Jacobian


class _Step:
    __slots__ = ("t_old", "h_start", "t_new", "order", "order_new", "h_new", "rescaled",
                 "lu", "y_new")


def recording_bdf(steps):
    """SciPy's BDF keeping each accepted step in ``steps``; ``steps[0]`` is ``(t0, y0, h0)``,
    the start (``D[1] = h0 f(t0, y0)``)."""

    class BDF(si.BDF):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            steps.append((self.t, self.y.copy(), self.h_abs * self.direction))
            factor = self.lu

            def lu(A):
                out = factor(A)
                self._lu_used = out
                return out
            self.lu = lu

        def _step_impl(self):
            t, h_start, order = self.t, self.h_abs, self.order
            self._lu_used = self.LU     # unless the step factorises again
            ok, msg = si.BDF._step_impl(self)
            if ok:
                s = _Step()
                s.t_old, s.h_start, s.t_new, s.order = t, h_start, self.t, order
                s.order_new, s.h_new = self.order, self.h_abs
                s.rescaled = self.n_equal_steps == 0   # D rescaled for the next step
                s.lu, s.y_new = self._lu_used, self.y
                steps.append(s)
            return ok, msg
    return BDF


def _RU(order, factor):
    """The matrix SciPy's ``change_D`` applies (transposed) to ``D[:order + 1]``."""
    return compute_R(order, factor) @ compute_R(order, 1)


def _weights(s, t, direction):
    """The step's dense output ``y(t) = D[0] + Σ_j p_j(t) D[j]``: the ``p_j`` (j = 1..order)."""
    h = s.h_new * direction
    k = s.order_new
    x = (t - (s.t_new - h * np.arange(k))) / (h * (1 + np.arange(k)))
    return np.cumprod(x)


def _transposed_solver(s):
    """``b -> P^-T b`` with ``P`` the LU the forward step solved with (``I`` if none)."""
    LU = s.lu
    if isinstance(LU, spla.SuperLU):
        return lambda b: LU.solve(b, trans="T")
    if LU is None:
        return lambda b: b
    # LAPACK's getrs directly: SciPy's lu_solve checks and converts at every call, more than
    # the solve itself for a small system
    lu_, piv = LU
    getrs = _lapack("getrs", lu_.dtype)
    return lambda b: getrs(lu_, piv, b, trans=1)[0]


def pull_bdf(steps, ts, ys, g, vjp, fun, jac, shapes):
    """``(ȳ0, ḡ_ts, [θ̄...])``: the cotangents of SciPy's BDF outputs ``ys[i]`` at ``ts[i]``
    (row 0 is ``y0``) pulled back through the recorded steps (:func:`recording_bdf`).

    ``vjp(t, y, a)`` is ``(aᵀ J_y, aᵀ J_θ1, ...)``, ``fun(t, y)`` the right-hand side,
    ``jac(t, y)`` its Jacobian in ``y`` (only where the iterative transposed solve stalls).
    The output times take the continuous formula ``ḡ_t = g · f(t, y)`` (the initial time
    ``-ȳ0 · f(t0, y0)``)."""
    ts = np.asarray(ts, dtype=float)
    g = np.asarray(g, dtype=float)
    n = g.shape[1]
    gts = np.zeros(ts.size)
    theta = [np.zeros(sh) for sh in shapes]
    t0, y0, h0 = steps[0] if steps else (ts[0], None, 0.0)
    steps = steps[1:]
    rows = np.flatnonzero(np.any(g[1:] != 0.0, axis=1)) + 1
    for i in rows:
        gts[i] = g[i] @ fun(ts[i], ys[i])
    at_t0 = g[rows[ts[rows] == ts[0]]].sum(axis=0)
    rows = rows[ts[rows] != ts[0]]
    at = {}
    direction = 1.0
    if steps:
        direction = 1.0 if steps[0].t_new >= steps[0].t_old else -1.0
        ends = direction * np.array([s.t_new for s in steps])
        where = np.searchsorted(ends, direction * ts[rows], side="left")
        for i, k in zip(rows, where):
            if k < len(steps):
                at.setdefault(int(k), []).append(int(i))
    gamma, alpha = _coefficients()
    lam = np.zeros((8, n))   # the cotangent of D after the step being pulled back
    for k in range(len(steps) - 1, -1, -1):
        s = steps[k]
        for i in at.get(k, ()):
            w = _weights(s, ts[i], direction)
            lam[0] += g[i]
            lam[1:s.order_new + 1] += w[:, None] * g[i]
        if s.rescaled:   # D was rescaled to the next step's size (and order)
            o = s.order_new
            lam[:o + 1] = _RU(o, s.h_new / abs(s.t_new - s.t_old)) @ lam[:o + 1]
        o = s.order
        pref = np.cumsum(lam[:o + 1], axis=0)
        lam_d = lam[o + 2] + lam[o + 1] + pref[-1]
        lam[:o + 1] = pref
        lam[o + 1] = -lam[o + 2]
        lam[o + 2] = 0.0
        h = s.t_new - s.t_old
        c = h / alpha[o]
        if np.any(lam_d):
            mu, parts = _transposed(s, c, lam_d, vjp, jac)
            for i in range(len(theta)):
                theta[i] += c * parts[i]
            lam[:o + 1] += mu - lam_d           # y_pred's cotangent: c Jᵀ mu
            lam[1:o + 1] -= (gamma[1:o + 1] / alpha[o])[:, None] * mu
        if abs(h) != s.h_start:
            lam[:o + 1] = _RU(o, abs(h) / s.h_start) @ lam[:o + 1]
    ybar = lam[0].copy()
    if steps and np.any(lam[1]):
        out = vjp(t0, y0, lam[1])
        ybar += h0 * out[0]
        for i in range(len(theta)):
            theta[i] += h0 * out[i + 1]
    ybar = ybar + g[0] + at_t0
    if steps:
        gts[0] = -ybar @ fun(ts[0], y0)
    return ybar, gts, theta


@functools.lru_cache(maxsize=None)
def _coefficients():
    """BDF's ``gamma`` and ``alpha`` (NDF), as SciPy's solver computes them."""
    solver = si.BDF(lambda t, y: -y, 0.0, np.zeros(1), 1.0)
    return solver.gamma, solver.alpha


def _transposed(s, c, b, vjp, jac):
    """``mu = (I - c J)^-T b`` at the step's solution, and ``J_θᵀ mu``: iterated with the
    forward step's LU, else (it stalls) solved with the step's own Jacobian."""
    n = b.size
    pre = _transposed_solver(s)
    scale = np.max(np.abs(b))
    mu = pre(b)
    last = np.inf
    for _ in range(_ITERATIONS):
        out = vjp(s.t_new, s.y_new, mu)
        r = b - mu + c * out[0]
        size = np.max(np.abs(r))
        if size <= _TOL * max(np.max(np.abs(mu)), scale):
            return mu, out[1:]
        if size > 0.5 * last:
            break
        last = size
        mu = mu + pre(r)
    J = jac(s.t_new, s.y_new)
    if sp.issparse(J):
        M = (sp.eye(n, format="csc") - c * sp.csc_matrix(J)).T.tocsc()
        mu = spla.splu(M).solve(b)
    else:
        mu = lu_solve(lu_factor(np.eye(n) - c * np.asarray(J)), b, trans=1)
    return mu, vjp(s.t_new, s.y_new, mu)[1:]
