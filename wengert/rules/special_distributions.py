"""``scipy.special`` distribution functions (CDFs, their complements and inverses),
orthogonal polynomials and ``binom``, declared by their partials (see special_base.py).

Shape parameters, counts and degrees are not differentiated: their partial is a
``NoDerivative`` (most have no closed form), so differentiating one raises.  A derivative in
the variable is the density (for a CDF) or one over it at the result (for an inverse).
Integer parameters are floored or truncated exactly as SciPy does before its formula.
"""
import math

import numpy as np
import scipy.special as _sp

from ..core import NoDerivative, Tracer
from ..arrays import dtype_of
from .elementwise import clip, cos, exp, floor, log, log1p, maximum, minimum, sin, trunc, where
from .special_base import (_keep_float32, _special, beta, betaln, digamma, gammaln, xlog1py,
                      xlogy)

__all__ = ["bdtr", "bdtrc", "bdtri", "binom", "chdtr", "chdtrc", "chdtri", "eval_chebyc",
           "eval_chebys", "eval_chebyt", "eval_chebyu", "eval_gegenbauer", "eval_genlaguerre",
           "eval_hermite", "eval_hermitenorm", "eval_jacobi", "eval_laguerre", "eval_legendre",
           "eval_sh_chebyt", "eval_sh_chebyu", "eval_sh_jacobi", "eval_sh_legendre", "fdtr",
           "fdtrc", "fdtri", "gdtr", "gdtrc", "gdtria", "gdtrix", "kolmogi", "kolmogorov", "nbdtr",
           "nbdtrc", "nbdtri", "pdtr", "pdtrc", "pdtri", "stdtr", "stdtrit"]

_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _no(name, *args):
    return tuple(NoDerivative(f"scipy.special.{name}", a) for a in args)


def _cast(v, like):
    """A parameter that is not differentiated, in the float dtype of ``like`` (the result):
    an integer array or a Python float next to float32 values makes SciPy and NumPy give
    float64, and the partial must keep the result's dtype."""
    if isinstance(v, Tracer):
        return v
    dt = dtype_of(like)
    return np.asarray(v, dtype=dt if dt.kind == "f" else np.float64)


def _declare(name, partials, wrap=True):
    """``wrap``: only the last argument is differentiated, and sets a float32 result."""
    fn = getattr(_sp, name)
    return _special(_keep_float32(fn) if wrap else fn, partials, domain=None)


def _masked(cond, value, safe_args, formula):
    """``where(cond, value, formula(*safe_args))``, skipping ``where`` when no element is
    masked; ``safe_args`` are already replaced where masked, so that the formula's own
    derivatives there are finite (a nan times the zero cotangent is still nan)."""
    if not np.any(cond):
        return formula(*safe_args)
    return where(cond, value, formula(*safe_args))


def _stirling_rest(x):
    """log Gamma(x) - (x - 1/2) log x + x - log(2 pi) / 2, for x >= 50 (error < 1e-18)."""
    r = 1.0 / (x * x)
    return (1.0 / 12.0 - r * (1.0 / 360.0 - r * (1.0 / 1260.0 - r / 1680.0))) / x


def _lbeta(a, b):
    """log B(a, b) for a, b > 0.  SciPy's betaln loses up to 1e-9 (absolute) when one
    argument is between 1e3 and 1e7 (betaln(0.5, 5e5) is off by 2e-10): from 50 on, the
    large argument's gammas are taken by Stirling's series, their ratio without cancelling."""
    lo, hi = minimum(a, b), maximum(a, b)
    big = hi >= 50.0

    def stirling(lo, hi):
        # log Gamma(lo + hi) - log Gamma(hi) - lo log hi, without forming either gamma
        ratio = (lo + hi - 0.5) * log1p(lo / hi) - lo + _stirling_rest(lo + hi) \
            - _stirling_rest(hi)
        return gammaln(lo) - lo * log(hi) - ratio
    if not np.any(big):
        return betaln(a, b)
    if np.all(big):
        return stirling(lo, hi)
    return where(big, stirling(lo, where(big, hi, 50.0)), betaln(where(big, 1.0, a), b))


# Student's t ---------------------------------------------------------------------------------
def _t_pdf(df, t):
    df = _cast(df, t)
    inf = df == math.inf  # SciPy's stdtr is ndtr there
    dfs = where(inf, 1.0, df) if np.any(inf) else df
    pdf = exp(-0.5 * log(dfs) - _lbeta(_cast(0.5, t), 0.5 * dfs)
              - (0.5 * dfs + 0.5) * log1p(t * t / dfs))
    return where(inf, exp(-0.5 * (t * t)) / _SQRT_2PI, pdf) if np.any(inf) else pdf


_NO_STDTR = _no("stdtr", "df")
_NO_STDTRIT = _no("stdtrit", "df")
stdtr = _declare("stdtr", lambda ans, df, t: _NO_STDTR + (_t_pdf(df, t),))
stdtrit = _declare("stdtrit", lambda ans, df, p: _NO_STDTRIT + (1.0 / _t_pdf(df, ans),))


# gamma and chi-squared ----------------------------------------------------------------------------
def _gamma_pdf(a, x):
    """x^(a-1) e^-x / Gamma(a); xlogy makes x = 0 give the limit (1 for a = 1, not nan)."""
    return exp(xlogy(a - 1.0, x) - x - gammaln(a))


def _chi2_pdf(v, x):
    return 0.5 * _gamma_pdf(0.5 * _cast(v, x), 0.5 * x)


_NO_CHDTR, _NO_CHDTRC, _NO_CHDTRI = _no("chdtr", "v"), _no("chdtrc", "v"), _no("chdtri", "v")
chdtr = _declare("chdtr", lambda ans, v, x: _NO_CHDTR + (_chi2_pdf(v, x),))
chdtrc = _declare("chdtrc", lambda ans, v, x: _NO_CHDTRC + (-_chi2_pdf(v, x),))
# chdtri inverts the complement chdtrc
chdtri = _declare("chdtri", lambda ans, v, p: _NO_CHDTRI + (-1.0 / _chi2_pdf(v, ans),))


# gdtr(a, b, x) = gammainc(b, a x): a is the rate, b the shape
def _gdtr_partials(sign, no):
    def partials(ans, a, b, x):
        g = sign * _gamma_pdf(_cast(b, ans), a * x)
        return x * g, no, a * g
    return partials


gdtr = _declare("gdtr", _gdtr_partials(1.0, *_no("gdtr", "b")), wrap=False)
gdtrc = _declare("gdtrc", _gdtr_partials(-1.0, *_no("gdtrc", "b")), wrap=False)
_NO_GDTRIX, _NO_GDTRIA = _no("gdtrix", "b")[0], _no("gdtria", "b")[0]
# the quantile in x (gdtrix) and in the rate a (gdtria): x a is the standard quantile
gdtrix = _declare("gdtrix", lambda ans, a, b, p: (
    -ans / a, _NO_GDTRIX, 1.0 / (a * _gamma_pdf(_cast(b, ans), a * ans))), wrap=False)
gdtria = _declare("gdtria", lambda ans, p, b, x: (
    1.0 / (x * _gamma_pdf(_cast(b, ans), ans * x)), _NO_GDTRIA, -ans / x), wrap=False)


# F ------------------------------------------------------------------------------------------------
def _f_pdf(dfn, dfd, x):
    d1, d2 = _cast(dfn, x), _cast(dfd, x)
    a, b = 0.5 * d1, 0.5 * d2
    return exp(a * log(d1 / d2) + xlogy(a - 1.0, x) - (a + b) * log1p(d1 * x / d2)
               - _lbeta(a, b))


_NO_FDTR, _NO_FDTRC, _NO_FDTRI = (_no(f, "dfn", "dfd") for f in ("fdtr", "fdtrc", "fdtri"))
fdtr = _declare("fdtr", lambda ans, dfn, dfd, x: _NO_FDTR + (_f_pdf(dfn, dfd, x),))
fdtrc = _declare("fdtrc", lambda ans, dfn, dfd, x: _NO_FDTRC + (-_f_pdf(dfn, dfd, x),))
fdtri = _declare("fdtri", lambda ans, dfn, dfd, p: _NO_FDTRI + (1.0 / _f_pdf(dfn, dfd, ans),))


# binomial and negative binomial: k is floored and n truncated, as SciPy does ----------------------
def _bdtr_dp(k, n, p):
    """d/dp bdtr(k, n, p) = d/dp betainc(n - k, k + 1, 1 - p)."""
    k, n = floor(_cast(k, p)), trunc(_cast(n, p))
    full = k >= n  # the CDF is 1 for every p: derivative 0 (p = 1 would give nan)
    return _masked(full, 0.0, (where(full, 0.5, p) if np.any(full) else p,), lambda p: -exp(
        xlogy(k, p) + xlog1py(n - k - 1.0, -p) - _lbeta(where(full, 1.0, n - k), k + 1.0)))


def _nbdtr_dp(k, n, p):
    """d/dp nbdtr(k, n, p) = d/dp betainc(n, k + 1, p)."""
    k, n = floor(_cast(k, p)), trunc(_cast(n, p))
    return exp(xlogy(n - 1.0, p) + xlog1py(k, -p) - _lbeta(n, k + 1.0))


def _declare_kn(name, partial):
    no = _no(name, "k", "n")
    return _declare(name, lambda ans, k, n, p: no + (partial(ans, k, n, p),))


bdtr = _declare_kn("bdtr", lambda ans, k, n, p: _bdtr_dp(k, n, p))
bdtrc = _declare_kn("bdtrc", lambda ans, k, n, p: -_bdtr_dp(k, n, p))
bdtri = _declare_kn("bdtri", lambda ans, k, n, y: 1.0 / _bdtr_dp(k, n, ans))  # p of bdtr = y
nbdtr = _declare_kn("nbdtr", lambda ans, k, n, p: _nbdtr_dp(k, n, p))
nbdtrc = _declare_kn("nbdtrc", lambda ans, k, n, p: -_nbdtr_dp(k, n, p))
nbdtri = _declare_kn("nbdtri", lambda ans, k, n, y: 1.0 / _nbdtr_dp(k, n, ans))


# Poisson: pdtr(k, m) = gammaincc(floor(k) + 1, m) -------------------------------------------------
def _pdtr_dm(k, m):
    k = floor(_cast(k, m))
    return -exp(xlogy(k, m) - m - gammaln(k + 1.0))  # minus the pmf at k


_NO_PDTR, _NO_PDTRC, _NO_PDTRI = _no("pdtr", "k"), _no("pdtrc", "k"), _no("pdtri", "k")
pdtr = _declare("pdtr", lambda ans, k, m: _NO_PDTR + (_pdtr_dm(k, m),))
pdtrc = _declare("pdtrc", lambda ans, k, m: _NO_PDTRC + (-_pdtr_dm(k, m),))
pdtri = _declare("pdtri", lambda ans, k, y: _NO_PDTRI + (1.0 / _pdtr_dm(k, ans),))


# Kolmogorov's limiting distribution ---------------------------------------------------------------
_KOLMOG_C = [(2 * j - 1) ** 2 * math.pi ** 2 / 8.0 for j in range(1, 5)]


def _kolmogp(y):
    """d/dy kolmogorov(y), from whichever theta-function series converges fast at y.

    y >= 1: kolmogorov = 2 sum (-1)^(j-1) e^(-2 j^2 y^2); five terms leave < 1e-19.
    y < 1: kolmogorov = 1 - sqrt(2 pi) / y sum e^(-(2j-1)^2 pi^2 / (8 y^2)); four terms
    leave < 1e-23.  Each series is evaluated at y clipped into its own range, so the
    unselected one stays finite (y = 0 or inf), and y < 0.05 gives 0: the derivative there
    is below 1e-200 (and exactly 0 for y <= 0, where kolmogorov is 1).
    """
    ya = clip(y, 1.0, 40.0)
    ya2 = ya * ya
    sa = 0.0
    for j in range(1, 6):
        sa = sa + ((-1.0) ** (j - 1) * j * j) * exp((-2.0 * j * j) * ya2)
    u = 1.0 / clip(y, 0.05, 1.0) ** 2
    sb = 0.0
    for c in _KOLMOG_C:
        sb = sb + exp(-c * u) * (2.0 * c * u - 1.0)
    return _masked(y < 0.05, 0.0, (), lambda: where(y < 1.0, -_SQRT_2PI * u * sb, -8.0 * ya * sa))


kolmogorov = _special(_sp.kolmogorov, lambda ans, y: (_kolmogp(y),), domain=(0.3, 2.0))
kolmogi = _special(_sp.kolmogi, lambda ans, p: (1.0 / _kolmogp(ans),), domain=(0.1, 0.9))


# orthogonal polynomials: d/dx of degree n is a polynomial of degree n - 1 -------------------------
# The identities are those of the hypergeometric forms, so they hold for the non-integer degrees
# SciPy accepts too.  The degree is passed on as given (an integer degree keeps SciPy's exact
# recurrence); at n = 0 the derivative is 0, without evaluating degree -1 (nan in some).
def _lower(n):
    """n - 1, and 0 where n == 0 (the caller masks or multiplies by n there)."""
    return where(n == 0, 0, n - 1) if np.any(n == 0) else n - 1


def _zero_at_0(n, d):
    return where(n == 0, 0.0, d) if np.any(n == 0) else d


def _poly(name, partial, *params):
    no = _no(name, "n", *params)
    return _declare(name, lambda ans, *a: no + (partial(ans, *a),))


def _geg(n, alpha, x):
    return eval_gegenbauer(n, alpha, x)


# C_n^(a)' = 2 a C_{n-1}^(a+1); P_n = C_n^(1/2), U_n = C_n^(1)
eval_gegenbauer = _poly("eval_gegenbauer", lambda ans, n, alpha, x: _zero_at_0(
    n, 2.0 * _cast(alpha, ans) * _geg(_lower(n), _cast(alpha, ans) + 1.0, x)), "alpha")
eval_legendre = _poly("eval_legendre", lambda ans, n, x: _zero_at_0(
    n, _geg(_lower(n), 1.5, x)))
eval_chebyu = _poly("eval_chebyu", lambda ans, n, x: _zero_at_0(
    n, 2.0 * _geg(_lower(n), 2.0, x)))
# T_n' = n U_{n-1}
eval_chebyt = _poly("eval_chebyt", lambda ans, n, x: _cast(n, ans) * eval_chebyu(_lower(n), x))
# H_n' = 2 n H_{n-1}, He_n' = n He_{n-1}
eval_hermite = _poly("eval_hermite", lambda ans, n, x: 2.0 * _cast(n, ans)
                     * eval_hermite(_lower(n), x))
eval_hermitenorm = _poly("eval_hermitenorm", lambda ans, n, x: _cast(n, ans)
                         * eval_hermitenorm(_lower(n), x))
# L_n^(a)' = -L_{n-1}^(a+1)
eval_genlaguerre = _poly("eval_genlaguerre", lambda ans, n, alpha, x: _zero_at_0(
    n, -eval_genlaguerre(_lower(n), _cast(alpha, ans) + 1.0, x)), "alpha")
eval_laguerre = _poly("eval_laguerre", lambda ans, n, x: _zero_at_0(
    n, -eval_genlaguerre(_lower(n), 1.0, x)))
# P_n^(a,b)' = (n + a + b + 1) / 2 P_{n-1}^(a+1,b+1)
eval_jacobi = _poly("eval_jacobi", lambda ans, n, a, b, x: _zero_at_0(n, (
    0.5 * (_cast(n, ans) + _cast(a, ans) + _cast(b, ans) + 1.0)
    * eval_jacobi(_lower(n), _cast(a, ans) + 1.0, _cast(b, ans) + 1.0, x))), "alpha", "beta")
# shifted: f(2x - 1); G_n^(p,q) = P_n^(p-q,q-1)(2x-1) / binom(2n+p-1, n) has
# G_n^(p,q)' = n G_{n-1}^(p+2,q+1)
eval_sh_legendre = _poly("eval_sh_legendre", lambda ans, n, x: _zero_at_0(
    n, 2.0 * _geg(_lower(n), 1.5, 2.0 * x - 1.0)))
eval_sh_chebyu = _poly("eval_sh_chebyu", lambda ans, n, x: _zero_at_0(
    n, 4.0 * _geg(_lower(n), 2.0, 2.0 * x - 1.0)))
eval_sh_chebyt = _poly("eval_sh_chebyt", lambda ans, n, x: 2.0 * _cast(n, ans)
                       * eval_sh_chebyu(_lower(n), x))
eval_sh_jacobi = _poly("eval_sh_jacobi", lambda ans, n, p, q, x: _cast(n, ans) * eval_sh_jacobi(
    _lower(n), _cast(p, ans) + 2.0, _cast(q, ans) + 1.0, x), "p", "q")
# on [-2, 2]: C_n(x) = 2 T_n(x/2), S_n(x) = U_n(x/2)
eval_chebys = _poly("eval_chebys", lambda ans, n, x: _zero_at_0(
    n, _geg(_lower(n), 2.0, 0.5 * x)))
eval_chebyc = _poly("eval_chebyc", lambda ans, n, x: _cast(n, ans) * eval_chebys(_lower(n), x))


# binomial coefficient, continuous in both arguments -----------------------------------------------
def _reflected(n, s):
    """Gamma(n+1) / Gamma(n+1-s) times d/dw (1/Gamma(w)) at w = 1 - s, by the reflection
    1/Gamma(w) = Gamma(1-w) sin(pi w) / pi: finite where Gamma(w) has a pole."""
    return -beta(n + 1.0, s) * (cos(math.pi * s) + digamma(s) * sin(math.pi * s) / math.pi)


def _binom_partials(ans, n, k):
    # binom = Gamma(n+1) / (Gamma(k+1) Gamma(n-k+1)).  Where Gamma(n-k+1) or Gamma(k+1) has a
    # pole (binom(2, 3) = 0), binom * digamma is 0 * inf, but the derivative is not 0
    # (d/dn binom(n, 3) = -1/6 at n = 1): below 1/2 the 1/Gamma factor is differentiated
    # through the reflection formula instead.
    z = n - k + 1.0
    low_z, low_k = z < 0.5, k < -0.5
    # az, ak: Gamma(n+1) times d/dw (1/Gamma(w)) times the other 1/Gamma, at w = z and k + 1;
    # each formula is evaluated at an argument replaced where it is not used
    az = -ans * digamma(where(low_z, 1.0, z) if np.any(low_z) else z)
    if np.any(low_z):
        az = where(low_z, _reflected(n, where(low_z, k - n, 1.0)), az)
    ak = -ans * digamma(where(low_k, 1.0, k + 1.0) if np.any(low_k) else k + 1.0)
    if np.any(low_k):
        ak = where(low_k, _reflected(n, where(low_k, -k, 1.0)), ak)
    return ans * digamma(n + 1.0) + az, ak - az


binom = _special(_sp.binom, _binom_partials, domain=(0.2, 4.0))
