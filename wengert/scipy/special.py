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


# scipy.special's ufuncs called on a traced value (NEP 13) come here
for _name, _fn in list(_SPECIAL.items()):
    _np_fn = getattr(_sp, _name, None)
    if isinstance(_np_fn, np.ufunc):
        _dispatch.HANDLED[_np_fn] = _fn
# and SciPy's other names for the same ufuncs (``jn`` is ``jv``)
for _name in dir(_sp):
    _np_fn = getattr(_sp, _name)
    if _name not in _SPECIAL and isinstance(_np_fn, np.ufunc) and _np_fn in _dispatch.HANDLED:
        globals()[_name] = _dispatch.HANDLED[_np_fn]
del _name, _fn, _np_fn
# and the private ufuncs SciPy's Python wrappers call: sp.zeta(traced) is _zeta(x, q, out)
for _private, _public in (("_zeta", "zeta"), ("_riemann_zeta", "zeta"),
                          ("_lambertw", "lambertw")):
    _np_fn = getattr(_sp._ufuncs, _private, None)
    if isinstance(_np_fn, np.ufunc) and _public in _SPECIAL:
        _dispatch.HANDLED[_np_fn] = _SPECIAL[_public]
del _private, _public, _np_fn
