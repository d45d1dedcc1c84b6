"""The differentiable ODE solve under ``wengert.scipy.integrate``: one primitive, ``ode_solve``.

``ode_solve(y0, ts, *params, spec)`` is SciPy's solution of ``y' = F(t, y, *params)`` at the
times ``ts`` (``ts[0]`` is the initial time; row 0 of the result is ``y0``).  ``F`` is a
:class:`Rhs`: the user's right-hand side traced once into a graph whose inputs are ``t``,
``y``, the parameters and every traced value the function closes over (captured while
tracing, as JAX's closure conversion), so the primitive sees them all as arguments and every
engine hands it their tangents and cotangents.

Its rules are ODE solves again, through this same primitive, so they are differentiable in
turn (Hessians, HVPs, forward over reverse):

* the pushforward solves the forward-sensitivity system ``s' = J_y s + J_p dp`` beside ``y``;
* the pullback integrates the adjoint ``a' = -J_yᵀ a``, ``g' = -J_pᵀ a`` backwards from each
  output time to the one before ("backsolve": ``y`` is integrated backwards with it, restarted
  from the stored output at each output time); "interpolate" reads ``y`` off SciPy's dense
  forward solution instead (on plain values; a nested derivative takes the backsolve
  formulation, whose every value is traced); "forward" pulls back through the full forward
  sensitivities (few parameters); "discrete" (explicit Runge-Kutta methods and BDF) pulls back
  through SciPy's own accepted steps, kept by the primal solve (:mod:`._ode_discrete`,
  :mod:`._ode_bdf`).

The vector-Jacobian products, Jacobian-vector products and stiff methods' Jacobians all come
from wengert, traced once per solve into graphs whose generated code SciPy calls.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.integrate as si
import scipy.sparse as sp

from .. import numpy as wnp
from ..batching import BatchedControlFlowError, BatchTracer, per_example_call, vmap
from ..core import Primitive, SolverWarning, Tracer
from ..graph import compile as compile_
from ..graph.trace import GraphTracer
from ..sparse import jacobian_sparsity, sparse_jacobian
from ..transforms import jacobian, jvp, vjp
from ._ode_bdf import pull_bdf
from ._ode_discrete import pull_steps, recording
from ._ode_rhs import Rhs, batched, example_of, trace_rhs
from ._ode_explicit import Rows, dense_rows, explicit_adjoint, rows_per_step
from ._ode_steps import (direct_lu, fast_dense, forward_grid, land, recent, resume,
                         stage_quadrature)

__all__ = ["Rhs", "Spec", "ode_solve", "trace_rhs", "example_of", "batched", "EXPLICIT",
           "IMPLICIT", "METHODS"]

EXPLICIT = ("RK45", "RK23", "DOP853")
IMPLICIT = ("Radau", "BDF", "LSODA")
METHODS = EXPLICIT + IMPLICIT
ADJOINTS = ("auto", "discrete", "checkpoint", "backsolve", "interpolate", "forward")


# -- what one solve is ---------------------------------------------------------------------------
class Spec:
    """The static part of a solve: the right-hand side, the SciPy method and its options,
    the sensitivity method for reverse mode, and the last plain solve (reused)."""

    def __init__(self, rhs, method, options, adjoint="backsolve", sparse=None, user_jac=None):
        self.rhs, self.method, self.options = rhs, method, dict(options)
        self.adjoint = adjoint
        self.user_jac = user_jac  # params -> the user's jac(t, y), for the primal solve only
        self.auto = False         # the sensitivity method was picked by adjoint="auto"
        self.sparse = sparse   # None: detect for stiff methods; False: dense Jacobians
        self._cache = None     # (inputs, ys, dense solution)
        self._steps = None     # ((y0, span, params), SciPy's accepted steps): "discrete"
        self.t_bound = None    # where SciPy's solve ends, past the last output ("discrete")
        self._jac = None       # the traced Jacobian of the right-hand side in y (stiff)

    def __repr__(self):
        return f"<ode solve by {self.method}, adjoint {self.adjoint}>"

    def derived(self, rhs):
        """The same solver for a sensitivity or adjoint system (differentiated by backsolve:
        every value of its pullback is traced)."""
        return Spec(rhs, self.method, self.options, "backsolve", self.sparse)

    @property
    def stiff(self):
        return self.method in IMPLICIT or self.method == "odeint"

    # -- plain SciPy calls -------------------------------------------------------------------
    def solve(self, y0, ts, params, dense=False):
        """SciPy's solution at ``ts`` on plain values (cached for the same inputs)."""
        return self._entry(y0, ts, params, dense)[1]

    def _entry(self, y0, ts, params, dense):
        """``(inputs, ys, dense solution)`` for these inputs. Read from what this call solved
        or found, never from ``self._cache`` again: a compiled program shares its Spec across
        threads, and another call may replace the cache in between."""
        y0 = np.asarray(y0, dtype=float)
        ts = np.asarray(ts, dtype=float)
        params = [np.asarray(p) for p in params]
        c = self._cache
        if c is not None and _same(c[0], (y0, ts, params)) and (c[2] is not None or not dense):
            return c
        ys, sol = self._scipy(y0, ts, params, dense)
        c = ((y0.copy(), ts.copy(), [p.copy() for p in params]), ys, sol)
        self._cache = c
        return c

    def span(self, ts):
        """The discrete adjoint's solve: from ``ts[0]`` to the end of ``t_span`` (the last
        step ends there, not at the last output time)."""
        end, tb = ts[-1], self.t_bound
        if tb is not None and (tb - end) * (end - ts[0]) > 0:
            end = tb
        return np.array([ts[0], end], dtype=float)

    def steps(self, y0, ts, params):
        """SciPy's accepted steps ``(t_old, h, y_old, y_new, K)`` (solved again on a miss)."""
        y0, ts = np.asarray(y0, dtype=float), np.asarray(ts, dtype=float)
        if np.all(ts == ts[0]):
            return []   # every output is y0: no step
        params = [np.asarray(p) for p in params]
        c = self._steps
        if c is None or not _same(c[0], (y0, self.span(ts), params)):
            kept = []   # this solve's steps, not whatever another thread's left in _steps
            self._scipy(y0, ts, params, False, kept)
            c = kept[0]
        return c[1]

    def dense(self, y0, ts, params):
        return self._entry(y0, ts, params, True)[2]

    def _fun(self, params):
        F = self.rhs.plain
        return lambda t, y: F(t, y, *params)

    def jac(self, params, y_example):
        """``jac(t, y)`` for a stiff method, from wengert: dense, or sparse (a compressed
        pass per colour, ``wg.sparse_jacobian``) where the right-hand side is sparse."""
        if not self.stiff:
            return None
        if self._jac is None:
            key = ("jac", self.sparse, y_example.size, _shapes(params))
            self._jac = self.rhs.derived(key, lambda: self._make_jac(params, y_example))
        kind, J = self._jac
        if kind == "sparse":
            return lambda t, y: J(t, y, *params)
        return lambda t, y: J.plain(t, y, *params)

    def _make_jac(self, params, y_example):
        rhs = self.rhs.bare()
        n = y_example.size
        pattern = None
        if self.sparse is not False and n >= 32:
            t0 = float(rhs.graph.example_args[0])
            pattern = jacobian_sparsity(lambda yy: rhs(t0, yy, *params), y_example)
            if self.sparse is None and pattern.nnz > 0.25 * n * n:
                pattern = None
        if pattern is not None:
            # compiled: its compressed pass as generated code, not an eager batched pass
            # (a stiff adjoint asks for the Jacobian at every step it recomputes it)
            sj = compile_(sparse_jacobian(lambda yy, t, *ps: rhs(t, yy, *ps), sparsity=pattern))
            return ("sparse", lambda t, y, *ps: sj(y, t, *ps))
        return ("dense", trace_rhs(
            lambda t, y, *ps: jacobian(lambda yy: rhs(t, yy, *ps), mode="forward")(y),
            [0.0, y_example, *params], "jac", flat=False))

    def primal_jac(self, params, y_example):
        """The Jacobian SciPy's primal solve is given: the user's where given (it is
        plain-valued there), else wengert's.  Never used for a derivative."""
        if self.user_jac is not None and self.stiff:
            return self.user_jac(params)
        return self.jac(params, y_example)

    def _scipy(self, y0, ts, params, dense, kept=None):
        n, m = y0.size, ts.size
        if m == 1 or ts[0] == ts[-1]:
            return np.tile(y0, (m, 1)), None
        keep = np.concatenate([[True], np.diff(ts) != 0])
        if not keep.all():  # repeated times (t_eval starting at t0): solved once each
            ys, sol = self._scipy(y0, ts[keep], params, dense, kept)
            return ys[np.cumsum(keep) - 1], sol
        fun = self._fun(params)
        jac = self.primal_jac(params, y0)
        opts = dict(self.options)
        if self.method == "odeint" and not dense:
            ys, info = si.odeint(fun, y0, ts, Dfun=jac, tfirst=True, full_output=True, **opts)
            if info["message"] != "Integration successful.":
                _warn(f"scipy.integrate.odeint: {info['message']}")
            return ys, None
        method = "LSODA" if self.method == "odeint" else self.method
        if self.method == "odeint":  # odeint's options, as solve_ivp's LSODA takes them
            opts = {k: v for k, v in opts.items() if k in ("rtol", "atol")}
        if jac is not None:
            opts["jac"] = jac
        span = (ts[0], ts[-1])
        if self.adjoint == "discrete":   # SciPy's own stepping, each accepted step kept
            rec, span = [], self.span(ts)
            method = recording(getattr(si, method), rec)
            entry = ((y0.copy(), span, [p.copy() for p in params]), rec)
            self._steps = entry
            if kept is not None:
                kept.append(entry)
        sol = si.solve_ivp(fun, tuple(span), y0, method=method, t_eval=ts,
                           dense_output=dense, **opts)
        ys = sol.y.T
        if not sol.success or ys.shape[0] != m:
            _warn(f"scipy.integrate.solve_ivp ({method}): {sol.message}")
            ys = np.concatenate([ys, np.full((m - ys.shape[0], n), np.nan)])
        return ys, sol.sol if dense else None


def _warn(msg):
    warnings.warn(f"{msg}; the derivative is taken at the point SciPy returned",
                  SolverWarning, stacklevel=4)


def _same(a, b):
    (y0, ts, ps), (y1, t1, p1) = a, b
    return (np.array_equal(y0, y1) and np.array_equal(ts, t1) and len(ps) == len(p1)
            and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(ps, p1)))


# -- the primitive ---------------------------------------------------------------------------------
def _impl(y0, ts, *params, spec):
    return spec.solve(y0, ts, params)


ode_solve = Primitive(_impl, name="ode_solve")


def _zeros(x):
    return wnp.zeros_like(x) if isinstance(x, Tracer) else np.zeros(np.shape(x))


def _example(x):
    return np.array(example_of(x), dtype=float) if np.ndim(example_of(x)) else float(example_of(x))


def _instead(spec):
    """What to take where the discrete adjoint is not defined (forward mode, nested)."""
    if spec.method in EXPLICIT:
        return ('adjoint="checkpoint" (the same discrete derivative, each step traced), '
                '"forward" or "auto"')
    return 'adjoint="forward" (forward sensitivities) or "auto"'


@ode_solve.frule(symbolic_zeros=True)
def _frule(primals, tangents, spec):
    if spec.adjoint == "discrete" and not spec.auto:
        raise NotImplementedError(
            'adjoint="discrete" is reverse mode only (a pullback through SciPy\'s stored '
            "steps, on plain values). For forward mode, Hessians or forward over reverse "
            f"use {_instead(spec)}")
    if not any(isinstance(t, BatchTracer) for t in tangents):
        return _pushforward(primals, tangents, spec)
    # SciPy solves for one tangent: several at once (a Jacobian's, batched values) one by one
    ys = ode_solve(*primals, spec=spec)
    # the primals too: they may be batched (vmap of jacfwd), each example its own
    return ys, per_example_call(lambda prim, ts: _pushforward(prim, ts, spec)[1],
                                tuple(primals), tuple(tangents))


def _pushforward(primals, tangents, spec):
    """Forward sensitivities: ``[y, s]`` solved together, ``s' = J_y s + J_p dp``."""
    y0, ts, *ps = primals
    dy0, dts, *dps = tangents
    F, n, k = spec.rhs, _size(y0), len(ps)
    live = [i for i, d in enumerate(dps) if d is not None]

    def G(t, z, *pq):
        p, dp = list(pq[:k]), pq[k:]

        def f(yy, *pl):
            q = list(p)
            for i, v in zip(live, pl):
                q[i] = v
            return F(t, yy, *q)
        out, dout = jvp(f, (z[:n], *[p[i] for i in live]), (z[n:], *dp))
        return wnp.concatenate([out, dout])

    s0 = _zeros(y0) if dy0 is None else dy0
    if dts is not None:
        s0 = s0 - F(ts[0], y0, *ps) * dts[0]
    dpl = [dps[i] for i in live]
    G = trace_rhs(G, [0.0, np.zeros(2 * n)] + [_example(x) for x in list(ps) + dpl], "sens")
    z = ode_solve(wnp.concatenate([y0, s0]), ts, *ps, *dpl, spec=spec.derived(G))
    ys, dys = z[:, :n], z[:, n:]
    if dts is not None:
        dys = dys + _rhs_rows(F, ts, ys, ps) * wnp.reshape(dts, (-1, 1))
    return ys, dys


def _size(y):
    return int(np.size(example_of(y)))


def _rhs_rows(F, ts, ys, ps):
    """``F(ts[i], ys[i])`` stacked."""
    m = np.size(example_of(ts))
    return wnp.stack([F(ts[i], ys[i], *ps) for i in range(m)])


@ode_solve.rrule
def _rrule(y0, ts, *ps, spec):
    ys = ode_solve(y0, ts, *ps, spec=spec)

    def pullback(g):  # (a batch of cotangents, a Jacobian's rows: one by one)
        primals = (y0, ts, *ps)
        # the primals and ys too: they may be batched (vmap of grad), each example its own
        return per_example_call(lambda prim, y, gg: _pull(prim, y, gg, spec), primals, ys, g)
    return ys, pullback


def _pull(primals, ys, g, spec):
    if g is None:
        return (None,) * len(primals)
    nested = any(isinstance(x, Tracer) for x in (*primals, ys, g))
    if spec.adjoint == "forward":
        return _pull_forward(primals, ys, g, spec)
    if spec.adjoint == "interpolate" and not nested:
        return _pull_interpolate(primals, ys, g, spec)
    if spec.adjoint == "discrete" and not nested:
        return _pull_discrete(primals, ys, g, spec)
    differentiated = _differentiated(*primals, ys, g)
    if spec.adjoint == "discrete" and differentiated:
        if not spec.auto:
            raise NotImplementedError(
                'adjoint="discrete" is differentiated once: its pullback runs on plain '
                f"values. For a Hessian or Hessian-vector product use {_instead(spec)}")
        # picked by "auto": differentiated again, as the interpolating adjoint would be
        return (_pull_forward if _few(primals) else _pull_backsolve)(primals, ys, g, spec)
    if spec.adjoint in ("interpolate", "discrete") and not differentiated:
        # under wg.vmap (SciPy once per example) or wg.compile (a call in the program): the
        # same interpolating adjoint, as a primitive of its own, not the backsolve form
        y0, ts, *ps = primals
        return tuple(ode_adjoint(y0, ts, ys, g, *ps, spec=spec))
    if spec.adjoint == "interpolate" and spec.stiff and not spec.auto \
            and differentiated:
        raise NotImplementedError(
            f'adjoint="interpolate" with {spec.method} is differentiated once: its pullback '
            "reads SciPy's dense forward solution (plain values), and the traced form it "
            "would take, backsolve, integrates a stiff state backwards, which is unstable. "
            'For a Hessian or Hessian-vector product pass adjoint="forward" (forward '
            'sensitivities), or adjoint="auto" (forward sensitivities when differentiated '
            "again, for few states and parameters), or take it forward over forward: "
            "wg.jacfwd(wg.jacfwd(f))")
    if nested and spec.stiff and spec.auto and _few(primals):
        # differentiated again (a Hessian): the interpolating adjoint's traced form is
        # backsolve, which integrates a stiff state backwards, unstably; forward
        # sensitivities stay stable and are cheap for few states and parameters
        return _pull_forward(primals, ys, g, spec)
    return _pull_backsolve(primals, ys, g, spec)


def _differentiated(*xs):
    """Whether a value carries a derivative's tracer (a second derivative is being taken),
    not only ``wg.vmap``'s batches or ``wg.compile``'s graph."""
    for x in xs:
        while isinstance(x, Tracer):
            if not isinstance(x, (BatchTracer, GraphTracer)):
                return True
            x = x.value
    return False


def _adjoint_impl(y0, ts, ys, g, *ps, spec):
    if spec.adjoint == "discrete":
        out = _pull_discrete((y0, ts, *ps), ys, g, spec)
    else:
        out = _pull_interpolate((y0, ts, *ps), ys, g, spec)
    return [np.asarray(x, dtype=float) for x in out]


# the interpolating adjoint on plain values, for vmap (run per example) and compile; it has no
# rules of its own: differentiated again, _pull takes a traced formulation instead
ode_adjoint = Primitive(_adjoint_impl, name="ode_adjoint", multiple_results=True, batch="loop")


# n (n + P) at most: "auto" takes forward sensitivities for an explicit method.  They cost
# about n + P right-hand-side jvps per stage, the interpolating adjoint 2-3 primal solves
# whatever P (bench_solvers): at Lotka-Volterra's n = 3, P = 12 (45) forward took 4.8-5.9
# primal solves and interpolate 2.3, so only the smallest systems keep forward's accuracy.
FORWARD_LIMIT = 16
NESTED_FORWARD_LIMIT = 256  # the same, for a stiff method differentiated again (a Hessian)


def _few(primals):
    y0, _, *ps = primals
    n = _size(y0)
    return n * (n + sum(_size(p) for p in ps)) <= NESTED_FORWARD_LIMIT


def _unravel(flat, like):
    out, at = [], 0
    for p in like:
        size = _size(p)
        piece = flat[at:at + size]
        shape = np.shape(example_of(p))
        out.append(wnp.reshape(piece, shape) if shape else piece[0])
        at += size
    return out


def _ravel_all(xs, like):
    parts = [wnp.reshape(x, (-1,)) if x is not None else np.zeros(_size(p))
             for x, p in zip(xs, like)]
    return wnp.concatenate(parts) if parts else np.zeros(0)


def _live_rows(g, m):
    """The output rows (after the first) whose cotangent is not a plain zero, last first:
    the backward solve runs straight through the others."""
    if type(g) is np.ndarray:   # plain: one pass, not a test per row
        return (np.flatnonzero(np.any(g[1:m].reshape(m - 1, -1) != 0, axis=1)) + 1)[::-1].tolist()
    rows = []
    for i in range(m - 1, 0, -1):
        gi = g[i]
        if isinstance(gi, Tracer) or np.any(np.asarray(gi) != 0):
            rows.append(i)
    return rows


def _pull_backsolve(primals, ys, g, spec):
    """The continuous adjoint, with ``y`` integrated backwards beside it from each output."""
    y0, ts, *ps = primals
    F, n = spec.rhs, _size(y0)
    m = ys.shape[0]
    P = sum(_size(p) for p in ps)

    def H(t, z, *pp):
        y, a = z[:n], z[n:2 * n]
        out, pb = vjp(lambda yy, *q: F(t, yy, *q), y, *pp)
        cts = pb(a)
        return wnp.concatenate([out, -cts[0], -_ravel_all(cts[1:], pp)])

    H = trace_rhs(H, [0.0, np.zeros(2 * n + P)] + [_example(p) for p in ps], "adjoint")
    hspec = spec.derived(H)
    a, gp = _zeros(y0), np.zeros(P)
    gts = [0.0] * m
    live = _live_rows(g, m)
    for j, i in enumerate(live):
        a = a + g[i]
        gts[i] = wnp.sum(g[i] * F(ts[i], ys[i], *ps))
        to = live[j + 1] if j + 1 < len(live) else 0
        z = ode_solve(wnp.concatenate([ys[i], a, gp]), wnp.stack([ts[i], ts[to]]), *ps,
                      spec=hspec)[-1]
        a, gp = z[n:2 * n], z[2 * n:]
    gts[0] = -wnp.sum(a * F(ts[0], y0, *ps))
    g_ts = wnp.stack(gts)
    return (a + g[0], g_ts, *_unravel(gp, ps))


def _pull_forward(primals, ys, g, spec):
    """Through the full forward sensitivities ``dY/d(y0, p)``: one solve of ``n (n + P)``
    more states, then contractions (few parameters)."""
    y0, ts, *ps = primals
    F, n, k = spec.rhs, _size(y0), len(ps)
    P = sum(_size(p) for p in ps)
    N = n + P

    def G(t, z, *pp):
        y, S = z[:n], wnp.reshape(z[n:], (n, N))
        out = F(t, y, *pp)
        Js = jacobian(lambda yy, *q: F(t, yy, *q), argnums=tuple(range(1 + k)),
                      mode="forward")(y, *pp)
        Jp = [wnp.reshape(J, (n, -1)) for J in Js[1:]]
        dS = Js[0] @ S + wnp.concatenate([np.zeros((n, n))] + Jp, axis=1)
        return wnp.concatenate([out, wnp.reshape(dS, (-1,))])

    G = trace_rhs(G, [0.0, np.zeros(n + n * N)] + [_example(p) for p in ps], "sens")
    S0 = np.concatenate([np.eye(n), np.zeros((n, P))], axis=1).ravel()
    z = ode_solve(wnp.concatenate([y0, S0]), ts, *ps, spec=spec.derived(G))
    m = ys.shape[0]
    live = _live_rows(g, m)[::-1]
    if not live:
        return (g[0], wnp.zeros_like(ts) if isinstance(ts, Tracer) else np.zeros(m),
                *[None] * k)
    S = wnp.reshape(z[np.asarray(live), n:], (len(live), n, N))
    lam = wnp.einsum("ij,ijk->k", g[np.asarray(live)], S)
    gts = [0.0] * m
    for i in live:
        gts[i] = wnp.sum(g[i] * F(ts[i], ys[i], *ps))
    gts[0] = -wnp.sum(lam[:n] * F(ts[0], y0, *ps))
    g_ts = wnp.stack(gts)
    return (lam[:n] + g[0], g_ts, *_unravel(lam[n:], ps))


def _pull_interpolate(primals, ys, g, spec):
    """The continuous adjoint on SciPy's dense forward solution (plain values only).

    Only ``a`` (n states) is integrated: an explicit method's adjoint by its own tableau
    (:mod:`._ode_explicit`), a stiff method's by Radau's Newton iterations and step-size
    control, with the ``n x n`` Jacobian ``-J_yᵀ`` (sparse where ``J_y`` is).  The
    parameters' cotangent ``∫ J_pᵀ a dt`` is read off the stages each step took (the same
    numbers as carrying it as more states), as SciMLSensitivity's quadrature adjoint does.
    """
    y0, ts, *ps = (np.asarray(x, dtype=float) for x in primals)
    ys, g = np.asarray(ys), np.asarray(g)
    n = y0.size
    P = sum(p.size for p in ps)
    dense = spec.dense(y0, ts, ps)
    opts = {k: v for k, v in spec.options.items() if k in ("rtol", "atol", "max_step")}
    # the adjoint's scale is the cotangent's, not the state's: an absolute tolerance below
    # rtol * |g| / 100 only asks for digits that are not there
    rtol = opts.get("rtol", 1e-3)
    opts["atol"] = max(np.max(opts.get("atol", 1e-6)), rtol * 1e-2 * float(np.abs(g).max()))
    m = ts.size
    live = _live_rows(g, m)
    if spec.stiff:
        a, gp = _stiff_adjoint(spec, ps, dense, y0, ts, g, live, opts, P)
    else:
        sol = dense
        R = rows_per_step(sol.ts, ts[live])
        quad = _Quadrature(spec, ps, n).rows() if P else None
        a = explicit_adjoint(getattr(si, spec.method), ts, g, live, _vjp_rows(spec, ps, n, R),
                             R, dense_rows(sol), quad, opts, sol.ts, _warn,
                             (_vjp_rows(spec, ps, n, ROWS), ROWS))
        gp = quad.result(P) if P else np.zeros(0)
    # the output times' cotangents: g[i]·F(t_i, y_i), and -a·F(t0, y0) at the first time
    rows = live + [0]
    Fs = _rhs_at(spec, ps, n, ts[rows], np.concatenate([ys[live], y0[None]]))
    gts = np.zeros(m)
    gts[live] = np.einsum("ij,ij->i", g[live], Fs[:-1])
    gts[0] += -a @ Fs[-1]
    out = [a + g[0], gts]
    at = 0
    for p in ps:
        out.append(gp[at:at + p.size].reshape(p.shape) if p.ndim else float(gp[at]))
        at += p.size
    return tuple(out)


def _stiff_adjoint(spec, ps, dense, y0, ts, g, live, opts, P):
    """``(a, ∫ aᵀJ_p)`` at ``ts[0]`` by Radau (whatever the forward method: the cotangent's
    jump at each output time spoils a multistep method's memory (BDF, LSODA start again at
    order one, with many short steps), while a one-step method carries its step size on);
    the quadrature added after each step off its stages."""
    n = y0.size
    y_at = recent(fast_dense(dense))   # a step's stage times come back at every Newton iteration
    pa = _VjpInto(spec, ps, n, params=False)
    # the quadrature's integrand aᵀJ_p: the parameters' cotangent alone (not aᵀJ_y beside it)
    pq = _VjpInto(spec, ps, n, params="only") if P else None
    jy = spec.jac(ps, y0)
    J_at = recent(lambda t: jy(t, y_at(t)))   # Radau's jac and fun at the same times

    def fun(t, z):   # the adjoint is linear in a: -aᵀJ is the vjp of -a
        return pa(t, y_at(t), -z)

    if _small_dense(spec, n):
        # a few states: ``J_y`` itself at each of a step's three stage times (one
        # forward-mode pass), then products with it at each Newton iteration, rather
        # than a vjp at each stage of each iteration
        def fun(t, z):  # noqa: F811 (the same adjoint, by the matrix)
            return -(z @ J_at(t))

    def jac(t, a):
        J = J_at(t)
        return (-J.T).tocsc() if sp.issparse(J) else -J.T
    opts = dict(opts, jac=jac)
    a, gp = np.zeros(n), np.zeros(P)
    h = solver = None
    forward = forward_grid(dense.ts) if P else None
    for j, i in enumerate(live):
        a = a + g[i]
        to = live[j + 1] if j + 1 < len(live) else 0
        if ts[i] == ts[to]:
            continue
        if not (solver is not None and solver.t == ts[i] and resume(solver, a, ts[to])):
            if h is not None:  # a restart at a jump: the step size the last segment reached
                opts["first_step"] = min(h, abs(ts[i] - ts[to]))
            solver = direct_lu(si.Radau(fun, ts[i], a, ts[to], **opts))
        while solver.status == "running":
            land(solver)
            solver.step()
            if P and solver.status != "failed":
                gp += stage_quadrature(pq, y_at, solver, forward)
        if solver.status == "failed":
            _warn(f"scipy.integrate.solve_ivp (Radau, adjoint): step failed at t={solver.t}")
        a = solver.y.copy()
        h = solver.step_size
        if solver.status == "failed":
            solver = None
    return a, gp


ROWS = 32   # rows per call of the batched right-hand side and parameters' vjp


class _Quadrature:
    """The explicit adjoint's parameter quadrature ``Σ wᵀ J_p(t, y)`` over many stage rows:
    one vectorised vjp (``wg.vmap`` of the right-hand side, traced once per structure) per
    ``ROWS`` rows, or one vjp per row where the right-hand side cannot be batched."""

    def __init__(self, spec, ps, n):
        self.graph = _row_graph(spec, ps, n, "vjp")
        self.ps, self.n = ps, n
        if self.graph is None:
            self.one = _VjpInto(spec, ps, n, params="only")

    def rows(self):
        ps = self.ps
        if self.graph is not None:
            fast = self.graph.plain
            return Rows(lambda T, Y, W: np.concatenate([np.ravel(c) for c in fast(T, Y, W, *ps)]),
                        ROWS, self.n)
        one = self.one
        return Rows(lambda T, Y, W: sum(one(t, y, w) for t, y, w in zip(T, Y, W)), 1, self.n)


def _rhs_at(spec, ps, n, T, Y):
    """The right-hand side at several (time, state) rows, ``ROWS`` at a time."""
    graph = _row_graph(spec, ps, n, "rhs")
    F = spec.rhs.plain
    if graph is None:
        return np.array([F(t, y, *ps) for t, y in zip(T, Y)], dtype=float).reshape(len(T), n)
    out = np.empty((len(T), n))
    fast = graph.plain
    for at in range(0, len(T), ROWS):
        k = min(ROWS, len(T) - at)
        Tc, Yc = np.full(ROWS, T[at]), np.repeat(Y[at:at + 1], ROWS, axis=0)
        Tc[:k], Yc[:k] = T[at:at + k], Y[at:at + k]
        out[at:at + k] = fast(Tc, Yc, *ps)[:k]
    return out


def _vjp_rows(spec, ps, n, R):
    """``(T, Y, A) -> aᵀ J_y`` on ``R`` rows at once (one vectorised vjp), or row by row."""
    graph = _row_graph(spec, ps, n, "vjp_y", R)
    if graph is not None:
        # what reads the parameters alone (a weight matrix's transpose) worked out once per
        # pullback, not at every stage of every step
        split = spec.rhs.derived(("rows", "vjp_y", "hoisted", n, _shapes(ps), R),
                                 lambda: graph.hoisted(3) or False)
        if split:
            pre, body = split
            fast, held = body.plain, (*ps, *pre.plain(*ps))
            return lambda T, Y, A: fast(T, Y, A, *held)
        fast = graph.plain
        return lambda T, Y, A: fast(T, Y, A, *ps)
    one = _VjpInto(spec, ps, n, params=False)
    return lambda T, Y, A: np.stack([one(t, y, a) for t, y, a in zip(T, Y, A)])


def _row_graph(spec, ps, n, kind, size=None):
    """The right-hand side (``"rhs"``), its parameters' vjp (``"vjp"``) or its state's
    (``"vjp_y"``) over ``size`` rows (``ROWS``), vectorised by ``wg.vmap``; None where it
    cannot be (a branch's guard)."""
    size = ROWS if size is None else size
    key = ("rows", kind, n, _shapes(ps), size)
    hit = spec.rhs.derived(key,
                           lambda: _trace_rows(spec.rhs.bare(), ps, n, kind, size) or False)
    return hit or None


def _trace_rows(F, ps, n, kind, size):
    rhs = _trace_rows_raw(F, ps, n, kind, size)
    if rhs is None:
        return None
    # simplified: vmap's and vjp's reshapes to the shape a value has already go (each a
    # call at every stage of every step)
    return rhs.simplified()


def _trace_rows_raw(F, ps, n, kind, size):
    if F.graph.guards:
        return None
    T, Y = np.zeros(size), np.zeros((size, n))
    try:
        if kind == "vjp_y":
            return trace_rhs(
                lambda T, Y, A, *pp: vmap(
                    lambda t, y, a: vjp(lambda yy: F(t, yy, *pp), y)[1](a)[0])(T, Y, A),
                [T, Y, Y, *ps], "vjp_y_rows", flat=False)
        if kind == "rhs":
            return trace_rhs(lambda T, Y, *pp: vmap(lambda t, y: F(t, y, *pp))(T, Y),
                             [T, Y, *ps], "rhs_rows", flat=False)
        return trace_rhs(
            lambda T, Y, W, *pp: tuple(
                vjp(lambda *q: vmap(lambda t, y: F(t, y, *q))(T, Y), *pp)[1](W)),
            [T, Y, Y, *ps], "vjp_rows", flat=False)
    except BatchedControlFlowError:
        return None


def _small_dense(spec, n):
    """Whether the stiff adjoint reads ``J_y`` as a dense matrix rather than by vjps."""
    return n < SMALL_DENSE and spec._jac is not None and spec._jac[0] == "dense"


SMALL_DENSE = 32   # states: a dense J_y is one cheap forward-mode pass (as _make_jac's sparse cut)


def _pull_discrete(primals, ys, g, spec):
    """The discrete adjoint of SciPy's accepted steps, on plain values: explicit Runge-Kutta
    (:mod:`._ode_discrete`, one vjp per stage) or BDF (:mod:`._ode_bdf`, a transposed
    solve per step)."""
    y0, ts, *ps = (np.asarray(x, dtype=float) for x in primals)
    steps = spec.steps(y0, ts, ps)
    F = spec.rhs.plain
    vjp_plain = _VjpInto(spec, ps, y0.size, params=True).graph.plain
    g = np.asarray(g, dtype=float)
    args = (lambda t, y, c: vjp_plain(t, y, c, *ps), lambda t, y: F(t, y, *ps))
    shapes = [p.shape for p in ps]
    if spec.method == "BDF":
        jac = lambda t, y: spec.jac(ps, y0)(t, y)  # noqa: E731 (where the iteration stalls)
        a, gts, gp = pull_bdf(steps, ts, np.asarray(ys, dtype=float), g, *args, jac, shapes)
    else:
        a, gts, gp = pull_steps(getattr(si, spec.method), steps, ts, g, *args, shapes)
    return (a, gts, *[x if x.ndim else float(x) for x in gp])


def _shapes(ps):
    return tuple((np.shape(p), np.asarray(p).dtype.str) for p in ps)


class _VjpInto:
    """``(t, y, a) -> [aᵀ J_y, aᵀ J_p]`` (``params``), ``aᵀ J_p`` (``params="only"``) or
    ``aᵀ J_y`` on plain values: a graph
    traced once per structure of the right-hand side, run as generated code.  The graph
    returns the cotangents as they come (no reshapes or concatenation as traced operations,
    each a few microseconds at every stage of every step); one NumPy call packs them."""

    def __init__(self, spec, ps, n, params):
        key = ("vjp", n, _shapes(ps), params)
        self.graph = spec.rhs.derived(key, lambda: _trace_vjp(spec.rhs.bare(), ps, n, params))
        self.ps, self.n, self.params = list(ps), n, params

    def __call__(self, t, y, a):
        out = self.graph.plain(t, y, a, *self.ps)
        if not self.params:
            return np.array(out, dtype=float).reshape(-1)
        return np.concatenate([np.ravel(c) for c in out])


def _trace_vjp(F, ps, n, params):

    def f(t, y, a, *pp):
        if not params:
            return vjp(lambda yy: F(t, yy, *pp), y)[1](a)[0]
        if params == "only":
            return tuple(vjp(lambda *q: F(t, y, *q), *pp)[1](a))
        return tuple(vjp(lambda yy, *q: F(t, yy, *q), y, *pp)[1](a))
    return trace_rhs(f, [0.0, np.zeros(n), np.zeros(n), *ps], "vjp", flat=False)
