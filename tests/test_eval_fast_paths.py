"""The shortcuts issue 32's GradBench evals take on the eager tape give what the general
paths give: a row or slice read by ``x[k]``/``x[a:b]`` (the LSTM's weights), and max/min's
tie weights (k-means' nearest centroid)."""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.special import expit


@pytest.mark.parametrize("index", [1, -1, slice(1, 3), slice(None, None, 2), slice(-2, None),
                                   slice(3, 1, -1)])
def test_int_and_slice_reads(index):
    m = np.arange(12.0).reshape(4, 3) / 7
    f = lambda a: wnp.sum(wnp.sin(a[index]) * a[index])
    g = wg.grad(f)(m)
    expected = np.zeros_like(m)
    np.add.at(expected, index, np.sin(m[index]) + m[index] * np.cos(m[index]))
    np.testing.assert_allclose(g, expected, rtol=1e-14)
    wg.check_grad(f, m, modes=("fwd", "rev"), order=2)


def test_slice_reads_in_a_scan_step():
    # the step reads slices of a closed-over weight vector on the scan's sub-tape
    w0 = np.linspace(0.1, 0.9, 8)

    def f(w):
        def step(c, x):
            c = expit(c * w[:4] + w[4:]) * x
            return c, wnp.sum(c)
        return wnp.sum(wg.scan(step, wnp.ones(4), wnp.linspace(0.5, 1.5, 5))[1])
    wg.check_grad(f, w0, modes=("fwd", "rev"))


def test_write_through_a_row_view():
    # x[k] is still a view: assigning into it changes x, as NumPy's view would
    def f(a):
        b = a * 1.0
        row = b[1]
        row[0] = 5.0 * row[1]
        return wnp.sum(b ** 2)
    a = np.arange(6.0).reshape(2, 3)
    b = a.copy()
    b[1, 0] = 5.0 * b[1, 1]
    assert float(f(a)) == float(np.sum(b ** 2))
    wg.check_grad(f, a, modes=("fwd", "rev"))


def test_bool_and_numpy_int_indices_keep_their_meaning():
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(wg.grad(lambda a: wnp.sum(a[np.int64(2)] * a))(x),
                                  [3.0, 3.0, 1.0 + 2.0 + 2 * 3.0])
    np.testing.assert_array_equal(wg.grad(lambda a: wnp.sum(a[True]))(x), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [wnp.max, wnp.min])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_tie_weights(fn, dtype, axis):
    # ties share the cotangent equally; the weights keep x's dtype
    x = np.array([[3.0, 1.0, 3.0, 3.0], [0.5, 2.0, 0.5, 4.0], [3.0, 0.5, 0.5, 4.0]], dtype=dtype)
    v = np.asarray(fn(x, axis=axis))
    seed = np.arange(1.0, v.size + 1).reshape(v.shape)
    g = wg.grad(lambda a: wnp.sum(fn(a, axis=axis) * seed))(x)
    assert g.dtype == dtype
    keep = lambda y: y if axis is None else np.expand_dims(y, axis)
    hit = x == keep(v)
    np.testing.assert_allclose(g, hit / hit.sum(axis=axis, keepdims=True) * keep(seed),
                               rtol=1e-6)
    _, t = wg.jvp(lambda a: fn(a, axis=axis), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(t, np.ones_like(v), rtol=1e-6)


@pytest.mark.parametrize("read", [lambda b: b[0:2], lambda b: b[1], lambda b: b[:, 1:]])
def test_a_read_the_tape_records_directly_is_a_view_that_goes_stale(read):
    # the reverse tape's shortcut for x[k], x[a:b] notes the view as the general path does
    def f(a):
        b = a * 1.0
        v = read(b)
        b[1] = 7.0
        return wnp.sum(v)
    with pytest.raises(ValueError, match="view"):
        wg.grad(f)(np.arange(6.0).reshape(3, 2))
    wg.check_grad(lambda a: wnp.sum(read(a * a)), np.arange(6.0).reshape(3, 2),
                  modes=("fwd", "rev"), order=2)
