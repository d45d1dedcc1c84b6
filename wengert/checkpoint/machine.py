"""The checkpoint schedules as small state machines: their only definition.

The fused scan (:mod:`.fused`) interprets rows ``(kind, index, stop or slot)``.  Encoding
a whole schedule is O(N) rows (12 bytes each) beside O(log N) stored states; the rows come
instead from :func:`fill`, which writes them a few hundred at a time into a fixed buffer
from a state of a few integers (:func:`state`).  The eager scan, ``checkpoint_schedule``
and ``while_loop`` read the same machines (schedules.iter_schedule, asking for FREE rows
too), so every schedule is written once, here:

* "ctz": the loop length, the next step and the stack of stored states (a state's slot is
  its place on that stack: ctz frees its snapshots last in, first out) -- 72 integers;
* "binomial": revolve's recursion as an explicit stack of tasks (reverse ``n`` steps from
  state ``a`` with ``s`` snapshots; free a snapshot; reverse one step), at most
  ``2 min(s, N) + 8`` of them, 5 integers each; a snapshot's slot is the number held
  before it;
* "online": the snapshots held, in order, with their levels and slots, and the slots
  freed (schedules._online_add's rule on arrays) -- 4 s + 11 integers; its forward phase is
  run again, without steps, to start the reverse one (O(N s) integer work);
* "invert": the next step to reverse;
* "all": the next step (every state stored in the slot of its index);
* "ctz-revolve": ctz's forward phase, then binomial's task stack seeded with two tasks per
  stretch between ctz's stored states (revolve on the slots ctz's reverse would leave free,
  then free the stretch's first state).

The rows are those ``fused.encode(iter_schedule(n, strategy, snapshots))`` gives, and the
tests check the actions against reference generators (tests/schedule_reference.py).  The functions here are plain Python that Numba compiles
unchanged (:func:`jitted`); without Numba they run as they are (the tests do both).
"""
from __future__ import annotations

import types

import numpy as np

from ..graph.fuse import numba_or_none

__all__ = ["FORWARD", "REVERSE_PHASE", "BUFFER_ROWS", "STRATEGIES", "state", "fill", "fill_one",
           "turn", "rows", "rows_buffer", "counts", "jitted"]

FORWARD, REVERSE_PHASE = 0, 1
# st[7]: which machine
STRATEGIES = {"ctz": 0, "binomial": 1, "invert": 2, "online": 3, "all": 4, "ctz-revolve": 5}
_FREES = 8                # st[8]: 1 to write FREE rows too (the Python readers: schedules.py)
_STACK = 9                # st[_STACK:]: the stack (of stored states, or of tasks)
BUFFER_ROWS = 512         # rows per fill; one unit writes at most 2 * 63 + 3 rows
_UNIT = 2 * 63 + 3
# the row kinds of fused.py: ADVANCE, STORE, RESTORE, REVERSE, INVERT; and FREE (index,
# slot), which only the Python readers ask for (the compiled loop reuses a slot by storing)
_ADVANCE, _STORE, _RESTORE, _REVERSE, _INVERT, _FREE_ROW = 0, 1, 2, 3, 4, 5
# binomial's tasks: reverse (a, n, s, slot of a), free the last snapshot, sweep (a, next k,
# -, slot of a: no snapshot left, reverse a+n-1 .. a from state a), reverse one step k
_REV, _FREE, _SWEEP, _ONE = 0, 1, 2, 3


def state(n, strategy, snapshots, phase, fill=None, frees=False, python=False):
    """The machine's start for the forward phase (``FORWARD``, from state 0) or for the
    rest (``REVERSE_PHASE``: the snapshots the forward phase leaves; "binomial" and
    "online" run their forward phase without steps to get there, by ``fill``); ``frees``:
    write a FREE row where a snapshot is dropped (the schedule as ``Action``s); ``python``:
    the state a list of ints, for :func:`fill` run by Python on a list of rows (about three
    times faster there than on NumPy's scalars)."""
    fill = fill or globals()["fill"]
    kind = STRATEGIES[strategy]
    s = int(snapshots or 0)
    if kind == 3 and s == 0:
        kind = 1  # online without snapshots is binomial's schedule
    # binomial's tasks: the pending left parts have ever fewer snapshots and steps;
    # ctz-revolve's: two per stretch (at most 64), and one revolve's on at most 64 slots
    size = (64, 5 * (2 * min(s, n) + 8), 0, 4 * s + 3, 0, 5 * (2 * 64 + 2 * 64 + 8))[kind]
    st = [0] * (_STACK + size) if python else np.zeros(_STACK + size, np.int64)
    st[0], st[1], st[5], st[7], st[_FREES] = n, phase, s, kind, 1 if frees else 0
    if kind == 3:
        st[_STACK] = -1  # the current state
        if phase == REVERSE_PHASE:
            st[1] = FORWARD
            buf = rows_buffer(python)
            while fill(st, buf):
                pass
            turn(st)
    elif kind == 2 or (kind == 4 and phase == REVERSE_PHASE):
        st[2] = n - 1  # the next step to reverse
    elif kind == 1:
        st[2] = -1  # the current state (-1: none)
        if phase == REVERSE_PHASE:  # run the forward phase (O(s) rows) and go on from there
            st[1] = FORWARD
            buf = rows_buffer(python)
            while fill(st, buf):
                pass
            turn(st)
    elif kind == 5 and phase == REVERSE_PHASE:
        # ctz's stored states a_0 < ... < a_J (slot j each); each stretch a_j .. a_(j+1)-1
        # reversed by revolve on the slots ctz's own reverse would leave free, then a_j
        # freed: tasks pushed so that the last stretch runs first
        pre = _prefixes(n - 1)
        cap = max(len(pre), int(n).bit_length())  # ctz's bound, floor(log2 N) + 1 states
        top = 0
        for j in range(len(pre)):
            end = pre[j + 1] if j + 1 < len(pre) else n
            _put(st, _STACK + 5 * top, _FREE, pre[j], 0, 0, j)
            _put(st, _STACK + 5 * top + 5, _REV, pre[j], end - pre[j], max(cap - j - 1, 0), j)
            top += 2
        st[2], st[3], st[4], st[6] = n - 1, top, len(pre), 2  # current: n-1; 2: no store 0
    elif kind != 4 and phase == REVERSE_PHASE:
        pre = _prefixes(n - 1)
        st[_STACK:_STACK + len(pre)] = pre
        st[2], st[3], st[4] = n - 1, len(pre), 1  # next step to reverse, depth, "current is n-1"
    return st


def rows_buffer(python=False):
    """A buffer for :func:`fill`: BUFFER_ROWS rows of a NumPy array (the compiled loop's), or
    a list of two units' lists (Python's: small, as a reader holds it while it runs)."""
    if python:
        return [[0, 0, 0] for _ in range(2 * _UNIT)]
    return np.zeros((BUFFER_ROWS, 3), np.int32)


def turn(st):
    """The reverse phase's start from ``st``, whose forward phase is done: the same state
    where the machine goes on from there ("binomial", "online"), else a new one."""
    kind = st[7]
    if kind == 1:
        st[1] = REVERSE_PHASE
        return st
    if kind == 3:
        st[1], st[2], st[_STACK] = REVERSE_PHASE, st[0] - 1, st[0] - 1
        return st
    name = next(k for k, v in STRATEGIES.items() if v == kind)
    return state(int(st[0]), name, int(st[5]), REVERSE_PHASE, frees=bool(st[_FREES]),
                 python=type(st) is list)


# the rows one forward step writes at most: a buffer this long takes one step per fill
_STEP_ROWS = {0: _UNIT, 3: 4, 4: 3, 5: _UNIT}


def fill_one(st, buf):
    """The forward phase's rows for one more step (``st``: "all", "ctz", "ctz-revolve" or
    "online" with snapshots): what a loop that does not know N does before each step."""
    return fill(st, buf[:_STEP_ROWS[int(st[7])]])


def _prefixes(i):
    """``i`` with its lowest 0, 1, 2... bits cleared: the states ctz holds at state ``i``,
    ascending (0 first)."""
    out = []
    for b in range(63, -1, -1):
        p = (i >> b) << b
        if not out or p > out[-1]:
            out.append(p)
    return out


def fill(st, buf):
    """Write the schedule's next rows into ``buf``; returns how many (0 once the phase is
    done: the forward phase ends before the first reverse row)."""
    kind = st[7]
    if kind == 0 or (kind == 5 and st[1] == FORWARD):
        return _ctz_fill(st, buf)
    if kind == 1 or kind == 5:
        return _binomial_fill(st, buf)
    if kind == 2:
        return _invert_fill(st, buf)
    if kind == 4:
        return _all_fill(st, buf)
    return _online_fill(st, buf)


def _all_fill(st, buf):
    """Forwards, every state stored (in the slot of its index); backwards, each restored
    (the last one is current) and reversed.

    ``st``: [n, phase, next step, -, -, -, -, kind, frees].
    """
    n, k, m = st[0], st[2], 0
    cap = len(buf) - 3
    if st[1] == FORWARD:
        while k < n and m <= cap:
            if k > 0:
                buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, k - 1, k
                m += 1
            buf[m][0], buf[m][1], buf[m][2] = _STORE, k, k
            m += 1
            k += 1
    else:
        while k >= 0 and m <= cap:
            if k != n - 1:
                buf[m][0], buf[m][1], buf[m][2] = _RESTORE, k, k
                m += 1
            buf[m][0], buf[m][1], buf[m][2] = _REVERSE, k, 0
            m += 1
            if st[_FREES]:
                buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, k, k
                m += 1
            k -= 1
    st[2] = k
    return m


def _online_add(st, buf, m, k):
    """schedules._online_add: store state ``k`` in a free slot or in the place of the
    snapshot the rule drops; returns the rows written (a store, after a free if asked)."""
    m0 = m
    s, count, nfree = st[5], st[3], st[_STACK + 1]
    idx, lev, slot, free = _STACK + 2, _STACK + 2 + s, _STACK + 2 + 2 * s, _STACK + 2 + 3 * s
    if count < s:
        if nfree > 0:
            nfree -= 1
            sl = st[free + nfree]
        else:
            sl = st[4]
            st[4] += 1
        level = 0
    else:
        victim, high = -1, -1
        for p in range(count - 1, -1, -1):  # the latest with a later one of higher level
            if st[lev + p] < high:
                victim = p
                break
            if st[lev + p] > high:
                high = st[lev + p]
        level = 0
        if victim < 0:  # none: the latest makes room, one level up
            victim = count - 1
            level = st[lev + victim] + 1
        sl = st[slot + victim]  # its slot is freed and taken at once
        if st[_FREES]:
            buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, st[idx + victim], sl
            m += 1
        for p in range(victim, count - 1):
            st[idx + p], st[lev + p], st[slot + p] = (st[idx + p + 1], st[lev + p + 1],
                                                      st[slot + p + 1])
        count -= 1
    st[idx + count], st[lev + count], st[slot + count] = k, level, sl
    st[3], st[_STACK + 1] = count + 1, nfree
    buf[m][0], buf[m][1], buf[m][2] = _STORE, k, sl
    return m + 1 - m0


def _online_fill(st, buf):
    """Forwards one step and its store at a time; backwards one recomputed step, or one
    step reversed, at a time.

    ``st``: [n, phase, next step, snapshots held, slots used, s, started, kind, current
    state, free slots held, their indices (s), levels (s), slots (s), free slots (s+1)].
    """
    n, s, k = st[0], st[5], st[2]
    idx, slot, free = _STACK + 2, _STACK + 2 + 2 * s, _STACK + 2 + 3 * s
    m = 0
    cap = len(buf) - 4
    if st[1] == FORWARD:
        if st[6] == 0:
            st[6], st[4] = 1, 1
            buf[0][0], buf[0][1], buf[0][2] = _STORE, 0, 0
            m, k = 1, 1
        while k < n and m <= cap:
            buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, k - 1, k
            m += 1
            m += _online_add(st, buf, m, k)
            k += 1
        st[2] = k
        return m
    cur = st[_STACK]
    while k >= 0 and m <= cap:
        count = st[3]
        last = st[idx + count - 1] if count > 0 else 0
        ls = st[slot + count - 1] if count > 0 else 0
        if last < k:  # recompute one step from the latest snapshot, storing by the rule
            if cur != last:
                buf[m][0], buf[m][1], buf[m][2] = _RESTORE, last, ls
                m += 1
            buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, last, last + 1
            m += 1
            cur = last + 1
            m += _online_add(st, buf, m, last + 1)
            continue
        if cur != k:  # k is the latest snapshot (or state 0)
            buf[m][0], buf[m][1], buf[m][2] = _RESTORE, k, ls
            m += 1
        buf[m][0], buf[m][1], buf[m][2] = _REVERSE, k, 0
        m += 1
        cur = -1
        if k > 0:  # free it
            st[free + st[_STACK + 1]] = ls
            st[_STACK + 1] += 1
            st[3] = count - 1
            if st[_FREES]:
                buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, k, ls
                m += 1
        k -= 1
    if k < 0 and st[_FREES] and st[6] == 1 and m < len(buf):  # and state 0
        buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, 0, 0
        m += 1
        st[6] = 2
    st[2], st[_STACK] = k, cur
    return m


def _invert_fill(st, buf):
    """Forwards, steps 0 .. n-2 in one row; then reverse n-1, and for each earlier step
    invert it (from the state after it) and reverse it.

    ``st``: [n, phase, next step to reverse, -, -, -, started, kind].
    """
    if st[1] == FORWARD:
        if st[6] or st[0] == 1:
            return 0
        st[6] = 1
        buf[0][0], buf[0][1], buf[0][2] = _ADVANCE, 0, st[0] - 1
        return 1
    k, m = st[2], 0
    while k >= 0 and m <= len(buf) - 2:
        if k < st[0] - 1:
            buf[m][0], buf[m][1], buf[m][2] = _INVERT, k, 0
            m += 1
        buf[m][0], buf[m][1], buf[m][2] = _REVERSE, k, 0
        m += 1
        k -= 1
    st[2] = k
    return m


def _ctz_fill(st, buf):
    """Whole units: one step forwards, or one step reversed with its recomputation.

    ``st``: [n, phase, next step, stack depth, current state is the next step (reverse
    phase), -, -, kind, stack...].
    """
    n, phase = st[0], st[1]
    k, depth = st[2], st[3]
    m = 0
    cap = len(buf) - _UNIT
    if phase == FORWARD:
        while k < n and m <= cap:
            if k == 0:
                st[_STACK] = 0
                depth = 1
                buf[m][0], buf[m][1], buf[m][2] = _STORE, 0, 0
                m += 1
            else:
                buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, k - 1, k
                m += 1
                t = k
                while t & 1 == 0:  # free the snapshots that are no prefixes of k
                    depth -= 1
                    t >>= 1
                    if st[_FREES]:
                        buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, st[_STACK + depth], depth
                        m += 1
                st[_STACK + depth] = k
                buf[m][0], buf[m][1], buf[m][2] = _STORE, k, depth
                m += 1
                depth += 1
            k += 1
    else:
        while k >= 0 and m <= cap:
            top = st[_STACK + depth - 1]
            if top != k:
                buf[m][0], buf[m][1], buf[m][2] = _RESTORE, top, depth - 1
                m += 1
                pos = top
                for b in range(63, -1, -1):  # recompute up to k, storing its prefixes
                    p = (k >> b) << b
                    if p > pos:
                        buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, pos, p
                        buf[m + 1][0], buf[m + 1][1], buf[m + 1][2] = _STORE, p, depth
                        m += 2
                        st[_STACK + depth] = p
                        depth += 1
                        pos = p
            elif st[4] == 0:
                buf[m][0], buf[m][1], buf[m][2] = _RESTORE, k, depth - 1
                m += 1
            buf[m][0], buf[m][1], buf[m][2] = _REVERSE, k, 0
            m += 1
            depth -= 1  # state k is freed
            if st[_FREES]:
                buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, k, depth
                m += 1
            st[4] = 0
            k -= 1
    st[2], st[3] = k, depth
    return m


def _revolve_cost(n, s):
    """schedules.revolve_cost in integers: r the least with C(s+1+r, r) >= n, then
    r n - C(s+1+r, r-1) (= C(s+1+r, r) r / (s+2), exactly)."""
    if n <= 1:
        return 0
    r, beta = 0, 1
    while beta < n:
        r += 1
        beta = beta * (s + 1 + r) // r
    return r * n - beta * r // (s + 2)


def _best_split(n, s):
    """schedules._best_split: the least m minimising m + t(n-m, s-1) + t(m, s)."""
    lo, hi = 1, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        c0 = mid + _revolve_cost(n - mid, s - 1) + _revolve_cost(mid, s)
        c1 = mid + 1 + _revolve_cost(n - mid - 1, s - 1) + _revolve_cost(mid + 1, s)
        if c1 >= c0:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _put(st, e, t, a, x, y, slot):
    st[e], st[e + 1], st[e + 2], st[e + 3], st[e + 4] = t, a, x, y, slot


def _binomial_fill(st, buf):
    """One task at a time (at most 3 rows each).

    ``st``: [n, phase, current state (-1: none), tasks, snapshots held, s, started, kind,
    tasks (5 integers each: kind, a, n or next k, s, slot of a)...].
    """
    cur, top, held = st[2], st[3], st[4]
    m = 0
    cap = len(buf) - 3
    most = (len(st) - _STACK) // 5
    if st[6] == 0:  # store state 0, then reverse all n steps with s snapshots
        st[6] = 1
        buf[0][0], buf[0][1], buf[0][2] = _STORE, 0, 0
        m, held, cur = 1, 1, 0
        _put(st, _STACK, _REV, 0, st[0], st[5], 0)
        top = 1
    while top > 0 and m <= cap:
        e = _STACK + 5 * (top - 1)
        t, a, x, y, slot = st[e], st[e + 1], st[e + 2], st[e + 3], st[e + 4]
        if t == _ONE:
            if st[1] == FORWARD:
                break  # the forward phase ends before its first reverse row
            buf[m][0], buf[m][1], buf[m][2] = _REVERSE, a, 0
            m += 1
            cur = -1
            top -= 1
        elif t == _FREE:
            held -= 1
            top -= 1
            if st[_FREES]:
                buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, a, slot
                m += 1
        elif t == _SWEEP:
            if x < a:
                top -= 1
                continue
            if cur != a:
                buf[m][0], buf[m][1], buf[m][2] = _RESTORE, a, slot
                m += 1
            if x > a:
                buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, a, x
                m += 1
            cur = x
            st[e + 2] = x - 1
            if top >= most:
                raise ValueError("binomial machine: task stack overflow")
            e += 5
            st[e], st[e + 1] = _ONE, x
            top += 1
        else:  # reverse x steps from state a with y snapshots
            top -= 1
            if x == 1:
                if cur != a:
                    buf[m][0], buf[m][1], buf[m][2] = _RESTORE, a, slot
                    m += 1
                st[e], st[e + 1] = _ONE, a
                top += 1
            elif y == 0:
                st[e], st[e + 2] = _SWEEP, a + x - 1
                top += 1
            else:
                h = _best_split(x, y)
                if cur != a:
                    buf[m][0], buf[m][1], buf[m][2] = _RESTORE, a, slot
                    m += 1
                buf[m][0], buf[m][1], buf[m][2] = _ADVANCE, a, a + h
                buf[m + 1][0], buf[m + 1][1], buf[m + 1][2] = _STORE, a + h, held
                m += 2
                cur = a + h
                if top + 3 > most:
                    raise ValueError("binomial machine: task stack overflow")
                # done in the order: the right part, free its snapshot, the left part
                _put(st, e, _REV, a, h, y, slot)
                _put(st, e + 5, _FREE, a + h, 0, 0, held)
                _put(st, e + 10, _REV, a + h, x - h, y - 1, held)
                top += 3
                held += 1
    if top == 0 and st[_FREES] and st[6] == 1 and m < len(buf):  # binomial's state 0
        buf[m][0], buf[m][1], buf[m][2] = _FREE_ROW, 0, 0
        m += 1
        st[6] = 2
    st[2], st[3], st[4] = cur, top, held
    return m


def rows(n, strategy, snapshots, phase, frees=False):
    """The rows of one phase, one at a time (for the tests)."""
    st = state(n, strategy, snapshots, phase, frees=frees)
    buf = np.zeros((BUFFER_ROWS, 3), np.int32)
    while True:
        m = fill(st, buf)
        if m == 0:
            return
        for r in range(m):
            yield tuple(int(v) for v in buf[r])


def _count(st, buf):
    """Steps advanced, stores, steps inverted and the most slots used by the phase that
    ``st`` starts."""
    steps = slots = stores = inverted = 0
    while True:
        m = fill(st, buf)
        if m == 0:
            return steps, stores, inverted, slots
        for r in range(m):
            if buf[r][0] == _INVERT:
                inverted += 1
            elif buf[r][0] == _ADVANCE:
                steps += buf[r][2] - buf[r][1]
            elif buf[r][0] == _STORE:
                stores += 1
                if buf[r][2] + 1 > slots:
                    slots = buf[r][2] + 1


def _no_fill(st, buf):
    return 0


# online without snapshots runs binomial's machine: it takes the dispatching fill
_FILLS = {"ctz": "_ctz_fill", "binomial": "_binomial_fill", "invert": "_invert_fill",
          "online": "fill", "all": "_all_fill", "ctz-revolve": "fill"}
_JITTED = {}


def jitted(strategy):
    """The strategy's ``fill`` and ``count`` compiled by Numba (once; a strategy without a
    machine gets a ``fill`` that makes no rows): each function recompiled with globals in
    which the others are their compiled versions, and ``fill`` the strategy's own (Numba
    compiles only what that machine calls)."""
    got = _JITTED.get(strategy)
    if got is None:
        numba = numba_or_none()[0]
        ns = dict(globals())
        names = ("fill", "_ctz_fill", "_binomial_fill", "_invert_fill", "_online_fill",
                 "_online_add", "_all_fill", "_no_fill", "_revolve_cost", "_best_split",
                 "_put", "_count")
        for name in names:
            fn = globals()[name]
            ns[name] = numba.njit(types.FunctionType(fn.__code__, ns, name))
        ns["fill"] = ns[_FILLS.get(strategy, "_no_fill")]
        # (threads that race here compile twice; all keep the first)
        got = _JITTED.setdefault(strategy, types.SimpleNamespace(fill=ns["fill"],
                                                                 count=ns["_count"]))
    return got


def counts(n, strategy, snapshots, compiled=True):
    """Steps advanced in each phase, stores and the slots needed, in O(snapshots) memory:
    ``fused.encode``'s counts, with ``max_stored`` (the most snapshots held at once)."""
    count, fill_ = (jitted(strategy).count, jitted(strategy).fill) if compiled else \
        (_count, None)
    buf = np.zeros((BUFFER_ROWS, 3), np.int32)
    fs, f_stores, f_inv, f_slots = count(state(n, strategy, snapshots, FORWARD), buf)
    rs, r_stores, r_inv, r_slots = count(state(n, strategy, snapshots, REVERSE_PHASE, fill_),
                                         buf)
    return {"fwd_steps": int(fs) + 1, "rev_steps": int(rs), "fwd_inverted": int(f_inv),
            "rev_inverted": int(r_inv), "stores": int(f_stores + r_stores),
            "max_stored": max(int(f_slots), int(r_slots))}
