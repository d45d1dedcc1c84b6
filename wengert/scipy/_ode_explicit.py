"""The interpolating adjoint of an explicit Runge-Kutta solve (RK23, RK45, DOP853), stepped
here on plain NumPy values (no wengert here: the right-hand side's vjps are handed in).

The adjoint ``a' = -J_yᵀ a`` runs backwards on the method's own tableau with SciPy's
step-size control on ``a`` alone, landing on each output time where its cotangent jumps in.
Three things make it cheap against SciPy's solver object carrying ``[a, ∫ aᵀJ_p]`` as one
state (which cost 4-6 primal solves on a Lotka-Volterra family whose primal is ~12 steps):

* only ``a`` (n numbers) goes through the stages, by a vjp in ``y`` alone; the parameters'
  cotangent ``∫ aᵀJ_p dt`` is the same Runge-Kutta quadrature the joint state would get
  (each accepted step's stage inputs, weighted by ``h b_s``), so its rows are kept and
  pulled back together, a batch of rows per call of one vectorised vjp (:class:`Rows`),
  instead of a vjp per stage of every step;
* the forward solution is read at all of a step's stage times in one vectorised pass over
  the dense output (:func:`dense_rows`);
* no SciPy solver object: its ``fun`` wrappers, per-step checks and dense-output set-up
  were as costly as the vjps themselves for the few states here.

The step sizes are SciPy's: the same proposal, acceptance and factor as
``scipy.integrate.RK45._step_impl``, and the stop at each output time handled as
:func:`._ode_steps.keep_stride` says, so the gradient is the joint state's to rounding.
"""
from __future__ import annotations

import bisect

import numpy as np
import scipy.integrate as si

from ._ode_steps import first_step, keep_stride

__all__ = ["Tableau", "Stepper", "Rows", "dense_rows", "explicit_adjoint"]

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
EPS = np.finfo(float).eps


class Tableau:
    """An explicit SciPy method's coefficients, as the adjoint's step reads them."""

    def __init__(self, cls):
        S = self.S = cls.n_stages
        self.cls = cls
        self.A = np.zeros((S, S))
        A = np.asarray(cls.A)
        self.A[:, :A.shape[1]] = A[:S]
        self.B, self.C = np.asarray(cls.B, dtype=float), np.asarray(cls.C, dtype=float)
        self.times = np.append(self.C, 1.0)        # the stages', then f at the step's end
        self.nz = np.flatnonzero(self.B)           # stages the quadrature weighs
        self.dop = issubclass(cls, si.DOP853)
        if self.dop:
            self.E3, self.E5 = np.asarray(cls.E3), np.asarray(cls.E5)
        else:
            self.E = np.asarray(cls.E)
        self.exponent = -1.0 / (cls.error_estimator_order + 1)
        self.order = cls.error_estimator_order

    def error_norm(self, K, h, scale):
        """SciPy's error norm of the step (RMS over the state adjoint)."""
        if self.dop:
            e5 = (self.E5 @ K) / scale
            e3 = (self.E3 @ K) / scale
            n5, n3 = e5 @ e5, e3 @ e3
            if n5 == 0 and n3 == 0:
                return 0.0
            return abs(h) * n5 / np.sqrt((n5 + 0.01 * n3) * scale.size)
        e = (self.E @ K) * (h / scale)
        return np.sqrt((e @ e) / scale.size)


class Stepper:
    """One explicit Runge-Kutta integration of ``a' = -J_yᵀ a`` towards ``t_bound``, with
    the attributes :func:`keep_stride` reads (``t``, ``t_bound``, ``h_abs``,
    ``step_size``).

    ``vjp(t, y, a)`` is ``aᵀ J_y`` (``K`` holds these vjps; the minus sign is folded into the
    step), ``rows(T)`` the forward solution at several times, ``quad`` a :class:`Rows` the
    accepted steps' stage rows go to (None: no parameters)."""

    def __init__(self, tab, vjp, y_at, rows, quad, t0, a, t_bound, h_abs, rtol, atol,
                 max_step, f=None):
        self.tab, self.vjp, self.y_at, self.rows, self.quad = tab, vjp, y_at, rows, quad
        self.t, self.y = t0, a
        self.t_bound = t_bound
        self.direction = np.sign(t_bound - t0) if t_bound != t0 else 1.0
        self.rtol, self.atol, self.max_step = rtol, atol, max_step
        self.f = self.vjp(t0, y_at(t0), a) if f is None else f
        if not 0 < h_abs <= abs(t_bound - t0):
            h_abs = abs(t_bound - t0)
        self.h_abs = h_abs
        self.t_old = None
        self.status = "running"
        self._stride = None
        self.K = np.empty((tab.S + 1, a.size))
        self.Z = np.empty((tab.S, a.size))   # the stage inputs, for the quadrature

    @property
    def step_size(self):
        return None if self.t_old is None else abs(self.t - self.t_old)

    def resume(self, a, t_bound):
        """Carry on through a jump of ``a`` (a cotangent added at an output time)."""
        self.f = self.vjp(self.t, self.y_at(self.t), a)
        self.y, self.t_bound, self.status = a, t_bound, "running"

    def run(self):
        while self.status == "running":
            keep_stride(self)
            if self.t == self.t_bound:
                self.t_old, self.status = self.t, "finished"
                break
            t = self.t
            if not self._step():
                self.status = "failed"
                break
            self.t_old = t
            if self.direction * (self.t - self.t_bound) >= 0:
                self.status = "finished"

    def _attempt(self, t, h):
        """One Runge-Kutta step of the adjoint: its end, and the stage rows it read."""
        tab, K, Z, y, vjp = self.tab, self.K, self.Z, self.y, self.vjp
        T = t + tab.times * h
        Y = self.rows(T)
        hm = -h   # a' = -J_yᵀ a: K holds aᵀ J_y
        K[0] = self.f
        Z[0] = y
        A = tab.A
        for s in range(1, tab.S):
            z = y + hm * (A[s, :s] @ K[:s])
            Z[s] = z
            K[s] = vjp(T[s], Y[s], z)
        y_new = y + hm * (tab.B @ K[:tab.S])
        K[tab.S] = vjp(T[-1], Y[-1], y_new)
        return y_new, T, Y

    def _step(self):
        """SciPy's ``RungeKutta._step_impl``, on the adjoint."""
        t, y, tab = self.t, self.y, self.tab
        min_step = 10 * np.abs(np.nextafter(t, self.direction * np.inf) - t)
        h_abs = self.h_abs
        if h_abs > self.max_step:
            h_abs = self.max_step
        elif h_abs < min_step:
            h_abs = min_step
        rejected = False
        while True:
            if h_abs < min_step:
                return False
            h = h_abs * self.direction
            t_new = t + h
            if self.direction * (t_new - self.t_bound) > 0:
                t_new = self.t_bound
            h = t_new - t
            h_abs = abs(h)
            y_new, T, Y = self._attempt(t, h)
            scale = self.atol + np.maximum(np.abs(y), np.abs(y_new)) * self.rtol
            err = tab.error_norm(self.K, h, scale)
            if err < 1:
                factor = MAX_FACTOR if err == 0 else min(MAX_FACTOR, SAFETY * err ** tab.exponent)
                if rejected:
                    factor = min(1.0, factor)
                h_abs *= factor
                break
            h_abs *= max(MIN_FACTOR, SAFETY * err ** tab.exponent)
            rejected = True
        if self.quad is not None:   # gp += -h Σ b_s a_sᵀ J_p(t_s): rows for the batched vjp
            nz = tab.nz
            self.quad.add(T[nz], Y[nz], self.Z[nz] * (-h * tab.B[nz])[:, None])
        self.t, self.y, self.h_abs = t_new, y_new, h_abs
        self.f = self.K[tab.S].copy()
        return True


class Rows:
    """``fn(T, Y, W)`` summed over rows given a few at a time, called on ``size`` rows at
    once (a graph traced for that batch size); the last batch is padded with copies of its
    first row weighted zero."""

    def __init__(self, fn, size, n):
        self.fn, self.size = fn, size
        self.T = np.empty(size)
        self.Y = np.empty((size, n))
        self.W = np.zeros((size, n))
        self.k = 0
        self.total = None

    def add(self, T, Y, W):
        at = 0
        while at < T.size:
            take = min(self.size - self.k, T.size - at)
            k = self.k
            self.T[k:k + take] = T[at:at + take]
            self.Y[k:k + take] = Y[at:at + take]
            self.W[k:k + take] = W[at:at + take]
            self.k += take
            at += take
            if self.k == self.size:
                self.flush()

    def flush(self):
        k = self.k
        if not k:
            return
        if k < self.size:
            self.T[k:], self.Y[k:], self.W[k:] = self.T[0], self.Y[0], 0.0
        out = self.fn(self.T, self.Y, self.W)
        self.total = out if self.total is None else self.total + out
        self.k = 0

    def result(self, P):
        self.flush()
        return np.zeros(P) if self.total is None else self.total


def dense_rows(sol):
    """``sol`` (a SciPy OdeSolution of an explicit method) at several times at once: one
    vectorised pass over the segments' polynomials (as ``_ode_steps.fast_dense`` at one
    time, choosing segments the same way)."""
    ts = np.asarray(sol.ts_sorted, dtype=float)
    interps = list(sol.interpolants)
    if not sol.ascending:
        interps = interps[::-1]
    last = len(interps) - 1
    kinds = {type(d).__name__ for d in interps}
    if kinds == {"RkDenseOutput"}:
        y_old = np.stack([d.y_old for d in interps])
        h = np.array([d.h for d in interps])
        t_old = np.array([d.t_old for d in interps])
        Q = np.stack([d.Q for d in interps])          # (segments, n, order)
        r = np.arange(1, Q.shape[2] + 1)

        def at(T):
            i = np.clip(np.searchsorted(ts, T, "left") - 1, 0, last)
            x = ((T - t_old[i]) / h[i])[:, None] ** r
            return y_old[i] + h[i][:, None] * np.einsum("bnk,bk->bn", Q[i], x)
        return at
    if kinds == {"Dop853DenseOutput"}:
        y_old = np.stack([d.y_old for d in interps])
        h = np.array([d.h for d in interps])
        t_old = np.array([d.t_old for d in interps])
        F = np.stack([d.F[::-1] for d in interps])    # (segments, 7, n), highest first

        def at(T):
            i = np.clip(np.searchsorted(ts, T, "left") - 1, 0, last)
            x = ((T - t_old[i]) / h[i])[:, None]
            Fi = F[i]
            y = np.zeros((T.size, y_old.shape[1]))
            for j in range(Fi.shape[1]):
                y += Fi[:, j]
                y *= x if j % 2 == 0 else 1.0 - x
            return y + y_old[i]
        return at
    one = [d for d in interps]
    tl = ts.tolist()

    def at(T):   # any other interpolant: one time at a time
        out = []
        for t in T:
            d = one[min(max(bisect.bisect_left(tl, t) - 1, 0), last)]
            out.append(d(t))
        return np.array(out)
    return at


def explicit_adjoint(cls, ts, g, live, vjp, y_at, rows, quad, opts, forward_steps, warn):
    """``a`` at ``ts[0]`` (its cotangent ``g[0]`` not added): the adjoint integrated from the
    last live output time back to the first time, a cotangent ``g[i]`` added at each live
    output ``i``.  ``quad`` (a :class:`Rows`, or None) receives the parameters' quadrature."""
    tab = Tableau(cls)
    n = g.shape[1]
    rtol = max(float(opts.get("rtol", 1e-3)), 100 * EPS)
    atol = float(opts["atol"])
    max_step = float(opts.get("max_step", np.inf))
    a = np.zeros(n)
    h = stepper = None
    for j, i in enumerate(live):
        a = a + g[i]
        to = live[j + 1] if j + 1 < len(live) else 0
        t0, t1 = float(ts[i]), float(ts[to])
        if t0 == t1:
            continue
        if stepper is not None and stepper.t == t0:
            stepper.resume(a, t1)
        else:
            f0 = vjp(t0, y_at(t0), a)
            if h is not None:   # a restart: the step size the last segment reached
                first = min(h, abs(t0 - t1))
            else:
                first = first_step(lambda t, x: -vjp(t, y_at(t), x), -f0, t0, a, t1,
                                   tab.order, rtol, atol, max_step, forward_steps)
            stepper = Stepper(tab, vjp, y_at, rows, quad, t0, a, t1, first, rtol, atol,
                              max_step, f0)
        stepper.run()
        if stepper.status == "failed":
            warn(f"scipy.integrate.solve_ivp ({cls.__name__}, adjoint): step failed at "
                 f"t={stepper.t}")
        a = stepper.y.copy()
        h = stepper.step_size
        if stepper.status == "failed":
            stepper = None
    return a
