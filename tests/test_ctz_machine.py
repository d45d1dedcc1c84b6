"""The "ctz" schedule made inside the compiled loop (wengert/checkpoint/machine.py): the
same rows as encoding ``iter_schedule`` (so the same calls in the same order), for every
N up to 300 and some large ones, in O(log N) memory; with Numba, the fused loop that uses
it gives bitwise the gradient of the loop that reads the encoded array, and holds no
array that grows with N."""
import math
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint.compiled import plans_of
from wengert.checkpoint.schedules import checkpoint_schedule, iter_schedule

machine = sys.modules["wengert.checkpoint.machine"]
fused = sys.modules["wengert.checkpoint.fused"]

LENGTHS = list(range(1, 301)) + [511, 512, 513, 1000, 4095, 4096, 4097, 10_000]


def _encoded(n):
    fwd, rev, nslots, max_stored, counts = fused.encode(iter_schedule(n, "ctz"))
    return [tuple(map(int, r)) for r in fwd], [tuple(map(int, r)) for r in rev], nslots, \
        max_stored, counts


@pytest.mark.parametrize("n", LENGTHS)
def test_rows_are_the_encoded_schedule(n):
    fwd, rev, nslots, max_stored, counts = _encoded(n)
    assert list(machine.ctz_rows(n, machine.FORWARD)) == fwd
    assert list(machine.ctz_rows(n, machine.REVERSE_PHASE)) == rev
    c = machine.ctz_counts(n, compiled=False)
    assert c.pop("nslots") == nslots == max_stored <= n.bit_length()
    assert c == counts
    st = checkpoint_schedule(n, "ctz").stats()
    assert c["fwd_steps"] + c["rev_steps"] == st["advanced"] + 1


def test_state_and_buffer_do_not_grow_with_n():
    # the machine's whole memory: STATE_SIZE integers and BUFFER_ROWS rows, for any N
    for n in (2, 1000, 2 ** 31 - 5):  # rows are int32: the fused loop takes N < 2**31
        st = machine.ctz_state(n, machine.REVERSE_PHASE)
        assert st.shape == (machine.STATE_SIZE,)
        assert st[3] == bin(n - 1).count("1") + 1  # the prefixes of n - 1, 0 among them
        buf = np.zeros((machine.BUFFER_ROWS, 3), np.int32)
        assert 0 < machine.ctz_fill(st, buf) <= machine.BUFFER_ROWS


def test_jitted_rows_equal_the_python_ones():
    pytest.importorskip("numba", reason="the compiled machine needs numba")
    fill = machine.jitted()[0]
    for n in (1, 2, 5, 64, 300, 4097):
        for phase in (machine.FORWARD, machine.REVERSE_PHASE):
            assert list(machine.ctz_rows(n, phase, fill)) == list(machine.ctz_rows(n, phase))
    assert machine.ctz_counts(10_000) == machine.ctz_counts(10_000, compiled=False)


def _ctz_grad(n, x0, W):
    def loss(W):
        def step(c, _):
            p, q = c
            p = p + 0.05 * wnp.tanh(W @ q)
            q = q + 0.05 * wnp.tanh(W @ p)
            return (p, q), None
        (p, q), _ = wg.scan(step, (x0, x0[::-1].copy()), length=n, checkpoint="ctz")
        return wnp.sum(p * q)
    cf = wg.compile(wg.grad(loss), fuse=True)
    return cf(W), cf


@pytest.mark.parametrize("n", [1, 2, 3, 17, 64, 300])
def test_fused_gradient_bitwise_equal_to_the_encoded_loop(n, monkeypatch):
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    rng = np.random.default_rng(n)
    x0, W = rng.standard_normal(5), rng.standard_normal((5, 5)) / 3
    got, cf = _ctz_grad(n, x0, W)
    (p,) = plans_of(cf.graphs[0])
    assert p.fused() is not None and p.fused().generated
    monkeypatch.setattr(fused, "GENERATED", set())  # the loop reads the encoded rows
    ref, cf2 = _ctz_grad(n, x0, W)
    (p2,) = plans_of(cf2.graphs[0])
    assert p2.fused() is not None and not p2.fused().generated
    assert np.array_equal(got, ref)
    assert p.stats == p2.stats  # same steps, VJPs and most states held


def test_fused_loop_holds_nothing_that_grows_with_n():
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    held = {}
    for n in (100, 20_000):
        x0, W = np.linspace(-1, 1, 4), np.eye(4) * 0.5
        _, cf = _ctz_grad(n, x0, W)
        (p,) = plans_of(cf.graphs[0])
        fl = p.fused()
        assert fl.fwd_acts is None and fl.rev_acts is None
        held[n] = sum(v.nbytes for v in vars(fl).values() if isinstance(v, np.ndarray))
        assert fl.nslots == p.stats["max_stored"] <= math.floor(math.log2(n)) + 1
    assert held[20_000] == held[100] < 100
