"""scipy.special distribution functions, orthogonal polynomials and binom: rules checked against
SciPy's values, finite differences (order 2, both modes, float64 and float32), both Jacobian
modes under broadcasting, and mpmath's high-precision derivatives."""
import math

import mpmath as mp
import numpy as np
import pytest
import scipy.special as sp

import wengert as wg
from wengert.rules.special import SPECIAL
from wengert.scipy import special as wsp

from special_checks import assert_not_differentiated  # tests/special_checks.py

# name -> (the arguments not differentiated {position: (name, values)},
#          the differentiated ones {position: sampling interval})
B = [0.6, 2.0, 5.5]
CASES = {
    "stdtr": ({0: ("df", [0.7, 3.0, 25.0])}, {1: (-3.0, 3.0)}),
    "stdtrit": ({0: ("df", [0.7, 3.0, 25.0])}, {1: (0.05, 0.95)}),
    "chdtr": ({0: ("v", [0.6, 2.0, 7.5])}, {1: (0.2, 6.0)}),
    "chdtrc": ({0: ("v", [0.6, 2.0, 7.5])}, {1: (0.2, 6.0)}),
    "chdtri": ({0: ("v", [0.6, 2.0, 7.5])}, {1: (0.05, 0.95)}),
    "gdtr": ({1: ("b", B)}, {0: (0.5, 2.0), 2: (0.2, 4.0)}),
    "gdtrc": ({1: ("b", B)}, {0: (0.5, 2.0), 2: (0.2, 4.0)}),
    "gdtrix": ({1: ("b", B)}, {0: (0.5, 2.0), 2: (0.05, 0.95)}),
    "gdtria": ({1: ("b", B)}, {0: (0.05, 0.95), 2: (0.2, 4.0)}),
    "fdtr": ({0: ("dfn", [0.8, 3.0, 12.0]), 1: ("dfd", [2.5, 5.0, 1.2])}, {2: (0.2, 4.0)}),
    "fdtrc": ({0: ("dfn", [0.8, 3.0, 12.0]), 1: ("dfd", [2.5, 5.0, 1.2])}, {2: (0.2, 4.0)}),
    "fdtri": ({0: ("dfn", [0.8, 3.0, 12.0]), 1: ("dfd", [2.5, 5.0, 1.2])}, {2: (0.05, 0.95)}),
    # k == n: the CDF is 1 for every p
    "bdtr": ({0: ("k", [0, 3, 7]), 1: ("n", [5, 10, 7])}, {2: (0.05, 0.95)}),
    "bdtrc": ({0: ("k", [0, 3, 7]), 1: ("n", [5, 10, 7])}, {2: (0.05, 0.95)}),
    "bdtri": ({0: ("k", [0, 3, 5]), 1: ("n", [5, 10, 7])}, {2: (0.05, 0.95)}),
    "nbdtr": ({0: ("k", [0, 3, 7]), 1: ("n", [1, 4, 10])}, {2: (0.05, 0.95)}),
    "nbdtrc": ({0: ("k", [0, 3, 7]), 1: ("n", [1, 4, 10])}, {2: (0.05, 0.95)}),
    "nbdtri": ({0: ("k", [0, 3, 7]), 1: ("n", [1, 4, 10])}, {2: (0.05, 0.95)}),
    "pdtr": ({0: ("k", [0, 2, 9])}, {1: (0.1, 8.0)}),
    "pdtrc": ({0: ("k", [0, 2, 9])}, {1: (0.1, 8.0)}),
    "pdtri": ({0: ("k", [0, 2, 9])}, {1: (0.05, 0.95)}),
}
N = [0, 1, 4]  # degrees: 0 has derivative 0
POLYS = {
    "eval_legendre": ({}, (-1.2, 1.2)),
    "eval_chebyt": ({}, (-1.2, 1.2)),
    "eval_chebyu": ({}, (-1.2, 1.2)),
    "eval_hermite": ({}, (-2.0, 2.0)),
    "eval_hermitenorm": ({}, (-2.0, 2.0)),
    "eval_laguerre": ({}, (-1.0, 5.0)),
    "eval_genlaguerre": ({1: ("alpha", [0.5, -0.4, 2.5])}, (-1.0, 5.0)),
    "eval_gegenbauer": ({1: ("alpha", [0.5, 1.5, -0.3])}, (-1.2, 1.2)),
    "eval_jacobi": ({1: ("alpha", [0.5, -0.3, 1.5]), 2: ("beta", [1.5, 0.2, -0.5])},
                    (-1.2, 1.2)),
    "eval_sh_legendre": ({}, (-0.1, 1.1)),
    "eval_sh_chebyt": ({}, (-0.1, 1.1)),
    "eval_sh_chebyu": ({}, (-0.1, 1.1)),
    "eval_sh_jacobi": ({1: ("p", [2.5, 1.0, 3.0]), 2: ("q", [1.5, 0.5, 2.0])}, (-0.1, 1.1)),
    "eval_chebyc": ({}, (-2.2, 2.2)),
    "eval_chebys": ({}, (-2.2, 2.2)),
}
for _name, (_fixed, _dom) in POLYS.items():
    CASES[_name] = ({0: ("n", N), **_fixed}, {len(_fixed) + 1: _dom})
del _name, _fixed, _dom


def _split(name, dtype, rng, shapes=None):
    """The fixed arguments (floats in ``dtype``, counts as integers) and a function of the
    differentiated ones."""
    fixed, free = CASES[name]
    nargs = len(fixed) + len(free)
    fixed_vals = {}
    for i, (_, vals) in fixed.items():
        vals = np.array(vals)
        fixed_vals[i] = vals.astype(dtype) if vals.dtype.kind == "f" else vals
    pos = sorted(free)
    shapes = shapes or [(3,)] * len(pos)
    xs = [rng.uniform(*free[i], s).astype(dtype) for i, s in zip(pos, shapes)]

    def assemble(*free_vals):
        args = [None] * nargs
        for i, v in fixed_vals.items():
            args[i] = v
        for i, v in zip(pos, free_vals):
            args[i] = v
        return args

    fn = SPECIAL[name]
    return (lambda *v: fn(*assemble(*v))), xs, assemble


def test_every_case_is_a_declared_primitive_without_domain():
    for name in CASES:
        assert SPECIAL[name].domain is None, name  # the generic tests would give them floats
        assert getattr(wsp, name) is SPECIAL[name]
    for name in ("binom", "kolmogorov", "kolmogi"):  # these run in tests/test_special.py
        assert SPECIAL[name].domain is not None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_check_grad(name, dtype):
    rng = np.random.default_rng(5)
    f, xs, assemble = _split(name, dtype, rng)
    out = f(*xs)
    assert out.dtype == dtype
    ref = getattr(sp, name)(*assemble(*xs))
    if dtype == np.float64:
        np.testing.assert_array_equal(out, ref)  # SciPy's own values
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-6)
    wg.check_grad(f, *xs, order=2, modes=("forward", "reverse"))
    for i in range(len(xs)):
        g = wg.grad(lambda *v: wg.numpy.sum(f(*v)), argnums=i)(*xs)
        assert g.dtype == dtype


@pytest.mark.parametrize("name", sorted(CASES))
def test_jacobian_modes_agree_broadcast(name):
    rng = np.random.default_rng(6)
    nfree = len(CASES[name][1])
    f, xs, _ = _split(name, np.float64, rng, shapes=[(2, 1), (3,)][:nfree])
    nums = tuple(range(nfree))
    jf = wg.jacobian(f, argnums=nums, mode="forward")(*xs)
    jr = wg.jacobian(f, argnums=nums, mode="reverse")(*xs)
    for a, b in zip(jf, jr):
        assert a.shape == (2, 3) + b.shape[2:]
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


_RAISES = [(name, i, arg) for name, (fixed, _) in sorted(CASES.items())
           for i, (arg, _) in fixed.items()
           if name not in ("eval_hermite", "eval_hermitenorm")]  # SciPy takes integer n only


@pytest.mark.filterwarnings("ignore:non-integer arg n is deprecated")
@pytest.mark.parametrize("name, i, arg", _RAISES)
def test_parameters_are_not_differentiated_silently(name, i, arg):
    fixed, free = CASES[name]
    args = [float(np.mean(free[j])) if j in free else float(fixed[j][1][1])
            for j in range(len(fixed) + len(free))]

    def f(v):
        a = list(args)
        a[i] = v
        return SPECIAL[name](*a)
    assert_not_differentiated(name, arg, f, at=args[i])


def test_hermite_degree_must_be_an_integer():
    # SciPy has only an integer loop: a float degree fails in SciPy, before any derivative
    with pytest.raises(TypeError):
        wg.grad(lambda n: wsp.eval_hermite(n, 0.3))(2.0)


# high-precision references ------------------------------------------------------------------------
# mpmath at 40 digits, differentiated by mp.diff; a CDF near 1 is differentiated through its
# complement (1 - cdf would need as many more digits as the complement is small)
DPS = 40


def _mp_d(f, x, order=1):
    with mp.workdps(DPS):
        return float(mp.diff(f, mp.mpf(float(x)), order))


def _mp_d_cdf(cdf, sf, x, order=1):
    with mp.workdps(DPS):
        if cdf(mp.mpf(float(x))) <= 0.5:
            return _mp_d(cdf, x, order)
        return -_mp_d(sf, x, order)


def _close(got, want, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(float(got), want, rtol=rtol, atol=atol)


def _mp_stdtr_d(v, t, order=1):
    with mp.workdps(DPS):
        v = mp.mpf(v)
        if abs(t) < 1:  # analytic through t = 0
            c = mp.gamma((v + 1) / 2) / (mp.sqrt(mp.pi * v) * mp.gamma(v / 2))
            return _mp_d(lambda t: 0.5 + t * c * mp.hyp2f1(0.5, (v + 1) / 2, 1.5, -t * t / v),
                         t, order)
        # the tail beyond |t|: the CDF for t < 0, the complement for t > 0
        d = _mp_d(lambda t: mp.betainc(v / 2, 0.5, 0, v / (v + t * t), regularized=True) / 2,
                  t, order)
        return d if t < 0 else -d


@pytest.mark.parametrize("df", [0.5, 1.0, 3.0, 30.0, 1e6])
@pytest.mark.parametrize("t", [-40.0, -1.0, -1e-9, 0.0, 2.5, 40.0])
def test_stdtr_mpmath(df, t):
    _close(wg.grad(lambda t: wsp.stdtr(df, t))(t), _mp_stdtr_d(df, t), rtol=1e-12)
    if abs(t) < 3:
        _close(wg.derivative(wg.derivative(lambda t: wsp.stdtr(df, t)))(t),
               _mp_stdtr_d(df, t, 2), rtol=1e-11, atol=1e-15)
    p = float(sp.stdtr(df, t))
    if 1e-12 < p < 1 - 1e-12:
        _close(wg.grad(lambda p: wsp.stdtrit(df, p))(p), 1 / _mp_stdtr_d(df, sp.stdtrit(df, p)),
               rtol=1e-9)


def test_stdtr_infinite_df_is_normal():
    t = np.array([-2.0, 0.3, 5.0])
    g = wg.grad(lambda t: wg.numpy.sum(wsp.stdtr(np.inf, t)))(t)
    np.testing.assert_allclose(g, np.exp(-t * t / 2) / math.sqrt(2 * math.pi), rtol=1e-15)
    g2 = wg.grad(lambda t: wg.numpy.sum(wsp.stdtr(np.array([np.inf, 3.0, np.inf]), t)))(t)
    assert g2[0] == g[0] and g2[2] == g[2]
    assert np.isclose(g2[1], wg.grad(lambda t: wsp.stdtr(3.0, t))(0.3))
    wg.check_grad(lambda t: wsp.stdtr(np.array([np.inf, 3.0, np.inf]), t), t, order=2)


@pytest.mark.parametrize("v", [0.4, 2.0, 3.0, 10.0, 150.0])
@pytest.mark.parametrize("x", [1e-6, 0.3, 2.0, 12.0, 200.0])
def test_chi2_mpmath(v, x):
    cdf = lambda x: mp.gammainc(mp.mpf(v) / 2, 0, x / 2, regularized=True)
    sf = lambda x: mp.gammainc(mp.mpf(v) / 2, x / 2, mp.inf, regularized=True)
    want = _mp_d_cdf(cdf, sf, x)
    _close(wg.grad(lambda x: wsp.chdtr(v, x))(x), want, rtol=1e-11)
    _close(wg.grad(lambda x: wsp.chdtrc(v, x))(x), -want, rtol=1e-11)
    _close(wg.derivative(wg.derivative(lambda x: wsp.chdtr(v, x)))(x), _mp_d_cdf(cdf, sf, x, 2),
           rtol=1e-10, atol=1e-300)
    q = float(sp.chdtrc(v, x))
    if 1e-12 < q < 1 - 1e-12:  # chdtri inverts the complement
        _close(wg.grad(lambda q: wsp.chdtri(v, q))(q),
               -1 / _mp_d_cdf(cdf, sf, sp.chdtri(v, q)), rtol=1e-8)


def test_chi2_at_zero():
    # the density's limit at x = 0: infinite (v < 2), 1/2 (v = 2), 0 (v > 2)
    with np.errstate(divide="ignore"):
        assert wg.grad(lambda x: wsp.chdtr(1.0, x))(0.0) == np.inf
    assert wg.grad(lambda x: wsp.chdtr(2.0, x))(0.0) == 0.5
    assert wg.grad(lambda x: wsp.chdtr(3.0, x))(0.0) == 0.0
    assert wg.grad(lambda m: wsp.pdtr(0, m))(0.0) == -1.0  # pdtr(0, m) = exp(-m)


@pytest.mark.parametrize("a, b, x", [(0.5, 0.6, 0.01), (2.0, 2.0, 1.5), (0.1, 7.5, 90.0),
                                     (3.0, 1.0, 1e-7), (1.7, 40.0, 25.0)])
def test_gamma_mpmath(a, b, x):
    cdf = lambda a, x: mp.gammainc(mp.mpf(b), 0, a * x, regularized=True)
    da = _mp_d(lambda a: cdf(a, x), a)
    dx = _mp_d(lambda x: cdf(a, x), x)
    ga, gx = wg.grad(lambda a, x: wsp.gdtr(a, b, x), argnums=(0, 1))(a, x)
    _close(ga, da, rtol=1e-11)
    _close(gx, dx, rtol=1e-11)
    assert np.isclose(ga, x / a * gx, rtol=1e-14)  # d/da = x/a times the density
    ga, gx = wg.grad(lambda a, x: wsp.gdtrc(a, b, x), argnums=(0, 1))(a, x)
    _close(ga, -da, rtol=1e-11)
    _close(gx, -dx, rtol=1e-11)
    p = float(sp.gdtr(a, b, x))
    # the inverses, by the implicit function theorem at the quantile
    xq = sp.gdtrix(a, b, p)
    fa, fx = (_mp_d(lambda a: cdf(a, xq), a), _mp_d(lambda x: cdf(a, x), xq))
    ga, gp = wg.grad(lambda a, p: wsp.gdtrix(a, b, p), argnums=(0, 1))(a, p)
    _close(ga, -fa / fx, rtol=1e-8)
    _close(gp, 1 / fx, rtol=1e-8)
    aq = sp.gdtria(p, b, x)
    fa, fx = (_mp_d(lambda a: cdf(a, x), aq), _mp_d(lambda x: cdf(aq, x), x))
    gp, gx = wg.grad(lambda p, x: wsp.gdtria(p, b, x), argnums=(0, 1))(p, x)
    _close(gp, 1 / fa, rtol=1e-8)
    _close(gx, -fx / fa, rtol=1e-8)


@pytest.mark.parametrize("d1, d2", [(0.8, 2.5), (1.0, 1.0), (2.0, 7.0), (30.0, 200.0)])
@pytest.mark.parametrize("x", [1e-6, 0.5, 1.0, 4.0, 300.0])
def test_f_mpmath(d1, d2, x):
    d1m, d2m = mp.mpf(d1), mp.mpf(d2)
    w = lambda x: d1m * x / (d1m * x + d2m)
    cdf = lambda x: mp.betainc(d1m / 2, d2m / 2, 0, w(x), regularized=True)
    sf = lambda x: mp.betainc(d2m / 2, d1m / 2, 0, d2m / (d1m * x + d2m), regularized=True)
    want = _mp_d_cdf(cdf, sf, x)
    _close(wg.grad(lambda x: wsp.fdtr(d1, d2, x))(x), want, rtol=1e-11)
    _close(wg.grad(lambda x: wsp.fdtrc(d1, d2, x))(x), -want, rtol=1e-11)
    p = float(sp.fdtr(d1, d2, x))
    if 1e-12 < p < 1 - 1e-12:
        _close(wg.grad(lambda p: wsp.fdtri(d1, d2, p))(p),
               1 / _mp_d_cdf(cdf, sf, sp.fdtri(d1, d2, p)), rtol=1e-8)


def _mp_binomial_sums(k, n):
    """bdtr and its complement, as the finite sums of the binomial pmf."""
    pmf = lambda j, p: mp.binomial(n, j) * p ** j * (1 - p) ** (n - j)
    return (lambda p: mp.fsum(pmf(j, p) for j in range(k + 1)),
            lambda p: mp.fsum(pmf(j, p) for j in range(k + 1, n + 1)))


def _mp_nbinomial(k, n):
    """nbdtr as the finite sum of the negative binomial pmf; its complement I_(1-p)(k+1, n)."""
    return (lambda p: mp.fsum(mp.binomial(j + n - 1, j) * p ** n * (1 - p) ** j
                              for j in range(k + 1)),
            lambda p: mp.betainc(k + 1, n, 0, 1 - p, regularized=True))


def _mp_poisson(k):
    """pdtr as the finite sum of the Poisson pmf; its complement P(k + 1, m)."""
    return (lambda m: mp.fsum(mp.exp(-m) * m ** j / mp.factorial(j) for j in range(k + 1)),
            lambda m: mp.gammainc(k + 1, 0, m, regularized=True))


@pytest.mark.parametrize("k, n", [(0, 1), (0, 5), (3, 10), (9, 10), (10, 10), (25, 60)])
@pytest.mark.parametrize("p", [1e-5, 0.3, 0.5, 0.97])
def test_binomial_family_mpmath(k, n, p):
    tails = _mp_binomial_sums(k, n)
    want = _mp_d_cdf(*tails, p)
    _close(wg.grad(lambda p: wsp.bdtr(k, n, p))(p), want, rtol=1e-12, atol=1e-300)
    _close(wg.grad(lambda p: wsp.bdtrc(k, n, p))(p), -want, rtol=1e-12, atol=1e-300)
    # k is floored, as SciPy does
    _close(wg.grad(lambda p: wsp.bdtr(k + 0.7, n, p))(p), want, rtol=1e-12, atol=1e-300)
    _close(wg.derivative(wg.derivative(lambda p: wsp.bdtr(k, n, p)))(p),
           _mp_d_cdf(*tails, p, 2), rtol=1e-11, atol=1e-300)
    y = float(sp.bdtr(k, n, p))
    if k < n and 1e-10 < y < 1 - 1e-10:
        _close(wg.grad(lambda y: wsp.bdtri(k, n, y))(y), 1 / _mp_d_cdf(*tails, sp.bdtri(k, n, y)),
               rtol=1e-7)
    tails = _mp_nbinomial(k, n)
    want = _mp_d_cdf(*tails, p)
    _close(wg.grad(lambda p: wsp.nbdtr(k, n, p))(p), want, rtol=1e-12, atol=1e-300)
    _close(wg.grad(lambda p: wsp.nbdtrc(k, n, p))(p), -want, rtol=1e-12, atol=1e-300)
    y = float(sp.nbdtr(k, n, p))
    if 1e-10 < y < 1 - 1e-10:
        _close(wg.grad(lambda y: wsp.nbdtri(k, n, y))(y),
               1 / _mp_d_cdf(*tails, sp.nbdtri(k, n, y)), rtol=1e-7)


def test_bdtr_certain_success():
    # k = n: bdtr is 1 for every p, its derivative 0 at p = 1 too (the formula alone: nan)
    for p in (0.0, 0.4, 1.0):
        assert wg.grad(lambda p: wsp.bdtr(4, 4, p))(p) == 0.0
        assert wg.derivative(wg.derivative(lambda p: wsp.bdtr(4, 4, p)))(p) == 0.0
    assert wg.grad(lambda p: wsp.bdtr(0, 1, p))(1.0) == -1.0  # 1 - p
    assert wg.grad(lambda p: wsp.nbdtr(0, 1, p))(0.0) == 1.0  # p


@pytest.mark.parametrize("k", [0, 1, 4, 30])
@pytest.mark.parametrize("m", [1e-8, 0.5, 4.0, 45.0])
def test_poisson_mpmath(k, m):
    tails = _mp_poisson(k)
    want = _mp_d_cdf(*tails, m)
    _close(wg.grad(lambda m: wsp.pdtr(k, m))(m), want, rtol=1e-12, atol=1e-300)
    _close(wg.grad(lambda m: wsp.pdtrc(k, m))(m), -want, rtol=1e-12, atol=1e-300)
    _close(wg.grad(lambda m: wsp.pdtr(k + 0.5, m))(m), want, rtol=1e-12, atol=1e-300)
    _close(wg.derivative(wg.derivative(lambda m: wsp.pdtr(k, m)))(m), _mp_d_cdf(*tails, m, 2),
           rtol=1e-11, atol=1e-300)
    y = float(sp.pdtr(k, m))
    if 1e-10 < y < 1 - 1e-10:
        _close(wg.grad(lambda y: wsp.pdtri(k, y))(y), 1 / _mp_d_cdf(*tails, sp.pdtri(k, y)),
               rtol=1e-8)


def _mp_kolmogorov_d(y, order=1):
    with mp.workdps(DPS):
        if y >= 0.5:
            return _mp_d(lambda y: 2 * mp.nsum(lambda j: (-1) ** (j - 1)
                                               * mp.exp(-2 * j * j * y * y), [1, mp.inf]),
                         y, order)
        # small y: minus the derivative of the CDF, by Jacobi's theta transformation
        return -_mp_d(lambda y: mp.sqrt(2 * mp.pi) / y * mp.nsum(
            lambda j: mp.exp(-(2 * j - 1) ** 2 * mp.pi ** 2 / (8 * y * y)), [1, mp.inf]),
            y, order)


@pytest.mark.parametrize("y", [0.06, 0.2, 0.5, 0.9, 0.999999, 1.0, 1.3, 3.0, 6.0])
def test_kolmogorov_mpmath(y):
    _close(wg.grad(wsp.kolmogorov)(y), _mp_kolmogorov_d(y), rtol=1e-13, atol=1e-300)
    # SciPy's private _kolmogp agrees, to its own accuracy
    _close(wg.grad(wsp.kolmogorov)(y), sp._ufuncs._kolmogp(y), rtol=1e-9, atol=1e-300)
    _close(wg.derivative(wg.derivative(wsp.kolmogorov))(y), _mp_kolmogorov_d(y, 2),
           rtol=1e-12, atol=1e-300)
    p = float(sp.kolmogorov(y))
    if 1e-12 < p < 1 - 1e-12:
        _close(wg.grad(wsp.kolmogi)(p), 1 / _mp_kolmogorov_d(sp.kolmogi(p)), rtol=1e-9)


def test_kolmogorov_far_ends():
    # kolmogorov is 1 for y <= 0; far out both ends the derivative is 0, never nan
    for y in (-1.0, 0.0, 0.01, 40.0, 1e5, np.inf):
        assert wg.grad(wsp.kolmogorov)(y) == 0.0
        assert wg.derivative(wg.derivative(wsp.kolmogorov))(y) == 0.0


# orthogonal polynomials ---------------------------------------------------------------------------
def _mp_gegenbauer(n, a, x):
    if n != int(n):
        return mp.gegenbauer(n, a, x)
    # mpmath's hypergeometric form fails to converge at some integer n: the explicit sum
    n = int(n)
    return mp.fsum((-1) ** j * mp.gamma(n - j + a) * (2 * x) ** (n - 2 * j)
                   / (mp.gamma(a) * mp.factorial(j) * mp.factorial(n - 2 * j))
                   for j in range(n // 2 + 1))


MP_POLY = {
    "eval_legendre": lambda n, x: mp.legendre(n, x),
    "eval_chebyt": lambda n, x: mp.chebyt(n, x),
    "eval_chebyu": lambda n, x: mp.chebyu(n, x),
    "eval_hermite": lambda n, x: mp.hermite(n, x),
    "eval_hermitenorm": lambda n, x: mp.hermite(n, x / mp.sqrt(2)) / mp.sqrt(2) ** n,
    "eval_laguerre": lambda n, x: mp.laguerre(n, 0, x),
    "eval_genlaguerre": lambda n, x: mp.laguerre(n, mp.mpf(0.7), x),
    "eval_gegenbauer": lambda n, x: _mp_gegenbauer(n, mp.mpf(1.3), x),
    "eval_jacobi": lambda n, x: mp.jacobi(n, mp.mpf(0.4), mp.mpf(-0.6), x),
    "eval_sh_legendre": lambda n, x: mp.legendre(n, 2 * x - 1),
    "eval_sh_chebyt": lambda n, x: mp.chebyt(n, 2 * x - 1),
    "eval_sh_chebyu": lambda n, x: mp.chebyu(n, 2 * x - 1),
    # G_n^(p,q)(x) = P_n^(p-q,q-1)(2x-1) / binom(2n+p-1, n), p = 2.5, q = 1.5
    "eval_sh_jacobi": lambda n, x: mp.jacobi(n, 1, mp.mpf(0.5), 2 * x - 1)
    / mp.binomial(2 * n + mp.mpf(1.5), n),
    "eval_chebyc": lambda n, x: 2 * mp.chebyt(n, x / 2),
    "eval_chebys": lambda n, x: mp.chebyu(n, x / 2),
}
PARAMS = {"eval_genlaguerre": (0.7,), "eval_gegenbauer": (1.3,), "eval_jacobi": (0.4, -0.6),
          "eval_sh_jacobi": (2.5, 1.5)}
SHIFTED = ("eval_sh_legendre", "eval_sh_chebyt", "eval_sh_chebyu", "eval_sh_jacobi")


def _poly_points(name):
    if name in SHIFTED:  # x = 0 and 1 are the ends, where the textbook formulas divide by 0
        return [0.0, 1.0, 1e-9, 0.5, 0.77, -0.6, 3.0]
    scale = 2.0 if name in ("eval_chebyc", "eval_chebys") else 1.0
    return [scale * x for x in (-1.0, 1.0, 0.0, 1e-9, 0.31, -0.83, -3.0, 7.5)]


@pytest.mark.parametrize("name", sorted(MP_POLY))
@pytest.mark.parametrize("n", [0, 1, 2, 5, 12])
def test_polynomials_mpmath(name, n):
    params = PARAMS.get(name, ())
    f = lambda x: SPECIAL[name](n, *params, x)
    for x in _poly_points(name):
        if "laguerre" in name:
            x = abs(x) * 3
        want = _mp_d(lambda x: MP_POLY[name](n, x), x)
        with mp.workdps(DPS):
            scale = max(1.0, abs(want), float(abs(MP_POLY[name](n, mp.mpf(x)))))
        _close(wg.grad(f)(x), want, rtol=1e-11, atol=1e-13 * scale)
        want2 = _mp_d(lambda x: MP_POLY[name](n, x), x, 2)
        _close(wg.derivative(wg.derivative(f))(x), want2, rtol=1e-10, atol=1e-12 * scale)


@pytest.mark.parametrize("name", sorted(MP_POLY))
def test_polynomial_degree_array_and_zero(name):
    params = PARAMS.get(name, ())
    n = np.array([[0], [3], [7]])
    x = np.linspace(0.1, 0.9, 4)
    g = wg.jacobian(lambda x: SPECIAL[name](n, *params, x), mode="reverse")(x)
    g = np.stack([np.diagonal(g[i]) for i in range(3)])  # elementwise: d out[i, j] / d x[j]
    assert np.all(g[0] == 0.0)  # degree 0: a constant
    for i, ni in enumerate(n[:, 0]):
        want = [wg.grad(lambda x: SPECIAL[name](int(ni), *params, x))(xi) for xi in x]
        np.testing.assert_allclose(g[i], want, rtol=1e-14)


NONINT = ["eval_legendre", "eval_chebyt", "eval_chebyu", "eval_laguerre", "eval_genlaguerre",
          "eval_gegenbauer", "eval_jacobi", "eval_sh_legendre", "eval_sh_chebyt",
          "eval_sh_chebyu", "eval_sh_jacobi", "eval_chebyc", "eval_chebys"]


@pytest.mark.parametrize("name", NONINT)
@pytest.mark.parametrize("n", [0.5, 2.5, 3.75])
def test_polynomials_non_integer_degree(name, n):
    # SciPy's non-integer degrees are the hypergeometric forms; the derivative identities are
    # theirs, so they hold there too (inside the interval of orthogonality)
    params = PARAMS.get(name, ())
    f = lambda x: SPECIAL[name](n, *params, x)
    for x in ([0.2, 0.55, 0.9] if name in SHIFTED else
              [0.3, 1.7, 4.0] if "laguerre" in name else
              [-1.1, 0.4, 1.5] if name in ("eval_chebyc", "eval_chebys") else [-0.7, 0.1, 0.8]):
        with mp.workdps(DPS):
            assert np.isclose(f(x), float(MP_POLY[name](n, mp.mpf(x))), rtol=1e-9)
        _close(wg.grad(f)(x), _mp_d(lambda x: MP_POLY[name](n, x), x), rtol=1e-8, atol=1e-12)
    wg.check_grad(f, np.array([0.2, 0.3, 0.7]), order=2)


def test_polynomial_float32_with_python_int_degree():
    x = np.array([0.1, 0.5], np.float32)
    for name in MP_POLY:
        f = lambda x: SPECIAL[name](3, *PARAMS.get(name, ()), x)
        assert f(x).dtype == np.float32
        assert wg.grad(lambda x: wg.numpy.sum(f(x)))(x).dtype == np.float32
        assert wg.hessian(lambda x: wg.numpy.sum(f(x)))(x).dtype == np.float32


# binom --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, k", [(5.0, 2.0), (2.5, 1.2), (1.0, 3.0), (2.0, 3.0), (0.5, 4.0),
                                  (3.0, 3.0), (3.0, 2.5), (2.5, -1.0), (4.0, -2.0),
                                  (2.0, -0.5), (-0.5, 2.0), (-1.5, 3.0), (60.0, 25.0),
                                  (7.0, 1e-9)])
def test_binom_mpmath(n, k):
    # includes the zeros of binom (integer k > n, negative integer k), where binom * digamma
    # is 0 * inf but the derivatives are not 0
    gn, gk = wg.grad(wsp.binom, argnums=(0, 1))(n, k)
    want_n = _mp_d(lambda n: mp.binomial(n, k), n)
    want_k = _mp_d(lambda k: mp.binomial(n, k), k)
    _close(gn, want_n, rtol=1e-11, atol=1e-14)
    _close(gk, want_k, rtol=1e-11, atol=1e-14)
    h = wg.hessian(wsp.binom, argnums=(0, 1))(n, k)
    with mp.workdps(DPS):
        nk = (mp.mpf(n), mp.mpf(k))
        want = [[mp.diff(mp.binomial, nk, (2, 0)), mp.diff(mp.binomial, nk, (1, 1))],
                [mp.diff(mp.binomial, nk, (1, 1)), mp.diff(mp.binomial, nk, (0, 2))]]
    np.testing.assert_allclose(np.array(h, float), np.array(want, float), rtol=1e-9, atol=1e-12)


def test_binom_integer_closed_forms():
    # d/dn binom(n, 3) = (3n^2 - 6n + 2) / 6 at every n, zeros of binom included
    for n in (0.0, 1.0, 2.0, 3.0, 4.0, 2.5):
        assert np.isclose(wg.grad(lambda n: wsp.binom(n, 3.0))(n), (3 * n * n - 6 * n + 2) / 6,
                          rtol=1e-13, atol=1e-15)
        assert np.isclose(wg.derivative(wg.derivative(lambda n: wsp.binom(n, 3.0)))(n), n - 1,
                          rtol=1e-12, atol=1e-14)
    wg.check_grad(wsp.binom, np.array([0.0, 1.0, 2.0, 6.0]), np.array([3.0, 3.0, 3.0, 2.0]),
                  order=2)
