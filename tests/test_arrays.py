"""Arrays: reductions, shape and joining, indexing (and x[idx] = v), products.

Every function in TABLE is checked against finite differences in both modes
(second order where smooth), and its batched Jacobian is checked: forward ==
reverse == finite differences.
"""
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.special import erf as wsp_erf

# np.cross of 2-vectors is deprecated in NumPy 2 but still computed (wnp mirrors it)
# (and nan_to_num is tested on the log of negative numbers, on purpose)
pytestmark = [pytest.mark.filterwarnings("ignore:Arrays of 2-dimensional vectors"),
              pytest.mark.filterwarnings("ignore:invalid value encountered in log")]

rng = np.random.default_rng(0)


def R(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape)


def P(*shape):
    return rng.uniform(0.5, 1.5, size=shape)


A34 = R(3, 4)
M33 = R(3, 3)
IDX = np.array([0, 2, 2, 1])
MASK = A34 > 0
NANMASK = np.array([[True, False, False, True], [False, True, False, False],
                    [True, True, False, True]])

# (name, f, args, order): order 2 for smooth functions, 1 for piecewise ones
TABLE = [
    # reductions
    ("sum", lambda x: wnp.sum(x), (R(3, 4),), 2),
    ("sum_axis", lambda x: wnp.sum(x, axis=0), (R(3, 4),), 2),
    ("sum_axes_keep", lambda x: wnp.sum(x, axis=(0, 2), keepdims=True), (R(2, 3, 4),), 2),
    ("sum_where", lambda x: wnp.sum(x, axis=1, where=MASK), (R(3, 4),), 2),
    ("sum_initial", lambda x: wnp.sum(x, axis=1, initial=2.0), (R(3, 4),), 2),
    ("prod", lambda x: wnp.prod(x), (R(3, 4),), 2),
    ("prod_axis", lambda x: wnp.prod(x, axis=1, keepdims=True), (R(3, 4),), 2),
    ("prod_axes", lambda x: wnp.prod(x, axis=(0, 2)), (R(2, 3, 2),), 2),
    ("prod_zero", lambda x: wnp.prod(x * np.array([1.0, 0.0, 1.0, 1.0])), (R(4),), 2),
    ("mean", lambda x: wnp.mean(x, axis=-1), (R(3, 4),), 2),
    ("mean_where", lambda x: wnp.mean(x, axis=1, where=MASK | (np.arange(4) == 0)),
     (R(3, 4),), 2),
    ("var", lambda x: wnp.var(x), (R(3, 4),), 2),
    ("var_ddof", lambda x: wnp.var(x, axis=0, ddof=1), (R(3, 4),), 2),
    ("std", lambda x: wnp.std(x, axis=1, ddof=1, keepdims=True), (R(3, 4),), 2),
    ("max", lambda x: wnp.max(x), (R(3, 4),), 1),
    ("max_axis", lambda x: wnp.max(x, axis=0), (R(3, 4),), 1),
    ("amax", lambda x: wnp.amax(x, axis=(0, 1)), (R(3, 4, 2),), 1),
    ("amin_axis", lambda x: wnp.amin(x, axis=1, keepdims=True), (R(3, 4),), 1),
    ("min_where", lambda x: wnp.min(x, axis=1, where=MASK, initial=5.0), (R(3, 4),), 1),
    ("ptp", lambda x: wnp.ptp(x, axis=1), (R(3, 4),), 1),
    ("average", lambda x: wnp.average(x, axis=1, weights=np.arange(1.0, 5.0)), (R(3, 4),), 2),
    ("average_w", lambda x, w: wnp.average(x, weights=w), (R(3, 4), P(3, 4)), 2),
    ("cumsum", lambda x: wnp.cumsum(x, axis=1), (R(3, 4),), 2),
    ("cumsum_flat", lambda x: wnp.cumsum(x), (R(3, 4),), 2),
    ("cumlogsumexp", lambda x: wnp.cumlogsumexp(3.0 * x, axis=1), (R(3, 4),), 2),
    ("cumlogsumexp_flat_reverse", lambda x: wnp.cumlogsumexp(x, reverse=True), (R(3, 4),), 2),
    ("cumprod", lambda x: wnp.cumprod(x, axis=0), (R(3, 4),), 2),
    ("cumprod_flat", lambda x: wnp.cumprod(x), (R(2, 3),), 2),
    ("logsumexp", lambda x: wnp.logsumexp(x, axis=1), (R(3, 4),), 2),
    ("nansum", lambda x: wnp.nansum(x, axis=0), (R(3, 4),), 2),
    # shape and joining
    ("reshape", lambda x: wnp.reshape(x, (4, 3)) * x.T, (R(3, 4),), 2),
    ("method_reshape", lambda x: x.reshape(2, 6).sum(axis=0), (R(3, 4),), 2),
    ("ravel", lambda x: wnp.ravel(x) ** 2, (R(3, 4),), 2),
    ("flatten", lambda x: x.flatten() * 2.0, (R(3, 4),), 2),
    ("transpose", lambda x: wnp.transpose(x, (2, 0, 1)) ** 2, (R(2, 3, 4),), 2),
    ("swapaxes", lambda x: wnp.swapaxes(x, 0, 2) * 3.0, (R(2, 3, 4),), 2),
    ("moveaxis", lambda x: wnp.moveaxis(x, 0, -1) ** 2, (R(2, 3, 4),), 2),
    ("expand_squeeze", lambda x: wnp.squeeze(wnp.expand_dims(x, 1) ** 2, axis=1), (R(3, 4),), 2),
    ("broadcast_to", lambda x: wnp.broadcast_to(x, (2, 3, 4)) ** 2, (R(3, 1),), 2),
    ("concatenate", lambda x, y: wnp.concatenate([x, y ** 2, x], axis=1), (R(3, 2), R(3, 4)), 2),
    ("concat_const", lambda x: wnp.concatenate([np.ones((1, 4)), x ** 2]), (R(3, 4),), 2),
    ("stack", lambda x, y: wnp.stack([x, y * x], axis=1), (R(3, 4), R(3, 4)), 2),
    ("hstack", lambda x, y: wnp.hstack([x, y ** 2]), (R(3), R(2)), 2),
    ("vstack", lambda x, y: wnp.vstack([x, y ** 2]), (R(3), R(3)), 2),
    ("dstack", lambda x, y: wnp.dstack([x, y ** 2]), (R(2, 3), R(2, 3)), 2),
    ("column_stack", lambda x, y: wnp.column_stack([x, y ** 2]), (R(3), R(3, 2)), 2),
    ("split", lambda x: wnp.split(x, 2, axis=1)[1] ** 2, (R(3, 4),), 2),
    ("array_split", lambda x: wnp.array_split(x, 3)[0] * wnp.array_split(x, 3)[2], (R(5),), 2),
    ("tile", lambda x: wnp.tile(x, (2, 1, 3)) ** 2, (R(2, 3),), 2),
    ("repeat", lambda x: wnp.repeat(x, 2, axis=0) ** 2, (R(2, 3),), 2),
    ("repeat_arr", lambda x: wnp.repeat(x, [1, 0, 3], axis=1) ** 2, (R(2, 3),), 2),
    ("flip", lambda x: wnp.flip(x) * x, (R(3, 4),), 2),
    ("fliplr_ud", lambda x: wnp.fliplr(x) + wnp.flipud(x) ** 2, (R(3, 3),), 2),
    ("roll", lambda x: wnp.roll(x, 2, axis=1) * x, (R(3, 4),), 2),
    ("rot90", lambda x: wnp.rot90(x) ** 2, (R(3, 4),), 2),
    ("pad", lambda x: wnp.pad(x, ((1, 2), (0, 1))) ** 2, (R(3, 4),), 2),
    ("pad_value", lambda x: wnp.pad(x, 2, constant_values=3.0) ** 2, (R(3),), 2),
    ("pad_reflect", lambda x: wnp.pad(x, 2, mode="reflect") ** 2, (R(4),), 2),
    ("pad_edge", lambda x: wnp.pad(x, (1, 2), mode="edge") ** 2, (R(3, 2),), 2),
    ("diag", lambda x: wnp.diag(x, 1) ** 2, (R(3),), 2),
    ("diag2", lambda x: wnp.diag(x) ** 2, (R(3, 3),), 2),
    ("diagonal", lambda x: wnp.diagonal(x, 1, 0, 2) ** 2, (R(3, 2, 4),), 2),
    ("tril_triu", lambda x: wnp.tril(x) * wnp.triu(x, 1) + wnp.tril(x, -1), (R(3, 3),), 2),
    ("trace", lambda x: wnp.trace(x * x), (R(3, 3),), 2),
    ("atleast", lambda x: wnp.atleast_3d(x) * wnp.atleast_2d(x)[0], (R(3),), 2),
    ("atleast_1d", lambda x: wnp.atleast_1d(x[0]) * x, (R(3),), 2),
    ("asarray", lambda x: wnp.asarray([x[1], x[0] ** 2]), (R(3),), 2),
    ("astype", lambda x: wnp.astype(x ** 2, np.float64), (R(3),), 2),
    ("copy", lambda x: wnp.copy(x) * x, (R(3),), 2),
    ("array_of_list", lambda x: wnp.array([x[0] * x[1], x[2], 1.0]), (R(3),), 2),
    ("array_nested", lambda x: wnp.array([[x[0], x[1]], [x[1] ** 2, 2.0]]), (R(3),), 2),
    ("append", lambda x: wnp.append(x, x ** 2), (R(3),), 2),
    ("full_like", lambda x: wnp.full_like(x, x[0]) * x, (R(3),), 2),
    # indexing
    ("int", lambda x: x[1] ** 2, (R(3, 4),), 2),
    ("slice_step", lambda x: x[::2, 3:0:-2] ** 2, (R(3, 4),), 2),
    ("ellipsis_none", lambda x: x[..., None, 1] * x[0, ...], (R(3, 4),), 2),
    ("mask", lambda x: x[MASK] ** 2, (R(3, 4),), 2),
    ("fancy", lambda x: x[IDX] ** 2, (R(3, 4),), 2),
    ("fancy_repeat_sum", lambda x: wnp.sum(x[:, [0, 0, 3, 0]] ** 2, axis=1), (R(3, 4),), 2),
    ("fancy_2d", lambda x: x[[0, 2], [1, 3]] * x[1, [0, 1]], (R(3, 4),), 2),
    ("fancy_nonadjacent", lambda x: x[[0, 1], :, [1, 0]] ** 2, (R(2, 3, 2),), 2),
    ("take", lambda x: wnp.take(x, [3, 0, 0], axis=1) ** 2, (R(3, 4),), 2),
    ("take_flat", lambda x: wnp.take(x, [[5, 1]]) ** 2, (R(3, 4),), 2),
    ("take_along_axis", lambda x: wnp.take_along_axis(x, np.argsort(A34, axis=1), axis=1) * x,
     (R(3, 4),), 2),
    ("sort", lambda x: wnp.sort(x, axis=0) ** 2, (R(3, 4),), 1),
    ("compress", lambda x: wnp.compress([True, False, True], x, axis=0) ** 2, (R(3, 4),), 2),
    ("extract", lambda x: wnp.extract(MASK, x) ** 2, (R(3, 4),), 2),
    ("select", lambda x: wnp.select([x < -0.5, x > 0.5], [x ** 2, 3.0 * x], default=x),
     (R(3, 4),), 1),
    ("where", lambda x, y: wnp.where(MASK, x ** 2, y), (R(3, 4), R(4)), 2),
    ("setitem", lambda x: _setitem_fn(x), (R(3, 4),), 2),
    ("setitem_fancy", lambda x, v: _setitem_fancy(x, v), (R(5), R(3)), 2),
    ("setitem_mask", lambda x: _setitem_mask(x), (R(3, 4),), 2),
    ("index_update", lambda x, v: wnp.index_update(x, (slice(None), 1), v) ** 2,
     (R(3, 4), R(3)), 2),
    # products
    ("matmul", lambda a, b: a @ b, (R(3, 4), R(4, 2)), 2),
    ("matmul_batched", lambda a, b: wnp.matmul(a, b), (R(2, 3, 4), R(4, 2)), 2),
    ("matmul_bcast", lambda a, b: wnp.matmul(a, b), (R(3, 4), R(2, 4, 2)), 2),
    ("matmul_bcast1", lambda a, b: wnp.matmul(a, b), (R(2, 1, 2, 3), R(3, 3, 2)), 2),
    ("matmul_vec", lambda a, b: wnp.matmul(a, b), (R(3, 4), R(4)), 2),
    ("matmul_vecl", lambda a, b: wnp.matmul(a, b), (R(3), R(2, 3, 4)), 2),
    ("matmul_vv", lambda a, b: a @ b, (R(3), R(3)), 2),
    ("matmul_vecmat", lambda a, b: a @ b, (R(3), R(3, 4)), 2),  # the vecmat primitive
    # a one-column result or a one-row operand: the pullback's product is an outer product
    ("matmul_column", lambda a, b: a @ b, (R(3, 4), R(4, 1)), 2),
    ("matmul_row", lambda a, b: wnp.matmul(a, b), (R(2, 1, 4), R(4, 3)), 2),
    ("vecmat_sin", lambda x: wnp.sin(x @ M33), (R(3),), 2),
    ("dot", lambda a, b: wnp.dot(a, b), (R(3, 4), R(4)), 2),
    ("dot_nd", lambda a, b: wnp.dot(a, b), (R(2, 3, 4), R(2, 4, 3)), 2),
    ("dot_scalar", lambda a, b: wnp.dot(a, b), (R(3), 2.0), 2),
    ("vdot", lambda a, b: wnp.vdot(a, b), (R(2, 3), R(2, 3)), 2),
    ("inner", lambda a, b: wnp.inner(a, b), (R(2, 3), R(4, 3)), 2),
    ("outer", lambda a, b: wnp.outer(a, b), (R(3), R(2, 2)), 2),
    ("tensordot", lambda a, b: wnp.tensordot(a, b, axes=([0, 2], [2, 0])), (R(2, 3, 4),
                                                                           R(4, 5, 2)), 2),
    ("tensordot_int", lambda a, b: wnp.tensordot(a, b, 1), (R(2, 3), R(3, 2)), 2),
    ("einsum_explicit", lambda a, b: wnp.einsum("ij,jk->ki", a, b), (R(3, 4), R(4, 2)), 2),
    ("einsum_implicit", lambda a, b: wnp.einsum("ij,jk", a, b), (R(3, 4), R(4, 2)), 2),
    ("einsum_ellipsis", lambda a, b: wnp.einsum("...ij,...jk->...ik", a, b),
     (R(2, 3, 4), R(4, 2)), 2),
    ("einsum_trace", lambda a: wnp.einsum("ii", a), (R(3, 3),), 2),
    ("einsum_diag_sum", lambda a, b: wnp.einsum("iij,k->jk", a, b), (R(3, 3, 2), R(2)), 2),
    ("einsum_three", lambda a, b, c: wnp.einsum("ij,jk,k->i", a, b, c),
     (R(3, 4), R(4, 2), R(2)), 2),
    ("einsum_lone", lambda a, b: wnp.einsum("ij,k->k", a, b), (R(3, 4), R(2)), 2),
    ("kron", lambda a, b: wnp.kron(a, b), (R(2, 3), R(2, 2)), 2),
    ("kron_mixed", lambda a, b: wnp.kron(a, b), (R(3), R(2, 2)), 2),
    ("cross", lambda a, b: wnp.cross(a, b), (R(4, 3), R(3)), 2),
    ("cross2", lambda a, b: wnp.cross(a, b), (R(2, 2), R(2)), 2),
    ("cross_axis", lambda a, b: wnp.cross(a, b, axisa=0, axisb=0), (R(3, 2), R(3, 2)), 2),
    ("quadratic", lambda x: x @ (M33 @ x), (R(3),), 2),
    ("convolve", lambda a, v: wnp.convolve(a, v), (R(5), R(3)), 2),
    ("convolve_same", lambda a, v: wnp.convolve(a, v, "same"), (R(3), R(6)), 2),
    ("correlate", lambda a, v: wnp.correlate(a, v), (R(5), R(2)), 2),
    ("convolve_valid", lambda a, v: wnp.convolve(a, v, "valid"), (R(2), R(5)), 2),
    # v the longer, a of even length: NumPy centres 'same' the other way round
    ("correlate_same", lambda a, v: wnp.correlate(a, v, "same"), (R(4), R(7)), 2),
    ("correlate_full", lambda a, v: wnp.correlate(a, v, 2), (R(3), R(5)), 2),
    # statistics and differences
    ("quantile", lambda x: wnp.quantile(x, [0.2, 0.5, 0.9], axis=1), (R(3, 5),), 2),
    ("percentile_keep", lambda x: wnp.percentile(x, 30.0, axis=0, keepdims=True), (R(4, 3),), 2),
    ("median", lambda x: wnp.median(x), (R(3, 4),), 2),
    ("median_axes_keep", lambda x: wnp.median(x, axis=(0, 2), keepdims=True), (R(2, 3, 2),), 2),
    ("quantile_in_q", lambda x, q: wnp.quantile(x, q, axis=0), (R(5, 3), np.array([0.33, 0.8])), 2),
    ("percentile_in_q", lambda x, q: wnp.percentile(x, q[0] * 100.0), (R(6), np.array([0.3])), 2),
    ("cov", lambda x: wnp.cov(x), (R(3, 5),), 2),
    ("cov_xy", lambda x, y: wnp.cov(x, y, rowvar=False), (R(5, 2), R(5, 1)), 2),
    ("corrcoef", lambda x: wnp.corrcoef(x), (R(3, 5),), 2),
    ("trapezoid", lambda y, x: wnp.trapezoid(y, x), (R(2, 5), np.sort(R(5))), 2),
    ("nanmax", lambda x: wnp.nanmax(wnp.where(NANMASK, np.nan, x), axis=1), (R(3, 4),), 1),
    ("nanvar", lambda x: wnp.nanvar(wnp.where(NANMASK, np.nan, x), axis=0), (R(3, 4),), 2),
    ("nanmean", lambda x: wnp.nanmean(wnp.where(NANMASK, np.nan, x), axis=1), (R(3, 4),), 2),
    ("nan_to_num", lambda x: wnp.nan_to_num(wnp.log(x)), (R(4),), 2),
    ("modf", lambda x: wnp.modf(x * 3.0)[0] * 2.0 + wnp.modf(x * 3.0)[1], (R(4),), 2),
    ("frexp", lambda x: wnp.frexp(x * 5.0)[0], (R(2, 3),), 2),
    ("divmod", lambda x, y: wnp.divmod(x * 3.0, y)[1], (R(4), P(3, 1)), 2),
    ("linspace", lambda a, b: wnp.linspace(a, b, 5, axis=1), (R(2), R(3, 1)), 2),
    ("logspace", lambda a, b, c: wnp.logspace(a, b, 4, base=c), (R(2), R(2), P(2)), 2),
    ("geomspace", lambda a, b: wnp.geomspace(a, b, 5), (P(3), P(3)), 2),
    ("block", lambda a, b: wnp.block([[a, b], [b[:, :2], a[:, :1] * 2.0, a]]), (R(2, 2), R(2, 3)),
     2),
    ("unstack", lambda x: wnp.unstack(x, axis=1)[1] * 3.0, (R(2, 3),), 2),
    ("choose", lambda a, b: wnp.choose(np.array([[0, 1, 2], [2, 1, 0]]), [a, b, 0.5]),
     (R(3), R(2, 3)), 2),
    ("polyadd_sub", lambda p, q: wnp.polyadd(p, q) * wnp.polysub(q, p), (R(4), R(2)), 2),
    ("polymul", lambda p, q: wnp.polymul(p, q), (R(3), R(2)), 2),
    ("polyder", lambda p: wnp.polyder(p ** 2, 2), (R(5),), 2),
    ("polyint", lambda p, k: wnp.polyint(p, 2, k=k), (R(3), R(2)), 2),
    ("insert", lambda a, v: wnp.insert(a, [0, 2], v, axis=1), (R(3, 4), R(3, 1)), 2),
    ("insert_flat", lambda a, v: wnp.insert(a ** 2, 3, v), (R(2, 3), R(2)), 2),
    ("delete", lambda a: wnp.delete(a ** 2, [0, 2], axis=1), (R(3, 4),), 2),
    ("resize", lambda a: wnp.resize(a ** 2, (3, 5)), (R(2, 3),), 2),
    ("unwrap", lambda p: wnp.unwrap(wnp.cumsum(p * 4.0)), (R(6),), 2),
    ("vander", lambda x: wnp.vander(x, 4), (R(3),), 2),
    ("polyfit", lambda x, y: wnp.polyfit(x, y, 2), (np.linspace(-1, 1, 6) + R(6) * 0.1, R(6)),
     2),
    # functions that call the user's functions, and trim_zeros
    ("piecewise", lambda x: np.piecewise(x, [x < -0.3, x > 0.4],
                                         [lambda v: v ** 3, lambda v: wnp.sqrt(v), 0.25]),
     (R(3, 4),), 2),
    ("piecewise_args", lambda x, a: wnp.piecewise(x, x > 0, [lambda v, a: a[0] * v ** 2,
                                                              lambda v, a: wnp.sin(v) - a[1]],
                                                  a), (R(6), R(2)), 2),
    ("apply_along_axis", lambda a: np.apply_along_axis(
        lambda r: wnp.stack([wnp.sum(r ** 2), wnp.prod(r)]), 1, a), (R(2, 3, 4),), 2),
    ("apply_along_axis_2d", lambda a: np.apply_along_axis(lambda r: wnp.outer(r, r[:2]), 0, a),
     (R(3, 4),), 2),
    ("apply_over_axes", lambda a: np.apply_over_axes(wnp.mean, a ** 2, [0, 2]), (R(2, 3, 4),), 2),
    ("trim_zeros", lambda x: np.trim_zeros(x * np.array([0.0, 0.0, 1.0, 0.0, 2.0, 0.0])),
     (R(6),), 2),
    # counting: unique values, weights and bin edges are differentiated
    ("unique", lambda x: np.unique(wnp.round(x * 2.0) + x * 0.01), (R(9),), 2),
    ("unique_axis", lambda x: np.unique(x[[0, 1, 0]], axis=0) ** 2, (R(3, 2),), 2),
    ("bincount", lambda w: np.bincount(np.array([0, 2, 2, 5, 0]), w, minlength=7),
     (R(5),), 2),
    ("histogram_weights", lambda w: np.histogram(np.linspace(0, 1, 6), 3, weights=w ** 2)[0],
     (R(6),), 2),
    ("histogram_edges", lambda x: np.histogram(x, 4)[1], (R(7),), 2),
    ("histogram_density", lambda x: np.histogram(x, 3, density=True)[0], (R(8),), 2),
    # (NumPy does not dispatch on range: wnp.histogram)
    ("histogram_range", lambda r: wnp.histogram(np.linspace(-2, 2, 9), 4, range=(r[0] - 2.5,
                                                                                 r[1] + 2.5),
                                                density=True)[0], (R(2) * 0.1,), 2),
    ("histogram_bins_array", lambda w, b: np.histogram(np.linspace(0, 1, 7), wnp.cumsum(b ** 2),
                                                       weights=w)[0] + wnp.sum(b),
     (R(7), np.array([0.1, 0.8, 0.5, 0.6])), 2),
    ("histogram_bin_edges", lambda x: np.histogram_bin_edges(x, 5), (R(6),), 2),
    ("trim_zeros_axis", lambda x: np.trim_zeros(x * np.array([[0.0, 1.0, 1.0, 0.0]] * 3), "b",
                                                axis=1), (R(3, 4),), 2),
    ("polyfit_weighted_cov", lambda y, w: wnp.polyfit(np.arange(6.0), y, 1, w=w, cov=True)[1],
     (R(6, 2), P(6)), 2),
    ("nanquantile", lambda x: wnp.nanquantile(wnp.where(NANMASK, np.nan, x), [0.2, 0.7],
                                              axis=1), (R(3, 4),), 2),
    ("nanpercentile_keep", lambda x: wnp.nanpercentile(wnp.where(NANMASK, np.nan, x), 40.0,
                                                       axis=0, keepdims=True), (R(3, 4),), 2),
    ("nanquantile_in_q", lambda x, q: wnp.nanquantile(wnp.where(NANMASK, np.nan, x), q[0],
                                                      axis=(0, 1)), (R(3, 4), np.array([0.55])), 2),
    ("nanmedian", lambda x: wnp.nanmedian(wnp.where(NANMASK, np.nan, x), axis=1), (R(3, 4),), 2),
    ("nanmedian_all", lambda x: wnp.nanmedian(wnp.where(NANMASK, np.nan, x)), (R(3, 4),), 2),
    ("diff", lambda x: wnp.diff(x ** 2, n=2, axis=0, prepend=1.0), (R(4, 3),), 2),
    ("ediff1d", lambda x: wnp.ediff1d(x ** 2, to_begin=[1.0]), (R(4),), 2),
    ("gradient", lambda x: wnp.gradient(x ** 2, 0.5, axis=0), (R(4, 3),), 2),
    ("interp", lambda x, xp, fp: wnp.interp(x, xp, fp),
     (np.array([-1.3, 0.2, 0.8, 1.7, 2.9, 3.6]), np.array([0.0, 0.5, 1.4, 2.0, 3.1]), R(5)), 2),
    ("interp_left_right", lambda x, l, r: wnp.interp(x, [0.0, 1.0, 2.0], [1.0, -2.0, 0.5], l, r),
     (np.array([[-0.5, 0.3], [1.6, 2.5]]), 0.7, -0.2), 2),
    ("interp_period", lambda x, fp: wnp.interp(x, [0.5, 1.5, 3.0, 4.0], fp, period=5.0),
     (np.array([-2.2, 0.1, 1.2, 3.7, 6.3]), R(4)), 2),
    ("polyval", lambda p, x: wnp.polyval(p, x), (R(4), R(2, 3)), 2),
    ("nancumsum", lambda x: wnp.nancumsum(wnp.where(NANMASK, np.nan, x) ** 2, axis=1),
     (R(3, 4),), 2),
    ("nancumprod", lambda x: wnp.nancumprod(wnp.where(NANMASK, np.nan, x), axis=0), (R(3, 4),), 2),
    ("pad_traced_fill", lambda x, c: wnp.pad(x, ((1, 0), (2, 1)), constant_values=c * c),
     (R(2, 3), R(2, 2)), 2),
    ("full_traced", lambda c: wnp.full((2, 3), c) * wnp.full_like(A34[:2, :3], c ** 2), (0.7,), 2),
    ("gradient_2d", lambda x: wnp.gradient(x ** 2, edge_order=2)[1], (R(3, 4),), 2),
    ("gradient_coords", lambda f, x: wnp.gradient(f * f, wnp.cumsum(x ** 2), edge_order=2),
     (R(5), P(5)), 2),
    ("gradient_traced_h", lambda f, h: wnp.gradient(f, 0.3, h[0] ** 2)[1], (R(3, 4), P(1)), 2),
    ("rollaxis", lambda x: wnp.rollaxis(x, 2) ** 2, (R(2, 3, 4),), 2),
    ("meshgrid", lambda x, y: wnp.meshgrid(x, y ** 2)[1] * wnp.meshgrid(x, y)[0], (R(3), R(2)), 2),
    ("linspace", lambda x: wnp.linspace(x[0], x[1] ** 2, 5), (R(2),), 2),
    ("partition", lambda x: wnp.partition(x, 2) ** 2, (R(5),), 1),
    # names the rows above do not call (tests/test_coverage.py checks every one is here)
    ("ascontiguousarray", lambda x: wnp.ascontiguousarray(x.T) ** 2, (R(3, 4),), 2),
    ("broadcast_arrays", lambda a, b: wnp.broadcast_arrays(a, b)[0] * wnp.broadcast_arrays(
        a, b)[1] ** 2, (R(3, 1), R(4)), 2),
    ("cumulative_prod", lambda x: wnp.cumulative_prod(x, axis=1, include_initial=True),
     (R(3, 4),), 2),
    ("cumulative_sum", lambda x: wnp.cumulative_sum(x, axis=0, include_initial=True) ** 2,
     (R(3, 4),), 2),
    ("diagflat", lambda x: wnp.diagflat(x, k=1) ** 2, (R(2, 2),), 2),
    ("dsplit", lambda x: wnp.dsplit(x, 2)[1] ** 2, (R(2, 2, 4),), 2),
    ("hsplit", lambda x: wnp.hsplit(x, [1, 3])[1] ** 2, (R(3, 4),), 2),
    ("vsplit", lambda x: wnp.vsplit(x, 3)[2] ** 2, (R(3, 4),), 2),
    ("matvec", lambda a, v: wnp.matvec(a, v), (R(2, 3, 4), R(4)), 2),
    ("vecdot", lambda a, b: wnp.vecdot(a, b, axis=0), (R(3, 4), R(3, 1)), 2),
    ("nanmin", lambda x: wnp.nanmin(wnp.where(NANMASK, np.nan, x), axis=1), (R(3, 4),), 1),
    ("nanprod", lambda x: wnp.nanprod(wnp.where(NANMASK, np.nan, x), axis=0), (R(3, 4),), 2),
    # (a slice of one value has std 0: sqrt's infinite slope there, as np.std's gradient)
    ("nanstd", lambda x: wnp.nanstd(wnp.where(NANMASK[:2], np.nan, x), axis=1), (R(2, 4),), 2),
    ("nanstd_ddof", lambda x: wnp.nanstd(wnp.where(NANMASK[:2], np.nan, x), axis=1, ddof=1),
     (R(2, 4),), 2),
    ("linalg.svdvals", lambda x: wnp.linalg.svdvals(x), (R(3, 4),), 2),
    ("linalg.vecdot", lambda a, b: wnp.linalg.vecdot(a, b), (R(2, 3), R(3)), 2),
    ("fft.ifftshift", lambda x: wnp.fft.ifftshift(x, axes=1) ** 2, (R(3, 4),), 2),
]


def _setitem_fn(x):
    y = x * 1.0
    y[1] = y[0] ** 2
    y[:, 2] = 3.0
    y[0, ::2] = wnp.sin(x[2, :2])
    return y * x


def _setitem_fancy(x, v):
    y = x * v[1]
    y[[0, 4, 0]] = v ** 2  # repeated index: the last write wins, as NumPy
    return y * x


def _setitem_mask(x):
    y = wnp.copy(x)
    y[y > 0] = 0.5 * y[y > 0] ** 2
    return y


def _fd_jacobian(f, args, i=0, h=1e-6):
    args = [np.asarray(a, dtype=np.float64) if not isinstance(a, float) else a for a in args]
    x = np.asarray(args[i], dtype=np.float64)
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = h
        ap, am = list(args), list(args)
        ap[i] = x + e.reshape(x.shape)
        am[i] = x - e.reshape(x.shape)
        cols.append((np.asarray(f(*ap)) - np.asarray(f(*am))) / (2 * h))
    out_shape = np.shape(f(*args))
    return np.stack(cols, axis=-1).reshape(out_shape + x.shape)


IDS = [t[0] for t in TABLE]


@pytest.mark.parametrize("name,f,args,order", TABLE, ids=IDS)
def test_check_grad(name, f, args, order):
    wg.check_grad(f, *args, order=order, modes=("forward", "reverse"))


@pytest.mark.parametrize("name,f,args,order", TABLE, ids=IDS)
def test_batched_jacobian(name, f, args, order):
    for i, a in enumerate(args):
        if isinstance(a, float):
            continue
        jf = wg.jacobian(f, argnums=i, mode="forward")(*args)
        jr = wg.jacobian(f, argnums=i, mode="reverse")(*args)
        fd = _fd_jacobian(f, args, i)
        assert np.shape(jf) == np.shape(fd) == np.shape(jr)
        np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(jf, fd, rtol=1e-5, atol=1e-6)


SMOOTH1 = [t for t in TABLE if t[3] == 2 and len(t[2]) == 1]


@pytest.mark.parametrize("name,f,args,order", SMOOTH1, ids=[t[0] for t in SMOOTH1])
def test_hessian_batched_through_pullbacks(name, f, args, order):
    """Forward-over-reverse and reverse-over-reverse Hessians agree (batched tangents and
    cotangents pushed through every rule's pullback)."""
    x = args[0]
    u = np.random.default_rng(1).standard_normal(np.shape(f(x)))

    def scalar(x):
        return wnp.sum(f(x) * u)
    hf = wg.jacobian(wg.grad(scalar), mode="forward")(x)
    hr = wg.jacobian(wg.grad(scalar), mode="reverse")(x)
    np.testing.assert_allclose(hf, hr, rtol=1e-9, atol=1e-10)
    fd = _fd_jacobian(wg.grad(scalar), [x], h=1e-5)
    np.testing.assert_allclose(hf, fd, rtol=1e-5, atol=1e-5)


FLOAT32 = ["sum_axis", "prod_axis", "mean", "var", "std", "max_axis", "cumsum", "cumprod",
           "concatenate", "stack", "pad", "fancy", "mask", "setitem", "matmul", "einsum_explicit",
           "tensordot", "sort", "kron", "matmul_vec", "matmul_vecmat", "matmul_vv",
           "matmul_column"]


@pytest.mark.parametrize("name", FLOAT32)
def test_float32_keeps_dtype(name):
    _, f, args, order = next(t for t in TABLE if t[0] == name)
    args32 = tuple(np.asarray(a, np.float32) for a in args)
    out = f(*args32)
    assert out.dtype == np.float32
    for mode in ("forward", "reverse"):
        j = wg.jacobian(f, mode=mode)(*args32)
        assert j.dtype == np.float32, (name, mode, j.dtype)
    g = wg.grad(lambda *a: wnp.sum(f(*a)))(*args32)
    assert g.dtype == np.float32
    wg.check_grad(f, *args32, order=1)


# -- hypothesis: broadcasting shapes ---------------------------------------------------------------------
_BINARY = [wnp.add, wnp.subtract, wnp.multiply, wnp.divide, wnp.maximum, wnp.arctan2, wnp.hypot,
           wnp.logaddexp]


@settings(max_examples=25, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                max_side=3),
       which=st.integers(0, len(_BINARY) - 1), seed=st.integers(0, 2 ** 16))
def test_broadcasting_binary(shapes, which, seed):
    r = np.random.default_rng(seed)
    fn = _BINARY[which]
    a = r.uniform(0.5, 1.5, shapes.input_shapes[0])
    b = r.uniform(-1.5, -0.5, shapes.input_shapes[1])
    wg.check_grad(fn, a, b, order=1)
    for i in (0, 1):
        jf = wg.jacobian(fn, argnums=i, mode="forward")(a, b)
        jr = wg.jacobian(fn, argnums=i, mode="reverse")(a, b)
        np.testing.assert_allclose(jf, jr, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), data=st.data())
def test_reductions_random_axes(shape, data):
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    keep = data.draw(st.booleans())
    name = data.draw(st.sampled_from(["sum", "mean", "prod", "max", "var", "cumsum"]))
    x = np.random.default_rng(len(shape)).uniform(0.5, 1.5, shape)
    fn = getattr(wnp, name)
    if name == "cumsum":
        f = lambda x: fn(x, axis=axis)  # noqa: E731
    else:
        f = lambda x: fn(x, axis=axis, keepdims=keep)  # noqa: E731
    np.testing.assert_allclose(f(x), getattr(np, name)(x, **({"axis": axis} if name == "cumsum"
                                                              else {"axis": axis,
                                                                    "keepdims": keep})))
    wg.check_grad(f, x, order=1)
    np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x),
                               wg.jacobian(f, mode="reverse")(x), rtol=1e-12, atol=1e-12)


_SHAPE_OPS = {
    "flip": lambda x, ax, r: wnp.flip(x, ax),
    "roll": lambda x, ax, r: wnp.roll(x, int(r.integers(-3, 4)), axis=ax),
    "transpose": lambda x, ax, r: wnp.transpose(x, tuple(r.permutation(x.ndim))),
    "swapaxes": lambda x, ax, r: wnp.swapaxes(x, ax, 0),
    "moveaxis": lambda x, ax, r: wnp.moveaxis(x, ax, -1),
    "expand_squeeze": lambda x, ax, r: wnp.squeeze(wnp.expand_dims(x, ax), ax),
    "cumprod": lambda x, ax, r: wnp.cumprod(x, axis=ax),
    "sort": lambda x, ax, r: wnp.sort(x, axis=ax),
    "slice": lambda x, ax, r: x[(slice(None),) * ax + (slice(None, None, int(r.integers(1, 3))),)],
    "reverse": lambda x, ax, r: x[(slice(None),) * ax + (slice(None, None, -1),)],
    "take": lambda x, ax, r: wnp.take(x, r.integers(0, x.shape[ax], 4), axis=ax),
    "tile": lambda x, ax, r: wnp.tile(x, (2,) * x.ndim),
    "repeat": lambda x, ax, r: wnp.repeat(x, 2, axis=ax),
    "pad": lambda x, ax, r: wnp.pad(x, 1, mode=str(r.choice(["constant", "edge", "reflect"]))),
    "concatenate": lambda x, ax, r: wnp.concatenate([x, 2.0 * x], axis=ax),
    "stack": lambda x, ax, r: wnp.stack([x, x * x], axis=ax),
    "diff": lambda x, ax, r: wnp.diff(x, axis=ax),
    "gradient": lambda x, ax, r: wnp.gradient(x, np.cumsum(r.uniform(0.5, 1.5, x.shape[ax])),
                                              axis=ax, edge_order=int(r.integers(1, 3))
                                              if x.shape[ax] > 2 else 1),
    "setitem": lambda x, ax, r: wnp.index_update(x, (slice(None),) * ax + (0,), x.sum(ax)),
}


@settings(max_examples=40, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4),
       name=st.sampled_from(sorted(_SHAPE_OPS)), seed=st.integers(0, 2 ** 16))
def test_shape_functions_random_shapes(shape, name, seed):
    r = np.random.default_rng(seed)
    ax = int(r.integers(0, len(shape)))
    state = r.bit_generator.state
    x = r.uniform(0.5, 1.5, shape)

    def f(x):
        r.bit_generator.state = state  # the same random choices on every call
        return _SHAPE_OPS[name](x, ax, r) * x.sum()
    wg.check_grad(f, x, order=1)
    np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x),
                               wg.jacobian(f, mode="reverse")(x), rtol=1e-12, atol=1e-12)


# -- closed forms -------------------------------------------------------------------------------------------------
def test_quadratic_form_gradient():
    A = R(4, 4)
    x = R(4)
    g = wg.grad(lambda x: 0.5 * x @ A @ x)(x)
    np.testing.assert_allclose(g, 0.5 * (A + A.T) @ x, rtol=1e-12)
    H = wg.hessian(lambda x: 0.5 * wnp.dot(x, wnp.dot(A, x)))(x)
    np.testing.assert_allclose(H, 0.5 * (A + A.T), rtol=1e-12)


def test_sum_mean_var_closed_forms():
    x = R(3, 5)
    np.testing.assert_allclose(wg.grad(wnp.sum)(x), np.ones_like(x))
    np.testing.assert_allclose(wg.grad(wnp.mean)(x), np.full_like(x, 1 / x.size))
    np.testing.assert_allclose(wg.grad(wnp.var)(x), 2 * (x - x.mean()) / x.size, rtol=1e-12)
    gv = wg.grad(lambda x: wnp.sum(wnp.var(x, axis=1, ddof=1)))(x)
    np.testing.assert_allclose(gv, 2 * (x - x.mean(1, keepdims=True)) / 4, rtol=1e-12)
    np.testing.assert_allclose(wg.grad(wnp.prod)(np.array([2.0, 3.0, 0.0])), [0.0, 0.0, 6.0])


def test_max_ties_split_evenly():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_allclose(wg.grad(wnp.max)(x), [0, 0.5, 0.5, 0])
    np.testing.assert_allclose(wg.jacobian(wnp.max, mode="forward")(x), [0, 0.5, 0.5, 0])
    m = np.array([[1.0, 1.0], [0.0, 2.0]])
    np.testing.assert_allclose(wg.grad(lambda m: wnp.sum(wnp.min(m, axis=1)))(m),
                               [[0.5, 0.5], [1.0, 0.0]])


def test_logsumexp_stable_and_softmax():
    x = np.array([1000.0, 1000.0, 990.0])
    v = wnp.logsumexp(x)
    assert np.isfinite(v)
    g = wg.grad(wnp.logsumexp)(x)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(g, e / e.sum(), rtol=1e-12)
    # the hand-written composition: the max's derivative cancels
    f = lambda x: wnp.max(x) + wnp.log(wnp.sum(wnp.exp(x - wnp.max(x))))  # noqa: E731
    np.testing.assert_allclose(wg.grad(f)(x), e / e.sum(), rtol=1e-12)


# -- traps -----------------------------------------------------------------------------------------------------------
def test_cumlogsumexp_in_every_engine():
    """A non-elementwise primitive declared in one place (rules/reductions.py) works in every
    engine: reverse, forward, Taylor, vmap, sparse, compiled (fused) and source mode."""
    x = np.array([0.3, -1.0, 2.0, 0.5, 1.1])
    big = np.array([1000.0, 1000.0, -1000.0])
    np.testing.assert_allclose(wnp.cumlogsumexp(x), np.log(np.cumsum(np.exp(x))), rtol=1e-14)
    np.testing.assert_allclose(wnp.cumlogsumexp(big), [1000.0, 1000.0 + np.log(2.0), 1000.0 +
                                                        np.log(2.0)], rtol=1e-15)
    # the last result is a logsumexp: its gradient the softmax; no overflow at 1000
    np.testing.assert_allclose(wg.grad(lambda x: wnp.cumlogsumexp(x)[-1])(big), [0.5, 0.5, 0.0])

    def F(x):
        return wnp.cumlogsumexp(x * x)

    def loss(x):
        y = wnp.cumlogsumexp(x * x)
        return wnp.sum(wnp.sin(y))
    J = wg.jacobian(F, mode="reverse")(x)
    np.testing.assert_allclose(wg.jacobian(F, mode="forward")(x), J, rtol=1e-13)
    w = np.exp(x * x)   # closed form: dF_i/dx_k = 2 x_k e^{x_k^2} / sum_{j<=i} e^{x_j^2}
    np.testing.assert_allclose(J, np.tril(2 * x * w / np.cumsum(w)[:, None]), rtol=1e-13)
    g = wg.grad(loss)(x)
    # Taylor: the third coefficient of t -> F(x + t v) is a third directional derivative / 6
    v = np.linspace(-1.0, 1.0, 5)
    d3 = wg.jvp(lambda x: wg.jvp(lambda x: wg.jvp(F, (x,), (v,))[1], (x,), (v,))[1],
                (x,), (v,))[1]
    np.testing.assert_allclose(wg.taylor(F, x, v, 3)[3], d3 / 6, rtol=1e-10, atol=1e-12)
    X = np.stack([x, 0.5 * x, -x])
    np.testing.assert_allclose(wg.vmap(F)(X), np.stack([F(r) for r in X]), rtol=1e-15)
    np.testing.assert_allclose(wg.vmap(wg.grad(loss))(X), np.stack([wg.grad(loss)(r) for r in X]),
                               rtol=1e-13)
    pattern = wg.jacobian_sparsity(F, x).toarray()
    np.testing.assert_array_equal(pattern, np.tril(np.ones((5, 5), bool)))
    np.testing.assert_allclose(wg.sparse_jacobian(F)(x).toarray(), J, rtol=1e-13)
    np.testing.assert_allclose(wg.sparse_hessian(loss)(x).toarray(), wg.hessian(loss)(x),
                               rtol=1e-12, atol=1e-14)
    for fuse in (False, True):
        np.testing.assert_allclose(wg.compile(wg.grad(loss), fuse=fuse)(x), g, rtol=1e-13)
    np.testing.assert_allclose(wg.source.grad(loss)(x), g, rtol=1e-13)
    np.testing.assert_allclose(wg.source.jvp(loss)((x,), (v,))[1], g @ v, rtol=1e-13)
    # plain values: NumPy's accumulate, any axis, reversed
    A = R(3, 4)
    np.testing.assert_array_equal(wnp.cumlogsumexp(A, axis=0), np.logaddexp.accumulate(A, 0))
    np.testing.assert_array_equal(wnp.cumlogsumexp(A, axis=-1, reverse=True),
                                  np.logaddexp.accumulate(A[:, ::-1], 1)[:, ::-1])


def test_double_where_no_nan():
    x = np.array([-1.0, 0.0, 2.0, 4.0])

    def f(x):
        safe = wnp.where(x > 0, x, 1.0)
        return wnp.sum(wnp.where(x > 0, wnp.sqrt(safe), 0.0))
    for mode in ("forward", "reverse"):
        j = wg.jacobian(f, mode=mode)(x)
        assert np.all(np.isfinite(j))
        np.testing.assert_allclose(j, [0.0, 0.0, 0.5 / np.sqrt(2.0), 0.25])
    g = wg.grad(f)(x)
    np.testing.assert_allclose(g, [0.0, 0.0, 0.5 / np.sqrt(2.0), 0.25])
    h = wg.hessian(f)(x)
    assert np.all(np.isfinite(h))


def test_abs_at_zero():
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(wg.grad(lambda x: wnp.sum(wnp.abs(x)))(x), [-1.0, 0.0, 1.0])
    np.testing.assert_array_equal(wg.jacobian(wnp.abs, mode="forward")(x), np.diag([-1., 0, 1]))


# -- unmodified NumPy code ----------------------------------------------------------------------------------------
def test_numpy_functions_dispatch():
    W = R(4, 2)

    def f(x):
        y = np.sin(x)
        z = np.sum(y, axis=0) + np.mean(x, axis=0)
        u = x @ W
        v = np.dot(x, W)
        c = np.concatenate([u, v], axis=1)
        s = np.stack([np.max(x, axis=1), np.prod(x, axis=1)])
        t = np.transpose(np.reshape(x, (4, 3)))
        e = np.einsum("ij,ij->", t, t)
        return np.sum(c ** 2) + np.sum(z) + np.sum(s) + e + np.trace(x[:, :3]) + np.std(x) \
            + np.var(np.cumsum(x, axis=1)) + np.sum(np.where(x > 0, x, 0.0)) \
            + np.sum(np.sort(x, axis=1)[:, -1]) + np.sum(np.pad(x, 1) ** 2) \
            + np.sum(np.tensordot(x, x, axes=([0, 1], [0, 1]))) + np.ptp(x)
    x = R(3, 4)
    wg.check_grad(f, x, order=1)
    assert np.argmax(wg.Dual(np.array([1.0, 3.0, 2.0]))) == 1


def test_numpy_without_rule_names_it():
    t = wg.Tape()
    x = t.var(np.ones(3))
    with pytest.raises(NotImplementedError, match="numpy.nextafter"):
        np.nextafter(x, x)
    with pytest.raises(NotImplementedError, match="numpy.spacing has no wengert rule"):
        wnp.spacing(x)


def test_traced_index_into_a_plain_array_is_a_clear_error():
    # the rule hands a plain array back to NumPy, which used to dispatch the same call to the
    # rule again (a RecursionError); now the error names the function and says why
    v = np.array([1.7, -2.2, 3.9])
    for f, name in [(lambda i: np.tile(v, i), "numpy.tile"),
                    (lambda i: np.delete(v, i), "numpy.delete"),
                    (lambda i: np.insert(v, i, 1.0), "numpy.insert"),
                    (lambda i: np.compress(i, v), "numpy.compress"),
                    (lambda i: np.split(v, i), "numpy.split"),
                    (lambda i: np.take_along_axis(v, i, 0), "numpy.take_along_axis")]:
        with pytest.raises(TypeError, match=rf"^{name}: a traced value .* does not differentiate"):
            wg.grad(lambda i: np.sum(f(i)[0]))(1.0)


def test_passthrough_errors_name_the_function_as_users_call_it():
    from wengert.scipy import linalg as wsl, special as wsp
    for f, name in [(lambda x: wnp.spacing(x), "numpy.spacing"),
                    (lambda x: wsp.mathieu_a(1.0, x), "scipy.special.mathieu_a"),
                    (lambda x: wsl.logm(wnp.diag(x)), "scipy.linalg.logm")]:
        with pytest.raises(NotImplementedError, match=rf"^{name} has no wengert rule"):
            wg.grad(lambda x: wnp.sum(f(x)))(R(3) + 2.0)


def test_scipy_python_functions_on_traced_values_say_what_to_call():
    # SciPy's Python-level functions do not dispatch (no NEP 18): the error names the SciPy
    # function and, when there is one, the wengert function to call instead
    import scipy.integrate
    import scipy.linalg
    x = R(3) + 2.0
    for f, msg in [
            (lambda x: sp.logsumexp(x), r"^scipy\.special\.logsumexp .*Call wengert\.scipy\.special"
             r"\.logsumexp instead"),
            (lambda x: np.sum(sp.polygamma(1, x)), r"^scipy\.special\.polygamma .*Call wengert\."),
            (lambda x: np.sum(scipy.linalg.expm(np.diag(x))),
             r"^scipy\.linalg\.expm .*Call wengert\.scipy\.linalg\.expm"),
            (lambda x: np.sum(scipy.linalg.logm(np.diag(x))),  # behind a SciPy decorator
             r"^scipy\.linalg\.logm .*plain NumPy array.*no rule for it"),
            (lambda x: scipy.integrate.quad(lambda t: t * x[0], 0.0, 1.0)[0],
             r"^scipy\.integrate\.quad .*into a plain number.*Call wengert\.scipy\.integrate"
             r"\.quad instead")]:
        for run in (wg.grad(f), lambda x: wg.jvp(f, (x,), (x,))):
            with pytest.raises(TypeError, match=msg):
                run(x)
    # the user's own conversion inside a SciPy driver is the user's: the general message
    with pytest.raises(TypeError, match="^a traced value was converted"):
        scipy.integrate.quad(lambda t: wg.grad(lambda x: np.sum(np.asarray(x)) * t)(x)[0], 0, 1)


def test_scipy_special_ufuncs_dispatch_in_a_fresh_interpreter():
    # scipy.special's ufuncs on traced values, with only wengert and wengert.numpy imported
    # (the rest of this test session has imported wengert.scipy already)
    code = textwrap.dedent("""
        import numpy as np, scipy.special as sp, sys, wengert as wg
        assert "wengert.scipy" not in sys.modules
        x = np.array([0.5, 1.5, 2.5])
        g = wg.grad(lambda x: np.sum(sp.gammaln(x) * sp.expit(x)))(x)
        s = sp.expit(x)
        np.testing.assert_allclose(g, sp.digamma(x) * s + sp.gammaln(x) * s * (1 - s))
        try:
            wg.grad(lambda x: sp.mathieu_a(1.0, x))(1.0)
        except NotImplementedError as e:
            assert "scipy.special.mathieu_a has no wengert rule" in str(e), e
        else:
            raise AssertionError("no error")
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.parametrize("f", [
    lambda x: np.add.reduce(x), lambda x: np.multiply.reduce(x, axis=1),
    lambda x: np.maximum.reduce(x, axis=None), lambda x: np.minimum.reduce(x, keepdims=True),
    lambda x: np.add.accumulate(x, axis=1), lambda x: np.multiply.accumulate(x),
    lambda x: np.add.reduce(x, axis=1, initial=1.0, where=np.array([True, False, True, True])),
    lambda x: np.maximum.reduce(x, axis=None, initial=-5.0)])
def test_ufunc_methods_with_rules(f):
    x = R(3, 4)
    t = wg.Tape()
    np.testing.assert_array_equal(f(t.var(x)).value, f(x))
    wg.check_grad(f, x, order=2)


def test_ufunc_methods_and_out_without_rules_say_so():
    x = R(3)
    for f, msg in [(lambda x: np.multiply.outer(x, x), "numpy.multiply.outer"),
                   (lambda x: np.add.reduce(x, out=np.empty(())), "use wnp.sum"),
                   (lambda x: np.add.accumulate(x, out=np.empty(3)), "use wnp.cumsum"),
                   (lambda x: np.sin(x, out=np.empty(3)), "numpy.sin with out="),
                   (lambda x: sp.erf(x, out=np.empty(3)), "scipy.special.erf with out=")]:
        with pytest.raises(NotImplementedError, match=msg):
            wg.grad(lambda x: wnp.sum(f(x)))(x)


def test_methods_exist_in_wnp():
    from wengert._dispatch import _METHODS
    for name in _METHODS:
        assert callable(getattr(wnp, name)), name


def test_tracer_methods():
    x = R(3, 4)
    f = lambda x: (x.sum(axis=0) + x.mean(0) + x.max(0) + x.min(0) + x.prod(0) + x.std(0)  # noqa
                   + x.var(0) + wnp.ptp(x, 0) + x.cumsum(0)[-1] + x.cumprod(0)[-1] + x.T.sum(1)
                   + x.ravel()[:4] + x.flatten()[4:8] + x.take([0, 1, 2, 3], axis=1)[0]
                   + x.repeat(2, axis=0)[::2].sum(0) + x.swapaxes(0, 1).sum(1)
                   + x.diagonal().sum() + x.trace() + x.copy()[0] + x.astype(float)[1]
                   + x.reshape(4, 3).T[0] + x.dot(np.ones(4)).sum() + x.clip(-0.5, 0.5)[0])
    wg.check_grad(f, x, order=1)
    assert x.argmax() == wg.Dual(x).argmax()


# -- plain values: exactly NumPy ------------------------------------------------------------------------------
PLAIN = [
    ("sum", (A34,), {"axis": 0}), ("prod", (A34,), {}), ("mean", (A34,), {"axis": 1}),
    ("var", (A34,), {"ddof": 1}), ("std", (A34,), {}), ("max", (A34,), {"axis": 1}),
    ("amin", (A34,), {}), ("ptp", (A34,), {}), ("average", (A34,), {"weights": P(3, 4)}),
    ("cumsum", (A34,), {}), ("cumprod", (A34,), {"axis": 1}), ("concatenate", ([A34, A34],), {}),
    ("stack", ([A34, A34],), {"axis": 2}), ("pad", (A34, 1), {}), ("diag", (M33,), {}),
    ("tril", (M33,), {}), ("trace", (M33,), {}), ("take", (A34, [0, 2]), {"axis": 1}),
    ("sort", (A34,), {}), ("einsum", ("ij,jk", A34, A34.T), {}), ("matmul", (A34, A34.T), {}),
    ("dot", (A34, A34.T), {}), ("kron", (M33, M33), {}), ("cross", (M33, M33), {}),
    ("tensordot", (A34, A34), {"axes": 2}), ("repeat", (A34, 2), {}), ("tile", (A34, 2), {}),
    ("roll", (A34, 1), {}), ("where", (MASK, A34, 0.0), {}), ("array", ([1, 2, 3],), {}),
    ("asarray", ([1.0, 2.0],), {"dtype": np.float32}), ("zeros_like", (A34,), {}),
    ("sum", (np.arange(5, dtype=np.int32),), {}), ("mean", (np.arange(5),), {}),
    ("argmax", (A34,), {"axis": 0}), ("nonzero", (MASK,), {}), ("where", (MASK,), {}),
    ("quantile", (A34, [0.1, 0.5]), {"axis": 1}), ("median", (A34,), {}), ("cov", (A34,), {}),
    ("corrcoef", (A34,), {}), ("convolve", (A34[0], A34[1]), {}), ("diff", (A34,), {}),
    ("linspace", (0.0, 1.0, 5), {}), ("trapezoid", (A34,), {}), ("nanmax", (A34,), {}),
    ("gradient", (A34, 0.5, np.cumsum(P(4))), {"edge_order": 2}),
]


@pytest.mark.parametrize("name,args,kw", PLAIN, ids=[p[0] for p in PLAIN])
def test_plain_values_match_numpy(name, args, kw):
    got = getattr(wnp, name)(*args, **kw)
    want = getattr(np, name)(*args, **kw)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        return
    assert type(got) is type(want)
    assert np.shape(got) == np.shape(want)
    assert np.result_type(got) == np.result_type(want)
    np.testing.assert_array_equal(got, want)


_SCALAR_ARGS = [(1.5,), (0.5,), (-0.5,), (3,), (True,), (np.float64(0.5),), (np.float32(0.5),),
                (np.array(0.5),), (np.array(0.5, np.float32),), (1.5, 2.0), (0.5, 0.25), (2, 3),
                (1.5, 2), (np.float64(1.5), 2.0), (np.float32(1.5), np.float32(2.0)),
                (np.float32(1.5), 2.0), (np.array(1.5), np.array(2.0)), (np.array(1.5), 2.0),
                (0.5, 1.5, 2.0), (np.array(0.5), 1.5, 2.0)]


def _kind(v):
    if isinstance(v, (tuple, list)):
        return type(v), tuple(_kind(e) for e in v)
    return type(v), getattr(v, "dtype", None), np.shape(v)


def test_plain_scalars_get_numpys_types():
    """Every wnp function that has a rule, on Python numbers, NumPy scalars and 0-d arrays:
    the type, dtype and shape NumPy gives (wnp.abs(1.5) is an np.float64, issue 17). Where
    NumPy raises for the arguments, nothing is compared."""
    checked = set()
    wrong = []
    for name in sorted(dir(np)):
        fn_np = getattr(np, name)
        if name.startswith("_") or not callable(fn_np) or isinstance(fn_np, type):
            continue
        fn = getattr(wnp, name, None)
        if fn is None or getattr(fn, "_passthrough", False):
            continue
        for args in _SCALAR_ARGS:
            if isinstance(fn_np, np.ufunc) and len(args) > fn_np.nin:
                continue  # the extra ones would be outputs
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    want = fn_np(*args)
                except Exception:  # noqa: BLE001 -- NumPy's refusal: nothing to compare
                    continue
                got = fn(*args)
            checked.add(name)
            if _kind(got) != _kind(want):
                wrong.append((name, args, _kind(got), _kind(want)))
    assert not wrong, wrong
    assert {"abs", "power", "add", "negative", "sin", "sum", "astype"} <= checked
    assert len(checked) > 200


# -- x[idx] = v ----------------------------------------------------------------------------------------------------
def test_setitem_gradients():
    x = np.array([1.0, 2.0, 3.0, 4.0])

    def f(x):
        x = x * 1.0
        x[1] = x[0] * x[2]
        x[2:] = 0.0
        return wnp.sum(x ** 2)
    # f = x0^2 + (x0 x2)^2
    g = wg.grad(f)(x)
    np.testing.assert_allclose(g, [2 * 1 + 2 * 1 * 9, 0, 2 * 3 * 1, 0])
    np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x), g)


def test_setitem_on_input_differentiates_the_original():
    def f(x):
        x[0] = 5.0
        return wnp.sum(x * x)
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(wg.grad(f)(x), [0.0, 4.0, 6.0])
    np.testing.assert_allclose(wg.jacobian(f, mode="reverse")(x), [0.0, 4.0, 6.0])
    np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x), [0.0, 4.0, 6.0])
    # mode="auto" runs f once on plain values to learn the output's size: on a copy
    np.testing.assert_allclose(wg.jacobian(f)(x), [0.0, 4.0, 6.0])
    np.testing.assert_allclose(wg.jacobian(lambda x, y: f(y) * x, argnums=(0, 1))(2.0, x)[1],
                               [0.0, 8.0, 12.0])
    assert x[0] == 1.0  # the caller's array is untouched


def test_setitem_in_loop_and_float32():
    def f(x):
        y = wnp.zeros(4, dtype=x.dtype, like=x)
        for i in range(4):
            y[i] = x[i] * x[(i + 1) % 4]
        return y
    x = R(4).astype(np.float32)
    out = f(x)
    assert out.dtype == np.float32
    wg.check_grad(f, x, order=2)
    jf, jr = wg.jacobian(f, mode="forward")(x), wg.jacobian(f, mode="reverse")(x)
    assert jf.dtype == jr.dtype == np.float32
    np.testing.assert_allclose(jf, jr, rtol=1e-6)


def test_setitem_traced_value_into_traced_constant():
    def f(x):
        a = wnp.zeros(3, like=x)
        a[1] = x[0] ** 2
        return a
    np.testing.assert_allclose(wg.jacobian(f)(np.array([3.0, 1.0])), [[0, 0], [6, 0], [0, 0]])


_LIKE = {"zeros_like": (lambda x: np.zeros_like(x), np.zeros),
         "ones_like": (lambda x: np.ones_like(x), np.ones),
         "empty_like": (lambda x: np.empty_like(x), np.zeros),  # traced: zeros, never garbage
         "full_like": (lambda x: np.full_like(x, 2.5), lambda s: np.full(s, 2.5)),
         "copy": (lambda x: np.copy(x), None),
         "wnp_zeros_like": (lambda x: wnp.zeros_like(x), np.zeros)}


@pytest.mark.parametrize("name", _LIKE)
def test_like_buffers_of_traced_arrays_take_writes(name):
    """np.zeros_like(x) (and ones_like, empty_like, full_like, copy) of a traced x is handed
    to wengert by NumPy: a traced array comes back, which takes a[i] = v, and the derivative
    is exact in every engine (issue 17)."""
    make, start = _LIKE[name]

    def f(x):
        a = make(x)
        a[0] = x[0] ** 2
        a[1] += x[2] * x[1]
        return wnp.sum(a * x)

    x = np.array([0.7, -1.3, 2.1])
    base = x.copy() if start is None else start(3)
    a = base.copy()
    a[0] = x[0] ** 2
    a[1] += x[2] * x[1]
    want_value = np.sum(a * x)
    # d/dx of sum(a*x): a itself, plus what a's entries contribute through x
    want = a.copy()
    want[0] += 2 * x[0] * x[0]
    want[1] += x[2] * x[1]
    want[2] += x[1] * x[1]
    if start is None:  # copy: a starts as x itself
        want += x * np.array([0.0, 1.0, 1.0])
    for got in (wg.grad(f)(x), wg.jacobian(f, mode="forward")(x), wg.compile(wg.grad(f))(x),
                wg.grad(wg.compile(f))(x), wg.trace(f, x).grad()(x)):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    np.testing.assert_allclose(wg.compile(f)(x), want_value, rtol=1e-14)
    if name != "empty_like":  # plain: NumPy's empty, whose values are arbitrary
        np.testing.assert_allclose(f(x), want_value, rtol=1e-14)
        wg.check_grad(f, x, order=2)
    for engine in (wg.Tape().var(x), wg.Dual(x, np.ones(3))):
        b = make(engine)
        assert isinstance(b, wg.core.Tracer) and b.shape == x.shape and b.dtype == x.dtype
    # dtype=, shape= as NumPy's
    b = np.zeros_like(wg.Tape().var(x), dtype=np.float32, shape=(2, 2))
    assert b.shape == (2, 2) and b.dtype == np.float32


def test_stale_view_raises():
    def f(x):
        x = x * 1.0
        y = x[0:2]
        x[0] = 5.0
        return wnp.sum(y)
    with pytest.raises(ValueError, match="view"):
        wg.grad(f)(R(3))
    with pytest.raises(ValueError, match="view"):
        wg.jacobian(f, mode="forward")(R(3))

    def g(x):
        x = x * 1.0
        y = x[1]
        x[...] = 0.0
        return wnp.sum(y)
    with pytest.raises(ValueError, match="copy"):
        wg.grad(g)(R(3, 2))

    def h(x):  # a copy is fine
        x = x * 1.0
        y = wnp.copy(x[0:2])
        x.T  # a view that is never used again: no error
        x[0] = 5.0
        return wnp.sum(y) + wnp.sum(x)
    np.testing.assert_allclose(wg.grad(h)(R(3)), [1.0, 2.0, 1.0])


def test_in_place_updates_like_numpy():
    def f(x, xp=wnp):
        x = x * 1.0
        x[1:] *= x[:-1]     # augmented assignment on a slice: Python writes it back
        x[0:2] += x[2]
        z = x
        z -= 1.0            # an alias of x
        x.sort()
        return x

    def f_np(x):
        x = x * 1.0
        x[1:] *= x[:-1]
        x[0:2] += x[2]
        z = x
        z -= 1.0
        x.sort()
        return x
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(f(x), f_np(x))
    wg.check_grad(f, x, order=2)
    np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x),
                               wg.jacobian(f, mode="reverse")(x))
    np.testing.assert_allclose(wg.jacobian(f)(x), _fd_jacobian(f_np, [x]), atol=1e-6)


@pytest.mark.parametrize("write", [
    lambda x, y: y.__setitem__(0, 5.0),              # y[0] = 5.0
    lambda x, y: y.__iadd__(x[2]),                    # y += x[2], then x is used
    lambda x, y: x.T.__setitem__(2, 1.0),             # x.T[2] = 1.0
    lambda x, y: x.reshape(3, 1).__setitem__((1, 0), 2.0),
])
def test_writing_through_a_view_raises(write):
    """API.md: writing through a view taken earlier raises, never a wrong derivative."""
    def f(x):
        x = x * 1.0
        y = x[0:2]
        write(x, y)
        return wnp.sum(x)
    for transform in (wg.grad, lambda f: wg.jacobian(f, mode="forward")):
        with pytest.raises(ValueError, match="writing through a view"):
            transform(f)(np.array([0.5, -1.0, 2.0]))


def test_read_only_view_and_scalar_augmented_assignment():
    def f(x):
        d = wnp.diagonal(x)
        d[0] = 1.0
        return d
    with pytest.raises(ValueError, match="read-only"):
        wg.grad(lambda x: wnp.sum(f(x)))(R(2, 2))

    def g(x):  # a traced scalar behaves as a Python float: += gives a new value
        s = x[0]
        t = s
        t += 1.0
        return s * t
    assert wg.grad(g)(np.array([2.0, 0.0]))[0] == 5.0


def test_traced_into_plain_numpy_array_explains():
    def f(x):
        a = np.zeros(3)
        a[0] = x[0]
        return a
    # NumPy sees a sequence (tracers index like arrays) and raises its own ValueError;
    # where NumPy converts instead, the message says what to do
    with pytest.raises((TypeError, ValueError)):
        wg.grad(lambda x: f(x)[0])(R(3))
    with pytest.raises(TypeError, match="wnp.stack"):
        wg.grad(lambda x: np.asarray(x)[0])(R(3))


def test_traced_index_rejected():
    t = wg.Tape()
    x = t.var(np.arange(3.0))
    with pytest.raises(TypeError, match="index"):
        x[x[0]]
    with pytest.raises(TypeError, match="index"):
        x[[0, x[1]]]
    with pytest.raises(TypeError, match="index"):
        x[x[0]] = 1.0


def test_fancy_repeated_indices_accumulate():
    x = np.array([1.0, 2.0, 3.0])
    g = wg.grad(lambda x: wnp.sum(x[[0, 0, 2, 0]] * np.array([1.0, 2.0, 3.0, 4.0])))(x)
    np.testing.assert_allclose(g, [7.0, 0.0, 3.0])


def test_jacobian_hessian_hvp_on_arrays():
    A = R(4, 4)

    def f(x):
        return wnp.sum(wnp.tanh(A @ x) ** 2) + wnp.prod(x[:2])
    x = R(4)
    H = wg.hessian(f)(x)
    v = R(4)
    np.testing.assert_allclose(wg.hvp(f, x, v), H @ v, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(H, H.T, rtol=1e-10, atol=1e-12)


def test_diffusion_residual_jacobian():
    n = 50

    def r(x):
        xp = wnp.pad(x, 1)
        return xp[:-2] - 2.0 * xp[1:-1] + xp[2:] + x ** 2
    x = R(n)
    J = np.diag(-2.0 + 2 * x) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    np.testing.assert_allclose(wg.jacobian(r, mode="forward")(x), J)
    np.testing.assert_allclose(wg.jacobian(r, mode="reverse")(x), J)


def test_value_dependent_choices_recompute_in_compiled_graphs():
    """sort permutations, max ties, masks, argmax: recorded (or guarded), never baked in."""
    def clamp(x):
        y = x * 1.0
        y[y < 0] = 0.0
        return wnp.sum(y)
    fns = [lambda x: wnp.sum(wnp.sort(x)[:2] * np.array([1.0, 2.0])),
           lambda x: wnp.max(x) + wnp.logsumexp(3.0 * x),
           lambda x: x[wnp.argmax(x)] * wnp.sum(x[x > 0]),
           lambda x: wnp.sum(wnp.where(x > 0, x, 0.0)) + wnp.sum(x[wnp.nonzero(x > 0)]),
           clamp]
    x1 = np.array([0.3, -1.2, 2.0, 0.7])
    x2 = np.array([3.0, 1.0, -2.0, 0.1])
    for f in fns:
        c, cg = wg.compile(f), wg.compile(wg.grad(f))
        c(x1), cg(x1)
        np.testing.assert_allclose(c(x2), f(x2))
        np.testing.assert_allclose(cg(x2), wg.grad(f)(x2))


@pytest.mark.parametrize("name,f,args,order", TABLE, ids=IDS)
def test_graph_engine_agrees(name, f, args, order):
    """The same rules traced into a graph and compiled give the eager values and gradients."""
    u = np.random.default_rng(2).standard_normal(np.shape(f(*args)))

    def scalar(*xs):
        return wnp.sum(f(*xs) * u)
    argnums = tuple(i for i, a in enumerate(args) if not isinstance(a, float))
    g_eager = wg.grad(scalar, argnums)(*args)
    g_comp = wg.compile(wg.grad(scalar, argnums))
    for _ in range(2):  # the second call runs the cached generated code
        for a, b in zip(g_comp(*args), g_eager):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(wg.compile(f)(*args), f(*args), rtol=1e-12)


def test_broadcast_view_matches_numpy():
    """The engines' fast broadcast is np.broadcast_to, values, shape and read-only flag."""
    from wengert.arrays import broadcast_view
    cases = [(np.array(2.0), (3, 4)), (np.arange(3.0), (2, 3)), (np.ones((3, 1)), (2, 3, 5)),
             (np.ones((1, 1), np.float32), (1, 4)), (np.arange(6.0).reshape(2, 3).T, (4, 3, 2)),
             (np.array([1 + 2j]), (3,)), (np.arange(4), (2, 4)), (np.array([True]), (3,)),
             (np.zeros((0, 1)), (2, 0, 3)), (np.array(["a"], dtype=object), (2,))]
    for x, shape in cases:
        got, want = broadcast_view(x, shape), np.broadcast_to(x, shape)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable
    with pytest.raises(ValueError):
        broadcast_view(np.ones(3), (2, 4))


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc",
                    reason="glibc's malloc thresholds only")
def test_import_settles_glibc_allocator():
    """After `import wengert`, arrays of a few hundred kB reuse heap pages.

    Before, every such temporary was a fresh mmap: 281 page faults per call of this
    snippet, and a 200x200 Jacobian 4x slower in a fresh interpreter. Page faults are
    counted, not timed.
    """
    import os
    import subprocess
    import sys
    code = (
        "import resource, numpy as np, wengert\n"
        "x = np.random.rand(200)\n"
        "def f():\n"
        "    a = x[:, None] * x; b = a + 1.0; c = b * a; return (c - b).sum()\n"
        "f()\n"
        "r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
        "for _ in range(50): f()\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) / 50)\n")
    # a fresh interpreter as a user starts one: dask.distributed's LocalCluster (another test)
    # sets MALLOC_TRIM_THRESHOLD_ in this process's environment, which glibc would obey
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert float(out.stdout) < 20


def test_numpy2_names_degrees_radians_fmod_real_if_close():
    # NumPy 2's array-API names, the ufuncs degrees/radians/fmod, real_if_close: as NumPy
    # computes them, differentiable through unmodified NumPy calls and through wnp
    x = R(2, 3) * 0.5
    for f in [lambda x: np.degrees(x) + wnp.radians(x), lambda x: wnp.acos(x) * wnp.asin(x),
              lambda x: wnp.atan2(x, 2.0) + wnp.atan(x) + wnp.asinh(x) + wnp.atanh(x),
              lambda x: wnp.acosh(x + 2.0) + wnp.concat([x, x], axis=1)[:, :3],
              lambda x: wnp.matrix_transpose(x).T * np.matrix_transpose(x).T,
              lambda x: np.fmod(x + 2.5, 1.0) * np.fmod(-3.7, x + 1.6),
              lambda x: np.real_if_close(np.fft.ifft(np.fft.fft(x, axis=1), axis=1))]:
        t = wg.Tape()
        np.testing.assert_array_equal(f(t.var(x)).value, f(x))
        wg.check_grad(f, x, order=2)
    # the derivative of fmod in y is -trunc(x / y): fmod(7.5, y) = 7.5 - 3 y near y = 2.2
    assert wg.grad(lambda y: wnp.fmod(7.5, y))(2.2) == -3.0


def test_gradient_is_numpys_to_the_bit_and_exact_on_quadratics():
    # every spacing form NumPy takes: the value is NumPy's to the bit (float32 kept), through
    # wnp and through an unmodified np.gradient on a traced array
    f = R(5, 6).astype(np.float32)
    x = np.cumsum(P(6))
    for args, kw in [((), {}), ((2.0,), {}), ((0.5, x), {}), ((np.arange(5) * 0.7, x),
                     {"edge_order": 2}), ((x,), {"axis": 1}), ((), {"axis": (1, 0)}),
                     ((np.arange(6.0),), {"axis": -1}), ((np.arange(6),), {"axis": -1})]:
        want = np.gradient(f, *args, **kw)
        got = wg.Tape().var(f)
        got = np.gradient(got, *args, **kw)
        for g, w in zip(got if isinstance(got, tuple) else [got],
                        want if isinstance(want, tuple) else [want]):
            assert g.value.dtype == w.dtype
            np.testing.assert_array_equal(g.value, w)
    # second-order differences are exact on a quadratic sampled at uneven points:
    # gradient(c x**2, x) = 2 c x, so d/dc of its sum is sum(2x); as a function of the
    # points, gradient(p**2, p) = 2p, whose sum has derivative 2 in every point
    pts = np.cumsum(P(6))
    dq = wg.grad(lambda c: wnp.sum(wnp.gradient(c * pts ** 2, pts, edge_order=2)))(1.0)
    np.testing.assert_allclose(dq, np.sum(2 * pts), rtol=1e-12)
    gx = wg.grad(lambda p: wnp.sum(wnp.gradient(p ** 2, p, edge_order=2)))(pts)
    np.testing.assert_allclose(gx, 2.0 * np.ones(6), rtol=1e-9)
    with pytest.raises(ValueError, match="at least"):
        wg.grad(lambda v: wnp.sum(wnp.gradient(v, edge_order=2)))(np.ones(2))
    with pytest.raises(ValueError, match="edge_order"):
        wg.grad(lambda v: wnp.sum(wnp.gradient(v, edge_order=3)))(np.ones(4))
    with pytest.raises(TypeError, match="invalid number"):
        wg.grad(lambda v: wnp.sum(wnp.gradient(v, 1.0, 2.0)))(np.ones(4))


def test_quantile_percentile_median_are_numpys_to_the_bit():
    # NumPy interpolates from the nearer neighbour (b - (b - a)(1 - t) when t >= 1/2), keeps
    # float32 only for a Python-number q, and its median is the mean of the middle values,
    # not the 0.5-quantile: wengert's values are NumPy's, bit for bit, and a NaN gives NaN
    r = np.random.default_rng(3)
    for dt in (np.float64, np.float32):
        for shape, axis in [((7,), None), ((4, 5), 1), ((3, 4, 5), (0, 2)), ((2, 6), (1,))]:
            a = (r.standard_normal(shape) * 10).astype(dt)
            t = wg.Tape().var(a)
            for kd in (False, True):
                for q in [0.3, 0.75, 1, [0.1, 0.5, 0.99], np.array([[0.2], [0.7]])]:
                    for got, want in [
                            (wnp.quantile(t, q, axis=axis, keepdims=kd),
                             np.quantile(a, q, axis=axis, keepdims=kd)),
                            (np.percentile(t, np.multiply(q, 100), axis=axis, keepdims=kd),
                             np.percentile(a, np.multiply(q, 100), axis=axis, keepdims=kd))]:
                        assert got.value.dtype == np.result_type(want)
                        assert got.shape == np.shape(want)
                        np.testing.assert_array_equal(got.value, want)
                got, want = np.median(t, axis=axis, keepdims=kd), np.median(a, axis=axis,
                                                                               keepdims=kd)
                assert got.value.dtype == want.dtype and got.shape == want.shape
                np.testing.assert_array_equal(got.value, want)
    a = R(3, 5)
    a[1, 2] = np.nan
    t = wg.Tape().var(a)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(wnp.quantile(t, 0.4, axis=1).value,
                                      np.quantile(a, 0.4, axis=1))
        np.testing.assert_array_equal(wnp.median(t, axis=1).value, np.median(a, axis=1))
    # in q: the slope between the neighbouring order statistics, times n - 1
    a = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6])
    assert wg.grad(lambda q: wnp.quantile(a, q))(0.3) == (2.6 - 1.5) * 5
    assert wg.grad(lambda q: wnp.percentile(a, q))(30.0) == (2.6 - 1.5) * 5 / 100
    g = wg.compile(wg.grad(lambda q: wnp.quantile(a, q)))  # the indices are guarded
    assert (g(0.3), g(0.7)) == ((2.6 - 1.5) * 5, (4.0 - 3.0) * 5)
    with pytest.raises(ValueError, match=r"range \[0, 1\]"):
        wg.grad(lambda x: wnp.quantile(x, 1.5))(a)
    with pytest.raises(ValueError, match=r"range \[0, 100\]"):
        wg.grad(lambda x: wnp.percentile(x, -3))(a)


def test_nanquantile_nanmedian_are_numpys_to_the_bit():
    # each slice's own count of non-NaN values is its n; a float32 q keeps float32 (so does
    # quantile's, which gave float64 before); NaNs get derivative 0
    r = np.random.default_rng(4)
    for dt in (np.float64, np.float32):
        for shape, axis in [((9,), None), ((4, 5), 1), ((4, 5), -1), ((3, 4, 5), (0, 2)),
                            ((5, 4), 0)]:
            a = (r.standard_normal(shape) * 10).astype(dt)
            a[r.random(shape) < 0.35] = np.nan
            t = wg.Tape().var(a)
            qs = [0.3, 0.75, 1, 0, [0.1, 0.5, 0.99], np.float32(0.7),
                  np.array([0.3, 0.6], np.float32)]
            if not isinstance(axis, tuple):  # NumPy misplaces the axes of a 2-D q there
                qs.append(np.array([[0.2], [0.7]]))
            for kd in (False, True):
                pairs = [(np.nanmedian(t, axis=axis, keepdims=kd),
                          np.nanmedian(a, axis=axis, keepdims=kd))]
                for q in qs:
                    pairs += [(wnp.nanquantile(t, q, axis=axis, keepdims=kd),
                               np.nanquantile(a, q, axis=axis, keepdims=kd)),
                              (np.nanpercentile(t, np.multiply(q, 100), axis=axis, keepdims=kd),
                               np.nanpercentile(a, np.multiply(q, 100), axis=axis,
                                                keepdims=kd)),
                              (wnp.quantile(t, q, axis=axis, keepdims=kd),
                               np.quantile(a, q, axis=axis, keepdims=kd))]
                for got, want in pairs:
                    assert got.value.dtype == np.result_type(want)
                    assert got.shape == np.shape(want)
                    np.testing.assert_array_equal(got.value, want)
    # NumPy's slice-by-slice route (600 or more values): an odd count gives the middle value
    a = np.full((2, 601), np.nan)
    a[:, :301] = r.standard_normal((2, 301))
    np.testing.assert_array_equal(wnp.nanmedian(wg.Tape().var(a), axis=1).value,
                                  np.nanmedian(a, axis=1))
    # an all-NaN slice: NaN with NumPy's warning, and no derivative anywhere in it
    a = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])
    for fn, row in [(lambda x: wnp.nanmedian(x, axis=1), [0.5, 0.0, 0.5]),
                    (lambda x: wnp.nanquantile(x, 0.3, axis=1), [0.7, 0.0, 0.3])]:
        with pytest.warns(RuntimeWarning, match="All-NaN slice"):
            v = fn(wg.Tape().var(a)).value
        assert np.isnan(v[1]) and not np.isnan(v[0])
        with pytest.warns(RuntimeWarning, match="All-NaN slice"):
            g = wg.grad(lambda x: wnp.nansum(fn(x)))(a)
        np.testing.assert_allclose(g, [row, [0.0, 0.0, 0.0]], rtol=0, atol=1e-15)
    # closed forms: the median of the non-NaN values; in q, the slope times count - 1
    a = np.array([3.0, np.nan, 1.0, 4.0, np.nan, 1.5, 9.0, 2.6])
    np.testing.assert_array_equal(wg.grad(wnp.nanmedian)(a), [0.5, 0, 0, 0, 0, 0, 0, 0.5])
    assert wg.grad(lambda q: wnp.nanquantile(a, q))(0.3) == (2.6 - 1.5) * 5
    # under compile the counts are guarded: another NaN pattern re-traces
    g = wg.compile(wg.grad(wnp.nanmedian))
    np.testing.assert_array_equal(g(a), [0.5, 0, 0, 0, 0, 0, 0, 0.5])
    b = np.array([3.0, 0.5, 1.0, 4.0, np.nan, 1.5, 9.0, 2.6])
    np.testing.assert_array_equal(g(b), [0, 0, 0, 0, 0, 0, 0, 1.0])


def test_insert_delete_resize_unwrap_vander_polyfit_are_numpys_to_the_bit():
    r = np.random.default_rng(6)
    val = np.asarray  # a plain result (vander(x, 1): ones) stays plain, as wengert's constants

    def same(got, want):
        got = got.value if isinstance(got, wg.Var) else val(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    for dt in (np.float64, np.float32):
        a = r.standard_normal((3, 4)).astype(dt)
        t = wg.Tape().var(a)
        for f in [lambda x: np.insert(x, 1, 5.0), lambda x: np.insert(x, 2, [1, 2, 3], axis=1),
                  lambda x: np.insert(x, [0, 2], [[9.0], [8.0], [7.0]], axis=1),
                  lambda x: np.insert(x, slice(0, 2), 3.5, axis=0),
                  lambda x: np.delete(x, 1, axis=0), lambda x: np.delete(x, 5),
                  lambda x: np.delete(x, [True, False, True, False], axis=1),
                  lambda x: np.resize(x, (5, 3)), lambda x: np.resize(x, 20),
                  lambda x: np.unwrap(np.cumsum(x * 3, axis=1)),
                  lambda x: np.unwrap(x * 10, axis=0, discont=4.0, period=5.0)]:
            same(f(t), f(a))
        x = np.sort(r.uniform(-1, 2, 7)).astype(dt)
        for n, inc in [(None, False), (3, True), (1, False), (0, True)]:
            same(np.vander(wg.Tape().var(x), n, inc), np.vander(x, n, inc))
        y, w = r.standard_normal((7, 2)), r.uniform(0.5, 1.5, 7)
        for deg in (1, 3):
            same(np.polyfit(wg.Tape().var(x), y, deg, w=w), np.polyfit(x, y, deg, w=w))
            same(np.polyfit(x, wg.Tape().var(y[:, 0]), deg), np.polyfit(x, y[:, 0], deg))
    # traced values go in with arr's dtype, as NumPy casts them
    v = np.array([1.7, -2.2, 3.9])
    same(np.insert(np.arange(6).reshape(2, 3), 1, wg.Tape().var(v), axis=0),
         np.insert(np.arange(6).reshape(2, 3), 1, v, axis=0))
    # closed forms: the slope of a least-squares line in y, and unwrap's identity derivative
    x, y = np.array([0.0, 1.0, 3.0, 4.5]), np.array([1.0, -2.0, 0.5, 2.0])
    xc = x - x.mean()
    np.testing.assert_allclose(wg.jacobian(lambda y: np.polyfit(x, y, 1))(y)[0], xc / (xc @ xc),
                               rtol=1e-12)
    p = np.array([0.0, 3.0, 6.5, 1.0])
    np.testing.assert_array_equal(wg.jacobian(np.unwrap)(p), np.eye(4))
    with pytest.raises(TypeError, match="positions"):
        wg.grad(lambda i: np.sum(np.delete(v, i)))(1.0)


def test_two_result_ufuncs_are_numpys_to_the_bit():
    # modf, frexp and divmod on traced values: NumPy's values and signs of zeros, infinities
    # included; frexp's mantissa has the exact derivative 2^-e; the integers stay plain
    r = np.random.default_rng(7)
    for dt in (np.float64, np.float32):
        x = (r.standard_normal(40) * 10).astype(dt)
        x[:4] = [-2.0, -0.0, np.inf, -np.inf]
        y = r.uniform(0.3, 3.0, 40).astype(dt)
        t = wg.Tape().var(x)
        for f in (np.modf, np.frexp, lambda x: np.divmod(x, y), lambda x: np.divmod(y, x)):
            with np.errstate(all="ignore"):
                got, want = f(t), f(x)
            for g, w in zip(got, want):
                g = g.value if isinstance(g, wg.Var) else g
                assert g.dtype == w.dtype
                np.testing.assert_array_equal(g, w)
                np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    assert isinstance(np.frexp(wg.Tape().var(np.ones(2)))[1], np.ndarray)
    for got, want in [(wnp.divmod(7, 2), np.divmod(7, 2)), (wnp.frexp(2.5), np.frexp(2.5)),
                      (wnp.modf(-2.5), np.modf(-2.5))]:  # plain values: NumPy's, types too
        assert [type(g) for g in got] == [type(w) for w in want] and got == want
    assert wg.grad(lambda x: np.frexp(x)[0])(12.0) == 2.0 ** -4
    assert wg.derivative(lambda x: np.modf(x)[0])(-2.5) == 1.0
    g = wg.compile(wg.grad(lambda x: np.sum(np.frexp(x)[0])))  # e is recomputed, not baked in
    np.testing.assert_array_equal(g(np.array([12.0, 0.3])), [2.0 ** -4, 2.0])
    np.testing.assert_array_equal(g(np.array([100.0, 3.0])), [2.0 ** -7, 2.0 ** -2])


def test_spaces_blocks_choices_and_polynomials_are_numpys_to_the_bit():
    # linspace gave float64 for float32 ends (NumPy: float32); now its operations are NumPy's
    r = np.random.default_rng(8)
    val = np.asarray

    def same(got, want):
        got = got.value if isinstance(got, wg.Var) else val(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    for dt in (np.float64, np.float32):
        for _ in range(10):
            a, b = (r.standard_normal(2) * 10).astype(dt)
            for num, ep in [(0, True), (1, True), (2, False), (7, True), (7, False)]:
                for fn, kw in [(np.linspace, {}), (np.logspace, {"base": 2.0})]:
                    for x, y in [(wg.Tape().var(a), b), (float(a), wg.Tape().var(b))]:
                        with np.errstate(all="ignore"):
                            same(fn(x, y, num, ep, **kw), fn(_val(x), _val(y), num, ep, **kw))
                g0, g1 = abs(a) + 0.5, -abs(b) - 0.5
                same(np.geomspace(wg.Tape().var(g0), g0 * 9, num, ep),
                     np.geomspace(g0, g0 * 9, num, ep))
                same(np.geomspace(g1, wg.Tape().var(g1 * 3), num, ep),
                     np.geomspace(g1, g1 * 3, num, ep))
        A, B = r.standard_normal(3).astype(dt), r.standard_normal((2, 1)).astype(dt)
        for axis in (0, 1, -1):
            same(np.linspace(wg.Tape().var(A), B, 4, axis=axis), np.linspace(A, B, 4, axis=axis))
        same(np.linspace(wg.Tape().var(A), 3, 5, dtype=int), np.linspace(A, 3, 5, dtype=int))
        same(np.logspace(wg.Tape().var(A), 3, 5, base=[2.0, 3.0, 4.0], axis=1),
             np.logspace(A, 3, 5, base=[2.0, 3.0, 4.0], axis=1))
        P, Q = r.standard_normal(4).astype(dt), r.standard_normal(2).astype(dt)
        for f in [np.polyadd, np.polysub, lambda p, q: np.polyder(p, 2),
                  lambda p, q: np.polyint(p, 2, k=[1.5, -2.0])]:
            same(f(wg.Tape().var(P), Q), f(P, Q))
            same(f(Q, wg.Tape().var(P)), f(Q, P))
        same(np.polymul(wg.Tape().var(P), Q), np.polymul(P, Q))
        same(np.polymul(Q, wg.Tape().var(P)), np.polymul(Q, P))
    A, B = r.standard_normal((2, 2)), r.standard_normal((2, 3))
    for f in [lambda a: np.block([[a, B], [B[:, :2], a[:, :1], a]]), lambda a: np.block([a, a]),
              lambda a: np.block([[1.0, a[0, 0]], [a[1, 0], 2.0]]),
              lambda a: np.block([[[a]], [[a]]])]:
        same(f(wg.Tape().var(A)), f(A))
    for bad in [lambda a: np.block(([a],)), lambda a: np.block([[a], a])]:  # NumPy's own errors
        with pytest.raises((TypeError, ValueError)):
            bad(wg.Tape().var(A))
    X = r.standard_normal((2, 3, 4))
    for axis in (0, 1, -1):
        got, want = np.unstack(wg.Tape().var(X), axis=axis), np.unstack(X, axis=axis)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    idx = np.array([[0, 1, 2, 1], [2, 0, 1, 0]])
    ch = [r.standard_normal(4), r.standard_normal((2, 4)), 3.0]
    for mode, i in [("raise", idx), ("wrap", idx * 3 - 2), ("clip", idx * 3 - 2)]:
        same(np.choose(i, [wg.Tape().var(ch[0]), ch[1], ch[2]], mode=mode),
             np.choose(i, ch, mode=mode))
    # closed forms: geomspace's ends move one for one; d/dp of p'(x) at x is (3x², 2x, 1, 0)
    J = wg.jacobian(lambda a: np.geomspace(a, 8.0, 4))(2.0)
    assert J[0] == 1.0 and J[-1] == 0.0
    np.testing.assert_allclose(wg.grad(lambda p: np.polyval(np.polyder(p), 0.7))(P.astype(float)),
                               [3 * 0.49, 1.4, 1.0, 0.0], rtol=1e-15)


def _val(x):
    return x.value if isinstance(x, wg.Var) else x



def _value(r):
    return r.value if isinstance(r, wg.Var) else r


def test_piecewise_apply_and_trim_zeros_are_numpys():
    r = np.random.default_rng(11)

    def same(got, want):
        got = _value(got)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    for dt in (np.float64, np.float32):
        x = r.standard_normal((3, 4)).astype(dt)
        fl = [lambda v: v ** 3, lambda v, k=2.0: np.exp(v) * k, 0.5]
        for conds in ([x < -0.2, x > 0.3], [x < 0], [x > 0.1]):
            funcs = fl[-(len(conds) + 1):]
            same(np.piecewise(wg.Tape().var(x), conds, funcs), np.piecewise(x, conds, funcs))
        same(np.piecewise(wg.Tape().var(x[0]), x[0] > 0, fl[1:]),  # one bare condition
             np.piecewise(x[0], x[0] > 0, fl[1:]))
        same(np.piecewise(wg.Tape().var(x[0, 0]), x[0, 0] > 0, [lambda v: v * 3, -1.0]),
             np.piecewise(x[0, 0], x[0, 0] > 0, [lambda v: v * 3, -1.0]))
        for axis in (0, 1, -1):
            for f1 in (lambda v: np.sum(v ** 2), lambda v: np.stack([v.max(), v.min()]),
                       lambda v: np.outer(v, v[:2])):
                same(np.apply_along_axis(f1, axis, wg.Tape().var(x)),
                     np.apply_along_axis(f1, axis, x))
        X = r.standard_normal((2, 3, 4)).astype(dt)
        for axes in (0, [0, 2], (-1, 1)):
            same(np.apply_over_axes(np.sum, wg.Tape().var(X), axes),
                 np.apply_over_axes(np.sum, X, axes))
        z = (x * (np.abs(x) > 0.8)).astype(dt)
        z[:, 0] = 0
        for trim in ("fb", "f", "b", "BF"):
            for axis in (None, 0, -1, (0, 1)):
                same(np.trim_zeros(wg.Tape().var(z), trim, axis), np.trim_zeros(z, trim, axis))
        same(np.trim_zeros(wg.Tape().var(np.zeros(3, dt))), np.trim_zeros(np.zeros(3, dt)))
    # the branch not taken never sees the other entries: no NaN from sqrt of negatives
    x = np.array([-1.0, -0.5, 0.25, 4.0])
    g = wg.grad(lambda x: wnp.sum(np.piecewise(x, [x < 0], [lambda v: -v, np.sqrt])))(x)
    np.testing.assert_array_equal(g, [-1.0, -1.0, 1.0, 0.25])
    t = wg.Tape()
    with pytest.raises(ValueError, match="either 1 or 2 functions"):
        np.piecewise(t.var(x), [x < 0], [np.sin, np.cos, np.tan])
    with pytest.raises(ValueError, match="iteration dimensions are 0"):
        np.apply_along_axis(np.sum, 1, t.var(np.ones((0, 3))))
    with pytest.raises(ValueError, match="correct shape"):
        np.apply_over_axes(lambda a, ax: wnp.sum(a), t.var(np.ones((2, 3))), [0])
    with pytest.raises(ValueError, match="unexpected character"):
        np.trim_zeros(t.var(x), "x")
    # the conversions that NumPy does not dispatch, called as wnp.*
    assert wnp.require(t.var(x), np.float32, "CW").value.dtype == np.float32
    assert wnp.asfortranarray(t.var(x)).value is not None
    with pytest.raises(ValueError, match="infs or NaNs"):
        wnp.asarray_chkfinite(t.var(np.array([1.0, np.inf])))
    np.testing.assert_array_equal(wnp.asarray_chkfinite(t.var(x)).value, x)
    # compiled: conditions and trims are guarded, so other inputs re-trace
    def h(x):
        return np.trim_zeros(x * x) + np.piecewise(x, [x < 0], [-1.0, 1.0])[1:3]
    cf = wg.compile(h)
    for v in ([0.0, 1.0, -2.0, 0.0], [0.0, -3.0, 2.0, 0.0], [0.0, 5.0, 0.5, 0.0]):
        v = np.array(v)
        np.testing.assert_array_equal(cf(v), h(v))

def test_counting_is_numpys_and_differentiates_what_it_can():
    # unique values, bincount's and histogram's weights, histogram's edges: NumPy's values
    # to the bit; unweighted counts, indices, inverse stay plain (they used to be plain for
    # traced weights and values too: a derivative of zero, silently)
    r = np.random.default_rng(5)
    x = np.array([3.0, 1.0, 3.0, 2.0])
    np.testing.assert_array_equal(wg.grad(lambda x: wnp.sum(np.unique(x)))(x), [1, 1, 0, 1])
    got = np.unique(wg.Tape().var(x), True, True, True)
    want = np.unique(x, True, True, True)
    assert isinstance(got[0], wg.Var) and not any(isinstance(g, wg.Var) for g in got[1:])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(_value(g), w)
    idx = np.array([0, 2, 2, 5, 0])
    w32 = r.standard_normal(5).astype(np.float32)
    got = np.bincount(idx, wg.Tape().var(w32), minlength=7).value
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.bincount(idx, w32, minlength=7))
    with pytest.raises(ValueError):
        np.bincount(np.array([0, -1]), wg.Tape().var(np.ones(2)))
    for dt in (np.float64, np.float32):
        for n in (0, 1, 7, 70000):  # 70000: two of NumPy's blocks of 65536
            a, w = r.standard_normal(n).astype(dt), r.standard_normal(n).astype(dt)
            for bins in (3, "auto", np.array([-1, -0.2, 0.0, 0.5, 2.0])):
                for rg in (None, (-0.5, 1.0)):
                    for dens in (None, True):
                        for ww in (None, w):
                            if isinstance(bins, str) and (ww is not None or n == 0):
                                continue
                            with np.errstate(all="ignore"):
                                want = np.histogram(a, bins, rg, dens, ww)
                                calls = [(wg.Tape().var(a), ww)]
                                if ww is not None:
                                    calls.append((a, wg.Tape().var(ww)))
                                for aa, wa in calls:
                                    for g, wv in zip(np.histogram(aa, bins, rg, dens, wa), want):
                                        g = _value(g)
                                        assert g.dtype == wv.dtype and g.shape == wv.shape
                                        np.testing.assert_array_equal(g, wv)
    # closed forms: weights land in their bins; the edges move with the extreme samples
    a = np.array([0.1, 0.9, 0.35, 0.6, 0.2])
    J = wg.jacobian(lambda w: np.histogram(a, 3, weights=w)[0])(np.ones(5))
    np.testing.assert_array_equal(J, [[1, 0, 1, 0, 1], [0, 0, 0, 1, 0], [0, 1, 0, 0, 0]])
    J = wg.jacobian(lambda x: np.histogram(x, 4)[1])(a)
    k = np.arange(5) / 4
    np.testing.assert_allclose(J[:, 0], 1 - k)  # a[0] is the minimum
    np.testing.assert_allclose(J[:, 1], k)      # a[1] the maximum
    np.testing.assert_array_equal(J[:, 2:], 0)
    # compiled: which entries are unique is guarded, so other inputs re-trace
    cu = wg.compile(lambda x: np.unique(x) * 2.0)
    for v in ([1.0, 2.0, 1.0], [3.0, 3.0, 3.0], [1.0, 2.0, 1.0]):
        np.testing.assert_array_equal(cu(np.array(v)), np.unique(v) * 2.0)


def test_arithmetic_ufuncs_take_numpys_keywords():
    # np.subtract(traced, c, dtype=...) (NumPy's own histogram does this) reached Python's
    # operator, which takes no keywords: a TypeError that said nothing useful
    for v in (np.array([2.0, 3.0]), np.array([2.0], np.float32), 2.0):
        for f, kw in [(np.subtract, {"dtype": np.float32}), (np.add, {"casting": "unsafe"}),
                      (np.multiply, {"dtype": np.float32, "casting": "same_kind"}),
                      (np.true_divide, {"dtype": np.float64})]:
            want = f(v, 1.5, **kw)
            for x in (wg.Tape().var(v), wg.Dual(v, np.ones_like(v))):
                got = f(x, 1.5, **kw).value
                assert np.asarray(got).dtype == np.asarray(want).dtype
                np.testing.assert_array_equal(got, want)
    x = wg.Tape().var(np.array([2.0]))
    with pytest.raises(TypeError, match="Cannot cast"):  # NumPy's own UFuncTypeError
        np.add(x, 1.0, dtype=np.int64)
    with pytest.raises(NotImplementedError, match="uninitialised"):
        np.add(x, 1.0, where=np.array([True]))
    np.testing.assert_array_equal(
        wg.grad(lambda x: wnp.sum(np.multiply(x, x, dtype=np.float32)))(np.array([1.5, 2.0])),
        [3.0, 4.0])


def test_ufunc_keywords_in_wnp_and_on_every_ufunc():
    # wnp.add(x, 1, dtype=...) failed even on plain arrays (Python's operator takes no
    # keywords), and np.sin(traced, dtype=...) passed dtype= on to sin's partials
    v = np.array([0.5, 2.0])
    for f, kw in [(wnp.add, {"dtype": np.float32}), (wnp.negative, {"casting": "same_kind"}),
                  (wnp.sin, {"dtype": np.float32}), (np.sin, {"dtype": np.float32}),
                  (wnp.power, {"dtype": np.float32}), (np.exp, {"casting": "unsafe"}),
                  (wsp_erf, {"dtype": np.float32})]:
        args = (v,) if f.__name__ in ("negative", "sin", "exp", "erf") else (v, 1.5)
        ref = getattr(np, f.__name__, None) or sp.erf
        want = ref(*args, **kw)
        np.testing.assert_array_equal(f(*args, **kw), want)  # plain: NumPy's own call
        for x in (wg.Tape().var(v), wg.Dual(v, np.ones_like(v))):
            got = f(x, *args[1:], **kw).value
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        g = lambda x: f(x, *args[1:], **kw)
        np.testing.assert_allclose(wg.jacobian(g, mode="forward")(v),
                                   wg.jacobian(g, mode="reverse")(v), rtol=1e-6)
        np.testing.assert_array_equal(wg.compile(g)(v), want)
    wg.check_grad(lambda x: wnp.sin(x, dtype=np.float64) * wnp.multiply(x, x, casting="no"),
                  v, order=2)
    out = np.empty(2)
    assert wnp.add(v, 1.0, out=out) is out and np.array_equal(out, v + 1.0)
    with pytest.raises(NotImplementedError, match="out="):
        wg.grad(lambda x: wnp.sum(wnp.add(x, 1.0, out=np.empty(2))))(v)
    with pytest.raises(TypeError, match="Cannot cast"):
        wg.grad(lambda x: wnp.sum(wnp.sin(x, casting="no", dtype=np.float32)))(v)

def test_convolve_and_correlate_are_numpys_to_the_bit():
    # every pair of lengths up to 6 (either the longer), every mode and NumPy's mode codes,
    # each argument traced in turn, forward and reverse; correlate's 'same' with the longer v
    # is centred differently from convolve's, which a reversed convolve got wrong
    r = np.random.default_rng(7)
    for dt in (np.float64, np.float32):
        for n in range(1, 7):
            for m in range(1, 7):
                a, v = r.standard_normal(n).astype(dt), r.standard_normal(m).astype(dt)
                for mode in ("full", "same", "valid", 0, 1, 2):
                    for f in (np.convolve, np.correlate):
                        want = f(a, v, mode)
                        for got in (f(wg.Tape().var(a), v, mode), f(a, wg.Tape().var(v), mode),
                                    f(a, wg.Dual(v, np.ones_like(v)), mode)):
                            got = got.value
                            assert got.dtype == want.dtype and got.shape == want.shape
                            np.testing.assert_array_equal(got, want)
    a = wg.Tape().var(np.ones(3))
    with pytest.raises(ValueError, match="mode must be one of"):
        wnp.convolve(a, np.ones(2), "circular")
    with pytest.raises(ValueError, match="empty"):
        wnp.correlate(a, np.ones(0))
    with pytest.raises(NotImplementedError, match="conjugates"):
        wnp.correlate(a, np.ones(2) * 1j)

def test_interp_is_numpys_to_the_bit_and_slopes_from_the_right():
    # random sample points, infinite and -0.0 values, repeated points, NaN x, left/right and
    # period, any of x, xp, fp traced: NumPy's values and signs of zero, bit for bit
    r = np.random.default_rng(5)
    for trial in range(120):
        n = int(r.integers(1, 7))
        xp = np.sort(r.choice(np.arange(-3.0, 4.0, 0.5), n, replace=False))
        fp = r.standard_normal(n)
        if trial % 7 == 0:
            fp[r.integers(n)] = np.inf
        if trial % 11 == 0:
            fp[r.integers(n)] = -0.0
        if trial % 13 == 0 and n > 1:
            xp[1] = xp[0]
        x = np.concatenate([r.uniform(-4, 4, 6), xp, [np.nan]])
        kw = [{}, {"left": -7.0, "right": 9.0}, {"period": 2.5}][trial % 3]
        with np.errstate(all="ignore"):
            want = np.interp(x, xp, fp, **kw)
            for which in range(3):
                args = [x, xp, fp]
                args[which] = wg.Tape().var(args[which])
                got = wnp.interp(*args, **kw)
                got = getattr(got, "value", got)  # one point: no dependence on x
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # at a sample point: the slope on its right; past the last one, and on it, zero
    xp, fp = np.array([0.0, 1.0, 2.5, 4.0]), np.array([1.0, 3.0, 2.0, 5.0])
    g = wg.grad(lambda x: wnp.sum(np.interp(x, xp, fp)))(np.array([-1.0, 0.0, 1.0, 4.0, 5.0]))
    np.testing.assert_array_equal(g, [0.0, 2.0, (2.0 - 3.0) / 1.5, 0.0, 0.0])
    with pytest.raises(NotImplementedError, match="complex"):
        wnp.interp(wg.Tape().var(0.5), xp, fp + 1j)
    with pytest.raises(ValueError, match="same length"):
        wnp.interp(wg.Tape().var(0.5), xp, fp[:3])


def test_polyval_nancumsum_pad_full_are_numpys_to_the_bit():
    r = np.random.default_rng(6)
    p, x = r.standard_normal(4), r.standard_normal((2, 3))
    for pp, xx in [(p, x), (p.astype(np.float32), x), (p, x.astype(np.float32)), (list(p), 0.7)]:
        want = np.polyval(pp, xx)
        got = np.polyval(pp, wg.Tape().var(np.asarray(xx))).value  # dispatched from NumPy
        assert np.result_type(got) == np.result_type(want)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(wnp.polyval(wg.Tape().var(np.asarray(pp)), xx).value, want)
    assert wg.grad(lambda x: wnp.polyval([1.0, 2.0, 3.0], x))(0.5) == 3.0  # 2x + 2
    a = r.standard_normal((3, 4))
    a[1, 2] = a[0, 0] = np.nan
    for ax in (None, 0, 1):
        np.testing.assert_array_equal(np.nancumsum(wg.Tape().var(a), axis=ax).value,
                                      np.nancumsum(a, axis=ax))
        np.testing.assert_array_equal(np.nancumprod(wg.Tape().var(a), axis=ax).value,
                                      np.nancumprod(a, axis=ax))
    b = np.array([[0.3, -0.0], [2.0, -1.5]])
    for cv in [1.5, (1.0, 2.0), ((1.0, 2.0), (3.0, 4.0)), np.nan]:
        for pw in [1, (1, 2), ((0, 1), (2, 0))]:
            want = np.pad(b, pw, constant_values=cv)
            for got in (np.pad(wg.Tape().var(b), pw, constant_values=cv).value,
                        wnp.pad(b, pw, constant_values=wg.Tape().var(np.asarray(cv, float))).value):
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # the fill's derivative counts the cells it fills: 2 x 3 + 2 x 3
    assert wg.grad(lambda c: wnp.sum(wnp.full((2, 3), c) + wnp.full_like(b, c, shape=(2, 3))))(
        0.7) == 12.0
    assert wnp.full(3, wg.Tape().var(np.float32(2))).value.dtype == np.float32


def test_astype_real_to_complex_pulls_back_the_real_part_quietly():
    # the cotangent cast back to float discarded the imaginary part with a ComplexWarning
    x = np.array([0.3, 0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = wg.grad(lambda x: wnp.sum(wnp.real(x.astype(np.complex128) * (1 + 2j))))(x)
        np.testing.assert_array_equal(g, [1.0, 1.0])
        h = wg.hessian(lambda x: wnp.sum(wnp.real(x.astype(np.complex64) ** 2 * (1 + 2j))))(
            x.astype(np.float32))
        assert h.dtype == np.float32
        np.testing.assert_array_equal(h, 2 * np.eye(2))
