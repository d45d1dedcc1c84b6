"""machine.py's state machines are the one definition of every checkpoint schedule: the
eager scan reads them through ``iter_schedule`` (and ``while_loop``'s forward phase through
``forward_actions``), the compiled loop runs them.  Here they are checked action for action,
frees included, against reference generators written as the schedules are usually stated
(tests/schedule_reference.py: ctz's stack, revolve's recursion, the online rule, ctz's
forward phase with revolve on each stretch)."""
import itertools

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint import machine
from wengert.checkpoint.schedules import Action, forward_actions, iter_schedule, \
    resolved_snapshots

from schedule_reference import reference

LENGTHS = list(range(1, 70)) + [127, 128, 129, 500, 1025]


@pytest.mark.parametrize("strategy", ["all", "ctz", "invert", "ctz-revolve"])
def test_schedules_are_the_reference_ones(strategy):
    for n in LENGTHS:
        assert list(iter_schedule(n, strategy)) == reference(n, strategy), n


@pytest.mark.parametrize("strategy", ["binomial", "online"])
@pytest.mark.parametrize("snapshots", [None, 0, 1, 2, 3, 5, 40])
def test_schedules_with_snapshots_are_the_reference_ones(strategy, snapshots):
    for n in LENGTHS:
        s = resolved_snapshots(n, strategy, snapshots)
        assert list(iter_schedule(n, strategy, snapshots)) == reference(n, strategy, s), n


def test_every_schedule_replays_and_frees_what_it_stores():
    for strategy, s in (("all", None), ("ctz", None), ("binomial", 3), ("online", 3),
                        ("invert", None), ("ctz-revolve", None)):
        for n in (1, 2, 9, 100):
            sched = wg.checkpoint_schedule(n, strategy, s)
            sched.stats()  # raises on a restore of a state not stored, a wrong reverse...
            held = set()
            for a in sched:
                if a.kind == "store":
                    held.add(a.index)
                elif a.kind == "free":
                    held.remove(a.index)
            assert held == set(), (strategy, n)


@pytest.mark.parametrize("strategy,snapshots", [("all", None), ("ctz", None), ("online", 3),
                                                ("online", 0), ("invert", None)])
def test_while_loops_forward_phase_is_the_machines(strategy, snapshots):
    n = 77
    it = forward_actions(strategy, snapshots)
    got = []
    for k in range(n):
        if k and strategy != "invert":
            got.append(Action("advance", k - 1, k))
        got += next(it)
    want = list(itertools.takewhile(lambda a: a.kind != "reverse",
                                    reference(n, strategy, snapshots)))
    if strategy == "invert" or (strategy == "online" and not snapshots):
        want = [a for a in want if a.kind != "advance"]  # one advance, through the last step
        got = [a for a in got if a.kind != "advance"]
    assert got == want


def test_a_compiled_ctz_revolve_scan_runs_the_machine():
    pytest.importorskip("numba", reason="the fused scan loop needs numba (the 'fast' extra)")
    from wengert.checkpoint.compiled import plans_of
    xs = np.linspace(0.0, 1.0, 200)

    def loss(c0, how):
        c, ys = wg.scan(lambda c, x: (c * wnp.cos(x) + 0.1 * wnp.sin(c), c), c0, xs,
                        checkpoint=how)
        return wnp.sum(c) + wnp.sum(ys)
    cf = wg.compile(wg.grad(lambda c0: loss(c0, "ctz-revolve")), fuse=True)
    got = cf(np.array([0.3, -0.2]))
    (p,) = plans_of(cf.graphs[0])
    fl = p.fused()
    assert fl is not None and fl.generated and fl.fwd_acts is None
    assert fl.max_stored <= 200 .bit_length()
    np.testing.assert_allclose(got, wg.grad(lambda c0: loss(c0, "all"))(np.array([0.3, -0.2])),
                               rtol=1e-12)
