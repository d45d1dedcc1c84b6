"""No full collection while a tape is recorded and swept (wengert/_collector.py): the
oldest generation's threshold is out of reach there and given back as it was found, errors,
nesting and threads included; young collections still run, and sub-tapes make no cycles."""
import gc
import threading

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

THRESHOLDS = gc.get_threshold()


def _seen(log):
    def f(x):
        log.append(gc.get_threshold()[2] == THRESHOLDS[2])
        return wnp.sum(wnp.sin(x))
    return f


def test_off_inside_grad_and_vjp_on_after():
    log = []
    wg.grad(_seen(log))(np.ones(3))
    wg.value_and_grad(_seen(log))(np.ones(3))
    out, pb = wg.vjp(wg.checkpoint(_seen(log)), np.ones(3))
    pb(1.0)  # the checkpointed region runs again inside the pullback's sweep
    assert log == [False] * 4
    assert gc.get_threshold() == THRESHOLDS


def test_nested_and_hessian():
    log = []
    wg.hessian(_seen(log))(np.ones(2))
    wg.grad(lambda x: wg.grad(_seen(log))(x)[0])(np.ones(2))
    assert log and not any(log)
    assert gc.get_threshold() == THRESHOLDS


def test_given_back_after_an_error_and_custom_thresholds_kept():
    def bad(x):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        wg.grad(bad)(1.0)
    assert gc.get_threshold() == THRESHOLDS
    gc.set_threshold(500, 7, 3)
    try:
        wg.grad(wnp.sin)(1.0)
        assert gc.get_threshold() == (500, 7, 3)  # the user's choice stands
    finally:
        gc.set_threshold(*THRESHOLDS)


@pytest.mark.parametrize("how", ["all", "ctz", "binomial"])
def test_sub_tapes_leave_no_cycles(how):
    # each sub-tape's inputs standing for the parent's Vars referred back to it: a cycle
    # that, with full collections held off, kept every recomputed step's tape alive
    W = np.random.default_rng(0).standard_normal((5, 5)) * 0.1

    def loss(W):
        step = lambda x, _: (x + 0.01 * wnp.tanh(W @ x), None)
        return wnp.sum(wg.scan(step, np.ones(5), length=20, checkpoint=how)[0])
    wg.grad(loss)(W)
    gc.collect()
    gc.disable()
    try:
        wg.grad(loss)(W)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_threads_overlapping():
    started, release = threading.Event(), threading.Event()

    def slow(x):
        started.set()
        release.wait(10)
        return wnp.sin(x)
    t = threading.Thread(target=lambda: wg.grad(slow)(1.0))
    t.start()
    started.wait(10)
    wg.grad(wnp.cos)(1.0)  # ends while the other thread's grad runs: still held off
    assert gc.get_threshold()[2] != THRESHOLDS[2]
    release.set()
    t.join()
    assert gc.get_threshold() == THRESHOLDS
