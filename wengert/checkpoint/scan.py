"""``scan(step, init, xs)``: a loop ``carry, y = step(carry, x)`` recorded as ONE tape node.

Its pullback executes a *schedule* (:mod:`.schedules`): which loop states to store
during the forward sweep, which to rebuild later ("all", "ctz", "binomial",
"online", "invert").  ``while_loop(cond, body, init)``: the same for a loop whose
length is found by running it.
"""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from ..arrays import zeros
from .. import _progress
from ..core import Tracer, ndim_of, shape_of
from ..reverse import Tape, Var
from ..rules.checkpointing import checkpoint_stack, checkpoint_take
from ..tree import flatten, unflatten
from ..graph import roll as _roll
# the package's own helpers, shared by its modules
from .regions import _SubtapeVJP, _dtype, _escapes, _is_float, _strip, _top_trace
from .compiled import lower_scan
from .schedules import (STRATEGIES, _check, execute, forward_actions, forward_phase,
                        iter_schedule)

__all__ = ["scan", "while_loop"]


def _index(x, k, axis=0):
    """``x[k]`` along ``axis``: plain NumPy indexing when ``x`` is not traced."""
    if isinstance(x, Tracer):
        return checkpoint_take(x, index=k, axis=axis)
    if axis == 0:
        return x[k]
    return x[(slice(None),) * axis + (k,)]


def _stack_list(vals, axis=0):
    if any(isinstance(v, Tracer) for v in vals):
        return checkpoint_stack(*vals, axis=axis)
    return np.stack(vals, axis=axis)


class _Loop:
    """The loop body on flat leaves: ``state -> (state, y leaves)``."""

    def __init__(self, step, carry_def, xs_leaves, xs_def, n, inverse=None):
        self.step, self.carry_def = step, carry_def
        self.xs_leaves, self.xs_def, self.n = xs_leaves, xs_def, n
        self.inverse = inverse
        self.y_def = None
        self.calls = 0
        self.bar = _progress.OFF  # ticks once per step run (a progress bar when asked)

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
        self.bar.update()
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

    def advance(self, state, start, stop, ys=None):
        for j in range(start, stop):
            state, yl = self(state, self.x_at(j))
            if ys is not None and yl:
                ys.append(yl)
        return state

    def back(self, state, x):
        prev = self.inverse(unflatten(self.carry_def, state), x)
        self.bar.update()
        pl, pd = flatten(prev)
        if pd != self.carry_def:
            raise ValueError("scan: inverse(carry, x) must return a carry like init")
        return pl


def _count(length):
    """``length`` as a number of steps: a whole number (``int(1.5)`` would drop a half)."""
    try:
        n = operator.index(length)
    except TypeError:
        raise TypeError(f"scan: length must be an int (the number of steps), got "
                        f"{type(length).__name__} {length!r}") from None
    if n < 0:
        raise ValueError(f"scan: length must not be negative, got {n}")
    return n


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
        return _count(length)
    if length is not None and _count(length) != n:
        raise ValueError(f"scan: length={length} but xs has {n} entries")
    return n


def _plain_scan(step, init, xs_leaves, xs_def, n, progress=False, name="wg.scan"):
    carry_def = flatten(init)[1]
    loop = _Loop(step, carry_def, xs_leaves, xs_def, n)
    state = flatten(init)[0]
    ys = []
    with _progress.bar(progress, n, f"{name} forward") as loop.bar:
        for k in range(n):
            state, yl = loop(state, loop.x_at(k))
            ys.append(yl)
    loop.bar = _progress.OFF
    carry = unflatten(carry_def, state)
    return carry, _stack_ys(loop.y_def, ys)


def _stack_ys(y_def, ys):
    if y_def is None or not ys or not ys[0]:
        return None if y_def is None or y_def.kind == "none" else unflatten(y_def, [])
    cols = list(zip(*ys))
    return unflatten(y_def, [_stack_list(list(c)) for c in cols])


def scan(step, init, xs=None, length=None, *, checkpoint="all", snapshots=None, inverse=None,
         progress=False):
    """Loop ``carry, y = step(carry, x)`` over ``xs`` (or ``length`` times); ``(carry, ys)``.

    ``ys`` stacks the ``y``s along a new first axis (``None`` if ``step`` returns
    ``None`` for ``y``).  ``init``, ``xs`` and ``y`` may be pytrees.  Under reverse
    mode the loop is one tape node and ``checkpoint`` chooses what is kept for the
    reverse sweep (see ``checkpoint_schedule``): ``"all"``, ``"ctz"``,
    ``"binomial"`` or ``"online"`` (with ``snapshots``), ``"ctz-revolve"`` or ``"invert"`` (with
    ``inverse(carry, x) -> previous carry``).  Values ``step`` closes over get
    their cotangents.  Forward mode just runs the loop.  ``progress=True`` shows a tqdm
    bar on stderr for the forward sweep and one for the reverse sweep, counting its
    recomputed steps (``pip install "wengert[progress]"``).

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
    progress = _progress.check(progress, "wg.scan")
    xs_leaves, xs_def = flatten(xs) if xs is not None else ([], None)
    n = _length(xs_leaves, length)
    if n == 0:
        return init, None
    if not progress:  # under wg.compile: one node running the schedule, not N copies
        init_leaves, carry_def = flatten(init)
        lowered = lower_scan(_Loop(step, carry_def, xs_leaves, xs_def, n, inverse), init_leaves,
                             xs_leaves, n, checkpoint, _check(n, checkpoint, snapshots)[1],
                             _scan_eager)
        if lowered is not None:
            return lowered
    return _scan_eager(step, init, xs, n, checkpoint, snapshots, inverse, progress)


_roll.use_scan(scan)  # wg.compile's rolled loops are this scan (graph sits below checkpoint)


def _scan_eager(step, init, xs, n, checkpoint, snapshots, inverse, progress=False):
    """``scan`` on the engines' own terms: a tape node running the schedule, or the loop."""
    xs_leaves, xs_def = flatten(xs) if xs is not None else ([], None)
    init_leaves, carry_def = flatten(init)
    tape = _top_trace(init_leaves + xs_leaves)
    if not isinstance(tape, Tape):
        return _plain_scan(step, init, xs_leaves, xs_def, n, progress)
    _check(n, checkpoint, snapshots)
    sc = _Scan(step, init_leaves, carry_def, xs_leaves, xs_def, n, tape,
               functools.partial(iter_schedule, n, checkpoint, snapshots), inverse,
               progress=progress)
    if checkpoint == "all":
        out = sc.run_kept(init)
        if out is not _ANOTHER_ENGINE:
            return out
    return sc.run(init)


def while_loop(cond, body, init, *, checkpoint="ctz", snapshots=None, inverse=None,
               progress=False):
    """``while cond(carry): carry = body(carry)``; the final carry, differentiable.

    The number of steps is not known until the loop ends, which ``"ctz"`` (the
    default) and ``"online"`` (with ``snapshots``) handle: their forward phases
    decide what to store without knowing it.  ``"all"`` and ``"invert"`` (with
    ``inverse(carry, None) -> previous carry``) work too; ``"binomial"`` needs the
    number of steps in advance (use ``scan``).  The reverse pass is the one
    ``scan`` would run for the number of steps taken; steps are counted as in
    ``scan``: state ``k`` goes into step ``k``.  ``progress=True``: bars as ``scan``'s
    (the forward one without a total, which is not known).

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
    progress = _progress.check(progress, "while_loop")
    step = lambda c, _: (body(c), None)  # noqa: E731
    init_leaves, carry_def = flatten(init)
    tape = _top_trace(init_leaves)
    if not isinstance(tape, Tape):
        with _progress.bar(progress, None, "while_loop forward") as b:
            return _plain_while(cond, step, init, b)
    sc = _Scan(step, init_leaves, carry_def, [], None, None, tape, None, inverse,
               origin=("while_loop", body), progress=progress)
    sc.cond = cond
    if checkpoint == "all":
        out = sc.run_kept(init, cond)
        if out is not _ANOTHER_ENGINE:
            return out[0]
    return sc.run_while(init, cond, checkpoint, snapshots)


def _plain_while(cond, step, init, bar=_progress.OFF):
    carry = init
    while cond(carry):
        carry, _ = step(carry, None)
        bar.update()
    return carry


_ANOTHER_ENGINE = object()  # run_kept's answer when a step's carry is another engine's value


class _Scan:
    """A scan recorded as one node on ``tape``; its pullback executes the schedule."""

    def __init__(self, step, init_leaves, carry_def, xs_leaves, xs_def, n, tape, schedule,
                 inverse, origin=None, progress=False):
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
        self.progress = progress
        self.kept = None  # "all": each step's sub-tape, recorded by the forward sweep
        self.xs_want = [o is not None and _is_float(v)
                        for o, v in zip(self.xs_owned, self.xs_vals)]

    # -- executing actions -------------------------------------------------------------
    def _forward_phase(self, collect):
        """Run the actions before the first reverse (see ``schedules.forward_phase``)."""
        return forward_phase(self.schedule(), self.init_vals, self.loop, self.stats, collect)

    def _do(self, a, cur, stored, ys=None):
        return execute(a, cur, stored, self.loop, self.stats, ys)

    def run(self, init):
        tape = self.tape
        touched = {}
        with tape.paused(touched), \
                _progress.bar(self.progress, self.n, "wg.scan forward") as self.loop.bar:
            cur, stored, ys, rest = self._forward_phase(collect=True)
            final, y_last = self.loop(cur, self.loop.x_at(self.n - 1))
            if y_last:
                ys.append(y_last)
            y_def = self.loop.y_def
            ys_stacked = _stack_ys(y_def, ys)
        self.loop.bar = _progress.OFF
        del ys
        return self._record(init, touched, cur, stored, rest, final, ys_stacked, y_def)

    def _taped_step(self, ins):
        """The step on flat leaves, carry then xs, as a sub-tape runs it."""
        n_c = len(self.init_vals)
        state, xl = ins[:n_c], ins[n_c:]
        x = unflatten(self.xs_def, xl) if self.xs_def is not None else None
        cl, yl = self.loop(state, x)
        return list(cl) + list(yl)

    def run_kept(self, init, cond=None):
        """``"all"``: record each step on its own sub-tape as the loop runs forward and keep
        it; the pullback sweeps those tapes and runs no step again (each step runs once, as
        on a plain tape; memory is every step's intermediates, as an unrolled loop's).
        ``cond``: a while loop's condition (the number of steps is found by running it)."""
        tape, loop = self.tape, self.loop
        vjp = _SubtapeVJP(tape, *self.origin)
        n_c = len(self.init_vals)
        want = [_is_float(v) for v in self.init_vals] + self.xs_want
        cur, kept, ys, touched = self.init_vals, [], [], {}
        name = self.origin[0] + " forward"
        with _progress.bar(self.progress, self.n, name) as loop.bar:
            k = 0
            while k < self.n if cond is None else self._holds(cond, cur):
                xl = [_index(x, k) for x in self.xs_vals]
                tp, outs = vjp.keep(self._taped_step, list(cur) + xl, want)
                kept.append(tp)
                if any(isinstance(o, Tracer) and not isinstance(o, Var) for o in outs):
                    # another engine's value holding this step's Vars (a jvp inside the
                    # gradient): they die with the step's tape, so the schedule's path
                    # (forward on values, steps taped in the reverse sweep) runs instead
                    for t in kept:
                        t[0].release()
                    loop.bar = _progress.OFF
                    return _ANOTHER_ENGINE
                touched.update(dict.fromkeys(tp[0].lifted))
                cur = outs[:n_c]
                if len(outs) > n_c:
                    ys.append(outs[n_c:])
                k += 1
            ys_stacked = _stack_ys(loop.y_def, ys)
        loop.bar = _progress.OFF
        if k == 0:  # a while loop that never ran
            return init, None
        if cond is not None:
            self.n = loop.n = k
            self.schedule = functools.partial(iter_schedule, k, "all", None)
        del ys
        self.kept = kept
        return self._record(init, touched, None, None, None, cur, ys_stacked, loop.y_def)

    def _holds(self, cond, state):
        with self.tape.paused({}):  # on values, as the other schedules' forward phases
            return cond(unflatten(self.loop.carry_def, state))

    def run_while(self, init, cond, strategy, snapshots=None):
        """The forward phase of a while loop: states stored online, N found at the end."""
        tape = self.tape
        touched = {}
        loop = self.loop
        before = forward_actions(strategy, snapshots)  # per step, from the strategy's machine
        cur, prev, stored, k = self.init_vals, None, {}, 0
        with tape.paused(touched), \
                _progress.bar(self.progress, None, "while_loop forward") as loop.bar:
            while cond(unflatten(loop.carry_def, cur)):
                for a in next(before):
                    cur = self._do(a, cur, stored)
                prev = cur
                cur, _ = loop(cur, None)
                k += 1
        loop.bar = _progress.OFF
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
        self.captured = list(touched)  # the indices of the parent tape's Vars the step read
        self.init_want = [o is not None and _is_float(v)
                          for o, v in zip(self.init_owned, self.init_vals)]
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
        loop = self.loop
        kept, self.kept = self.kept, None  # swept once: a second call recomputes
        bar = self._reverse_bar(rebuild=self.rest is None and kept is None)
        loop.bar = bar
        try:
            return self._pullback(gs, kept)
        finally:
            loop.bar = _progress.OFF
            bar.close()

    def _reverse_bar(self, rebuild):
        """The reverse sweep's bar: one tick per step run, recomputations included (the
        forward phase's too when the snapshots must be rebuilt)."""
        if not self.progress:
            return _progress.OFF
        actions = self.schedule()
        if not rebuild:
            actions = itertools.dropwhile(lambda a: a.kind != "reverse", actions)
        work = {"advance": 0, "reverse": 0, "invert": 0}
        for a in actions:
            if a.kind in work:
                work[a.kind] += a.stop - a.index if a.kind == "advance" else 1
        what = f"{work['reverse']} steps, {work['advance']} recomputed" + \
            (f", {work['invert']} inverted" if work["invert"] else "")
        return _progress.bar(True, sum(work.values()),
                             f"{self.origin[0]} reverse ({what})")

    def _pullback(self, gs, kept=None):
        tape, n, loop = self.tape, self.n, self.loop
        g_out = [None] * (self.n_carry + len(self.ys_ndim))
        for j, g in zip(self.live, gs):
            g_out[j] = g
        g_carry = g_out[:self.n_carry]
        g_ys = g_out[self.n_carry:]
        vjp = _SubtapeVJP(tape, *self.origin)
        x_want = self.xs_want
        g_xs = [[None] * n if w else None for w in x_want]
        n_c = self.n_carry
        if kept is not None:  # "all": sweep the steps' sub-tapes, last first
            for i in range(n - 1, -1, -1):
                tp, kept[i] = kept[i], None
                out_cts = list(g_carry)
                for g in g_ys:
                    out_cts.append(None if g is None else _index(g, i))
                cts = vjp.pull(tp, out_cts)
                del tp
                loop.bar.update()
                g_carry = cts[:n_c]
                for j, c in enumerate(cts[n_c:]):
                    if x_want[j]:
                        g_xs[j][i] = c
            return self._cotangents(g_carry, g_xs, vjp)
        if self.rest is not None:
            cur, stored, rest = self.cur, self.stored, self.rest
            self.cur = self.stored = self.rest = None
        else:  # called again: rebuild the forward phase's snapshots first
            with tape.paused({}):
                cur, stored, _, rest = self._forward_phase(collect=False)
        carry_want = [_is_float(v) for v in self.init_vals]
        for a in rest:
            if a.kind != "reverse":
                with tape.paused({}):
                    cur = self._do(a, cur, stored)
                continue
            i = a.index
            xl = [_index(x, i) for x in self.xs_vals]
            out_cts = list(g_carry)
            for g in g_ys:
                out_cts.append(None if g is None else _index(g, i))
            cts = vjp(self._taped_step, list(cur) + xl, carry_want + x_want, out_cts)
            g_carry = cts[:n_c]
            for j, c in enumerate(cts[n_c:]):
                if x_want[j]:
                    g_xs[j][i] = c
        del cur, stored
        return self._cotangents(g_carry, g_xs, vjp)

    def _cotangents(self, g_carry, g_xs, vjp):
        """The node's parents' cotangents: init's, the xs', then the captured Vars'."""
        res = [g for g, w in zip(g_carry, self.init_want) if w]
        for j, w in enumerate(self.xs_want):
            if w:
                res.append(_stack_cts(g_xs[j], self.xs_vals[j]))
        res += [vjp.captured.get(i) for i in self.captured]
        return tuple(res)


def _stack_cts(cts, x):
    """Stack per-step cotangents of xs (``None`` = zero) along the scanned axis."""
    live = [c for c in cts if c is not None]
    if not live:
        return None
    c0 = live[0]
    zero = None
    full = []
    for c in cts:
        if c is None:
            if zero is None:
                zero = zeros(shape_of(c0), _dtype(c0), like=c0)
            c = zero
        full.append(c)
    return _stack_list(full)

