"""``scipy.special`` Bessel-type functions beyond special_base.py: spherical, Struve, Kelvin, Airy,
derivatives and integrals, declared by their partials (see special_base.py).

Orders (``kn``'s ``n``, ``struve``'s ``v``, ``spherical_jn``'s ``n``) are not differentiated:
their partial is a ``NoDerivative``.  The derivative orders (``jvp``'s ``n``,
``spherical_jn``'s ``derivative``) are static parameters.  Functions with several results
(``airy``, ``itj0y0``, ...) are primitives with their own forward and reverse rules.
Arguments are taken as real: ``jve``'s and ``airye``'s scalings are not analytic in a complex
one.
"""
import math

import numpy as np
import scipy.special as _sp

from ..core import NoDerivative, Tracer, primitive
from . import patterns
from ._series import near_zero, power_series
from .elementwise import maximum, sqrt, where
from .special_base import (SPECIAL, _keep_float32, _special, i0, j0, k0, rgamma, several_results,
                      y0)

__all__ = ["airy", "airye", "bei", "beip", "ber", "berp", "h1vp", "h2vp", "it2i0k0", "it2j0y0",
           "it2struve0", "itairy", "iti0k0", "itj0y0", "itmodstruve0", "itstruve0", "ivp", "jve",
           "jvp", "kei", "keip", "ker", "kerp", "kn", "kvp", "modstruve", "spherical_in",
           "spherical_jn", "spherical_kn", "spherical_yn", "struve", "yve", "yvp"]

_SQRT_PI = math.sqrt(math.pi)


def _no(name, arg):
    return NoDerivative(f"scipy.special.{name}", arg)


_SINGLE = {np.dtype(np.float64): np.float32, np.dtype(np.complex128): np.complex64}


def _like_x(ans, x):
    """scipy's Python-level wrappers upcast float32: keep ``x``'s precision (``h1vp`` of a
    float32 is complex64)."""
    if getattr(x, "dtype", None) == np.float32:
        single = _SINGLE.get(getattr(ans, "dtype", None))
        if single is not None:
            return ans.astype(single)
    return ans


def _const(c, like):
    """A constant computed from an integer order, in ``like``'s float dtype: an int64 order
    (``n / (2 n + 1)``) would upcast float32 through NumPy's promotion."""
    if isinstance(c, (Tracer, int, float)):
        return c
    dt = getattr(like, "dtype", None)
    return np.asarray(c, dt if dt is not None and dt.kind == "f" else np.float64)[()]


def _order_like(v, x):
    """A Python-float order as ``x``'s float32: SciPy's Struve loops take float64 before
    float32 even for a Python scalar."""
    if type(v) is float and getattr(x, "dtype", None) == np.float32:
        return np.float32(v)
    return v


def _safe(x, bad):
    """``x`` with 1 where ``bad``: a denominator for the branch ``where`` discards there."""
    return where(bad, 1.0, x)


# K_n of integer order (float32: SciPy's integer-order loop gives float64) ------------------
_NO_KN = _no("kn", "n")
kn = _special(_keep_float32(_sp.kn), lambda ans, n, x: (
    _NO_KN, -0.5 * (kn(n - 1, x) + kn(n + 1, x))), domain=None)  # K_{-n} = K_n: n = 0 too

# exponentially scaled J_v, Y_v: for real x, jve = jv and yve = yv (the factor is
# exp(-|Im x|)), so the same recurrences, on the scaled functions
_NO_JVE, _NO_YVE = _no("jve", "v"), _no("yve", "v")
jve = _special(_sp.jve, lambda ans, v, x: (_NO_JVE, 0.5 * (jve(v - 1, x) - jve(v + 1, x))),
               domain=None)
yve = _special(_sp.yve, lambda ans, v, x: (_NO_YVE, 0.5 * (yve(v - 1, x) - yve(v + 1, x))),
               domain=None)


# spherical Bessel functions -----------------------------------------------------------------
# f(n, z, derivative=True) is SciPy's f_n'.  Its derivative, f_n'' = (a n f'_{n-1}
# + b (n+1) f'_{n+1}) / (2n+1), differentiates DLMF 10.51.2 / 10.51.4 (with SciPy's k_n =
# sqrt(pi / 2z) K_{n+1/2}): no division by z, so j_n'' and i_n'' are right at z = 0 too.
def _spherical(fn, a, b):
    name = fn.__name__
    no_n = _no(name, "n")

    def impl(n, z, derivative=False):
        return _like_x(fn(n, z, derivative), z)

    impl.__name__, impl.__doc__ = name, fn.__doc__

    def partials(ans, n, z, derivative=False):
        if not derivative:
            return no_n, p(n, z, True)
        k = 2 * n + 1
        lo = maximum(n - 1, 0)  # the n f'_{n-1} term is 0 at n = 0, and SciPy's f_{-1} is nan
        return no_n, (_const(a * n / k, ans) * p(lo, z, True)
                      + _const(b * (n + 1) / k, ans) * p(n + 1, z, True))

    p = _special(impl, partials, domain=None)
    return p


spherical_jn = _spherical(_sp.spherical_jn, 1.0, -1.0)
spherical_yn = _spherical(_sp.spherical_yn, 1.0, -1.0)
spherical_in = _spherical(_sp.spherical_in, 1.0, 1.0)
spherical_kn = _spherical(_sp.spherical_kn, -1.0, -1.0)


# Struve functions ------------------------------------------------------------------------------
# DLMF 11.4.23-24 and 11.4.25-26, with T_v = (x/2)^v / (sqrt(pi) Gamma(v + 3/2)):
#   H_v' = (H_{v-1} - H_{v+1} + T_v) / 2,   L_v' = (L_{v-1} + L_{v+1} + T_v) / 2.
# At v = 0 the lower neighbour is H_{-1} = T_0 - H_1 (L_{-1} = T_0 + L_1): H_{-1}' is inf - inf
# at x = 0, and this way integer orders >= 0 never recur below 0, so every derivative is
# finite at x = 0.
def _power_term(name):
    """c (x/2)^v, whose derivative (v c / 2) (x/2)^(v-1) is again one: no 0 * inf at x = 0
    (power's v x^(v-1) at v = 0) and no Gamma ratio (0 / 0 at v = -1/2)."""
    no_v = _no(name, "v")

    def impl(v, x, c):
        with np.errstate(divide="ignore"):  # 0^v for v < 0: inf, as T_v is there
            return c * np.power(0.5 * x, v)

    impl.__name__ = f"{name}_power_term"
    p = primitive(impl, broadcasting=True, sparsity=patterns.ELEMENTWISE)
    # at v = 0 the derivative is 0 times a finite power (order 0, not -1)
    p.partials(lambda ans, v, x, c: (no_v, p(v - 1 + (v == 0), x, 0.5 * v * c), no_v))
    return p


def _struve_partials(name, sign):
    no_v = _no(name, "v")
    term = _power_term(name)

    def partials(ans, v, x):
        f = SPECIAL[name]
        up = f(v + 1, x)  # first: differentiating v raises here, naming the function
        t = term(v, x, rgamma(v + 1.5) / _SQRT_PI)
        zero = v == 0
        down = where(zero, t + sign * up, f(v - 1 + zero, x))
        return no_v, 0.5 * (down + sign * up + t)
    return partials


struve = _special(_sp.struve, _struve_partials("struve", -1.0), domain=None)
modstruve = _special(_sp.modstruve, _struve_partials("modstruve", 1.0), domain=None)


# derivatives of Bessel functions: d/dz f^(n)(v, z) = f^(n+1)(v, z) -----------------------
def _bessel_derivative(fn):
    name = fn.__name__
    no_v = _no(name, "v")

    def impl(v, z, n=1):
        return _like_x(fn(v, z, n), z)

    impl.__name__, impl.__doc__ = name, fn.__doc__
    p = _special(impl, lambda ans, v, z, n=1: (no_v, p(v, z, n + 1)), domain=None)
    return p


jvp = _bessel_derivative(_sp.jvp)
yvp = _bessel_derivative(_sp.yvp)
ivp = _bessel_derivative(_sp.ivp)
kvp = _bessel_derivative(_sp.kvp)
h1vp = _bessel_derivative(_sp.h1vp)  # complex results, also for a real z
h2vp = _bessel_derivative(_sp.h2vp)


# Kelvin functions ------------------------------------------------------------------------------
# ber + i bei and ker + i kei solve x^2 w'' + x w' - i x^2 w = 0, so
# ber'' = -ber'/x - bei, bei'' = -bei'/x + ber, and the same for ker, kei.
def _kelvin_second(ans, x, other, sign, at_zero):
    """-w'/x + sign * other(x), and its limit ``at_zero`` at x = 0 (``ans`` is w'): ker and
    kei, whose log singularity makes it infinite."""
    zero = x == 0
    return where(zero, at_zero, sign * other(x) - ans / _safe(x, zero))


def _kelvin_ratio_coef(offset, denominator):
    """Coefficients of ber'(x)/x (offset 2) or bei'(x)/x (offset 0): x^n with n = 4k - 2 or
    4k, from ber = sum (-1)^k (x/2)^(4k) / (2k)!^2 and bei = sum (-1)^k (x/2)^(4k+2) /
    (2k+1)!^2."""
    def coef(n):
        if (n + offset) % 4:
            return 0.0
        k = (n + offset) // 4
        power = 4 * k - offset + 2  # of x/2 in ber or bei
        return (-1.0) ** k * power / (2.0 ** power * math.factorial(denominator(k)) ** 2)
    return coef


# ber'(x)/x and bei'(x)/x by their series near 0, where ber and bei are analytic: every
# derivative of the second derivatives at 0 is then exact (the fourth of ber is -3/8)
_berp_over_x = power_series("berp_over_x_series", _kelvin_ratio_coef(2, lambda k: 2 * k),
                            radius=1.0)
_beip_over_x = power_series("beip_over_x_series", _kelvin_ratio_coef(0, lambda k: 2 * k + 1),
                            radius=1.0)


def _kelvin_analytic_second(ans, x, other, sign, ratio):
    """-w'/x + sign * other(x) for w = ber or bei (``ans`` is w')."""
    return sign * other(x) - near_zero(x, 1.0, ratio, lambda xl: ans / xl)


ber = _special(_sp.ber, lambda ans, x: (berp(x),), domain=(-3.0, 3.0))
bei = _special(_sp.bei, lambda ans, x: (beip(x),), domain=(-3.0, 3.0))
ker = _special(_sp.ker, lambda ans, x: (kerp(x),), domain=(0.2, 3.0))
kei = _special(_sp.kei, lambda ans, x: (keip(x),), domain=(0.2, 3.0))
# ber = 1 - x^4/64 + ..., bei = x^2/4 - ...: ber''(0) = 0, bei''(0) = 1/2 (ber and bei are
# even, defined for x < 0 too)
berp = _special(_sp.berp, lambda ans, x: (
    _kelvin_analytic_second(ans, x, bei, -1.0, _berp_over_x),), domain=(-3.0, 3.0))
beip = _special(_sp.beip, lambda ans, x: (
    _kelvin_analytic_second(ans, x, ber, 1.0, _beip_over_x),), domain=(-3.0, 3.0))
# ker and kei are nan for x < 0 and have log(x) terms at 0: ker''(0+) = kei''(0+) = +inf
kerp = _special(_sp.kerp, lambda ans, x: (_kelvin_second(ans, x, kei, -1.0, np.inf),),
                domain=(0.2, 3.0))
keip = _special(_sp.keip, lambda ans, x: (_kelvin_second(ans, x, ker, 1.0, np.inf),),
                domain=(0.2, 3.0))


# integrals of Struve functions: their derivatives are the integrands ---------------------------
def _h0(x):
    return struve(_order_like(0.0, x), x)


def _l0(x):
    return modstruve(_order_like(0.0, x), x)


itstruve0 = _special(_sp.itstruve0, lambda ans, x: (_h0(x),), domain=(-3.0, 3.0))
itmodstruve0 = _special(_sp.itmodstruve0, lambda ans, x: (_l0(x),), domain=(-3.0, 3.0))


# -H0(x)/x = -(2/pi) (1 - x^2/9 + x^4/225 - ...): its series near 0, where the derivatives
# of H0/x would cancel
_h0_over_x_series = power_series(
    "h0_over_x_series", lambda n: 0.0 if n % 2 else
    (-2.0 / math.pi) * (-1.0) ** (n // 2) / math.prod(range(1, n + 2, 2)) ** 2, radius=1.0)


def _it2struve0_partial(ans, x):
    # the integral from x to infinity of H0(t)/t: -H0(x)/x
    return (near_zero(x, 1.0, _h0_over_x_series, lambda xl: -_h0(xl) / xl),)


it2struve0 = _special(_sp.it2struve0, _it2struve0_partial, domain=(-3.0, 3.0))


# functions with several results ------------------------------------------------------------------
def _several(np_fn, derivatives):
    """Several results, each derivative ``derivatives(ans, x)`` (all are cheap here)."""
    return several_results(np_fn, lambda ans, x, wanted: derivatives(ans, x))


# Ai' = Aip, Aip' = z Ai (the Airy equation), and the same for Bi
airy = _several(_sp.airy, lambda ans, z: (ans[1], z * ans[0], ans[3], z * ans[2]))


def _airye_derivatives(ans, z):
    # eAi = Ai e^zeta and eBi = Bi e^-zeta with zeta = 2/3 z^(3/2), zeta' = sqrt(z), for z > 0.
    # For z < 0 SciPy's eAi, eAip are nan and eBi = Bi (the exponent is imaginary). At z = 0,
    # s = 0: exact first derivatives, and second ones from the left (sqrt's slope is infinite
    # from the right).
    eai, eaip, ebi, ebip = ans
    pos = z > 0
    s = where(pos, sqrt(_safe(z, np.logical_not(pos))), 0.0)
    return (eaip + s * eai, z * eai + s * eaip, ebip - s * ebi, z * ebi - s * ebip)


airye = _several(_sp.airye, _airye_derivatives)


def _itairy_derivatives(ans, x):
    # integrals from 0 to x of Ai(t), Bi(t), Ai(-t), Bi(-t): right for x < 0 too, where SciPy
    # gives Apt(-x) = -Ant(x). These are the derivatives of the exact integrals: SciPy's own
    # values drift from them away from 0 (Apt(8) = 0.238 against 0.33333332)
    ai, _, bi, _ = airy(x)
    ain, _, bin_, _ = airy(-x)
    return ai, bi, ain, bin_


itairy = _several(_sp.itairy, _itairy_derivatives)

# integrals of Bessel functions of order 0
itj0y0 = _several(_sp.itj0y0, lambda ans, x: (j0(x), y0(x)))  # from 0 to x
iti0k0 = _several(_sp.iti0k0, lambda ans, x: (i0(x), k0(x)))


def _one_minus_over_x_series(sign):
    """(1 - J0(x)) / x (sign -1) or (I0(x) - 1) / x (sign 1): x/4 + s x^3/64 + x^5/2304 ..."""
    def coef(n):
        k = (n + 1) // 2
        return sign ** (k + 1) / (4.0 ** k * math.factorial(k) ** 2) if n % 2 else 0.0
    return power_series("one_minus_j0_over_x_series" if sign < 0 else
                        "i0_minus_one_over_x_series", coef, radius=1.0)


_ONE_MINUS_OVER_X = {-1.0: _one_minus_over_x_series(-1.0), 1.0: _one_minus_over_x_series(1.0)}


def _one_minus_over_x(f0, x, sign):
    """(1 - J0(x)) / x (sign -1) or (I0(x) - 1) / x (sign 1); its series near 0, where the
    difference cancels."""
    return near_zero(x, 1.0, _ONE_MINUS_OVER_X[sign],
                     lambda xl: sign * (f0(xl) - 1.0) / xl)


# (int_0^x (1 - J0(t))/t dt, int_x^inf Y0(t)/t dt): derivatives (1 - J0(x))/x and -Y0(x)/x
it2j0y0 = _several(_sp.it2j0y0, lambda ans, x: (_one_minus_over_x(j0, x, -1.0), -y0(x) / x))
# (int_0^x (I0(t) - 1)/t dt, int_x^inf K0(t)/t dt)
it2i0k0 = _several(_sp.it2i0k0, lambda ans, x: (_one_minus_over_x(i0, x, 1.0), -k0(x) / x))
