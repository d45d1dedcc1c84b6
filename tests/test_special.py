"""scipy.special rules: finite differences, both modes, second order, float32, batching."""
import numpy as np
import pytest
import scipy.special as sp

import wengert as wg
from wengert.core import Primitive
from wengert.rules.special import SPECIAL
from wengert.scipy import special as wsp

from special_checks import assert_not_differentiated  # tests/special_checks.py

# functions whose first argument is an order (not differentiated)
ORDER_ARG = {"polygamma": np.array([0, 1, 2]), "iv": np.array([0.0, 1.0, 2.5]),
             "ive": np.array([0.0, 1.0, 2.5]), "jv": np.array([0.0, 1.0, 2.5]),
             "yv": np.array([0.0, 1.0, 2.5]), "kv": np.array([0.0, 1.0, 2.5]),
             "kve": np.array([0.0, 1.0, 2.5]), "yn": np.array([0.0, 1.0, 2.0]),
             "gammainc": np.array([0.5, 1.0, 2.5]), "gammaincc": np.array([0.5, 1.0, 2.5]),
             "betainc": (np.array([0.5, 1.0, 2.5]), np.array([3.0, 1.0, 0.7]))}  # (a, b)
STATIC_LAST = {"multigammaln": 3}  # multigammaln(a, d): d is an integer
ELEMENTWISE = sorted(n for n, p in SPECIAL.items() if isinstance(p, Primitive)
                     and p.domain is not None)


def _nin(p):
    if p.name in STATIC_LAST:
        return 1
    return p.impl.nin if isinstance(p.impl, np.ufunc) else 2


def _args(name, dtype, rng, shape=(3,)):
    p = SPECIAL[name]
    lo, hi = p.domain
    if name in ORDER_ARG:
        lead = _lead(name)
        # a float64 order would upcast
        lead = tuple(n.astype(dtype) if n.dtype.kind == "f" else n for n in lead)
        return lead + (rng.uniform(lo, hi, shape).astype(dtype),)
    return tuple(rng.uniform(lo, hi, shape).astype(dtype) for _ in range(_nin(p)))


def _lead(name):
    """The leading arguments that are not differentiated (orders; betainc's a and b)."""
    n = ORDER_ARG[name]
    return n if isinstance(n, tuple) else (n,)


def _diff_fn(name, lead=None):
    p = SPECIAL[name]
    if name in STATIC_LAST:
        return (lambda x: p(x, STATIC_LAST[name])), 0
    if name in ORDER_ARG:
        lead = _lead(name) if lead is None else lead
        return (lambda x: p(*lead, x)), len(lead)
    return p, 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_check_grad(name, dtype):
    rng = np.random.default_rng(1)
    args = _args(name, dtype, rng)
    f, skip = _diff_fn(name, args[:len(_lead(name))] if name in ORDER_ARG else None)
    diff_args = args[skip:]
    out = f(*diff_args)
    assert out.dtype == dtype
    ref_args = args + ((STATIC_LAST[name],) if name in STATIC_LAST else ())
    np.testing.assert_allclose(out, getattr(sp, name)(*ref_args), rtol=1e-6)
    wg.check_grad(f, *diff_args, order=2, modes=("forward", "reverse"))
    for i in range(len(diff_args)):
        g = wg.grad(lambda *xs: wg.numpy.sum(f(*xs)), argnums=i)(*diff_args)
        assert g.dtype == dtype


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_jacobian_modes_agree_broadcast(name):
    rng = np.random.default_rng(2)
    p = SPECIAL[name]
    lo, hi = p.domain
    f, skip = _diff_fn(name)
    if skip or _nin(p) == 1:
        x = rng.uniform(lo, hi, (2, 3))
        jf = wg.jacobian(f, mode="forward")(x)
        jr = wg.jacobian(f, mode="reverse")(x)
    else:  # broadcasting (2, 1) against (3,)
        xs = [rng.uniform(lo, hi, (2, 1)), rng.uniform(lo, hi, (3,))]
        xs += [rng.uniform(lo, hi, (1, 3))] * (_nin(p) - 2)
        nums = tuple(range(len(xs)))
        jf = wg.jacobian(f, argnums=nums, mode="forward")(*xs)
        jr = wg.jacobian(f, argnums=nums, mode="reverse")(*xs)
        jf, jr = np.concatenate([j.reshape(6, -1) for j in jf], 1), \
            np.concatenate([j.reshape(6, -1) for j in jr], 1)
    np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-14)


def test_softplus_and_aliases():
    x = np.array([-3.0, 0.0, 2.0])
    np.testing.assert_allclose(wg.grad(lambda x: wg.numpy.sum(wsp.softplus(x)))(x), sp.expit(x))
    assert wsp.psi is wsp.digamma
    assert wsp.jn is wsp.jv  # SciPy's other name for the jv ufunc (autograd differentiates it)
    wg.check_grad(lambda x: wsp.jn(2, x), x + 4.0, order=2)
    wg.check_grad(lambda x: wsp.softplus(x), x, order=2)
    wg.check_grad(lambda x: wsp.log_softmax(x), x, order=2)


def test_closed_forms():
    x = 0.7
    assert np.isclose(wg.grad(wsp.gammaln)(x), sp.digamma(x))
    assert np.isclose(wg.grad(wsp.gamma)(x), sp.gamma(x) * sp.digamma(x))
    assert np.isclose(wg.grad(wsp.erf)(x), 2 / np.sqrt(np.pi) * np.exp(-x * x))
    assert np.isclose(wg.grad(wsp.expit)(x), sp.expit(x) * sp.expit(-x))
    assert np.isclose(wg.grad(wsp.i0)(x), sp.i1(x))
    assert np.isclose(wg.derivative(wg.derivative(wsp.digamma))(x), sp.polygamma(2, x))
    assert np.isclose(wg.grad(wsp.ndtri)(0.3), 1 / (np.exp(-sp.ndtri(0.3) ** 2 / 2)
                                                    / np.sqrt(2 * np.pi)))
    # far left tail: pdf / cdf stays finite through logs
    h = 1e-5
    fd = (sp.log_ndtr(-30.0 + h) - sp.log_ndtr(-30.0 - h)) / (2 * h)
    assert np.isclose(wg.grad(wsp.log_ndtr)(-30.0), fd, rtol=1e-6)


def test_xlogy_at_zero():
    # scipy gives xlogy(0, 0) = 0; the derivative in y is 0 there too, never nan
    with np.errstate(divide="ignore"):
        gx, gy = wg.grad(wsp.xlogy, argnums=(0, 1))(0.0, 0.0)
    assert gy == 0.0 and np.isneginf(gx)
    assert wg.grad(wsp.xlogy, argnums=1)(0.0, 2.0) == 0.0


def test_numpy_dispatch_of_scipy_ufuncs():
    g = wg.grad(lambda x: np.sum(sp.erf(x) * sp.expit(x)))(np.array([0.1, 0.5]))
    g2 = wg.grad(lambda x: wg.numpy.sum(wsp.erf(x) * wsp.expit(x)))(np.array([0.1, 0.5]))
    np.testing.assert_allclose(g, g2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kw", [dict(), dict(axis=0), dict(axis=1, keepdims=True),
                                dict(axis=(0, 1)), dict(axis=-1)])
def test_logsumexp_softmax(kw, dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4)).astype(dtype)
    b = rng.uniform(0.5, 2.0, (4,)).astype(dtype)
    np.testing.assert_allclose(wsp.logsumexp(x, **kw), sp.logsumexp(x, **kw))
    f = lambda x: wsp.logsumexp(x, **kw)
    assert wg.jvp(f, (x,), (x,))[1].dtype == dtype
    wg.check_grad(f, x, order=2)
    wg.check_grad(lambda x, b: wsp.logsumexp(x, b=b, **kw), x, b, order=2)
    ax = kw.get("axis", None)
    if not isinstance(ax, tuple):
        for fn in (wsp.softmax, wsp.log_softmax):
            g = lambda x: fn(x, axis=ax)
            np.testing.assert_allclose(fn(x, axis=ax), getattr(sp, fn.__name__)(x, axis=ax),
                                       rtol=1e-5)
            wg.check_grad(g, x, order=2)
            np.testing.assert_allclose(wg.jacobian(g, mode="forward")(x),
                                       wg.jacobian(g, mode="reverse")(x), rtol=1e-6, atol=1e-7)


def test_logsumexp_closed_form_and_sign():
    x = np.array([0.1, -0.4, 2.0])
    np.testing.assert_allclose(wg.grad(wsp.logsumexp)(x), sp.softmax(x))
    b = np.array([1.0, -3.0, 0.1])
    val, s = wsp.logsumexp(x, b=b, return_sign=True)
    f = lambda x: wsp.logsumexp(x, b=b, return_sign=True)[0]
    assert np.isclose(f(x), val)
    wg.check_grad(f, x, order=2)
    # stable for huge inputs
    np.testing.assert_allclose(wg.grad(wsp.logsumexp)(np.array([1000.0, 1000.0])), [0.5, 0.5])


def test_passthrough():
    assert wsp.factorial(4) == 24.0
    with pytest.raises(NotImplementedError, match="scipy.special.mathieu_a"):
        wg.grad(lambda x: wsp.mathieu_a(1.0, x))(0.5)


def _jv_of_order(v):  # at module level, with def: wengert.source reads its source
    return wsp.jv(v, 1.3)


@pytest.mark.parametrize("name", sorted(ORDER_ARG))
def test_orders_are_not_differentiated_silently(name):
    # the derivative in an order is not implemented: differentiating it raises, in every
    # engine, rather than giving zero (multigammaln's d is an integer: SciPy refuses a float)
    p = SPECIAL[name]
    k = len(_lead(name))
    for i, arg in enumerate({"polygamma": "n", "yn": "n", "gammainc": "a", "gammaincc": "a",
                             "betainc": "ab"}.get(name, "v")):
        def f(v):
            lead = [1.0] * k
            lead[i] = v
            return p(*lead, 0.4)
        assert_not_differentiated(name, arg, f)


def test_order_not_differentiated_in_source_mode_either():
    with pytest.raises(NotImplementedError, match="'v'"):
        wg.source.grad(_jv_of_order)(1.0)
    assert wg.source.grad(lambda_free_jv)(1.3) == pytest.approx(
        0.5 * (sp.jv(0.5, 1.3) - sp.jv(2.5, 1.3)))


def lambda_free_jv(x):
    return wsp.jv(1.5, x)  # a constant order: the derivative in x as before


def test_scipy_wrappers_over_private_ufuncs_dispatch():
    # sp.zeta and sp.lambertw are Python functions calling scipy.special._ufuncs._zeta,
    # _riemann_zeta and _lambertw: "numpy._zeta has no wengert rule" before
    q = np.array([1.5, 0.7])
    np.testing.assert_allclose(wg.jacobian(lambda q: sp.zeta(2.5, q))(q).diagonal(),
                               -2.5 * sp.zeta(3.5, q), rtol=1e-14)
    np.testing.assert_allclose(wg.grad(lambda x: wg.numpy.sum(wg.numpy.real(sp.lambertw(x))))(q),
                               wg.grad(lambda x: wg.numpy.sum(wg.numpy.real(wsp.lambertw(x))))(q))
    with pytest.raises(NotImplementedError, match=r"scipy\.special\.zeta .* argument 'x'"):
        wg.grad(lambda x: sp.zeta(x))(2.5)
