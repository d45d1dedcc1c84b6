"""The "ctz" schedule as a small state machine, so the compiled loop needs no action array.

The fused scan (:mod:`.fused`) interprets rows ``(kind, index, stop or slot)``.  Encoding
a whole schedule is O(N) rows (12 bytes each) beside O(log N) stored states; for "ctz"
the rows come instead from :func:`ctz_fill`, which writes them a few hundred at a time
into a fixed buffer from a state of ``STATE_SIZE`` integers: the loop length, the next
step, and the stack of stored states (a state's slot is its place on that stack: the
schedule frees its snapshots last-in first-out).  The rows are those
``fused.encode(iter_schedule(n, "ctz"))`` gives (the tests check it row for row), so the
loop makes the same calls in the same order and its results are bitwise the same.

:func:`ctz_fill` is plain Python that Numba compiles unchanged (:func:`jitted`); without
Numba it runs as it is (the tests do both).
"""
from __future__ import annotations

import numpy as np

from ..graph.fuse import numba_or_none

__all__ = ["FORWARD", "REVERSE_PHASE", "STATE_SIZE", "BUFFER_ROWS", "ctz_state", "ctz_fill",
           "ctz_rows", "ctz_counts", "jitted"]

FORWARD, REVERSE_PHASE = 0, 1
_STACK = 8                # st[_STACK:] is the stack of stored states
STATE_SIZE = _STACK + 64  # a state index has at most 63 bits: at most 64 prefixes
BUFFER_ROWS = 512         # rows per fill; one unit writes at most 2 * 63 + 2 rows
_UNIT = 2 * 63 + 2
# the row kinds of fused.py: ADVANCE, STORE, RESTORE, REVERSE
_ADVANCE, _STORE, _RESTORE, _REVERSE = 0, 1, 2, 3


def ctz_state(n, phase):
    """The machine's start for the forward phase (``FORWARD``: from state 0) or the rest
    (``REVERSE_PHASE``: the forward phase's snapshots, the prefixes of ``n - 1``)."""
    st = np.zeros(STATE_SIZE, np.int64)
    st[0], st[1] = n, phase
    if phase == REVERSE_PHASE:
        i, depth = n - 1, 0
        for b in range(63, -1, -1):  # the prefixes of n - 1, ascending (0 first)
            p = (i >> b) << b
            if depth == 0 or p > st[_STACK + depth - 1]:
                st[_STACK + depth] = p
                depth += 1
        st[2], st[3], st[4] = n - 1, depth, 1  # next step to reverse, depth, "current is n-1"
    return st


def ctz_fill(st, buf):
    """Write the schedule's next rows into ``buf`` (whole units: one step forwards, or one
    step reversed with its recomputation); returns how many (0 once the phase is done).

    ``st``: [n, phase, next step, stack depth, current state is the next step (reverse
    phase), -, -, -, stack...].
    """
    n, phase = st[0], st[1]
    k, depth = st[2], st[3]
    m = 0
    cap = buf.shape[0] - _UNIT
    if phase == FORWARD:
        while k < n and m <= cap:
            if k == 0:
                st[_STACK] = 0
                depth = 1
                buf[m, 0], buf[m, 1], buf[m, 2] = _STORE, 0, 0
                m += 1
            else:
                buf[m, 0], buf[m, 1], buf[m, 2] = _ADVANCE, k - 1, k
                m += 1
                t = k
                while t & 1 == 0:  # free the snapshots that are no prefixes of k
                    depth -= 1
                    t >>= 1
                st[_STACK + depth] = k
                buf[m, 0], buf[m, 1], buf[m, 2] = _STORE, k, depth
                m += 1
                depth += 1
            k += 1
    else:
        while k >= 0 and m <= cap:
            top = st[_STACK + depth - 1]
            if top != k:
                buf[m, 0], buf[m, 1], buf[m, 2] = _RESTORE, top, depth - 1
                m += 1
                pos = top
                for b in range(63, -1, -1):  # recompute up to k, storing its prefixes
                    p = (k >> b) << b
                    if p > pos:
                        buf[m, 0], buf[m, 1], buf[m, 2] = _ADVANCE, pos, p
                        buf[m + 1, 0], buf[m + 1, 1], buf[m + 1, 2] = _STORE, p, depth
                        m += 2
                        st[_STACK + depth] = p
                        depth += 1
                        pos = p
            elif st[4] == 0:
                buf[m, 0], buf[m, 1], buf[m, 2] = _RESTORE, k, depth - 1
                m += 1
            buf[m, 0], buf[m, 1], buf[m, 2] = _REVERSE, k, 0
            m += 1
            depth -= 1  # state k is freed
            st[4] = 0
            k -= 1
    st[2], st[3] = k, depth
    return m


def ctz_rows(n, phase, fill=ctz_fill):
    """The rows of one phase, one at a time (for the tests and for counting)."""
    st = ctz_state(n, phase)
    buf = np.zeros((BUFFER_ROWS, 3), np.int32)
    while True:
        m = fill(st, buf)
        if m == 0:
            return
        for r in range(m):
            yield tuple(int(v) for v in buf[r])


def _count(st, buf, fill):
    """Steps advanced, stores and the most slots used by the phase that ``st`` starts."""
    steps = slots = stores = 0
    while True:
        m = fill(st, buf)
        if m == 0:
            return steps, stores, slots
        for r in range(m):
            if buf[r, 0] == _ADVANCE:
                steps += buf[r, 2] - buf[r, 1]
            elif buf[r, 0] == _STORE:
                stores += 1
                if buf[r, 2] + 1 > slots:
                    slots = buf[r, 2] + 1


_JITTED = []


def jitted():
    """``(fill, count)`` compiled by Numba, once."""
    if not _JITTED:
        numba = numba_or_none()[0]
        fill = numba.njit(ctz_fill)
        count = numba.njit(_count)
        _JITTED.append((fill, count))
    return _JITTED[0]


def ctz_counts(n, compiled=True):
    """Steps advanced in each phase, stores and the slots needed, in O(log N) memory: as
    ``fused.encode``'s counts, with ``nslots`` (the most snapshots held at once)."""
    fill, count = jitted() if compiled else (ctz_fill, _count)
    buf = np.zeros((BUFFER_ROWS, 3), np.int32)
    fs, f_stores, f_slots = count(ctz_state(n, FORWARD), buf, fill)
    rs, r_stores, r_slots = count(ctz_state(n, REVERSE_PHASE), buf, fill)
    return {"fwd_steps": int(fs) + 1, "rev_steps": int(rs), "fwd_inverted": 0,
            "rev_inverted": 0, "stores": int(f_stores + r_stores),
            "nslots": max(int(f_slots), int(r_slots), 1)}
