"""The "ctz", "binomial", "online", "invert" and "ctz-revolve" schedules made inside the
compiled loop (wengert/checkpoint/machine.py): the same rows as encoding ``iter_schedule`` (so
the same calls in the same order; iter_schedule reads the same machines, and
tests/test_schedule_machines.py checks them against reference generators action for action),
for every N up to 300 (binomial: 129, online: 89, with several snapshots) and some large ones, in O(log N) (O(snapshots)) memory; with Numba, the fused loop that
uses them gives bitwise the gradient of the loop that reads the encoded array, and holds
no array that grows with N."""
import math
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint.compiled import plans_of
from wengert.checkpoint.schedules import (checkpoint_schedule, iter_schedule,
                                          resolved_snapshots, revolve_cost)
from schedule_reference import revolve_cost as revolve_cost_formula  # tests/: the reference

machine = sys.modules["wengert.checkpoint.machine"]
fused = sys.modules["wengert.checkpoint.fused"]

LENGTHS = list(range(1, 301)) + [511, 512, 513, 1000, 4095, 4096, 4097, 10_000]
BINOMIAL = [(n, s) for n in list(range(1, 130)) + [500, 1000, 2000] for s in
            (0, 1, 2, 3, 5, None, 20)] + [(10_000, 13), (10_000, 40), (3000, 1)]


def _encoded(n, strategy, snapshots=None):
    fwd, rev, nslots, max_stored, counts = fused.encode(iter_schedule(n, strategy, snapshots))
    return [tuple(map(int, r)) for r in fwd], [tuple(map(int, r)) for r in rev], nslots, \
        max_stored, counts


def _check_rows(n, strategy, snapshots):
    fwd, rev, nslots, max_stored, counts = _encoded(n, strategy, snapshots)
    s = resolved_snapshots(n, strategy, snapshots)
    assert list(machine.rows(n, strategy, s, machine.FORWARD)) == fwd
    assert list(machine.rows(n, strategy, s, machine.REVERSE_PHASE)) == rev
    c = machine.counts(n, strategy, s, compiled=False)
    assert c.pop("max_stored") == max_stored and max(max_stored, 1) == nslots
    assert c == counts
    st = checkpoint_schedule(n, strategy, snapshots).stats()
    assert c["fwd_steps"] + c["rev_steps"] == st["advanced"] + 1
    assert c["fwd_inverted"] + c["rev_inverted"] == st["inverted"]
    assert max_stored == st["max_stored"]
    return max_stored


@pytest.mark.parametrize("n", LENGTHS)
def test_ctz_rows_are_the_encoded_schedule(n):
    assert _check_rows(n, "ctz", None) <= n.bit_length()


ONLINE = [(n, s) for n in list(range(1, 90)) + [500, 1000] for s in (0, 1, 2, 3, 5, None)]


@pytest.mark.parametrize("n,snapshots", ONLINE)
def test_online_rows_are_the_encoded_schedule(n, snapshots):
    s = resolved_snapshots(n, "online", snapshots)
    assert _check_rows(n, "online", snapshots) <= s + 1


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 17, 300, 1000])
def test_invert_rows_are_the_encoded_schedule(n):
    assert _check_rows(n, "invert", None) == 0


@pytest.mark.parametrize("n", list(range(1, 130)) + [511, 512, 513, 4097, 10_000])
def test_ctz_revolve_rows_are_the_encoded_schedule(n):
    assert _check_rows(n, "ctz-revolve", None) <= max(n.bit_length(), 1)


@pytest.mark.parametrize("n", [1, 2, 3, 17, 300])
def test_all_rows_are_the_encoded_schedule(n):
    assert _check_rows(n, "all", None) == n


@pytest.mark.parametrize("n,snapshots", BINOMIAL)
def test_binomial_rows_are_the_encoded_schedule(n, snapshots):
    s = resolved_snapshots(n, "binomial", snapshots)
    assert _check_rows(n, "binomial", snapshots) <= s + 1


# Griewank's t(n, s) by its formula (schedules.revolve_cost runs machine's integer recurrence,
# so the check is against the formula, not against itself): the reference's
_closed_form = revolve_cost_formula


def test_revolve_cost_in_integers():
    for n in range(1, 400):
        for s in range(0, 15):
            assert machine._revolve_cost(n, s) == _closed_form(n, s) == revolve_cost(n, s)
    assert machine._revolve_cost(2 ** 31 - 1, 3) == _closed_form(2 ** 31 - 1, 3)


def test_state_and_buffer_do_not_grow_with_n():
    # the machine's whole memory: its state and BUFFER_ROWS rows, for any N
    for n in (2, 1000, 2 ** 31 - 5):  # rows are int32: the fused loop takes N < 2**31
        st = machine.state(n, "ctz", None, machine.REVERSE_PHASE)
        assert st.shape == (9 + 64,)
        assert st[3] == bin(n - 1).count("1") + 1  # the prefixes of n - 1, 0 among them
        buf = np.zeros((machine.BUFFER_ROWS, 3), np.int32)
        assert 0 < machine.fill(st, buf) <= machine.BUFFER_ROWS
        st = machine.state(n, "binomial", 7, machine.REVERSE_PHASE)
        assert st.shape == (9 + 5 * (2 * min(7, n) + 8),)
        assert 0 < machine.fill(st, buf) <= machine.BUFFER_ROWS
        st = machine.state(n, "ctz-revolve", None, machine.REVERSE_PHASE)
        assert st.shape == (9 + 5 * (2 * 64 + 2 * 64 + 8),)
        assert 0 < machine.fill(st, buf) <= machine.BUFFER_ROWS
    # more snapshots than steps: the task stack is bounded by the steps
    assert machine.state(10, "binomial", 10 ** 6, machine.FORWARD).shape == (9 + 5 * 28,)
    assert _check_rows(10, "binomial", 10 ** 6) == 10


def test_jitted_rows_equal_the_python_ones():
    pytest.importorskip("numba", reason="the compiled machine needs numba")
    for strategy, s in (("ctz", None), ("binomial", 0), ("binomial", 3), ("binomial", 12),
                        ("invert", None), ("online", 0), ("online", 4), ("ctz-revolve", None),
                        ("all", None)):
        fill = machine.jitted(strategy).fill
        for n in (1, 2, 5, 64, 300, 4097):
            for phase in (machine.FORWARD, machine.REVERSE_PHASE):
                st = machine.state(n, strategy, s, phase)
                buf = np.zeros((machine.BUFFER_ROWS, 3), np.int32)
                got = []
                while True:
                    m = fill(st, buf)
                    if not m:
                        break
                    got += [tuple(map(int, r)) for r in buf[:m]]
                assert got == list(machine.rows(n, strategy, s, phase))
        assert machine.counts(5000, strategy, s) == machine.counts(5000, strategy, s,
                                                                  compiled=False)


def _grad(n, x0, W, strategy="ctz", snapshots=None):
    def loss(W):
        def step(c, _):
            p, q = c
            p = p + 0.05 * wnp.tanh(W @ q)
            q = q + 0.05 * wnp.tanh(W @ p)
            return (p, q), None
        def inverse(c, _):
            p, q = c
            q = q - 0.05 * wnp.tanh(W @ p)
            return p - 0.05 * wnp.tanh(W @ q), q
        (p, q), _ = wg.scan(step, (x0, x0[::-1].copy()), length=n, checkpoint=strategy,
                            snapshots=snapshots, inverse=inverse)
        return wnp.sum(p * q)
    cf = wg.compile(wg.grad(loss), fuse=True)
    return cf(W), cf


@pytest.mark.parametrize("n,strategy,snapshots", [
    (1, "ctz", None), (2, "ctz", None), (3, "ctz", None), (17, "ctz", None),
    (64, "ctz", None), (300, "ctz", None), (1, "binomial", None), (2, "binomial", 0),
    (40, "binomial", 0), (40, "binomial", 1), (300, "binomial", None), (300, "binomial", 4),
    (1, "invert", None), (2, "invert", None), (300, "invert", None), (1, "online", 3),
    (300, "online", 0), (300, "online", 5), (300, "online", None), (1, "ctz-revolve", None),
    (2, "ctz-revolve", None), (17, "ctz-revolve", None), (300, "ctz-revolve", None)])
def test_fused_gradient_bitwise_equal_to_the_encoded_loop(n, strategy, snapshots, monkeypatch):
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    rng = np.random.default_rng(n)
    x0, W = rng.standard_normal(5), rng.standard_normal((5, 5)) / 3
    got, cf = _grad(n, x0, W, strategy, snapshots)
    (p,) = plans_of(cf.graphs[0])
    assert p.fused() is not None and p.fused().generated
    monkeypatch.setattr(fused, "GENERATED", set())  # the loop reads the encoded rows
    ref, cf2 = _grad(n, x0, W, strategy, snapshots)
    (p2,) = plans_of(cf2.graphs[0])
    assert p2.fused() is not None and not p2.fused().generated
    assert np.array_equal(got, ref)
    assert p.stats == p2.stats  # same steps, VJPs and most states held
    np.testing.assert_allclose(got, wg.grad(lambda W: _eager(n, x0, W))(W), rtol=1e-10)


def _eager(n, x0, W):
    p, q = x0, x0[::-1].copy()
    for _ in range(n):
        p = p + 0.05 * wnp.tanh(W @ q)
        q = q + 0.05 * wnp.tanh(W @ p)
    return wnp.sum(p * q)


@pytest.mark.parametrize("strategy,snapshots,bound", [
    ("ctz", None, lambda n: math.floor(math.log2(n)) + 1), ("binomial", 6, lambda n: 7),
    ("invert", None, lambda n: 0), ("online", 5, lambda n: 6),
    ("ctz-revolve", None, lambda n: math.floor(math.log2(n)) + 1)])
def test_fused_loop_holds_nothing_that_grows_with_n(strategy, snapshots, bound):
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    held = {}
    for n in (100, 20_000):
        x0, W = np.linspace(-1, 1, 4), np.eye(4) * 0.5
        _, cf = _grad(n, x0, W, strategy, snapshots)
        (p,) = plans_of(cf.graphs[0])
        fl = p.fused()
        assert fl.fwd_acts is None and fl.rev_acts is None
        held[n] = sum(v.nbytes for v in vars(fl).values() if isinstance(v, np.ndarray))
        assert fl.max_stored == p.stats["max_stored"] <= bound(n)
    assert held[20_000] == held[100] < 100


def test_same_step_under_each_machine_gets_its_own_loop():
    # one step source, three schedules: the compiled loop is cached per step source and
    # per machine, never shared across machines (their rows differ)
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    rng = np.random.default_rng(3)
    x0, W = rng.standard_normal(3), rng.standard_normal((3, 3)) / 3
    ref = wg.grad(lambda W: _eager(50, x0, W))(W)
    fns = set()
    for strategy, snapshots in (("ctz", None), ("binomial", 2), ("invert", None), ("all", None),
                                ("online", 3)):
        got, cf = _grad(50, x0, W, strategy, snapshots)
        (p,) = plans_of(cf.graphs[0])
        np.testing.assert_allclose(got, ref, rtol=1e-10)
        fns.add(id(p.fused().fn))
    assert len(fns) == 5
