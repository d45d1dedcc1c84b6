"""Integrals (re-exported by ``wengert.scipy.integrate``): ``quad``, ``quad_vec``,
``fixed_quad``, ``trapezoid``, ``simpson``, ``romb``, differentiable in the limits and in the
integrand's parameters.

``quad`` and ``quad_vec`` are SciPy's adaptive calls, one primitive whose rules are Leibniz's
rule: ``d/dθ ∫_a^b f(x, θ) dx = f(b) b' - f(a) a' + ∫_a^b ∂f/∂θ dx``.  The last integral is
this module's own differentiable ``quad_vec`` of ``x ↦ jvp`` (pushforward) or ``x ↦ vjp``
(pullback, every parameter's cotangent in one vector integral) of the integrand, so second
derivatives go through it again.  Parameters are ``args`` and whatever the integrand closes
over (found by ``wengert.implicit_diff.Captured``).  The fixed rules (``fixed_quad``,
``trapezoid``, ``simpson``, ``romb``) are weighted sums written with ``wengert.numpy``.
On the floor built on transforms (6), as its rules call ``wg.jvp``/``wg.vjp``.
"""
from __future__ import annotations

import numpy as np
import scipy.integrate as _si
import scipy.special as _ss

from .. import numpy as wnp
from ..core import Primitive, Tracer, plain, shape_of
from ..batching import per_example_call
from ..implicit_diff import Captured, PerThread, running
from ..transforms import jvp, vjp
from ..tree import flatten
from ._solving import warn_failure

__all__ = ["quad", "quad_vec", "fixed_quad", "trapezoid", "simpson", "romb"]


# -- quad and quad_vec: one primitive -----------------------------------------------------------------
class _Integral:
    """One adaptive integral: ``kind`` (``"quad"``, ``"quad_vec"``), the integrand, limits and
    args captured, SciPy's options; ``result`` keeps SciPy's full answer."""

    result = PerThread()   # per thread: one compiled program may run in many at once
    shape = PerThread()

    def __init__(self, kind, func, a, b, args, options):
        self.kind, self.options = kind, options
        self.captured = Captured((func, a, b, args))

    def __repr__(self):
        return f"<{self.kind} integral>"

    def parts(self, leaves):
        f, a, b, args = self.captured.build(leaves)
        return (lambda x: f(x, *args)), a, b

    def run(self, leaves):
        f, a, b, args = self.captured.build([plain(v) for v in leaves])
        if self.kind == "quad":
            res = _si.quad(f, a, b, args=args, full_output=1, **self.options)
            val = np.float64(res[0])
            if len(res) > 3 and isinstance(res[3], str):   # SciPy's message: ier > 0
                warn_failure("quad", " ".join(res[3].split()).split(".")[0])
        else:
            res = _si.quad_vec(f, a, b, args=args, full_output=True, **self.options)
            val = np.asarray(res[0], dtype=float)
            if not res[2].success:
                warn_failure("quad_vec", res[2].message)
        self.result = res
        self.shape = np.shape(val)
        return val


def _integral_impl(*leaves, problem):
    return running(problem.kind, problem.run, leaves)


integral = Primitive(_integral_impl, name="integral", batch="loop")   # SciPy: one a call


def _sub(primals, idx, vals):
    leaves = list(primals)
    for i, v in zip(idx, vals):
        leaves[i] = v
    return leaves


def _diffable(x):
    return np.result_type(plain(x)).kind in "fc"


def _options_for_derivative(problem):
    """The derivative integrals' options: the same tolerances, quad_vec's own interval limit."""
    return {k: v for k, v in problem.options.items() if k in ("epsabs", "epsrel", "points")}


def _limit_terms(problem, primals, idx, ts, f_of, a, b):
    """``f(b) db - f(a) da`` where the limits are traced."""
    out = None
    for which, lim, sgn in ((1, a, -1.0), (2, b, 1.0)):
        if not problem.limit_traced[which - 1]:
            continue
        _, dl = jvp(lambda *vals: problem.captured.build(_sub(primals, idx, vals))[which] * 1.0,
                    tuple(primals[i] for i in idx), ts)
        term = sgn * f_of(lim) * dl
        out = term if out is None else out + term
    return out


@integral.frule(symbolic_zeros=True)
def integral_jvp(primals, tangents, problem):
    ans = integral(*primals, problem=problem)
    idx = [i for i, t in enumerate(tangents) if t is not None and _diffable(primals[i])]
    if not idx:
        return ans, None
    # SciPy integrates one tangent: several at once (a Jacobian's, batched values) one by one;
    # the primals go through per_example_call too, as they may be batched (vmap of jacfwd)
    return ans, per_example_call(
        lambda prim, ts: _integral_tangent(prim, ts, idx, problem, shape_of(ans)),
        tuple(primals), tuple(tangents[i] for i in idx))


def _integral_tangent(primals, ts, idx, problem, shape):
    ts = tuple(ts)
    ps = tuple(primals[i] for i in idx)
    f_of, a, b = problem.parts(primals)

    def df(x):
        return jvp(lambda *vals: problem.parts(_sub(primals, idx, vals))[0](x), ps, ts)[1]
    body = quad_vec(df, a, b, **_options_for_derivative(problem))[0]
    lims = _limit_terms(problem, primals, idx, ts, f_of, a, b)
    out = body if lims is None else body + lims
    return wnp.reshape(out, shape)


@integral.rrule(needs=True)
def integral_vjp(*primals, problem, needs):
    ans = integral(*primals, problem=problem)
    idx = [i for i, n in enumerate(needs) if n and _diffable(primals[i])]
    shapes = [shape_of(primals[i]) for i in idx]
    sizes = [int(np.prod(s)) for s in shapes]

    def pullback(g):  # (a batch of cotangents, a Jacobian's rows: one by one)
        if g is None or not idx:
            return (None,) * len(primals)
        # the primals too: they may be batched (vmap of grad), each example its own
        return per_example_call(pull, tuple(primals), g)

    def pull(primals, g):
        out = [None] * len(primals)
        ps = [primals[i] for i in idx]
        f_of, a, b = problem.parts(primals)

        def packed(fn):
            cts = vjp(fn, *ps)[1](g)
            parts = [wnp.reshape(wnp.zeros_like(p) if c is None else c, (-1,))
                     for c, p in zip(cts, ps)]
            return parts[0] if len(parts) == 1 else wnp.concatenate(parts)

        def dcost(x):
            return packed(lambda *vals: problem.parts(_sub(primals, idx, vals))[0](x))
        total = quad_vec(dcost, a, b, **_options_for_derivative(problem))[0]
        for which, lim, sgn in ((1, a, -1.0), (2, b, 1.0)):
            if problem.limit_traced[which - 1]:    # -g·f(a) for a, g·f(b) for b
                total = total + _pack_limit(problem, primals, idx, ps, which,
                                            sgn * wnp.sum(g * f_of(lim)))
        lo = 0
        for i, n, s in zip(idx, sizes, shapes):
            c = wnp.reshape(total[lo:lo + n], s)
            out[i] = c[()] if type(c) is np.ndarray and c.ndim == 0 else c   # a scalar's
            lo += n
        return tuple(out)
    return ans, pullback


def _pack_limit(problem, primals, idx, ps, which, ct):
    """The cotangents of the leaves through the limit ``which`` (1: a, 2: b), given ``ct``."""
    cts = vjp(lambda *vals: problem.captured.build(_sub(primals, idx, vals))[which] * 1.0,
              *ps)[1](ct)
    parts = [wnp.reshape(wnp.zeros_like(p) if c is None else c, (-1,))
             for c, p in zip(cts, ps)]
    return parts[0] if len(parts) == 1 else wnp.concatenate(parts)


def _integrate(kind, func, a, b, args, options):
    problem = _Integral(kind, func, a, b, args, options)
    problem.limit_traced = (isinstance(a, Tracer), isinstance(b, Tracer))
    leaves = problem.captured.leaves
    if not leaves:
        problem.run([])
        return problem.result, False
    return integral(*leaves, problem=problem), problem


def quad(func, a, b, args=(), full_output=0, epsabs=1.49e-08, epsrel=1.49e-08, limit=50,
         points=None, weight=None, wvar=None, wopts=None, maxp1=50, limlst=50,
         complex_func=False):
    """``scipy.integrate.quad``: ``(y, abserr)``, ``y`` differentiable in ``a``, ``b``, ``args``
    and the values ``func`` closes over (Leibniz's rule; the derivative integrals use the same
    tolerances)."""
    args = args if isinstance(args, tuple) else (args,)
    options = dict(epsabs=epsabs, epsrel=epsrel, limit=limit, points=points, weight=weight,
                   wvar=wvar, wopts=wopts, maxp1=maxp1, limlst=limlst,
                   complex_func=complex_func)
    if weight is not None and (isinstance(a, Tracer) or isinstance(b, Tracer)):
        raise NotImplementedError("quad with a weight and traced limits: write the weight "
                                  "into the integrand")
    y, problem = _integrate("quad", func, a, b, args, options)
    if problem is False:
        res = y
        return res if full_output else res[:2]
    res = problem.result
    return (y,) + tuple(res[1:]) if full_output else (y, res[1])


def quad_vec(f, a, b, epsabs=1e-200, epsrel=1e-08, norm="2", cache_size=100000000.0,
             limit=10000, workers=1, points=None, quadrature=None, full_output=False, *,
             args=()):
    """``scipy.integrate.quad_vec``: ``(y, err)`` for an array-valued integrand, ``y``
    differentiable as ``quad``'s."""
    args = args if isinstance(args, tuple) else (args,)
    options = dict(epsabs=epsabs, epsrel=epsrel, norm=norm, cache_size=cache_size, limit=limit,
                   workers=workers, points=points, quadrature=quadrature)
    y, problem = _integrate("quad_vec", f, a, b, args, options)
    if problem is False:
        return y if full_output else y[:2]
    res = problem.result
    return (y,) + tuple(res[1:]) if full_output else (y, res[1])


# -- fixed rules ---------------------------------------------------------------------------------------
def fixed_quad(func, a, b, args=(), n=5):
    """``scipy.integrate.fixed_quad``: Gauss-Legendre with ``n`` nodes, ``(val, None)``; a
    weighted sum of ``func`` (vectorised) at the nodes, differentiable everywhere."""
    args = args if isinstance(args, tuple) else (args,)
    x, w = _ss.roots_legendre(n)
    if not any(isinstance(v, Tracer) for v in flatten((a, b, args))[0]) and \
            not Captured(func).leaves:
        return _si.fixed_quad(func, a, b, args=args, n=n)
    half = (b - a) / 2.0
    y = func(half * x + (b + a) / 2.0, *args)
    return half * wnp.sum(w * y, axis=-1), None


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """``scipy.integrate.trapezoid``, differentiable in ``y``, ``x`` and ``dx``."""
    return wnp.trapezoid(y, x=x, dx=dx, axis=axis)


def _simpson_weights(x, n):
    """Simpson's weights on the samples ``x`` (plain or traced), SciPy's rule: composite
    Simpson on pairs of intervals, and for an even ``n`` Cartwright's correction on the last
    interval."""
    h = wnp.diff(x)
    m = n if n % 2 == 1 else n - 1      # samples covered by whole pairs of intervals
    idx, ws = [], []
    if m >= 3:
        h0, h1 = h[0:m - 1:2], h[1:m - 1:2]
        hs = h0 + h1
        base = np.arange(0, m - 1, 2)
        idx += [base, base + 1, base + 2]
        ws += [hs / 6.0 * (2.0 - h1 / h0), hs / 6.0 * hs * hs / (h0 * h1),
               hs / 6.0 * (2.0 - h0 / h1)]
    if n % 2 == 0:
        if n == 2:
            idx += [np.array([0]), np.array([1])]
            ws += [wnp.reshape(h[0] / 2.0, (1,)), wnp.reshape(h[0] / 2.0, (1,))]
        else:
            h0, h1 = h[-2], h[-1]
            alpha = (2 * h1 ** 2 + 3 * h0 * h1) / (6 * (h0 + h1))
            beta = (h1 ** 2 + 3 * h0 * h1) / (6 * h0)
            eta = h1 ** 3 / (6 * h0 * (h0 + h1))
            idx += [np.array([n - 1]), np.array([n - 2]), np.array([n - 3])]
            ws += [wnp.reshape(alpha, (1,)), wnp.reshape(beta, (1,)), wnp.reshape(-eta, (1,))]
    return wnp.bincount(np.concatenate(idx), weights=wnp.concatenate(ws), minlength=n)


def simpson(y, x=None, *, dx=1.0, axis=-1):
    """``scipy.integrate.simpson`` (SciPy's rule for an even number of samples too),
    differentiable in ``y``, ``x`` and ``dx``."""
    if not any(isinstance(v, Tracer) for v in (y, x, dx)):
        return _si.simpson(y, x=x, dx=dx, axis=axis)
    n = shape_of(y)[axis]
    if x is None:
        w = dx * _simpson_weights(np.arange(n, dtype=float), n)
    else:
        if len(shape_of(x)) != 1:
            raise NotImplementedError("simpson with a traced x of more than one dimension: "
                                      "give a 1-D x")
        w = _simpson_weights(x, n)
    return wnp.tensordot(wnp.moveaxis(y, axis, -1), w, axes=1)


def romb(y, dx=1.0, axis=-1, show=False):
    """``scipy.integrate.romb`` (``2**k + 1`` samples): linear in ``y`` for a given ``dx``,
    its weights read off SciPy's rule once; differentiable in ``y`` and ``dx``."""
    if not any(isinstance(v, Tracer) for v in (y, dx)):
        return _si.romb(y, dx=dx, axis=axis, show=show)
    n = shape_of(y)[axis]
    w = _si.romb(np.eye(n), dx=1.0, axis=-1)
    return dx * wnp.tensordot(wnp.moveaxis(y, axis, -1), w, axes=1)


for _f in (quad, quad_vec, fixed_quad, trapezoid, simpson, romb):
    _f._wengert_solver = True  # wengert.coverage: SciPy's solver, differentiated
