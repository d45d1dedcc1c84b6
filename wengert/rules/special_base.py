"""``scipy.special`` functions, declared elementwise by their partials: how they are declared
(``SPECIAL``, ``_special``, ``several_results``) and the functions the families in
special_bessel, special_distributions and special_integrals build on (gamma and beta, error
functions, logistic, x log y, Bessel functions, ...).  rules/special.py gathers them all.

Orders (``polygamma``'s ``n``, ``jv``'s ``v``) are not differentiated: their partial is a
``NoDerivative``, so differentiating one raises rather than giving a zero.
"""
import math

import numpy as np
import scipy.special as _sp

from ..core import plain as _plain, NoDerivative, Tracer, primitive
from . import patterns
from .lowering import Lowering
from . import elementwise as _ew
from ._series import near_zero, power_series
from .arithmetic import absolute
from .elementwise import exp, log, log1p, sign, sin, sqrt, where

__all__ = ["SPECIAL", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "cosdg", "cosm1", "cotdg",
           "dawsn", "digamma", "ellipe", "ellipk", "entr", "erf", "erfc", "erfcinv", "erfcx",
           "erfi", "erfinv", "expit", "exprel", "gamma", "gammainc", "gammaincc", "gammaln",
           "gammasgn", "huber", "i0", "i0e", "i1", "i1e", "inv_boxcox", "inv_boxcox1p", "iv",
           "ive", "j0", "j1", "jv", "k0", "k0e", "k1", "k1e", "kl_div", "kv", "kve", "log_expit",
           "log_ndtr", "loggamma", "logit", "multigammaln", "ndtr", "ndtri", "ndtri_exp", "poch",
           "polygamma", "pseudo_huber", "psi", "radian", "rel_entr", "rgamma", "several_results",
           "sindg", "spence", "tandg", "xlog1py", "xlogy", "y0", "y1", "yn", "yv"]

_SQRT_PI = math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

# expit, iv, i0 and i1, which NumPy's logaddexp and i0 need, are declared in special_core (no
# circle with elementwise), in the one table of special functions
from .special_core import SPECIAL, expit, i0, i1, iv  # noqa: E402


# the partial in an order (or a dimension): not implemented, so using it raises
_NO = {(name, arg): NoDerivative(f"scipy.special.{name}", arg) for name, arg in (
    ("polygamma", "n"), ("iv", "v"), ("ive", "v"), ("jv", "v"), ("yv", "v"), ("kv", "v"),
    ("kve", "v"), ("multigammaln", "d"), ("yn", "n"), ("gammainc", "a"), ("gammaincc", "a"),
    ("betainc", "a"), ("betainc", "b"))}


def _special(np_fn, partials, *, name=None, domain=(-2.0, 2.0), scalar=None):
    """An elementwise primitive over a ``scipy.special`` function (its own table, not
    ``elementwise.REGISTRY``: ``scipy.special.expm1`` is not ``numpy.expm1``); ``scalar``: its
    Numba scalar form (rules/lowering.py), for the ones a fused kernel computes."""
    return _ew.elementwise(np_fn, partials, name=name, domain=domain, registry=SPECIAL,
                           lowering=None if scalar is None else Lowering(scalar=scalar))


# Numba (a fused kernel's loop body, wengert/graph/fuse.py): each on scalars, the same
# formula as scipy's own (its C++ for expit, logit, log_expit, xlogy), or the C library's
# erf, erfc and lgamma that math gives Numba; float64 only
def _nb_logit(x):
    # scipy's: log(x / (1 - x)) away from 1/2, the log1p form near it (no cancellation)
    return (f"(np.log({x} / (1.0 - {x})) if ({x} < 0.3 or {x} > 0.65) else "
            f"(np.log1p(2.0 * ({x} - 0.5)) - np.log1p(-2.0 * ({x} - 0.5))))")


def _nb_xlogy(log):
    # 0 at x == 0 unless y is nan, as scipy's
    return lambda x, y: f"(0.0 if ({x} == 0.0 and {y} == {y}) else {x} * np.{log}({y}))"


def _nb_log_expit(x):
    return f"(({x}) - np.log1p(np.exp({x})) if {x} < 0.0 else -np.log1p(np.exp(-({x}))))"


def _nb_entr(x):
    return (f"(-{x} * np.log({x}) if {x} > 0.0 else (0.0 if {x} == 0.0 else "
            f"(-np.inf if {x} < 0.0 else {x})))")


def _nb_call(fn):
    return lambda *a: f"{fn}({', '.join(a)})"


def _keep_float32(fn):
    """SciPy's Python-level wrappers and integer loops ('ld->d') upcast a float32 ``x`` (the
    last argument, the one differentiated): keep its dtype."""
    def impl(*args):
        ans = fn(*args)
        if getattr(args[-1], "dtype", None) == np.float32 and \
                getattr(ans, "dtype", None) == np.float64:
            ans = ans.astype(np.float32)
        return ans
    impl.__name__ = fn.__name__
    impl.__doc__ = fn.__doc__
    return impl


# gamma family ---------------------------------------------------------------------------
gammaln = _special(_sp.gammaln, lambda ans, x: (digamma(x),), domain=(0.2, 4.0),
                   scalar=_nb_call("math.lgamma"))
gamma = _special(_sp.gamma, lambda ans, x: (ans * digamma(x),), domain=(0.2, 4.0))
polygamma = _special(_keep_float32(_sp.polygamma),
                     lambda ans, n, x: (_NO["polygamma", "n"], polygamma(n + 1, x)),
                     domain=(0.2, 4.0))
digamma = _special(_sp.digamma, lambda ans, x: (polygamma(1, x),), name="digamma",
                   domain=(0.2, 4.0))
psi = digamma
SPECIAL["psi"] = digamma
betaln = _special(_sp.betaln, lambda ans, a, b: (digamma(a) - digamma(a + b),
                                                  digamma(b) - digamma(a + b)),
                  domain=(0.2, 4.0))
beta = _special(_sp.beta, lambda ans, a, b: (ans * (digamma(a) - digamma(a + b)),
                                              ans * (digamma(b) - digamma(a + b))),
                domain=(0.2, 4.0))

# incomplete gamma and beta: derivatives in x (the integrand), as autograd has them
def _gammainc_dx(a, x):
    # x^(a-1) e^-x / Gamma(a); xlogy gives x = 0 its limit (1 for a = 1, not 0 * -inf)
    return exp(xlogy(a - 1.0, x) - x - gammaln(a))


gammainc = _special(_sp.gammainc, lambda ans, a, x: (_NO["gammainc", "a"], _gammainc_dx(a, x)),
                    domain=(0.2, 3.0))
gammaincc = _special(_sp.gammaincc, lambda ans, a, x: (_NO["gammaincc", "a"], -_gammainc_dx(a, x)),
                     domain=(0.2, 3.0))
betainc = _special(_sp.betainc, lambda ans, a, b, x: (
    _NO["betainc", "a"], _NO["betainc", "b"],
    exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b))), domain=(0.1, 0.9))
gammasgn = _ew.elementwise(_sp.gammasgn, None, nondiff=True, domain=(0.2, 3.0),
                           registry=SPECIAL)

# error functions --------------------------------------------------------------------------
erf = _special(_sp.erf, lambda ans, x: ((2.0 / _SQRT_PI) * exp(-(x * x)),),
               scalar=_nb_call("math.erf"))
erfc = _special(_sp.erfc, lambda ans, x: ((-2.0 / _SQRT_PI) * exp(-(x * x)),),
                scalar=_nb_call("math.erfc"))
erfinv = _special(_sp.erfinv, lambda ans, x: ((_SQRT_PI / 2.0) * exp(ans * ans),),
                  domain=(-0.9, 0.9))
erfcinv = _special(_sp.erfcinv, lambda ans, x: ((-_SQRT_PI / 2.0) * exp(ans * ans),),
                   domain=(0.1, 1.9))
erfcx = _special(_sp.erfcx, lambda ans, x: (2.0 * x * ans - 2.0 / _SQRT_PI,))

# normal distribution -------------------------------------------------------------------------
ndtr = _special(_sp.ndtr, lambda ans, x: (exp(-0.5 * (x * x)) / _SQRT_2PI,))
ndtri = _special(_sp.ndtri, lambda ans, x: (_SQRT_2PI * exp(0.5 * (ans * ans)),),
                 domain=(0.05, 0.95))
# pdf / cdf through logs: no overflow far in the left tail
log_ndtr = _special(_sp.log_ndtr,
                    lambda ans, x: (exp(-0.5 * (x * x) - _HALF_LOG_2PI - ans),),
                    domain=(-4.0, 3.0))

# logistic ------------------------------------------------------------------------------------
logit = _special(_sp.logit, lambda ans, x: (1.0 / (x * (1.0 - x)),), domain=(0.1, 0.9),
                 scalar=_nb_logit)
log_expit = _special(_sp.log_expit, lambda ans, x: (expit(-x),), scalar=_nb_log_expit)


# x log y: 0 where x == 0, as scipy's value is -------------------------------------------------
def _safe_ratio(x, y):
    """x / y, and 0 where both are 0 (``x log y`` is 0 for every y at x == 0).  Only there:
    at x == 0 and y != 0 the ratio's own derivative in x, 1 / y, is not 0."""
    zero = (x == 0) & (y == 0)
    if not isinstance(zero, Tracer) and not np.any(zero):
        return x / y
    return where(zero, 0.0, x / where(zero, 1.0, y))


xlogy = _special(_sp.xlogy, lambda ans, x, y: (log(y), _safe_ratio(x, y)), domain=(0.1, 3.0),
                 scalar=_nb_xlogy("log"))
xlog1py = _special(_sp.xlog1py, lambda ans, x, y: (log1p(y), _safe_ratio(x, 1.0 + y)),
                   domain=(0.1, 3.0), scalar=_nb_xlogy("log1p"))
entr = _special(_sp.entr, lambda ans, x: (-(log(x) + 1.0),), domain=(0.1, 3.0), scalar=_nb_entr)
rel_entr = _special(_sp.rel_entr, lambda ans, x, y: (log(x / y) + 1.0, -(x / y)),
                    domain=(0.1, 3.0))
kl_div = _special(_sp.kl_div, lambda ans, x, y: (log(x / y), 1.0 - x / y), domain=(0.1, 3.0))


# modified Bessel functions of the first kind (iv, i0, i1: special_core) ----------------------------
# ive = iv * exp(-|x|) for real x
ive = _special(_sp.ive, lambda ans, v, x: (_NO["ive", "v"], 0.5 * (ive(v - 1, x) + ive(v + 1, x))
                                           - sign(x) * ans), domain=(0.2, 3.0))
i0e = _special(_sp.i0e, lambda ans, x: (i1e(x) - sign(x) * ans,), domain=(0.2, 3.0))
i1e = _special(_sp.i1e, lambda ans, x: (0.5 * (i0e(x) + ive(2.0, x)) - sign(x) * ans,),
               domain=(0.2, 3.0))


# elementary functions, scipy.special's versions ----------------------------------------------
_RAD = math.pi / 180.0
_sp_expm1 = _special(_sp.expm1, lambda ans, x: (ans + 1.0,), scalar=_nb_call("np.expm1"))
_sp_log1p = _special(_sp.log1p, lambda ans, x: (1.0 / (1.0 + x),), domain=(-0.9, 3.0),
                     scalar=_nb_call("np.log1p"))
_special(_sp.exp2, lambda ans, x: (ans * math.log(2.0),))
_special(_sp.exp10, lambda ans, x: (ans * math.log(10.0),))
_special(_sp.cbrt, lambda ans, x: (1.0 / (3.0 * ans * ans),), domain=(0.1, 4.0))
cosm1 = _special(_sp.cosm1, lambda ans, x: (-sin(x),))
sindg = _special(_sp.sindg, lambda ans, x: (_RAD * cosdg(x),), domain=(-80.0, 80.0))
cosdg = _special(_sp.cosdg, lambda ans, x: (-_RAD * sindg(x),), domain=(-80.0, 80.0))
tandg = _special(_sp.tandg, lambda ans, x: (_RAD * (1.0 + ans * ans),), domain=(-60.0, 60.0))
cotdg = _special(_sp.cotdg, lambda ans, x: (-_RAD * (1.0 + ans * ans),), domain=(10.0, 80.0))
radian = _special(_sp.radian, lambda ans, d, m, s: (_RAD, _RAD / 60.0, _RAD / 3600.0))


# exprel(x) = (e^x - 1) / x = sum x^n / (n + 1)!: its series near 0, where the formula
# cancels and a constant limit would have wrong derivatives (exprel''(0) = 1/3)
_exprel_series = power_series("exprel_series", lambda n: 1.0 / math.factorial(n + 1),
                              radius=1.0)


def _exprel_slope(x, ans=None):
    """exprel'(x) = (e^x - exprel(x)) / x; ``ans`` is exprel(x) if known."""
    return near_zero(x, 1.0, lambda xs: _exprel_series(xs, k=1),
                     lambda xl: (exp(xl) - (exprel(xl) if ans is None else ans)) / xl)


exprel = _special(_sp.exprel, lambda ans, x: (_exprel_slope(x, ans),))
dawsn = _special(_sp.dawsn, lambda ans, x: (1.0 - 2.0 * x * ans,))
erfi = _special(_sp.erfi, lambda ans, x: ((2.0 / _SQRT_PI) * exp(x * x),))
ndtri_exp = _special(_sp.ndtri_exp,
                     lambda ans, y: (exp(y + 0.5 * (ans * ans) + _HALF_LOG_2PI),),
                     domain=(-3.0, -0.1))

# more of the gamma family -------------------------------------------------------------------------
rgamma = _special(_sp.rgamma, lambda ans, x: (-ans * digamma(x),), domain=(0.2, 4.0))
loggamma = _special(_sp.loggamma, lambda ans, x: (digamma(x),), domain=(0.2, 4.0))
poch = _special(_sp.poch, lambda ans, z, m: (ans * (digamma(z + m) - digamma(z)),
                                             ans * digamma(z + m)), domain=(0.2, 3.0))


def _multigammaln(a, d):
    ans = _sp.multigammaln(a, d)
    if getattr(a, "dtype", None) == np.float32:
        ans = np.asarray(ans, np.float32)[()]
    return ans


_multigammaln.__name__ = "multigammaln"
multigammaln = _special(_multigammaln, lambda ans, a, d: (
    sum(digamma(a - 0.5 * j) for j in range(int(d))), _NO["multigammaln", "d"]), domain=(2.0, 5.0))
# log(1 + v) / v = sum (-v)^n / (n + 1), 1 at v = 0: spence' and inv_boxcox's slope in lmbda
_log1p_ratio_series = power_series("log1p_ratio_series", lambda n: (-1.0) ** n / (n + 1),
                                   radius=0.25)


def _log1p_ratio(v):
    return near_zero(v, 0.25, _log1p_ratio_series, lambda vl: log1p(vl) / vl)


def _log1p_ratio_slope(v):
    return near_zero(v, 0.25, lambda vs: _log1p_ratio_series(vs, k=1),
                     lambda vl: (vl / (1.0 + vl) - log1p(vl)) / (vl * vl))


# spence' = log(z) / (1 - z), -1 at z = 1
spence = _special(_sp.spence, lambda ans, z: (-_log1p_ratio(z - 1.0),), domain=(0.2, 3.0))
ellipk = _special(_sp.ellipk, lambda ans, m: ((ellipe(m) - (1.0 - m) * ans)
                                              / (2.0 * m * (1.0 - m)),), domain=(0.1, 0.9))
ellipe = _special(_sp.ellipe, lambda ans, m: ((ans - ellipk(m)) / (2.0 * m),),
                  domain=(0.1, 0.9))

# Box-Cox transforms (lmbda differentiated too) ------------------------------------------------------


def _boxcox_partials(ans, x, lm):
    # boxcox = L exprel(lmbda L) with L = log x: d/d lmbda = L^2 exprel'(lmbda L), which
    # is (x^l L - ans) / l, and L^2 / 2 at l == 0 with its own derivatives there
    lx = log(x)
    return (x ** (lm - 1.0), lx * lx * _exprel_slope(lm * lx))


def _inv_boxcox_partials(ans, y, lm, shift=0.0):
    # u = exp(y q(lmbda y)) with q(v) = log(1 + v) / v: d/d lmbda = u y^2 q'(lmbda y)
    u = ans + shift  # x, or 1 + x for inv_boxcox1p
    v = lm * y
    return (u / (v + 1.0), u * y * y * _log1p_ratio_slope(v))


boxcox = _special(_sp.boxcox, _boxcox_partials, domain=(0.2, 2.0))
boxcox1p = _special(_sp.boxcox1p, lambda ans, x, lm: _boxcox_partials(ans, 1.0 + x, lm),
                    domain=(0.2, 2.0))
inv_boxcox = _special(_sp.inv_boxcox, _inv_boxcox_partials, domain=(0.2, 2.0))
inv_boxcox1p = _special(_sp.inv_boxcox1p,
                        lambda ans, y, lm: _inv_boxcox_partials(ans, y, lm, 1.0),
                        domain=(0.2, 2.0))

# robust losses --------------------------------------------------------------------------------------


def _huber_partials(ans, delta, r):
    inside = absolute(r) <= delta
    return (where(inside, 0.0, absolute(r) - delta), where(inside, r, delta * sign(r)))


def _pseudo_huber_partials(ans, delta, r):
    s = sqrt(1.0 + (r / delta) ** 2)
    return (2.0 * delta * (s - 1.0) - r * r / (delta * s), r / s)


huber = _special(_sp.huber, _huber_partials, domain=(0.2, 2.0))
pseudo_huber = _special(_sp.pseudo_huber, _pseudo_huber_partials, domain=(0.2, 2.0))

# Bessel functions of the first and second kind, modified of the second kind -------------------------
jv = _special(_sp.jv, lambda ans, v, x: (_NO["jv", "v"], 0.5 * (jv(v - 1, x) - jv(v + 1, x))),
              domain=(0.2, 3.0))
yv = _special(_sp.yv, lambda ans, v, x: (_NO["yv", "v"], 0.5 * (yv(v - 1, x) - yv(v + 1, x))),
              domain=(0.2, 3.0))
kv = _special(_sp.kv, lambda ans, v, x: (_NO["kv", "v"], -0.5 * (kv(v - 1, x) + kv(v + 1, x))),
              domain=(0.2, 3.0))
kve = _special(_sp.kve, lambda ans, v, x: (_NO["kve", "v"],
                                           ans - 0.5 * (kve(v - 1, x) + kve(v + 1, x))),
               domain=(0.2, 3.0))
j0 = _special(_sp.j0, lambda ans, x: (-j1(x),), domain=(0.2, 3.0))
j1 = _special(_sp.j1, lambda ans, x: (0.5 * (j0(x) - jv(2.0, x)),), domain=(0.2, 3.0))
y0 = _special(_sp.y0, lambda ans, x: (-y1(x),), domain=(0.2, 3.0))
yn = _special(_sp.yn, lambda ans, n, x: (_NO["yn", "n"], 0.5 * (yn(n - 1, x) - yn(n + 1, x))),
              domain=(0.2, 3.0))
y1 = _special(_sp.y1, lambda ans, x: (0.5 * (y0(x) - yv(2.0, x)),), domain=(0.2, 3.0))
k0 = _special(_sp.k0, lambda ans, x: (-k1(x),), domain=(0.2, 3.0))
k1 = _special(_sp.k1, lambda ans, x: (-0.5 * (k0(x) + kv(2.0, x)),), domain=(0.2, 3.0))
k0e = _special(_sp.k0e, lambda ans, x: (ans - k1e(x),), domain=(0.2, 3.0))
k1e = _special(_sp.k1e, lambda ans, x: (ans - 0.5 * (k0e(x) + kve(2.0, x)),), domain=(0.2, 3.0))


def _traced(*xs):
    return any(isinstance(x, Tracer) for x in xs)



def several_results(np_fn, derivatives):
    """A primitive of one argument with several results (``sici``, ``airy``...).

    ``derivatives(ans, x, wanted)`` gives each result's derivative in ``x``, ``None`` where
    ``wanted`` is false: reverse mode asks only for the results that have a cotangent, so
    Si's gradient at 0 never meets Ci's infinite slope there.
    """
    # every result elementwise in x, and so under wg.vmap; no domain: several results, each
    # family's own tests check them
    p = primitive(np_fn, name=np_fn.__name__, multiple_results=True,
                  sparsity=patterns.ELEMENTWISE, batch="elementwise")

    @p.frule(symbolic_zeros=True)
    def jvp(primals, tangents):
        (x,), (dx,) = primals, tangents
        ans = p(x)
        if dx is None:
            return ans, (None,) * len(ans)
        with np.errstate(divide="ignore"):  # an infinite slope (Ci' at 0) is a value here
            ds = derivatives(ans, x, (True,) * len(ans))
        return ans, tuple(dx * d for d in ds)

    @p.rrule
    def vjp(x):
        ans = p(x)

        def pullback(g):
            wanted = tuple(gk is not None for gk in g)
            if not any(wanted):
                return (None,)
            out = None
            for gk, d in zip(g, derivatives(ans, x, wanted)):
                if gk is not None:
                    out = gk * d if out is None else out + gk * d
            return (out,)
        return ans, pullback

    SPECIAL[p.name] = p
    return p
