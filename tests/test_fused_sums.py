"""A sum over a short last axis is added up inside the kernel that computes its operand
(passes.sums_last_axis, issue 32): each element added where it is computed, from +0.0 and
left to right as NumPy adds up to 7 terms, so the compiled program gives NumPy's bits and
writes no (..., k) array for the sum to read back; and a join along the last axis
(passes.joins_last_axis) is read in place by the kernel of its result's shape, each element
from the operand holding it, without writing the joined array."""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

pytest.importorskip("numba", reason="fused kernels need numba (the 'fast' extra)")


def kernels(cf):
    return [k for entries in cf.cache.values() for _, fn, _ in entries
            for k in getattr(fn, "kernel_sources", []) if k]


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), abs(a - b).max()


def normalised(x):
    """Readers of the sum at its operand's shape (x / r) run in a later kernel."""
    r = wnp.sqrt(wnp.sum(x * x, axis=1, keepdims=True))
    return x / r + wnp.sum(x * 2.0 + 1.0, axis=-1)[:, None]


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_a_short_last_axis_is_summed_in_its_operands_kernel(k):
    x = np.random.default_rng(k).standard_normal((50, k))
    cf = wg.compile(normalised, fuse=True)
    same_bits(cf(x), wg.compile(normalised, fuse=False)(x))
    np.testing.assert_allclose(cf(x), normalised(x), rtol=1e-14)
    ks = kernels(cf)
    assert any("if i1 == 0 else" in s for s in ks), ks
    assert "sum(" not in cf.program(x).source
    assert cf.fuse_failures == []


def test_a_long_last_axis_stays_a_numpy_sum():
    x = np.random.default_rng(0).standard_normal((50, 8))
    cf = wg.compile(normalised, fuse=True)
    np.testing.assert_allclose(cf(x), normalised(x), rtol=1e-14)
    assert "sum(" in cf.program(x).source
    assert not any("if i1 == 0 else" in s for s in kernels(cf))


def test_signed_zeros_and_float32_sum_as_numpy_does():
    def f(x):
        return wnp.sum(x * 1.0, axis=-1), wnp.sum(x * x, axis=(2,), keepdims=True)
    for x in (np.full((4, 5, 3), -0.0), np.random.default_rng(1).standard_normal(
            (4, 5, 3)).astype(np.float32)):
        got, want = wg.compile(f, fuse=True)(x), wg.compile(f, fuse=False)(x)
        for a, b in zip(got, want):
            same_bits(a, b)
        same_bits(got[0], np.sum(x * 1.0, axis=-1))


def test_a_compiled_tangent_pass_with_short_sums_is_the_eager_one():
    """Forward mode with tangents on a leading axis (a sparse Jacobian's pass): sums over
    (k, p, 3) and (p, 3) in their kernels, readers at both shapes later."""
    def f(x):
        r = wnp.sum(x * x, axis=1, keepdims=True)
        u = x / wnp.sqrt(r)
        return wnp.sin(u) * r + wnp.sum(u * x, axis=1, keepdims=True)
    x = np.random.default_rng(2).uniform(0.5, 1.5, (40, 3))
    J = wg.jacobian(f)
    cf = wg.compile(J, fuse=True)
    np.testing.assert_allclose(cf(x), J(x), rtol=1e-13, atol=1e-15)
    same_bits(cf(x), wg.compile(J, fuse=False)(x))
    wg.check_grad(lambda x: wnp.sum(f(x)), x)


def crossed(x):
    """A cross product's columns joined along the last axis, then read at that shape."""
    a, b, c = x[:, 0] * x[:, 1], x[:, 1] - x[:, 2], wnp.sin(x[:, 0])
    cr = wnp.concatenate([a.reshape(-1, 1), b.reshape(-1, 1), c.reshape(-1, 1)], axis=1)
    y = cr * x + 1.0
    return wnp.concatenate([y, x[:, :2] * 2.0], axis=-1) - 0.5


def test_a_join_along_the_last_axis_is_read_in_place_by_its_readers_kernel():
    x = np.random.default_rng(3).standard_normal((50, 3))
    cf = wg.compile(crossed, fuse=True)
    same_bits(cf(x), wg.compile(crossed, fuse=False)(x))
    np.testing.assert_allclose(cf(x), crossed(x), rtol=1e-14)
    assert "concatenate(" not in cf.program(x).source
    ks = kernels(cf)
    assert any("if i1 < 1 else" in s for s in ks) and any("if i1 < 3 else" in s for s in ks), ks
    J = wg.jacobian(crossed)
    cj = wg.compile(J, fuse=True)
    same_bits(cj(x), wg.compile(J, fuse=False)(x))
    np.testing.assert_allclose(cj(x), J(x), rtol=1e-13, atol=1e-15)
    wg.check_grad(lambda x: wnp.sum(crossed(x) ** 2), x)


def test_joins_along_other_axes_stay_numpy_calls():
    def f(x):
        return wnp.concatenate([x * 2.0, x + 1.0], axis=0) * 3.0 - 1.0
    x = np.random.default_rng(4).standard_normal((6, 3))
    cf = wg.compile(f, fuse=True)
    same_bits(cf(x), wg.compile(f, fuse=False)(x))
    assert "concatenate(" in cf.program(x).source


def test_a_strided_constant_is_given_to_kernels_as_a_contiguous_copy():
    """A sparse Jacobian pass's seeds are columns of one array (strides of 88 bytes for 1):
    a kernel reading one streams all of its base's cache lines unless given a copy."""
    import re
    base = np.random.default_rng(5).standard_normal((4, 300, 11))
    seed = base[:, :, 6:8]  # a strided view, as the simplifier leaves constants

    def f(x):
        return x * seed + 1.0 - x

    x = np.random.default_rng(6).standard_normal((300, 2))
    cf = wg.compile(f, fuse=True)
    same_bits(cf(x), wg.compile(f, fuse=False)(x))
    fn = cf.program(x)
    calls = re.findall(r"kernel\w*\((.*)\)", fn.source)
    given = [fn.__globals__[a.strip()] for c in calls for a in c.split(",")
             if type(fn.__globals__.get(a.strip())) is np.ndarray]
    assert given and all(a.flags.c_contiguous for a in given), [a.strides for a in given]
    assert any(np.array_equal(a, seed) for a in given)


def shifted(x, y):
    """An ODE's right-hand side (GradBench's ``ode``): its pullback writes each operand's
    cotangent into zeros of the joined shape, and the shifted products' into zeros of x's."""
    u = wnp.concatenate([x[:1], x[1:] * y[:-1]]) * 0.5 + y
    return wnp.sum(u * u * x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_operand_written_into_zeros_is_read_in_place_by_its_readers_kernel(dtype):
    rng = np.random.default_rng(8)
    x, y = rng.uniform(0.5, 1.5, 300).astype(dtype), rng.uniform(-1, 1, 300).astype(dtype)
    g = wg.grad(shifted, argnums=(0, 1))
    cf = wg.compile(g, fuse=True)
    got = cf(x, y)
    for a, b in zip(got, wg.compile(g, fuse=False)(x, y)):
        same_bits(a, b)  # the zeros around the box are NumPy's: the same additions
    for a, b in zip(got, g(x, y)):
        np.testing.assert_allclose(a, b, rtol=1e-12 if dtype == np.float64 else 1e-5)
    assert cf.fuse_failures == []
    assert "scatter_basic(" not in cf.program(x, y).source
    ks = " ".join(kernels(cf))
    assert "if i0 < 299 else" in ks or "if i0 >= 1 else" in ks, ks


def test_kernels_reading_operands_in_place_are_counted_once_per_source():
    # 40 right-hand sides of GradBench's ode (RK4, 10 steps): a few distinct kernels, each
    # compiled once; the budget must count them so (an index of slices is unhashable before
    # Python 3.12, and each kernel holding one counted as its own: fusion backed off)
    def rhs(x, y):
        return wnp.concatenate([x[:1], x[1:] * y[:-1]])

    def last(x):
        y = wnp.zeros_like(x)
        for _ in range(10):
            k1 = rhs(x, y)
            k2 = rhs(x, y + 0.1 * k1)
            k3 = rhs(x, y + 0.1 * k2)
            k4 = rhs(x, y + 0.2 * k3)
            y = y + 0.2 * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        return y[-1]
    x = np.random.default_rng(9).uniform(0.5, 1.5, 2000)
    cf = wg.compile(wg.grad(last), fuse=True, roll=False)
    same_bits(cf(x), wg.compile(wg.grad(last), fuse=False, roll=False)(x))
    assert cf.fuse_failures == [], cf.fuse_failures
    assert "scatter_basic(" not in cf.program(x).source
