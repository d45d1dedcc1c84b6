"""The cyclic collector waits while a tape is recorded and swept (wengert/_collector.py),
and is given back as it was found, errors and nesting included."""
import gc
import threading

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def _seen(log):
    def f(x):
        log.append(gc.isenabled())
        return wnp.sum(wnp.sin(x))
    return f


def test_off_inside_grad_and_vjp_on_after():
    assert gc.isenabled()
    log = []
    wg.grad(_seen(log))(np.ones(3))
    wg.value_and_grad(_seen(log))(np.ones(3))
    out, pb = wg.vjp(wg.checkpoint(_seen(log)), np.ones(3))
    pb(1.0)  # the checkpointed region runs again inside the pullback's sweep
    assert log == [False] * 4
    assert gc.isenabled()


def test_nested_and_hessian():
    log = []
    wg.hessian(_seen(log))(np.ones(2))
    wg.grad(lambda x: wg.grad(_seen(log))(x)[0])(np.ones(2))
    assert log and not any(log)
    assert gc.isenabled()


def test_given_back_after_an_error_and_left_off_when_found_off():
    def bad(x):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        wg.grad(bad)(1.0)
    assert gc.isenabled()
    gc.disable()
    try:
        wg.grad(wnp.sin)(1.0)
        assert not gc.isenabled()  # the user's choice stands
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
    wg.grad(wnp.cos)(1.0)  # ends while the other thread's grad runs: still off
    assert not gc.isenabled()
    release.set()
    t.join()
    assert gc.isenabled()
