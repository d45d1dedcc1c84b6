"""wengert.scipy.stats: values equal scipy.stats's, derivatives equal central differences (both
modes, second order), and in closed form where there is one."""
import numpy as np
import pytest
import scipy.stats as ss

import wengert as wg
from wengert.scipy import stats

R = np.random.default_rng(7)
X = R.standard_normal(4)
POS = R.standard_normal(4) ** 2 + 1.1
UNIT = R.uniform(0.05, 0.95, 4)

# (name, function, arguments, which of them are differentiated)
CASES = [
    ("norm.pdf", (X, X[::-1], POS), (0, 1, 2)),
    ("norm.logpdf", (X, X[::-1], POS), (0, 1, 2)),
    ("norm.cdf", (X, X[::-1], POS), (0, 1, 2)),
    ("norm.logcdf", (X, X[::-1], POS), (0, 1, 2)),
    ("norm.sf", (X, X[::-1], POS), (0, 1, 2)),
    ("norm.logsf", (X, X[::-1], POS), (0, 1, 2)),
    ("norm.logpdf", (R.standard_normal((4, 3)), X[:3].reshape(1, 3), POS.reshape(4, 1)),
     (0, 1, 2)),
    ("t.pdf", (X, POS + 1, X[::-1], POS), (0, 1, 2, 3)),
    ("t.logpdf", (X, POS + 1, X[::-1], POS), (0, 1, 2, 3)),
    ("t.cdf", (X, POS + 1, X[::-1], POS), (0, 2, 3)),
    ("t.logcdf", (X, POS + 1, X[::-1], POS), (0, 2, 3)),
    ("t.sf", (X, POS + 1), (0,)),
    ("chi2.pdf", (POS, np.array([1.0, 2.0, 3.0, 4.5])), (0, 1)),
    ("chi2.logpdf", (POS, np.array([1.0, 2.0, 3.0, 4.5])), (0, 1)),
    ("chi2.cdf", (POS, np.array([1.0, 2.0, 3.0, 4.5])), (0,)),
    ("chi2.sf", (POS, 3.0), (0,)),
    ("gamma.pdf", (POS, POS[::-1]), (0, 1)),
    ("gamma.logpdf", (POS, POS[::-1], 0.2, 1.5), (0, 1, 2, 3)),
    ("gamma.cdf", (POS, POS[::-1]), (0,)),
    ("gamma.logcdf", (POS, POS[::-1]), (0,)),
    ("gamma.sf", (POS, POS[::-1]), (0,)),
    ("beta.pdf", (UNIT, POS, POS[::-1]), (0, 1, 2)),
    ("beta.logpdf", (UNIT, POS, POS[::-1]), (0, 1, 2)),
    ("beta.cdf", (UNIT, POS, POS[::-1]), (0,)),
]


def _fn(name, module):
    dist, f = name.split(".")
    return getattr(getattr(module, dist), f)


def _partial(f, args, i):
    return lambda a: f(*args[:i], a, *args[i + 1:])


@pytest.mark.parametrize("name, args, wrt", CASES, ids=[c[0] for c in CASES])
def test_values_and_derivatives(name, args, wrt):
    f = _fn(name, stats)
    np.testing.assert_allclose(f(*args), _fn(name, ss)(*args), rtol=1e-10, atol=1e-300)
    for i in wrt:
        wg.check_grad(_partial(f, args, i), args[i], order=2)


def test_poisson_in_the_mean():
    k, mu = np.round(X ** 2 * 3), POS
    for f in ("pmf", "logpmf", "cdf", "sf"):
        np.testing.assert_allclose(getattr(stats.poisson, f)(k, mu), getattr(ss.poisson, f)(k, mu),
                                   rtol=1e-10)
        wg.check_grad(lambda m: getattr(stats.poisson, f)(k, m), mu, order=2)
    # closed form: d/dmu log pmf = k/mu - 1
    np.testing.assert_allclose(wg.grad(lambda m: stats.poisson.logpmf(k, m).sum())(mu), k / mu - 1)


def test_closed_forms():
    x, loc, scale = 0.7, -0.2, 1.3
    z = (x - loc) / scale
    assert wg.grad(stats.norm.logpdf)(x, loc, scale) == pytest.approx(-z / scale)
    assert wg.grad(stats.norm.cdf)(x, loc, scale) == pytest.approx(ss.norm.pdf(x, loc, scale))
    assert wg.grad(stats.t.cdf)(x, 3.5) == pytest.approx(ss.t.pdf(x, 3.5))
    assert wg.grad(stats.gamma.cdf)(x, 2.5) == pytest.approx(ss.gamma.pdf(x, 2.5))
    assert wg.grad(stats.beta.cdf)(0.3, 2.0, 3.0) == pytest.approx(ss.beta.pdf(0.3, 2.0, 3.0))


def test_outside_the_support_as_scipy():
    x = np.array([-1.0, 0.5, 2.0])
    for name, args in (("gamma.pdf", (2.0,)), ("gamma.logpdf", (2.0,)), ("chi2.pdf", (3.0,)),
                       ("beta.pdf", (2.0, 3.0)), ("beta.logpdf", (2.0, 3.0)),
                       ("gamma.cdf", (2.0,)), ("beta.cdf", (2.0, 3.0))):
        np.testing.assert_allclose(_fn(name, stats)(x, *args), _fn(name, ss)(x, *args))
    # the derivative outside is zero (a constant there), not NaN
    g = wg.grad(lambda x: stats.gamma.pdf(x, 2.0).sum())(x)
    assert g[0] == 0.0 and np.isfinite(g).all()


def _psd(n):
    a = R.standard_normal((n, n))
    return a.T @ a + np.eye(n)


def test_multivariate_normal():
    mean, cov = R.standard_normal(4), _psd(4)
    for x in (R.standard_normal(4), R.standard_normal((5, 4))):
        np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, mean, cov),
                                   ss.multivariate_normal.logpdf(x, mean, cov), rtol=1e-10)
        np.testing.assert_allclose(stats.multivariate_normal.pdf(x, mean, cov),
                                   ss.multivariate_normal.pdf(x, mean, cov), rtol=1e-10)
        sym = lambda c: 0.5 * (c + c.T)  # noqa: E731
        wg.check_grad(lambda x, m, c: stats.multivariate_normal.logpdf(x, m, sym(c)),
                      x, mean, cov, order=2)
    np.testing.assert_allclose(stats.multivariate_normal.entropy(mean, cov),
                               ss.multivariate_normal.entropy(mean, cov), rtol=1e-12)
    wg.check_grad(lambda c: stats.multivariate_normal.entropy(mean, 0.5 * (c + c.T)), cov,
                  order=2)
    # closed form: d/dx logpdf = -cov^-1 (x - mean)
    x = R.standard_normal(4)
    np.testing.assert_allclose(wg.grad(stats.multivariate_normal.logpdf)(x, mean, cov),
                               -np.linalg.solve(cov, x - mean))


def test_multivariate_normal_singular():
    cov = np.diag([1.0, 2.0, 0.0, 0.0])
    mean = np.array([0.3, -0.1, 0.0, 0.0])
    x = np.array([0.5, 0.2, 0.0, 0.0])
    for f in ("pdf", "logpdf"):
        ref = getattr(ss.multivariate_normal, f)(x, mean, cov, allow_singular=True)
        got = getattr(stats.multivariate_normal, f)(x, mean, cov, allow_singular=True)
        assert got == pytest.approx(ref, rel=1e-10)
        wg.check_grad(lambda x2: getattr(stats.multivariate_normal, f)(
            wg.numpy.concatenate([x2, mean[2:]]), mean, cov, allow_singular=True), x[:2], order=2)
    with pytest.raises(np.linalg.LinAlgError, match="allow_singular=True"):
        stats.multivariate_normal.logpdf(x, mean, -np.eye(4))


def test_dirichlet():
    alpha = R.uniform(1.2, 3.0, 4)
    x = ss.dirichlet.rvs(alpha, random_state=1)[0]
    for f in ("pdf", "logpdf"):
        assert getattr(stats.dirichlet, f)(x, alpha) == pytest.approx(
            getattr(ss.dirichlet, f)(x, alpha), rel=1e-10)
        wg.check_grad(lambda a: getattr(stats.dirichlet, f)(x, a), alpha, order=2)
        wg.check_grad(lambda y: getattr(stats.dirichlet, f)(y / wg.numpy.sum(y), alpha), x,
                      order=2)
    with pytest.raises(ValueError, match="sum to 1"):
        stats.dirichlet.logpdf(2 * x, alpha)


def test_other_names_are_scipys_for_plain_values():
    assert stats.norm.ppf(0.5) == 0.0
    with pytest.raises(NotImplementedError, match="scipy.stats.norm.ppf"):
        wg.grad(stats.norm.ppf)(0.3)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0) at the support's ends, as SciPy
def test_ends_of_the_support_as_scipy():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    for name, args in (("gamma", (0.5,)), ("gamma", (1.0,)), ("gamma", (2.0,)), ("chi2", (2.0,)),
                       ("beta", (0.5, 0.5)), ("beta", (1.0, 2.0)), ("beta", (2.0, 3.0))):
        for f in ("pdf", "logpdf", "cdf"):
            np.testing.assert_allclose(_fn(f"{name}.{f}", stats)(x, *args),
                                       _fn(f"{name}.{f}", ss)(x, *args))
    k = np.array([-1.0, 0.0, 2.5, 3.0])  # a negative or fractional count has probability 0
    for f in ("pmf", "logpmf", "cdf", "sf"):
        np.testing.assert_allclose(getattr(stats.poisson, f)(k, 2.0), getattr(ss.poisson, f)(k, 2.0))
    assert wg.grad(lambda m: stats.poisson.logpmf(k, m).sum())(2.0) == pytest.approx(-0.5)
