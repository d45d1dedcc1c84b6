"""``autograd.scipy.stats``: ``wengert.scipy.stats``'s distributions, one module each as in
autograd (``import autograd.scipy.stats.norm as norm``)."""
from . import beta, chi2, dirichlet, gamma, multivariate_normal, norm, poisson, t  # noqa: F401
