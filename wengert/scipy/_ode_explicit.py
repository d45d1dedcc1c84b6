"""The interpolating adjoint of an explicit Runge-Kutta solve (RK23, RK45, DOP853), stepped
here on plain NumPy values (no wengert here: the right-hand side's vjps are handed in).

The adjoint ``a' = -J_yᵀ a`` runs backwards on the method's own tableau.  Against SciPy's
solver object carrying ``[a, ∫ aᵀJ_p]`` as one state and stopping at every output time
(4-6 primal solves on bench_solvers' Lotka-Volterra family: 23 adjoint steps for 20 outputs
against the forward's 12, a vjp of the whole state at each stage):

* the steps do not stop at the output times: the adjoint is linear, so an output's
  cotangent inside a step is carried to the step's end by a step of its own, whose stages
  are rows of the same vectorised vjp call as the step's own (:class:`Stepper`);
* only ``a`` goes through the stages, by a vjp in ``y`` alone; the parameters' cotangent is
  the Runge-Kutta quadrature the joint state would get (the accepted steps' stage inputs
  weighted by ``h b_s``), pulled back at the end, a batch of rows per vectorised vjp
  (:class:`Rows`);
* the forward solution is read at a step's stage times in one pass over the dense output
  (:func:`dense_rows`), and no SciPy solver object wraps each call.

Step-size control is SciPy's (``RungeKutta._step_impl``: the same proposal, acceptance and
factor) on the sum of the rows, at a relative tolerance ``LOOSER`` times the forward's.
"""
from __future__ import annotations

import bisect

import numpy as np
import scipy.integrate as si

from ._ode_steps import first_step

__all__ = ["Tableau", "Stepper", "Rows", "dense_rows", "explicit_adjoint", "rows_per_step"]

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0
# The adjoint's relative tolerance against the forward solve's.  The forward's own error
# bounds the gradient's (the derivative of the exact flow is taken at a computed one): on
# bench_solvers' Lotka-Volterra family at rtol 1e-6 the discrete adjoint (exact for the
# computed solution) is 2e-6 off a gradient solved to 1e-12, the interpolating adjoint
# at the forward's rtol 2-5e-7 off, at 10x it 0.8-1.2e-6 off, in 13-14 steps, not 19-20.
LOOSER = 10.0
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

    def error_norm(self, K2, c, scale, shape):
        """SciPy's error norm of a step (RMS over the state adjoint) for the sum of the
        first ``c`` rows; ``K2`` holds the rows' stages times their steps, ``(S + 1,
        rows * n)`` (the sign of a step does not change the norm)."""
        if self.dop:
            e5 = (self.E5 @ K2).reshape(shape)[:c].sum(axis=0) / scale
            e3 = (self.E3 @ K2).reshape(shape)[:c].sum(axis=0) / scale
            n5, n3 = e5 @ e5, e3 @ e3
            if n5 == 0 and n3 == 0:
                return 0.0
            # SciPy's |h| n5 / sqrt(...), the steps inside the sums
            return n5 / np.sqrt((n5 + 0.01 * n3) * scale.size)
        e = (self.E @ K2).reshape(shape)
        e = (e[0] if c == 1 else e[:c].sum(axis=0)) / scale
        return np.sqrt((e @ e) / scale.size)


class Stepper:
    """The adjoint ``a' = -J_yᵀ a`` integrated backwards by an explicit Runge-Kutta method,
    from the last output time to ``t_end``, with each output's cotangent added at its time.

    The steps do not stop at the output times: the adjoint is linear, so an output's
    cotangent ``g_i`` at a time strictly inside a step is carried to the step's end by a
    step of its own from ``t_i`` (the same tableau on the shorter interval), whose stages
    go through the same vectorised vjp as the step's own (rows of one call), and the two
    ends are added.  A step holds at most ``R - 1`` such outputs (a longer one is cut at
    the next).  Step-size control is SciPy's (``RungeKutta._step_impl``) on the sum.

    ``vjp(T, Y, A)`` is the rows' ``aᵀ J_y`` (``R`` rows; K holds these vjps, the minus sign
    folded into the step), ``rows(T)`` the forward solution at several times, ``quad`` a
    :class:`Rows` the accepted steps' stage rows go to (None: no parameters)."""

    def __init__(self, tab, vjp, rows, quad, R, n, rtol, atol, max_step, vjp_many=None):
        self.tab, self.vjp, self.rows, self.quad, self.R = tab, vjp, rows, quad, R
        self.vjp_many = vjp_many
        self.rtol, self.atol, self.max_step = rtol, atol, max_step
        self.K = np.zeros((tab.S + 1, R, n))
        self.K2 = self.K.reshape(tab.S + 1, R * n)   # the same memory, stages by rows
        self.Z = np.zeros((tab.S, R, n))   # the stage inputs, for the quadrature
        self.V = self.Z[0]                 # each row's start: a, then the outputs' g
        self._one = np.zeros(R)            # the rows' steps when only the state's is used
        self._rows = R                     # rows the last attempt used
        # each stage's views, made once: (A's row, the stages before, its input, its slot)
        self.stages = [(tab.A[s, :s], self.K2[:s], self.Z[s], self.K[s])
                       for s in range(1, tab.S)]

    def _at_outputs(self, times, g):
        """``g_iᵀ J_y`` at each output, ``R`` at a time: the first stage of its row."""
        vjp, R = self.vjp_many if self.vjp_many is not None else (self.vjp, self.R)
        m = len(times)
        out = np.empty_like(g)
        for at in range(0, m, R):
            k = min(R, m - at)
            T, V = np.full(R, times[at]), np.zeros((R, g.shape[1]))
            T[:k], V[:k] = times[at:at + k], g[at:at + k]
            out[at:at + k] = vjp(T, self.rows(T), V)[:k]
        return out

    def f(self, t, a):
        """``aᵀ J_y`` at one time (row 0 of a call)."""
        V = np.zeros_like(self.V)
        V[0] = a
        T = np.full(self.R, t)
        return self.vjp(T, self.rows(T), V)[0]

    def run(self, times, g, t_end, h_abs, fa=None):
        """``a`` at ``t_end``: ``times`` (backwards along the solve, ``times[0]`` the start)
        and ``g`` their cotangents; outputs at ``t_end`` itself are added at the end."""
        t, k, m = times[0], 0, len(times)
        self.times, self.g = times, g
        self.g_f = self._at_outputs(times, g) if self.R > 1 else None
        self.direction = np.sign(t_end - t) if t_end != t else 1.0
        d = self.direction
        a = np.zeros(g.shape[1])
        while k < m and times[k] == t:
            a = a + g[k]
            k += 1
        self.t, self.a, self.t_bound = t, a, t_end
        self.fa = self.f(t, a) if fa is None else fa
        self.h_abs = min(h_abs, abs(t_end - t)) if h_abs > 0 else abs(t_end - t)
        while d * (t_end - self.t) > 0:
            remaining = abs(t_end - self.t)   # within 10% of the end: stretched to it
            if self.h_abs < remaining <= 1.1 * self.h_abs:
                self.h_abs = remaining
            inside = k
            while inside < m and d * (times[inside] - self.t) > 0 and inside - k < self.R - 1:
                inside += 1
            # outputs strictly inside the step, at most R - 1: a step past the next is cut
            cap = times[inside] if inside < m and inside - k == self.R - 1 else None
            if not self._step(k, inside, cap):
                return self.a, False
            while k < m and d * (self.t - times[k]) > 0:
                k += 1   # carried into the step's end
            while k < m and times[k] == self.t:
                self.a = self.a + g[k]
                k += 1
                self.fa = None
            if self.fa is None:
                self.fa = self.f(self.t, self.a)
        return self.a, True

    def _attempt(self, t, h, lo, hi):
        """One step of the adjoint from ``t`` by ``h``, the outputs ``lo:hi`` strictly
        inside carried along as rows: the rows' ends, steps, times and forward states.
        ``K[s]`` holds each row's stage ``s`` times its own ``-h`` (``a' = -J_yᵀ a``, the
        vjp being ``aᵀ J_y``), so a stage's input is one product with ``A``."""
        tab, K, V, R = self.tab, self.K, self.V, self.R
        c = 1 + hi - lo   # rows in use
        t1 = t + h
        if c == 1:   # the state's row alone: the others zero (no change, no stages)
            hc = self._one
            hc[0] = h
            T = tab.times[:, None] * hc + t                  # (S + 1, R)
        else:
            start = np.full(R, t)
            start[1:c] = self.times[lo:hi]
            hc = t1 - start   # each row's step (0 for the unused rows: no change)
            hc[0] = h
            hc[c:] = 0.0
            T = tab.times[:, None] * hc + start
        Y = self.rows(T.ravel(), (t, t1)).reshape(tab.S + 1, R, -1)
        V[0] = self.a
        if c > 1 or self._rows > 1:
            V[1:c] = self.g[lo:hi]
            V[c:] = 0.0
            K[0, 1:c] = self.g_f[lo:hi]   # the outputs' own first stages, worked out once
            K[0, c:] = 0.0
        self._rows = c
        hm = -hc[:, None]
        K[0, 0] = self.fa
        K[0] *= hm
        shape, vjp = V.shape, self.vjp
        for s, (As, Ks, Zs, Kout) in enumerate(self.stages, start=1):
            np.add(V, (As @ Ks).reshape(shape), out=Zs)
            np.multiply(hm, vjp(T[s], Y[s], Zs), out=Kout)
        ends = V + (tab.B @ self.K2[:tab.S]).reshape(shape)
        last = vjp(T[-1], Y[-1], ends)
        np.multiply(hm, last, out=K[tab.S])
        return ends, last, hc, T, Y, c

    def _step(self, lo, hi, cap):
        """SciPy's ``RungeKutta._step_impl`` on the adjoint's sum."""
        t, tab, d = self.t, self.tab, self.direction
        min_step = 10 * np.abs(np.nextafter(t, d * np.inf) - t)
        h_abs = self.h_abs
        if h_abs > self.max_step:
            h_abs = self.max_step
        elif h_abs < min_step:
            h_abs = min_step
        rejected = cut = False
        while True:
            if h_abs < min_step:
                return False
            h = h_abs * d
            t_new = t + h
            if d * (t_new - self.t_bound) > 0:
                t_new = self.t_bound
            if cap is not None and d * (t_new - cap) > 0:
                t_new, cut = cap, h_abs   # cut short at an output: its proposal kept
            h = t_new - t
            h_abs = abs(h)
            n_in = hi
            while n_in > lo and d * (self.times[n_in - 1] - t_new) >= 0:
                n_in -= 1   # outputs at or past the step's end are not inside it
            ends, last, hc, T, Y, c = self._attempt(t, h, lo, n_in)
            y_new = ends[0] if c == 1 else ends[:c].sum(axis=0)
            # the error estimate of the sum of the rows
            scale = self.atol + np.maximum(np.abs(self.a), np.abs(y_new)) * self.rtol
            err = tab.error_norm(self.K2, c, scale, self.V.shape)
            if err < 1:
                factor = MAX_FACTOR if err == 0 else min(MAX_FACTOR, SAFETY * err ** tab.exponent)
                if rejected:
                    factor = min(1.0, factor)
                h_abs *= factor
                if cut and not rejected:
                    h_abs = max(h_abs, cut)
                break
            h_abs *= max(MIN_FACTOR, SAFETY * err ** tab.exponent)
            rejected = True
        if self.quad is not None:   # gp += -h Σ b_s a_sᵀ J_p(t_s): rows for the batched vjp
            nz = tab.nz
            w = (tab.B[nz, None] * -hc[:c])[:, :, None]           # (|nz|, c, 1)
            n = Y.shape[2]
            self.quad.add(T[nz, :c].ravel(), Y[nz, :c].reshape(-1, n),
                          (self.Z[nz, :c] * w).reshape(-1, n))
        self.t, self.a, self.h_abs = t_new, y_new, h_abs
        self.fa = last[0] if c == 1 else last[:c].sum(axis=0)
        return True


class Rows:
    """``fn(T, Y, W)`` summed over rows given a few at a time: kept, then called on ``size``
    rows at once (a graph traced for that batch size); the last batch is padded with copies
    of its first row weighted zero."""

    def __init__(self, fn, size, n):
        self.fn, self.size, self.n = fn, size, n
        self.parts = []

    def add(self, T, Y, W):
        self.parts.append((T, Y, W))

    def result(self, P):
        if not self.parts:
            return np.zeros(P)
        T, Y, W = (np.concatenate(x) for x in zip(*self.parts))
        self.parts = []
        total, size = np.zeros(P), self.size
        for at in range(0, T.size, size):
            k = min(size, T.size - at)
            if k < size:
                Tc, Yc, Wc = np.full(size, T[at]), np.repeat(Y[at:at + 1], size, axis=0), \
                    np.zeros((size, self.n))
                Tc[:k], Yc[:k], Wc[:k] = T[at:], Y[at:], W[at:]
            else:
                Tc, Yc, Wc = T[at:at + k], Y[at:at + k], W[at:at + k]
            total += self.fn(Tc, Yc, Wc)
        return total


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

        C = np.concatenate([y_old[:, None, :], h[:, None, None] * Q.transpose(0, 2, 1)],
                           axis=1)                    # (segments, 1 + order, n): y in powers
        r0 = np.arange(Q.shape[2] + 1)

        tl = ts.tolist()

        def at(T, span=None):
            if span is not None:   # every time of T within span: its ends bound the segments
                lo = min(max(bisect.bisect_left(tl, min(span)) - 1, 0), last)
                hi = min(max(bisect.bisect_left(tl, max(span)) - 1, 0), last)
                if lo == hi:   # one segment (a step inside a forward step): one product
                    return (((T - t_old[lo]) / h[lo])[:, None] ** r0) @ C[lo]
                if hi == lo + 1:   # two: both products, each time its own
                    y_lo = (((T - t_old[lo]) / h[lo])[:, None] ** r0) @ C[lo]
                    y_hi = (((T - t_old[hi]) / h[hi])[:, None] ** r0) @ C[hi]
                    return np.where((T > tl[hi])[:, None], y_hi, y_lo)
            i = np.minimum(np.maximum(np.searchsorted(ts, T, "left") - 1, 0), last)
            X = ((T - t_old[i]) / h[i])[:, None] ** r0
            return (X[:, None, :] @ C[i])[:, 0]
        return at
    if kinds == {"Dop853DenseOutput"}:
        y_old = np.stack([d.y_old for d in interps])
        h = np.array([d.h for d in interps])
        t_old = np.array([d.t_old for d in interps])
        F = np.stack([d.F[::-1] for d in interps])    # (segments, 7, n), highest first

        def at(T, span=None):
            i = np.minimum(np.maximum(np.searchsorted(ts, T, "left") - 1, 0), last)
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

    def at(T, span=None):   # any other interpolant: one time at a time
        out = []
        for t in T:
            d = one[min(max(bisect.bisect_left(tl, t) - 1, 0), last)]
            out.append(d(t))
        return np.array(out)
    return at


def explicit_adjoint(cls, ts, g, live, vjp, R, rows, quad, opts, forward_steps, warn,
                     vjp_many=None):
    """``a`` at ``ts[0]`` (its cotangent ``g[0]`` not added): the adjoint integrated from the
    last live output time back to the first time, a cotangent ``g[i]`` added at each live
    output ``i`` (``live``: last first).  ``vjp(T, Y, A)``: ``aᵀ J_y`` on ``R`` rows
    (``vjp_many``: another such function and its rows, for the outputs' own first stages);
    ``quad`` (a :class:`Rows`, or None) receives the parameters' quadrature."""
    n = g.shape[1]
    if not live:
        return np.zeros(n)
    tab = Tableau(cls)
    rtol = max(float(opts.get("rtol", 1e-3)) * LOOSER, 100 * EPS)
    atol = float(opts["atol"])
    max_step = float(opts.get("max_step", np.inf))
    times, G = np.asarray(ts, dtype=float)[live], g[live]
    t0, t_end = float(times[0]), float(ts[0])
    if t0 == t_end:
        return G.sum(axis=0)
    stepper = Stepper(tab, vjp, rows, quad, R, n, rtol, atol, max_step, vjp_many)
    a0 = G[times == t0].sum(axis=0)
    f0 = stepper.f(t0, a0)
    h = first_step(lambda t, x: -stepper.f(t, x), -f0, t0, a0, t_end, tab.order, rtol, atol,
                   max_step, forward_steps, guess=False)
    a, ok = stepper.run(times, G, t_end, h, f0)
    if not ok:
        warn(f"scipy.integrate.solve_ivp ({cls.__name__}, adjoint): step failed at "
             f"t={stepper.t}")
        d = stepper.direction
        a = a + G[d * (stepper.t - times) < 0].sum(axis=0)   # what it did not reach
    return a


def rows_per_step(forward_steps, times, most=4):
    """How many rows the adjoint's vjp takes at once: one, and one per output time strictly
    inside a forward step, at most ``most`` (the adjoint's steps are about the forward's)."""
    fs = np.asarray(forward_steps, dtype=float)
    if fs.size < 2:
        return 1
    if fs[0] > fs[-1]:
        fs = fs[::-1]
    tl = np.asarray(times, dtype=float)
    i = np.searchsorted(fs, tl)
    inner = i[fs[np.minimum(i, fs.size - 1)] != tl]
    if not inner.size:
        return 1
    return int(min(most, 1 + np.bincount(inner).max()))
