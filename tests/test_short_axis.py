"""Sums over a short last axis and partials of shape (..., 1) take faster routes (issue 32,
bundle adjustment's batched tangents): the numbers must be NumPy's, to the bit."""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core import scaled
from wengert.rules.shape import _short_last_axis, sum_


@pytest.mark.parametrize("shape", [(5000, 2), (3000, 3), (14, 700, 3), (900, 7), (900, 8),
                                   (10, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.complex128, np.int64])
@pytest.mark.parametrize("axis, keepdims", [(-1, True), (-1, False), ("last", True),
                                            ("tuple", False)])
def test_sum_matches_numpy_bitwise(shape, dtype, axis, keepdims):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 1e3).astype(dtype)
    if x.dtype.kind == "f":
        x.flat[::97] = np.nan
    ax = {"last": x.ndim - 1, "tuple": (x.ndim - 1,)}.get(axis, axis)
    for a in (x, x.T.copy().T):  # C and Fortran order
        got, want = sum_(a, axis=ax, keepdims=keepdims), a.sum(axis=ax, keepdims=keepdims)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(got, want, equal_nan=True)


def test_short_axis_route_is_taken_only_where_it_is_exact():
    assert _short_last_axis(np.ones((5000, 3)), -1) == 3
    assert _short_last_axis(np.ones((5000, 3), np.float32), (1,)) == 3
    assert _short_last_axis(np.ones((5000, 8)), -1) == 0  # 8 terms: NumPy unrolls, order differs
    assert _short_last_axis(np.ones((5000, 3), np.float16), -1) == 0  # summed in float32
    assert _short_last_axis(np.ones((5000, 3), complex), -1) == 0
    assert _short_last_axis(np.ones((5000, 3)), 0) == 0
    assert _short_last_axis(np.ones((10, 3)), -1) == 0  # small: not worth it
    assert _short_last_axis(np.ones((5000, 3)), None) == 0


@pytest.mark.parametrize("tshape, pshape", [((14, 700, 3), (700, 1)), ((4, 2000, 2), (2000, 1)),
                                            ((2000, 3), (1,)), ((14, 700, 1), (700, 3))])
def test_scaled_matches_numpy(tshape, pshape):
    rng = np.random.default_rng(1)
    t, p = rng.standard_normal(tshape), rng.standard_normal(pshape)
    got = scaled(t, p)
    assert got.shape == (t * p).shape and np.array_equal(got, t * p)


def test_batched_tangents_through_short_sums():
    """A Jacobian through sums over rows of 3 (a rotation's angle), forward and reverse."""
    def f(x):
        theta = wnp.sqrt(wnp.sum(x * x, axis=1, keepdims=True))
        return wnp.reshape(x / theta * wnp.sin(theta), (-1,))

    x = np.random.default_rng(2).standard_normal((600, 3))
    J = wg.sparse_jacobian(f)(x)
    wg.check_grad(lambda v: wnp.sum(f(v)), x[:3])
    for mode in ("forward", "reverse"):
        dense = wg.jacobian(f, mode=mode)(x)
        np.testing.assert_allclose(J.toarray(), dense.reshape(1800, 1800), rtol=1e-12,
                                   atol=1e-14)


@pytest.mark.parametrize("k", range(2, 8))
def test_short_axis_sum_keeps_numpys_signed_zeros(k):
    # NumPy adds from +0.0: a row of -0.0 sums to +0.0 (adding slices alone gave -0.0)
    x = np.random.default_rng(k).standard_normal((3000, k))
    x[::7] = -0.0
    x[1::7] = 0.0
    x[2::7, 0] = -0.0
    assert _short_last_axis(x, -1) == k
    assert sum_(x, axis=-1).tobytes() == x.sum(axis=-1).tobytes()
