"""Fusion within a compile-time budget (wengert/graph/budget.py, issue 32): long groups cut
into kernels of a bounded size, the repeating ones sharing one source; fusion given up, and
said so, where Numba's compile would cost more than the program saves.  The programs here
are long straight lines on purpose: ``roll=False`` keeps their loops unrolled (rolled, they
would be scans: graph/roll.py, tests/test_roll.py)."""
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import budget

pytest.importorskip("numba", reason="fused kernels need numba (the 'fast' extra)")


def kernels(cf):
    return [k for entries in cf.cache.values() for _, fn, _ in entries
            for k in getattr(fn, "kernel_sources", []) if k]


def chain(steps):
    def f(x):
        for _ in range(steps):
            x = wnp.tanh(x) * 0.9 + 0.1
        return wnp.sum(x)
    return f


X = np.linspace(0.1, 1.0, 10)


def test_a_long_chain_is_cut_into_kernels_that_repeat(monkeypatch):
    monkeypatch.setattr(budget, "KERNEL_STATEMENTS", 30)
    f = chain(60)  # 180 elementwise nodes in one group
    cf = wg.compile(f, fuse=True, roll=False)
    np.testing.assert_allclose(cf(X), f(X), rtol=1e-13)
    ks = kernels(cf)
    assert len(ks) >= 6
    assert all(k.count(" = ") <= 30 + 3 for k in ks)
    # the cuts follow the trace's period (3 nodes): the middle kernels are one source
    assert len(set(ks)) <= 3, [k.count("\n") for k in ks]
    assert cf.fuse_failures == []


def test_a_cut_gradient_gives_the_uncut_ones_result(monkeypatch):
    f = wg.grad(chain(20))
    whole = wg.compile(f, fuse=True, roll=False)(X)
    monkeypatch.setattr(budget, "KERNEL_STATEMENTS", 25)
    monkeypatch.setattr(budget, "compile_seconds", lambda s, o=1: 1e-4 * s * s)  # cuts pay
    cf = wg.compile(f, fuse=True, roll=False)
    cut = cf(X)
    assert len(kernels(cf)) > 1 and cf.fuse_failures == []
    np.testing.assert_allclose(cut, whole, rtol=1e-13)
    np.testing.assert_allclose(cut, f(X), rtol=1e-12)
    np.testing.assert_allclose(cf(X + 0.25), f(X + 0.25), rtol=1e-12)


def test_fusion_past_the_budget_backs_off_and_says_so(monkeypatch):
    monkeypatch.setattr(budget, "FLOOR", 0.0)
    monkeypatch.setattr(budget, "CAP", 0.0)
    f = wg.grad(chain(10))
    cf = wg.compile(f, fuse=True, roll=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = cf(X)
    np.testing.assert_allclose(got, wg.compile(f, fuse=False)(X), rtol=1e-13)  # NumPy calls
    assert kernels(cf) == []
    (why,) = cf.fuse_failures
    assert isinstance(why, wg.UnfusedWarning) and "fusion backed off" in str(why)
    said = [str(w.message) for w in caught if w.category is wg.UnfusedWarning]
    assert len(said) == 1 and said[0].endswith(str(why)), said


def test_the_groups_that_save_most_per_second_of_compile_are_kept(monkeypatch):
    """Two groups (shapes 1000 and 10): a budget for one keeps the one on 1,000 elements."""
    def f(x, y):
        for _ in range(5):
            x = wnp.sin(x) * 1.5 + 0.5
            y = wnp.cos(y) * 0.5 - 0.25
        return wnp.sum(x) + wnp.sum(y)
    x, y = np.linspace(0, 1, 1000), np.linspace(0, 1, 10)
    one = budget.compile_seconds(15, 1)
    monkeypatch.setattr(budget, "FLOOR", one * 1.5)
    monkeypatch.setattr(budget, "CAP", one * 1.5)
    cf = wg.compile(f, fuse=True, roll=False)
    np.testing.assert_allclose(cf(x, y), f(x, y), rtol=1e-13)
    (k,) = kernels(cf)
    assert "range(1000)" in k
    assert "fusion backed off" in str(cf.fuse_failures[0])


def test_a_cut_group_past_the_budget_keeps_its_first_kernels(monkeypatch):
    """One group of 180 nodes that never repeat, cut in kernels of 30: a budget for two
    fuses the first two, and the rest -- which read them -- run as NumPy calls after."""
    monkeypatch.setattr(budget, "KERNEL_STATEMENTS", 30)
    monkeypatch.setattr(budget, "compile_seconds", lambda s, o=1: (s / 30) ** 2)
    monkeypatch.setattr(budget, "FLOOR", 2.5)
    monkeypatch.setattr(budget, "CAP", 2.5)
    pick = np.random.default_rng(1).integers(0, 3, 60)

    def f(x):
        for k in pick:
            x = (wnp.tanh, wnp.sin, wnp.cos)[k](x) * 0.9 + 0.1
        return wnp.sum(x)
    cf = wg.compile(f, fuse=True, roll=False)
    with pytest.warns(wg.UnfusedWarning, match="fusion backed off"):
        got = cf(X)
    np.testing.assert_allclose(got, f(X), rtol=1e-13)
    np.testing.assert_allclose(cf(X * 0.5), f(X * 0.5), rtol=1e-13)
    assert len(kernels(cf)) == 2


def test_a_program_too_big_to_be_worth_numbas_time_is_not_fused():
    """The gradient of a 300-step chain on 10 elements whose steps never repeat (each a
    function drawn at random): 2,100 elementwise nodes in one group, as one kernel several
    seconds of Numba's time (half a minute on a busy machine), cut into kernels that each
    return dozens of arrays more; 1,000 runs unfused take about 3 s."""
    ops = [wnp.tanh, wnp.sin, wnp.cos]
    pick = np.random.default_rng(0).integers(0, 3, 300)

    def f(x):
        for k in pick:
            x = ops[k](x) * 0.9 + 0.1
        return wnp.sum(x)
    g = wg.grad(f)
    cf = wg.compile(g, fuse=True, roll=False)
    with pytest.warns(wg.UnfusedWarning, match="fusion backed off"):
        got = cf(X)
    np.testing.assert_allclose(got, wg.compile(g, fuse=False)(X), rtol=1e-13)
    np.testing.assert_allclose(got, g(X), rtol=1e-12)
    assert kernels(cf) == []


def test_a_loop_whose_trip_count_is_traced_warns_once_about_retracing():
    def f(x):
        t = x
        while t > 0.01:  # the number of steps depends on x: each new count traces again
            t = t / 2
        return t * x
    cf = wg.compile(f, fuse=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for v in (1.0, 1.5, 3.0, 0.5, 7.0):
            assert cf(v) == f(v)
    said = [str(w.message) for w in caught if w.category is wg.RetraceWarning]
    assert len(said) == 1 and "wg.scan" in said[0] and "while" in said[0]

    def branch(x):  # a branch, not a loop: traced again, without the warning
        if x > 0:
            return wnp.sin(x)
        return x * x
    cb = wg.compile(branch, fuse=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb(1.0), cb(-1.0), cb(2.0)
    assert cb.num_traces == 2
    assert not [w for w in caught if w.category is wg.RetraceWarning]

    def counted(x, n):  # a trip count read off a traced value with int()
        for _ in range(int(wnp.sum(n > 0))):
            x = x * 2.0
        return x
    cc = wg.compile(counted, fuse=False)
    with pytest.warns(wg.RetraceWarning):
        assert cc(1.0, np.ones(3)) == 8.0 and cc(1.0, -np.ones(3)) == 1.0


def test_a_program_on_large_arrays_may_spend_more_compile_than_one_on_small_ones(monkeypatch):
    """An unfused call costs about 3 ns per element of its result besides its 1.5 µs (BA's
    compressed pass measured 2.85 ns on 2 M and on 69 M elements): 40 nodes on 2 x 10^5
    elements cost about 24 ms a run, so 1,000 runs pay for a compile of 8 s (CAP is 10 s);
    one of 12 s still backs off."""
    def f(x):
        for _ in range(20):
            x = x * 0.999 + 0.001
        return x
    x = np.linspace(0.0, 1.0, 200_000)
    monkeypatch.setattr(budget, "compile_seconds", lambda s, a=1: 8.0)
    cf = wg.compile(f, fuse=True, roll=False)
    np.testing.assert_allclose(cf(x), f(x), rtol=1e-13)
    assert cf.fuse_failures == [] and len(kernels(cf)) == 1
    monkeypatch.setattr(budget, "compile_seconds", lambda s, a=1: 12.0)
    cf = wg.compile(f, fuse=True, roll=False)
    with pytest.warns(wg.UnfusedWarning, match="fusion backed off"):
        np.testing.assert_allclose(cf(x), f(x), rtol=1e-13)
    assert kernels(cf) == []
