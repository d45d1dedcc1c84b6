"""The discrete adjoint of SciPy's explicit Runge-Kutta solve (``adjoint="discrete"``), on
plain NumPy values (no wengert here; the right-hand side's vjp is handed in).

The primal is SciPy's own: ``solve_ivp`` runs a subclass of its solver that, after each
accepted step, keeps ``(t_old, h, y_old, y_new, K)`` (the stages; O(steps x stages x n)
memory).  The outputs are SciPy's dense-output polynomials in ``y_old``, ``K`` (and, for
DOP853, ``y_new`` and three more stages), so the pullback is exact for the numbers SciPy
returned: the output cotangents go into the stages of their step, then one sweep backwards
over the steps pulls each stage back through one vjp of the right-hand side.  The step
sizes are constants (the standard discrete adjoint: diffrax's RecursiveCheckpointAdjoint,
SciMLSensitivity's discrete adjoints): SciPy's error control is not differentiated.
"""
from __future__ import annotations

import numpy as np
import scipy.integrate as si

from ._ode_bdf import recording_bdf

__all__ = ["recording", "pull_steps"]


def recording(cls, steps):
    """``cls`` (RK23, RK45, DOP853 or BDF) keeping each accepted step in ``steps``."""
    if issubclass(cls, si.BDF):
        return recording_bdf(steps)
    n_keep = cls.n_stages + 1

    def _step_impl(self):
        t = self.t
        ok, msg = cls._step_impl(self)
        if ok:
            steps.append((t, self.h_previous, self.y_old, self.y,
                          self.K[:n_keep].copy()))
        return ok, msg
    return type(cls.__name__, (cls,), {"_step_impl": _step_impl})


# -- the dense output's weights -------------------------------------------------------------------
def _rk_weights(cls, x):
    """``y(x) = y_old + h Σ_j w_j K_j`` (RK23, RK45): ``(w, dw/dx)``, rows per ``x``."""
    P = np.asarray(cls.P)
    r = np.arange(1, P.shape[1] + 1)
    pw = x[:, None] ** r
    dpw = r * x[:, None] ** (r - 1)
    return pw @ P.T, dpw @ P.T, np.zeros(x.size), np.zeros(x.size)


def _dop853_weights(cls, x):
    """DOP853's ``y(x) = y_old + α Δ + h Σ_j w_j K_j`` (``Δ = y_new - y_old``, 16 stages):
    SciPy's nested product in ``x`` and ``1 - x``, read off as weights of its rows ``F``."""
    D = np.asarray(cls.D)
    L = D.shape[0] + 3
    c = np.zeros((x.size, L))
    dc = np.zeros((x.size, L))
    for i, k in enumerate(range(L - 1, -1, -1)):
        c[:, k] += 1.0
        phi, dphi = (x, 1.0) if i % 2 == 0 else (1.0 - x, -1.0)
        dc = dc * phi[:, None] + c * dphi
        c = c * phi[:, None]
    # F0 = Δ, F1 = h K0 - Δ, F2 = 2Δ - h (K12 + K0), F[3:] = h D K
    def split(c):
        alpha = c[:, 0] - c[:, 1] + 2.0 * c[:, 2]
        w = c[:, 3:] @ D
        w[:, 0] += c[:, 1] - c[:, 2]
        w[:, cls.n_stages] -= c[:, 2]
        return alpha, w
    alpha, w = split(c)
    dalpha, dw = split(dc)
    return w, dw, alpha, dalpha


def _weights(cls, x):
    return _dop853_weights(cls, x) if issubclass(cls, si.DOP853) else _rk_weights(cls, x)


def _locate(steps, ts):
    """For each output time after the first: its step (``t_old < t <= t_new`` along the
    solve), or -1 where SciPy did not reach it."""
    ends = np.array([s[0] + s[1] for s in steps])
    sign = 1.0 if not steps or steps[0][1] >= 0 else -1.0
    k = np.searchsorted(sign * ends, sign * np.asarray(ts, dtype=float), side="left")
    k[k >= len(steps)] = -1
    return k


# -- the pullback ---------------------------------------------------------------------------------
def pull_steps(cls, steps, ts, g, vjp, fun, shapes):
    """``(ȳ0, ḡ_ts, [θ̄...])``: the cotangents of SciPy's outputs ``ys[i]`` at ``ts[i]`` (row 0
    is ``y0`` itself) pulled back through the stored steps.

    ``vjp(t, y, a)`` is ``(aᵀ J_y, aᵀ J_θ1, ...)`` for parameters of ``shapes``, ``fun(t, y)``
    the right-hand side.  An output time's own cotangent is the interpolant's slope (exact
    for the discrete solution, steps fixed); the initial time's is ``-ȳ0 · f(t0, y0)``, the
    continuous formula (moving ``t0`` moves every step)."""
    ts = np.asarray(ts, dtype=float)
    g = np.asarray(g, dtype=float)
    n = g.shape[1]
    gts = np.zeros(ts.size)
    theta = [np.zeros(sh) for sh in shapes]
    kp = range(len(theta))
    rows = np.flatnonzero(np.any(g[1:] != 0.0, axis=1)) + 1
    first = rows[ts[rows] == ts[0]]   # outputs at the initial time: y0 itself, their slope f
    at_t0 = g[first].sum(axis=0)
    if first.size and steps:
        gts[first] = g[first] @ fun(ts[0], steps[0][2])
    rows = rows[ts[rows] != ts[0]]
    where = _locate(steps, ts[rows]) if steps else np.full(rows.size, -1)
    rows, where = rows[where >= 0], where[where >= 0]
    S = cls.n_stages
    A, B, C = np.asarray(cls.A)[:S, :S], np.asarray(cls.B)[:S], np.asarray(cls.C)[:S]
    m = A.shape[1]   # RK45's A has no column for its last stage
    dop = issubclass(cls, si.DOP853)
    if dop:
        A_x, C_x = np.asarray(cls.A_EXTRA), np.asarray(cls.C_EXTRA)
    at = {}
    if rows.size:
        t_old = np.array([steps[k][0] for k in where])
        h = np.array([steps[k][1] for k in where])
        w, dw, alpha, dalpha = _weights(cls, (ts[rows] - t_old) / h)
        for j, (i, k) in enumerate(zip(rows, where)):
            at.setdefault(int(k), []).append((int(i), j))

    def pull(t, z, ct):
        out = vjp(t, z, ct)
        for i in kp:
            theta[i] += out[i + 1]
        return out[0]

    a = np.zeros(n)   # ȳ at the end of the step being pulled back
    for k in range(len(steps) - 1, -1, -1):
        t, h, y0, y1, K = steps[k]
        outs = at.get(k)
        if outs is not None:
            idx = [j for _, j in outs]
            G = g[[i for i, _ in outs]]
            if dop:
                K = np.concatenate([K, _extra_stages(fun, t, h, y0, K, A_x, C_x)])
            Kb = h * (w[idx].T @ G)                     # the stages' cotangents
            al = alpha[idx]
            ybar = G.sum(axis=0) - al @ G
            a = a + al @ G
            for i, j in outs:    # the output times' own cotangents: the interpolant's slope
                gts[i] = g[i] @ (dw[j] @ K + dalpha[j] * (y1 - y0) / h)
            if dop:
                for s in range(K.shape[0] - 1, S, -1):   # the dense output's own stages
                    r = s - S - 1
                    yb = pull(t + C_x[r] * h, y0 + h * (A_x[r, :s] @ K[:s]), Kb[s])
                    ybar += yb
                    Kb[:s] += (h * A_x[r, :s])[:, None] * yb
            if np.any(Kb[S]):                           # K_S = f(t + h, y_new)
                a = a + pull(t + h, y1, Kb[S])
        else:
            Kb = np.zeros((S, n))
            ybar = np.zeros(n)
        # y_new = y_old + h Σ b_j K_j, then each stage K_s = f(t + c_s h, y_old + h Σ a_sj K_j)
        ybar += a
        Kb[:S] += (h * B)[:, None] * a
        hA = h * A
        Z = y0 + hA @ K[:m]                             # every stage's input
        Tn = t + h * C
        for s in range(S - 1, 0, -1):
            yb = pull(Tn[s], Z[s], Kb[s])
            ybar += yb
            Kb[:s] += hA[s, :s, None] * yb
        ybar += pull(t, y0, Kb[0])
        a = ybar
    if steps:
        gts[0] = -a @ fun(ts[0], steps[0][2])
    return a + g[0] + at_t0, gts, theta


def _extra_stages(fun, t, h, y0, K, A_x, C_x):
    """DOP853's three more stages for its dense output (SciPy computes them the same way)."""
    Kx = np.empty((len(C_x), K.shape[1]))
    full = K
    for r, (a, c) in enumerate(zip(A_x, C_x)):
        s = full.shape[0]
        Kx[r] = fun(t + c * h, y0 + h * (a[:s] @ full))
        full = np.concatenate([K, Kx[:r + 1]])
    return Kx
