"""``wengert.scipy.special``: ``scipy.special``, differentiable.

Functions with rules are primitives (or compositions of them); other names pass
straight through to SciPy when no traced value is involved, and raise
``NotImplementedError`` naming the function when one is.

>>> import wengert as wg
>>> from wengert.scipy import special as wsp
>>> float(wg.grad(wsp.gammaln)(3.0))  # digamma(3) = 3/2 - euler_gamma
0.9227843350984671
>>> print(wg.grad(lambda x: wsp.logsumexp(x))(np.zeros(4)))
[0.25 0.25 0.25 0.25]
"""
import numpy as np
import scipy.special as _sp

from .. import _dispatch
from ..numpy import _passthrough
from ..rules.special import SPECIAL as _SPECIAL

__all__ = ["airy", "airye", "bdtr", "bdtrc", "bdtri", "bei", "beip", "ber", "berp", "beta",
           "betainc", "betaln", "binom", "boxcox", "boxcox1p", "cbrt", "chdtr", "chdtrc", "chdtri",
           "cosdg", "cosm1", "cotdg", "dawsn", "digamma", "ellipe", "ellipeinc", "ellipk",
           "ellipkinc", "elliprc", "elliprd", "elliprf", "elliprg", "entr", "erf", "erfc",
           "erfcinv", "erfcx", "erfi", "erfinv", "eval_chebyc", "eval_chebys", "eval_chebyt",
           "eval_chebyu", "eval_gegenbauer", "eval_genlaguerre", "eval_hermite",
           "eval_hermitenorm", "eval_jacobi", "eval_laguerre", "eval_legendre", "eval_sh_chebyt",
           "eval_sh_chebyu", "eval_sh_jacobi", "eval_sh_legendre", "exp1", "exp10", "exp2", "expi",
           "expit", "expm1", "expn", "exprel", "fdtr", "fdtrc", "fdtri", "fresnel", "gamma",
           "gammainc", "gammaincc", "gammaln", "gammasgn", "gdtr", "gdtrc", "gdtria", "gdtrix",
           "h1vp", "h2vp", "huber", "hyp0f1", "hyp1f1", "hyp2f1", "hyperu", "i0", "i0e", "i1",
           "i1e", "inv_boxcox", "inv_boxcox1p", "it2i0k0", "it2j0y0", "it2struve0", "itairy",
           "iti0k0", "itj0y0", "itmodstruve0", "itstruve0", "iv", "ive", "ivp", "j0", "j1", "jn",
           "jv", "jve", "jvp", "k0", "k0e", "k1", "k1e", "kei", "keip", "ker", "kerp", "kl_div",
           "kn", "kolmogi", "kolmogorov", "kv", "kve", "kvp", "lambertw", "log1p", "log_expit",
           "log_ndtr", "log_softmax", "loggamma", "logit", "logsumexp", "modstruve",
           "multigammaln", "nbdtr", "nbdtrc", "nbdtri", "ndtr", "ndtri", "ndtri_exp", "owens_t",
           "pdtr", "pdtrc", "pdtri", "poch", "polygamma", "powm1", "pseudo_huber", "psi", "radian",
           "rel_entr", "rgamma", "shichi", "sici", "sindg", "softmax", "softplus", "spence",
           "spherical_in", "spherical_jn", "spherical_kn", "spherical_yn", "stdtr", "stdtrit",
           "struve", "tandg", "wrightomega", "xlog1py", "xlogy", "y0", "y1", "yn", "yv", "yve",
           "yvp", "zeta"]

globals().update(_SPECIAL)  # every scipy.special function with rules


def __getattr__(name):
    try:
        attr = getattr(_sp, name)
    except AttributeError:
        raise AttributeError(f"module 'wengert.scipy.special' has no attribute {name!r}") \
            from None
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(f"scipy.special.{name}", attr)
    globals()[name] = attr
    return attr


# scipy.special's ufuncs called on a traced value (NEP 13) come to their rules
_dispatch.register_special()
# and SciPy's other names for the same ufuncs (``jn`` is ``jv``)
for _name in dir(_sp):
    _np_fn = getattr(_sp, _name)
    if _name not in _SPECIAL and isinstance(_np_fn, np.ufunc) and _np_fn in _dispatch.HANDLED:
        globals()[_name] = _dispatch.HANDLED[_np_fn]
del _name, _np_fn
