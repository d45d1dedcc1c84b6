"""Transforms in threads and asyncio tasks (issue 28, part 1; API.md §15, first bullet).

Each thread's (each ``contextvars`` context's) transforms are independent: the stacks of
running transforms (tapes, graph traces, rules) are per context, so a scan in one thread
never records on, or pauses, another thread's tape.

The deterministic tests below force the interleaving that went wrong with one process-wide
stack (thread A's tape made after B's, so "innermost", while B's scan picks its tape);
the stress tests run every transform from 8 threads with a tiny switch interval and compare
each value with the single-threaded one.
"""
import asyncio
import collections
import contextvars
import sys
import threading

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert import _dispatch
from wengert.checkpoint import while_loop as _while_loop
from wengert.graph.trace import active_graph_traces
from wengert.reverse import active_tapes

WAIT = 20.0  # seconds any thread waits for another before the test gives up


def _run_threads(*targets, timeout=4 * WAIT):
    """Run each target in its own thread; re-raise the first failure of any."""
    errors = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - handed to the main thread
                errors.append(e)
        return run
    ts = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def _wait(event):
    assert event.wait(WAIT), "the other thread did not get there"


# -- the report, made deterministic ------------------------------------------------------
XS = np.linspace(0.1, 1.0, 8)


def _regions():
    """How thread B differentiates through a region that pauses its tape while it runs."""
    def scan(x, step):
        return wg.scan(step, x, XS, checkpoint="ctz")[0]

    def checkpoint(x, step):
        c = x
        for xi in XS:
            c = wg.checkpoint(step)(c, xi)[0]
        return c

    def while_loop(x, step):
        return _while_loop(lambda c: c[1] < len(XS),
                           lambda c: (step(c[0], XS[c[1]])[0], c[1] + 1),
                           (x, 0))[0]
    return {"scan": scan, "checkpoint": checkpoint, "while_loop": while_loop}


@pytest.mark.parametrize("region", ["scan", "checkpoint", "while_loop"])
def test_a_region_in_one_thread_leaves_another_threads_tape_alone(region):
    # B's grad starts first; inside it, A's grad starts (a newer tape, so the innermost one
    # with a single stack); B's region then runs its first step while A computes x * x.
    # With the stacks shared, B's region picked A's tape and paused it: A got 0.0, B an
    # EscapedTracerError (the report).
    b_inside, a_inside, b_in_step, a_done = (threading.Event() for _ in range(4))
    got = {}

    def f_a(x):
        a_inside.set()
        _wait(b_in_step)
        y = x * x
        a_done.set()
        return y

    def step(c, xi):
        if not b_in_step.is_set():
            b_in_step.set()
            _wait(a_done)
        return c * wnp.sin(xi) + xi, None

    run = _regions()[region]

    def f_b(x):
        b_inside.set()
        _wait(a_inside)
        return run(x, step)

    def thread_a():
        _wait(b_inside)
        got["a"] = wg.grad(f_a)(3.0)

    def thread_b():
        try:
            got["b"] = wg.grad(f_b)(0.7)
        except wg.EscapedTracerError as e:  # (what B got with one stack)
            got["b"] = e

    _run_threads(thread_b, thread_a)
    assert got["a"] == 6.0  # (0.0 with one stack: its x * x was not recorded)
    b_in_step.set()
    a_done.set()
    assert got["b"] == wg.grad(lambda x: run(x, step))(0.7)
    assert np.isclose(got["b"], np.prod(np.sin(XS)))


def _seen_from_another_thread(probe):
    """``(probe() inside grad -> trace -> a NumPy function's rule, probe() in a second
    thread meanwhile)``; np.apply_along_axis is the rule: it runs user code."""
    inside, seen_done = threading.Event(), threading.Event()
    seen = {}

    def row(r):
        seen["here"] = probe()
        inside.set()
        _wait(seen_done)
        return np.sum(r * r)

    def f(x):
        g = wg.trace(lambda y: np.apply_along_axis(row, 0, y), x)
        return wnp.sum(g(x))

    def first():
        wg.grad(f)(np.ones((2, 2)))

    def second():
        _wait(inside)
        seen["there"] = probe()
        seen_done.set()

    _run_threads(first, second)
    return seen["here"], seen["there"]


def test_running_transforms_are_not_seen_from_other_threads():
    here, there = _seen_from_another_thread(lambda: (active_tapes(), active_graph_traces()))
    assert [len(s) for s in here] == [1, 1]
    assert there == ((), ())
    assert active_tapes() == () and active_graph_traces() == ()


def test_running_rules_are_not_seen_from_other_threads():
    here, there = _seen_from_another_thread(_dispatch._RUNNING.get)
    assert len(here) == 1 and here[0][0] is np.apply_along_axis
    assert there == ()
    assert _dispatch._RUNNING.get() == ()


# -- every transform from 8 threads at once --------------------------------------------------------
THREADS = 8
X3 = np.array([0.3, -0.7, 1.1])
XS2 = np.linspace(-1.0, 1.0, 24).reshape(8, 3) * 0.3
BATCH = np.linspace(-1.0, 1.0, 15).reshape(5, 3)
SCHEDULES = ("all", "ctz", "binomial", "online", "invert")


def _f(x):
    return wnp.sum(wnp.sin(x) * x + wnp.exp(-x * x))


# additive coupling, exactly invertible: test_checkpoint's
from test_checkpoint import _reversible_inverse as _inverse, _reversible_step as _step  # noqa: E402,I001


def _scan_loss(x, how="ctz"):
    for _ in range(60):  # work before the loop: meanwhile other threads' transforms start
        x = wnp.sin(x) + 0.5 * x
    (a, b), ys = wg.scan(_step, (x, x * 0.5), XS2, checkpoint=how,
                         snapshots=2 if how in ("binomial", "online") else None,
                         inverse=_inverse if how == "invert" else None)
    return wnp.sum(a * b) + wnp.sum(ys)


def _checkpointed(x):
    block = wg.checkpoint(lambda y: wnp.tanh(y) * 1.5 + wnp.sin(y))
    for _ in range(4):
        x = block(x)
    return wnp.sum(x * x)


def _while(x):
    return wnp.sum(_while_loop(lambda c: c[1] > 0.01,
                               lambda c: (c[0] * wnp.cos(c[1]) + 0.1 * c[0], c[1] / 2),
                               (x, 1.0))[0])


@wg.custom_vjp
def _clipped(x):
    return x * x


_clipped.defvjp(lambda x: (x * x, x), lambda x, g: (wnp.clip(2.0 * x * g, -1.0, 1.0),))


def _sparse_f(x):
    return x[1:] ** 2 - x[:-1] * x[1:]


def _tasks(fused_scan=False):
    """``{name: no-argument call}`` over every transform. Objects that keep state between
    calls (compiled functions, sparse Jacobians, generated source) are made here, so each
    run of the stress test shares fresh ones among its threads (their first calls race).
    ``fused_scan``: a compiled scan's loop in Numba too (its first compilation takes
    10-20 s on a busy machine, so only the slow test asks for it)."""
    t = {
        "grad": lambda: wg.grad(_f)(X3),
        "value_and_grad": lambda: wg.value_and_grad(_f)(X3),
        "hessian": lambda: wg.hessian(_f)(X3),
        "jvp": lambda: wg.jvp(_f, (X3,), (np.ones(3),)),
        "vjp": lambda: wg.vjp(lambda x: wnp.sin(x) * x, X3)[1](np.ones(3)),
        "vmap": lambda: wg.vmap(wg.grad(lambda w, x: wnp.sum(wnp.tanh(w * x))),
                                in_axes=(None, 0))(X3, BATCH),
        "checkpoint": lambda: wg.grad(_checkpointed)(X3),
        "while_loop": lambda: wg.grad(_while)(X3),
        "custom_vjp": lambda: wg.grad(lambda x: wnp.sum(_clipped(x)))(X3),
        "taylor": lambda: wg.taylor(_f, X3, np.ones(3), 3),
        "jvp of grad of scan": lambda: wg.jvp(wg.grad(_scan_loss), (X3,), (np.ones(3),)),
        "trace": lambda: wg.trace(_f, X3).grad()(X3),
        "trace of scan": lambda: wg.trace(_scan_loss, X3)(X3),
    }
    for how in SCHEDULES:
        t[f"scan {how}"] = lambda how=how: wg.grad(_scan_loss)(X3, how)
    for fuse in (False, True):
        cf = wg.compile(wg.grad(_f), fuse=fuse)
        t[f"compile fuse={fuse}"] = lambda cf=cf: cf(X3)
        if fuse and not fused_scan:
            continue
        cs = wg.compile(wg.grad(_scan_loss), fuse=fuse)
        t[f"compile scan fuse={fuse}"] = lambda cs=cs: cs(X3)
    sj = wg.sparse_jacobian(_sparse_f)
    t["sparse_jacobian"] = lambda: sj(np.arange(1.0, 7.0)).toarray()
    sg = wg.source.grad(_source_f)
    t["source.grad"] = lambda: sg(X3[0], X3[1])
    return t


def _source_f(x, y):
    return x * y + wnp.sin(x) * wnp.exp(y)


def _leaves(v):
    return [np.asarray(a) for a in wg.tree.flatten(v)[0]]


def _same(got, want):
    g, w = _leaves(got), _leaves(want)
    return len(g) == len(w) and all(a.shape == b.shape and np.allclose(a, b, rtol=1e-12, atol=0)
                                    for a, b in zip(g, w))


def _answers(fused_scan=False):
    """Each transform's value from one thread, checked where two transforms must agree."""
    want = {name: call() for name, call in _tasks(fused_scan).items()}
    g = want["grad"]
    assert np.all(g != 0)
    for name in ("value_and_grad", "trace", "compile fuse=False", "compile fuse=True"):
        np.testing.assert_allclose(_leaves(want[name])[-1], g, rtol=1e-12)
    np.testing.assert_allclose(want["jvp"][1], np.sum(g), rtol=1e-12)
    h = want["hessian"]
    np.testing.assert_allclose(h @ np.ones(3), wg.jvp(wg.grad(_f), (X3,), (np.ones(3),))[1],
                               rtol=1e-12)
    np.testing.assert_allclose(want["taylor"][2], np.sum(h) / 2, rtol=1e-12)  # c2 = v'Hv / 2
    s = want["scan all"]
    assert np.all(s != 0)
    for name in [f"scan {how}" for how in SCHEDULES] + ["compile scan fuse=False"] + \
            (["compile scan fuse=True"] if fused_scan else []):
        np.testing.assert_allclose(want[name], s, rtol=1e-9)
    np.testing.assert_allclose(want["jvp of grad of scan"][0], s, rtol=1e-12)
    return want


def _stress(calls_per_thread, fused_scan=False):
    """Each of 8 threads makes ``calls_per_thread`` calls, cycling through the transforms
    from its own offset; returns the wrong values and exceptions, by transform."""
    want = _answers(fused_scan)
    tasks = _tasks(fused_scan)
    names = sorted(tasks)
    wrong, raised = [], []
    start = threading.Barrier(THREADS)

    def worker(i):
        start.wait()
        for k in range(calls_per_thread):
            name = names[(i + k) % len(names)]
            try:
                got = tasks[name]()
            except Exception as e:  # noqa: BLE001 - counted, and reported below
                raised.append(f"{name}: {type(e).__name__}: {e}")
                continue
            if not _same(got, want[name]):
                wrong.append(name)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython will
    try:
        _run_threads(*[lambda i=i: worker(i) for i in range(THREADS)], timeout=3600)
    finally:
        sys.setswitchinterval(old)
    return wrong, raised


def _report(wrong, raised):
    by_name = collections.Counter(wrong + [r.split(":")[0] for r in raised])
    return (f"{len(wrong)} wrong values and {len(raised)} exceptions ({dict(by_name)}); "
            f"first exception: {raised[0] if raised else None}")


def test_every_transform_from_8_threads():
    wrong, raised = _stress(200)  # 1,600 calls
    assert not wrong and not raised, _report(wrong, raised)


@pytest.mark.slow
def test_every_transform_from_8_threads_many_calls():
    wrong, raised = _stress(2000, fused_scan=True)  # 16,000 calls
    assert not wrong and not raised, _report(wrong, raised)


def test_a_compiled_function_called_from_many_threads_at_once():
    # one compiled function, its first calls racing: every thread gets the eager value, and
    # the program table stays consistent (each entry answers these arguments)
    for fuse, f in ((False, _scan_loss), (True, _f)):
        cf = wg.compile(wg.grad(f), fuse=fuse)
        want = wg.grad(f)(X3)
        got = []
        start = threading.Barrier(THREADS)

        def call():
            start.wait()
            for _ in range(5):
                got.append(cf(X3))
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            _run_threads(*[call] * THREADS)
        finally:
            sys.setswitchinterval(old)
        assert len(got) == 5 * THREADS
        for g in got:
            np.testing.assert_allclose(g, want, rtol=1e-12)
        assert 1 <= cf.num_traces == len(cf.graphs) <= THREADS
        np.testing.assert_allclose(cf(X3), want, rtol=1e-12)


def test_every_transform_inside_dask_threaded_scheduler():
    dask = pytest.importorskip("dask")
    want = _answers()
    tasks = _tasks()
    names = sorted(tasks)
    # 96 Dask tasks of 4 transforms each (as the stress test's threads, from their own offsets)
    jobs = [[names[(i + k) % len(names)] for k in range(4)] for i in range(96)]

    def job(todo):
        return [_caught(tasks[name])() for name in todo]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        got = dask.compute(*[dask.delayed(job)(todo) for todo in jobs], scheduler="threads",
                           num_workers=THREADS)
    finally:
        sys.setswitchinterval(old)
    done = [(name, g) for todo, gs in zip(jobs, got) for name, g in zip(todo, gs)]
    raised = [f"{name}: {type(g).__name__}: {g}" for name, g in done if isinstance(g, Exception)]
    wrong = [name for name, g in done if not isinstance(g, Exception) and not _same(g, want[name])]
    assert len(done) == 384 and not wrong and not raised, _report(wrong, raised)


def _caught(call):
    def run():
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - counted by the test
            return e
    return run


# -- asyncio: one context per task --------------------------------------------------------------
def test_asyncio_tasks_and_their_threads_have_contexts_of_their_own():
    want_scan = {how: wg.grad(_scan_loss)(X3, how) for how in SCHEDULES}
    want_f = wg.grad(_f)(X3)

    async def worker(k):
        wrong = 0
        for i in range(10):
            how = SCHEDULES[(k + i) % len(SCHEDULES)]
            # in a worker thread, in a copy of this task's context (asyncio.to_thread) ...
            g = await asyncio.to_thread(wg.grad(_scan_loss), X3, how)
            wrong += not _same(g, want_scan[how])
            # ... and in the task itself, between its awaits
            assert active_tapes() == ()
            wrong += not _same(wg.grad(_f)(X3), want_f)
            await asyncio.sleep(0)
        return wrong

    async def main():
        return await asyncio.gather(*(worker(k) for k in range(THREADS)))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        assert asyncio.run(main()) == [0] * THREADS
    finally:
        sys.setswitchinterval(old)


def test_a_context_copied_before_a_transform_does_not_see_it():
    before = contextvars.copy_context()  # no transform running
    seen = {}

    def f(x):
        seen["inside"] = len(active_tapes())
        seen["other context"] = before.run(active_tapes)
        # a whole transform in the other context, while this one's tape is running
        seen["other grad"] = before.run(wg.grad(_scan_loss), X3)
        seen["after"] = len(active_tapes())
        return x * x

    assert wg.grad(f)(3.0) == 6.0
    assert seen["inside"] == 1 and seen["other context"] == () and seen["after"] == 1
    np.testing.assert_array_equal(seen["other grad"], wg.grad(_scan_loss)(X3))
