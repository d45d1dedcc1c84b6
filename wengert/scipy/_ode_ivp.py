"""``solve_ivp`` and ``odeint`` with SciPy's signatures, differentiable (see :mod:`._ode`).

Each call runs SciPy once on plain values (for the result's structure: step times, events,
status), then, where anything is traced, returns the solution at the output times through
``ode_solve`` (which reuses that solve), or, for ``adjoint="checkpoint"``, by re-running the
explicit Runge-Kutta method's stages as wengert operations on SciPy's accepted steps, stored
under a ``wg.scan`` schedule.
"""
from __future__ import annotations

import numpy as np
import scipy.integrate as si

from .. import numpy as wnp
from ..checkpoint.scan import scan
from ..core import Tracer
from ..custom import stop_gradient
from ..graph.trace import active_graph_traces
from ..tree import flatten, unflatten
from ..transforms import jvp
from ._ode_discrete import recording
from ._ode import (ADJOINTS, EXPLICIT, FORWARD_LIMIT, METHODS, Spec, _warn, batched,
                   example_of, ode_solve, trace_rhs)

__all__ = ["solve_ivp", "odeint"]

_SCHEDULES = ("all", "ctz", "binomial", "ctz-revolve")
# wengert gives stiff methods their Jacobian (a user's `jac` steers SciPy's primal solve only)
_NO_JAC = ("jac", "jac_sparsity", "lband", "uband")


def _traced(*trees):
    return any(isinstance(x, Tracer) for t in trees for x in flatten(t)[0])


def _is_param(x):
    if isinstance(x, Tracer):
        return True
    if isinstance(x, (bool, int, str, bytes)) or x is None:
        return False
    if isinstance(x, float):
        return True
    return isinstance(x, (np.ndarray, np.generic)) and np.issubdtype(x.dtype, np.inexact)


def _split_args(args):
    """The differentiable leaves of ``args``, and how to put ``args`` back together."""
    leaves, d = flatten(tuple(args))
    slots = [_is_param(v) for v in leaves]
    params = [v for v, s in zip(leaves, slots) if s]

    def rebuild(ps):
        it = iter(ps)
        return unflatten(d, [next(it) if s else v for v, s in zip(leaves, slots)])
    return params, rebuild


def _pick(adjoint, method, n, P):
    if adjoint not in ADJOINTS:
        raise ValueError(f"adjoint={adjoint!r}: use one of {ADJOINTS}")
    if adjoint == "discrete" and method not in EXPLICIT + ("BDF",):
        raise ValueError(f'adjoint="discrete" differentiates the steps of an explicit '
                         f"Runge-Kutta method ({', '.join(EXPLICIT)}) or of BDF, not {method}; "
                         f'use "interpolate", "backsolve" or "forward"')
    if adjoint == "checkpoint" and method not in EXPLICIT:
        raise ValueError(f'adjoint="checkpoint" differentiates the steps of an explicit '
                         f"Runge-Kutta method ({', '.join(EXPLICIT)}), not {method}; use "
                         f'"interpolate", "backsolve" or "forward"')
    if adjoint != "auto":
        return adjoint
    # the solver's mathematics, never its steps differentiated (API.md section 13: "discrete"
    # and "checkpoint" are asked for by name): a few forward sensitivities, else the
    # continuous adjoint on the stored dense solution
    if method in EXPLICIT and n * (n + P) <= FORWARD_LIMIT:
        return "forward"
    return "interpolate"


def _as_state(y0, what):
    y0 = wnp.asarray(y0) if (isinstance(y0, (list, tuple)) and _traced(y0)) else y0
    if not isinstance(y0, Tracer):
        y0 = np.asarray(y0, dtype=float)
    if np.ndim(example_of(y0)) != 1:
        raise ValueError(f"{what}: `y0` must be 1-dimensional (shape (n,)), got shape "
                         f"{np.shape(example_of(y0))}")
    if not isinstance(y0, Tracer):
        return y0
    return y0 if np.issubdtype(example_of(y0).dtype, np.floating) else y0 * 1.0


def _dtype_of(y0):
    """The float dtype the results keep (float32 in, float32 out, as elsewhere in wengert)."""
    if isinstance(y0, (list, tuple)):
        return np.result_type(*[np.asarray(example_of(v)).dtype for v in y0], np.float32)
    d = np.asarray(example_of(y0)).dtype
    return d if np.issubdtype(d, np.floating) else np.dtype(float)


def _cast(x, dtype):
    if dtype == np.float64:
        return x
    return wnp.asarray(x, dtype=dtype) if isinstance(x, Tracer) else np.asarray(x, dtype=dtype)


def _user_jac(jac, rebuild, k, tfirst=True, col_deriv=False):
    """A user's ``jac(t, y, *args)`` as ``(params) -> jac(t, y)`` on plain values, for SciPy's
    primal solve only: it steers the Newton iterations, never the derivative (the adjoint's
    Jacobian comes from wengert).  A traced result (a jac closing over traced values) gives
    its plain value, the Jacobian at the primal point."""
    if jac is None:
        return None
    if not callable(jac):
        J = example_of(jac)
        return lambda params: J

    def bind(params):
        args = rebuild([example_of(p) for p in params[:k]])

        def J(t, y):
            out = jac(t, y, *args) if tfirst else jac(y, t, *args)
            out = example_of(out)
            return np.transpose(out) if col_deriv else out
        return J
    return bind


def _vector(x):
    return wnp.asarray(x) if _traced(x) else np.asarray(x, dtype=float)


# -- solve_ivp -------------------------------------------------------------------------------------
def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, *, adjoint="auto", schedule="all", snapshots=None,
              **options):
    """``scipy.integrate.solve_ivp``, differentiable in ``y0``, ``t_span``, ``t_eval``,
    ``args`` and every traced value ``fun`` closes over (forward, reverse, nested).

    The result is SciPy's bunch; ``.y`` and ``.t`` are traced where they depend on traced
    values (``.sol``, ``nfev`` and the like are SciPy's, plain).  ``adjoint`` picks how
    reverse mode differentiates: ``"discrete"`` (explicit methods: through SciPy's stored
    steps), ``"interpolate"``, ``"backsolve"``, ``"forward"``,
    ``"checkpoint"`` (explicit methods; ``schedule`` and ``snapshots`` as in ``wg.scan``)
    or ``"auto"``.  ``fun`` is traced once per call: write it with ``wengert.numpy`` (or
    NumPy's ufuncs) and without ``if`` on its arguments.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> from wengert.scipy.integrate import solve_ivp
    >>> def final(k):
    ...     sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0]), rtol=1e-10,
    ...                     atol=1e-12)
    ...     return sol.y[0, -1]
    >>> round(float(wg.grad(final)(0.5)), 8), round(float(-np.exp(-0.5)), 8)
    (-0.60653066, -0.60653066)
    """
    if isinstance(method, type):
        method = method.__name__
    if method not in METHODS:
        raise ValueError(f"method={method!r}: wengert differentiates SciPy's methods "
                         f"{METHODS}")
    if schedule not in _SCHEDULES:
        raise ValueError(f"schedule={schedule!r}: use one of {_SCHEDULES}")
    if args is not None and not isinstance(args, tuple):
        args = (args,)  # SciPy accepts a lone argument the same way
    args = () if args is None else args
    user_jac = options.pop("jac", None)
    for name in _NO_JAC:
        options.pop(name, None)
    dtype = _dtype_of(y0)
    y0 = _as_state(y0, "solve_ivp")
    if len(t_span) != 2:
        raise ValueError("solve_ivp: `t_span` must be a pair (t0, tf)")
    t0, tf = t_span
    params, rebuild = _split_args(args)
    if vectorized:
        raise NotImplementedError("solve_ivp(vectorized=True) is not differentiated by "
                                  "wengert: give fun(t, y) for one state")
    rhs = trace_rhs(lambda t, y, *ps: fun(t, y, *rebuild(ps)),
                    [example_of(t0), example_of(y0)] + [example_of(p) for p in params], "fun")
    ps = params + rhs.captured
    n, P = np.size(example_of(y0)), sum(np.size(example_of(p)) for p in ps)
    how = _pick(adjoint, method, n, P)
    spec = Spec(rhs, method, options, "backsolve" if how == "checkpoint" else how,
                user_jac=_user_jac(user_jac, rebuild, len(params)))
    spec.auto = adjoint == "auto"
    spec.t_bound = float(example_of(tf))
    plain_ps = [np.asarray(example_of(p)) for p in ps]
    evs = _events(events, args, rebuild, params, t0, y0)
    opts = dict(options)
    jac = spec.primal_jac(plain_ps, np.asarray(example_of(y0), dtype=float))
    if jac is not None:
        opts["jac"] = jac
    te_plain = None if t_eval is None else np.asarray(example_of(t_eval), dtype=float)
    traced = _traced(y0, t0, tf, t_eval, ps)
    # the interpolants seed the primitive's solve; the discrete adjoint's outputs are
    # SciPy's own rows (no events: their times need the interpolants)
    rows = how == "discrete" and not evs
    dense = dense_output or (traced and not rows)
    F = rhs.plain
    span = (float(example_of(t0)), float(example_of(tf)))
    y0_plain = np.asarray(example_of(y0), dtype=float)
    stepper = method
    if how == "discrete" and traced:   # SciPy's solve, each accepted step kept for the adjoint
        rec = []
        stepper = recording(getattr(si, method), rec)
        spec._steps = ((y0_plain.copy(), np.array(span), [p.copy() for p in plain_ps]), rec)
    sol = si.solve_ivp(lambda t, y: F(t, y, *plain_ps), span, y0_plain, method=stepper,
                       t_eval=te_plain, dense_output=dense, events=evs, **opts)
    if not sol.success:
        _warn(f"scipy.integrate.solve_ivp ({method}): {sol.message}")
    if not traced:
        if not dense_output:
            sol.sol = None
        sol.y = _cast(sol.y, dtype)
        return sol
    if t_eval is None and (active_graph_traces() or batched(y0, t0, tf, ps)):
        raise ValueError("solve_ivp under wg.compile or wg.vmap needs t_eval: the step times "
                         "SciPy picks change with the inputs, the program's shapes cannot")
    # the output times, traced where the user's are
    if t_eval is not None:
        reached = sol.t.size if not batched(y0, t0, tf, t_eval, ps) else len(te_plain)
        te = _vector(t_eval)[:reached]
        ts = wnp.concatenate([wnp.reshape(_vector(t0), (1,)), te])
        t_out = te
    else:
        mid = sol.t[1:-1]
        last = tf if sol.status == 0 else sol.t[-1]
        ts = wnp.concatenate([wnp.reshape(_vector(t0), (1,)), mid,
                              wnp.reshape(_vector(last), (1,))])
        t_out = ts
    ev_times = [np.asarray(t, dtype=float) for t in (sol.t_events or [])]
    all_t, where, ev_at = _merge_events(ts, ev_times)
    if how == "checkpoint":
        ys = _rk_solve(rhs, y0, all_t, ps, method, schedule, snapshots, options,
                       float(example_of(t0)), float(example_of(all_t[-1])))
    else:
        tp = np.asarray(example_of(all_t), dtype=float)
        key = (np.array(example_of(y0), dtype=float), tp, [p.copy() for p in plain_ps])
        # the solve just made: the primitive reuses SciPy's own rows (read off the same
        # interpolants; evaluating them again at every output time cost a tenth of a solve)
        out = None
        if not evs:
            out = sol.y.T if t_eval is None else np.concatenate([y0_plain[None], sol.y.T])
            out = out if out.shape[0] == tp.size else None
        if out is not None and (rows or sol.sol is not None):
            spec._cache = (key, out, sol.sol)
        elif sol.sol is not None:
            spec._cache = (key, sol.sol(tp).T, sol.sol)
        ys = ode_solve(y0, all_t, *ps, spec=spec)
    ys_out = ys if not evs else ys[where]   # the event rows are taken out
    if t_eval is None:
        sol.t = t_out
    elif _traced(t_eval):
        sol.t = t_out
    sol.y = wnp.transpose(ys_out[1:] if t_eval is not None else ys_out)
    if evs:
        _event_derivatives(sol, evs, ev_at, all_t, ys, rhs, ps, ev_times)
    if sol.status == 1 and t_eval is None and evs:
        # a terminal event ended the solve: the last time is the event's
        k = next(i for i, e in enumerate(evs) if getattr(e, "terminal", False)
                 and sol.t_events[i].size)
        t_end, y_end = sol.t_events[k][-1], sol.y_events[k][-1]
        sol.t = wnp.concatenate([t_out[:-1], wnp.reshape(t_end, (1,))])
        sol.y = wnp.concatenate([sol.y[:, :-1], wnp.reshape(y_end, (-1, 1))], axis=1)
    if not dense_output:
        sol.sol = None
    sol.y = _cast(sol.y, dtype)
    return sol


def _merge_events(ts, ev_times):
    """Output times with the event times added (sorted along the direction of the solve):
    ``(times, rows of the outputs, rows of each event's times)``."""
    tsp = np.asarray(example_of(ts))
    if not ev_times:
        return ts, np.arange(tsp.size), []
    extra = np.concatenate(ev_times)
    extra = extra[~np.isin(extra, tsp)]
    if not extra.size:
        return ts, np.arange(tsp.size), [_find(tsp, e) for e in ev_times]
    sign = 1.0 if tsp[-1] >= tsp[0] else -1.0
    allp = np.concatenate([tsp, extra])
    order = np.argsort(sign * allp, kind="stable")
    times = wnp.concatenate([ts, extra])[order]
    allsorted = allp[order]
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    return times, inv[:tsp.size], [_find(allsorted, e) for e in ev_times]


def _find(sorted_times, values):
    return np.array([int(np.flatnonzero(sorted_times == v)[0]) for v in values], dtype=int)


# -- events: their times by the implicit function theorem ---------------------------------------
def _events(events, args, rebuild, params, t0, y0):
    """The event functions on plain values (traced once each, closures captured)."""
    if events is None:
        return None
    evs = list(events) if isinstance(events, (list, tuple)) else [events]
    out = []
    for e in evs:
        g = trace_rhs(lambda t, y, *ps, e=e: e(t, y, *rebuild(ps)),
                      [example_of(t0), example_of(y0)] + [example_of(p) for p in params], "event",
                      flat=False)
        cps = [np.asarray(example_of(p)) for p in params + g.captured]

        def plain_event(t, y, g=g, cps=cps):
            return float(g.plain(t, y, *cps))
        plain_event.terminal = getattr(e, "terminal", False)
        plain_event.direction = getattr(e, "direction", 0)
        plain_event.traced = (g, params + g.captured)
        out.append(plain_event)
    return out


def _event_derivatives(sol, evs, ev_at, all_t, ys, rhs, ps, ev_times):
    """``t_events`` and ``y_events`` traced: ``dt_e = -(∂g/∂θ + ∇_y g·dy(t_e)) / ġ`` with
    ``ġ = ∂g/∂t + ∇_y g·F`` at the event (first derivatives)."""
    t_events, y_events = [], []
    for e, rows, times in zip(evs, ev_at, ev_times):
        g, gps = e.traced
        tl, yl = [], []
        for r, te in zip(rows, times):
            y = ys[r]
            f = rhs(te, y, *ps)
            gv = g(te, y, *gps)
            if _depth(gv) > 1:
                raise NotImplementedError(
                    "solve_ivp: event times are differentiated once (by the implicit function "
                    "theorem at the event); derivatives of derivatives through t_events, "
                    "y_events or a terminal event's final time are not supported: give t_eval "
                    "or drop the event")
            gdot = jvp(lambda t, yy: g(t, yy, *[stop_gradient(p) for p in gps]),
                       (te, stop_gradient(y)), (1.0, stop_gradient(f)))[1]
            dt = -(gv - stop_gradient(gv)) / gdot
            t_e = te + dt
            tl.append(t_e)
            yl.append(y + f * dt)
        t_events.append(wnp.stack(tl) if tl else np.zeros(0))
        y_events.append(wnp.stack(yl) if yl else np.zeros((0, np.size(example_of(ys[0])))))
    sol.t_events, sol.y_events = t_events, y_events


def _depth(x):
    d = 0
    while isinstance(x, Tracer):
        x, d = x.value, d + 1
    return d


# -- adjoint="checkpoint": the accepted Runge-Kutta steps, rerun by wengert --------------------
def _tableau(method):
    cls = getattr(si, method)
    s = cls.n_stages
    return np.asarray(cls.A)[:s, :s], np.asarray(cls.B)[:s], np.asarray(cls.C)[:s]


def _rk_solve(rhs, y0, ts, ps, method, schedule, snapshots, options, t0, t1):
    """The solution at ``ts`` by SciPy's own accepted steps (its tableau, its step sizes),
    each step a wengert computation: ``wg.scan`` over the steps, under ``schedule``."""
    A, B, C = _tableau(method)
    plain_ps = [np.asarray(example_of(p)) for p in ps]
    F = rhs.plain
    opts = {k: v for k, v in options.items() if k not in _NO_JAC}
    grid = si.solve_ivp(lambda t, y: F(t, y, *plain_ps), (t0, t1),
                        np.asarray(example_of(y0), dtype=float), method=method, **opts).t
    tsp = np.asarray(example_of(ts))
    idx, u0, u1, ends = [], [], [], []
    for i in range(tsp.size - 1):
        a, b = tsp[i], tsp[i + 1]
        lo, hi = min(a, b), max(a, b)
        inner = grid[(grid > lo) & (grid < hi)]
        fr = np.concatenate([[0.0], np.sort((inner - a) / (b - a)) if b != a else [], [1.0]])
        for j in range(fr.size - 1):
            idx.append(i)
            u0.append(fr[j])
            u1.append(fr[j + 1])
        ends.append(len(idx) - 1)
    idx = np.asarray(idx, dtype=int)
    ta, tb = ts[idx], ts[idx + 1]
    tk = ta + (tb - ta) * np.asarray(u0)
    hk = (tb - ta) * (np.asarray(u1) - np.asarray(u0))
    S = B.size

    def step(y, x):
        t, h = x[0], x[1]
        K = [rhs(t, y, *ps)]
        for s in range(1, S):
            dy = None
            for j in range(s):
                if A[s, j] != 0.0:
                    term = A[s, j] * K[j]
                    dy = term if dy is None else dy + term
            K.append(rhs(t + C[s] * h, y + h * dy, *ps))
        inc = None
        for j in range(S):
            if B[j] != 0.0:
                term = B[j] * K[j]
                inc = term if inc is None else inc + term
        y = y + h * inc
        return y, y

    xs = wnp.stack([tk, hk], axis=1)
    _, ys = scan(step, y0, xs, checkpoint=schedule, snapshots=snapshots)
    return wnp.concatenate([wnp.reshape(y0, (1, -1)), ys[np.asarray(ends, dtype=int)]])


# -- odeint ---------------------------------------------------------------------------------------
_ODEINT_DEFAULTS = dict(ml=None, mu=None, rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0,
                        hmin=0.0, ixpr=0, mxstep=0, mxhnil=0, mxordn=12, mxords=5, printmessg=0)


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None,
           rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0,
           mxhnil=0, mxordn=12, mxords=5, printmessg=0, tfirst=False, *, adjoint="auto"):
    """``scipy.integrate.odeint`` (LSODA), differentiable in ``y0``, ``t``, ``args`` and
    every traced value ``func`` closes over.  ``Dfun`` is not needed: wengert gives LSODA
    the Jacobian; a ``Dfun`` given steers SciPy's solve (the derivative's Jacobians still
    come from wengert).  ``adjoint``: ``"interpolate"`` (``"auto"``), ``"backsolve"`` or
    ``"forward"``.

    >>> import numpy as np, wengert as wg
    >>> from wengert.scipy.integrate import odeint
    >>> f = lambda y0: odeint(lambda y, t: -2.0 * y, y0, np.array([0.0, 1.0]),
    ...                       rtol=1e-11, atol=1e-12)[-1, 0]
    >>> round(float(wg.grad(f)(np.array([3.0]))[0]), 8), round(float(np.exp(-2.0)), 8)
    (0.13533528, 0.13533528)
    """
    if not isinstance(args, tuple):
        args = (args,)
    given = dict(ml=ml, mu=mu, rtol=rtol, atol=atol, tcrit=tcrit, h0=h0, hmax=hmax, hmin=hmin,
                 ixpr=ixpr, mxstep=mxstep, mxhnil=mxhnil, mxordn=mxordn, mxords=mxords,
                 printmessg=printmessg)
    opts = {k: v for k, v in given.items() if v is not _ODEINT_DEFAULTS[k]
            and not (v is None or (np.ndim(v) == 0 and v == _ODEINT_DEFAULTS[k]))}
    # LSODA's own default tolerances, said outright: the adjoint solves read them from opts
    # (without them it ran at solve_ivp's 1e-3 and the gradient was off by 1e-3 relative)
    opts.setdefault("rtol", 1.49012e-8)
    opts.setdefault("atol", 1.49012e-8)
    dtype = _dtype_of(y0)
    y0 = _as_state(np.ravel(y0) if not _traced(y0) else wnp.reshape(wnp.asarray(y0), (-1,)),
                   "odeint")
    t = _vector(t)
    params, rebuild = _split_args(args)
    if tfirst:
        user = lambda tt, y, *ps: func(tt, y, *rebuild(ps))  # noqa: E731
    else:
        user = lambda tt, y, *ps: func(y, tt, *rebuild(ps))  # noqa: E731
    if not _traced(y0, t, params):
        # maybe closures only: the trace below finds them
        pass
    tp = np.asarray(example_of(t), dtype=float)
    rhs = trace_rhs(user, [float(tp[0]), example_of(y0)] + [example_of(p) for p in params], "func")
    ps = params + rhs.captured
    if adjoint == "checkpoint":
        raise ValueError('odeint is LSODA, an implicit method: adjoint="checkpoint" needs '
                         'solve_ivp with RK45, RK23 or DOP853')
    how = _pick(adjoint, "LSODA", np.size(example_of(y0)), sum(np.size(example_of(p)) for p in ps))
    spec = Spec(rhs, "odeint", opts, how,
                user_jac=_user_jac(Dfun, rebuild, len(params), tfirst, bool(col_deriv)))
    spec.auto = adjoint == "auto"
    plain_ps = [np.asarray(example_of(p)) for p in ps]
    if not _traced(y0, t, ps):
        F = rhs.plain
        jac = spec.primal_jac(plain_ps, np.asarray(y0))
        out = si.odeint(lambda tt, y: F(tt, y, *plain_ps), y0, tp, Dfun=jac, tfirst=True,
                        full_output=full_output, **opts)
        if full_output:
            return _cast(out[0], dtype), out[1]
        return _cast(out, dtype)
    ys = _cast(ode_solve(y0, t, *ps, spec=spec), dtype)
    if full_output:
        F = rhs.plain
        info = si.odeint(lambda tt, y: F(tt, y, *plain_ps), np.asarray(example_of(y0)), tp,
                         tfirst=True, full_output=True, **opts)[1]
        return ys, info
    return ys


for _f in (solve_ivp, odeint):
    _f._wengert_solver = True  # wengert.coverage: SciPy's solver, differentiated
