"""``scipy.special`` exponential, trigonometric and elliptic integrals, hypergeometric and zeta
functions, declared by their partials (see special_base.py).

Parameters with no closed-form derivative (a hypergeometric function's ``a, b, c``, ``expn``'s
order, ``zeta``'s exponent) are ``NoDerivative``: differentiating them raises.
"""
import math

import numpy as np
import scipy.special as _sp

from ..core import NoDerivative
from . import elementwise as _ew
from ._series import near_zero, power_series, sin_over_x_series
from .arithmetic import absolute, power, power_exponent_slope, power_slope
from .elementwise import cos, cosh, exp, rint, sin, sinh, sqrt, where
from .special_base import SPECIAL, _keep_float32, _special, _traced, erf, several_results

__all__ = ["ellipeinc", "ellipkinc", "elliprc", "elliprd", "elliprf", "elliprg", "exp1", "expi",
           "expn", "fresnel", "hyp0f1", "hyp1f1", "hyp2f1", "hyperu", "lambertw", "owens_t",
           "powm1", "shichi", "sici", "wrightomega", "zeta"]

_PI = math.pi
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_SQRT_HALF = math.sqrt(0.5)

_NO = {(name, arg): NoDerivative(f"scipy.special.{name}", arg) for name, arg in (
    ("expn", "n"), ("hyp0f1", "b"), ("hyp1f1", "a"), ("hyp1f1", "b"), ("hyp2f1", "a"),
    ("hyp2f1", "b"), ("hyp2f1", "c"), ("hyperu", "a"), ("hyperu", "b"), ("zeta", "x"))}

_PRIVATE = {}  # helper primitives: not scipy.special names, so not in SPECIAL


# exponential integrals ---------------------------------------------------------------------
exp1 = _special(_sp.exp1, lambda ans, x: (-exp(-x) / x,), domain=(0.2, 3.0))
expi = _special(_sp.expi, lambda ans, x: (exp(x) / x,), domain=(0.2, 3.0))


def _expn_dx(n, x):
    # E_n' = -E_{n-1}; SciPy has no E_{-1} (n == 0): e^-x (1 + x) / x^2, E_0 standing in
    # for it in the other branch so that neither branch is nan
    n0 = n == 0
    return -where(n0, exp(-x) * (1.0 + x) / (x * x), expn(where(n0, 1, n) - 1, x))


expn = _special(_keep_float32(_sp.expn),
                lambda ans, n, x: (_NO["expn", "n"], _expn_dx(n, x)), name="expn", domain=None)


# sine, cosine and Fresnel integrals: ufuncs with two results ---------------------------------
# sin x / x and sinh x / x (1 at 0), with derivatives (x cos x - sin x) / x^2, which cancels
# for small x (relative error eps / x^2): there, their series (rules/_series.py)
def _ratio_impl(fn):
    def impl(x):
        zero = x == 0
        return np.where(zero, 1.0, fn(x) / np.where(zero, 1.0, x))[()]
    return impl


_sinh_over_x_series = power_series(
    "sinh_over_x_series", lambda n: 0.0 if n % 2 else 1.0 / math.factorial(n + 1), radius=1.0)


def _ratio_derivative(x, series, f, df):
    return near_zero(x, 1.0, lambda xs: series(xs, k=1),
                     lambda xl: (xl * df(xl) - f(xl)) / (xl * xl))


_sin_x = _ew.elementwise(_ratio_impl(np.sin), lambda ans, x: (
    _ratio_derivative(x, sin_over_x_series, sin, cos),), name="sin_over_x", domain=None,
    registry=_PRIVATE)
_sinh_x = _ew.elementwise(_ratio_impl(np.sinh), lambda ans, x: (
    _ratio_derivative(x, _sinh_over_x_series, sinh, cosh),), name="sinh_over_x", domain=None,
    registry=_PRIVATE)

# Si' = sin x / x is 1 at 0; Ci' = cos x / x is infinite there (Ci has a log singularity).
# Ci and Chi are even in SciPy (the real part for x < 0), so cos x / x holds on both sides.
sici = several_results(_sp.sici, lambda ans, x, w: (
    _sin_x(x) if w[0] else None, cos(x) / x if w[1] else None))
shichi = several_results(_sp.shichi, lambda ans, x, w: (
    _sinh_x(x) if w[0] else None, cosh(x) / x if w[1] else None))
fresnel = several_results(_sp.fresnel, lambda ans, x, w: (
    sin((0.5 * _PI) * (x * x)) if w[0] else None,
    cos((0.5 * _PI) * (x * x)) if w[1] else None))


# hypergeometric functions: derivatives in the argument only -------------------------------------
hyp0f1 = _special(_sp.hyp0f1, lambda ans, b, x: (_NO["hyp0f1", "b"], hyp0f1(b + 1.0, x) / b),
                  domain=None)
hyp1f1 = _special(_sp.hyp1f1, lambda ans, a, b, x: (
    _NO["hyp1f1", "a"], _NO["hyp1f1", "b"], (a / b) * hyp1f1(a + 1.0, b + 1.0, x)), domain=None)
hyp2f1 = _special(_sp.hyp2f1, lambda ans, a, b, c, z: (
    _NO["hyp2f1", "a"], _NO["hyp2f1", "b"], _NO["hyp2f1", "c"],
    (a * b / c) * hyp2f1(a + 1.0, b + 1.0, c + 1.0, z)), domain=None)
hyperu = _special(_sp.hyperu, lambda ans, a, b, x: (
    _NO["hyperu", "a"], _NO["hyperu", "b"], -a * hyperu(a + 1.0, b + 1.0, x)), domain=None)


# zeta: Hurwitz's in q; in the exponent x there is no closed form -------------------------------
_hurwitz = _ew.elementwise(_sp._ufuncs._zeta, lambda ans, x, q: (
    _NO["zeta", "x"], -x * _hurwitz(x + 1.0, q)), name="zeta", domain=None, registry=_PRIVATE)
_riemann = _ew.elementwise(_sp._ufuncs._riemann_zeta, lambda ans, x: (_NO["zeta", "x"],),
                           name="zeta", domain=None, registry=_PRIVATE)


def zeta(x, q=None, out=None):
    """``scipy.special.zeta``: Riemann's ``zeta(x)``, or Hurwitz's ``zeta(x, q)``.

    Differentiable in ``q`` (``-x zeta(x + 1, q)``); ``x`` is not differentiated (there is no
    closed form), so Riemann's zeta has no derivative at all: differentiating it raises.
    """
    if out is not None or not _traced(x, q):
        return _sp.zeta(x, q, out=out)
    return _riemann(x) if q is None else _hurwitz(x, q)


zeta.composite = True
SPECIAL["zeta"] = zeta


# Owen's T, powm1, Wright omega --------------------------------------------------------------------
owens_t = _special(_sp.owens_t, lambda ans, h, a: (
    (-0.5 / _SQRT_2PI) * exp(-0.5 * (h * h)) * erf(_SQRT_HALF * (a * h)),
    exp(-0.5 * (h * h) * (1.0 + a * a)) / ((2.0 * _PI) * (1.0 + a * a))))


def _powm1_partials(ans, x, y, needs=(True, True)):
    # x ** y - 1: power's slopes (no 0 * inf at x = 0)
    return ((power_slope(power, x, y) if needs[0] else None),
            (power_exponent_slope(ans + 1.0, x, y) if needs[1] else None))


powm1 = _ew.elementwise(_sp.powm1, _powm1_partials, domain=(0.2, 2.0), registry=SPECIAL,
                        needs=True)
wrightomega = _special(_sp.wrightomega, lambda ans, x: (ans / (1.0 + ans),))


# Carlson's symmetric elliptic integrals ----------------------------------------------------------
# dR_F/dz = -R_D(x, y, z) / 6 (R_F symmetric); R_D's partials are R-functions SciPy does not
# have.  Where two of its arguments differ, partial fractions give them from R_D itself:
#   dR_D(x, y, z)/dy = (R_D(x, z, y) - R_D(x, y, z)) / (2 (y - z)),
# which cancels as y -> z; there, with c = (y + z)/2 and d = (y - z)/2,
#   dR_D/dy = -3/4 sum_k (3/2)_k / k! d^(2k) J_(3+2k)(x, c),
#   J_n(x, c) = int_0^oo (t + x)^(-1/2) (t + c)^-n dt
#             = c^(1/2-n) / (n - 1/2) 2F1(1/2, n - 1/2; n + 1/2; 1 - x/c),
# (expanding ((t + c)^2 - d^2)^(-3/2) in d^2), exact at y == z and converging like (d/c)^2.
_CLOSE = 0.1  # |d| / c below this: the series (8 terms: error < 1e-16); above, the divided
# difference loses at most a factor 1 / (2 _CLOSE) to cancellation
_SERIES = tuple(math.gamma(1.5 + k) / (math.gamma(1.5) * math.factorial(k)) for k in range(8))
# 2F1(1/2, n - 1/2; n + 1/2; 1) = Gamma(n + 1/2) Gamma(1/2) / Gamma(n), n = 3 + 2k
_GAUSS = tuple(math.gamma(3.5 + 2 * k) * math.sqrt(math.pi) / math.gamma(3 + 2 * k)
               for k in range(8))


def _rd_dy(x, y, z):
    """dR_D(x, y, z)/dy (R_D is symmetric in x, y: dR_D/dx is ``_rd_dy(y, x, z)``)."""
    c = 0.5 * (y + z)
    d = 0.5 * (y - z)
    close = absolute(d) <= _CLOSE * c
    yz = where(close, 1.0, y - z)  # the divided difference, kept finite where not used
    far = (elliprd(x, z, y) - elliprd(x, y, z)) / (2.0 * yz)
    q = where(close, d, 0.0) / c
    r = q * q
    # at x = 0 the 2F1 is at 1, where its slope is infinite: Gauss's value there, a constant,
    # so that a zero tangent of 1 - x/c does not meet that slope (0 * inf)
    x0 = x == 0
    w = where(x0, 0.0, 1.0 - x / c)
    near = 0.0
    for k in reversed(range(len(_SERIES))):  # Horner's: no 0 ** 0, whose derivative is nan
        n = 3.0 + 2.0 * k
        f = where(x0, _GAUSS[k], hyp2f1(0.5, n - 0.5, n + 0.5, w))
        near = near * r + (_SERIES[k] / (n - 0.5)) * f
    near = -0.75 * c ** -2.5 * near
    return where(close, near, far)


def _rd_partials(ans, x, y, z):
    # at most one of x, y is 0: there dR_D/dx = -inf (it grows like x^(-1/2)), and x dR_D/dx,
    # in the homogeneity relation (degree -3/2) that gives dR_D/dz, goes to 0
    x0, y0 = x == 0, y == 0
    xs, ys = where(x0, 1.0, x), where(y0, 1.0, y)
    dx, dy = _rd_dy(y, xs, z), _rd_dy(x, ys, z)
    dz = (-1.5 * ans - where(x0, 0.0, xs * dx) - where(y0, 0.0, ys * dy)) / z
    return where(x0, -np.inf, dx), where(y0, -np.inf, dy), dz


elliprd = _special(_sp.elliprd, _rd_partials, domain=(0.2, 2.0))
elliprf = _special(_sp.elliprf, lambda ans, x, y, z: (
    elliprd(y, z, x) / -6.0, elliprd(z, x, y) / -6.0, elliprd(x, y, z) / -6.0),
    domain=(0.2, 2.0))


def _rc_partials(ans, x, y):
    # y > 0: R_C(x, y) = R_F(x, y, y); y < 0: SciPy's value is Cauchy's principal value, whose
    # partials (DLMF 19.2.20 differentiated) are elementary and x - y > 0 there
    neg = y < 0
    yp = where(neg, 1.0, y)
    yn = where(neg, y, -1.0)
    rc = elliprc(x, yn)
    return (where(neg, (rc - 1.0 / sqrt(x)) / (2.0 * (yn - x)), elliprd(yp, yp, x) / -6.0),
            where(neg, (rc - sqrt(x) / yn) / (2.0 * (x - yn)), elliprd(x, yp, yp) / -3.0))


elliprc = _special(_sp.elliprc, _rc_partials, domain=(0.2, 2.0))


def _rg_dz(x, y, z):
    # dR_G/dz = R_F / 4 - z R_D(x, y, z) / 12; z R_D -> 0 as z -> 0 (R_D ~ z^(-1/2))
    zero = z == 0
    zrd = where(zero, 0.0, z * elliprd(x, y, where(zero, 1.0, z)))
    return elliprf(x, y, z) / 4.0 - zrd / 12.0


elliprg = _special(_sp.elliprg, lambda ans, x, y, z: (
    _rg_dz(y, z, x), _rg_dz(z, x, y), _rg_dz(x, y, z)), domain=(0.2, 2.0))


# incomplete elliptic integrals of the first and second kind ---------------------------------------
# In m, Carlson's forms (F = s R_F(c^2, D^2, 1), s = sin phi, c = cos phi, D^2 = 1 - m s^2):
#   dF/dm = s^3 R_D(c^2, 1, D^2) / 6,   dE/dm = (E - F) / (2m) = -s^3 R_D(c^2, D^2, 1) / 6,
# exact at m = 0, where DLMF 19.4.2's (E - F) / (2m) cancels. They hold for |phi| <= pi/2; the
# integrands are pi-periodic, so phi = k pi + psi adds 2k times the complete integral's.
def _ellip_dm(phi, m, first_kind):
    k = rint(phi / _PI)
    psi = phi - _PI * k
    s = sin(psi)
    c = cos(psi)
    d2 = 1.0 - m * (s * s)
    whole = k == 0
    mk = where(whole, 0.0, m)  # the complete integral's term, needed only where k != 0, is
    # kept finite elsewhere (at m = 1 it is infinite)
    if first_kind:
        part, period = elliprd(c * c, 1.0, d2), elliprd(0.0, 1.0, 1.0 - mk)
    else:
        part, period = -elliprd(c * c, d2, 1.0), -elliprd(0.0, 1.0 - mk, 1.0)
    return (s * s * s * part + where(whole, 0.0, 2.0 * k * period)) / 6.0


def _delta(phi, m):
    s = sin(phi)
    return sqrt(1.0 - m * (s * s))


ellipkinc = _special(_sp.ellipkinc, lambda ans, phi, m: (
    1.0 / _delta(phi, m), _ellip_dm(phi, m, True)), domain=(0.1, 0.9))
ellipeinc = _special(_sp.ellipeinc, lambda ans, phi, m: (
    _delta(phi, m), _ellip_dm(phi, m, False)), domain=(0.1, 0.9))


# Lambert W: complex results, real inputs (JAX's convention, as the FFT's) -------------------------
def _lambertw(z, k=0, tol=1e-8):
    """``scipy.special.lambertw``: branch ``k`` of Lambert's W, complex; differentiable in
    ``z`` (its real and imaginary parts through ``wnp.real`` and ``wnp.imag``)."""
    ans = _sp.lambertw(z, k, tol)
    if getattr(z, "dtype", None) == np.float32:  # SciPy computes (and returns) complex128
        ans = ans.astype(np.complex64)
    return ans


_lambertw.__name__ = "lambertw"
# W' = W / (z (1 + W)) = 1 / (e^W (1 + W)): no division by z, so W'(0) = 1 on branch 0;
# infinite at the branch point z = -1/e (W = -1)
lambertw = _special(_lambertw, lambda ans, z, k=0, tol=1e-8: (1.0 / (exp(ans) * (1.0 + ans)),),
                    domain=None)
