"""``scipy.special`` with rules, all of it: importing this module registers every family in
``SPECIAL`` (special_base, special_bessel, special_distributions, special_integrals).

Here, the reductions over an axis: ``logsumexp`` is a primitive with its own rules;
``softmax`` and ``log_softmax`` are compositions of it, ``softplus`` one of ``logaddexp``.
"""
import numpy as np
import scipy.special as _sp

from ..arrays import chunks_of, is_foreign
from ..core import ndim_of, primitive, shape_of
from . import patterns
from . import elementwise as _ew
from . import special_bessel, special_distributions, special_integrals  # noqa: F401 (they register)
from .elementwise import exp
from .shape import broadcast_to, expand_reduced, kept_shape, reshape, sum_tangent
from .special_base import SPECIAL, _plain, _traced

__all__ = ["log_softmax", "logsumexp", "logsumexp_b_jvp", "logsumexp_b_vjp", "logsumexp_jvp",
           "logsumexp_vjp", "softmax", "softplus"]


# reductions ------------------------------------------------------------------------------------
def _lse_impl(a, axis=None, keepdims=False):
    if is_foreign(a) or (type(a) is np.ndarray and a.dtype.char in "fdg" and a.ndim and a.size):
        return _lse_numpy(a, None, axis, keepdims)
    return _sp.logsumexp(a, axis=axis, keepdims=keepdims)


def _lse_b_impl(a, b, axis=None, keepdims=False):
    if is_foreign(a) or is_foreign(b):
        return _lse_numpy(a, b, axis, keepdims)
    return _sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims)


def _lse_numpy(a, b, axis, keepdims):
    """SciPy's logsumexp, by NumPy functions that dispatch to ``a``'s library (CuPy, Dask):
    SciPy itself would convert it to NumPy (a host copy, a ``.compute()``). On a real NumPy
    array it is also several times faster than SciPy's (array-API checks cost more than the
    sum of a small array), and within rounding of it."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # all -inf (or an inf): no shift
    e = np.exp(a - m) if b is None else b * np.exp(a - m)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(e, axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


# reductions along ``axis``, also under wg.vmap
_logsumexp = primitive(_lse_impl, name="logsumexp", sparsity=patterns.Reduction(), batch="axis")
_logsumexp_b = primitive(_lse_b_impl, name="logsumexp_b",  # a and b of one shape
                         sparsity=patterns.Reduction(), batch="axis")


def _weights(a, ans, axis, xs):
    """exp(a - logsumexp): the softmax weights (``xs`` is the reduced operand's shape)."""
    return exp(a - reshape(ans, kept_shape(xs, axis)))


@_logsumexp.frule(symbolic_zeros=True)
def logsumexp_jvp(primals, tangents, axis=None, keepdims=False):
    (a,), (da,) = primals, tangents
    ans = _logsumexp(a, axis=axis, keepdims=keepdims)
    if da is None:
        return ans, None
    return ans, sum_tangent(da * _weights(a, ans, axis, shape_of(a)), ndim_of(a), axis, keepdims)


@_logsumexp.rrule
def logsumexp_vjp(a, axis=None, keepdims=False):
    ans = _logsumexp(a, axis=axis, keepdims=keepdims)
    xs = shape_of(a)

    def pullback(g):
        return (expand_reduced(g, ans, xs, axis, chunks_of(a)) * _weights(a, ans, axis, xs),)
    return ans, pullback


@_logsumexp_b.frule(symbolic_zeros=True)
def logsumexp_b_jvp(primals, tangents, axis=None, keepdims=False):
    a, b = primals
    da, db = tangents
    ans = _logsumexp_b(a, b, axis=axis, keepdims=keepdims)
    xs = shape_of(a)
    w = _weights(a, ans, axis, xs)  # d ans / d b
    t = None
    if da is not None:
        t = da * (w * b)
    if db is not None:
        t = db * w if t is None else t + db * w
    if t is None:
        return ans, None
    return ans, sum_tangent(t, len(xs), axis, keepdims)


@_logsumexp_b.rrule(needs=True)
def logsumexp_b_vjp(a, b, needs, axis=None, keepdims=False):
    ans = _logsumexp_b(a, b, axis=axis, keepdims=keepdims)
    xs = shape_of(a)

    def pullback(g):
        ge = expand_reduced(g, ans, xs, axis, chunks_of(a)) * _weights(a, ans, axis, xs)
        return (ge * b if needs[0] else None), (ge if needs[1] else None)
    return ans, pullback


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log(sum(b * exp(a)))`` over ``axis``, as ``scipy.special.logsumexp``.

    Its derivative is the softmax of ``a`` (weighted by ``b``).  With
    ``return_sign=True`` the sign is returned as a second, non-differentiated value.
    """
    if not _traced(a, b):
        return _sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=return_sign)
    if return_sign:  # log|sum b exp(a)| and its (non-differentiated) sign
        _, s = _sp.logsumexp(_plain(a), axis=axis, b=_plain(b), keepdims=keepdims,
                             return_sign=True)
        if b is not None:
            xs = np.broadcast_shapes(shape_of(a), shape_of(b))
            b = b * np.reshape(s, kept_shape(xs, axis))
        return logsumexp(a, axis=axis, b=b, keepdims=keepdims), s
    if axis is not None and not isinstance(axis, int):
        axis = tuple(axis)
    if b is None:
        return _logsumexp(a, axis=axis, keepdims=keepdims)
    xs = np.broadcast_shapes(shape_of(a), shape_of(b))
    if shape_of(a) != xs:
        a = broadcast_to(a, xs)
    if shape_of(b) != xs:
        b = broadcast_to(b, xs)
    return _logsumexp_b(a, b, axis=axis, keepdims=keepdims)


def log_softmax(x, axis=None):
    """``x - logsumexp(x, axis, keepdims=True)``, as ``scipy.special.log_softmax``."""
    if not _traced(x):
        return _sp.log_softmax(x, axis=axis)
    return x - logsumexp(x, axis=axis, keepdims=True)


def softmax(x, axis=None):
    """``exp(log_softmax(x, axis))``, as ``scipy.special.softmax``."""
    if not _traced(x):
        return _sp.softmax(x, axis=axis)
    return exp(log_softmax(x, axis=axis))


def softplus(x, **kwargs):
    """``log(1 + exp(x))``, as ``scipy.special.softplus``; its derivative is ``expit``."""
    if not _traced(x):
        return _sp.softplus(x, **kwargs)
    return _ew.logaddexp(0.0, x)


for _f in (logsumexp, log_softmax, softmax, softplus):
    _f.composite = True
    SPECIAL[_f.__name__] = _f
del _f
