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


def _run_threads(*targets):
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
        t.join(4 * WAIT)
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
