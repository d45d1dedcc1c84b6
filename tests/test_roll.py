"""Rolling (graph/roll.py): an unrolled loop's trace given back as a scan, bit for bit."""
import os
import pickle
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph.roll import MIN_COPIES, find_stretches, roll

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import bench_roll  # noqa: E402  (the benchmark's LSTM loop, rolled here too)

RNG = np.random.default_rng(7)
N = 10
W = RNG.standard_normal((N, N)) / N
X0 = RNG.standard_normal(N)


def chain(steps):
    def f(x, W):
        for _ in range(steps):
            x = x + 0.01 * wnp.tanh(W @ x)
        return wnp.sum(x * x)
    return f


_chain50 = chain(50)
_chain50.__qualname__ = _chain50.__name__ = "_chain50"  # picklable by name


def same(a, b):
    """Equal bits, leaf by leaf (``==`` on every element, NaN nowhere)."""
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert type(u) is type(v)
        assert np.shape(u) == np.shape(v)
        assert np.all(np.asarray(u) == np.asarray(v)), (u, v)


def both(fn, *args, fuse=False):
    """(rolled compiled, unrolled compiled) of ``fn``, each called once on ``args``."""
    rolled = wg.compile(fn, fuse=fuse, roll=True)
    unrolled = wg.compile(fn, fuse=fuse, roll=False)
    out = rolled(*args), unrolled(*args)
    assert rolled.roll_failures == []  # what did not roll was refused, not broken
    return (rolled,) + out


def test_chain_forward_rolls_bit_identical():
    f = chain(500)
    cf, a, b = both(f, X0, W)
    same(a, b)
    same(a, f(X0, W))  # the NumPy program computes what the eager one does
    assert [(s.copies, s.period) for s in cf.rolled] == [(500, 4)]
    src = cf.source(X0, W)
    assert "scan_loop" in src and src.count("tanh") <= 1
    assert len(cf.graph(X0, W).nodes) < 20


def test_chain_gradient_rolls_both_sweeps():
    df = wg.grad(chain(500), argnums=(0, 1))
    cf, a, b = both(df, X0, W)
    same(a, b)
    same(a, df(X0, W))
    assert len(cf.rolled) == 2
    assert all(s.copies >= 490 for s in cf.rolled)
    assert cf.source(X0, W).count("scan_loop") == 2
    # other inputs, same program: still equal bits
    x1, W1 = RNG.standard_normal(N), RNG.standard_normal((N, N)) / N
    same(cf(x1, W1), wg.compile(df, fuse=False, roll=False)(x1, W1))


def test_lstm_cell_loop_and_its_gradient_roll():
    loss, args = bench_roll.lstm_loss(60, seed=3)
    cf, a, b = both(loss, *args)
    same(a, b)
    assert cf.rolled and cf.rolled[0].copies >= 58
    dl = wg.grad(loss, argnums=(0, 1))
    cf, a, b = both(dl, *args)
    same(a, b)
    same(a, dl(*args))
    assert len(cf.rolled) == 2


def test_per_step_constants_become_the_scans_xs():
    c = np.linspace(0.5, 1.5, 40)          # a NumPy scalar per step
    B = RNG.standard_normal((40, N)) * 0.1  # a row per step

    def f(x, W):
        for k in range(40):
            x = x + c[k] * wnp.tanh(W @ x) + B[k]
        return wnp.sum(x * x)
    for fn in (f, wg.grad(f, argnums=(0, 1))):
        cf, a, b = both(fn, X0, W)
        same(a, b)
        assert cf.rolled and cf.rolled[0].copies >= 39


def test_a_loop_that_does_not_repeat_exactly_stays_unrolled():
    def skip(x, W):  # copy k reads copy k - 2: the same primitives, another dependence
        prev = x
        for _ in range(30):
            x, prev = prev + 0.01 * wnp.tanh(W @ x), x
        return wnp.sum(x * x)

    def python_scalars(x, W):  # a Python float per step: stacking would change its type
        for k in range(30):
            x = x + (0.01 * k) * wnp.tanh(W @ x)
        return wnp.sum(x * x)

    def varying(x, W):  # the body changes at every third step
        for k in range(30):
            x = x + 0.01 * (wnp.tanh if k % 3 else wnp.sin)(W @ x)
        return wnp.sum(x * x)
    for f in (skip, python_scalars):
        cf, a, b = both(f, X0, W)
        same(a, b)
        assert cf.rolled == [], f.__name__
    cf, a, b = both(varying, X0, W)  # it repeats with period 3 steps: rolled as such
    same(a, b)
    assert all(s.period % 12 == 0 for s in cf.rolled)


def test_guarded_steps_stay_unrolled():
    def f(x, W):
        for _ in range(20):
            y = W @ x
            if wnp.sum(y) > -1e9:  # a branch on a traced value in every step
                x = x + 0.01 * wnp.tanh(y)
        return wnp.sum(x)
    cf, a, b = both(f, X0, W)
    same(a, b)
    assert cf.rolled == []


def test_fewer_than_min_copies_stay_unrolled():
    assert MIN_COPIES == 8
    short = wg.trace(chain(MIN_COPIES - 1), X0, W)
    assert find_stretches(short) == []
    g, stretches = roll(short)
    assert g is short and stretches == []
    enough = wg.trace(chain(MIN_COPIES), X0, W)
    assert [s.copies for s in find_stretches(enough)] == [MIN_COPIES]


def test_roll_false_keeps_the_straight_line_program():
    cf = wg.compile(chain(50), fuse=False, roll=False)
    cf(X0, W)
    assert cf.rolled == [] and "scan_loop" not in cf.source(X0, W)
    assert cf.source(X0, W).count("tanh") == 50
    again = pickle.loads(pickle.dumps(wg.compile(_chain50, fuse=False, roll=False)))
    assert again.roll is False
    assert pickle.loads(pickle.dumps(wg.compile(_chain50))).roll is None
    assert pickle.loads(pickle.dumps(wg.compile(_chain50, roll=True))).roll is True


def test_rolled_graph_differentiates_and_transforms_see_the_unrolled_one():
    f = chain(40)
    cf = wg.compile(f, fuse=False, roll=True)
    g = cf.graph(X0, W)
    assert "scan_loop" in g.source()
    ref = wg.grad(f, argnums=(0, 1))(X0, W)
    for u, v in zip(g.grad(argnums=(0, 1))(X0, W), ref):  # the scan's own pullback
        np.testing.assert_allclose(u, v, rtol=1e-12)
    same(wg.grad(cf, argnums=(0, 1))(X0, W), ref)  # traced calls evaluate the unrolled graph
    out = wg.vmap(cf, in_axes=(0, None))(np.stack([X0, 2 * X0]), W)
    same(out[0], f(X0, W))


def test_fused_rolled_loops_fuse_where_it_pays():
    pytest.importorskip("numba")
    import warnings
    from wengert.checkpoint.compiled import plans_of
    from wengert.graph.fuse import UnfusedWarning
    df = wg.grad(chain(30), argnums=(0, 1))  # short loops: Numba's loop would not pay
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cf, a, b = both(df, X0, W, fuse=True)
    for u, v in zip(a, b):  # fused programs: round-off, as any fused program (graph.md)
        np.testing.assert_allclose(u, v, rtol=1e-13, atol=1e-15)
    assert len(cf.rolled) == 2
    said = [str(w.message) for w in caught if w.category is UnfusedWarning]
    assert sum("a rolled loop of" in m for m in said) == 2
    assert all(p.fused() is None for p in plans_of(cf.graph(X0, W)))
    f = chain(2000)  # a long loop of a small step: its loop runs inside Numba
    cf = wg.compile(f, fuse=True)  # so the default rolls it
    np.testing.assert_allclose(cf(X0, W), wg.compile(f, fuse=False, roll=False)(X0, W),
                               rtol=1e-12)
    (plan,) = plans_of(cf.graph(X0, W))
    assert plan.fused() is not None and plan.fused().calls.get("forward")
    assert not any("rolled loop" in str(e) for e in cf.fuse_failures)


def test_rows_of_a_traced_array_read_in_order_or_reversed():
    X = RNG.standard_normal((40, N))

    def forwards(x, W, X):
        for k in range(40):
            x = x + 0.01 * wnp.tanh(W @ x + X[k])
        return wnp.sum(x * x)

    def backwards(x, W, X):
        for k in range(39, -1, -1):
            x = x + 0.01 * wnp.tanh(W @ x + X[k])
        return wnp.sum(x * x)

    def every_other(x, W, X):  # rows 0, 2, 4...: not one step apart, stays unrolled
        for k in range(0, 40, 2):
            x = x + 0.01 * wnp.tanh(W @ x + X[k])
        return wnp.sum(x * x)
    for f in (forwards, backwards):
        cf, a, b = both(f, X0, W, X)
        same(a, b)
        assert [s.copies for s in cf.rolled] == [40]
        df = wg.grad(f, argnums=(0, 1))  # X's cotangent unasked: both sweeps roll
        cf, a, b = both(df, X0, W, X)
        same(a, b)
        assert len(cf.rolled) == 2
        df = wg.grad(f, argnums=(0, 1, 2))  # X's rows' cotangents written per step: the
        cf, a, b = both(df, X0, W, X)       # reverse sweep stays unrolled, still exact
        same(a, b)
    cf, a, b = both(every_other, X0, W, X)
    same(a, b)
    assert cf.rolled == []


def test_equal_constants_of_every_copy_are_one_loop_constant():
    def f(x, W):
        for _ in range(20):  # a fresh array per step, the same bits each time
            x = x * 0.5 + np.full(N, 0.1) + 0.01 * wnp.tanh(W @ x)
        return wnp.sum(x)
    cf, a, b = both(f, X0, W)
    same(a, b)
    (s,) = cf.rolled
    assert s.copies == 20
    assert all(k[0] != "xs" for kinds in s.plan for k in kinds)


def test_fused_scan_with_results_of_several_shapes_fuses():
    """budget.fit costed each node by np.size of its value: a scan's tuple of results of
    several shapes made it raise, and the whole program fell back to NumPy."""
    pytest.importorskip("numba")
    from wengert.checkpoint.compiled import plans_of

    def f(x, W):
        def step(c, _):
            x, M = c
            x = x + 0.01 * wnp.tanh(M @ x)
            return (x, M * 0.999), None
        (x, M), _ = wg.scan(step, (x, W), length=12)
        return wnp.sum(wnp.tanh(x) * 2.0 + 1.0) + wnp.sum(M * M)  # kernels around the scan
    cf = wg.compile(f, fuse=True)
    np.testing.assert_allclose(cf(X0, W), f(X0, W), rtol=1e-13)
    assert cf.fuse_failures == []
    (plan,) = plans_of(cf.graph(X0, W))
    assert plan.fused() is not None and "run" in plan.fused().kernels  # run only: no VJP


def test_a_rolled_program_does_not_keep_the_unrolled_trace():
    """The rolled loop's plan kept the function that traced its step, whose closure held the
    whole unrolled trace with its values: twice the nodes of the program kept for traced
    calls (API.md: a compiled function keeps its program, not its first call's values)."""
    import gc
    from wengert.graph.ir import Node

    def kept(roll):
        df = wg.grad(chain(300), argnums=(0, 1))
        cf = wg.compile(df, fuse=False, roll=roll)
        gc.collect()
        before = sum(1 for o in gc.get_objects() if type(o) is Node)
        cf(X0, W)
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is Node) - before, cf
    rolled, cf = kept(True)
    unrolled, _ = kept(False)
    assert cf.rolled
    # both keep the unrolled program for traced calls; only roll=False keeps a second copy
    assert rolled < 0.6 * unrolled


def test_guards_outside_the_loop_are_kept():
    def f(x, W):
        scale = 0.01 if wnp.sum(x) > 0 else 0.02  # a branch before the loop: a guard
        for _ in range(20):
            x = x + scale * wnp.tanh(W @ x)
        return wnp.sum(x * x)
    cf, a, b = both(f, X0, W)
    same(a, b)
    assert cf.rolled and cf.graph(X0, W).guards
    other = -X0 if np.sum(X0) > 0 else X0 + 10.0  # the other branch: traced again, right
    same(cf(other, W), f(other, W))
    assert cf.num_traces == 2


def _small_loops(x):
    """bench_compile's two loops: 100 steps of 3 elementwise nodes on 10 numbers, and a
    Rosenbrock sum over x[i] (Python floats in the straight line)."""
    y = x
    for _ in range(100):
        y = wnp.tanh(y) * 0.9 + 0.1
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return wnp.sum(y) + s


def test_the_default_keeps_short_programs_whose_loops_would_run_from_python_unrolled(
        monkeypatch):
    """roll=None (the default) rolls where that pays at run time too: rolled, these loops ran
    from Python, 36x and 26x slower than their straight lines (bench_compile, fused)."""
    from wengert.graph import roll as roll_module
    x = np.linspace(0.1, 1.0, 40)
    df = wg.grad(_small_loops)
    cf = wg.compile(df, fuse=False)
    out = cf(x)
    assert cf.rolled == [] and "scan_loop" not in cf.source(x)
    assert any("kept unrolled" in str(w) for w in cf.roll_failures)
    forced = wg.compile(df, fuse=False, roll=True)
    same(forced(x), out)
    assert forced.rolled and "scan_loop" in forced.source(x)
    monkeypatch.setattr(roll_module, "LONG", 100)  # a long program: compiling it is the cost
    long = wg.compile(df, fuse=False)
    same(long(x), out)
    assert long.rolled and long.roll_failures == []


def test_the_default_builds_no_rolled_program_it_would_throw_away(monkeypatch):
    """An unfused program under ``LONG`` nodes keeps its straight line whatever its loops are,
    so roll=None only finds them (to say why) and never rebuilds the program as scans."""
    from wengert.graph import roll as roll_module

    def refuse(*a, **k):
        raise AssertionError("the rolled program was built and thrown away")
    monkeypatch.setattr(roll_module._Rebuild, "run", refuse)
    x = np.linspace(0.1, 1.0, 40)
    cf = wg.compile(wg.grad(_small_loops), fuse=False)
    same(cf(x), wg.compile(wg.grad(_small_loops), fuse=False, roll=False)(x))
    assert cf.rolled == [] and cf.roll_failures
    assert all("kept unrolled" in str(w) for w in cf.roll_failures)
