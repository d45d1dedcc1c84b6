"""Bessel-type scipy.special rules (wengert/rules/special_bessel.py): functions of an order,
functions with several results, and high-precision checks of every derivative formula.

The one-argument functions with a ``domain`` (Kelvin functions, Struve integrals) also run
through the generic tests in tests/test_special.py.
"""
import mpmath as mp
import numpy as np
import pytest
import scipy.special as sp

import wengert as wg
import wengert.numpy as wnp
from wengert.rules.special import SPECIAL
from wengert.scipy import special as wsp

from special_checks import assert_not_differentiated  # tests/special_checks.py

mp.mp.dps = 30

INT_ORDER = np.array([0, 1, 3])
FLOAT_ORDER = np.array([0.0, 1.0, 2.5])
X = (0.2, 3.0)
# name -> (order, sampling interval of x, static arguments after x); "jvp2" is jvp with n = 2,
# "spherical_jn'" is spherical_jn with derivative=True
ORDERED = {
    "kn": (INT_ORDER, X, ()),
    "jve": (FLOAT_ORDER, X, ()),
    "yve": (FLOAT_ORDER, X, ()),
    "struve": (FLOAT_ORDER, X, ()),
    "modstruve": (FLOAT_ORDER, X, ()),
    "spherical_jn": (INT_ORDER, X, ()),
    "spherical_yn": (INT_ORDER, X, ()),
    "spherical_in": (INT_ORDER, X, ()),
    "spherical_kn": (INT_ORDER, X, ()),
    **{f"spherical_{k}n'": (INT_ORDER, X, (True,)) for k in "jyik"},
    "jvp": (FLOAT_ORDER, X, ()),
    "yvp": (FLOAT_ORDER, X, ()),
    "ivp": (FLOAT_ORDER, X, ()),
    "kvp": (FLOAT_ORDER, X, ()),
    **{f"{k}vp{n}": (FLOAT_ORDER, X, (n,)) for k in "jyik" for n in (0, 2)},
}
ORDER_NAME = {"kn": "n", "spherical_jn": "n", "spherical_yn": "n", "spherical_in": "n",
              "spherical_kn": "n"}


def _fn(case):
    """(wengert function, scipy function) for a case name ("jvp2" is jvp with n = 2)."""
    name = case.rstrip("'0123456789")
    return getattr(wsp, name), getattr(sp, name)


def _cast_order(order, dtype):
    return order.astype(dtype) if order.dtype.kind == "f" else order  # float64 would upcast


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", sorted(ORDERED))
def test_ordered_values_and_check_grad(case, dtype):
    order, (lo, hi), static = ORDERED[case]
    order = _cast_order(order, dtype)
    f, ref = _fn(case)
    x = np.random.default_rng(1).uniform(lo, hi, 3).astype(dtype)
    out = f(order, x, *static)
    assert out.dtype == dtype
    # SciPy's own values, bit for bit (rounded to float32 where SciPy upcasts)
    np.testing.assert_array_equal(out, np.asarray(ref(order, x, *static)).astype(dtype))
    g = lambda x: f(order, x, *static)
    wg.check_grad(g, x, order=2, modes=("forward", "reverse"))
    assert wg.grad(lambda x: wnp.sum(g(x)))(x).dtype == dtype
    assert wg.jvp(g, (x,), (x,))[1].dtype == dtype


@pytest.mark.parametrize("case", sorted(ORDERED))
def test_ordered_jacobian_modes_agree_broadcast(case):
    order, (lo, hi), static = ORDERED[case]
    f, _ = _fn(case)
    x = np.random.default_rng(2).uniform(lo, hi, (2, 1))  # against the order's (3,)
    g = lambda x: f(order, x, *static)
    jf = wg.jacobian(g, mode="forward")(x)
    jr = wg.jacobian(g, mode="reverse")(x)
    assert jf.shape == (2, 3, 2, 1)
    np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-14)


NOT_DIFFERENTIATED = [(name, ()) for name in ("kn", "jve", "yve", "struve", "modstruve")] + [
    (f"spherical_{k}n", s) for k in "jyik" for s in ((), (True,))] + [
    (f"{k}vp", s) for k in ("j", "y", "i", "k", "h1", "h2") for s in ((), (2,))]


@pytest.mark.filterwarnings("ignore:floating point number truncated")  # kn(2.0, x)
@pytest.mark.parametrize("name, static", NOT_DIFFERENTIATED)
def test_orders_are_not_differentiated_silently(name, static):
    p = SPECIAL[name]

    def f(v):
        return p(v, 0.7, *static)
    assert_not_differentiated(name, ORDER_NAME.get(name, "v"), f)


HANKEL = {"h1vp": (wsp.h1vp, sp.h1vp), "h2vp": (wsp.h2vp, sp.h2vp)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(HANKEL))
@pytest.mark.parametrize("n", [0, 1, 2])
def test_hankel_derivatives_complex_results(name, n, dtype):
    # complex results of a real z: the real and imaginary parts each checked
    f, ref = HANKEL[name]
    v = FLOAT_ORDER.astype(dtype)
    x = np.random.default_rng(3).uniform(0.2, 3.0, 3).astype(dtype)
    out = f(v, x, n)
    assert out.dtype == (np.complex64 if dtype == np.float32 else np.complex128)
    np.testing.assert_array_equal(out, ref(v, x, n).astype(out.dtype))
    for part in (wnp.real, wnp.imag):
        g = lambda x: part(f(v, x, n))
        wg.check_grad(g, x, order=2, modes=("forward", "reverse"))
        assert wg.grad(lambda x: wnp.sum(g(x)))(x).dtype == dtype
        if dtype == np.float64:
            xb = x.reshape(3, 1)
            np.testing.assert_allclose(wg.jacobian(g, mode="forward")(xb),
                                       wg.jacobian(g, mode="reverse")(xb), rtol=1e-12)
    _close(wg.jvp(lambda x: f(v, x, n), (x,), (np.ones_like(x),))[1], f(v, x, n + 1),
           rtol=1e-6 if dtype == np.float32 else 1e-15)


# several results -------------------------------------------------------------------------
SEVERAL = {  # name -> points (SciPy's itairy is smooth to ~1e-7 only, with a small jump at 1.7)
    "airy": np.array([-2.5, -0.4, 0.3, 1.7, 3.0]),
    "airye": np.array([0.05, 0.3, 1.7, 4.0, 12.0]),
    "itairy": np.array([-1.2, -0.4, 0.3, 1.1]),
    "itj0y0": np.array([0.05, 0.3, 1.7, 4.2, 25.0]),
    "it2j0y0": np.array([0.05, 0.3, 1.7, 4.2, 25.0]),
    "iti0k0": np.array([0.05, 0.3, 1.7, 4.2, 9.0]),
    "it2i0k0": np.array([0.05, 0.3, 1.7, 4.2, 9.0]),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(SEVERAL))
def test_several_results(name, dtype):
    x = SEVERAL[name].astype(dtype)
    f = getattr(wsp, name)
    out = f(x)
    want = getattr(sp, name)(x)
    assert isinstance(out, tuple) and len(out) == len(want)
    for o, w in zip(out, want):
        assert o.dtype == dtype
        np.testing.assert_array_equal(o, w)
    wg.check_grad(f, x, order=2, modes=("forward", "reverse"))
    for k in range(len(out)):  # each result alone: the others' cotangents are symbolic zeros
        g = lambda x: f(x)[k]
        wg.check_grad(g, x, order=2, modes=("forward", "reverse"))
        assert wg.grad(lambda x: wnp.sum(g(x)))(x).dtype == dtype
        assert wg.jvp(g, (x,), (x,))[1].dtype == dtype


@pytest.mark.parametrize("name", sorted(SEVERAL))
def test_several_results_jacobian_modes_agree(name):
    x = SEVERAL[name][:4].reshape(2, 2)
    g = lambda x: wnp.stack(getattr(wsp, name)(x))
    np.testing.assert_allclose(wg.jacobian(g, mode="forward")(x),
                               wg.jacobian(g, mode="reverse")(x), rtol=1e-12, atol=1e-14)


def test_several_results_dispatch_from_scipy_ufuncs():
    # sp.airy on a traced value comes to the rule through NEP 13
    x = np.array([0.3, 1.2])
    g = wg.grad(lambda x: np.sum(sp.airy(x)[0] * sp.itj0y0(x)[1]))(x)
    ai, aip, _, _ = sp.airy(x)
    np.testing.assert_allclose(g, aip * sp.itj0y0(x)[1] + ai * sp.y0(x), rtol=1e-13)


def test_negative_arguments():
    # where SciPy defines the functions for x < 0, the rules hold there too
    x = np.array([-2.3, -0.6])
    for f in (lambda x: wsp.struve(np.array([[0.0], [1.0]]), x),
              lambda x: wsp.modstruve(np.array([[0.0], [3.0]]), x),
              lambda x: wsp.jve(np.array([[0.0], [2.0]]), x),
              lambda x: wsp.kn(1, -x),
              lambda x: wsp.spherical_jn(INT_ORDER[:, None], x),
              lambda x: wsp.spherical_in(INT_ORDER[:, None], x, True),
              lambda x: wsp.jvp(np.array([[1.0], [2.0]]), x, 2),
              wsp.itairy, lambda x: wsp.itj0y0(x)[0], lambda x: wsp.it2j0y0(x)[0],
              lambda x: wsp.iti0k0(x)[0], lambda x: wsp.it2i0k0(x)[0]):
        wg.check_grad(f, x, order=2)


# high precision: every formula against mpmath ------------------------------------------------
def _d(f, x, k=1):
    """The k-th derivative of a wengert function of one variable."""
    for _ in range(k):
        f = wg.derivative(f)
    return f(x)


def _jvp_k(f, x, k):
    """The k-th derivative by nested forward mode (complex results of a real x)."""
    for _ in range(k):
        f = (lambda g: lambda x: wg.jvp(g, (x,), (1.0,))[1])(f)
    return f(x)


def _mp_d(f, x, k):
    return float(mp.diff(f, mp.mpf(x), k))


def _close(got, want, rtol=1e-10, atol=1e-13):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


MP_ORDERED = {
    "kn": (lambda n, x: mp.besselk(n, x), [0, 1, 4], [1e-3, 0.5, 3.0, 30.0]),
    "jve": (lambda v, x: mp.besselj(v, x), [0.0, 1.0, 2.5, -0.5], [1e-3, 0.5, 3.0, 50.0]),
    "yve": (lambda v, x: mp.bessely(v, x), [0.0, 1.0, 2.5, -0.5], [0.01, 0.5, 3.0, 50.0]),
    "struve": (lambda v, x: mp.struveh(v, x), [0.0, 1.0, 2.5, -0.5, 0.3],
               [1e-3, 0.5, 3.0, 20.0]),
    "modstruve": (lambda v, x: mp.struvel(v, x), [0.0, 1.0, 2.5, -0.5, 0.3],
                  [1e-3, 0.5, 3.0, 20.0]),
}


@pytest.mark.parametrize("name", sorted(MP_ORDERED))
def test_ordered_against_mpmath(name):
    ref, orders, xs = MP_ORDERED[name]
    f = getattr(wsp, name)
    for v in orders:
        for x in xs:
            g = lambda x: f(v, x)
            for k in (1, 2):
                want = _mp_d(lambda t: ref(v, t), x, k)
                _close(_d(g, x, k), want, rtol=1e-9, atol=1e-13 * max(1.0, abs(want)))


def test_struve_at_zero_and_negative():
    # x = 0: H_0' = T_0 - H_1 keeps the recurrence at orders >= 0, and the power term is its own
    # primitive, so every derivative is finite there (H_0'(0) = 2/pi, H_1''(0) = 4/(3 pi))
    for f, ref in ((wsp.struve, mp.struveh), (wsp.modstruve, mp.struvel)):
        assert _d(lambda x: f(0.0, x), 0.0) == pytest.approx(2 / np.pi, rel=1e-15)
        assert _d(lambda x: f(1.0, x), 0.0, 2) == pytest.approx(4 / (3 * np.pi), rel=1e-15)
        for v in (0, 1, 2):
            for k in (1, 2, 3, 4):
                want = _mp_d(lambda t: ref(v, t), 0.0, k)
                _close(_d(lambda x: f(float(v), x), 0.0, k), want, rtol=1e-12, atol=1e-15)
    for v in (0, 1, 2):
        for x in (-0.4, -3.0):
            for k in (1, 2):
                _close(_d(lambda x: wsp.struve(float(v), x), x, k),
                       _mp_d(lambda t: mp.struveh(v, t), x, k))
                _close(_d(lambda x: wsp.modstruve(float(v), x), x, k),
                       _mp_d(lambda t: mp.struvel(v, t), x, k))


def test_jve_yve_are_jv_yv_for_real_x():
    rng = np.random.default_rng(4)
    v, x = rng.uniform(-3.0, 6.0, 2000), rng.uniform(0.01, 40.0, 2000)
    _close(sp.jve(v, x), sp.jv(v, x), rtol=1e-12, atol=1e-13)  # two code paths: to rounding
    _close(sp.yve(v, x), sp.yv(v, x), rtol=1e-12, atol=1e-12)
    n = np.round(v)
    _close(sp.jve(n, -x), sp.jv(n, -x), rtol=1e-12, atol=1e-13)
    _close(wg.grad(lambda x: wnp.sum(wsp.jve(v, x)))(x),
           wg.grad(lambda x: wnp.sum(wsp.jv(v, x)))(x), rtol=1e-9, atol=1e-12)


def _sph(kind):
    f = {"j": mp.besselj, "y": mp.bessely, "i": mp.besseli, "k": mp.besselk}[kind]
    return lambda n, z: mp.sqrt(mp.pi / (2 * z)) * f(n + mp.mpf(1) / 2, z)


@pytest.mark.parametrize("kind", "jyik")
def test_spherical_against_mpmath(kind):
    f = getattr(wsp, f"spherical_{kind}n")
    ref = _sph(kind)
    for n in (0, 1, 2, 5):
        for z in (0.05, 0.7, 3.0, 40.0):
            for k in (1, 2, 3):
                want = _mp_d(lambda t: ref(n, t), z, k)
                _close(_d(lambda z: f(n, z), z, k), want, rtol=1e-8,
                       atol=1e-13 * max(1.0, abs(want)))
            _close(_d(lambda z: f(n, z, True), z), _mp_d(lambda t: ref(n, t), z, 2),
                   rtol=1e-8, atol=1e-13)


def test_spherical_second_derivative_at_zero():
    # f_n'' by the recurrence in f'_{n-1}, f'_{n+1}: no division by z, exact at z = 0
    # (j_n ~ z^n / (2n+1)!!: j_0 = 1 - z^2/6, j_2 ~ z^2/15; i_n the same with +)
    want = {0: -1 / 3, 1: 0.0, 2: 2 / 15, 3: 0.0}
    for n, w in want.items():
        assert _d(lambda z: wsp.spherical_jn(n, z), 0.0, 2) == pytest.approx(w, abs=1e-16)
        assert _d(lambda z: wsp.spherical_in(n, z), 0.0, 2) == pytest.approx(abs(w), abs=1e-16)
        assert _d(lambda z: wsp.spherical_jn(n, z, derivative=True), 0.0) == pytest.approx(
            w, abs=1e-16)


@pytest.mark.parametrize("kind", ["j", "y", "i", "k", "h1", "h2"])
def test_bessel_derivatives_against_mpmath(kind):
    f = getattr(wsp, f"{kind}vp")
    ref = {"j": mp.besselj, "y": mp.bessely, "i": mp.besseli, "k": mp.besselk,
           "h1": mp.hankel1, "h2": mp.hankel2}[kind]
    for v in (0.0, 1.0, 2.5):
        for z in (0.3, 2.0, 9.0):
            for n in (0, 1, 2):
                for k in (1, 2):
                    want = complex(mp.diff(lambda t: ref(v, t), mp.mpf(z), n + k))
                    if kind in "jyik":
                        want = want.real
                        got = _d(lambda z: f(v, z, n), z, k)
                    else:  # forward mode: a complex tangent of a real z
                        got = _jvp_k(lambda z: f(v, z, n), z, k)
                    _close(got, want, rtol=1e-8, atol=1e-11 * max(1.0, abs(want)))


KELVIN = {"ber": mp.ber, "bei": mp.bei, "ker": mp.ker, "kei": mp.kei}


@pytest.mark.parametrize("name", sorted(KELVIN))
def test_kelvin_against_mpmath(name):
    f, fp = getattr(wsp, name), getattr(wsp, name + "p")
    xs = [1e-3, 0.5, 3.0, 15.0] + ([-0.5, -4.0] if name.startswith("be") else [])
    for x in xs:
        for k in (1, 2, 3):
            want = _mp_d(lambda t: KELVIN[name](0, t), x, k)
            _close(_d(f, x, k), want, rtol=1e-9, atol=1e-12 * max(1.0, abs(want)))
        _close(_d(fp, x), _mp_d(lambda t: KELVIN[name](0, t), x, 2), rtol=1e-9, atol=1e-12)


def test_kelvin_at_zero():
    assert _d(wsp.ber, 0.0, 2) == 0.0
    assert _d(wsp.bei, 0.0, 2) == 0.5
    assert _d(wsp.ber, 0.0, 3) == 0.0 and _d(wsp.bei, 0.0, 3) == 0.0
    with np.errstate(all="ignore"):
        assert _d(wsp.ker, 0.0, 2) == np.inf and _d(wsp.kei, 0.0, 2) == np.inf


def test_airy_against_mpmath():
    for z in (-6.0, -1.0, 0.0, 1e-3, 2.0, 8.0):
        ai, bi = mp.airyai, mp.airybi
        for k in (1, 2, 3):
            _close(_d(lambda z: wsp.airy(z)[0], z, k), _mp_d(ai, z, k), atol=1e-14)
            _close(_d(lambda z: wsp.airy(z)[1], z, k), _mp_d(ai, z, k + 1), atol=1e-14)
            _close(_d(lambda z: wsp.airy(z)[2], z, k), _mp_d(bi, z, k))
            _close(_d(lambda z: wsp.airy(z)[3], z, k), _mp_d(bi, z, k + 1))


def test_airye_against_mpmath():
    def zeta(t):
        return mp.mpf(2) / 3 * t ** mp.mpf(1.5)
    refs = [lambda t: mp.airyai(t) * mp.exp(zeta(t)), lambda t: mp.airyai(t, 1) * mp.exp(zeta(t)),
            lambda t: mp.airybi(t) * mp.exp(-zeta(t)),
            lambda t: mp.airybi(t, 1) * mp.exp(-zeta(t))]
    for z in (1e-3, 0.4, 2.0, 25.0):
        for j, ref in enumerate(refs):
            for k in (1, 2):
                _close(_d(lambda z: wsp.airye(z)[j], z, k), _mp_d(ref, z, k), atol=1e-14)
    # z < 0: SciPy's eBi, eBip are Bi, Bip (the exponent is imaginary); eAi, eAip are nan
    for z in (-0.5, -3.0):
        for k in (1, 2):
            _close(_d(lambda z: wsp.airye(z)[2], z, k), _mp_d(mp.airybi, z, k))
            _close(_d(lambda z: wsp.airye(z)[3], z, k), _mp_d(mp.airybi, z, k + 1))
        assert np.isnan(_d(lambda z: wsp.airye(z)[0], z))


def test_itairy_against_mpmath():
    # the derivatives are the exact integrands, also where SciPy's values drift (x = 8)
    refs = [mp.airyai, mp.airybi, lambda t: mp.airyai(-t), lambda t: mp.airybi(-t)]
    for x in (-3.0, -0.2, 0.0, 1.0, 8.0):
        for j, ref in enumerate(refs):
            _close(_d(lambda x: wsp.itairy(x)[j], x), float(ref(x)), atol=1e-14)
            _close(_d(lambda x: wsp.itairy(x)[j], x, 2), _mp_d(ref, x, 1), atol=1e-14)


INTEGRANDS = {  # name -> the derivative of each result, as mpmath functions
    "itj0y0": (lambda t: mp.besselj(0, t), lambda t: mp.bessely(0, t)),
    "it2j0y0": (lambda t: (1 - mp.besselj(0, t)) / t, lambda t: -mp.bessely(0, t) / t),
    "iti0k0": (lambda t: mp.besseli(0, t), lambda t: mp.besselk(0, t)),
    "it2i0k0": (lambda t: (mp.besseli(0, t) - 1) / t, lambda t: -mp.besselk(0, t) / t),
    "itstruve0": (lambda t: mp.struveh(0, t),),
    "it2struve0": (lambda t: -mp.struveh(0, t) / t,),
    "itmodstruve0": (lambda t: mp.struvel(0, t),),
}


@pytest.mark.parametrize("name", sorted(INTEGRANDS))
def test_integrals_against_mpmath(name):
    # (1 - J0)/x, (I0 - 1)/x and H0/x by their series below 0.1: points on both sides. (The
    # signs of the integrands against SciPy's values: check_grad in the tests above.)
    f = getattr(wsp, name)
    for x in (1e-6, 1e-3, 0.0999, 0.1001, 0.7, 3.0, 25.0):
        for j, ref in enumerate(INTEGRANDS[name]):
            g = (lambda x: f(x)[j]) if len(INTEGRANDS[name]) > 1 else f
            _close(_d(g, x), float(ref(mp.mpf(x))), rtol=1e-12, atol=1e-15)
            _close(_d(g, x, 2), _mp_d(ref, x, 1), rtol=1e-9, atol=1e-13)


@pytest.mark.filterwarnings("ignore:divide by zero")  # -Y0(x)/x, -K0(x)/x at 0: +inf
def test_integrals_at_zero():
    assert _d(lambda x: wsp.it2j0y0(x)[0], 0.0) == 0.0
    assert _d(lambda x: wsp.it2i0k0(x)[0], 0.0) == 0.0
    assert _d(lambda x: wsp.it2j0y0(x)[0], 0.0, 2) == 0.25
    assert _d(lambda x: wsp.it2i0k0(x)[0], 0.0, 2) == 0.25
    assert _d(wsp.it2struve0, 0.0) == -2 / np.pi
    assert _d(wsp.itstruve0, 0.0) == 0.0 and _d(wsp.itmodstruve0, 0.0) == 0.0
    assert _d(wsp.itstruve0, 0.0, 2) == pytest.approx(2 / np.pi, rel=1e-15)


def _several_and_ordered(x):  # at module level, with def: wengert.source reads its source
    return (wsp.airy(x)[1] * wsp.itj0y0(x)[0] + wsp.struve(1.0, x) + wsp.jvp(1.5, x, 2)
            + wsp.spherical_jn(2, x, True) + wsp.ber(x) * wsp.it2i0k0(x)[1])


def test_other_engines_agree():
    x = 1.3
    g = wg.grad(_several_and_ordered)(x)
    assert wg.source.grad(_several_and_ordered)(x) == pytest.approx(g, rel=1e-14)
    assert wg.compile(wg.grad(_several_and_ordered))(x) == pytest.approx(g, rel=1e-14)
    c = wg.taylor(_several_and_ordered, x, 1.0, 3)  # Taylor mode, one pass
    d3 = wg.derivative(wg.derivative(wg.derivative(_several_and_ordered)))(x)
    np.testing.assert_allclose(c[1:], [g, wg.hessian(_several_and_ordered)(x) / 2, d3 / 6],
                               rtol=1e-12)
