"""The checkpoint schedules as Python generators of ``Action``s: the reference the state
machines (wengert/checkpoint/machine.py, the library's only schedule definition) are checked
against, action for action (tests/test_schedule_machines.py).  Written as the recursions
and rules are usually stated, independently of the machines' integer encodings."""
import functools
import math

from wengert.checkpoint.schedules import Action


def _prefixes(i):
    """i with its lowest 0, 1, 2, ... bits cleared (the ctz cache for state i), ascending."""
    out = {0}
    b = 0
    while (i >> b) > 0:
        out.add((i >> b) << b)
        b += 1
    return sorted(out)


def _ctz(k):
    return (k & -k).bit_length() - 1


def _ctz_forward(n):
    """The online ctz forward phase: works without knowing n in advance (a generator)."""
    yield Action("store", 0)
    stack = [0]
    for k in range(1, n):
        yield Action("advance", k - 1, k)
        for _ in range(_ctz(k)):  # states no longer prefixes of k
            yield Action("free", stack.pop())
        stack.append(k)
        yield Action("store", k)


def _ctz_reverse(n):
    stack = _prefixes(n - 1)
    cur = n - 1
    for i in range(n - 1, -1, -1):
        top = stack[-1]
        if top != i:
            if cur != top:
                yield Action("restore", top)
            pos = top
            for p in _prefixes(i):
                if p > top:
                    yield Action("advance", pos, p)
                    yield Action("store", p)
                    stack.append(p)
                    pos = p
        elif cur != i:
            yield Action("restore", i)
        yield Action("reverse", i)
        yield Action("free", i)
        stack.pop()
        cur = None


def _ctz_schedule(n):
    yield from _ctz_forward(n)
    yield from _ctz_reverse(n)


def _all_schedule(n):
    yield Action("store", 0)
    for k in range(1, n):
        yield Action("advance", k - 1, k)
        yield Action("store", k)
    for i in range(n - 1, -1, -1):
        if i != n - 1:
            yield Action("restore", i)
        yield Action("reverse", i)
        yield Action("free", i)


def _invert_schedule(n):
    if n > 1:
        yield Action("advance", 0, n - 1)
    yield Action("reverse", n - 1)
    for i in range(n - 2, -1, -1):
        yield Action("invert", i)
        yield Action("reverse", i)


@functools.lru_cache(maxsize=None)
def revolve_cost(n, s):
    """Griewank's t(n, s) with math.comb."""
    if n <= 1:
        return 0
    r = 0
    while math.comb(s + 1 + r, r) < n:
        r += 1
    return r * n - math.comb(s + 1 + r, r - 1)


def _best_split(n, s):
    """An optimal first snapshot position m for (n, s): the cost is convex in m."""
    def cost(m):
        return m + revolve_cost(n - m, s - 1) + revolve_cost(m, s)
    lo, hi = 1, n - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cost(mid + 1) >= cost(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _binomial_schedule(n, s):
    yield Action("store", 0)
    yield from _revolve_stretch(0, n, s, cur=0)
    yield Action("free", 0)


def _revolve_stretch(a, n, s, cur=None):
    """Reverse steps ``a .. a+n-1`` from the stored state ``a`` with ``s`` free slots, by
    revolve (binomial checkpointing), without storing or freeing ``a`` itself; ``cur``: the
    state the computation holds now (``a`` when it was just stored, so no restore is needed)."""
    work = [("rev", a, n, s)]
    while work:
        task = work.pop()
        if task[0] == "free":
            yield Action("free", task[1])
            continue
        _, b, m_n, m_s = task
        if m_n == 1:
            if cur != b:
                yield Action("restore", b)
            yield Action("reverse", b)
            cur = None
        elif m_s == 0:
            for k in range(b + m_n - 1, b - 1, -1):
                if cur != b:
                    yield Action("restore", b)
                if k > b:
                    yield Action("advance", b, k)
                yield Action("reverse", k)
                cur = None
        else:
            m = _best_split(m_n, m_s)
            if cur != b:
                yield Action("restore", b)
            yield Action("advance", b, b + m)
            yield Action("store", b + m)
            cur = b + m
            # executed in the order: right part, free its snapshot, left part
            work.append(("rev", b, m, m_s))
            work.append(("free", b + m))
            work.append(("rev", b + m, m_n - m, m_s - 1))


def _ctz_revolve_schedule(n):
    """ctz's forward phase (at most ⌊log2 N⌋ + 1 states, N not needed in advance), then each
    stretch between two stored states reversed by revolve on the slots ctz's own reverse
    would leave free: the same bound in states, revolve's count of steps within a stretch."""
    yield from _ctz_forward(n)
    stored = _prefixes(n - 1)           # what the forward phase leaves, ascending
    cap = max(len(stored), n.bit_length())    # ctz's bound, ⌊log2 N⌋ + 1 states
    end, cur = n, n - 1  # the forward phase ends holding state n-1: no restore of it
    for j in range(len(stored) - 1, -1, -1):
        a = stored[j]
        free = cap - (j + 1)
        yield from _revolve_stretch(a, end - a, max(free, 0), cur=cur)
        yield Action("free", a)
        end, cur = a, None


def _online_add(levels, k, s):
    """Store state ``k`` under the dynamic rule of Wang, Moin & Iaccarino (2009).

    ``levels`` maps each stored state (besides state 0) to its level.  With a free
    slot, ``k`` is stored at level 0.  Otherwise the latest snapshot that has a
    later snapshot of higher level is dispensable and makes room; if none is,
    the latest snapshot is replaced by ``k`` one level up.  Yields the actions.
    """
    if s == 0:
        return
    if len(levels) < s:
        levels[k] = 0
        yield Action("store", k)
        return
    victim, high = None, -1
    for j in sorted(levels, reverse=True):
        if levels[j] < high:
            victim = j
            break
        high = max(high, levels[j])
    if victim is not None:
        del levels[victim]
        levels[k] = 0
    else:
        victim = max(levels)
        levels[k] = levels.pop(victim) + 1
    yield Action("free", victim)
    yield Action("store", k)


def _online_schedule(n, s):
    """Dynamic (online) checkpointing: ``s`` slots, decisions made without knowing n."""
    if s == 0:
        yield from _binomial_schedule(n, 0)
        return
    levels = {}
    yield Action("store", 0)
    for k in range(1, n):
        yield Action("advance", k - 1, k)
        yield from _online_add(levels, k, s)
    cur = n - 1
    for i in range(n - 1, -1, -1):
        while True:  # recompute from the latest snapshot, storing by the same rule
            last = max(levels) if levels else 0
            if last >= i:
                break
            if cur != last:
                yield Action("restore", last)
            yield Action("advance", last, last + 1)
            cur = last + 1
            yield from _online_add(levels, last + 1, s)
        if cur != i:
            yield Action("restore", i)
        yield Action("reverse", i)
        cur = None
        if i:
            del levels[i]
            yield Action("free", i)
    yield Action("free", 0)


def reference(n, strategy, snapshots=None):
    """The reference schedule, as a list of Actions."""
    if strategy == "all":
        return list(_all_schedule(n))
    if strategy == "ctz":
        return list(_ctz_schedule(n))
    if strategy == "binomial":
        return list(_binomial_schedule(n, snapshots))
    if strategy == "online":
        return list(_online_schedule(n, snapshots))
    if strategy == "ctz-revolve":
        return list(_ctz_revolve_schedule(n))
    return list(_invert_schedule(n))
