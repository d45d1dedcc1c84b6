"""Reductions: sum, prod, max/min (ties split the derivative evenly), cumsum, cumprod, and
compositions of them (mean, var, std, ptp, average, logsumexp).  Also the
non-differentiable ones (argmax, any, ...) that give plain values.

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import builtins

import math

import numpy as np

from ..core import Tracer, ndim_of, primitive, shape_of
from .arithmetic import multiply
from .elementwise import exp, log, sqrt, where
from .indexing import getitem_basic
from .conversion import astype
from .joining import _concatenate
from .nondiff import concrete, recorded, strip_eager
from .shape import _norm_axes, broadcast_to, expand_reduced as _expand, kept_shape, reshape, \
    sum_, transpose

__all__ = ["sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "ptp",
           "average", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "logsumexp",
           "nansum", "nanmean", "argmax", "argmin", "argsort", "nonzero", "any", "all",
           "count_nonzero", "argwhere", "flatnonzero", "searchsorted", "nanmax", "nanmin",
           "nanprod", "nanvar", "nanstd", "nancumsum", "nancumprod", "nan_to_num", "quantile",
           "percentile", "median", "nanquantile", "nanpercentile", "nanmedian", "cov",
           "corrcoef", "trapezoid"]

_builtin_sum = sum


def _plain(x):
    while isinstance(x, Tracer):
        x = x.value
    return x


def _dtype(x):
    v = _plain(x)
    return v.dtype if hasattr(v, "dtype") else np.result_type(v)


def _arr(a):
    """A list or tuple holding traced values becomes one traced array (stacked)."""
    if isinstance(a, (list, tuple)):
        from .indexing import _has_tracer
        if _has_tracer(a):
            from .creation import asarray
            return asarray(a)
    return a


def _axes_arg(axis, nd):
    return None if axis is None else _norm_axes(axis, nd)


# -- sum (the primitive lives in rules/shape.py) ----------------------------------------------
def _plain_reduce(np_fn, identity, a, axis, dtype, out, keepdims, initial, where):
    """NumPy's own reduction, passed only the optional arguments the caller gave."""
    kw = {}
    if not (type(initial) is int and initial == identity):
        kw["initial"] = initial
    if where is not True:
        kw["where"] = where
    return np_fn(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)


def _traced_operand(name, identity, a, dtype, out, where):
    """A traced reduction's operand: ``where`` masked to the identity, cast to ``dtype``."""
    _no_out(out, name)
    if where is not True:
        a = _where_fill(where, a, identity)
    if dtype is not None:
        a = astype(a, dtype, copy=False)
    return a


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=0, where=True):
    if isinstance(a, Tracer) and axis is None and dtype is None and out is None \
            and where is True and type(initial) is int and initial == 0:
        return sum_(a, keepdims=keepdims)  # the common call, without the general checks
    a = _arr(a)
    if not isinstance(a, Tracer):
        return _plain_reduce(np.sum, 0, a, axis, dtype, out, keepdims, initial, where)
    a = _traced_operand("sum", 0.0, a, dtype, out, where)
    r = sum_(a, axis=_axes_arg(axis, ndim_of(a)), keepdims=keepdims)
    if isinstance(initial, Tracer) or initial != 0:
        r = r + initial
    return r


def _no_out(out, name):
    if out is not None:
        raise NotImplementedError(f"wnp.{name} with out= is not supported on traced values; "
                                  "use the return value")


def _where_fill(mask, a, fill):
    mask = strip_eager(mask)
    if shape_of(mask) != shape_of(a):
        s = np.broadcast_shapes(np.shape(mask), shape_of(a))
        if s != shape_of(a):
            a = broadcast_to(a, s)
    return where(mask, a, fill)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.nansum(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    return sum(where(recorded(np.isnan, a), 0.0, a), axis=axis, dtype=dtype, keepdims=keepdims)


# -- products -----------------------------------------------------------------------------------------------
@primitive(name="cumsum", nargs=1)
def _cumsum(x, axis):
    return np.cumsum(x, axis=axis)


def _reverse_idx(axis):
    return (slice(None),) * axis + (slice(None, None, -1),)


@_cumsum.frule(symbolic_zeros=True)
def _cumsum_jvp(primals, tangents, axis):
    (x,), (dx,) = primals, tangents
    ans = _cumsum(x, axis)
    if dx is None:
        return ans, None
    return ans, _cumsum(dx, axis + ndim_of(dx) - ndim_of(x))


@_cumsum.rrule
def _cumsum_vjp(x, axis):
    ans = _cumsum(x, axis)
    nd = ndim_of(ans)

    def pullback(g):
        ax = axis + ndim_of(g) - nd
        r = _reverse_idx(ax)
        return (getitem_basic(_cumsum(getitem_basic(g, r), ax), r),)
    return ans, pullback


@primitive(name="cumprod", nargs=1)
def _cumprod(x, axis):
    return np.cumprod(x, axis=axis)


def _cumprod_matrix(x, axis):
    """``D[..., k, i] = d y_i / d x_k`` for ``y = cumprod(x)`` along ``axis`` (moved last)."""
    nd = ndim_of(x)
    perm = tuple(i for i in range(nd) if i != axis) + (axis,)
    xm = transpose(x, perm)
    n = shape_of(xm)[-1]
    eye = np.eye(n, dtype=bool)
    rows = where(eye, 1.0, reshape(xm, shape_of(xm)[:-1] + (1, n)))  # x with x_k -> 1 in row k
    upper = np.triu(np.ones((n, n), dtype=bool))                       # k <= i
    return where(upper, _cumprod(rows, nd), 0.0), perm


def _inv(perm):
    return tuple(int(i) for i in np.argsort(perm))


@_cumprod.frule(symbolic_zeros=True)
def _cumprod_jvp(primals, tangents, axis):
    (x,), (dx,) = primals, tangents
    ans = _cumprod(x, axis)
    if dx is None:
        return ans, None
    nd = ndim_of(x)
    nb = ndim_of(dx) - nd
    D, perm = _cumprod_matrix(x, axis)
    bperm = tuple(range(nb)) + tuple(p + nb for p in perm)
    dm = transpose(dx, bperm)
    dm = reshape(dm, shape_of(dm) + (1,))
    t = sum_(dm * D, axis=nb + nd - 1)
    return ans, transpose(t, tuple(range(nb)) + tuple(p + nb for p in _inv(perm)))


@_cumprod.rrule
def _cumprod_vjp(x, axis):
    ans = _cumprod(x, axis)
    nd = ndim_of(x)

    def pullback(g):
        nb = ndim_of(g) - nd
        D, perm = _cumprod_matrix(x, axis)
        bperm = tuple(range(nb)) + tuple(p + nb for p in perm)
        gm = transpose(g, bperm)
        gs = shape_of(gm)
        gm = reshape(gm, gs[:-1] + (1, gs[-1]))
        t = sum_(gm * D, axis=nb + nd)
        return (transpose(t, tuple(range(nb)) + tuple(p + nb for p in _inv(perm))),)
    return ans, pullback


def _running(np_fn, prim, name, a, axis, dtype, out):
    """np.cumsum / np.cumprod: on traced values the primitive, along one axis."""
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np_fn(a, axis=axis, dtype=dtype, out=out)
    _no_out(out, name)
    if dtype is not None:
        a = astype(a, dtype, copy=False)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    return prim(a, axis % ndim_of(a))


def cumsum(a, axis=None, dtype=None, out=None):
    return _running(np.cumsum, _cumsum, "cumsum", a, axis, dtype, out)


def cumprod(a, axis=None, dtype=None, out=None):
    return _running(np.cumprod, _cumprod, "cumprod", a, axis, dtype, out)


def _cumulative(np_fn, running, fill, x, axis, dtype, out, include_initial):
    """NumPy 2's cumulative_sum / cumulative_prod: the running op, optionally starting
    with its identity element ``fill``."""
    if not isinstance(x, Tracer):
        return np_fn(x, axis=axis, dtype=dtype, out=out, include_initial=include_initial)
    if axis is None:
        if ndim_of(x) > 1:
            raise ValueError("axis must be specified for multi-dimensional arrays")
        axis = 0
    r = running(x, axis=axis, dtype=dtype)
    if include_initial:
        ax = axis % ndim_of(x)
        s = list(shape_of(r))
        s[ax] = 1
        r = _concatenate(np.full(s, fill, _dtype(r)), r, axis=ax)
    return r


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative(np.cumulative_sum, cumsum, 0, x, axis, dtype, out, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative(np.cumulative_prod, cumprod, 1, x, axis, dtype, out, include_initial)


@primitive(name="prod")
def _prod(x, axis=None, keepdims=False):
    return np.prod(x, axis=axis, keepdims=keepdims)


def _prod_others(x, axes):
    """``prod over axes of x, leaving out each entry`` (no division: exact at zeros)."""
    xs = shape_of(x)
    nd = len(xs)
    if 0 in xs:
        return np.zeros(xs, dtype=_dtype(x))
    keep = tuple(i for i in range(nd) if i not in axes)
    perm = keep + tuple(axes)
    xt = transpose(x, perm) if perm != tuple(range(nd)) else x
    ts = shape_of(xt)
    lead = ts[:len(keep)]
    k = int(np.prod(ts[len(keep):], dtype=int))
    xr = reshape(xt, lead + (k,))
    one = np.ones(lead + (1,), dtype=_dtype(x))
    ell = (Ellipsis,)
    left = _cumprod(_concatenate(one, getitem_basic(xr, ell + (slice(None, -1),)), axis=len(lead)),
                    len(lead))
    rev = ell + (slice(None, None, -1),)
    right = getitem_basic(_cumprod(getitem_basic(
        _concatenate(getitem_basic(xr, ell + (slice(1, None),)), one, axis=len(lead)), rev),
        len(lead)), rev)
    o = reshape(left * right, ts)
    return transpose(o, _inv(perm)) if perm != tuple(range(nd)) else o


@_prod.frule(symbolic_zeros=True)
def _prod_jvp(primals, tangents, axis=None, keepdims=False):
    (x,), (dx,) = primals, tangents
    ans = _prod(x, axis, keepdims)
    if dx is None:
        return ans, None
    axes = _norm_axes(axis, ndim_of(x))
    nb = ndim_of(dx) - ndim_of(x)
    if not axes:
        return ans, dx
    o = _prod_others(x, axes)
    return ans, sum_(dx * o, axis=tuple(a + nb for a in axes), keepdims=keepdims)


@_prod.rrule
def _prod_vjp(x, axis=None, keepdims=False):
    ans = _prod(x, axis, keepdims)
    xs = shape_of(x)
    axes = _norm_axes(axis, len(xs))

    def pullback(g):
        if not axes:
            return (g,)
        return (_expand(g, ans, xs, axes) * _prod_others(x, axes),)
    return ans, pullback


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=1, where=True):
    a = _arr(a)
    if not isinstance(a, Tracer):
        return _plain_reduce(np.prod, 1, a, axis, dtype, out, keepdims, initial, where)
    a = _traced_operand("prod", 1.0, a, dtype, out, where)
    r = _prod(a, _axes_arg(axis, ndim_of(a)), keepdims)
    if isinstance(initial, Tracer) or initial != 1:
        r = r * initial
    return r


# -- max / min --------------------------------------------------------------------------------------------
def _extremum(np_fn, name):
    p = primitive(lambda x, axis=None, keepdims=False: np_fn(x, axis=axis, keepdims=keepdims),
                  name=name)

    def weights(x, ans, axes):
        """1/(number of ties) where x attains the extremum, else 0 (not differentiated)."""
        return recorded(_tie_weights, x, ans, axes=axes)

    @p.frule(symbolic_zeros=True)
    def jvp(primals, tangents, axis=None, keepdims=False):
        (x,), (dx,) = primals, tangents
        ans = p(x, axis, keepdims)
        if dx is None:
            return ans, None
        axes = _norm_axes(axis, ndim_of(x))
        nb = ndim_of(dx) - ndim_of(x)
        w = weights(x, ans, axes)
        return ans, sum_(dx * w, axis=tuple(a + nb for a in axes), keepdims=keepdims)

    @p.rrule
    def vjp(x, axis=None, keepdims=False):
        ans = p(x, axis, keepdims)
        xs = shape_of(x)
        axes = _norm_axes(axis, len(xs))
        w = weights(x, ans, axes)
        return ans, lambda g: (_expand(g, ans, xs, axes) * w,)
    return p


def _tie_weights(xv, av, axes):
    xv = np.asarray(xv)
    hit = xv == np.reshape(av, kept_shape(xv.shape, axes))
    cnt = np.sum(hit, axis=axes, keepdims=True)
    return (hit / np.maximum(cnt, 1)).astype(xv.dtype, copy=False)


_amax = _extremum(np.max, "max")
_amin = _extremum(np.min, "min")


def _make_extremum(np_fn, prim, combine, name):
    def fn(a, axis=None, out=None, keepdims=False, initial=np._NoValue, where=True):
        a = _arr(a)
        if not isinstance(a, Tracer):
            kw = {}
            if initial is not np._NoValue:
                kw["initial"] = initial
            if where is not True:
                kw["where"] = where
            return np_fn(a, axis=axis, out=out, keepdims=keepdims, **kw)
        _no_out(out, name)
        if where is not True:
            if initial is np._NoValue:
                raise ValueError(f"reduction operation '{name}' does not have an identity, "
                                 "so to use a where mask one has to specify 'initial'")
            a = _where_fill(where, a, initial)
        r = prim(a, _axes_arg(axis, ndim_of(a)), keepdims)
        if initial is not np._NoValue:
            r = combine(r, initial)
        return r
    fn.__name__ = name
    fn.__doc__ = (f"``np.{name}``; where several entries attain the {name}imum, the "
                  "derivative is split evenly between them.")
    return fn


def _maximum(a, b):
    from .elementwise import maximum
    return maximum(a, b)


def _minimum(a, b):
    from .elementwise import minimum
    return minimum(a, b)


max = _make_extremum(np.max, _amax, _maximum, "max")
min = _make_extremum(np.min, _amin, _minimum, "min")
amax = max
amin = min


def ptp(a, axis=None, out=None, keepdims=False):
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.ptp(a, axis=axis, out=out, keepdims=keepdims)
    return max(a, axis, keepdims=keepdims) - min(a, axis, keepdims=keepdims)


# -- moments ---------------------------------------------------------------------------------------------
def _count(a, axis, where):
    s = shape_of(a)
    if where is not True:
        w = concrete(np.asarray, where)
        m = np.broadcast_to(w, np.broadcast_shapes(np.shape(w), s))
        return np.sum(m, axis=axis, keepdims=True)
    axes = _norm_axes(axis, len(s))
    return math.prod(s[i] for i in axes)


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    a = _arr(a)
    if not isinstance(a, Tracer):
        kw = {} if where is True else {"where": where}
        return np.mean(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    _no_out(out, "mean")
    if axis is None and dtype is None and where is True:  # the common call, in fewer steps
        return sum_(a, keepdims=keepdims) / float(math.prod(shape_of(a)))
    if dtype is not None:
        a = astype(a, dtype, copy=False)
    n = _count(a, axis, where)
    tot = sum(a, axis=axis, keepdims=keepdims, where=where)
    if not isinstance(n, int):
        n = n if keepdims else np.reshape(n, shape_of(tot))
        n = n.astype(_dtype(tot))
    else:
        n = float(n)
    return tot / n


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=None, correction=None):
    a = _arr(a)
    if not isinstance(a, Tracer):
        kw = {} if where is True else {"where": where}
        if mean is not None:
            kw["mean"] = mean
        if correction is not None:
            kw["correction"] = correction
        return np.var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    _no_out(out, "var")
    if correction is not None:
        ddof = correction
    if dtype is not None:
        a = astype(a, dtype, copy=False)
    if where is not True:  # excluded entries (NaN, say) must not reach the derivative
        a = _where_fill(where, a, 0.0)
    m = mean if mean is not None else _mean(a, axis=axis, keepdims=True, where=where)
    d = a - m
    n = _count(a, axis, where)
    ss = sum(d * d, axis=axis, keepdims=keepdims, where=where)
    if not isinstance(n, int):
        n = n if keepdims else np.reshape(n, shape_of(ss))
        return ss / (n - ddof).astype(_dtype(ss))
    return ss / float(n - ddof)


_mean = mean


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=None,
        correction=None):
    a = _arr(a)
    if not isinstance(a, Tracer):
        kw = {} if where is True else {"where": where}
        if mean is not None:
            kw["mean"] = mean
        if correction is not None:
            kw["correction"] = correction
        return np.std(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    return sqrt(var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                    where=where, mean=mean, correction=correction))


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.nanmean(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    return mean(a, axis=axis, dtype=dtype, keepdims=keepdims,
                where=recorded(np.logical_not, recorded(np.isnan, a)))


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = _arr(a)
    if not isinstance(a, Tracer) and not isinstance(weights, Tracer):
        return np.average(a, axis=axis, weights=weights, returned=returned, keepdims=keepdims)
    if weights is None:
        r = mean(a, axis=axis, keepdims=keepdims)
        if returned:
            n = _count(a, axis, True)
            return r, np.broadcast_to(np.asarray(float(n), dtype=_dtype(r)), shape_of(r))
        return r
    if shape_of(weights) != shape_of(a):
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        ax = axis % ndim_of(a)
        ws = [1] * ndim_of(a)
        ws[ax] = shape_of(weights)[0]
        weights = reshape(weights, tuple(ws)) if isinstance(weights, Tracer) \
            else np.reshape(weights, ws)
    wsum = sum(broadcast_to(weights, np.broadcast_shapes(shape_of(weights), shape_of(a)))
               if isinstance(weights, Tracer) else
               np.broadcast_to(weights, np.broadcast_shapes(np.shape(weights), shape_of(a))),
               axis=axis, keepdims=keepdims)
    r = sum(multiply(a, weights), axis=axis, keepdims=keepdims) / wsum
    if returned:
        return r, wsum
    return r


def _lse_shift(av, axis):
    av = np.asarray(av)
    shift = np.max(av, axis=axis, keepdims=True) if av.size else np.zeros((), av.dtype)
    return np.where(np.isfinite(shift), shift, 0.0).astype(av.dtype)


def logsumexp(a, axis=None, keepdims=False):
    """``log(sum(exp(a)))``, stable: the max is subtracted first, as a constant (the
    result does not depend on it, so the derivative is exact: a softmax)."""
    shift = recorded(_lse_shift, a, axis=axis)
    r = log(sum(exp(a - shift), axis=axis, keepdims=True)) + shift
    if not keepdims:
        axes = _norm_axes(axis, ndim_of(a))
        r = reshape(r, tuple(d for i, d in enumerate(shape_of(r)) if i not in axes))
    return r


# -- NaN handling and statistics (compositions) -----------------------------------------------
def _isnan(a):
    return recorded(np.isnan, a)


def nanmax(a, axis=None, out=None, keepdims=False, **kw):
    if not isinstance(a, Tracer):
        return np.nanmax(a, axis=axis, out=out, keepdims=keepdims, **kw)
    return _all_nan_to_nan(max(where(_isnan(a), -np.inf, a), axis=axis, keepdims=keepdims),
                           a, axis, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False, **kw):
    if not isinstance(a, Tracer):
        return np.nanmin(a, axis=axis, out=out, keepdims=keepdims, **kw)
    return _all_nan_to_nan(min(where(_isnan(a), np.inf, a), axis=axis, keepdims=keepdims),
                           a, axis, keepdims)


def _all_nan_to_nan(r, a, axis, keepdims):
    """An all-NaN slice gives NaN (as NumPy, which also warns)."""
    return where(recorded(_all_isnan, a, axis=axis, keepdims=keepdims), np.nan, r)


def _all_isnan(av, axis, keepdims):
    return np.all(np.isnan(av), axis=axis, keepdims=keepdims)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    if not isinstance(a, Tracer):
        return np.nanprod(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    return prod(where(_isnan(a), 1.0, a), axis=axis, dtype=dtype, keepdims=keepdims)


def nancumsum(a, axis=None, dtype=None, out=None):
    """``np.nancumsum``: a NaN counts as 0 (and gets derivative 0), as NumPy does it."""
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.nancumsum(a, axis=axis, dtype=dtype, out=out)
    return cumsum(where(_isnan(a), 0.0, a), axis=axis, dtype=dtype, out=out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """``np.nancumprod``: a NaN counts as 1 (and gets derivative 0)."""
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.nancumprod(a, axis=axis, dtype=dtype, out=out)
    return cumprod(where(_isnan(a), 1.0, a), axis=axis, dtype=dtype, out=out)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    if not isinstance(a, Tracer):
        return np.nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    return var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
               where=recorded(np.logical_not, _isnan(a)))


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    if not isinstance(a, Tracer):
        return np.nanstd(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    return sqrt(nanvar(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """``np.nan_to_num``: derivative 1 at finite entries, 0 at the replaced ones."""
    if not isinstance(x, Tracer):
        return np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    dt = _dtype(x)
    big = np.finfo(dt).max if np.issubdtype(dt, np.floating) else None
    x = where(_isnan(x), nan, x)
    x = where(recorded(np.isposinf, x), big if posinf is None else posinf, x)
    return where(recorded(np.isneginf, x), -big if neginf is None else neginf, x)


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
    if skip_nan and math.prod(shape_of(a)) == 0:
        return nanmean(a, axis=axis, keepdims=keepdims)  # NumPy's answer for no values
    weak = type(q) in (int, float)
    if scale == 100:
        q = q / 100 if isinstance(q, Tracer) else np.true_divide(q, 100)
    return _quantile(a, q, weak, axis, keepdims, scale=scale, skip_nan=skip_nan)


def _quantile_options(name, method, weights, interpolation, out):
    if method != "linear" or weights is not None or interpolation is not None:
        raise NotImplementedError(f"wnp.{name} on traced values supports method='linear' "
                                  "without weights")
    _no_out(out, name)


def _reduced_last(a, axis):
    """``a`` with the axes ``axis`` (None: all) moved to the end and merged into one,
    as NumPy's quantile and median see it, and the shape ``keepdims`` gives back."""
    from .reshaping import moveaxis
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
    from .indexing import sort, take, take_along_axis
    from .reshaping import moveaxis
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
        virtual = np.reshape(qv, qcol) * (n - 1)
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
    if weak and np.ndim(gamma) == 0:
        r = _lerp(lo, hi, float(gamma))
    elif weak:
        # NumPy's float(gamma), slice by slice: t and 1 - t in double, then in a's dtype
        dt = _dtype(lo)
        d = hi - lo
        r = where(gamma >= 0.5, hi - d * (1 - gamma).astype(dt), lo + d * gamma.astype(dt))
    else:
        r = _lerp(lo, hi, gamma if skip_nan else reshape(gamma, qcol))
    if skip_nan:
        if np.any(count == 0):
            import warnings
            warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=4)
            r = where(count == 0, np.nan, r)
    else:
        r = where(_isnan(getitem_basic(s, (-1,))), np.nan, r)  # a NaN in the slice gives NaN
    return reshape(r, qv.shape + kept) if keepdims else r


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``np.median``: the mean of the middle one or two order statistics (as NumPy, whose
    median is not its 0.5-quantile to the bit)."""
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.median(a, axis=axis, out=out, overwrite_input=overwrite_input,
                         keepdims=keepdims)
    _no_out(out, "median")
    from .indexing import sort
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
    if math.prod(shape_of(a)) == 0:
        return nanmean(a, axis=axis, keepdims=keepdims)
    from .indexing import sort, take_along_axis
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
    if np.any(count == 0):
        import warnings
        warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=2)
        r = where(count == 0, np.nan, r)
    r = reshape(r, shape_of(r)[:-1])
    return reshape(r, kept) if keepdims else r


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    if not isinstance(m, Tracer) and not isinstance(y, Tracer):
        return np.cov(m, y, rowvar, bias, ddof, fweights, aweights, dtype=dtype)
    if fweights is not None or aweights is not None:
        raise NotImplementedError("wnp.cov with weights on traced values")
    from .joining import concatenate
    from .reshaping import atleast_2d
    from .products import matmul
    from .shape import transpose
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
    from .diagonals import diagonal
    from .elementwise import clip
    d = sqrt(diagonal(c))
    c = c / reshape(d, (-1, 1)) / reshape(d, (1, -1))
    return clip(c, -1.0, 1.0)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    if not isinstance(y, Tracer) and not isinstance(x, Tracer) and not isinstance(dx, Tracer):
        return np.trapezoid(y, x, dx, axis)
    from .calculus import diff
    nd = ndim_of(y)
    ax = axis % nd
    if x is None:
        d = dx
    else:
        d = diff(x, axis=axis if ndim_of(x) > 1 else 0)
        if ndim_of(x) == 1 and nd > 1:
            shp = [1] * nd
            shp[ax] = shape_of(d)[0]
            d = reshape(d, tuple(shp)) if isinstance(d, Tracer) else np.reshape(d, shp)
    lo = (slice(None),) * ax + (slice(None, -1),)
    hi = (slice(None),) * ax + (slice(1, None),)
    return sum(d * (getitem_basic(y, hi) + getitem_basic(y, lo)) / 2.0, axis=ax)


# -- not differentiable: plain values -------------------------------------------------------------------
def _strip(obj):
    if isinstance(obj, Tracer):
        return _plain(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_strip(o) for o in obj)
    return obj


def _nondiff(np_fn, guard=True):
    """``np_fn`` on the values, not differentiated.  Under graph tracing, index-like
    results are concrete with a guard (``guard=True``); predicates stay recorded."""
    def fn(*args, **kwargs):
        if not builtins.any(isinstance(strip_eager(a), Tracer)
                            for a in list(args) + list(kwargs.values())):
            return np_fn(*(_strip(a) for a in args), **{k: _strip(v) for k, v in kwargs.items()})
        return (concrete if guard else recorded)(np_fn, *args, **kwargs)
    fn.__name__ = np_fn.__name__
    fn.__doc__ = f"``np.{np_fn.__name__}`` on the values (not differentiated)."
    fn._nondiff = True
    return fn


argmax = _nondiff(np.argmax)
argmin = _nondiff(np.argmin)
argsort = _nondiff(np.argsort)
any = _nondiff(np.any, guard=False)
all = _nondiff(np.all, guard=False)
count_nonzero = _nondiff(np.count_nonzero)
argwhere = _nondiff(np.argwhere)
flatnonzero = _nondiff(np.flatnonzero)
searchsorted = _nondiff(np.searchsorted)


def nonzero(a):
    """``np.nonzero`` on the values (not differentiated)."""
    s = strip_eager(a)
    if not isinstance(s, Tracer):
        return np.nonzero(_plain(a))
    v = concrete(np.argwhere, s)
    return tuple(np.ascontiguousarray(c) for c in v.T)


nonzero._nondiff = True
