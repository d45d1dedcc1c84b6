"""A compiled scan's whole loop in Numba (wengert/checkpoint/fused.py): against the eager
scan and the compiled scan's Python loop, for each schedule, float32, pytree carries; the
fallbacks (a step without a Numba form, an integer leaf), batched cotangents (a reverse
Jacobian) and the memory bound.

Fused and unfused compute the same operations in the same order except that Numba calls
the C library's tanh/exp where NumPy may use its SIMD versions (1 ulp): so values are
compared to a relative 1e-12 (float64) / 1e-5 (float32), not bitwise.
"""
import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint.compiled import plans_of

pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")

RNG = np.random.default_rng(7)
X0 = RNG.standard_normal(6)
W0 = RNG.standard_normal((6, 6)) / np.sqrt(6)
N = 37


def chain_loss(strategy, n=N, dtype=np.float64):
    def loss(W):
        def step(x, _):
            return x + dtype(0.01) * wnp.tanh(W @ x), None
        inv = None
        x, _ = wg.scan(step, X0.astype(dtype), length=n, checkpoint=strategy, inverse=inv)
        return wnp.sum(x * x)
    return loss


def plan(cf, *args):
    (p,) = plans_of(cf.graph(*args))
    return p


def assert_close(a, b, rtol=1e-12):
    for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert np.shape(u) == np.shape(v)
        np.testing.assert_allclose(u, v, rtol=rtol, atol=rtol * 1e-2)


@pytest.mark.parametrize("strategy", ["all", "ctz", "binomial", "online"])
def test_fused_loop_equals_eager_and_unfused(strategy):
    loss = chain_loss(strategy)
    fused = wg.compile(wg.value_and_grad(loss), fuse=True)
    unfused = wg.compile(wg.value_and_grad(loss), fuse=False)
    eager = wg.value_and_grad(loss)(W0)
    got = fused(W0)
    p = plan(fused, W0)
    assert p.fuse_failures == [] and p.fused() is not None  # the loop ran in Numba
    # "all" keeps each step's residuals (here 1 - tanh^2) and so never recomputes a step
    assert bool(p.fused().res_kinds) == (strategy == "all")
    assert plan(unfused, W0).fused() is None
    assert_close(got, eager)
    assert_close(got, unfused(W0))
    assert_close(fused(W0), got, rtol=0)  # again: the residual is rebuilt each call


def test_ctz_keeps_its_memory_bound_and_counts():
    n = 200
    loss = chain_loss("ctz", n)
    fused = wg.compile(wg.grad(loss), fuse=True)
    unfused = wg.compile(wg.grad(loss), fuse=False)
    assert_close(fused(W0), unfused(W0))
    pf, pu = plan(fused, W0), plan(unfused, W0)
    assert pf.fused() is not None
    assert pf.fused().nslots <= math.floor(math.log2(n)) + 1
    assert pf.stats == pu.stats  # same schedule: same steps, VJPs and most states held
    assert pf.stats["max_stored"] <= math.floor(math.log2(n)) + 1


def test_float32():
    loss = chain_loss("all", dtype=np.float32)
    W = W0.astype(np.float32)
    fused = wg.compile(wg.grad(loss), fuse=True)
    got = fused(W)
    assert plan(fused, W).fused() is not None
    assert got.dtype == np.float32
    assert_close(got, wg.grad(loss)(W), rtol=1e-5)


def pytree_loss(strategy):
    def loss(W, b, xs):
        def step(c, x):
            h, s = c["h"], c["s"]
            h2 = wnp.tanh(W @ h + b * x[0]) * 0.5 + h * 0.5
            s2 = s + wnp.sum(h2) * x[1]
            return {"h": h2, "s": s2}, (h2 * x[1], s2)
        c, (ys, ss) = wg.scan(step, {"h": X0, "s": 0.5}, xs, checkpoint=strategy)
        return wnp.sum(ys * ys) + c["s"] + wnp.sum(ss) + wnp.sum(c["h"])
    return loss


@pytest.mark.parametrize("strategy", ["all", "binomial"])
def test_pytree_carry_xs_and_ys(strategy):
    loss = pytree_loss(strategy)
    b = RNG.standard_normal(6)
    xs = RNG.standard_normal((15, 2))
    g = wg.grad(loss, argnums=(0, 1, 2))
    fused = wg.compile(g, fuse=True)
    got = fused(W0, b, xs)
    assert plan(fused, W0, b, xs).fused() is not None
    assert_close(got, g(W0, b, xs))
    assert_close(got, wg.compile(g, fuse=False)(W0, b, xs))
    # the primal alone (no reverse phase): the forward function without snapshots
    f = wg.compile(loss, fuse=True)
    assert_close(f(W0, b, xs), loss(W0, b, xs))
    assert plan(f, W0, b, xs).fused() is not None


def test_invert_schedule():
    def loss(a):
        def step(x, _):
            return x * a + 1.0, None

        def back(x, _):
            return (x - 1.0) / a, None
        x, _ = wg.scan(step, X0, length=20, checkpoint="invert",
                       inverse=lambda c, x: back(c, x)[0])
        return wnp.sum(wnp.sin(x))
    a = np.full(6, 1.1)
    fused = wg.compile(wg.grad(loss), fuse=True)
    got = fused(a)
    p = plan(fused, a)
    assert p.fused() is not None and p.stats["inverted"] > 0
    assert_close(got, wg.grad(loss)(a), rtol=1e-10)


def test_step_without_numba_form_falls_back_with_reason():
    def loss(W):
        def step(x, _):
            return wnp.cumsum(wnp.tanh(W @ x)) * 0.1, None
        x, _ = wg.scan(step, X0, length=9, checkpoint="ctz")
        return wnp.sum(x)
    fused = wg.compile(wg.grad(loss), fuse=True)
    got = fused(W0)
    p = plan(fused, W0)
    assert p.fused() is None
    assert any("cumsum" in str(e) for e in p.fuse_failures), p.fuse_failures
    assert_close(got, wg.grad(loss)(W0))


def test_integer_leaf_falls_back_with_reason():
    def loss(W):
        def step(c, _):
            x, k = c
            return (x + 0.1 * wnp.tanh(W @ x), k + 1), None
        (x, k), _ = wg.scan(step, (X0, 0), length=9)
        return wnp.sum(x)
    fused = wg.compile(wg.grad(loss), fuse=True)
    assert_close(fused(W0), wg.grad(loss)(W0))
    p = plan(fused, W0)
    assert p.fused() is None and "not a float" in str(p.fuse_failures[0])


def _fused_batches(p):
    return {k[1]: n for k, n in p.fused().calls.items() if isinstance(k, tuple)}


@pytest.mark.parametrize("strategy", ["all", "ctz"])
def test_batched_cotangents_run_in_the_fused_loop(strategy):
    # a reverse Jacobian pulls back every row at once: the whole schedule runs in the
    # Numba loop compiled for cotangents with that batch axis, as the gradient's does
    def f(W):
        def step(x, _):
            return x + 0.01 * wnp.tanh(W @ x), None
        x, _ = wg.scan(step, X0, length=12, checkpoint=strategy)
        return x
    fused = wg.compile(wg.jacobian(f), fuse=True)
    unfused = wg.compile(wg.jacobian(f), fuse=False)
    got = fused(W0)
    p = plan(fused, W0)
    assert p.fuse_failures == [] and set(_fused_batches(p)) == {(6,)}
    assert plan(unfused, W0).fused() is None
    assert_close(got, wg.jacobian(f)(W0))
    assert_close(got, unfused(W0))
    # the compiled function's Jacobian (its graph evaluated under vmap over the pullback;
    # wg.compile evaluates a graph on traced arguments without fusing it)
    assert_close(wg.jacobian(wg.compile(f, fuse=True), mode="reverse")(W0), got)


@pytest.mark.parametrize("strategy", ["binomial"])
def test_batched_cotangents_of_xs_ys_and_captured_values(strategy):
    def f(W, b, xs):  # every output of the step, none summed: a Jacobian of 16 rows
        def step(c, x):
            h2 = wnp.tanh(W @ c["h"] + b * x[0]) * 0.5 + c["h"] * 0.5
            return {"h": h2, "s": c["s"] + wnp.sum(h2) * x[1]}, h2[:2] * x[1]
        c, ys = wg.scan(step, {"h": X0, "s": 0.5}, xs, checkpoint=strategy)
        return wnp.concatenate([c["h"], wnp.reshape(ys, (-1,)), wnp.reshape(c["s"], (1,))])
    b = RNG.standard_normal(6)
    xs = RNG.standard_normal((5, 2))
    J = wg.jacobian(f, argnums=(0, 1, 2), mode="reverse")
    fused = wg.compile(J, fuse=True)
    got = fused(W0, b, xs)
    p = plan(fused, W0, b, xs)
    assert p.fuse_failures == [] and set(_fused_batches(p)) == {(17,)}
    assert_close(got, J(W0, b, xs))
    assert_close(got, wg.compile(J, fuse=False)(W0, b, xs))


def _loop_text(p):
    """The generated module holding the plan's fused loop function."""
    from wengert.graph import kernel_cache
    fn = p.fused().fn
    return next(t for t, m in list(kernel_cache._LIVE.items())
                if m.__wengert_kernels__.get("loop") is fn)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_products_are_loops_in_the_step(dtype):
    # matrix @ vector, vector @ matrix, matrix @ matrix and vector @ vector, forwards and
    # in the VJP: loop nests writing into the loop's scratch arrays, not np.dot (a BLAS
    # call and a new array every step); values as NumPy's products give them
    A = (RNG.standard_normal((6, 4)) / 3).astype(dtype)
    B = (RNG.standard_normal((4, 3)) / 3).astype(dtype)

    def loss(W, A, B):
        def step(x, _):
            y = wnp.tanh(W @ x) @ A            # (6,6)@(6,) then (6,)@(6,4)
            M = (A @ B) * dtype(0.1)            # (6,4)@(4,3)
            z = x * dtype(0.9) + (M @ y[:3]) * dtype(0.01)
            if dtype == np.float64:  # a scalar result (float32 scalars do not fuse)
                z = z + (y @ y) * 0.01
            return z, None
        x, _ = wg.scan(step, X0.astype(dtype), length=11, checkpoint="all")
        return wnp.sum(x * x)
    W = W0.astype(dtype)
    g = wg.grad(loss, argnums=(0, 1, 2))
    fused = wg.compile(g, fuse=True)
    got = fused(W, A, B)
    p = plan(fused, W, A, B)
    assert p.fuse_failures == [] and p.fused() is not None
    assert_close(got, g(W, A, B), rtol=1e-12 if dtype == np.float64 else 1e-5)
    assert all(u.dtype == dtype for u in got)
    text = _loop_text(p)
    # the one np.dot left: y @ y, whose result is a scalar (no array to write into)
    assert text.count("np.dot(") <= 1 and "_s += " in text, text


def test_large_products_stay_blas_calls():
    from wengert.rules.products import SMALL_PRODUCT
    n = int(SMALL_PRODUCT ** 0.5) + 1  # n * n multiply-adds: past the loop's bound
    W = RNG.standard_normal((n, n)) / n
    x0 = RNG.standard_normal(n)

    def loss(W):
        def step(x, _):
            return x + 0.01 * wnp.tanh(W @ x), None
        x, _ = wg.scan(step, x0, length=5, checkpoint="all")
        return wnp.sum(x)
    fused = wg.compile(wg.grad(loss), fuse=True)
    got = fused(W)
    p = plan(fused, W)
    assert p.fused() is not None
    assert "np.dot(" in _loop_text(p)
    assert_close(got, wg.grad(loss)(W))


def test_unit_axis_reshapes_read_in_place():
    # x[:, None] * y (and its VJP's outer product): the loop nests index x itself, no
    # reshaped view; a reshape a product reads, or one that moves elements between axes,
    # stays a reshape
    c = RNG.standard_normal((6, 6)) / 6

    def loss(W):
        def step(x, _):
            M = wnp.reshape(x, (6, 1)) * wnp.tanh(W @ x) + c        # (6, 1) broadcast on (6,)
            col = wnp.reshape(wnp.reshape(x, (1, 6, 1)) * 0.5, (6,))  # unit axes only
            sq = wnp.reshape(wnp.reshape(M, (36,))[:6], (6,))         # from (36,): kept
            y = x * 0.9 + wnp.tanh(M @ x) * 0.01 + col * 0.01 + sq * 0.001
            return y, None
        x, _ = wg.scan(step, X0, length=13, checkpoint="all")
        return wnp.sum(x * x)
    fused = wg.compile(wg.grad(loss), fuse=True)
    got = fused(W0)
    p = plan(fused, W0)
    assert p.fuse_failures == [] and p.fused() is not None
    assert_close(got, wg.grad(loss)(W0))
    assert_close(got, wg.compile(wg.grad(loss), fuse=False)(W0))
    text = _loop_text(p)
    # left: the forward's x as (6, 1), a residual the VJP reads (a result: copied out),
    # and (36,) <-> (6, 6), which moves elements between axes
    assert text.count("reshape((6, 1))") == 1 and "reshape((1, 6, 1))" not in text
    assert "reshape((6,))" not in text and "reshape((6, 6))" in text, text


def test_joined_state_runs_in_the_loop():
    # an LSTM's step stacks its layers' new (hidden, cell) into the carry (concatenate
    # along axis 0 of unit-axis reshapes) and may join along a later axis: both are copies
    # into the result's slices inside Numba's loop (issue 32), not a step run from Python;
    # ``h[:3, None]`` is read as NumPy reads it
    M0 = RNG.standard_normal((3, 4)) / 2

    def loss(W):
        def step(state, x):
            h, c = state[0], state[1]
            c = c * 0.9 + wnp.tanh(W @ h + x) * 0.1
            h = wnp.tanh(c) * 0.5
            J = wnp.concatenate([M0[:, :1] * h[:3, None], M0[:, 1:] * c[:3, None]], axis=1)
            return wnp.stack([h, c]), wnp.sum(J * J)
        xs = np.linspace(-1.0, 1.0, 5 * 6).reshape(5, 6)
        state, ys = wg.scan(step, np.stack([X0, X0 * 0.5]), xs, checkpoint="all")
        return wnp.sum(state * state) + wnp.sum(ys)
    g = wg.value_and_grad(loss)
    fused = wg.compile(g, fuse=True)
    got = fused(W0)
    p = plan(fused, W0)
    assert p.fuse_failures == [] and p.fused() is not None
    assert_close(got, g(W0))
    assert_close(got, wg.compile(g, fuse=False)(W0))
    text = _loop_text(p)
    assert "np.concatenate" not in text and "_copy2(" in text, text
