"""How an elementwise primitive is declared: over a NumPy (or SciPy) ufunc, by its partials.

Below every rules module that declares one (elementwise, the special functions), so that none
of them imports another just for the helper.
"""
import numpy as np

from ..core import primitive
from . import patterns

__all__ = ["REGISTRY", "elementwise"]

REGISTRY = {}  # name -> primitive, for tests and the coverage table


def elementwise(np_fn, partials, *, name=None, domain=(-2.0, 2.0), nondiff=False,
                registry=REGISTRY, needs=False, sparsity=patterns.ELEMENTWISE, **facts):
    """Declare an elementwise primitive over ``np_fn`` with its partials (``None`` when
    ``nondiff``: the derivative is zero).

    ``needs=True``: ``partials`` takes ``needs=`` and skips the partials not asked for.
    ``sparsity``: element r of the result depends on element r of each argument; which
    arguments interact at second order (``patterns.Elementwise(hessian=...)``). Any other
    fact of the record (``linear=``, ``batch=``...) is a keyword too (``wg.primitive``'s).
    """
    nargs = np_fn.nin if isinstance(np_fn, np.ufunc) else None
    p = primitive(np_fn, name=name or np_fn.__name__, broadcasting=nargs != 1, nondiff=nondiff,
                  domain=domain, ufunc=np_fn if isinstance(np_fn, np.ufunc) else None,
                  sparsity=sparsity, **facts)
    if partials is not None:
        p.partials(partials, needs=needs)
    registry[p.name] = p
    return p
