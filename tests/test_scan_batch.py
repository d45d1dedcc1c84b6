"""A compiled scan under ``wg.vmap``: the step mapped over the batch once (a plan of the
batched step), the schedule run once for the whole batch -- not once per example.

Per-example gradients, a vmap of a compiled (traced) scan, Jacobians in both modes of a
mapped scan, every schedule: against the eager scan example by example.
"""
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

compiled = sys.modules["wengert.checkpoint.compiled"]

STRATS = ("all", "binomial", "ctz", "ctz-revolve", "invert")
RNG = np.random.default_rng(31)
W0 = RNG.standard_normal((4, 4)) / 2
X = RNG.standard_normal((3, 4))          # a batch of 3 initial states
XS = RNG.standard_normal((3, 7, 4)) * 0.1  # a batch of 3 inputs of 7 steps


def _close(a, b, rtol=1e-11):
    la, da = wg.tree.flatten(a)
    lb, db = wg.tree.flatten(b)
    assert da == db
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-13)


def loss(how):
    """A carry, ys, xs and a closed-over matrix; invertible, so every schedule runs it."""
    def f(W, x0, xs):
        def step(c, x):
            return c + 0.1 * wnp.tanh(W @ c) + x, c * c

        def inverse(c, x):  # one fixed-point pass is not exact: a few
            p = c - x
            for _ in range(20):
                p = c - x - 0.1 * wnp.tanh(W @ p)
            return p
        c, ys = wg.scan(step, x0, xs, checkpoint=how, snapshots=2,
                        inverse=inverse if how == "invert" else None)
        return wnp.sum(c * c) + wnp.sum(ys * wnp.cos(ys))
    return f


def _per_example(fn, *batched):
    return np.stack([fn(*a) for a in zip(*batched)])


def _plans(cf):
    return [p for g in cf.graphs for p in compiled.plans_of(g)]


@pytest.fixture
def per_example_calls(monkeypatch):
    """The primitives the compiled scan's batch rule ran once per example."""
    calls = []
    orig = compiled.per_example

    def spy(prim, *args, **kwargs):
        calls.append(prim.name)
        return orig(prim, *args, **kwargs)
    monkeypatch.setattr(compiled, "per_example", spy)
    return calls


@pytest.mark.parametrize("how", STRATS)
def test_per_example_gradients_of_a_traced_scan(how, per_example_calls):
    f = loss(how)
    g = wg.grad(f, argnums=(0, 1, 2))
    ref = [np.stack(r) for r in zip(*[g(W0, x, xs) for x, xs in zip(X, XS)])]
    traced = wg.trace(g, W0, X[0], XS[0])
    (plan,) = compiled.plans_of(traced)
    before = dict(plan.stats)  # (tracing ran the loop once, on the example)
    got = wg.vmap(traced, in_axes=(None, 0, 0))(W0, X, XS)
    _close(got, tuple(ref), 1e-9 if how == "invert" else 1e-11)
    # the schedule ran once, on the whole batch: no example by example
    assert per_example_calls == []
    assert plan.stats == before  # the traced plan's own loop did not run again
    bps = [p for p in plan._batched.values() if p is not None]
    assert len(bps) == 1 and bps[0].batch_size == 3
    assert bps[0].stats["vjps"] == 7


@pytest.mark.parametrize("how", STRATS)
def test_compile_of_vmapped_grad_keeps_the_loop(how):
    f = loss(how)
    g = wg.vmap(wg.grad(f, argnums=(0, 1)), in_axes=(None, 0, 0))
    ref = tuple(np.stack(r) for r in zip(*[wg.grad(f, argnums=(0, 1))(W0, x, xs)
                                            for x, xs in zip(X, XS)]))
    cg = wg.compile(g)
    _close(cg(W0, X, XS), ref, 1e-9 if how == "invert" else 1e-11)
    _close(cg(W0 * 0.5, X, XS), g(W0 * 0.5, X, XS), 1e-9)
    names = sorted(n.prim.name for n in cg.graph(W0, X, XS).nodes
                   if n.kind == "op" and n.prim.name.startswith("scan"))
    assert names == ["scan_forward", "scan_reverse"]  # not unrolled: one loop, batched
    (p,) = _plans(cg)
    assert p.batch_size == 3


@pytest.mark.parametrize("how", STRATS)
def test_vmap_of_traced_scan_and_compiled_vmap(how, per_example_calls):
    f = loss(how)
    ref = _per_example(lambda x, xs: f(W0, x, xs), X, XS)
    traced = wg.trace(f, W0, X[0], XS[0])
    _close(wg.vmap(traced, in_axes=(None, 0, 0))(W0, X, XS), ref)
    assert per_example_calls == []
    cf = wg.compile(wg.vmap(f, in_axes=(None, 0, 0)))
    _close(cf(W0, X, XS), ref)
    (p,) = _plans(cf)
    p.stats["steps"] = 0
    cf(W0, X, XS)
    assert p.batch_size == 3 and p.stats["steps"] == 7  # one loop of 7 steps for them all
    # the matrix batched as well as the states
    Ws = np.stack([W0, W0 * 0.5, -W0])
    _close(wg.vmap(traced)(Ws, X, XS), _per_example(f, Ws, X, XS))


@pytest.mark.parametrize("how", STRATS)
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobians_of_a_mapped_compiled_scan(how, mode):
    f = loss(how)

    def per_state(W, X):  # each example's loss: a function R^{4x4} x R^{3x4} -> R^3
        return wg.vmap(f, in_axes=(None, 0, 0))(W, X, XS)
    ref = wg.jacobian(per_state, argnums=(0, 1), mode=mode)(W0, X)
    tol = 1e-9 if how == "invert" else 1e-11
    cj = wg.compile(wg.jacobian(per_state, argnums=(0, 1), mode=mode))
    _close(cj(W0, X), ref, tol)
    _close(wg.jacobian(wg.compile(per_state), argnums=(0, 1), mode=mode)(W0, X), ref, tol)
    # against the eager scan, example by example
    for i in range(3):
        ji = wg.jacobian(lambda W, x: f(W, x, XS[i]), argnums=(0, 1))(W0, X[i])
        _close(ref[0][i], ji[0], tol)
        _close(ref[1][i, i], ji[1], tol)


def test_unbatchable_step_runs_once_per_example_and_says_why(monkeypatch, per_example_calls):
    def refuse(plan, flags, size):
        raise ValueError("no batch rule")
    monkeypatch.setattr(compiled, "_batched_plan", refuse)
    f = loss("ctz")
    traced = wg.trace(f, W0, X[0], XS[0])
    (plan,) = compiled.plans_of(traced)
    _close(wg.vmap(traced, in_axes=(None, 0, 0))(W0, X, XS),
           _per_example(lambda x, xs: f(W0, x, xs), X, XS))
    assert per_example_calls == ["scan_loop"]
    assert plan.stats["per_example"] == 3
    assert any(isinstance(e, compiled.NotBatchable) and "once per example" in str(e)
               for e in plan.fuse_failures)


@pytest.mark.parametrize("how", STRATS)
def test_only_xs_batched(how, per_example_calls):
    # the carry starts unbatched and becomes batched after one step: it is batched on entry
    f = loss(how)
    traced = wg.trace(f, W0, X[0], XS[0])
    _close(wg.vmap(traced, in_axes=(None, None, 0))(W0, X[0], XS),
           _per_example(lambda xs: f(W0, X[0], xs), XS))
    g = wg.trace(wg.grad(f), W0, X[0], XS[0])
    _close(wg.vmap(g, in_axes=(None, None, 0))(W0, X[0], XS),
           _per_example(lambda xs: wg.grad(f)(W0, X[0], xs), XS), 1e-9)
    assert per_example_calls == []


@pytest.mark.parametrize("how", STRATS)
def test_forward_jacobian_is_one_mapped_loop_of_the_pushforward(how):
    # jacobian(mode="forward") is vmap over jvp: the scan's pushforward is a loop whose
    # carry holds the tangents, and the vmap maps that loop -- not an unrolled scan
    f = loss(how)

    def g(W, x0):
        return wg.grad(f, argnums=1)(W, x0, XS[0])  # a vector: 4 outputs
    J = wg.jacobian(g, argnums=(0, 1), mode="forward")
    tol = 1e-8 if how == "invert" else 1e-10
    _close(wg.compile(J)(W0, X[0]), J(W0, X[0]), tol)

    def h(W, x0):
        return wg.scan(lambda c, x: (c + 0.1 * wnp.tanh(W @ c) + x, c * c), x0, XS[0],
                       checkpoint=how if how != "invert" else "ctz")[1]
    Jh = wg.jacobian(h, argnums=(0, 1), mode="forward")
    cj = wg.compile(Jh)
    _close(cj(W0, X[0]), Jh(W0, X[0]))
    _close(cj(W0, X[0]), wg.jacobian(h, argnums=(0, 1), mode="reverse")(W0, X[0]))
    names = [n.prim.name for n in cj.graph(W0, X[0]).nodes
             if n.kind == "op" and n.prim.name.startswith("scan")]
    assert names == ["scan_loop"]
    (p,) = _plans(cj)
    assert p.batch_size == 20  # 16 + 4 directions at once, in one loop
    # its carry: the primal state once for all directions, then the 20 tangents
    assert [np.shape(v) for v in p.step_graph.example_args[:2]] == [(4,), (20, 4)]
    # the compiled function's jvp and forward Jacobian: the pushed loop too
    ch = wg.compile(h)
    _close(wg.jacobian(ch, argnums=(0, 1), mode="forward")(W0, X[0]), Jh(W0, X[0]))
    _close(wg.jvp(ch, (W0, X[0]), (W0, X[0]))[1], wg.jvp(h, (W0, X[0]), (W0, X[0]))[1])
