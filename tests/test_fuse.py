"""wg.compile's fused kernels (Numba) give the eager program's results.

Kernels round like the C library where NumPy may use SIMD versions of tanh, exp...: the
comparisons allow a few ulps (RTOL); arithmetic-only programs must agree to the bit.
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import fuse, passes

pytest.importorskip("numba", reason="fused kernels need numba (the 'fast' extra)")

RTOL = 1e-13


def kernels(cf):
    """The fused kernel sources of a compiled function's programs ([] when not fused)."""
    return [k for _, fn, _ in cf.cache.values().__iter__().__next__()
            for k in getattr(fn, "kernel_sources", [])]


def same(a, b, rtol=RTOL, exact=False):
    for x, y in zip(a if isinstance(a, (list, tuple)) else [a],
                    b if isinstance(b, (list, tuple)) else [b]):
        assert type(x) is type(y), (type(x), type(y))
        assert np.shape(x) == np.shape(y)
        if isinstance(y, np.ndarray):
            assert x.dtype == y.dtype
        if exact:
            np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_allclose(x, y, rtol=rtol, atol=0)


def chain(x):
    for _ in range(5):
        x = wnp.tanh(x) * 0.9 + 0.1
    return wnp.sum(x)


def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def babylonian(x, n=4):
    t = (1 + x) / 2
    for _ in range(n):
        t = (t + x / t) / 2
    return t


def test_elementwise_chain_is_one_kernel():
    x = np.linspace(0.1, 1.0, 10)
    g = wg.grad(chain)
    cf = wg.compile(g, fuse=True)
    same(cf(x), g(x))
    assert len(kernels(cf)) == 1
    assert "for i0 in range(10)" in kernels(cf)[0]


@pytest.mark.parametrize("make", [wg.grad, wg.derivative])
def test_scalar_program_is_one_scalar_function(make):
    f = make(babylonian)
    cf = wg.compile(f, fuse=True)
    for x in (2.0, 0.3, 7.5):
        same(cf(x), f(x), exact=True)  # + - * / only: the same IEEE operations
    (src,) = kernels(cf)
    assert "for " not in src


def test_loop_over_elements_reads_and_accumulates_in_one_kernel():
    x = np.linspace(-1.2, 1.3, 7)
    g = wg.grad(rosenbrock)
    cf = wg.compile(g, fuse=True)
    same(cf(x), g(x), exact=True)
    same(cf(x[::-1].copy()), g(x[::-1].copy()), exact=True)
    (src,) = kernels(cf)
    assert "a0[3]" in src and "+=" in src
    # strided input: the kernel reads elements through the array's own strides
    xs = np.linspace(-1.2, 1.3, 14)[::2]
    same(cf(xs), g(xs), exact=True)


def test_returned_arrays_are_never_reused():
    x = np.linspace(0.1, 1.0, 10)
    cf = wg.compile(wg.grad(chain), fuse=True)
    a = cf(x)
    keep = a.copy()
    b = cf(x + 1.0)
    assert a is not b
    np.testing.assert_array_equal(a, keep)
    a[:] = 0.0
    same(cf(x), keep)


def mlp_loss(p, X, Y):
    W1, b1, W2, b2 = p
    h = wnp.tanh(X @ W1 + b1)
    r = h @ W2 + b2 - Y
    return wnp.mean(r * r)


def test_mixed_matmul_and_elementwise():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((16, 5)), rng.standard_normal((16, 3))
    p = [rng.standard_normal((5, 8)), rng.standard_normal(8), rng.standard_normal((8, 3)),
         rng.standard_normal(3)]
    g = wg.grad(mlp_loss)
    cf = wg.compile(g, fuse=True)
    same(cf(p, X, Y), g(p, X, Y))
    src = "\n".join(kernels(cf))
    assert "@" not in src and "dot" not in src  # products stay BLAS calls
    assert kernels(cf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_and_broadcasting_kept(dtype):
    def f(x, y):
        z = wnp.exp(x * 0.5) * y + x / (1.0 + y * y)
        return wnp.sum(wnp.sin(z) * z)
    x = np.linspace(0.1, 1.0, 6, dtype=dtype).reshape(3, 2)[:, :1].copy()   # (3, 1)
    y = np.linspace(-1.0, 2.0, 4, dtype=dtype)                                 # (4,)
    g = wg.grad(f, (0, 1))
    cf = wg.compile(g, fuse=True)
    got, want = cf(x, y), g(x, y)
    same(got, want, rtol=1e-5 if dtype == np.float32 else RTOL)
    assert got[0].dtype == dtype and got[1].dtype == dtype
    cv = wg.compile(f, fuse=True)
    same(cv(x, y), f(x, y), rtol=1e-5 if dtype == np.float32 else RTOL)


def test_python_float_and_weak_scalars():
    def f(x, s):
        return wnp.sum(wnp.tanh(x * s + 1.0) * s)
    x = np.linspace(0.0, 1.0, 5, dtype=np.float32)
    g = wg.grad(f)
    cf = wg.compile(g, fuse=True)
    same(cf(x, 0.3), g(x, 0.3), rtol=1e-6)
    assert cf(x, 0.3).dtype == np.float32


def test_guards_and_division_by_zero():
    def f(x):
        if x > 0:
            return x / (x - 1.0) + x * x
        return 1.0 / x + x * 3.0
    cf = wg.compile(f, fuse=True)
    for x in (2.0, -3.0, 1.0, 0.0, -0.0):
        with np.errstate(all="ignore"):
            want = float(np.float64(x) / (np.float64(x) - 1.0) + x * x) if x > 0 else \
                float(1.0 / np.float64(x) + x * 3.0)
            same(cf(x), want, exact=True)
    assert cf.num_traces == 2


def test_without_numba_the_numpy_program_gives_the_same(monkeypatch):
    x = np.linspace(-1.2, 1.3, 7)
    fused = wg.compile(wg.grad(rosenbrock), fuse=True)(x)
    monkeypatch.setattr(fuse, "_NUMBA", [None])
    cf = wg.compile(wg.grad(rosenbrock), fuse=True)
    same(cf(x), fused, exact=True)
    assert kernels(cf) == []
    assert not fuse.fuse_default()


def test_switches(monkeypatch):
    x = np.linspace(0.1, 1.0, 10)
    assert kernels(wg.compile(wg.grad(chain), fuse=False).__call__ and
                   _called(wg.compile(wg.grad(chain), fuse=False), x)) == []
    monkeypatch.setenv("WENGERT_FUSE", "0")
    assert kernels(_called(wg.compile(wg.grad(chain)), x)) == []
    monkeypatch.setenv("WENGERT_FUSE", "1")
    assert kernels(_called(wg.compile(wg.grad(chain)), x))


def _called(cf, *args):
    cf(*args)
    return cf


def test_kernels_are_cached_by_source():
    x = np.linspace(0.1, 1.0, 10)
    a = _called(wg.compile(wg.grad(chain), fuse=True), x)
    n = len(fuse._KERNELS)
    b = _called(wg.compile(wg.grad(chain), fuse=True), x)
    assert len(fuse._KERNELS) == n
    assert kernels(a) == kernels(b)


def test_large_scalar_groups_run_as_python_floats(monkeypatch):
    """Past NUMBA_MAX_NODES an all-scalar group is Python-float code (Numba's compile time):
    the same IEEE operations, so the same bits; where Python raises, NumPy's program."""
    monkeypatch.setattr(passes, "NUMBA_MAX_NODES", 3)  # (the schedule decides)
    x = np.linspace(-1.2, 1.3, 9)
    g = wg.grad(rosenbrock)
    cf = wg.compile(g, fuse=True)
    same(cf(x), g(x), exact=True)
    assert kernels(cf) == []
    assert ".tolist()" in next(iter(cf.cache.values()))[0][1].source

    def h(x, y):
        a = x[0] / x[1] + x[1] ** y
        return a * x[2] - (x[0] - 1.0) ** 1.5
    for p in ([1.0, 2.0, 3.0], [1.0, 0.0, 3.0], [0.5, -2.0, 3.0]):
        xp = np.array(p)
        hc = wg.compile(h, fuse=True)
        with np.errstate(all="ignore"):
            same(hc(xp, 2.5), h(xp, 2.5), exact=True)
            gh = wg.grad(h)
            same(wg.compile(gh, fuse=True)(xp, 2.5), gh(xp, 2.5), exact=True)


def test_temporaries_are_updated_in_place_never_inputs_or_results():
    """``a * b`` where ``a`` is a temporary nothing else reads becomes ``a *= b``: not when
    ``a`` is an input, a constant or a value read again (tanh, exp on large arrays stay
    NumPy calls: their lone neighbours too)."""
    def f(W, x):
        t = wnp.exp(W * 0.1)
        u = wnp.tanh(t * 2.0)
        return u + W, t @ x
    rng = np.random.default_rng(1)
    W, x = rng.standard_normal((100, 50)), rng.standard_normal((50, 3))
    keep = [a.copy() for a in (W, x)]
    cf = wg.compile(f, fuse=True)
    want = f(W, x)
    got = cf(W, x)
    same(got, want, exact=True)
    for a, k in zip((W, x), keep):
        np.testing.assert_array_equal(a, k)
    src = next(iter(cf.cache.values()))[0][1].source
    assert "+= W" in src and "*= 2.0" not in src  # t is read again by the matmul
    again = cf(W, x)
    assert again[0] is not got[0]
    same(got, want, exact=True)


def programs(cf):
    return [fn for entries in cf.cache.values() for _, fn, _ in entries]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("flat, nb", [
    (np.array([-1, 3, 3, 0, 14, -15, 7]), 0),      # negative and repeated positions
    (np.array([[4, 0], [-2, 2]]), 1),              # per leading row, a 2-D block of positions
    (np.arange(15)[::-2], 0),                      # a strided view of positions
])
def test_a_gather_of_a_kernel_result_is_folded_into_the_kernel(dtype, flat, nb):
    """``gather(reshape(kernel result), flat)`` computes the gathered elements in the kernel
    (one array of the gather's size, no (3, 5) result): bitwise the NumPy program's."""
    from wengert.rules.indexing import gather

    def f(x, c):
        y = c * x + c           # a (3, 5) group, x broadcast along the rows
        return gather(wnp.reshape(y, (3, 5) if nb else (-1,)), flat, lead=nb) * 2.0
    rng = np.random.default_rng(3)
    x, c = rng.standard_normal(5).astype(dtype), rng.standard_normal((3, 5)).astype(dtype)
    cf = wg.compile(f, fuse=True)
    got = cf(x, c)
    same(got, wg.compile(f, fuse=False)(x, c), exact=True)
    same(got, f(x, c), exact=True)
    assert got.dtype == dtype and got.shape == ((3,) if nb else ()) + flat.shape
    fn, = programs(cf)
    assert fn.folded_gathers == 1 and "gather" not in fn.source
    assert "(3, 5)" not in "".join(fn.kernel_sources)  # the group's result is never made


@pytest.mark.parametrize("case", ["read elsewhere", "more positions than elements"])
def test_a_gather_is_not_folded(case):
    """Not where the kernel's result is also read elsewhere (it is made anyway), nor where
    there are more positions than elements (each element would be computed many times)."""
    from wengert.rules.indexing import gather

    def f(x, c):
        y = c * x + c
        if case == "read elsewhere":
            return gather(wnp.reshape(y, (-1,)), np.array([1, 0, 14])), y
        return gather(wnp.reshape(y, (-1,)), np.arange(16) % 3)
    rng = np.random.default_rng(4)
    x, c = rng.standard_normal(5), rng.standard_normal((3, 5))
    cf = wg.compile(f, fuse=True)
    same(cf(x, c), f(x, c), exact=True)
    fn, = programs(cf)
    assert fn.folded_gathers == 0 and "gather" in fn.source


def test_a_value_read_by_an_accumulation_in_another_kernel_is_returned():
    """The differential test's seed 7548: a scalar chain whose last value is scattered into
    an accumulator that runs in another kernel. The chain returned nothing (``return (,)``,
    a SyntaxError, then NumPy's program): what a skipped scatter reads is an output."""
    def f(x):
        t0 = 3.0
        for _ in x:
            t0 = t0 * 0.9 + x[0]
        a = x[np.array([1, 1])] * np.sum(np.maximum(x, -0.75)) * np.square(np.square(t0))
        return np.dot(a, a)
    x = np.array([0.3, -0.2, 0.5])
    cf = wg.compile(wg.grad(f), fuse=True)
    np.testing.assert_array_equal(cf(x), wg.grad(f)(x))
    assert cf.fuse_failures == []
