"""``checkpoint(f)``: a region whose intermediates reverse mode does not keep.

The region is one tape node; when the reverse sweep reaches it, ``f`` runs again
on a fresh sub-tape and cotangents are pulled back through that.  What ``scan``
shares with it is here too: which trace to checkpoint on, and ``_SubtapeVJP``.
"""
from __future__ import annotations

import functools

import numpy as np

from .._pickling import travels
from .._validate import check_callable
from ..core import Tracer
from ..reverse import Tape, Var, active_tapes
from ..tree import flatten, unflatten

__all__ = ["checkpoint"]


def _dtype(x):
    while isinstance(x, Tracer):
        x = x.value
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


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
            sub.release()

    def keep(self, fn, in_vals, want):
        """Run ``fn`` once on a fresh sub-tape and keep that tape for ``pull`` (a scan under
        ``"all"``: its steps are recorded in the forward sweep, never run again).

        Returns the kept tape and the outputs' values.  The sub-tape is finished at once,
        so a Var that escapes ``fn`` is refused as it would be after a sweep.
        """
        sub = self.tape.subtape()
        try:
            ins, outs = self._run(sub, fn, in_vals, want)
        finally:
            sub.finish(self.transform, self.user_fn)
        kept = (sub, [v.index if w else -1 for v, w in zip(ins, want)],
                [o.index if isinstance(o, Var) and o._trace is sub else -1 for o in outs])
        return kept, [o.value if isinstance(o, Var) and o._trace is sub else o for o in outs]

    def pull(self, kept, out_cts):
        """Sweep a sub-tape ``keep`` made, once: the cotangents of its inputs (``None`` =
        zero); those of the parent tape's Vars it read go to ``captured``.  The sub-tape's
        pullbacks are dropped as the sweep runs them."""
        sub, ins, outs = kept
        by = sub.revive()  # alive while swept: nested regions' pullbacks record on it
        try:
            return self._pull(sub, ins, outs, out_cts, last=True)
        finally:
            sub.finish(*by)
            sub.release()

    def _run(self, sub, fn, in_vals, want):
        ins = [sub._leaf(v) if w else v for v, w in zip(in_vals, want)]
        with self.tape.redirected(sub), sub.active():
            outs = fn(ins)
            # an output may be a captured Var itself: use its input on the sub-tape
            outs = [sub.own(o) if isinstance(o, Var) and o._trace is not sub
                    and o._trace.resolve() is sub else o for o in outs]
        return ins, outs

    def _on(self, sub, fn, in_vals, want, out_cts):
        ins, outs = self._run(sub, fn, in_vals, want)
        return self._pull(sub, [v.index if w else -1 for v, w in zip(ins, want)],
                          [o.index if isinstance(o, Var) and o._trace is sub else -1
                           for o in outs], out_cts)

    def _pull(self, sub, ins, outs, out_cts, last=False):
        """Sweep ``sub`` from the outputs at indices ``outs`` (-1: not on ``sub``); the
        cotangents of the inputs at ``ins`` (-1: none wanted)."""
        seeds = {}
        for o, g in zip(outs, out_cts):
            if g is None or o < 0:
                continue
            seeds[o] = g if o not in seeds else seeds[o] + g
        if not seeds:
            return [None] * len(ins)
        # redirected through the sweep: pullbacks of regions recorded on the sub-tape
        # (nested scans and checkpoints) run user code that reads our Vars again
        with self.tape.redirected(sub), sub.active():
            adj = sub.sweep(seeds, leaves_only=True, last=last)
        res = [adj[i] if i >= 0 else None for i in ins]
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
    check_callable(f, "wg.checkpoint")
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
    return travels(checkpointed, checkpoint, f)

