"""Checkpoint schedules: which loop states reverse mode stores, and which it rebuilds.

Conventions (used everywhere below): the loop has ``N`` steps; *state* ``k`` is
the carry going into step ``k`` (state 0 is ``init``, state ``N`` the final
carry).  Reversing step ``k`` needs state ``k``.  Actions:

=================  ==============================================================
``advance a b``    run steps ``a .. b-1`` without a tape: current state a -> b
``store i``        keep the current state (state ``i``) as a snapshot
``restore i``      make snapshot ``i`` the current state
``reverse i``      run step ``i`` on a tape from the current state ``i`` and pull
                   the cotangent of state ``i+1`` back to state ``i``
``free i``         drop snapshot ``i``
``invert i``       ("invert" only) current state ``i+1`` -> state ``i`` by the
                   user's inverse step
=================  ==============================================================

The actions before the first ``reverse`` form the forward phase: the scan's
primal pass executes them, and then runs step ``N-1`` once more (from the current
state, which it keeps) to produce the final carry.  The pullback executes the
rest.  Cost of a schedule = the number of steps inside ``advance`` actions (the
``reverse`` actions each tape one step; that is not counted).

Each strategy is defined once, as machine.py's state machine, which the compiled loop runs;
the generators here read its rows as actions.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

from . import machine

__all__ = ["checkpoint_schedule", "iter_schedule", "Action", "Schedule", "revolve_cost",
           "STRATEGIES", "execute", "forward_phase", "resolved_snapshots", "forward_actions"]

STRATEGIES = ("all", "ctz", "binomial", "online", "invert", "ctz-revolve")


@dataclasses.dataclass(frozen=True)
class Action:
    """One action of a schedule: ``kind`` and a state ``index`` (``stop`` for advance)."""

    kind: str
    index: int
    stop: int | None = None

    @property
    def start(self):
        return self.index

    def to_dict(self):
        if self.kind == "advance":
            return {"kind": "advance", "start": self.index, "stop": self.stop}
        return {"kind": self.kind, "index": self.index}

    def __repr__(self):
        if self.kind == "advance":
            return f"Action('advance', {self.index}, {self.stop})"
        return f"Action({self.kind!r}, {self.index})"


class Schedule(list):
    """A list of ``Action``s, with the loop ``length``, ``strategy`` and ``snapshots``.

    ``split`` is the index of the first ``reverse`` action (the forward phase ends
    there); ``stats()`` counts what executing it costs; ``draw()`` pictures it.
    """

    def __init__(self, actions, length, strategy, snapshots=None):
        super().__init__(actions)
        self.length, self.strategy, self.snapshots = length, strategy, snapshots
        self.split = next((i for i, a in enumerate(self) if a.kind == "reverse"), len(self))

    def to_dict(self):
        return {"length": self.length, "strategy": self.strategy,
                "snapshots": self.snapshots, "actions": [a.to_dict() for a in self]}

    def stats(self):
        """Replay the schedule, checking it, and count.

        Returns a dict: ``advanced`` (steps run by advance actions: the cost),
        ``recomputed`` (per step, how often the reverse phase advanced it),
        ``reversed`` (steps taped), ``inverted``, ``max_stored`` (most snapshots
        held at once, state 0 included), ``max_snapshots`` (the same, without
        state 0, which is the scan's input).
        """
        n = self.length
        cur = 0
        stored = set()
        advanced = 0
        inverted = 0
        recomputed = [0] * n
        done = []
        max_stored = max_snap = 0
        for pos, a in enumerate(self):
            k = a.kind
            if k == "advance":
                if cur != a.index or not a.index < a.stop <= n - 1:
                    raise AssertionError(f"action {pos} {a!r}: current state is {cur}")
                advanced += a.stop - a.index
                if pos >= self.split:
                    for j in range(a.index, a.stop):
                        recomputed[j] += 1
                cur = a.stop
            elif k == "store":
                if cur != a.index:
                    raise AssertionError(f"action {pos} {a!r}: current state is {cur}")
                stored.add(a.index)
                max_stored = max(max_stored, len(stored))
                max_snap = max(max_snap, len(stored - {0}))
            elif k == "restore":
                if a.index not in stored:
                    raise AssertionError(f"action {pos} {a!r}: state not stored")
                cur = a.index
            elif k == "free":
                stored.discard(a.index)
            elif k == "reverse":
                expected = n - 1 - len(done)
                if cur != a.index or a.index != expected:
                    raise AssertionError(f"action {pos} {a!r}: current state {cur}, "
                                         f"next step to reverse {expected}")
                done.append(a.index)
            elif k == "invert":
                if cur != a.index + 1:
                    raise AssertionError(f"action {pos} {a!r}: current state is {cur}")
                inverted += 1
                cur = a.index
            else:
                raise AssertionError(f"unknown action {a!r}")
        if len(done) != n:
            raise AssertionError(f"{len(done)} of {n} steps reversed")
        return {"advanced": advanced, "recomputed": recomputed, "reversed": len(done),
                "inverted": inverted, "max_stored": max_stored, "max_snapshots": max_snap}

    def draw(self, labels=None):
        """The schedule as text, one row per reversed step, in the style of the seed.

        Columns are states (``0 1 ... 9 a b ...``).  ``X``: a stored snapshot;
        ``+``: a state recomputed (advanced through, not stored) since the previous
        row; ``<``: rebuilt by the inverse step; ``^``: the state whose step is
        reversed in this row.  The first row is the store after the forward sweep.
        """
        n = self.length
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"
        labels = labels or [digits[i % 36] for i in range(n)]
        lines = [" ".join(labels)]
        stored = set()
        touched = set()
        inverted = set()

        def row(mark=None, note=""):
            cells = ["."] * n
            for p in touched:
                cells[p] = "+"
            for p in inverted:
                cells[p] = "<"
            for p in stored:
                cells[p] = "X"
            if mark is not None:
                cells[mark] = "^"
            return " ".join(cells) + ("   " + note if note else "")

        for pos, a in enumerate(self):
            if pos == self.split:
                lines.append(row(note="forward sweep"))
                touched.clear()
            k = a.kind
            if k == "advance":
                if pos >= self.split:
                    touched.update(range(a.index + 1, a.stop + 1))
            elif k == "store":
                stored.add(a.index)
            elif k == "free":
                stored.discard(a.index)
            elif k == "invert":
                inverted.add(a.index)
            elif k == "reverse":
                lines.append(row(a.index, f"reverse {labels[a.index]}"))
                touched.clear()
                inverted.clear()
        return "\n".join(line.rstrip() for line in lines)


@functools.lru_cache(maxsize=None)
def revolve_cost(n, s):
    """Fewest advanced steps to reverse ``n`` steps with ``s`` snapshots besides state 0.

    The minimum of ``t(n, s) = min_{1<=m<n} m + t(n-m, s-1) + t(m, s)``,
    ``t(1, s) = 0``, ``t(n, 0) = n(n-1)/2``, in closed form (Griewank): with ``r``
    the least integer such that ``β(s+1, r) = C(s+1+r, r) >= n``,
    ``t(n, s) = r·n − C(s+1+r, r−1)`` -- computed in integers by the function the
    binomial machine runs (machine._revolve_cost), cached here.
    """
    return machine._revolve_cost(n, s)


# the machines' row kinds, as actions
_KINDS = ("advance", "store", "restore", "reverse", "invert", "free")


def _actions(rows):
    for kind, i, j in rows:
        yield Action("advance", i, j) if kind == 0 else Action(_KINDS[kind], i)


def _read(n, strategy, snapshots):
    """The schedule as machine.py's state machine writes it, a buffer of rows at a time:
    the one definition of every strategy, which the compiled loop runs too."""
    buf = machine.rows_buffer(python=True)
    st = machine.state(n, strategy, snapshots, machine.FORWARD, frees=True, python=True)
    while True:
        m = machine.fill(st, buf)
        if not m:
            break
        yield from _actions(buf[:m])
    st = machine.turn(st)
    while True:
        m = machine.fill(st, buf)
        if not m:
            return
        yield from _actions(buf[:m])


def forward_actions(strategy, snapshots=None):
    """What a forward phase that does not know N (``while_loop``'s) does before each step:
    an endless generator of one list of actions per step, from the strategy's machine
    ("all", "ctz", "online"; "invert" stores nothing)."""
    if strategy == "invert" or (strategy == "online" and not snapshots):
        yield [] if strategy == "invert" else [Action("store", 0)]  # and nothing after
        while True:
            yield []
    st = machine.state(1 << 62, strategy, snapshots, machine.FORWARD, frees=True, python=True)
    buf = machine.rows_buffer(python=True)
    while True:
        m = machine.fill_one(st, buf)
        yield [a for a in _actions(buf[:m]) if a.kind != "advance"]


def _default_snapshots(n):
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def checkpoint_schedule(length, strategy="ctz", snapshots=None):
    """The schedule ``wg.scan`` executes for ``length`` steps, as a list of ``Action``s.

    ``strategy``: ``"all"`` (store every state), ``"ctz"`` (count-trailing-zeros:
    at most ⌊log2 N⌋+1 states stored, N need not be known in advance),
    ``"binomial"`` (revolve: fewest recomputations for ``snapshots`` stored states
    besides state 0; default ⌈log2 N⌉), ``"ctz-revolve"`` (ctz's forward phase, each
    stretch between its stored states reversed by revolve on the free slots: ctz's bound in
    states, fewer recomputations), ``"online"`` (dynamic checkpointing with
    ``snapshots`` slots, decided without knowing N), ``"invert"`` (nothing stored;
    states rebuilt by the inverse step).

    >>> import wengert as wg
    >>> s = wg.checkpoint_schedule(4, "ctz")
    >>> s[:6]
    [Action('store', 0), Action('advance', 0, 1), Action('store', 1), Action('advance', 1, 2), Action('free', 1), Action('store', 2)]
    >>> s.stats()["advanced"], s.stats()["max_stored"]
    (4, 3)
    """
    n, snapshots = _check(length, strategy, snapshots)
    return Schedule(iter_schedule(n, strategy, snapshots), n, strategy, snapshots)


def resolved_snapshots(length, strategy, snapshots=None):
    """The snapshots a schedule uses ("binomial" and "online": the default filled in;
    None for the others)."""
    return _check(length, strategy, snapshots)[1]


def _check(length, strategy, snapshots):
    n = int(length)
    if n < 1:
        raise ValueError(f"checkpoint_schedule needs length >= 1, got {length!r}")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown checkpoint strategy {strategy!r}; use one of {STRATEGIES}")
    if strategy not in ("binomial", "online"):
        return n, None
    if snapshots is None:
        snapshots = _default_snapshots(n)
    if int(snapshots) < 0:
        raise ValueError("snapshots must be >= 0")
    return n, int(snapshots)


def iter_schedule(length, strategy="ctz", snapshots=None):
    """The actions of ``checkpoint_schedule`` one at a time (a generator).

    This is what ``wg.scan`` executes: the schedule is never held whole, so its
    own memory stays O(log N) for "ctz" and O(snapshots) for "binomial".
    """
    n, snapshots = _check(length, strategy, snapshots)
    return _read(n, strategy, snapshots)


# -- executing a schedule: one executor for the eager scan and the compiled one ----------------
def execute(a, cur, stored, loop, stats, ys=None):
    """Do one non-reverse action from state ``cur``; returns the new current state.

    ``loop.advance(state, start, stop, ys)`` runs steps ``start .. stop-1`` (appending
    their y leaves to ``ys`` when it is a list: the forward phase's), ``loop.x_at(k)`` is
    step ``k``'s input and ``loop.back(state, x)`` the inverse step; ``stored`` holds the
    snapshots and ``stats["max_stored"]`` the most held at once.
    """
    k = a.kind
    if k == "advance":
        cur = loop.advance(cur, a.index, a.stop, ys)
    elif k == "store":
        stored[a.index] = cur
        if len(stored) > stats["max_stored"]:
            stats["max_stored"] = len(stored)
    elif k == "restore":
        cur = stored[a.index]
    elif k == "free":
        del stored[a.index]
    elif k == "invert":
        cur = loop.back(cur, loop.x_at(a.index))
    return cur


def forward_phase(actions, init, loop, stats, collect):
    """Run ``actions`` up to the first reverse one, from state 0 = ``init``.

    Returns the current state, the snapshots, the ys (a list if ``collect``) and the
    rest of the schedule (starting with that first reverse action).
    """
    cur, stored = init, {}
    ys = [] if collect else None
    for a in actions:
        if a.kind == "reverse":
            return cur, stored, ys, itertools.chain((a,), actions)
        cur = execute(a, cur, stored, loop, stats, ys)
    raise AssertionError("a schedule without reverse actions")
