"""wg.compile's buffers reused across calls (wengert/graph/pool.py).

A compiled program writes its internal ufunc temporaries into buffers it keeps between calls.
These tests check what must hold: results bitwise equal to the unpooled program's, never a
returned array (or a view of one, or anything user code was given) in a buffer, and no buffer
shared between two calls in flight (threads, re-entrant calls).  The NumPy programs are asked
for by name (``fuse=False``: compared with eager code to the bit), the fused ones where Numba
is installed.
"""
import threading

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import pool
from wengert.tree import flatten

try:
    import numba  # noqa: F401
    FUSE_MODES = (False, True)
except ImportError:  # the NumPy programs only
    FUSE_MODES = (False,)

RNG = np.random.default_rng(7)
X = RNG.standard_normal((64, 32))     # 2,048 elements: above POOL_MIN_SIZE
W = RNG.standard_normal((32, 48)) * 0.1


def mlp_loss(p, x):
    W1, b1 = p
    h = wnp.tanh(x @ W1 + b1)
    r = h * h - 0.5
    return wnp.mean(r * r)


P = (W, RNG.standard_normal(48) * 0.1)


def program(cf, *args):
    """The generated function wg.compile runs for these arguments (traced if needed)."""
    return cf.program(*args)


def leaves(tree):
    return [np.asarray(v) for v in flatten(tree)[0]]


def assert_identical(a, b):
    la, lb = leaves(a), leaves(b)
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        assert u.dtype == v.dtype and u.shape == v.shape
        assert np.array_equal(u, v, equal_nan=True), np.max(np.abs(u - v))


def assert_no_pool_memory(fn, result):
    for leaf in flatten(result)[0]:
        for buf in fn.pool.values():
            assert not np.shares_memory(np.asarray(leaf), buf)


@pytest.mark.parametrize("fuse", [False, True])
def test_repeated_calls_identical_and_never_aliased(fuse):
    if fuse:
        pytest.importorskip("numba", reason="fused kernels need Numba")
    f = wg.grad(mlp_loss)
    cf = wg.compile(f, fuse=fuse)
    plain = wg.compile(f, fuse=fuse, reuse_buffers=False)
    fn = program(cf, P, X)
    assert fn.pool, "the program should have pooled temporaries"
    assert program(plain, P, X).pool == {}
    want = plain(P, X)
    first = cf(P, X)
    kept = [leaf.copy() for leaf in leaves(first)]
    for leaf in leaves(first):
        leaf[...] = np.nan  # a caller writing into one result must not change the next
    second = cf(P, X)
    assert_identical(second, want)
    assert_identical(second, tuple(kept))
    assert_no_pool_memory(fn, second)
    # a new point: the results handed out before keep their values
    P2 = (P[0] * 1.5, P[1] - 0.25)
    third = cf(P2, X * 0.5)
    assert_identical(third, plain(P2, X * 0.5))
    assert_identical(second, tuple(kept))
    if not fuse:
        assert_identical(cf(P, X), f(P, X))  # the NumPy program: the eager bits too


def views_out(x):
    t = wnp.tanh(x) * 2.0          # a temporary whose views are returned
    u = x * x + 1.0                # one returned whole
    v = wnp.sin(x) * 3.0           # one read only inside
    s = (v * v).sum()
    return {"t": t.T, "rows": [t[1:5], u], "flat": wnp.reshape(t, (-1,))[:7], "s": s}


def test_views_of_temporaries_and_pytree_outputs_are_never_pooled():
    cf = wg.compile(views_out, fuse=False)
    fn = program(cf, X)
    g = cf.graph(X)
    pooled_values = [g.nodes[i].value for i in fn.pool]
    assert fn.pool and len(pooled_values) < 6
    first = cf(X)
    keep = [leaf.copy() for leaf in leaves(first)]
    assert_no_pool_memory(fn, first)
    second = cf(X + 1.0)
    assert_no_pool_memory(fn, second)
    for a, b in zip(leaves(first), keep):
        assert np.array_equal(a, b)
    assert_identical(second, views_out(X + 1.0))
    assert_identical(second, wg.compile(views_out, reuse_buffers=False, fuse=False)(X + 1.0))


def test_in_place_update_of_a_temporary_that_is_returned():
    def f(x):
        a = x * 2.0
        b = a + 1.0
        b = b * a           # a candidate for in-place reuse in the fused program
        return b[::2], wnp.sum(a)
    for fuse in FUSE_MODES:
        cf = wg.compile(f, fuse=fuse)
        first = cf(X)
        keep = [leaf.copy() for leaf in leaves(first)]
        second = cf(X - 3.0)
        for a, b in zip(leaves(first), keep):
            assert np.array_equal(a, b)
        assert_identical(second, f(X - 3.0))
        assert_no_pool_memory(program(cf, X), second)


KEPT = []


@wg.primitive
def keep_it(t):
    """User code that keeps a reference to its argument."""
    KEPT.append(t)
    return float(np.sum(t))


def test_a_value_handed_to_user_code_is_never_pooled():
    def f(x):
        t = x * 3.0
        return keep_it(t) + wnp.sum(wnp.tanh(x) * 2.0)
    KEPT.clear()
    cf = wg.compile(f, fuse=False)
    fn = program(cf, X)
    assert fn.pool  # the tanh temporary
    KEPT.clear()
    cf(X)
    first = KEPT[-1].copy()
    cf(X + 1.0)
    assert np.array_equal(KEPT[0], first)
    assert not any(np.shares_memory(KEPT[0], b) for b in fn.pool.values())


def test_threads_with_different_inputs_get_their_own_results():
    f = wg.grad(mlp_loss)
    cf = wg.compile(f, fuse=False)
    plain = wg.compile(f, reuse_buffers=False, fuse=False)
    inputs = [((P[0] * (1 + k / 8), P[1] + k), X * (k + 1) / 4) for k in range(4)]
    wants = [plain(p, x) for p, x in inputs]
    assert program(cf, *inputs[0]).pool
    errors = []
    start = threading.Barrier(len(inputs))

    def work(k):
        start.wait()
        try:
            for _ in range(150):
                assert_identical(cf(*inputs[k]), wants[k])
        except Exception as e:  # reported from the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_a_recursive_call_does_not_share_the_buffers_of_the_call_in_flight():
    depth = [1]  # while tracing: no recursion

    @wg.primitive
    def callback(x):
        if depth[0] >= 1:
            return np.zeros_like(x)
        depth[0] += 1
        try:
            return cf(x + 1.0)  # the same program, its buffers held by the outer call
        finally:
            depth[0] -= 1

    def f(x):
        a = x * 3.0          # pooled, alive across the callback
        b = callback(x)
        return a + b

    cf = wg.compile(f, fuse=False)
    fn = program(cf, X)
    assert fn.pool
    depth[0] = 0
    got = cf(X)
    assert_identical(got, X * 3.0 + (X + 1.0) * 3.0)
    assert depth[0] == 0


def column_sums(x):
    return wnp.sum(wnp.tanh(x) * 2.0 + 1.0, axis=0)


def test_transposed_inputs_run_the_plain_program_bit_for_bit():
    # a Fortran-ordered input makes the unpooled temporaries Fortran-ordered, so the column
    # sums add contiguous elements (pairwise); a C-ordered buffer would add them row by row
    x = np.asfortranarray(RNG.standard_normal((512, 4)))
    cf = wg.compile(column_sums, fuse=False)
    assert program(cf, np.ascontiguousarray(x)).pool
    assert_identical(cf(x), wg.compile(column_sums, reuse_buffers=False, fuse=False)(x))
    assert_identical(cf(x), column_sums(x))


def test_transposed_inputs_of_a_gradient():
    f = wg.grad(mlp_loss, 1)
    cf = wg.compile(f, fuse=False)
    plain = wg.compile(f, reuse_buffers=False, fuse=False)
    assert program(cf, P, X).pool
    xf = np.asfortranarray(X)
    assert_identical(cf(P, xf), plain(P, xf))
    assert_identical(cf(P, X), plain(P, X))


def test_switches(monkeypatch):
    f = wg.grad(mlp_loss)
    assert wg.compile(f, fuse=False).reuse_buffers
    assert program(wg.compile(f, reuse_buffers=False), P, X).pool == {}
    monkeypatch.setenv("WENGERT_REUSE_BUFFERS", "0")
    cf = wg.compile(f, fuse=False)
    assert not cf.reuse_buffers and program(cf, P, X).pool == {}
    assert program(wg.compile(f, reuse_buffers=True, fuse=False), P, X).pool


def test_small_arrays_and_memory_bound(monkeypatch):
    small = program(wg.compile(wg.grad(mlp_loss, 1), fuse=False), P, RNG.standard_normal((2, 32)))
    assert small.pool == {}  # every temporary below POOL_MIN_SIZE: the plain program as it was
    monkeypatch.setattr(pool, "POOL_MAX_BYTES", X.nbytes)
    fn = program(wg.compile(lambda v: wnp.sum(wnp.tanh(v * 2.0) + 1.0), fuse=False), X)
    distinct = {id(b): b for b in fn.pool.values()}.values()
    assert fn.pool and sum(b.nbytes for b in distinct) <= X.nbytes


def test_temporaries_whose_lifetimes_do_not_overlap_share_a_buffer():
    """tanh(x @ W) and what follows it: a chain of elementwise calls each writing over the
    value it reads last (NumPy computes overlapping operands as if copied first)."""
    f = wg.grad(mlp_loss)
    fn = program(wg.compile(f, fuse=False), P, X)
    distinct = {id(b) for b in fn.pool.values()}
    assert 1 < len(distinct) < len(fn.pool)
    assert_identical(fn(P, X), wg.compile(f, fuse=False, reuse_buffers=False)(P, X))


def test_pooled_calls_allocate_less():
    """The point of the pool, checked by count: tracemalloc sees fewer bytes per call."""
    import tracemalloc
    f = wg.grad(mlp_loss)
    peaks = []
    for reuse in (False, True):
        cf = wg.compile(f, reuse_buffers=reuse, fuse=False)
        cf(P, X)
        tracemalloc.start()
        cf(P, X)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < peaks[0] - 4 * X.nbytes


def updated_in_place(x):
    d = x * 2.0                       # a temporary written in place below
    d[3] = 7.0
    wnp.put(d, [0, 5, 11], wnp.tanh(x[0, :3]))
    e = d + 1.0
    e += x                            # augmented assignment on a traced array
    return e[:, 1], wnp.sum(d * e)


def test_in_place_updates_of_temporaries():
    cf = wg.compile(updated_in_place, fuse=False)
    fn = program(cf, X)
    assert fn.pool
    first = cf(X)
    keep = [leaf.copy() for leaf in leaves(first)]
    second = cf(X * -0.5)
    for a, b in zip(leaves(first), keep):
        assert np.array_equal(a, b)
    assert_no_pool_memory(fn, second)
    assert_identical(second, updated_in_place(X * -0.5))
    plain = wg.compile(updated_in_place, reuse_buffers=False, fuse=False)
    assert_identical(second, plain(X * -0.5))
    g = wg.compile(wg.grad(lambda x: updated_in_place(x)[1]), fuse=False)
    assert_identical(g(X), wg.grad(lambda x: updated_in_place(x)[1])(X))


def test_a_guard_failing_inside_the_pooled_program_releases_the_pool():
    def f(x):
        t = wnp.tanh(x) * 2.0         # pooled, computed before the guard
        if wnp.sum(t) > 0:
            return wnp.sum(t * t)
        return wnp.sum(t * 3.0)
    cf = wg.compile(f, fuse=False)
    xp = np.abs(X)
    fn = program(cf, xp)
    bufs = {id(b): b for b in fn.pool.values()}.values()
    assert bufs
    assert cf(-xp) == f(-xp)          # the guard fails in the pooled program: traced again
    assert cf.num_traces == 2
    before = [b.copy() for b in bufs]
    assert cf(xp * 0.5) == f(xp * 0.5)
    # the first program took its pool again: its buffers hold this call's temporaries
    assert any(not np.array_equal(b, c) for b, c in zip(bufs, before))


def tanh_chain(x):
    for _ in range(3):
        x = wnp.tanh(x) * 0.9 + 0.1
    return wnp.sum(x)


def test_fused_kernels_write_their_results_into_reused_buffers():
    pytest.importorskip("numba", reason="fused kernels need Numba")
    x = np.linspace(0.1, 1.0, 8192)   # above SIMD_SIZE: tanh stays NumPy's, between kernels
    f = wg.grad(tanh_chain)
    cf = wg.compile(f, fuse=True)
    fn = program(cf, x)
    assert not cf.fuse_failures
    kernel_lines = [ln for ln in fn.pooled_source.splitlines() if "kernel" in ln]
    assert any("buf" in ln for ln in kernel_lines), fn.pooled_source
    plain = wg.compile(f, fuse=True, reuse_buffers=False)
    first = cf(x)
    keep = first.copy()
    second = cf(x[::-1].copy())
    assert np.array_equal(first, keep)
    assert_identical(second, plain(x[::-1].copy()))
    assert_no_pool_memory(fn, second)
