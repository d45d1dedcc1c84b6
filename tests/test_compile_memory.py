"""Nothing kept that nobody asked for (API.md §15, issue 28 part 4): a compiled function keeps
its program, not the values of its first call; kernels of programs that no longer exist are
freed -- the module tables (``kernel_cache._MODULES``, ``fuse._KERNELS``) and ``sys.modules``
do not grow with the number of functions compiled and dropped, and neither does the process.
"""
import gc
import sys
import tracemalloc
import weakref

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import fuse, kernel_cache

HAS_NUMBA = fuse.numba_or_none() is not None
FUSE = [False, pytest.param(True, marks=pytest.mark.skipif(not HAS_NUMBA, reason="no Numba"))]


def f(x):
    y = wnp.sin(x) * 2.0 + x
    z = wnp.exp(-y * y)
    return wnp.sum(z * y + wnp.cos(x))


@pytest.mark.parametrize("fuse_", FUSE)
def test_the_first_calls_values_are_not_kept(fuse_):
    wg.compile(wg.grad(f), fuse=fuse_, reuse_buffers=False)(np.ones(3))  # Numba warmed up
    x = np.linspace(0.0, 1.0, 1_000_000)  # 8 MB; the program's intermediates: ~20 times that
    want = wg.grad(f)(x)
    held = weakref.ref(x)
    gc.collect()
    tracemalloc.start()
    try:
        cf = wg.compile(wg.grad(f), fuse=fuse_, reuse_buffers=False)
        np.testing.assert_allclose(cf(x), want, rtol=1e-13)
        del x
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held() is None  # the input itself is not kept
    assert kept < 2_000_000, kept  # today: ~250 MB (every traced intermediate, twice)
    # the program still runs, and re-traces nothing
    x2 = np.linspace(0.5, 1.5, 1_000_000)
    np.testing.assert_allclose(cf(x2), wg.grad(f)(x2), rtol=1e-13)
    assert cf.num_traces == 1


def test_the_graphs_say_what_they_kept():
    x = np.linspace(0.1, 1.0, 50)
    cf = wg.compile(f, fuse=False)
    cf(x)
    (kept,) = cf.graphs
    assert kept.values_dropped and len(kept) > 5
    assert "sin" in kept.source()  # the program is all there, and runs
    assert kept(x) == pytest.approx(f(x), rel=1e-14)
    assert all(not n.value.flags.writeable for n in kept.nodes
               if n.kind != "const" and isinstance(n.value, np.ndarray))
    with pytest.raises(ValueError, match=r"cf.graph\(\*args\)"):
        kept.grad()
    g = cf.graph(x)  # these arguments' values
    assert not g.values_dropped
    (out,) = [g.nodes[i] for i in g.outputs]
    assert out.value == pytest.approx(f(x), rel=1e-14)
    np.testing.assert_allclose(g.grad()(x), wg.grad(f)(x), rtol=1e-13)
    assert "= " in g.to_dot()


def live_kernel_modules():
    return sorted(m for m in sys.modules if m.startswith("_wengert_kernels"))


@pytest.mark.skipif(not HAS_NUMBA, reason="fused kernels need Numba")
def test_kernels_of_dropped_programs_are_freed(monkeypatch):
    monkeypatch.setattr(kernel_cache, "KEEP", 4)
    x = np.linspace(0.1, 1.0, 16)
    first = None
    for i in range(30):  # a new closure each time, with a kernel of its own (the int
        def g(x, i=i):     # i is in the kernel's text; float constants are arguments)
            return wnp.sin(x) * 1.5 + wnp.exp(-x * x) + i
        cf = wg.compile(g, fuse=True)
        np.testing.assert_allclose(cf(x), np.sin(x) * 1.5 + np.exp(-x * x) + i, rtol=1e-14)
        assert cf.fuse_failures == []
        if first is None:
            first = [weakref.ref(d) for funcs in kernel_cache._MODULES.values()
                     for d in funcs.values()]
        del cf, g
    gc.collect()
    assert first and all(r() is None for r in first)  # the first program's kernels: freed
    assert len(kernel_cache._MODULES) <= 4  # the last KEEP used, not 30
    assert len(fuse._KERNELS) <= 4
    assert live_kernel_modules() == []  # registered only while Numba compiled or loaded


@pytest.mark.skipif(not HAS_NUMBA, reason="fused kernels need Numba")
def test_a_live_program_keeps_its_kernels(monkeypatch):
    monkeypatch.setattr(kernel_cache, "KEEP", 0)
    x = np.linspace(0.1, 1.0, 16)
    cf = wg.compile(lambda x: wnp.tanh(x) * 0.25 + x, fuse=True)
    want = cf(x)
    gc.collect()
    assert len(kernel_cache._MODULES) >= 1  # held by the program, not by the table
    np.testing.assert_array_equal(cf(x), want)
    # a new dtype: Numba compiles again for the same kernels, still fine
    np.testing.assert_allclose(cf(x.astype(np.float32)), want.astype(np.float32), rtol=1e-6)


def rss_mib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096 / 2 ** 20


@pytest.mark.slow
@pytest.mark.skipif(not HAS_NUMBA or not sys.platform.startswith("linux"),
                    reason="Numba; RSS read from /proc")
def test_rss_stays_flat_over_a_thousand_compiles():
    """New closures, each with constants of its own, compiled and dropped: what a service
    compiling per request does.  Numba's JIT never frees machine code (numba/numba#5976),
    so this holds because such closures share their kernels' text (float constants are
    kernel arguments) and the tables keep only live and recent modules."""
    x = np.linspace(0.1, 1.0, 16)

    def compile_one(i):
        c = 1.0 + i / 4096

        def g(x):
            return wnp.sin(x) * c + wnp.exp(-x * x)
        cf = wg.compile(g, fuse=True)
        np.testing.assert_allclose(cf(x), np.sin(x) * c + np.exp(-x * x), rtol=1e-14)
    for i in range(100):  # the tables full, Numba's own caches warm
        compile_one(i)
    gc.collect()
    start = rss_mib()
    for i in range(100, 1100):
        compile_one(i)
    gc.collect()
    grown = rss_mib() - start
    assert grown < 50, f"RSS grew {grown:.0f} MiB over 1,000 compiles"  # before: ~1 MiB each
    assert len(kernel_cache._MODULES) <= kernel_cache.KEEP and live_kernel_modules() == []
