"""``wengert.scipy.stats``: the densities and distribution functions of ``scipy.stats`` that
autograd users differentiate (``norm``, ``t``, ``chi2``, ``gamma``, ``beta``, ``poisson``,
``multivariate_normal``, ``dirichlet``).

Each is a composition of ``wnp`` and ``wengert.scipy.special`` primitives, so it has no rules of
its own: every engine and every order differentiate it through theirs. Arguments broadcast as in
SciPy; ``loc`` and ``scale`` shift and scale as in SciPy's ``rv_continuous``. Outside the
support a density is 0 (log-density ``-inf``) and a distribution function 0 or 1, as SciPy's.

>>> import numpy as np, wengert as wg
>>> from wengert.scipy import stats
>>> float(wg.grad(stats.norm.logpdf)(0.5))   # d/dx of -x**2/2
-0.5
>>> bool(np.isclose(stats.t.cdf(1.0, 3.0), 0.8044988905221148))
True
"""
import numpy as np

from .. import numpy as wnp
from ..core import plain
from ..numpy import _passthrough
from . import special as sp

__all__ = ["norm", "t", "chi2", "gamma", "beta", "poisson", "multivariate_normal", "dirichlet"]

_LOG_2PI = float(np.log(2 * np.pi))


def _z(x, loc, scale):
    return (x - loc) / scale


def _inside(x, low, high=None):
    """``(mask, safe_x)``: where ``x`` lies in the (closed) support, and ``x`` moved inside elsewhere
    (so that the branch not taken computes no NaN, in the value or the derivative)."""
    xp = np.asarray(plain(x))
    inside = xp >= low if high is None else (xp >= low) & (xp <= high)
    mid = low + 1.0 if high is None else 0.5 * (low + high)
    return inside, wnp.where(inside, x, mid)


def _support(logpdf_of_safe, x, low, high=None):
    """A log-density on ``(low, high)``, ``-inf`` outside (SciPy's convention)."""
    inside, xs = _inside(x, low, high)
    if inside.all():
        return logpdf_of_safe(xs)
    return wnp.where(inside, logpdf_of_safe(xs), -np.inf)


class _Namespace:
    """A distribution's functions, as ``scipy.stats.norm.pdf`` etc. Its other names (``rvs``,
    ``ppf``, ...) are SciPy's own for plain values and raise ``NotImplementedError`` on traced
    ones."""

    def __init__(self, name, **fns):
        self.__name__ = name
        for k, fn in fns.items():
            fn.__qualname__ = f"{name}.{k}"
            setattr(self, k, fn)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        import scipy.stats  # heavy: loaded only when a name without a rule is asked for
        fn = getattr(getattr(scipy.stats, self.__name__), attr)
        return _passthrough(f"scipy.stats.{self.__name__}.{attr}", fn) if callable(fn) else fn

    def __repr__(self):
        return f"<wengert.scipy.stats.{self.__name__}>"


# -- normal ---------------------------------------------------------------------------------------
def _norm_logpdf(x, loc=0.0, scale=1.0):
    z = _z(x, loc, scale)
    return -0.5 * z ** 2 - 0.5 * _LOG_2PI - wnp.log(scale)


norm = _Namespace(
    "norm",
    logpdf=_norm_logpdf,
    pdf=lambda x, loc=0.0, scale=1.0: wnp.exp(_norm_logpdf(x, loc, scale)),
    cdf=lambda x, loc=0.0, scale=1.0: sp.ndtr(_z(x, loc, scale)),
    logcdf=lambda x, loc=0.0, scale=1.0: sp.log_ndtr(_z(x, loc, scale)),
    sf=lambda x, loc=0.0, scale=1.0: sp.ndtr(-_z(x, loc, scale)),
    logsf=lambda x, loc=0.0, scale=1.0: sp.log_ndtr(-_z(x, loc, scale)),
)


# -- Student's t ----------------------------------------------------------------------------------
def _t_logpdf(x, df, loc=0.0, scale=1.0):
    z = _z(x, loc, scale)
    return (sp.gammaln(0.5 * (df + 1)) - sp.gammaln(0.5 * df) - 0.5 * wnp.log(df * np.pi)
            - wnp.log(scale) - 0.5 * (df + 1) * wnp.log1p(z ** 2 / df))


t = _Namespace(
    "t",
    logpdf=_t_logpdf,
    pdf=lambda x, df, loc=0.0, scale=1.0: wnp.exp(_t_logpdf(x, df, loc, scale)),
    cdf=lambda x, df, loc=0.0, scale=1.0: sp.stdtr(df, _z(x, loc, scale)),
    logcdf=lambda x, df, loc=0.0, scale=1.0: wnp.log(sp.stdtr(df, _z(x, loc, scale))),
    sf=lambda x, df, loc=0.0, scale=1.0: sp.stdtr(df, -_z(x, loc, scale)),
    logsf=lambda x, df, loc=0.0, scale=1.0: wnp.log(sp.stdtr(df, -_z(x, loc, scale))),
)


# -- gamma and chi-squared -----------------------------------------------------------------------
def _gamma_logpdf(x, a, loc=0.0, scale=1.0):
    return _support(lambda z: sp.xlogy(a - 1.0, z) - z - sp.gammaln(a) - wnp.log(scale),
                    _z(x, loc, scale), 0.0)


def _gamma_cdf(x, a, loc=0.0, scale=1.0):
    return sp.gammainc(a, wnp.maximum(_z(x, loc, scale), 0.0))


gamma = _Namespace(
    "gamma",
    logpdf=_gamma_logpdf,
    pdf=lambda x, a, loc=0.0, scale=1.0: wnp.exp(_gamma_logpdf(x, a, loc, scale)),
    cdf=_gamma_cdf,
    logcdf=lambda x, a, loc=0.0, scale=1.0: wnp.log(_gamma_cdf(x, a, loc, scale)),
    sf=lambda x, a, loc=0.0, scale=1.0: sp.gammaincc(a, wnp.maximum(_z(x, loc, scale), 0.0)),
)


def _chi2_logpdf(x, df, loc=0.0, scale=1.0):
    return _gamma_logpdf(x, 0.5 * df, loc, 2.0 * scale)


chi2 = _Namespace(
    "chi2",
    logpdf=_chi2_logpdf,
    pdf=lambda x, df, loc=0.0, scale=1.0: wnp.exp(_chi2_logpdf(x, df, loc, scale)),
    cdf=lambda x, df, loc=0.0, scale=1.0: _gamma_cdf(x, 0.5 * df, loc, 2.0 * scale),
    sf=lambda x, df, loc=0.0, scale=1.0: gamma.sf(x, 0.5 * df, loc, 2.0 * scale),
)


# -- beta ----------------------------------------------------------------------------------------
def _beta_logpdf(x, a, b, loc=0.0, scale=1.0):
    return _support(lambda z: sp.xlogy(a - 1.0, z) + sp.xlog1py(b - 1.0, -z) - sp.betaln(a, b)
                    - wnp.log(scale), _z(x, loc, scale), 0.0, 1.0)


beta = _Namespace(
    "beta",
    logpdf=_beta_logpdf,
    pdf=lambda x, a, b, loc=0.0, scale=1.0: wnp.exp(_beta_logpdf(x, a, b, loc, scale)),
    cdf=lambda x, a, b, loc=0.0, scale=1.0: sp.betainc(
        a, b, wnp.clip(_z(x, loc, scale), 0.0, 1.0)),
)


# -- Poisson (discrete: differentiable in the mean) ----------------------------------------------
def _poisson_logpmf(k, mu, loc=0):
    k = k - loc
    kp = np.asarray(plain(k))
    on = (kp >= 0) & (kp == np.floor(kp))  # the support: the counts 0, 1, 2, ...
    if on.all():
        return sp.xlogy(k, mu) - mu - sp.gammaln(k + 1.0)
    ks = wnp.where(on, k, 0.0)
    return wnp.where(on, sp.xlogy(ks, mu) - mu - sp.gammaln(ks + 1.0), -np.inf)


def _poisson_tail(fn, below):
    """``pdtr``/``pdtrc`` at ``floor(k)``, and their values ``below`` 0 (where they are NaN)."""
    def tail(k, mu, loc=0):
        k = k - loc
        neg = np.asarray(plain(k)) < 0
        if not neg.any():
            return fn(k, mu)
        return wnp.where(neg, below, fn(wnp.where(neg, 0.0, k), mu))
    return tail


poisson = _Namespace(
    "poisson",
    logpmf=_poisson_logpmf,
    pmf=lambda k, mu, loc=0: wnp.exp(_poisson_logpmf(k, mu, loc)),
    cdf=_poisson_tail(sp.pdtr, 0.0),
    sf=_poisson_tail(sp.pdtrc, 1.0),
)


# -- multivariate normal -------------------------------------------------------------------------
def _mvn_parts(cov, allow_singular):
    """``(solve, log_det, rank)`` for a covariance: Cholesky when it is positive definite; with
    ``allow_singular``, the pseudo-inverse and pseudo-determinant over the nonzero eigenvalues
    (SciPy's meaning)."""
    cov = wnp.asarray(cov) if not hasattr(cov, "shape") else cov
    if not allow_singular:
        try:  # the check on the plain value: its outcome is not differentiated
            np.linalg.cholesky(np.asarray(plain(cov)))
        except np.linalg.LinAlgError:
            raise np.linalg.LinAlgError(
                "multivariate_normal: the covariance is not positive definite; pass "
                "allow_singular=True for a degenerate distribution") from None
        log_det = wnp.linalg.slogdet(cov)[1]
        return (lambda d: wnp.linalg.solve(cov, d)), log_det, cov.shape[-1]
    w, v = wnp.linalg.eigh(cov)
    w_plain = np.asarray(plain(w))
    keep = np.asarray(w_plain > 1e6 * np.finfo(float).eps * np.max(np.abs(w_plain)))
    inv_w = wnp.where(keep, 1.0 / wnp.where(keep, w, 1.0), 0.0)
    log_det = wnp.sum(wnp.where(keep, wnp.log(wnp.where(keep, w, 1.0)), 0.0))

    def solve(d):  # pinv(cov) @ d for d of shape (k,) or (k, n)
        return v @ (inv_w[:, None] * (v.T @ d)) if d.ndim == 2 else v @ (inv_w * (v.T @ d))
    return solve, log_det, int(keep.sum())


def _mvn_logpdf(x, mean=None, cov=1.0, allow_singular=False):
    x = wnp.asarray(x) if not hasattr(x, "shape") else x
    mean = wnp.zeros(x.shape[-1]) if mean is None else mean
    if np.ndim(cov) == 0:
        cov = cov * np.eye(x.shape[-1])
    solve, log_det, rank = _mvn_parts(cov, allow_singular)
    d = x - mean
    d2 = wnp.reshape(d, (-1, d.shape[-1])).T                  # (k, n): one column per point
    maha = wnp.sum(d2 * solve(d2), axis=0)
    out = -0.5 * (rank * _LOG_2PI + log_det + maha)
    return wnp.reshape(out, d.shape[:-1])


def _mvn_entropy(mean=None, cov=1.0, allow_singular=False):
    _, log_det, rank = _mvn_parts(cov, allow_singular)
    return 0.5 * (rank * (1.0 + _LOG_2PI) + log_det)


multivariate_normal = _Namespace(
    "multivariate_normal",
    logpdf=_mvn_logpdf,
    pdf=lambda x, mean=None, cov=1.0, allow_singular=False: wnp.exp(
        _mvn_logpdf(x, mean, cov, allow_singular)),
    entropy=_mvn_entropy,
)


# -- Dirichlet ------------------------------------------------------------------------------------
def _dirichlet_logpdf(x, alpha):
    """``x`` holds the components along its first axis (SciPy's layout), summing to 1."""
    total = np.sum(np.asarray(plain(x)), axis=0)
    if not np.allclose(total, 1.0, rtol=0.0, atol=1e-9 * np.shape(x)[0]):
        raise ValueError("dirichlet: the components of x (along its first axis) must sum to 1; "
                         "normalise it first, x / x.sum(axis=0)")
    a = wnp.reshape(alpha, np.shape(alpha) + (1,) * (np.ndim(x) - 1))
    return (wnp.sum(sp.xlogy(a - 1.0, x), axis=0) + sp.gammaln(wnp.sum(alpha))
            - wnp.sum(sp.gammaln(alpha)))


dirichlet = _Namespace(
    "dirichlet",
    logpdf=_dirichlet_logpdf,
    pdf=lambda x, alpha: wnp.exp(_dirichlet_logpdf(x, alpha)),
)
