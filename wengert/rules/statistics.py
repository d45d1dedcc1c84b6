"""Statistics built on the reductions: quantiles and medians (a sort, then NumPy's
interpolation between the order statistics, so the values are NumPy's to the bit), covariance
and correlation.

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import math
import warnings

import numpy as np

from ..arrays import asarray as _asarray, host_values, implements, is_foreign
from ..core import Tracer, ndim_of, shape_of
from .conversion import astype
from .diagonals import diagonal
from .elementwise import clip, sqrt, where
from .indexing import getitem_basic, sort, take, take_along_axis
from .joining import concatenate
from .nondiff import concrete
from .products import matmul
from .reductions import _arr, _dtype, _isnan, _no_out, mean, nanmean
from .reshaping import atleast_2d, moveaxis
from .shape import _norm_axes, reshape, transpose

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian",
           "cov", "corrcoef"]


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
    """``np.quantile`` (``method="linear"`` on traced values): a sort, then NumPy's
    interpolation between the two neighbouring order statistics, differentiable in
    ``a`` and in ``q``."""
    return _quantile_call(np.quantile, 1, False, a, q, axis, out, overwrite_input, method,
                          keepdims, weights, interpolation)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None, interpolation=None):
    return _quantile_call(np.percentile, 100, False, a, q, axis, out, overwrite_input, method,
                          keepdims, weights, interpolation)


def _quantile_call(np_fn, scale, skip_nan, a, q, axis, out, overwrite_input, method, keepdims,
                   weights, interpolation):
    """The four quantile functions: NumPy's on plain values, else ``_quantile``."""
    a = _arr(a)
    if not isinstance(a, Tracer) and not isinstance(q, Tracer):
        kw = {} if weights is None else {"weights": weights}
        return np_fn(a, q, axis=axis, out=out, overwrite_input=overwrite_input, method=method,
                     keepdims=keepdims, **kw)
    _quantile_options(np_fn.__name__, method, weights, interpolation, out)
    _in_library(a, q, f"wnp.{np_fn.__name__}")
    if skip_nan and math.prod(shape_of(a)) == 0:
        return nanmean(a, axis=axis, keepdims=keepdims)  # NumPy's answer for no values
    weak = type(q) in (int, float)
    if scale == 100:
        q = q / 100 if isinstance(q, Tracer) else np.true_divide(q, 100)
    return _quantile(a, q, weak, axis, keepdims, scale=scale, skip_nan=skip_nan)


def _in_library(a, q, what):
    """The order statistics are picked in ``a``'s library (CuPy) when it sorts (skipping
    NaNs, from each slice's count, counted there); their positions also come from ``q``,
    read on the host: a CuPy or Dask ``q`` is refused rather than copied."""
    host_values(q, what, "q picks the order statistics")
    implements(a, np.argsort, what)


def _quantile_options(name, method, weights, interpolation, out):
    if method != "linear" or weights is not None or interpolation is not None:
        raise NotImplementedError(f"wnp.{name} on traced values supports method='linear' "
                                  "without weights")
    _no_out(out, name)


def _reduced_last(a, axis):
    """``a`` with the axes ``axis`` (None: all) moved to the end and merged into one,
    as NumPy's quantile and median see it, and the shape ``keepdims`` gives back."""
    shape = shape_of(a)
    axes = _norm_axes(axis, len(shape))
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
    if axis is None:
        return reshape(a, (-1,)), kept
    if len(axes) == 1:
        return moveaxis(a, axes[0], -1), kept
    rest = [i for i in range(len(shape)) if i not in axes]
    a = transpose(a, tuple(rest + list(axes)))
    return reshape(a, tuple(shape[i] for i in rest) + (-1,)), kept


def _lerp(a, b, t):
    """NumPy's ``_lerp``: from the nearer end, so ``t = 1`` gives ``b`` to the bit."""
    d = b - a
    return where(t >= 0.5, b - d * (1 - t), a + d * t)


def _count_not_nan(s, axis, keepdims=False):
    """Each slice's count of non-NaN values, plain (guarded under compile)."""
    return concrete(lambda v: np.sum(~np.isnan(v), axis=axis, keepdims=keepdims), s,
                    name="count_not_nan")


def _quantile(a, q, weak, axis, keepdims, scale=1, skip_nan=False):
    """NumPy's linear quantile along ``axis``; with ``skip_nan``, each slice's own count of
    non-NaN values plays the part of ``n`` (np.nanquantile removes the NaNs slice by slice;
    the sort puts them last, so the order statistics are the same)."""
    qv = np.asanyarray(concrete(np.asarray, q) if isinstance(q, Tracer) else q)
    if not (np.all(qv >= 0) and np.all(qv <= 1)):
        raise ValueError("Percentiles must be in the range [0, 100]" if scale == 100
                         else "Quantiles must be in the range [0, 1]")
    s, kept = _reduced_last(a, axis)
    s = moveaxis(sort(s, axis=-1), -1, 0)  # NumPy samples along the first axis
    n, rest = shape_of(s)[0], shape_of(s)[1:]
    qcol = qv.shape + (1,) * len(rest)  # q's axes first, then the slices'
    if skip_nan:
        # per slice: n becomes the count, an array multiplied in q's dtype as NumPy's
        # Python int is (weak), and every index is one per slice
        count = _count_not_nan(s, axis=0)
        n = count.astype(qv.dtype if qv.dtype.kind == "f" else np.intp)
        virtual = _asarray(np.reshape(qv, qcol), like=n) * (n - 1)  # (n: CuPy's, maybe)
    else:
        virtual = (n - 1) * qv
    # NumPy's indices and weight, in its own operations: floor((n - 1) q), clamped at the top
    prev = np.floor(virtual)
    top = virtual >= n - 1
    nxt = np.where(top, -1, prev + 1).astype(np.intp)
    prev = np.where(top, -1, prev).astype(np.intp)
    # the weight in the virtual index's dtype, as NumPy's _get_gamma gives it (float32 for a
    # float32 q); virtual - prev is exact, so subtracting in that dtype loses nothing
    mark = prev.astype(virtual.dtype) if virtual.dtype.kind == "f" else prev
    if isinstance(q, Tracer):
        gamma = (reshape(q, qcol) * (n - 1) if skip_nan else (n - 1) * q) - mark
    else:
        gamma = virtual - mark
    if skip_nan:
        # -1 is the slice's last non-NaN value; an all-NaN slice gives NaN below
        last = np.maximum(count - 1, 0).astype(np.intp)
        lo = take_along_axis(s, np.where(prev < 0, last, prev).reshape((-1,) + rest), axis=0)
        hi = take_along_axis(s, np.where(nxt < 0, last, nxt).reshape((-1,) + rest), axis=0)
    else:
        lo, hi = take(s, prev.ravel(), axis=0), take(s, nxt.ravel(), axis=0)
    lo, hi = reshape(lo, qv.shape + rest), reshape(hi, qv.shape + rest)
    if np.ndim(gamma) and not isinstance(gamma, Tracer):
        gamma = _asarray(gamma, like=lo)  # in a CuPy lo's library (it refuses NumPy operands)
    if weak and np.ndim(gamma) == 0 and not is_foreign(gamma):
        r = _lerp(lo, hi, float(gamma))
    elif weak:
        # NumPy's float(gamma), slice by slice: t and 1 - t in double, then in a's dtype
        dt = _dtype(lo)
        d = hi - lo
        r = where(gamma >= 0.5, hi - d * (1 - gamma).astype(dt), lo + d * gamma.astype(dt))
    else:
        r = _lerp(lo, hi, gamma if skip_nan else reshape(gamma, qcol))
    if skip_nan:
        r = _all_nan_slices(count, r, stacklevel=5)
    else:
        r = where(_isnan(getitem_basic(s, (-1,))), np.nan, r)  # a NaN in the slice gives NaN
    return reshape(r, qv.shape + kept) if keepdims else r


def _all_nan_slices(count, r, stacklevel):
    """NaN for a slice of no values, with NumPy's warning; a CuPy count is not read (no
    warning), its slices are masked all the same."""
    if is_foreign(count):
        return where(count == 0, np.nan, r)
    if np.any(count == 0):
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=stacklevel)
        r = where(count == 0, np.nan, r)
    return r


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``np.median``: the mean of the middle one or two order statistics (as NumPy, whose
    median is not its 0.5-quantile to the bit)."""
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.median(a, axis=axis, out=out, overwrite_input=overwrite_input,
                         keepdims=keepdims)
    _no_out(out, "median")
    implements(a, np.argsort, "wnp.median")
    s, kept = _reduced_last(a, axis)
    s = sort(s, axis=-1)
    n = shape_of(s)[-1]
    mid = slice(n // 2, n // 2 + 1) if n % 2 else slice(n // 2 - 1, n // 2 + 1)
    r = mean(getitem_basic(s, (Ellipsis, mid)), axis=-1)
    r = where(_isnan(getitem_basic(s, (Ellipsis, -1))), np.nan, r)
    return reshape(r, kept) if keepdims else r


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None, interpolation=None):
    """``np.nanquantile``: ``quantile`` of each slice's non-NaN values (NaNs get derivative
    0; an all-NaN slice gives NaN, with NumPy's warning)."""
    return _quantile_call(np.nanquantile, 1, True, a, q, axis, out, overwrite_input, method,
                          keepdims, weights, interpolation)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None, interpolation=None):
    return _quantile_call(np.nanpercentile, 100, True, a, q, axis, out, overwrite_input,
                          method, keepdims, weights, interpolation)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``np.nanmedian``: the median of each slice's non-NaN values, NumPy's to the bit.

    NumPy takes two routes: one slice at a time (``axis=None``, 1-D input, or slices of
    600 or more), where an odd count gives the middle value itself, and a masked sort
    otherwise, where it gives (m + m) / 2. They differ only when m + m overflows."""
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.nanmedian(a, axis=axis, out=out, overwrite_input=overwrite_input,
                            keepdims=keepdims)
    _no_out(out, "nanmedian")
    implements(a, np.argsort, "wnp.nanmedian")
    if math.prod(shape_of(a)) == 0:
        return nanmean(a, axis=axis, keepdims=keepdims)
    s, kept = _reduced_last(a, axis)
    s = sort(s, axis=-1)  # NaNs last
    n = shape_of(s)[-1]
    count = _count_not_nan(s, axis=-1, keepdims=True)
    h = count // 2
    odd = count % 2 == 1
    lo = take_along_axis(s, np.maximum(np.where(odd, h, h - 1), 0), axis=-1)  # 0: all NaN
    hi = take_along_axis(s, h, axis=-1)
    r = (lo + hi) / 2
    if axis is None or ndim_of(a) == 1 or n >= 600:
        r = where(odd, hi, r)
    r = _all_nan_slices(count, r, stacklevel=3)
    r = reshape(r, shape_of(r)[:-1])
    return reshape(r, kept) if keepdims else r


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    if not isinstance(m, Tracer) and not isinstance(y, Tracer):
        return np.cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype=dtype)
    if fweights is not None or aweights is not None:
        raise NotImplementedError("wnp.cov with weights on traced values")
    X = atleast_2d(m)
    if not rowvar and ndim_of(X) == 2 and shape_of(X)[0] != 1:
        X = transpose(X)
    if y is not None:
        Y = atleast_2d(y)
        if not rowvar and shape_of(Y)[0] != 1:
            Y = transpose(Y)
        X = concatenate([X, Y], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    if dtype is not None:
        X = astype(X, dtype, copy=False)
    n = shape_of(X)[1]
    Xc = X - mean(X, axis=1, keepdims=True)
    c = matmul(Xc, transpose(Xc)) / float(n - ddof)
    return reshape(c, ()) if shape_of(c) == (1, 1) else c


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    if not isinstance(x, Tracer) and not isinstance(y, Tracer):
        return np.corrcoef(x, y, rowvar, dtype=dtype)
    c = cov(x, y, rowvar, dtype=dtype)
    if ndim_of(c) == 0:
        return c / c
    d = sqrt(diagonal(c))
    c = c / reshape(d, (-1, 1)) / reshape(d, (1, -1))
    return clip(c, -1.0, 1.0)
