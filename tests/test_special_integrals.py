"""scipy.special integrals, hypergeometric and zeta functions (wengert/rules/special_integrals.py).

The functions with a ``domain`` (exp1, expi, owens_t, powm1, wrightomega, the Carlson forms
elliprf/elliprd/elliprc/elliprg, ellipkinc, ellipeinc) also run through tests/test_special.py's
generic checks. Here: the functions with parameters or several results, by the same four checks,
and every derivative against mpmath (or a closed form) at awkward points, to second order.
"""
import warnings

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sp

import wengert as wg
import wengert.source  # noqa: F401  wg.source
from wengert.scipy import special as wsp

from special_checks import assert_not_differentiated  # tests/special_checks.py

wnp = wg.numpy


def _d(mf, args, orders):
    """A partial derivative of mpmath's ``mf`` at ``args`` (orders per argument), 30 digits."""
    with mp.workdps(30):
        return float(complex(mp.diff(mf, args, orders)).real)


def _mp_grad(mf, args):
    n = len(args)
    return np.array([_d(mf, args, tuple(int(i == j) for i in range(n))) for j in range(n)])


def _mp_hessian(mf, args):
    n = len(args)
    return np.array([[_d(mf, args, tuple(int(i == j) + int(i == k) for i in range(n)))
                      for k in range(n)] for j in range(n)])


def _grad(f, args):
    g = wg.grad(f, argnums=tuple(range(len(args))))(*args)
    return np.array(g, dtype=float)


def _hessian(f, args):
    n = len(args)
    h = wg.hessian(f, argnums=tuple(range(n)))(*args)
    return np.array(h, dtype=float).reshape(n, n)


def _close(got, ref, rtol, atol=0.0):
    ref = np.asarray(ref, dtype=float)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=max(atol, rtol * np.max(np.abs(ref))))


# functions with parameters (not differentiated) ---------------------------------------------------
# name -> (the function of its parameters and its argument, parameters (3,), argument's domain)
PARAM = {
    "expn": (lambda n, x: wsp.expn(n, x), (np.array([0, 1, 3]),), (0.3, 2.5)),
    "hyp0f1": (lambda b, x: wsp.hyp0f1(b, x), (np.array([0.5, 1.5, 3.0]),), (-2.0, 2.0)),
    "hyp1f1": (lambda a, b, x: wsp.hyp1f1(a, b, x),
               (np.array([0.5, -1.3, 2.0]), np.array([1.5, 2.5, 0.7])), (-2.0, 2.0)),
    "hyp2f1": (lambda a, b, c, z: wsp.hyp2f1(a, b, c, z),
               (np.array([0.5, 1.0, -0.3]), np.array([1.5, 2.0, 0.7]),
                np.array([2.0, 3.0, 1.2])), (-0.9, 0.7)),
    "hyperu": (lambda a, b, x: wsp.hyperu(a, b, x),
               (np.array([0.5, 1.2, 2.0]), np.array([0.3, 1.5, -0.5])), (0.3, 3.0)),
    "zeta": (lambda s, q: wsp.zeta(s, q), (np.array([2.0, 3.5, 1.5]),), (0.3, 3.0)),
}


def _params(name, dtype):
    # a float64 parameter would upcast (an integer order would not)
    return tuple(p.astype(dtype) if p.dtype.kind == "f" else p for p in PARAM[name][1])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(PARAM))
def test_parametrized_values_check_grad_and_dtype(name, dtype):
    fn, _, (lo, hi) = PARAM[name]
    params = _params(name, dtype)
    x = np.random.default_rng(1).uniform(lo, hi, 3).astype(dtype)
    out = fn(*params, x)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, getattr(sp, name)(*params, x).astype(dtype))  # SciPy's
    f = lambda x: fn(*params, x)
    wg.check_grad(f, x, order=2, modes=("forward", "reverse"))
    assert wg.grad(lambda x: wnp.sum(f(x)))(x).dtype == dtype
    assert wg.jvp(f, (x,), (x,))[1].dtype == dtype


@pytest.mark.parametrize("name", sorted(PARAM))
def test_parametrized_jacobian_modes_agree_broadcast(name):
    fn, params, (lo, hi) = PARAM[name]
    rng = np.random.default_rng(2)
    params = tuple(p[:2].reshape(2, 1) for p in params)  # (2, 1) against x's (3,)
    x = rng.uniform(lo, hi, 3)
    f = lambda x: fn(*params, x)
    jf = wg.jacobian(f, mode="forward")(x)
    jr = wg.jacobian(f, mode="reverse")(x)
    assert jf.shape == (2, 3, 3)
    np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-14)


NOT_DIFFERENTIATED = [  # (name, argument, the function of that argument)
    ("expn", "n", lambda n: wsp.expn(n, 0.7)),
    ("hyp0f1", "b", lambda b: wsp.hyp0f1(b, 0.7)),
    ("hyp1f1", "a", lambda a: wsp.hyp1f1(a, 1.5, 0.7)),
    ("hyp1f1", "b", lambda b: wsp.hyp1f1(0.5, b, 0.7)),
    ("hyp2f1", "a", lambda a: wsp.hyp2f1(a, 1.5, 2.5, 0.3)),
    ("hyp2f1", "b", lambda b: wsp.hyp2f1(0.5, b, 2.5, 0.3)),
    ("hyp2f1", "c", lambda c: wsp.hyp2f1(0.5, 1.5, c, 0.3)),
    ("hyperu", "a", lambda a: wsp.hyperu(a, 1.5, 0.7)),
    ("hyperu", "b", lambda b: wsp.hyperu(0.5, b, 0.7)),
    ("zeta", "x", lambda s: wsp.zeta(s, 0.7)),  # Hurwitz's, in its exponent
    ("zeta", "x", lambda s: wsp.zeta(s)),  # Riemann's
]


@pytest.mark.parametrize("name,arg,f", NOT_DIFFERENTIATED)
def test_parameters_are_not_differentiated_silently(name, arg, f):
    assert_not_differentiated(name, arg, f)


def test_compiled_and_source_mode():
    def f(x):
        s, c = wsp.sici(x)
        return wnp.sum(s * c * wsp.ellipkinc(x, 0.3) + wsp.zeta(2.0, x) + wsp.expn(2, x)
                       + wnp.real(wsp.lambertw(x)) * wsp.hyp2f1(0.5, 1.0, 2.0, x - 1.0))
    x = np.array([0.3, 0.7, 1.4])
    g = wg.grad(f)(x)
    cg = wg.compile(wg.grad(f))
    np.testing.assert_allclose(cg(x), g, rtol=1e-14)
    np.testing.assert_allclose(cg(x + 0.1), wg.grad(f)(x + 0.1), rtol=1e-14)
    np.testing.assert_allclose(wg.compile(wg.hessian(f))(x), wg.hessian(f)(x), rtol=1e-13)
    np.testing.assert_allclose(wg.source.grad(_source_fn)(0.7), wg.grad(_source_fn)(0.7),
                               rtol=1e-14)


def _source_fn(x):  # at module level: wengert.source reads its source
    s, c = wsp.sici(x)
    return s * c * wsp.ellipkinc(x, 0.3) + wsp.zeta(2.0, x) + wsp.expn(2, x)


def test_parametrized_against_mpmath():
    cases = [  # (wengert function of x, mpmath function of x, points)
        *[(lambda x, n=n: wsp.expn(n, x), lambda t, n=n: mp.expint(n, t), [1e-3, 0.5, 3.0, 40.0])
          for n in (0, 1, 2, 5)],
        *[(lambda x, b=b: wsp.hyp0f1(b, x), lambda t, b=b: mp.hyp0f1(b, t), [-3.0, 1e-8, 2.0])
          for b in (0.5, -0.3, 3.0)],
        *[(lambda x, a=a, b=b: wsp.hyp1f1(a, b, x), lambda t, a=a, b=b: mp.hyp1f1(a, b, t),
           [-3.0, 1e-8, 2.0, 10.0]) for a, b in ((0.5, 1.5), (-1.3, 2.5), (2.0, 0.7), (-2.5, 3.0))],
        *[(lambda x, p=p: wsp.hyp2f1(*p, x), lambda t, p=p: mp.hyp2f1(*p, t),
           [-3.0, -0.5, 0.0, 0.5, 0.9]) for p in ((0.5, 1.5, 2.0), (1.0, 1.0, 2.0),
                                                  (0.3, -0.7, 1.2), (2.0, 3.0, 4.0))],
        # (SciPy's own hyperu(1.5, 1.3, 10) is off by 3e-8, and so U'(0.5, 0.3, 10))
        *[(lambda x, a=a, b=b: wsp.hyperu(a, b, x), lambda t, a=a, b=b: mp.hyperu(a, b, t),
           [0.01, 0.3, 2.0] + [10.0] * (b > 0.5))
          for a, b in ((0.5, 0.3), (2.0, -0.5), (0.5, 1.5))],
        *[(lambda q, s=s: wsp.zeta(s, q), lambda t, s=s: mp.zeta(s, t), [0.3, 1.0, 2.0, 10.0])
          for s in (2.0, 3.5, 1.5)],
    ]
    for f, mf, points in cases:
        for x in points:
            _close(wg.grad(f)(x), _d(mf, x, 1), 1e-12)
            _close(wg.derivative(f)(x), _d(mf, x, 1), 1e-12)
            _close(wg.hessian(f)(x), _d(mf, x, 2), 1e-12)


def test_closed_forms_of_parametrized():
    x = 0.8
    # E_0 = e^-x / x, whose derivative SciPy has no E_(-1) for; E_1 = exp1
    assert wg.grad(lambda x: wsp.expn(0, x))(x) == pytest.approx(-np.exp(-x) * (1 + x) / x ** 2,
                                                               rel=1e-15)
    assert wg.grad(lambda x: wsp.expn(1, x))(x) == pytest.approx(-np.exp(-x) / x, rel=1e-15)
    # 1F1(a; a; x) = e^x, 0F1(; 3/2; x^2/4) = sinh(x)/x, 2F1(1, 1; 2; z) = -log(1 - z)/z
    assert wg.grad(lambda x: wsp.hyp1f1(0.7, 0.7, x))(x) == pytest.approx(np.exp(x), rel=1e-14)
    assert wg.hessian(lambda x: wsp.hyp1f1(0.7, 0.7, x))(x) == pytest.approx(np.exp(x), rel=1e-14)
    g = wg.grad(lambda x: wsp.hyp0f1(1.5, x * x / 4))(x)
    assert g == pytest.approx((np.cosh(x) * x - np.sinh(x)) / x ** 2, rel=1e-14)
    # U' = -a U(a + 1, b + 1, x), with SciPy's values
    assert wg.grad(lambda x: wsp.hyperu(0.5, 0.3, x))(10.0) == -0.5 * sp.hyperu(1.5, 1.3, 10.0)
    g = wg.grad(lambda z: wsp.hyp2f1(1.0, 1.0, 2.0, z))(0.5)
    assert g == pytest.approx(1 / (0.5 * 0.5) + np.log(0.5) / 0.5 ** 2, rel=1e-14)
    # a = -2: a polynomial, 1 - 2x/3 + x^2/12
    assert wg.grad(lambda x: wsp.hyp1f1(-2.0, 3.0, x))(x) == pytest.approx(-2 / 3 + x / 6,
                                                                           rel=1e-15)
    # a = 0: 1F1 is constant, and so its derivative 0 (never nan)
    assert wg.grad(lambda x: wsp.hyp1f1(0.0, 1.0, x))(x) == 0.0
    # zeta(s, q) - zeta(s, q + 1) = q^-s
    g = wg.grad(lambda q: wsp.zeta(3.0, q) - wsp.zeta(3.0, q + 1.0))(x)
    assert g == pytest.approx(-3.0 * x ** -4.0, rel=1e-13)


def test_zeta_wrapper():
    assert wsp.zeta(2.0) == sp.zeta(2.0) and wsp.zeta(2.0, 0.5) == sp.zeta(2.0, 0.5)
    out = np.empty(2)
    wsp.zeta(np.array([2.0, 3.0]), 1.5, out=out)
    np.testing.assert_array_equal(out, sp.zeta(np.array([2.0, 3.0]), 1.5))
    # a traced q with a traced exponent: the derivative in q only
    gq = wg.grad(lambda s, q: wsp.zeta(s, q), argnums=1)(2.5, 1.5)
    assert gq == pytest.approx(-2.5 * sp.zeta(3.5, 1.5), rel=1e-15)


# two results: sici, shichi, fresnel --------------------------------------------------------------
TWO = {"sici": lambda x: wsp.sici(x), "shichi": lambda x: wsp.shichi(x),
       "fresnel": lambda x: wsp.fresnel(x)}
TWO_MP = {"sici": (mp.si, mp.ci), "shichi": (mp.shi, mp.chi),
          "fresnel": (mp.fresnels, mp.fresnelc)}
X_TWO = np.array([-1.7, -0.4, 0.3, 2.2])  # Ci and Chi: even, their real parts for x < 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(TWO))
def test_two_results_values_check_grad_and_dtype(name, dtype):
    f = TWO[name]
    x = X_TWO.astype(dtype)
    out = f(x)
    ref = getattr(sp, name)(x)
    for o, r in zip(out, ref):
        assert o.dtype == dtype
        np.testing.assert_array_equal(o, r)
    wg.check_grad(f, x, order=2, modes=("forward", "reverse"))
    for i in range(2):
        assert wg.grad(lambda x: wnp.sum(f(x)[i]))(x).dtype == dtype
        assert wg.jvp(lambda x: f(x)[i], (x,), (x,))[1].dtype == dtype


@pytest.mark.parametrize("name", sorted(TWO))
def test_two_results_jacobian_modes_agree(name):
    x = np.random.default_rng(3).uniform(0.2, 2.5, (2, 3))
    for i in range(2):
        f = lambda x: TWO[name](x)[i] * TWO[name](x)[1 - i]  # both results in one program
        jf = wg.jacobian(f, mode="forward")(x)
        jr = wg.jacobian(f, mode="reverse")(x)
        np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(TWO))
def test_two_results_against_mpmath(name):
    # near 0, (x cos x - sin x) / x^2 (Si'') would cancel: a series there, and both sides of the
    # switch at |x| = 1 are sampled. Fresnel's sin(pi x^2 / 2) at x = 50 is 0 to the rounding
    # of pi x^2 / 2 (an absolute 1e-13, and its derivative pi x cos(pi x^2 / 2): x times that)
    for i, mf in enumerate(TWO_MP[name]):
        f = lambda x: TWO[name](x)[i]
        for x in (-3.0, -1.0, -0.4, 1e-8, 1e-3, 0.7, 0.999, 1.0, 1.001, 5.0, 50.0):
            d1, d2 = _d(mf, x, 1), _d(mf, x, 2)
            _close(wg.grad(f)(x), d1, 1e-13, atol=1e-12)
            _close(wg.derivative(f)(x), d1, 1e-13, atol=1e-12)
            _close(wg.hessian(f)(x), d2, 1e-13, atol=1e-13 * (1 + x * x))


def test_two_results_at_zero():
    # Si' = sin x / x and Shi' = sinh x / x are 1 at 0 (their limit), their second derivatives
    # 0; Ci' = cos x / x is infinite there (Ci ~ log x), and so is Chi'
    for f in (lambda x: wsp.sici(x)[0], lambda x: wsp.shichi(x)[0]):
        assert wg.grad(f)(0.0) == 1.0 and wg.derivative(f)(0.0) == 1.0
        assert wg.hessian(f)(0.0) == 0.0
    for f in (lambda x: wsp.sici(x)[1], lambda x: wsp.shichi(x)[1]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert np.isposinf(wg.grad(f)(0.0))
    s, c = wg.grad(lambda x: wsp.fresnel(x)[0])(0.0), wg.grad(lambda x: wsp.fresnel(x)[1])(0.0)
    assert (s, c) == (0.0, 1.0)
    # only the result that is used is differentiated: no inf from Ci in Si's gradient
    g = wg.grad(lambda x: wnp.sum(wsp.sici(x)[0]))(np.array([0.0, 1.0]))
    np.testing.assert_allclose(g, [1.0, np.sin(1.0)], rtol=1e-15)


def test_two_results_through_scipy_ufuncs():
    x = np.array([0.3, 1.1])
    g = wg.grad(lambda x: wnp.sum(sp.sici(x)[0] * sp.fresnel(x)[1] + sp.shichi(x)[1]))(x)
    si, ci = sp.sici(x)
    s, c = sp.fresnel(x)
    ref = np.sin(x) / x * c + si * np.cos(np.pi * x * x / 2) + np.cosh(x) / x
    np.testing.assert_allclose(g, ref, rtol=1e-14)


# functions of real arguments only -----------------------------------------------------------------
def test_exponential_integrals_against_mpmath():
    for x in (1e-6, 0.5, 30.0, 300.0):
        for f, mf, y in ((wsp.exp1, mp.e1, x), (wsp.expi, mp.ei, x), (wsp.expi, mp.ei, -x)):
            _close(wg.grad(f)(y), _d(mf, y, 1), 1e-14)
            _close(wg.hessian(f)(y), _d(mf, y, 2), 1e-14)
    assert wg.grad(wsp.exp1)(0.5) == pytest.approx(-np.exp(-0.5) / 0.5, rel=1e-15)
    assert wg.grad(wsp.expi)(-0.5) == pytest.approx(np.exp(-0.5) / -0.5, rel=1e-15)


def _mp_owens_t(h, a):
    return mp.quad(lambda x: mp.exp(-h * h * (1 + x * x) / 2) / (1 + x * x), [0, a]) / (2 * mp.pi)


def test_owens_t_against_mpmath():
    # dT/dh = -phi(h) erf(a h / sqrt 2) / 2, dT/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))
    for h, a in ((0.0, 0.5), (0.3, 2.0), (-1.2, 0.7), (2.0, -3.0), (5.0, 0.1), (0.5, 30.0)):
        _close(_grad(wsp.owens_t, (h, a)), _mp_grad(_mp_owens_t, (h, a)), 1e-12)
    for h, a in ((0.3, 2.0), (-1.2, 0.7)):
        _close(_hessian(wsp.owens_t, (h, a)), _mp_hessian(_mp_owens_t, (h, a)), 1e-10)
    # T(h, 1) = Phi(h) (1 - Phi(h)) / 2
    g = wg.grad(lambda h: wsp.owens_t(h, 1.0))(0.6)
    pdf = np.exp(-0.18) / np.sqrt(2 * np.pi)
    assert g == pytest.approx(0.5 * (1 - 2 * sp.ndtr(0.6)) * pdf, rel=1e-14)


def test_powm1():
    mf = lambda x, y: x ** y - 1
    for x, y in ((0.5, 0.3), (1.0, 2.5), (1.0 + 1e-9, 1e-5), (3.0, -2.0), (2.0, 0.0)):
        _close(_grad(wsp.powm1, (x, y)), _mp_grad(mf, (x, y)), 1e-13)
        _close(_hessian(wsp.powm1, (x, y)), _mp_hessian(mf, (x, y)), 1e-12)
    # at x = 0 (y > 0) the value 0 ** y - 1 = -1 does not depend on y: 0, not 0 * log 0 = nan
    gx, gy = _grad(wsp.powm1, (0.0, 2.0))
    assert (gx, gy) == (0.0, 0.0)
    assert _grad(wsp.powm1, (0.0, 1.0))[0] == 1.0


def test_wrightomega():
    # omega(x) = W(e^x) for real x; omega' = omega / (1 + omega)
    mf = lambda t: mp.lambertw(mp.exp(t))
    for x in (-30.0, -2.0, 0.0, 1.5, 40.0):
        _close(wg.grad(wsp.wrightomega)(x), _d(mf, x, 1), 1e-13)
        _close(wg.hessian(wsp.wrightomega)(x), _d(mf, x, 2), 1e-12)


# Carlson's symmetric forms and the incomplete elliptic integrals ---------------------------------
CARLSON3 = [(0.3, 1.2, 2.0), (1.0, 1.0, 1.0), (2.0, 1.0, 1.0 + 1e-9), (1.0, 1.0 + 1e-3, 1.0),
            (1.0, 1.0, 1.03), (1.0, 1.0, 0.97), (100.0, 1.0, 1.01), (1e-3, 1.0, 1.0),
            (5.0, 0.1, 0.1000001), (2.0, 3.0, 4.0), (1e-8, 1e8, 1.0)]


@pytest.mark.parametrize("f,mf", [(wsp.elliprd, mp.elliprd), (wsp.elliprf, mp.elliprf),
                                  (wsp.elliprg, mp.elliprg)], ids=["rd", "rf", "rg"])
def test_carlson_against_mpmath(f, mf):
    # coincident and nearly coincident arguments: R_D's partials switch from a divided
    # difference to a series there; both sides of the switch (|d|/c = 0.1) are sampled
    for args in CARLSON3:
        _close(_grad(f, args), _mp_grad(mf, args), 1e-14)
    for args in CARLSON3[:8]:
        _close(_hessian(f, args), _mp_hessian(mf, args), 1e-13)


def test_carlson_symmetric_and_closed_forms():
    # R_F(x, x, x) = x^(-1/2), R_D(x, x, x) = x^(-3/2): each partial of R_D is a share of
    # -3/2 x^(-5/2) (1/5, 1/5, 3/5), R_G(x, x, x) = x^(1/2)
    x = 1.7
    np.testing.assert_allclose(_grad(wsp.elliprf, (x,) * 3), [-x ** -1.5 / 6] * 3, rtol=1e-15)
    np.testing.assert_allclose(_grad(wsp.elliprd, (x,) * 3), np.array([-0.3, -0.3, -0.9])
                               * x ** -2.5, rtol=1e-15)
    np.testing.assert_allclose(_grad(wsp.elliprg, (x,) * 3), [x ** -0.5 / 6] * 3, rtol=1e-15)
    # a zero argument: the partial in it is infinite (R_D grows like x^(-1/2)), the others finite
    g = _grad(wsp.elliprd, (0.0, 1.0, 2.0))
    assert np.isneginf(g[0]) and np.all(np.isfinite(g[1:]))
    _close(g[1:], _mp_grad(lambda y, z: mp.elliprd(0, y, z), (1.0, 2.0)), 1e-14)
    for y, z in ((1.0, 2.0), (1.0, 1.0), (1.0, 1.05)):  # (the last two: R_D's series)
        h = _hessian(lambda y, z: wsp.elliprd(0.0, y, z), (y, z))
        _close(h, _mp_hessian(lambda y, z: mp.elliprd(0, y, z), (y, z)), 1e-13)
    g = _grad(wsp.elliprg, (0.0, 1.0, 2.0))
    _close(g[1:], _mp_grad(lambda y, z: mp.elliprg(0, y, z), (1.0, 2.0)), 1e-14)


def test_elliprc_against_mpmath():
    # y < 0: SciPy's R_C is Cauchy's principal value, and so is mpmath's
    for args in ((0.3, 1.2), (1.0, 1.0), (1.0, 1.0 + 1e-7), (0.5, -2.0), (2.0, -0.1),
                 (1e-6, 3.0), (1.0, 1e-6)):
        _close(_grad(wsp.elliprc, args), _mp_grad(mp.elliprc, args), 1e-14)
        _close(_hessian(wsp.elliprc, args), _mp_hessian(mp.elliprc, args), 1e-13)
    # R_C(x, y) = arctan(sqrt((y - x)/x)) / sqrt(y - x) for x < y, at (1, 2): pi/4
    assert _grad(wsp.elliprc, (1.0, 2.0))[0] == pytest.approx((np.pi / 4 - 1) / 2, rel=1e-15)


ELLIP_POINTS = [(0.3, 0.5), (1.2, 0.0), (1.2, 1e-9), (2.0, 0.3), (-4.0, 0.7), (1e-3, 0.5),
                (1.0, -3.0), (0.5, 2.0), (7.0, -0.5), (np.pi / 2, 0.5), (3 * np.pi / 2, 0.3),
                (1.5, 0.999), (2.0, 0.05), (2.0, 0.0)]


@pytest.mark.parametrize("f,mf", [(wsp.ellipkinc, mp.ellipf), (wsp.ellipeinc, mp.ellipe)],
                         ids=["ellipkinc", "ellipeinc"])
def test_incomplete_elliptic_against_mpmath(f, mf):
    # m = 0 (where DLMF's (E - F) / 2m cancels), tiny phi, phi past pi/2 (whole periods),
    # m < 0, m > 1 (with m sin^2 phi < 1), near m = 1
    for args in ELLIP_POINTS:
        _close(_grad(f, args), _mp_grad(mf, args), 1e-13)
        _close(_hessian(f, args), _mp_hessian(mf, args), 1e-12)


def test_incomplete_elliptic_closed_forms():
    # at phi = pi/2 the complete integrals: dK/dm and dE/dm of special.py's ellipk, ellipe
    for m in (0.2, 0.7):
        gk = wg.grad(lambda m: wsp.ellipkinc(np.pi / 2, m))(m)
        assert gk == pytest.approx(wg.grad(wsp.ellipk)(m), rel=1e-14)
        ge = wg.grad(lambda m: wsp.ellipeinc(np.pi / 2, m))(m)
        assert ge == pytest.approx(wg.grad(wsp.ellipe)(m), rel=1e-14)
    # m = 0: F = E = phi; dF/dm = phi/4 - sin(2 phi)/8 = -dE/dm
    phi = 0.9
    ref = phi / 4 - np.sin(2 * phi) / 8
    assert wg.grad(lambda m: wsp.ellipkinc(phi, m))(0.0) == pytest.approx(ref, rel=1e-15)
    assert wg.grad(lambda m: wsp.ellipeinc(phi, m))(0.0) == pytest.approx(-ref, rel=1e-15)


# Lambert W: a complex result of a real argument --------------------------------------------------
def test_lambertw_check_grad_and_dtype():
    x = np.array([0.1, 0.5, 2.0])
    for part in (wnp.real, wnp.imag):
        for k in (0, 1):
            f = lambda x: part(wsp.lambertw(x, k))
            wg.check_grad(f, x, order=2, modes=("forward", "reverse"))
            np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x),
                                       wg.jacobian(f, mode="reverse")(x), rtol=1e-14)
    x32 = x.astype(np.float32)
    assert wsp.lambertw(x32).dtype == np.complex64
    np.testing.assert_array_equal(wsp.lambertw(x), sp.lambertw(x))
    np.testing.assert_array_equal(wsp.lambertw(x32), sp.lambertw(x32).astype(np.complex64))
    f32 = lambda x: wnp.real(wsp.lambertw(x))
    assert wg.grad(lambda x: wnp.sum(f32(x)))(x32).dtype == np.float32
    wg.check_grad(f32, x32, order=2, modes=("forward", "reverse"))


def test_lambertw_against_mpmath():
    # W' = 1 / (e^W (1 + W)): 1 at z = 0 (where W / (z (1 + W)) would be 0/0); complex on
    # branch 0 below -1/e and on every other branch
    for k, points in ((0, (0.0, 0.5, 3.0, -0.2, -0.36, -0.5, 100.0)), (-1, (-0.2, -0.5, 0.3)),
                      (2, (0.5, -1.0))):
        for part, take in ((wnp.real, lambda c: c.real), (wnp.imag, lambda c: c.imag)):
            f = lambda x: part(wsp.lambertw(x, k))
            for x in points:
                with mp.workdps(30):
                    d1 = take(complex(mp.diff(lambda t: mp.lambertw(t, k), x)))
                    d2 = take(complex(mp.diff(lambda t: mp.lambertw(t, k), x, 2)))
                _close(wg.grad(f)(x), d1, 1e-13)
                _close(wg.derivative(f)(x), d1, 1e-13)
                _close(wg.hessian(f)(x), d2, 1e-12)
    assert wg.grad(lambda x: wnp.real(wsp.lambertw(x)))(0.0) == 1.0
