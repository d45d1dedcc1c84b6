"""Checkpointing: trade recomputation for memory in reverse mode.

* ``checkpoint(f)``: ``f``'s intermediates are not kept on the tape; ``f`` is run
  again, on a fresh sub-tape, when the reverse sweep reaches it.
* ``scan(step, init, xs)``: a loop ``carry, y = step(carry, x)`` recorded as ONE
  tape node.  Its pullback executes a *schedule*: which loop states to store
  during the forward sweep, which to rebuild later ("all", "ctz", "binomial",
  "online", "invert").  ``while_loop(cond, body, init)``: the same for a loop
  whose length is found by running it.
* ``checkpoint_schedule(length, strategy)``: that schedule, as a list of
  ``Action``s, for inspection, tests and drawings.

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
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np

from .core import Tracer, ndim_of, primitive, shape_of
from .reverse import Tape, Var, active_tapes
from .tree import flatten, unflatten

__all__ = ["checkpoint", "scan", "while_loop", "checkpoint_schedule", "iter_schedule", "Action",
           "Schedule", "revolve_cost", "STRATEGIES"]

STRATEGIES = ("all", "ctz", "binomial", "online", "invert")


# =====================================================================================
# Schedules
# =====================================================================================
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
def _beta(s, r):
    return math.comb(s + r, s)


@functools.lru_cache(maxsize=None)
def revolve_cost(n, s):
    """Fewest advanced steps to reverse ``n`` steps with ``s`` snapshots besides state 0.

    The minimum of ``t(n, s) = min_{1<=m<n} m + t(n-m, s-1) + t(m, s)``,
    ``t(1, s) = 0``, ``t(n, 0) = n(n-1)/2``, in closed form (Griewank): with ``r``
    the least integer such that ``β(s+1, r) = C(s+1+r, r) >= n``,
    ``t(n, s) = r·n − C(s+1+r, r−1)``.
    """
    if n <= 1:
        return 0
    r = 0
    while _beta(s + 1, r) < n:
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
    cur = 0
    work = [("rev", 0, n, s)]  # an explicit stack: no recursion limit
    while work:
        task = work.pop()
        if task[0] == "free":
            yield Action("free", task[1])
            continue
        _, a, m_n, m_s = task
        if m_n == 1:
            if cur != a:
                yield Action("restore", a)
            yield Action("reverse", a)
            cur = None
        elif m_s == 0:
            for k in range(a + m_n - 1, a - 1, -1):
                if cur != a:
                    yield Action("restore", a)
                if k > a:
                    yield Action("advance", a, k)
                yield Action("reverse", k)
                cur = None
        else:
            m = _best_split(m_n, m_s)
            if cur != a:
                yield Action("restore", a)
            yield Action("advance", a, a + m)
            yield Action("store", a + m)
            cur = a + m
            # executed in the order: right part, free its snapshot, left part
            work.append(("rev", a, m, m_s))
            work.append(("free", a + m))
            work.append(("rev", a + m, m_n - m, m_s - 1))
    yield Action("free", 0)


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


def _default_snapshots(n):
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def checkpoint_schedule(length, strategy="ctz", snapshots=None):
    """The schedule ``wg.scan`` executes for ``length`` steps, as a list of ``Action``s.

    ``strategy``: ``"all"`` (store every state), ``"ctz"`` (count-trailing-zeros:
    at most ⌊log2 N⌋+1 states stored, N need not be known in advance),
    ``"binomial"`` (revolve: fewest recomputations for ``snapshots`` stored states
    besides state 0; default ⌈log2 N⌉), ``"online"`` (dynamic checkpointing with
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
    if strategy == "all":
        return _all_schedule(n)
    if strategy == "ctz":
        return _ctz_schedule(n)
    if strategy == "binomial":
        return _binomial_schedule(n, snapshots)
    if strategy == "online":
        return _online_schedule(n, snapshots)
    return _invert_schedule(n)


# =====================================================================================
# Private primitives: take one slice along an axis, put it back, stack slices.
# (Cotangents may carry leading batch axes, so each takes the axis to work on.)
# =====================================================================================
@primitive(name="checkpoint_take")
def _take(x, index=0, axis=0):
    return np.take(x, index, axis=axis)


@primitive(name="checkpoint_put")
def _put(g, index=0, axis=0, n=1):
    g = np.asarray(g)
    out = np.zeros(g.shape[:axis] + (n,) + g.shape[axis:], g.dtype)
    out[(slice(None),) * axis + (index,)] = g
    return out


@primitive(name="checkpoint_stack")
def _stack(*xs, axis=0):
    return np.stack(xs, axis=axis)


@_take.frule(symbolic_zeros=True)
def _take_jvp(primals, tangents, index=0, axis=0):
    (x,), (dx,) = primals, tangents
    ans = _take(x, index=index, axis=axis)
    if dx is None:
        return ans, None
    return ans, _take(dx, index=index, axis=axis + ndim_of(dx) - ndim_of(x))


@_take.rrule
def _take_vjp(x, index=0, axis=0):
    ans = _take(x, index=index, axis=axis)
    n = shape_of(x)[axis]

    def pullback(g):
        return (_put(g, index=index, axis=axis + ndim_of(g) - ndim_of(ans), n=n),)
    return ans, pullback


@_put.frule(symbolic_zeros=True)
def _put_jvp(primals, tangents, index=0, axis=0, n=1):
    (g,), (dg,) = primals, tangents
    ans = _put(g, index=index, axis=axis, n=n)
    if dg is None:
        return ans, None
    return ans, _put(dg, index=index, axis=axis + ndim_of(dg) - ndim_of(g), n=n)


@_put.rrule
def _put_vjp(g, index=0, axis=0, n=1):
    ans = _put(g, index=index, axis=axis, n=n)

    def pullback(h):
        return (_take(h, index=index, axis=axis + ndim_of(h) - ndim_of(ans)),)
    return ans, pullback


@_stack.frule(symbolic_zeros=True)
def _stack_jvp(primals, tangents, axis=0):
    ans = _stack(*primals, axis=axis)
    live = [(p, t) for p, t in zip(primals, tangents) if t is not None]
    if not live:
        return ans, None
    p0, t0 = live[0]
    nb = ndim_of(t0) - ndim_of(p0)
    batch = shape_of(t0)[:nb]
    ts = [t if t is not None else np.zeros(batch + shape_of(p), _dtype(t0))
          for p, t in zip(primals, tangents)]
    return ans, _stack(*ts, axis=axis + nb)


@_stack.rrule
def _stack_vjp(*xs, axis=0):
    ans = _stack(*xs, axis=axis)

    def pullback(g):
        nb = ndim_of(g) - ndim_of(ans)
        return tuple(_take(g, index=k, axis=axis + nb) for k in range(len(xs)))
    return ans, pullback


def _dtype(x):
    while isinstance(x, Tracer):
        x = x.value
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


def _index(x, k, axis=0):
    """``x[k]`` along ``axis``: plain NumPy indexing when ``x`` is not traced."""
    if isinstance(x, Tracer):
        return _take(x, index=k, axis=axis)
    if axis == 0:
        return x[k]
    return x[(slice(None),) * axis + (k,)]


def _stack_list(vals, axis=0):
    if any(isinstance(v, Tracer) for v in vals):
        return _stack(*vals, axis=axis)
    return np.stack(vals, axis=axis)


def _is_float(x):
    try:
        dt = _dtype(x)
        return dt is not None and np.issubdtype(dt, np.floating)
    except TypeError:
        return False


# =====================================================================================
# Which trace to checkpoint on
# =====================================================================================
def _top_trace(leaves):
    """The innermost live trace among the leaves' and the running transforms' traces.

    Tapes are followed through redirections (a sub-tape standing in for its
    parent); a paused tape is skipped (we are inside a checkpointed forward pass).
    """
    top = None
    cands = [x._trace for x in leaves if isinstance(x, Tracer)]
    cands.extend(active_tapes())
    for t in cands:
        if isinstance(t, Tape):
            t = t.resolve()
            if t._paused is not None:
                continue
        if top is None or t.level > top.level:
            top = t
    return top


def _strip(leaves, tape):
    """Values as seen inside the region, and the region's parents on ``tape``."""
    vals, owned = [], []
    for x in leaves:
        if isinstance(x, Var) and x._trace.resolve() is tape:
            v = tape.own(x)
            vals.append(v.value)
            owned.append(v)
        else:
            vals.append(x)
            owned.append(None)
    return vals, owned


def _escapes(leaves, tape):
    """True if a value of a trace above ``tape`` (not seen when we chose it) came out."""
    for x in leaves:
        if isinstance(x, Tracer):
            t = x._trace
            if isinstance(t, Tape):
                t = t.resolve()
            if t.level > tape.level or t is tape:
                return True
    return False


class _SubtapeVJP:
    """Run ``fn`` on a fresh sub-tape of ``tape`` and pull cotangents back through it.

    Each sub-tape is finished once swept: ``transform`` (``"wg.checkpoint"``) of ``user_fn``
    names it to a Var that escapes the user's function in the reverse sweep.
    """

    def __init__(self, tape, transform, user_fn):
        self.tape = tape
        self.transform, self.user_fn = transform, user_fn
        self.captured = {}  # parent-tape Var index -> accumulated cotangent
        self._owned = set()  # indices whose accumulator is our own array (add in place)

    def __call__(self, fn, in_vals, want, out_cts):
        """``fn(list of inputs) -> list of outputs``; ``want[i]``: input i gets a cotangent.

        Returns the cotangents of the inputs (``None`` = zero) and accumulates those
        of the parent tape's Vars that ``fn`` read into ``self.captured``.
        """
        sub = self.tape.subtape()
        try:
            return self._on(sub, fn, in_vals, want, out_cts)
        finally:
            sub.finish(self.transform, self.user_fn)

    def _on(self, sub, fn, in_vals, want, out_cts):
        ins = [sub._leaf(v) if w else v for v, w in zip(in_vals, want)]
        # the redirection lasts through the sweep: pullbacks of regions recorded on the
        # sub-tape (nested scans and checkpoints) run user code that reads our Vars again
        with self.tape.redirected(sub), sub.active():
            outs = fn(ins)
            # an output may be a captured Var itself: use its input on the sub-tape
            outs = [sub.own(o) if isinstance(o, Var) and o._trace is not sub
                    and o._trace.resolve() is sub else o for o in outs]
            seeds = {}
            for o, g in zip(outs, out_cts):
                if g is None or not isinstance(o, Var) or o._trace is not sub:
                    continue
                seeds[o.index] = g if o.index not in seeds else seeds[o.index] + g
            if not seeds:
                return [None] * len(ins)
            adj = sub.sweep(seeds)
        res = [adj[v.index] if w else None for v, w in zip(ins, want)]
        cap = self.captured
        for idx, leaf in sub.lifted.items():
            g = adj[leaf.index]
            if g is None:
                continue
            if idx not in cap:
                cap[idx] = g
            elif idx in self._owned:
                np.add(cap[idx], g, out=cap[idx])
            else:
                acc = cap[idx] + g
                cap[idx] = acc
                # a plain array of our own from now on: later steps add in place
                if type(acc) is np.ndarray and not isinstance(g, Tracer) \
                        and acc.shape == np.shape(g) and acc.dtype == np.result_type(g, acc):
                    self._owned.add(idx)
        return res


# =====================================================================================
# checkpoint(f)
# =====================================================================================
def checkpoint(f):
    """``f`` with the same values, whose intermediates reverse mode does not keep.

    Under ``wg.grad`` / ``wg.vjp`` the call becomes one tape node; the reverse sweep
    runs ``f`` again on a fresh sub-tape to pull cotangents through it.  Values
    ``f`` closes over (say a weight matrix being differentiated) get their
    cotangents too.  Checkpoints nest.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> calls = []
    >>> def block(x):
    ...     calls.append(1)
    ...     return wnp.sin(x) * wnp.exp(x)
    >>> g = wg.grad(lambda x: wg.checkpoint(block)(x) ** 2)(0.3)
    >>> bool(abs(g - wg.grad(lambda x: block(x) ** 2)(0.3)) < 1e-12), len(calls)
    (True, 3)
    """
    @functools.wraps(f)
    def checkpointed(*args, **kwargs):
        leaves, d = flatten(args)
        tape = _top_trace(leaves)
        if not isinstance(tape, Tape):
            return f(*args, **kwargs)
        vals, owned = _strip(leaves, tape)
        touched = {}
        with tape.paused(touched):
            out = f(*unflatten(d, vals), **kwargs)
        out_leaves, out_def = flatten(out)
        if _escapes(out_leaves, tape):
            return f(*args, **kwargs)
        want = [o is not None and _is_float(v) for o, v in zip(owned, vals)]
        captured = list(touched.values())
        parents = [o for o, w in zip(owned, want) if w] + captured
        live = [j for j, o in enumerate(out_leaves) if _is_float(o)]
        if not parents or not live:
            return out
        # inputs of the recomputation: every float input, so cotangents reach them
        in_want = [_is_float(v) for v in vals]

        def run(ins):
            o = f(*unflatten(d, ins), **kwargs)
            ol, od = flatten(o)
            if od != out_def:
                raise ValueError("checkpoint: the function returned a different structure "
                                 "when it was run again")
            return [ol[j] for j in live]

        def pullback(gs):
            vjp = _SubtapeVJP(tape, "wg.checkpoint", f)
            cts = vjp(run, vals, in_want, list(gs))
            res = [c for c, w in zip(cts, want) if w]
            res += [vjp.captured.get(v.index) for v in captured]
            return tuple(res)

        outs = tape.record(parents, pullback, "checkpoint", [out_leaves[j] for j in live],
                           multiple=True)
        new = list(out_leaves)
        for j, v in zip(live, outs):
            new[j] = v
        return unflatten(out_def, new)
    return checkpointed


# =====================================================================================
# scan
# =====================================================================================
class _Loop:
    """The loop body on flat leaves: ``state -> (state, y leaves)``."""

    def __init__(self, step, carry_def, xs_leaves, xs_def, n, inverse=None):
        self.step, self.carry_def = step, carry_def
        self.xs_leaves, self.xs_def, self.n = xs_leaves, xs_def, n
        self.inverse = inverse
        self.y_def = None
        self.calls = 0

    def x_at(self, k, xs_leaves=None):
        if self.xs_def is None:
            return None
        leaves = self.xs_leaves if xs_leaves is None else xs_leaves
        return unflatten(self.xs_def, [_index(x, k) for x in leaves])

    def __call__(self, state, x):
        self.calls += 1
        out = self.step(unflatten(self.carry_def, state), x)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError("scan: step(carry, x) must return a pair (carry, y); "
                             "use (carry, None) for no y")
        carry, y = out
        cl, cd = flatten(carry)
        if cd != self.carry_def:
            raise ValueError(f"scan: step returned a carry of structure {cd!r}, but init "
                             f"has structure {self.carry_def!r}")
        yl, yd = flatten(y)
        if self.y_def is None:
            self.y_def = yd
        elif yd != self.y_def:
            raise ValueError("scan: step returned ys of different structures")
        return cl, yl

    def back(self, state, x):
        prev = self.inverse(unflatten(self.carry_def, state), x)
        pl, pd = flatten(prev)
        if pd != self.carry_def:
            raise ValueError("scan: inverse(carry, x) must return a carry like init")
        return pl


def _length(xs_leaves, length):
    n = None
    for x in xs_leaves:
        s = shape_of(x)
        if not s:
            raise ValueError("scan: every leaf of xs needs a leading axis to scan over")
        if n is None:
            n = s[0]
        elif s[0] != n:
            raise ValueError(f"scan: xs leaves have different lengths {n} and {s[0]}")
    if n is None:
        if length is None:
            raise ValueError("scan needs xs or length")
        return int(length)
    if length is not None and int(length) != n:
        raise ValueError(f"scan: length={length} but xs has {n} entries")
    return n


def _plain_scan(step, init, xs_leaves, xs_def, n):
    carry_def = flatten(init)[1]
    loop = _Loop(step, carry_def, xs_leaves, xs_def, n)
    state = flatten(init)[0]
    ys = []
    for k in range(n):
        state, yl = loop(state, loop.x_at(k))
        ys.append(yl)
    carry = unflatten(carry_def, state)
    return carry, _stack_ys(loop.y_def, ys)


def _stack_ys(y_def, ys):
    if y_def is None or not ys or not ys[0]:
        return None if y_def is None or y_def.kind == "none" else unflatten(y_def, [])
    cols = list(zip(*ys))
    return unflatten(y_def, [_stack_list(list(c)) for c in cols])


def scan(step, init, xs=None, length=None, *, checkpoint="all", snapshots=None, inverse=None):
    """Loop ``carry, y = step(carry, x)`` over ``xs`` (or ``length`` times); ``(carry, ys)``.

    ``ys`` stacks the ``y``s along a new first axis (``None`` if ``step`` returns
    ``None`` for ``y``).  ``init``, ``xs`` and ``y`` may be pytrees.  Under reverse
    mode the loop is one tape node and ``checkpoint`` chooses what is kept for the
    reverse sweep (see ``checkpoint_schedule``): ``"all"``, ``"ctz"``,
    ``"binomial"`` or ``"online"`` (with ``snapshots``) or ``"invert"`` (with
    ``inverse(carry, x) -> previous carry``).  Values ``step`` closes over get
    their cotangents.  Forward mode just runs the loop.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> def step(c, x):
    ...     c = c + 0.1 * wnp.sin(c * x)
    ...     return c, c
    >>> xs = [0.5, 1.0, 1.5, 2.0, 2.5]
    >>> f = lambda c0, how: wnp.sum(wg.scan(step, c0, wnp.asarray(xs), checkpoint=how)[1])
    >>> [round(float(wg.grad(f)(0.3, how)), 10) for how in ("all", "ctz", "binomial")]
    [6.6064037563, 6.6064037563, 6.6064037563]
    """
    if checkpoint not in STRATEGIES:
        raise ValueError(f"unknown checkpoint strategy {checkpoint!r}; use one of {STRATEGIES}")
    if checkpoint == "invert" and inverse is None:
        raise ValueError('scan(checkpoint="invert") needs inverse=(carry, x) -> previous carry')
    xs_leaves, xs_def = flatten(xs) if xs is not None else ([], None)
    n = _length(xs_leaves, length)
    if n == 0:
        return init, None
    init_leaves, carry_def = flatten(init)
    tape = _top_trace(init_leaves + xs_leaves)
    if not isinstance(tape, Tape):
        return _plain_scan(step, init, xs_leaves, xs_def, n)
    _check(n, checkpoint, snapshots)
    return _Scan(step, init_leaves, carry_def, xs_leaves, xs_def, n, tape,
                 functools.partial(iter_schedule, n, checkpoint, snapshots), inverse).run(init)


def while_loop(cond, body, init, *, checkpoint="ctz", snapshots=None, inverse=None):
    """``while cond(carry): carry = body(carry)``; the final carry, differentiable.

    The number of steps is not known until the loop ends, which ``"ctz"`` (the
    default) and ``"online"`` (with ``snapshots``) handle: their forward phases
    decide what to store without knowing it.  ``"all"`` and ``"invert"`` (with
    ``inverse(carry, None) -> previous carry``) work too; ``"binomial"`` needs the
    number of steps in advance (use ``scan``).  The reverse pass is the one
    ``scan`` would run for the number of steps taken; steps are counted as in
    ``scan``: state ``k`` goes into step ``k``.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> from wengert.checkpoint import while_loop
    >>> def f(a, how="ctz"):      # halve until below 0.01: the step count depends on a
    ...     return while_loop(lambda c: c[1] > 0.01, lambda c: (c[0] * wnp.cos(c[1]), c[1] / 2),
    ...                       (a, a), checkpoint=how, snapshots=2)[0]
    >>> g = wg.grad(f)(1.0)
    >>> [bool(abs(g - wg.grad(f)(1.0, how)) < 1e-14) for how in ("all", "online")]
    [True, True]
    """
    if checkpoint not in ("all", "ctz", "online", "invert"):
        raise ValueError(f"while_loop supports checkpoint='all', 'ctz', 'online' or 'invert' "
                         f"(the number of steps is not known in advance), not {checkpoint!r}")
    if checkpoint == "invert" and inverse is None:
        raise ValueError('while_loop(checkpoint="invert") needs inverse=(carry, None) -> '
                         'previous carry')
    if checkpoint == "online":
        if snapshots is None or int(snapshots) < 0:
            raise ValueError('while_loop(checkpoint="online") needs snapshots= (an int >= 0)')
        snapshots = int(snapshots)
    step = lambda c, _: (body(c), None)  # noqa: E731
    init_leaves, carry_def = flatten(init)
    tape = _top_trace(init_leaves)
    if not isinstance(tape, Tape):
        return _plain_while(cond, step, init)
    sc = _Scan(step, init_leaves, carry_def, [], None, None, tape, None, inverse,
               origin=("while_loop", body))
    sc.cond = cond
    return sc.run_while(init, cond, checkpoint, snapshots)


def _plain_while(cond, step, init):
    carry = init
    while cond(carry):
        carry, _ = step(carry, None)
    return carry


class _Scan:
    """A scan recorded as one node on ``tape``; its pullback executes the schedule."""

    def __init__(self, step, init_leaves, carry_def, xs_leaves, xs_def, n, tape, schedule,
                 inverse, origin=None):
        # schedule(): a fresh generator of the actions (never held whole); origin: the
        # transform and user function that name the step's escaped Vars
        self.origin = origin or ("wg.scan", step)
        self.tape, self.schedule, self.n = tape, schedule, n
        self.init_vals, self.init_owned = _strip(init_leaves, tape)
        self.xs_vals, self.xs_owned = _strip(xs_leaves, tape)
        self.loop = _Loop(step, carry_def, self.xs_vals, xs_def, n, inverse)
        self.step, self.xs_def = step, xs_def
        self.cond = None
        self.stats = {"max_stored": 0, "step_calls": 0}

    # -- executing actions -------------------------------------------------------------
    def _forward_phase(self, collect):
        """Run the actions before the first reverse.

        Returns the current state, the snapshots, the ys (if ``collect``) and the
        rest of the schedule (starting with that first reverse action).
        """
        cur = self.init_vals
        stored = {}
        ys = [] if collect else None
        actions = self.schedule()
        for a in actions:
            if a.kind == "reverse":
                return cur, stored, ys, itertools.chain((a,), actions)
            cur = self._do(a, cur, stored, ys)
        raise AssertionError("a schedule without reverse actions")

    def _do(self, a, cur, stored, ys=None):
        k = a.kind
        if k == "advance":
            loop = self.loop
            for j in range(a.index, a.stop):
                cur, yl = loop(cur, loop.x_at(j))
                if ys is not None and yl:
                    ys.append(yl)
        elif k == "store":
            stored[a.index] = cur
            if len(stored) > self.stats["max_stored"]:
                self.stats["max_stored"] = len(stored)
        elif k == "restore":
            cur = stored[a.index]
        elif k == "free":
            del stored[a.index]
        elif k == "invert":
            cur = self.loop.back(cur, self.loop.x_at(a.index))
        return cur

    def run(self, init):
        tape = self.tape
        touched = {}
        with tape.paused(touched):
            cur, stored, ys, rest = self._forward_phase(collect=True)
            final, y_last = self.loop(cur, self.loop.x_at(self.n - 1))
            if y_last:
                ys.append(y_last)
            y_def = self.loop.y_def
            ys_stacked = _stack_ys(y_def, ys)
        del ys
        return self._record(init, touched, cur, stored, rest, final, ys_stacked, y_def)

    def run_while(self, init, cond, strategy, snapshots=None):
        """The forward phase of a while loop: states stored online, N found at the end."""
        tape = self.tape
        touched = {}
        loop = self.loop
        stack, levels = [], {}

        def actions_at(k):  # what the strategy's forward phase does before step k
            if strategy == "all":
                return [Action("store", k)]
            if strategy == "invert":
                return []
            if k == 0:
                stack.append(0)
                return [Action("store", 0)]
            if strategy == "ctz":
                acts = [Action("free", stack.pop()) for _ in range(_ctz(k))]
                stack.append(k)
                return acts + [Action("store", k)]
            return list(_online_add(levels, k, snapshots))

        cur, prev, stored, k = self.init_vals, None, {}, 0
        with tape.paused(touched):
            while cond(unflatten(loop.carry_def, cur)):
                for a in actions_at(k):
                    cur = self._do(a, cur, stored)
                prev = cur
                cur, _ = loop(cur, None)
                k += 1
        if k == 0:
            return init
        self.n = loop.n = k
        self.schedule = functools.partial(iter_schedule, k, strategy, snapshots)
        rest = itertools.dropwhile(lambda a: a.kind != "reverse", self.schedule())
        return self._record(init, touched, prev, stored, rest, cur, None, None)[0]

    def _record(self, init, touched, cur, stored, rest, final, ys_stacked, y_def):
        """Record the loop as one node whose pullback runs ``rest`` from ``cur``."""
        tape = self.tape
        ys_leaves = flatten(ys_stacked)[0] if ys_stacked is not None else []
        outs = list(final) + list(ys_leaves)
        if _escapes(outs, tape):
            # a trace we could not see from the arguments: record the plain loop instead
            return self.fallback(init)
        self.captured = list(touched.values())
        self.init_want = [o is not None and _is_float(v)
                          for o, v in zip(self.init_owned, self.init_vals)]
        self.xs_want = [o is not None and _is_float(v)
                        for o, v in zip(self.xs_owned, self.xs_vals)]
        parents = ([o for o, w in zip(self.init_owned, self.init_want) if w]
                   + [o for o, w in zip(self.xs_owned, self.xs_want) if w] + self.captured)
        live = [j for j, o in enumerate(outs) if _is_float(o)]
        n_carry = len(final)
        carry_out = unflatten(self.loop.carry_def, final)
        if not parents or not live:
            return carry_out, ys_stacked
        self.cur, self.stored, self.rest = cur, stored, rest
        self.live, self.n_carry = live, n_carry
        self.ys_ndim = [ndim_of(y) for y in ys_leaves]
        node = tape.record(parents, self.pullback, "scan", [outs[j] for j in live],
                           multiple=True)
        new = list(outs)
        for j, v in zip(live, node):
            new[j] = v
        carry_out = unflatten(self.loop.carry_def, new[:n_carry])
        ys_out = unflatten(y_def, new[n_carry:]) if ys_stacked is not None else None
        return carry_out, ys_out

    def fallback(self, init):
        xs = [o if o is not None else v for o, v in zip(self.xs_owned, self.xs_vals)]
        if self.cond is not None:
            return _plain_while(self.cond, self.step, init), None
        return _plain_scan(self.step, init, xs, self.xs_def, self.n)

    # -- the pullback: the reverse phase of the schedule --------------------------------
    def pullback(self, gs):
        tape, n, loop = self.tape, self.n, self.loop
        g_out = [None] * (self.n_carry + len(self.ys_ndim))
        for j, g in zip(self.live, gs):
            g_out[j] = g
        g_carry = g_out[:self.n_carry]
        g_ys = g_out[self.n_carry:]
        if self.rest is not None:
            cur, stored, rest = self.cur, self.stored, self.rest
            self.cur = self.stored = self.rest = None
        else:  # called again: rebuild the forward phase's snapshots first
            with tape.paused({}):
                cur, stored, _, rest = self._forward_phase(collect=False)
        vjp = _SubtapeVJP(tape, *self.origin)
        carry_want = [_is_float(v) for v in self.init_vals]
        x_want = list(self.xs_want)
        g_xs = [[None] * n if w else None for w in x_want]
        n_c = self.n_carry
        xs_def = self.xs_def

        def taped_step(ins):
            state, xl = ins[:n_c], ins[n_c:]
            x = unflatten(xs_def, xl) if xs_def is not None else None
            cl, yl = loop(state, x)
            return list(cl) + list(yl)

        for a in rest:
            if a.kind != "reverse":
                with tape.paused({}):
                    cur = self._do(a, cur, stored)
                continue
            i = a.index
            xl = [_index(x, i) for x in self.xs_vals]
            out_cts = list(g_carry)
            for g, nd in zip(g_ys, self.ys_ndim):
                out_cts.append(None if g is None else _index(g, i, ndim_of(g) - nd))
            cts = vjp(taped_step, list(cur) + xl, carry_want + x_want, out_cts)
            g_carry = cts[:n_c]
            for j, c in enumerate(cts[n_c:]):
                if x_want[j]:
                    g_xs[j][i] = c
        del cur, stored
        res = [g for g, w in zip(g_carry, self.init_want) if w]
        for j, w in enumerate(x_want):
            if w:
                res.append(_stack_cts(g_xs[j], self.xs_vals[j]))
        res += [vjp.captured.get(v.index) for v in self.captured]
        return tuple(res)


def _stack_cts(cts, x):
    """Stack per-step cotangents of xs (``None`` = zero) along the scanned axis."""
    live = [c for c in cts if c is not None]
    if not live:
        return None
    c0 = live[0]
    x0 = _index(x, 0)
    nb = ndim_of(c0) - ndim_of(x0)
    zero = None
    full = []
    for c in cts:
        if c is None:
            if zero is None:
                zero = np.zeros(shape_of(c0), _dtype(c0))
            c = zero
        full.append(c)
    return _stack_list(full, axis=nb)
