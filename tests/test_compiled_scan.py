"""wg.scan under wg.compile: one node that runs the schedule, equal to the eager scan.

The compiled program must not unroll the loop (its size does not grow with N) and must
keep the schedule's memory bound: the plans' counters and tracemalloc observe it.
"""
import math
import sys
import tracemalloc

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

compiled = sys.modules["wengert.checkpoint.compiled"]

STRATS = ("all", "ctz", "binomial", "invert")


def _close(a, b, rtol=1e-12):
    la, da = wg.tree.flatten(a)
    lb, db = wg.tree.flatten(b)
    assert da == db
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-14)


def _scan_nodes(cf, *args):
    g = cf.graph(*args)
    return sorted(n.prim.name for n in g.nodes if n.kind == "op" and n.prim.name.startswith("scan"))


def _plans(cf):
    return [p for g in cf.graphs for p in compiled.plans_of(g)]


def _coupled(a, n, how, snapshots=2):
    """An invertible two-part step (every strategy can run it), with a pytree carry, an int
    leaf, pytree xs and ys, closing over ``a``."""
    def loss(a, xs):
        def step(c, x):
            u, v, k = c["u"], c["v"], c["k"]
            u = u + 0.3 * wnp.sin(v) * a + x[0]
            v = v + 0.5 * wnp.tanh(wnp.sum(u)) + x[1]
            return {"u": u, "v": v, "k": k + 1}, (u * v, wnp.sum(u))

        def inverse(c, x):
            u, v, k = c["u"], c["v"], c["k"]
            v = v - 0.5 * wnp.tanh(wnp.sum(u)) - x[1]
            u = u - 0.3 * wnp.sin(v) * a - x[0]
            return {"u": u, "v": v, "k": k - 1}
        c, (p, q) = wg.scan(step, {"u": np.array([0.1, 0.2]), "v": 0.3, "k": 0}, xs,
                            checkpoint=how, snapshots=snapshots, inverse=inverse)
        return wnp.sum(p) + wnp.sum(q) * c["v"] + c["k"] * 0.0
    rng = np.random.default_rng(n)
    return loss, (rng.standard_normal((n, 2)) * 0.1, rng.standard_normal(n) * 0.1)


@pytest.mark.parametrize("how", STRATS)
@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_compiled_equals_eager(how, n):
    loss, xs = _coupled(0.7, n, how)
    cf = wg.compile(loss)
    _close(cf(0.7, xs), loss(0.7, xs))
    assert _scan_nodes(cf, 0.7, xs) == ["scan_loop"]
    both = wg.value_and_grad(loss, argnums=(0, 1))
    cg = wg.compile(both)
    _close(cg(0.7, xs), both(0.7, xs))
    assert _scan_nodes(cg, 0.7, xs) == ["scan_forward", "scan_reverse"]
    # the program does not grow with N: the loop is not unrolled
    assert len(cg.graph(0.7, xs)) < 40


@pytest.mark.parametrize("how", STRATS)
def test_check_grad_through_compiled_scan(how):
    # forward mode runs the eager loop on the step graph; reverse mode the compiled schedule
    loss, xs = _coupled(0.7, 9, how)
    wg.check_grad(wg.compile(lambda a: loss(a, xs)), 0.7)
    wg.check_grad(wg.compile(lambda x0: loss(0.7, (x0, xs[1]))), xs[0])


@pytest.mark.parametrize("how", STRATS)
def test_step_closing_over_parameters(how):
    rng = np.random.default_rng(1)
    W0 = rng.standard_normal((4, 4)) / 2
    x0 = rng.standard_normal(4)

    def loss(W, b):
        def step(c, _):
            p, q = c
            p = p + 0.1 * wnp.tanh(W @ q + b)
            q = q + 0.1 * wnp.tanh(W @ p)
            return (p, q), None

        def inverse(c, _):
            p, q = c
            q = q - 0.1 * wnp.tanh(W @ p)
            p = p - 0.1 * wnp.tanh(W @ q + b)
            return p, q
        (p, q), ys = wg.scan(step, (x0, x0 * 0.5), length=33, checkpoint=how, inverse=inverse)
        assert ys is None
        return wnp.sum(p * q)
    g = wg.grad(loss, argnums=(0, 1))
    cg = wg.compile(g)
    _close(cg(W0, 0.2), g(W0, 0.2))
    assert _scan_nodes(cg, W0, 0.2) == ["scan_forward", "scan_reverse"]
    wg.check_grad(wg.compile(lambda W: loss(W, 0.2)), W0, modes=("reverse",))


@pytest.mark.parametrize("how,snapshots", [("all", None), ("ctz", None), ("binomial", 3),
                                           ("binomial", 0), ("invert", None)])
@pytest.mark.parametrize("n", [1, 2, 13, 64, 100])
def test_stored_states_follow_the_schedule(how, snapshots, n):
    loss, xs = _coupled(0.7, n, how, snapshots)
    cg = wg.compile(wg.grad(loss))
    cg(0.7, xs)
    (plan,) = _plans(cg)
    plan.stats.update(max_stored=0, steps=0, vjps=0, inverted=0)
    cg(0.8, xs)
    st = wg.checkpoint_schedule(n, how, snapshots).stats()
    assert plan.stats["max_stored"] == st["max_stored"]
    assert plan.stats["vjps"] == n
    # steps: the schedule's advances, plus the one that makes the final carry
    assert plan.stats["steps"] == st["advanced"] + 1
    assert plan.stats["inverted"] == st["inverted"]
    bound = {"all": n, "ctz": n.bit_length(), "binomial": (snapshots or 0) + 1, "invert": 0}
    assert plan.stats["max_stored"] <= bound[how]


def test_memory_bound_observed():
    # what the compiled backward sweep holds, measured: states of 20,000 floats over 256 steps
    m, n = 20_000, 256
    x0 = np.linspace(0, 1, m)

    def peak(how):
        def f(a):
            c, _ = wg.scan(lambda c, _: (c + 0.01 * wnp.sin(a * c), None), x0, length=n,
                           checkpoint=how, snapshots=4, inverse=lambda c, _: c)
            return wnp.sum(c)
        cf = wg.compile(wg.grad(f))
        cf(0.5)
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            cf(0.5)
            return (tracemalloc.get_traced_memory()[1] - base) / x0.nbytes
        finally:
            tracemalloc.stop()
    work = peak("invert")  # no state stored: what one step's VJP needs
    assert peak("all") > n
    assert peak("ctz") <= work + math.floor(math.log2(n)) + 1 + 1
    assert peak("binomial") <= work + 4 + 1 + 1


def test_ten_thousand_steps_neither_recurse_nor_unroll():
    n = 10_000

    def f(a):
        c, ys = wg.scan(lambda c, x: (c + 1e-4 * wnp.sin(a * c + x), c), 0.3,
                        np.linspace(0, 1, n), checkpoint="ctz")
        return c + wnp.sum(ys) * 1e-3
    cg = wg.compile(wg.grad(f))
    _close(cg(0.7), wg.grad(f)(0.7))
    assert len(cg.graph(0.7)) < 20
    (plan,) = _plans(cg)
    assert plan.stats["max_stored"] <= math.floor(math.log2(n)) + 1


@pytest.mark.parametrize("how", ["ctz", "binomial"])
def test_length_given_and_ys_returned(how):
    def f(a):
        c, ys = wg.scan(lambda c, _: (c * wnp.cos(a) + 0.1, {"y": c * c, "z": (c, a * c)}),
                        np.array([0.2, 0.4]), length=11, checkpoint=how)
        return c, ys
    cf = wg.compile(f)
    _close(cf(0.3), f(0.3))
    loss = lambda a: wnp.sum(f(a)[1]["z"][1]) + wnp.sum(f(a)[0])  # noqa: E731
    _close(wg.compile(wg.grad(loss))(0.3), wg.grad(loss)(0.3))


def test_compile_reuse_across_calls():
    loss, xs = _coupled(0.7, 20, "ctz")
    cg = wg.compile(wg.grad(loss))
    for a in (0.7, 0.1, -0.4):
        _close(cg(a, xs), wg.grad(loss)(a, xs))
    xs2 = tuple(x * 2 for x in xs)
    _close(cg(0.7, xs2), wg.grad(loss)(0.7, xs2))
    assert cg.num_traces == 1


def test_float32_kept():
    x32 = np.ones(3, np.float32)

    def g(x):
        return wnp.sum(wg.scan(lambda c, _: (c * np.float32(0.9) + wnp.sin(c), c), x, length=5,
                               checkpoint="ctz")[1])
    r = wg.compile(wg.grad(g))(x32)
    assert r.dtype == np.float32
    _close(r, wg.grad(g)(x32))


@pytest.mark.parametrize("how", ["all", "ctz", "binomial"])
def test_transforms_of_compiled_scan(how):
    # other engines meeting the loop node run the eager scan on the step graph
    loss, xs = _coupled(0.7, 6, how)
    cf = wg.compile(loss)
    _close(wg.grad(cf)(0.7, xs), wg.grad(loss)(0.7, xs))
    _close(wg.jvp(cf, (0.7, xs), (1.0, xs))[1], wg.jvp(loss, (0.7, xs), (1.0, xs))[1])
    _close(wg.hessian(cf)(0.7, xs), wg.hessian(loss)(0.7, xs))
    _close(wg.compile(wg.hessian(loss))(0.7, xs), wg.hessian(loss)(0.7, xs))

    def J(a, xs):
        return wg.scan(lambda c, x: (c * wnp.cos(c + a) + x, c * c), np.array([0.1, 0.3]), xs,
                       checkpoint=how)[1]
    ones = np.ones((5, 2))
    ref = wg.jacobian(J, mode="reverse")(0.4, ones)
    _close(wg.jacobian(wg.compile(J), mode="reverse")(0.4, ones), ref)
    cj = wg.compile(wg.jacobian(J, mode="reverse"))
    _close(cj(0.4, ones), ref)
    # every row pulled back at once: cotangents with a batch axis, still the compiled loop
    assert _scan_nodes(cj, 0.4, ones) == ["scan_forward", "scan_reverse"]
    J1 = wg.jacobian(J, argnums=1, mode="reverse")
    _close(wg.compile(J1)(0.4, ones), J1(0.4, ones))
    _close(wg.compile(wg.jacobian(J, argnums=(0, 1), mode="forward"))(0.4, ones),
           wg.jacobian(J, argnums=(0, 1), mode="forward")(0.4, ones))
    # the compiled gradient's own graph, differentiated again
    gg = wg.trace(wg.grad(loss), 0.7, xs)
    _close(gg.grad()(0.7, xs), wg.hessian(loss)(0.7, xs))


def test_pullback_called_twice_rebuilds_the_snapshots():
    def k(x):
        return wnp.sum(wg.scan(lambda c, u: (c * wnp.sin(c + u), c), x, np.linspace(0, 1, 9),
                               checkpoint="ctz")[1])
    _, pb = wg.vjp(wg.compile(k), 0.4)
    _, pb_eager = wg.vjp(k, 0.4)
    for g in (1.0, 2.0, -1.0):
        _close(pb(g), pb_eager(g))


def test_nested_scans():
    def f(a):
        def outer(c, x):
            c2, _ = wg.scan(lambda d, y: (d * wnp.cos(a * y) + 0.1, None), c,
                            np.linspace(0, 1, 4) + x, checkpoint="ctz")
            return c2, c2 * c2
        c, ys = wg.scan(outer, a, np.linspace(0, 1, 5), checkpoint="binomial", snapshots=1)
        return c + wnp.sum(ys)
    _close(wg.compile(f)(0.3), f(0.3))
    cg = wg.compile(wg.grad(f))
    _close(cg(0.3), wg.grad(f)(0.3))
    assert _scan_nodes(cg, 0.3) == ["scan_forward", "scan_reverse"]


def test_branching_step_unrolls_and_retraces():
    # one graph cannot stand for a step that branches on its values: the loop unrolls,
    # with guards, as before
    def h(x):
        def step(c, _):
            if c > 1.0:
                return c * 0.5, None
            return c * wnp.sin(c) + 2.0 * c, None
        return wg.scan(step, x, length=6, checkpoint="ctz")[0]
    ch = wg.compile(wg.grad(h))
    for x in (0.7, 0.3, 1.5):
        _close(ch(x), wg.grad(h)(x))
    assert _scan_nodes(ch, 0.7) == []


def test_errors_under_compile_are_the_eager_ones():
    with pytest.raises(ValueError, match="must return a pair"):
        wg.compile(lambda x: wg.scan(lambda c, _: c, x, length=3)[0])(1.0)
    with pytest.raises(ValueError, match="carry of structure"):
        wg.compile(lambda x: wg.scan(lambda c, _: ((c, c), None), x, length=3)[0])(1.0)


def test_random_lengths_and_snapshots():
    # compiled against eager over lengths and snapshot counts drawn at random
    rng = np.random.default_rng(22)
    for _ in range(12):
        n = int(rng.integers(1, 80))
        how = str(rng.choice(["all", "ctz", "binomial", "online", "invert"]))
        snaps = int(rng.integers(0, 5)) if how in ("binomial", "online") else None
        loss, xs = _coupled(0.7, n, how, snaps)
        g = wg.grad(loss, argnums=(0, 1))
        cg = wg.compile(g)
        _close(cg(0.4, xs), g(0.4, xs))
        (plan,) = _plans(cg)
        assert plan.stats["max_stored"] <= wg.checkpoint_schedule(n, how, snaps).stats()[
            "max_stored"]
