"""Issue 28 §6: Ctrl+C during a compiled (fused) kernel is a KeyboardInterrupt.

When Python's SIGINT handler runs inside Numba's dispatcher as a kernel returns, CPython
reports ``SystemError: CPUDispatcher(...) returned a result with an exception set`` with the
KeyboardInterrupt as its cause (one interrupt in five, for a small kernel called in a
loop); a program that catches KeyboardInterrupt to stop cleanly would miss it."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert._interrupt import interrupt_of


def f(x):
    return wnp.sin(x) * 2.0 + x


def _as_numba_reports_it():
    """The exception CPython makes of a KeyboardInterrupt raised while a C function
    returned a result (``_Py_CheckFunctionResult``)."""
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as k:
            raise SystemError("CPUDispatcher(<function kernel at 0x7f>) returned a result "
                              "with an exception set") from k
    except SystemError as e:
        return e


def _compiled_whose_program_raises(err):
    cf = wg.compile(f, fuse=False)
    x = np.linspace(0.0, 1.0, 5)
    cf(x)

    def program(*args):
        raise err
    for key in list(cf._fast):
        cf._fast[key] = program
    return cf, x


def test_a_kernel_interrupt_reported_as_system_error_is_a_keyboard_interrupt():
    cf, x = _compiled_whose_program_raises(_as_numba_reports_it())
    with pytest.raises(KeyboardInterrupt):
        cf(x)


def test_another_system_error_is_left_alone():
    cf, x = _compiled_whose_program_raises(SystemError("something else"))
    with pytest.raises(SystemError, match="something else"):
        cf(x)
    assert interrupt_of(SystemError("something else")) is None
    assert isinstance(interrupt_of(_as_numba_reports_it()), KeyboardInterrupt)


CHILD = textwrap.dedent("""
    import collections, json, os, signal
    import numpy as np
    import wengert as wg, wengert.numpy as wnp
    cf = wg.compile(lambda x: wnp.sin(x) * 2.0 + wnp.cos(x) * x, fuse=True,
                    reuse_buffers=False)
    x = np.linspace(0.0, 1.0, 10)
    cf(x)
    assert not cf.fuse_failures, cf.fuse_failures
    # a process started in the background (`cmd &` without job control) inherits SIGINT
    # ignored, and Python then leaves it so: the test's Ctrl+C needs Python's own handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # a timer's SIGALRM sends the SIGINT (Ctrl+C), at a moment the kernel loop cannot pick
    signal.signal(signal.SIGALRM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    seen = collections.Counter()
    for trial in range({trials}):
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.002 + (trial % 5) * 0.0007)
            while True:
                cf(x)
        except BaseException as e:
            seen[type(e).__name__] += 1
    print(json.dumps(dict(seen)))
""")


def test_sigint_during_fused_kernels_raises_keyboard_interrupt():
    """A process calls a small fused kernel in a loop and is sent SIGINT 60 times: each
    interrupt arrives as KeyboardInterrupt (today about one in five came as SystemError)."""
    pytest.importorskip("numba", reason="fused kernels need numba (the 'fast' extra)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(wg.__file__)))] +
        os.environ.get("PYTHONPATH", "").split(os.pathsep)))
    out = subprocess.run([sys.executable, "-c", CHILD.format(trials=60)], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"KeyboardInterrupt": 60}, seen


def test_the_fused_scan_loop_gives_back_the_interrupt_too():
    """The compiled scan's Numba loop, run by its graph (not through the compiled
    function's call): the same conversion, where the loop is called."""
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    from wengert.checkpoint.compiled import plans_of

    x0 = np.linspace(-1.0, 1.0, 4)

    def loss(w):
        x, _ = wg.scan(lambda x, _: (x + 0.01 * wnp.tanh(w * x), None), x0, length=5)
        return wnp.sum(x * x)

    cf = wg.compile(wg.grad(loss), fuse=True)
    w = np.full(4, 0.5)
    want = cf(w)
    g = cf.graph(w)
    (p,) = plans_of(g)
    loop = p.fused()
    assert loop is not None, p.fuse_failures
    np.testing.assert_allclose(g(w), want)
    kernel = loop.kernels[()]  # the loop function for unbatched cotangents
    real = kernel.fn

    def interrupted(*args):
        raise _as_numba_reports_it()
    kernel.fn = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            g(w)
    finally:
        kernel.fn = real
