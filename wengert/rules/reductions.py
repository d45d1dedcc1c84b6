"""Reductions: sum, prod, max/min (ties split the derivative evenly), cumsum, cumprod, and
compositions of them (mean, var, std, ptp, average, logsumexp, the nan* forms).  Also the
non-differentiable ones (argmax, any, ...) that give plain values.  Quantiles, medians and
covariances are in rules/statistics.py.

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import builtins

import math

import numpy as np

from ..arrays import asarray as _asarray, chunks_of, is_foreign
from ..core import lift, plain as _plain, Tracer, ndim_of, primitive, shape_of
from . import patterns
from .arithmetic import multiply
from .complex import conj, real
from .conversion import astype
from .creation import asarray
from .elementwise import exp, log, maximum, minimum, sqrt, where
from .indexing import _has_tracer, getitem_basic
from .joining import _concatenate
from .nondiff import batched, concrete, concrete_or_batched, recorded, strip_eager
from .shape import _norm_axes, broadcast_to, expand_reduced as _expand, kept_shape, reshape, \
    sum_, transpose

__all__ = ["sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "ptp",
           "average", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "logsumexp",
           "cumlogsumexp",
           "nansum", "nanmean", "argmax", "argmin", "argsort", "nonzero", "any", "all",
           "count_nonzero", "argwhere", "flatnonzero", "searchsorted", "nanmax", "nanmin",
           "nanprod", "nanvar", "nanstd", "nancumsum", "nancumprod", "nan_to_num"]

_builtin_sum = sum



def _dtype(x):
    v = _plain(x)
    return v.dtype if hasattr(v, "dtype") else np.result_type(v)


def _arr(a):
    """A list or tuple holding traced values becomes one traced array (stacked)."""
    if isinstance(a, (list, tuple)):
        if _has_tracer(a):
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
# sparsity: each result element depends on the fibre it reduces; a cumulative one on the
# elements up to it. wg.vmap: reductions along ``axis``, past the batch axis
@primitive(name="cumsum", nargs=1, linear=True, sparsity=patterns.Reduction(prefix=True),
           batch="axis")
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
    return ans, _cumsum(dx, axis)


@_cumsum.rrule
def _cumsum_vjp(x, axis):
    ans = _cumsum(x, axis)

    def pullback(g):
        r = _reverse_idx(axis)
        return (getitem_basic(_cumsum(getitem_basic(g, r), axis), r),)
    return ans, pullback


@primitive(name="cumprod", nargs=1, sparsity=patterns.Reduction(prefix=True), batch="axis")
def _cumprod(x, axis):
    return np.cumprod(x, axis=axis)


def _cumprod_matrix(x, axis):
    """``D[..., k, i] = d y_i / d x_k`` for ``y = cumprod(x)`` along ``axis`` (moved last)."""
    nd = ndim_of(x)
    perm = _axis_last(axis, nd)
    xm = transpose(x, perm)
    n = shape_of(xm)[-1]
    eye = np.eye(n, dtype=bool)
    rows = where(eye, 1.0, reshape(xm, shape_of(xm)[:-1] + (1, n)))  # x with x_k -> 1 in row k
    upper = np.triu(np.ones((n, n), dtype=bool))                       # k <= i
    return where(upper, _cumprod(rows, nd), 0.0), perm


def _inv(perm):
    return tuple(int(i) for i in np.argsort(perm))


def _axis_last(axis, nd):
    """The permutation that moves ``axis`` last (a running op's triangle is built there)."""
    return tuple(i for i in range(nd) if i != axis) + (axis,)


def _prefix_weighted(W, perm, dx):
    """``t_i = sum_k dx_k W[..., k, i]`` along the axis ``perm`` moves last (a tangent)."""
    dm = transpose(dx, perm)
    t = sum_(reshape(dm, shape_of(dm) + (1,)) * W, axis=len(perm) - 1)
    return transpose(t, _inv(perm))


def _suffix_weighted(W, perm, g):
    """``t_k = sum_i W[..., k, i] g_i`` along the axis ``perm`` moves last (a cotangent)."""
    gm = transpose(g, perm)
    gs = shape_of(gm)
    t = sum_(reshape(gm, gs[:-1] + (1, gs[-1])) * W, axis=len(perm))
    return transpose(t, _inv(perm))


@_cumprod.frule(symbolic_zeros=True)
def _cumprod_jvp(primals, tangents, axis):
    (x,), (dx,) = primals, tangents
    ans = _cumprod(x, axis)
    if dx is None:
        return ans, None
    D, perm = _cumprod_matrix(x, axis)
    return ans, _prefix_weighted(D, perm, dx)


@_cumprod.rrule
def _cumprod_vjp(x, axis):
    ans = _cumprod(x, axis)

    def pullback(g):
        D, perm = _cumprod_matrix(x, axis)
        return (_suffix_weighted(D, perm, g),)
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


# -- cumlogsumexp: log(cumsum(exp(x))) without overflow ---------------------------------------
# Each rule weighs element k into result i by exp(x_k - y_i) <= 1 (k <= i): an (n, n) triangle
# along the axis, as cumprod's, built of differentiable primitives, so every order follows.
@primitive(name="cumlogsumexp", nargs=1, sparsity=patterns.Reduction(prefix=True), batch="axis")
def _cumlogsumexp(x, axis):
    return np.logaddexp.accumulate(x, axis=axis)


def _cumlogsumexp_weights(x, y, axis):
    """``W[..., k, i] = exp(x_k - y_i)`` for ``k <= i``, else 0, the axis moved last."""
    perm = _axis_last(axis, ndim_of(x))
    xm, ym = transpose(x, perm), transpose(y, perm)
    lead, n = shape_of(xm)[:-1], shape_of(xm)[-1]
    upper = np.triu(np.ones((n, n), dtype=bool))  # k <= i
    d = reshape(xm, lead + (n, 1)) - reshape(ym, lead + (1, n))
    return where(upper, exp(where(upper, d, 0.0)), 0.0), perm  # no exp of k > i: overflow


@_cumlogsumexp.frule(symbolic_zeros=True)
def _cumlogsumexp_jvp(primals, tangents, axis):
    (x,), (dx,) = primals, tangents
    ans = _cumlogsumexp(x, axis)
    if dx is None:
        return ans, None
    W, perm = _cumlogsumexp_weights(x, ans, axis)
    return ans, _prefix_weighted(W, perm, dx)


@_cumlogsumexp.rrule
def _cumlogsumexp_vjp(x, axis):
    ans = _cumlogsumexp(x, axis)

    def pullback(g):
        W, perm = _cumlogsumexp_weights(x, ans, axis)
        return (_suffix_weighted(W, perm, g),)
    return ans, pullback


def cumlogsumexp(a, axis=None, reverse=False):
    """``log(cumsum(exp(a), axis))`` without overflow (``np.logaddexp.accumulate``; JAX's
    ``lax.cumlogsumexp``, PyTorch's ``logcumsumexp``): ``axis=None`` runs over the flattened
    array, ``reverse=True`` accumulates from the end. Its rules cost O(n^2) along ``axis``."""
    a = _arr(a)
    if not isinstance(a, Tracer):  # NumPy's (or the array library's) own accumulate
        a = a if hasattr(a, "ndim") else np.asarray(a, dtype=float)
        a, axis = (a.reshape(-1), 0) if axis is None else (a, axis % builtins.max(a.ndim, 1))
        flip = _reverse_idx(axis)
        return (np.logaddexp.accumulate(a[flip], axis=axis)[flip] if reverse
                else np.logaddexp.accumulate(a, axis=axis))
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    axis %= ndim_of(a)
    if not reverse:
        return _cumlogsumexp(a, axis)
    flip = _reverse_idx(axis)
    return getitem_basic(_cumlogsumexp(getitem_basic(a, flip), axis), flip)


@primitive(name="prod", sparsity=patterns.Reduction(), batch="axis")
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
    if not axes:
        return ans, dx
    o = _prod_others(x, axes)
    return ans, sum_(dx * o, axis=axes, keepdims=keepdims)


@_prod.rrule
def _prod_vjp(x, axis=None, keepdims=False):
    ans = _prod(x, axis, keepdims)
    xs = shape_of(x)
    axes = _norm_axes(axis, len(xs))

    def pullback(g):
        if not axes:
            return (g,)
        return (_expand(g, ans, xs, axes, chunks_of(x)) * _prod_others(x, axes),)
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
    # piecewise linear (no second derivatives); reduced along ``axis`` under wg.vmap
    p = primitive(lambda x, axis=None, keepdims=False: np_fn(x, axis=axis, keepdims=keepdims),
                  name=name, linear="piecewise", sparsity=patterns.Reduction(), batch="axis")

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
        w = weights(x, ans, axes)
        return ans, sum_(dx * w, axis=axes, keepdims=keepdims)

    @p.rrule
    def vjp(x, axis=None, keepdims=False):
        ans = p(x, axis, keepdims)
        xs = shape_of(x)
        axes = _norm_axes(axis, len(xs))

        def pullback(g):
            # the weights once a cotangent comes (a sweep that never reaches the node makes
            # none, and none is held meanwhile); they are this call's own array: the
            # cotangent is written into them (issue 32's lse: one 10 MB array less)
            w = weights(x, ans, axes)
            e = _expand(g, ans, xs, axes, chunks_of(x))
            if type(w) is np.ndarray and type(e) is np.ndarray and e.dtype == w.dtype:
                return (np.multiply(w, e, out=w),)
            return (e * w,)
        return ans, pullback
    return p


def _tie_weights(xv, av, axes):
    xv = _asarray(xv)  # a CuPy or Dask array stays one
    hit = xv == np.reshape(av, kept_shape(xv.shape, axes))
    if type(xv) is np.ndarray and xv.dtype.kind == "f":
        # in x's float dtype: without ties (the usual case) the 0/1 weights are ready, and
        # no division over the whole array is made (issue 32's k-means: a (n, k) min along
        # its rows, twice per Newton direction); ties counted on the booleans
        w = hit.astype(xv.dtype)
        cnt = np.count_nonzero(hit, axis=axes, keepdims=True)
        if cnt.size and cnt.max() > 1:
            w /= np.maximum(cnt, 1)
        return w
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
    return maximum(a, b)


def _minimum(a, b):
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
    if where is not True and batched(where):  # each example's own count (wg.vmap)
        shape = np.broadcast_shapes(shape_of(where), s)
        return sum(broadcast_to(where, shape), axis=axis, keepdims=True)
    if where is not True:
        w = concrete(_asarray, where)  # a CuPy or Dask mask (nanmean's) is counted there
        m = np.broadcast_to(w, np.broadcast_shapes(shape_of(w), s))
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
    dd = real(d * conj(d)) if np.iscomplexobj(_plain(d)) else d * d  # NumPy's: |d|², real
    ss = sum(dd, axis=axis, keepdims=keepdims, where=where)
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
    v = var(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where,
            mean=mean, correction=correction)
    if mean is not None:
        return sqrt(v)
    return _sqrt_of_var(v, _count(a, axis, where), keepdims)


def _sqrt_of_var(v, n, keepdims):
    """``sqrt(v)``, but ``v`` itself for a slice of one element: its variance is 0 (or nan)
    whatever the element, and so has derivative 0, which sqrt's infinite slope at 0 would
    turn into 0 * inf = nan.  sqrt(0) = 0 and sqrt(nan) = nan: the values agree."""
    if isinstance(n, int):
        return v if n == 1 else sqrt(v)
    one = n == 1
    if not is_foreign(one) and not np.any(one):  # (a CuPy or Dask count is not read)
        return sqrt(v)
    if not keepdims:
        one = np.reshape(one, shape_of(v))
    return where(one, v, sqrt(where(one, 1.0, v)))


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    a = _arr(a)
    if not isinstance(a, Tracer):
        return np.nanmean(a, axis=axis, dtype=dtype, out=out, keepdims=keepdims, **kw)
    return mean(a, axis=axis, dtype=dtype, keepdims=keepdims,
                where=recorded(np.logical_not, recorded(np.isnan, a)))


def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    a = _arr(a)
    if isinstance(weights, (list, tuple)):  # as NumPy: weights are an array, traced or not
        weights = _arr(weights) if _has_tracer(weights) else np.asarray(weights)
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
    av = _asarray(av)  # a CuPy or Dask array stays one
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


# -- NaN handling (compositions) ---------------------------------------------------------------
def _isnan(a):
    return recorded(np.isnan, a)


def nanmax(a, axis=None, out=None, keepdims=False, **kw):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.nanmax(a, axis=axis, out=out, keepdims=keepdims, **kw)
    return _all_nan_to_nan(max(where(_isnan(a), -np.inf, a), axis=axis, keepdims=keepdims),
                           a, axis, keepdims)


def nanmin(a, axis=None, out=None, keepdims=False, **kw):
    a = lift(a)
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
    a = lift(a)
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
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    return var(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
               where=recorded(np.logical_not, _isnan(a)))


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    a = lift(a)
    if not isinstance(a, Tracer):
        return np.nanstd(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, **kw)
    return std(a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims,
               where=recorded(np.logical_not, _isnan(a)))


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """``np.nan_to_num``: derivative 1 at finite entries, 0 at the replaced ones."""
    if not isinstance(x, Tracer):
        return np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    dt = _dtype(x)
    big = np.finfo(dt).max if np.issubdtype(dt, np.floating) else None
    x = where(_isnan(x), nan, x)
    x = where(recorded(np.isposinf, x), big if posinf is None else posinf, x)
    return where(recorded(np.isneginf, x), -big if neginf is None else neginf, x)


# -- not differentiable: plain values -------------------------------------------------------------------
def _strip(obj):
    if isinstance(obj, Tracer):
        return _plain(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_strip(o) for o in obj)
    return obj


def _nondiff(np_fn, guard=True):
    """``np_fn`` on the values, not differentiated.  Under graph tracing, index-like
    results are concrete with a guard (``guard=True``), or each example's own under wg.vmap;
    predicates stay recorded."""
    def fn(*args, **kwargs):
        if not builtins.any(isinstance(strip_eager(a), Tracer)
                            for a in list(args) + list(kwargs.values())):
            return np_fn(*(_strip(a) for a in args), **{k: _strip(v) for k, v in kwargs.items()})
        return (concrete_or_batched if guard else recorded)(np_fn, *args, **kwargs)
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
