"""The scipy.special primitives that NumPy's own functions need for their rules: the logistic
function (np.logaddexp's partials) and the modified Bessel functions I0, I1, Iv (np.i0's).

They import no other rules module but the declaring helper, so elementwise.py can load them
on first use (scipy.special is a heavy import) with no import circle; special_base.py
re-exports them beside the other special functions.
"""
import numpy as np  # noqa: F401
import scipy.special as _sp

from ..core import NoDerivative
from .declaring import elementwise
from .lowering import Lowering

__all__ = ["SPECIAL", "expit", "i0", "i1", "iv"]

SPECIAL = {}  # name -> primitive or composite, for tests and the coverage table


def _special(np_fn, partials, *, name=None, domain=(-2.0, 2.0), lowering=None):
    """An elementwise primitive over a ``scipy.special`` function (its own table, not
    ``elementwise.REGISTRY``: ``scipy.special.expm1`` is not ``numpy.expm1``)."""
    return elementwise(np_fn, partials, name=name, domain=domain, registry=SPECIAL,
                       lowering=lowering)


_NO_IV_V = NoDerivative("scipy.special.iv", "v")  # the partial in the order: not implemented

# inside a fused Numba kernel: scipy's own formula, on float64 scalars (rules/lowering.py)
expit = _special(_sp.expit, lambda ans, x: (ans * (1.0 - ans),),
                 lowering=Lowering(scalar=lambda x: f"(1.0 / (1.0 + np.exp(-{x})))"))
# modified Bessel functions of the first kind: I_v' = (I_{v-1} + I_{v+1}) / 2
iv = _special(_sp.iv, lambda ans, v, x: (_NO_IV_V, 0.5 * (iv(v - 1, x) + iv(v + 1, x))),
              domain=(0.2, 3.0))
i0 = _special(_sp.i0, lambda ans, x: (i1(x),))
i1 = _special(_sp.i1, lambda ans, x: (0.5 * (i0(x) + iv(2.0, x)),))
