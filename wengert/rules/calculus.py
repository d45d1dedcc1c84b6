"""Calculus on sampled values: diff, ediff1d, gradient, interp, unwrap, trapezoid.

Each is NumPy's own expression on slices of the traced arrays, so the values are NumPy's to
the bit and the derivatives those of the same expression.  Each public function returns
exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..arrays import asarray as _asarray, implements, is_foreign
from ..core import Tracer, ndim_of, shape_of
from .conversion import _dtype, _plain, _traced, astype
from .creation import asarray
from .elementwise import where
from .indexing import getitem_basic, take
from .joining import concatenate
from .nondiff import batched, concrete, concrete_or_batched, recorded
from .reductions import sum  # wengert's (this module uses no builtin sum)
from .reshaping import _axis, ravel
from .shape import broadcast_to, reshape

__all__ = ["diff", "ediff1d", "gradient", "interp", "unwrap", "trapezoid"]


# -- unwrapping ------------------------------------------------------------------------------------
def _unwrap_correction(p, discont, axis, period):
    """NumPy's ``unwrap`` up to the cumulative correction added to ``p[1:]``."""
    dd = np.diff(p, axis=axis)
    if discont is None:
        discont = period / 2
    dtype = np.result_type(dd, period)
    if np.issubdtype(dtype, np.integer):
        interval_high, rem = divmod(period, 2)
        boundary_ambiguous = rem == 0
    else:
        interval_high = period / 2
        boundary_ambiguous = True
    interval_low = -interval_high
    ddmod = np.mod(dd - interval_low, period) + interval_low
    if boundary_ambiguous:
        np.copyto(ddmod, interval_high, where=(ddmod == interval_low) & (dd > 0))
    ph_correct = ddmod - dd
    np.copyto(ph_correct, 0, where=abs(dd) < discont)
    return ph_correct.cumsum(axis)


def unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """``np.unwrap``: ``p`` plus piecewise-constant multiples of ``period``, so the
    derivative is the identity; the jumps are found again on each call (and in a compiled
    graph)."""
    if not _traced(p, discont, period):
        return np.unwrap(p, discont, axis, period=period)
    if _traced(discont, period):
        raise TypeError("wnp.unwrap: discont and period cannot be traced (the result is "
                        "piecewise constant in them)")
    p = asarray(p)
    ax = _axis(axis, ndim_of(p))
    correction = recorded(_unwrap_correction, p, discont, ax, period, name="unwrap_correction")
    first = (slice(None),) * ax + (slice(None, 1),)
    rest = (slice(None),) * ax + (slice(1, None),)
    head = astype(getitem_basic(p, first), np.result_type(_dtype(p), period))  # NumPy's
    return concatenate([head, getitem_basic(p, rest) + correction], axis=ax)


# -- differences, gradient, interpolation ----------------------------------------------------------
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    if not _traced(a, prepend, append):
        kw = {}
        if prepend is not np._NoValue:
            kw["prepend"] = prepend
        if append is not np._NoValue:
            kw["append"] = append
        return np.diff(a, n, axis, **kw)
    a = asarray(a)
    nd = ndim_of(a)
    ax = _axis(axis, nd)
    parts = []
    for extra in (prepend, None, append):
        if extra is None:
            parts.append(a)
            continue
        if extra is np._NoValue:
            continue
        if ndim_of(extra) == 0:
            s = list(shape_of(a))
            s[ax] = 1
            extra = broadcast_to(extra, tuple(s)) if isinstance(extra, Tracer) \
                else np.broadcast_to(extra, s)
        parts.append(extra)
    if len(parts) > 1:
        a = concatenate(parts, axis=ax)
    lo = (slice(None),) * ax + (slice(None, -1),)
    hi = (slice(None),) * ax + (slice(1, None),)
    for _ in range(n):
        a = getitem_basic(a, hi) - getitem_basic(a, lo)
    return a


def ediff1d(ary, to_end=None, to_begin=None):
    if not _traced(ary, to_end, to_begin):
        return np.ediff1d(ary, to_end, to_begin)
    d = diff(ravel(asarray(ary)))
    parts = [ravel(asarray(p)) if isinstance(p, Tracer) else np.ravel(p)
             for p in (to_begin,) if p is not None]
    parts.append(d)
    if to_end is not None:
        parts.append(ravel(to_end) if isinstance(to_end, Tracer) else np.ravel(to_end))
    return concatenate(parts) if len(parts) > 1 else d


def gradient(f, *varargs, axis=None, edge_order=1):
    """``np.gradient``, differentiable in ``f`` and in the spacings.

    Each piece is NumPy's own expression on slices, joined along the axis, so the
    value is NumPy's to the bit.  One exception: traced coordinates always take the
    non-uniform formula, whose derivative in every coordinate is the right one;
    NumPy switches to ``h = x[1] - x[0]`` when the spacing is uniform, which agrees
    in value to rounding but would see only two of the coordinates.
    """
    if not _traced(f, *varargs):
        return np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    f = asarray(f)
    nd = ndim_of(f)
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(_axis(a, nd) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
        if len(set(axes)) != len(axes):
            raise ValueError("repeated axis")
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and ndim_of(varargs[0]) == 0:
        spacings = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        spacings = []
        for ax, x in zip(axes, varargs):
            if ndim_of(x) == 0:
                spacings.append(x)
                continue
            if ndim_of(x) != 1:
                raise ValueError("distances must be either scalars or 1d")
            if shape_of(x)[0] != shape_of(f)[ax]:
                raise ValueError("when 1d, distances must match the length of the "
                                 "corresponding dimension")
            if isinstance(x, Tracer):
                spacings.append(diff(x))
                continue
            x = np.asarray(x)
            dx = np.diff(x.astype(np.float64) if np.issubdtype(x.dtype, np.integer) else x)
            spacings.append(dx[0] if (dx == dx[0]).all() else dx)
    else:
        raise TypeError("invalid number of arguments")
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported" if edge_order > 2
                         else "'edge_order' must be 1 or 2")
    outs = [_gradient_along(f, ax, h, edge_order) for ax, h in zip(axes, spacings)]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _gradient_along(f, ax, h, edge_order):
    n = shape_of(f)[ax]
    if n < edge_order + 1:
        raise ValueError("Shape of array too small to calculate a numerical gradient, "
                         "at least (edge_order + 1) elements are required.")
    nd = ndim_of(f)

    def at(lo, hi=None):  # f[..., lo:hi, ...] along ax, keeping the axis
        return getitem_basic(f, (slice(None),) * ax + (slice(lo, hi),))

    def along(c):  # a 1-d coefficient shaped to broadcast along ax
        shape = [1] * nd
        shape[ax] = -1
        return reshape(c, tuple(shape)) if isinstance(c, Tracer) else np.reshape(c, shape)

    uniform = ndim_of(h) == 0
    if uniform:
        inner = (at(2) - at(None, -2)) / (2. * h)
    else:
        dx1, dx2 = h[0:-1], h[1:]
        a = along(-(dx2) / (dx1 * (dx1 + dx2)))
        b = along((dx2 - dx1) / (dx1 * dx2))
        c = along(dx1 / (dx2 * (dx1 + dx2)))
        inner = a * at(None, -2) + b * at(1, -1) + c * at(2)
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / (h if uniform else h[0])
        last = (at(-1) - at(-2, -1)) / (h if uniform else h[-1])
    else:
        if uniform:
            a, b, c = -1.5 / h, 2. / h, -0.5 / h
        else:
            dx1, dx2 = h[0], h[1]
            a = -(2. * dx1 + dx2) / (dx1 * (dx1 + dx2))
            b = (dx1 + dx2) / (dx1 * dx2)
            c = - dx1 / (dx2 * (dx1 + dx2))
        first = a * at(0, 1) + b * at(1, 2) + c * at(2, 3)
        if uniform:
            a, b, c = 0.5 / h, -2. / h, 1.5 / h
        else:
            dx1, dx2 = h[-2], h[-1]
            a = (dx2) / (dx1 * (dx1 + dx2))
            b = - (dx2 + dx1) / (dx1 * dx2)
            c = (2. * dx2 + dx1) / (dx2 * (dx1 + dx2))
        last = a * at(-3, -2) + b * at(-2, -1) + c * at(-1)
    out = concatenate([first, inner, last], axis=ax)
    # NumPy writes into an array of f's dtype
    return out if _dtype(out) == _dtype(f) else astype(out, _dtype(f))


def interp(x, xp, fp, left=None, right=None, period=None):
    """``np.interp``, differentiable in ``x``, ``xp``, ``fp``, ``left`` and ``right``.

    Inside, NumPy's own expression ``slope * (x - xp[j]) + fp[j]`` with its special cases
    (the last point, a non-finite slope, its NaN fallback), so the value is NumPy's to
    the bit.  At a sample point the derivative in ``x`` is the slope on its right (zero
    at the last point, past which the function is constant), as in JAX.
    """
    if not _traced(x, xp, fp, left, right, period):
        return np.interp(x, xp, fp, left, right, period)
    if np.iscomplexobj(_plain(fp)):
        raise NotImplementedError("wnp.interp with complex fp on traced values: interpolate "
                                  "the real and imaginary parts separately")
    if isinstance(period, Tracer):
        raise NotImplementedError("wnp.interp with a traced period")

    def f64(a):
        return astype(asarray(a), np.float64) if _traced(a) else np.asarray(a, np.float64)
    x, xp, fp = f64(x), f64(xp), f64(fp)
    if ndim_of(xp) != 1 or ndim_of(fp) != 1:
        raise ValueError("Data points must be 1-D sequences")
    if shape_of(xp)[0] != shape_of(fp)[0]:
        raise ValueError("fp and xp are not of the same length.")
    if shape_of(xp)[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None:  # as NumPy: fold into one period, sort, wrap one point each way
        if period == 0:
            raise ValueError("period must be a non-zero value")
        period = abs(period)
        left = right = None
        x, xp = x % period, xp % period
        order = concrete_or_batched(np.argsort, implements(xp, np.argsort, "wnp.interp"))
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([xp[-1:] - period, xp, xp[0:1] + period])
        fp = concatenate([fp[-1:], fp, fp[0:1]])
    n = shape_of(xp)[0]
    left = fp[0] if left is None else f64(left)
    right = fp[n - 1] if right is None else f64(right)
    if n == 1:
        return where(x < xp[0], left, where(x > xp[0], right, fp[0]))  # NaN x: fp[0]
    j = concrete_or_batched(_interp_segment, x, xp)  # each example's own under wg.vmap
    x0, x1, f0, f1 = take(xp, j), take(xp, j + 1), take(fp, j), take(fp, j + 1)
    slope = (f1 - f0) / (x1 - x0)
    r = slope * (x - x0) + f0
    fixes = concrete_or_batched(_interp_fixes, x, x0, x1, f1, slope, f0, r)
    if batched(fixes) or is_foreign(fixes) or fixes.any():  # NumPy's special cases, where
        # they change the value (a CuPy or Dask mask is applied unread)
        r2 = slope * (x - x1) + f1
        r = where(fixes == 1, f0, where(fixes == 2, r2, r))
    return where(recorded(np.isnan, x), x, where(x < xp[0], left, where(
        x > xp[n - 1], right, where(x == xp[n - 1], fp[n - 1], r))))


def _interp_segment(x, xp):
    """The segment ``j`` with ``xp[j] <= x < xp[j + 1]`` (clamped to the first and last)."""
    xp = _asarray(xp, like=x)  # a NumPy xp for a Dask or CuPy x: searched in x's library
    return np.clip(np.searchsorted(xp, x, side="right") - 1, 0, len(xp) - 2)


def _interp_fixes(x, x0, x1, f1, slope, f0, r):
    """Where NumPy's C loop does not return ``r = slope (x - x0) + f0``: 1 for ``f0``
    (``x`` on the point, or both formulas NaN on a flat segment), 2 for the formula from
    the right end, ``slope (x - x1) + f1``."""
    same = (r == f0) & (np.signbit(r) == np.signbit(f0)) | np.isnan(r) & np.isnan(f0)
    fix = np.where((x == x0) & ~same, 1, 0)
    with np.errstate(invalid="ignore"):
        r2 = slope * (x - x1) + f1
    nan = np.isnan(r) & (x != x0)
    return np.where(nan, np.where(np.isnan(r2) & (f0 == f1), 1, 2), fix)


# -- integration -----------------------------------------------------------------------------------
def trapezoid(y, x=None, dx=1.0, axis=-1):
    if not isinstance(y, Tracer) and not isinstance(x, Tracer) and not isinstance(dx, Tracer):
        return np.trapezoid(y, x, dx, axis)
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
