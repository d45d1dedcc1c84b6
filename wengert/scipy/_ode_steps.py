"""The interpolating adjoint's stepping, on SciPy's own solvers and plain NumPy values (no
wengert here): the first step (SciPy's, chosen on the state adjoint, or the forward's), a
stiff adjoint's Radau solver carried on through the cotangent's jump at an output time and
landing on it, the parameters' quadrature on its own stages (cut at the forward solve's fast
steps), and dense output read fast.  Used by :mod:`._ode`'s ``_pull_interpolate`` (an
explicit method's adjoint steps in :mod:`._ode_explicit`).
"""
from __future__ import annotations

import bisect

import numpy as np
import scipy.integrate as si
import scipy.sparse as sp
from scipy.integrate._ivp.common import select_initial_step
from scipy.linalg import get_lapack_funcs

__all__ = ["first_step", "resume", "land", "cuts", "stage_quadrature", "quadrature",
           "fast_dense", "recent", "direct_lu", "forward_grid"]


def first_step(fun, f0, t0, a, t_bound, order, rtol, atol, max_step=np.inf,
               forward_steps=None, guess=True):
    """The adjoint's first step: SciPy's initial step chosen on the state adjoint ``a``
    alone (``fun(t, a)``, ``f0 = fun(t0, a)``), or, where larger, the forward solve's step at
    ``t0``: the adjoint shares the forward's time scales, and SciPy's guess is a cautious
    one (it cost two more steps).  ``guess=False``: the forward's step alone where there is
    one (SciPy's guess costs two evaluations and a rejected step costs one step)."""
    atol = np.asarray(atol, dtype=float)
    direction = np.sign(t_bound - t0) if t_bound != t0 else 1.0
    many = forward_steps is not None and len(forward_steps) > 1
    h = 0.0 if many and not guess else \
        select_initial_step(fun, t0, a, t_bound, max_step, f0, direction, order, rtol, atol)
    if many:
        fs = np.sort(np.asarray(forward_steps, dtype=float))
        k = int(np.clip(np.searchsorted(fs, t0) - (direction < 0), 0, fs.size - 2))
        h = max(h, min(fs[k + 1] - fs[k], abs(t_bound - t0), max_step))
    return h


STRETCH = 1.25   # the adjoint's proposal stretched to an output time at most this far


def land(solver, stretch=STRETCH):
    """Before a Radau step of the adjoint, which stops at every output time: a proposal a
    little short of the stop (within ``stretch``) is stretched to it, and a shorter one is
    evened out over the steps the stop needs anyway, rather than stepping the proposal and
    then a sliver of a step on a Newton matrix made for the longer one (slow to converge);
    each new step size factorised once, for the steps it is taken on.  With output times
    evenly spaced, the next segments then take the same steps on the same factorisation."""
    remaining = abs(solver.t_bound - solver.t)
    h = min(solver.h_abs, solver.max_step)
    if h >= remaining:
        return
    k = 1 if remaining <= stretch * h else int(np.ceil(remaining / h))
    if remaining / k != h:
        solver.h_abs = remaining / k
        solver.LU_real = solver.LU_complex = None


def resume(solver, z, t_bound):
    """Carry a SciPy solver on through a jump of the adjoint's state to ``z`` (a cotangent
    added at an output time), as a restart would but keeping what stays valid: the step
    size reached, and, the adjoint being linear in its state, Radau's Jacobian and its
    factorisations (its extrapolated Newton guess is dropped).  The adjoint runs on an
    explicit method or Radau; anything else (False) is restarted."""
    kinds = {si.Radau: "Radau", si.RK45: "RK", si.RK23: "RK", si.DOP853: "RK"}
    name = next((v for k, v in kinds.items() if isinstance(solver, k)), None)
    if name is None:
        return False
    solver.f = solver.fun(solver.t, z)
    solver.y = z
    if name == "Radau":
        solver.sol = solver.Z = None
        solver.h_abs_old = solver.error_norm_old = None
    solver.t_bound, solver.status = t_bound, "running"
    return True


def forward_grid(forward_steps):
    """The forward solve's step times (sorted) and, at each, the shorter of its two
    neighbouring steps: what :func:`cuts` reads, worked out once per pullback."""
    fs = np.unique(np.asarray(forward_steps, dtype=float))
    gaps = np.diff(fs)
    local = np.minimum(np.concatenate([[np.inf], gaps]), np.concatenate([gaps, [np.inf]]))
    return fs, local


def cuts(t0, t1, forward, finer=32.0):
    """Where to cut the adjoint step from ``t0`` to ``t1`` (in its direction) for the
    parameters' quadrature: at forward step times, so that no piece is more than ``finer``
    times longer than the forward steps on either side of a forward step time inside it
    (``forward``: :func:`forward_grid`); empty where the two solves' steps are alike.  The
    integrand reads ``y`` too, and a stiff adjoint's long step can span the forward's fast
    transient (a rule on the adjoint's step alone was 2e-5 off there).  Each piece is made as
    long as that allows (one Gauss rule over many of BDF's short starting steps), not one
    piece per forward step."""
    fs, local = forward
    lo, hi = (t0, t1) if t0 < t1 else (t1, t0)
    i, j = np.searchsorted(fs, lo, "right"), np.searchsorted(fs, hi, "left")
    if i >= j or local[i:j].min() * finer >= hi - lo:
        return []
    ends = list(zip(fs[i:j].tolist(), local[i:j].tolist())) + [(hi, np.inf)]
    out, start, short, k, last = [], lo, np.inf, 0, -1
    while k < len(ends):   # the longest valid piece from ``start``, then the next from its end
        end, step = ends[k]
        if short * finer >= end - start:   # ``short``: the finest forward step inside
            last, short, k = k, min(short, step), k + 1
        else:
            start, short, k = ends[last][0], np.inf, last + 1
            out.append(start)
    return out if t0 < t1 else out[::-1]


# Radau IIA's nodes and weights (its last stage is the step's end): the stages a step solved
# for are an order-5 quadrature rule on that step
_RADAU_C = np.array([(4 - 6 ** 0.5) / 10, (4 + 6 ** 0.5) / 10, 1.0])
_RADAU_B = np.array([(16 - 6 ** 0.5) / 36, (16 + 6 ** 0.5) / 36, 1.0 / 9.0])


def stage_quadrature(pq, y_at, solver, forward):
    """``∫ aᵀ J_p dt`` over the step a Radau ``solver`` just took (run either way in time),
    from the stages its Newton iterations converged to: the parameters' cotangent carried as
    more states of the adjoint would get exactly these numbers (Radau IIA is stiffly
    accurate), without making the Newton iterations and the LU factorisations larger.  The
    forward solution at the stage times is what the adjoint's right-hand side read (``y_at``
    remembers it).  Where the step spans the forward's fast transient (:func:`cuts`),
    Gauss-Legendre on the pieces, reading ``a`` off the step's dense output."""
    t0, t1 = solver.t_old, solver.t
    if t0 == t1:
        return 0.0
    extra = cuts(t0, t1, forward)
    if extra:
        a_at = fast_dense(si.OdeSolution([t0, t1], [solver.dense_output()]))
        return quadrature(pq, y_at, a_at, [t0, *extra, t1], 0)
    h, y, Z = t1 - t0, solver.y_old, solver.Z
    total = 0.0
    for c, b, z in zip(_RADAU_C, _RADAU_B, Z):
        t = t0 + c * h
        total = total + b * pq(t, y_at(t), y + z)
    return -h * total


_GAUSS_X = np.array([-np.sqrt(0.6), 0.0, np.sqrt(0.6)])
_GAUSS_W = np.array([5.0, 8.0, 5.0]) / 9.0


def quadrature(pb, y_at, a_at, steps, n):
    """``∫ aᵀ J_p dt`` over the intervals of ``steps`` (either way in time; positive for
    ``steps`` running backwards), three Gauss-Legendre points each."""
    total = 0.0
    for t0, t1 in zip(steps[:-1], steps[1:]):
        half, mid = (t0 - t1) / 2.0, (t0 + t1) / 2.0
        for x, w in zip(_GAUSS_X, _GAUSS_W):
            t = mid + half * x
            total = total + (w * half) * pb(t, y_at(t), a_at(t))[n:]
    return total


def fast_dense(sol):
    """``sol(t)`` for one time, without SciPy's general path (the adjoint asks for it at
    every stage of every step): Runge-Kutta interpolants evaluated directly."""
    ts, interps = list(sol.ts_sorted), sol.interpolants
    last = sol.n_segments - 1
    if not sol.ascending:
        interps = interps[::-1]
    # per segment, what its polynomial needs (read once, not at every stage of every step)
    segs = [_segment(d) for d in interps]

    def at(t):
        d = segs[min(max(bisect.bisect_left(ts, t) - 1, 0), last)]
        if type(d) is not tuple:
            return d(t)
        kind = d[0]
        if kind == "rk":
            _, y_old, h, Q, t_old, r = d
            return y_old + h * (Q @ (((t - t_old) / h) ** r))
        if kind == "bdf":   # SciPy's BdfDenseOutput, one time
            _, t_shift, denom, DT, D0 = d
            return DT @ np.cumprod((t - t_shift) / denom) + D0
        _, y_old, h, Q, t_old, k = d   # RadauDenseOutput, one time
        return Q @ np.cumprod(np.full(k, (t - t_old) / h)) + y_old
    return at


def _segment(d):
    """What one segment's polynomial needs, read once (not at every call)."""
    kind = type(d).__name__
    if kind == "RkDenseOutput":
        return ("rk", d.y_old, d.h, d.Q, d.t_old, np.arange(1, d.Q.shape[1] + 1))
    if kind == "BdfDenseOutput":
        return ("bdf", d.t_shift, d.denom, d.D[1:].T, d.D[0])
    if kind == "RadauDenseOutput":
        return ("radau", d.y_old, d.h, d.Q, d.t_old, d.order + 1)
    return d


def direct_lu(solver):
    """A dense Radau's factorisations and solves through LAPACK's getrf/getrs directly:
    SciPy's lu_factor and lu_solve check, convert and broadcast at every call, several times
    the work of the solve itself for the few states of a small system (the adjoint solves
    about ten times a step).  A sparse one's ``c I - J`` (two at each step) is made on
    ``J``'s own structure, not by SciPy's general sparse subtraction."""
    if not isinstance(solver, si.Radau):
        return solver
    if sp.issparse(solver.J):
        solver.I = _Identity(solver.n)
        return solver

    def lu(A):
        solver.nlu += 1
        if not np.isfinite(A).all():
            raise ValueError("array must not contain infs or NaNs")
        getrf = _lapack("getrf", A.dtype)
        lu_, piv, info = getrf(A, overwrite_a=True)
        if info < 0:  # pragma: no cover - an argument error, as lu_factor raises
            raise ValueError(f"illegal value in argument {-info} of getrf")
        return lu_, piv

    def solve_lu(LU, b):
        lu_, piv = LU
        x, info = _lapack("getrs", lu_.dtype)(lu_, piv, np.asarray(b, dtype=lu_.dtype),
                                             overwrite_b=True)
        return x
    solver.lu, solver.solve_lu = lu, solve_lu
    return solver


_LAPACK = {}


def _lapack(name, dtype):
    f = _LAPACK.get((name, dtype.char))
    if f is None:
        f = _LAPACK[(name, dtype.char)] = get_lapack_funcs(name, dtype=dtype)
    return f


def recent(fn, size=8):
    """``fn(t)`` remembered for the last ``size`` times: a stiff step asks for the same
    stage times at each Newton iteration.  One per pullback (never shared by threads)."""
    memo = {}

    def at(t):
        hit = memo.get(t)
        if hit is None:
            if len(memo) >= size:
                memo.pop(next(iter(memo)))
            hit = memo[t] = fn(t)
        return hit
    return at


class _Identity:
    """Radau's ``I`` for a sparse Jacobian: ``c * I - J`` with ``J``'s structure when that
    holds the diagonal (the right-hand side's own Jacobian of a diffusion, a reaction...),
    negating ``J``'s data and adding ``c`` on the diagonal; else SciPy's subtraction."""
    __array_ufunc__ = None   # NumPy scalars defer to __rmul__

    def __init__(self, n):
        self.n = n
        self._diag = (None, None)   # (J, positions of its diagonal in J.data)

    def __rmul__(self, c):
        return _Scaled(c, self)

    def diagonal(self, J):
        held, pos = self._diag
        if held is J:
            return pos
        pos = None
        if J.format == "csc" and J.has_canonical_format:
            cols = np.repeat(np.arange(self.n), np.diff(J.indptr))
            at = np.flatnonzero(J.indices == cols)
            if at.size == self.n:
                pos = at
        self._diag = (J, pos)
        return pos


class _Scaled:
    __array_ufunc__ = None

    def __init__(self, c, identity):
        self.c, self.identity = c, identity

    def __sub__(self, J):
        pos = self.identity.diagonal(J)
        if pos is None:
            return self.c * sp.eye(self.identity.n, format="csc") - J
        data = -J.data.astype(np.result_type(J.data, self.c))
        data[pos] += self.c
        return sp.csc_matrix((data, J.indices, J.indptr), shape=J.shape)