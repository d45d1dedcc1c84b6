"""Reverse mode: a tape (Wengert list) recorded as the program runs, swept once backwards.

Each node keeps only its parents' indices and its pullback (which holds what the
rule needs); adjoints live outside the tape, in the ``Grad`` a sweep returns, so
one tape serves any number of outputs.  The sweep is a loop: no recursion.
"""
import contextlib
import contextvars

import numpy as np

from ._dispatch import ArrayTracer, install_fast_paths
from .arrays import dtype_of, ones, zeros_like_value
from .core import DEAD_LEVEL, Trace, Tracer, check_differentiable, new_level
from .rules.lowering import python_operator

__all__ = ["Tape", "Var", "Grad"]


class _Output:
    """Pullback marker of the j-th output of a primitive with several results."""

    __slots__ = ("j", "n")

    def __init__(self, j, n):
        self.j, self.n = j, n


# The tapes whose transform (grad, vjp, ...) is running f, innermost last: one tuple per
# thread and per asyncio task (a contextvars context), so that a scan in one thread never
# records on, or pauses, another thread's tape.
_ACTIVE = contextvars.ContextVar("wengert_active_tapes", default=())


class _Active:
    __slots__ = ("tape", "_outer")

    def __init__(self, tape):
        self.tape = tape

    def __enter__(self):
        outer = self._outer = _ACTIVE.get()
        _ACTIVE.set(outer + (self.tape,))
        return self.tape

    def __exit__(self, *exc):
        _ACTIVE.set(self._outer)


def active_tapes():
    """The tapes of the transforms now running in this thread (this context), innermost
    last (read by wg.scan)."""
    return _ACTIVE.get()


_FINISHED = object()  # the ``_paused`` of a finished tape; see ``Tape.finish``


class Tape(Trace):
    """A Wengert list.  ``t.var(x)`` makes an input; ``v.grad()`` sweeps it backwards.

    A tape a user makes lives as long as it is used; one a transform makes (``wg.grad``)
    is finished when the transform returns, and its Vars are dead from then on.
    """

    tracer_name = "Var"

    def __init__(self, parent=None):
        # a sub-tape (parent given) shares its parent's level: while the parent is
        # redirected to it, the parent's Vars are this tape's inputs (see ``redirected``)
        self.level = new_level() if parent is None else parent.level
        self._parents = []    # per node: tuple of parent indices (-1 for constants)
        self._pullbacks = []  # per node: pullback, None for inputs, _Output for projections
        self._names = []      # per node: primitive name ("input" for inputs)
        self._parent = parent
        self._lifted = {}      # sub-tape: parent Var index -> the input standing for it here
        self._redirect = None  # while set: operations on this tape are recorded there
        self._paused = None    # while set (a dict): operations compute on values, unrecorded
        self.finished_by = None

    def __len__(self):
        return len(self._pullbacks)

    def __repr__(self):
        return f"<Tape with {len(self)} nodes>"

    def var(self, value):
        """A new input on this tape."""
        check_differentiable(value, "Tape.var")
        return self._leaf(value)

    def _leaf(self, value):
        idx = len(self._pullbacks)
        self._parents.append(())
        self._pullbacks.append(None)
        self._names.append("input")
        return Var(value, self, idx)

    def finish(self, transform, fn=None):
        # Trace.finish, written out (it runs on every wg.grad call); besides, the operators'
        # fast paths leave a tape whose ``_paused`` is set for ``process`` (which raises),
        # so dead Vars cost them no check of their own
        if self.finished_by is None:
            self.finished_by = (transform, fn, self.level)
            self.level = DEAD_LEVEL
            self._paused = _FINISHED

    def revive(self):
        by = super().revive()
        if self._paused is _FINISHED:
            self._paused = None
        return by

    def process(self, prim, args, params):
        if self.finished_by is not None:
            raise self.escaped(f"in {prim.name}")
        if self._redirect is not None:
            return self._redirect.process(prim, args, params)
        if self._parent is not None:
            # only Vars at our level are ours to own; a lower level's Var (a closed-over
            # value of an outer derivative) is a constant here, as on any tape
            args = [self.own(a) if isinstance(a, Var) and a._trace is not self
                    and a._trace.level == self.level else a for a in args]
        if self._paused is not None:
            # recording paused: compute on the values, note which of our Vars were read
            touched = self._paused
            primals = []
            for a in args:
                if isinstance(a, Var) and a._trace is self:
                    touched[a.index] = a
                    primals.append(a.value)
                else:
                    primals.append(a)
            return prim(*primals, **params)
        primals = []
        parents = []
        needs = []
        plain = True
        for a in args:
            if isinstance(a, Tracer):
                if a._trace is self:
                    primals.append(a.value)
                    parents.append(a.index)
                    needs.append(True)
                    if isinstance(a.value, Tracer):  # nested: an outer trace's value
                        plain = False
                    continue
                plain = False
            primals.append(a)
            parents.append(-1)
            needs.append(False)
        ans, pullback = prim.pullback_of(primals, params, needs, plain)
        idx = len(self._pullbacks)
        self._parents.append(tuple(parents))
        self._pullbacks.append(pullback)
        self._names.append(prim.name)
        if prim.multiple_results:
            n = len(ans)
            outs = []
            for j, a in enumerate(ans):
                self._parents.append((idx,))
                self._pullbacks.append(_Output(j, n))
                self._names.append(f"{prim.name}[{j}]")
                outs.append(Var(a, self, idx + 1 + j))
            return tuple(outs)
        return Var(ans, self, idx)

    def record(self, parents, pullback, name, value, multiple=False):
        """Add a node with a hand-made pullback (checkpointing, custom regions).

        ``parents``: Vars of this tape (anything else is a constant) or their indices.

        With ``multiple=True``, ``value`` is a sequence of outputs, a tuple of Vars
        is returned and ``pullback`` receives a tuple of cotangents (``None`` = zero).
        """
        idx = len(self._pullbacks)
        self._parents.append(tuple(p if type(p) is int else
                                   p.index if isinstance(p, Var) and p._trace is self else -1
                                   for p in parents))
        self._pullbacks.append(pullback)
        self._names.append(name)
        if not multiple:
            return Var(value, self, idx)
        n = len(value)
        outs = []
        for j, a in enumerate(value):
            self._parents.append((idx,))
            self._pullbacks.append(_Output(j, n))
            self._names.append(f"{name}[{j}]")
            outs.append(Var(a, self, idx + 1 + j))
        return tuple(outs)

    # -- regions recorded as one node (wg.checkpoint, wg.scan) ----------------------------
    def active(self):
        """Mark this tape as the one a running transform records on (``active_tapes``)."""
        return _Active(self)  # a class, not @contextmanager: this runs on every grad call

    def subtape(self):
        """A fresh tape at this tape's level; see ``redirected``."""
        return Tape(parent=self)

    @contextlib.contextmanager
    def paused(self, touched):
        """Operations on this tape's Vars compute on values and are not recorded.

        Each Var read meanwhile is put in the dict ``touched`` (index -> Var).
        """
        old, self._paused = self._paused, touched
        try:
            yield touched
        finally:
            self._paused = old

    @contextlib.contextmanager
    def redirected(self, sub):
        """Record this tape's operations on its sub-tape ``sub`` instead.

        Meanwhile a Var of this tape used in an operation becomes an input of ``sub``
        (one per Var, listed in ``sub.lifted``), so sweeping ``sub`` gives its cotangent.
        """
        if sub._parent is not self:
            raise ValueError("redirected() takes a sub-tape of this tape")
        old, self._redirect = self._redirect, sub
        try:
            yield sub
        finally:
            self._redirect = old

    def resolve(self):
        """The tape this tape's operations currently go to (itself unless redirected)."""
        t = self
        while t._redirect is not None:
            t = t._redirect
        return t

    def release(self):
        """A sub-tape done with: drop the inputs standing for its parent's Vars.  Each refers
        back to this tape, a cycle that only CPython's collector would free, and with it
        every pullback on the tape (a "ctz" scan recomputes thousands of such tapes)."""
        self._lifted = {}

    @property
    def lifted(self):
        """Sub-tape: ``{parent Var index: the input Var standing for it here}``."""
        return self._lifted

    def own(self, v):
        """``v`` as a Var of this tape: itself, or (for a Var of a tape redirected here)
        the input standing for it."""
        t = v._trace
        if t is self:
            return v
        sub = t._redirect
        if sub is None or sub.resolve() is not self:
            raise ValueError("a Var of another tape at the same level reached this tape")
        w = sub._lifted.get(v.index)
        if w is None:
            w = sub._leaf(v.value)
            sub._lifted[v.index] = w
        return self.own(w)

    def sweep(self, seeds, leaves_only=False, last=False):
        """Reverse sweep from ``{index: cotangent}``; returns the adjoint list.

        ``leaves_only``: the caller reads only the inputs' adjoints, so every other node's
        cotangent is dropped once pulled back (autograd frees its cotangents so too); with
        ``last`` (no sweep follows) its pullback too, and the primals it holds. Memory then
        falls as the sweep goes instead of peaking at the end: in a fresh process every new
        peak is paid in page faults (a VAE's first gradients: 38000 against 1700 after).
        """
        n = len(self._pullbacks)
        adj = [None] * n
        start = -1
        for i, g in seeds.items():
            adj[i] = g if adj[i] is None else adj[i] + g
            start = max(start, i)
        parents = self._parents
        pullbacks = self._pullbacks
        if last:
            self._pullbacks = [None] * n  # a finished tape's, read by no one from now on
        # slots holding an array this sweep made by adding two cotangents: nothing else refers
        # to it until its own node is swept (parents come before children), so the next
        # cotangent can be added into it instead of allocating another array
        owned = set()
        for k in range(start, -1, -1):
            g = adj[k]
            if g is None:
                continue
            pb = pullbacks[k]
            if pb is None:
                continue
            if leaves_only:
                adj[k] = None
                if last:
                    pullbacks[k] = None
            if type(pb) is _Output:
                (p,) = parents[k]
                cur = adj[p]
                if cur is None:
                    cur = adj[p] = [None] * pb.n
                cur[pb.j] = g if cur[pb.j] is None else cur[pb.j] + g
                continue
            if type(g) is list:
                g = tuple(g)
            cts = pb(g)
            pb = g = None  # (with last: what the pullback held goes before its parents run)
            for p, c in zip(parents[k], cts):
                if p >= 0 and c is not None:
                    a = adj[p]
                    if a is None:
                        adj[p] = c
                    elif p in owned and type(c) is np.ndarray and c.shape == a.shape \
                            and c.dtype == a.dtype:
                        a += c  # a sum made below, seen by no rule yet: added into in place
                    else:
                        a = adj[p] = a + c
                        if type(a) is np.ndarray:
                            owned.add(p)
        return adj


class Var(ArrayTracer):
    """A value recorded on a tape: ``.value``, ``.index``, ``.grad()``."""

    __slots__ = ("value", "_trace", "index")

    def __init__(self, value, tape, index):
        self.value = value
        self._trace = tape
        self.index = index

    @property
    def tape(self):
        return self._trace

    def __repr__(self):
        return f"Var({self.value!r}, index={self.index})"

    def grad(self, seed=None):
        """Sweep the tape once backwards from this value; returns a ``Grad``."""
        if self._trace.finished_by is not None:
            raise self._trace.escaped("v.grad()")
        if seed is None:
            if self.ndim != 0:
                raise ValueError(
                    f"grad() of a non-scalar Var (shape {self.shape}) needs a seed "
                    "cotangent of that shape: v.grad(seed)")
            seed = 1.0 if isinstance(self.value, float) else \
                ones((), dtype_of(self.value), like=self.value)
        adj = self._trace.sweep({self.index: seed})
        return Grad(adj, self._trace)


class Grad:
    """Adjoints from one reverse sweep; ``g.wrt(x)`` or ``g.wrt(x, y)`` reads them."""

    __slots__ = ("_adj", "_tape")

    def __init__(self, adj, tape):
        self._adj, self._tape = adj, tape

    def _one(self, v):
        if not isinstance(v, Var) or v._trace is not self._tape:
            raise ValueError("wrt() takes Vars of the tape this Grad was swept on")
        g = self._adj[v.index]
        if g is None:
            return zeros_like_value(v.value)
        return g

    def wrt(self, *vs):
        if len(vs) == 1:
            return self._one(vs[0])
        return tuple(self._one(v) for v in vs)


def _binary_fast_path(prim, name, reflected, general):
    """An operator method for Vars that records a partials-declared primitive directly.

    The same rule (the primitive's ``fast_partials``), recorded in fewer Python calls;
    any case it does not cover (other traces, paused or redirected tapes, Python's
    exceptions on floats) takes the ``general`` path.
    """
    impl, broadcasting = prim.impl, prim.broadcasting
    impl = python_operator(prim) or impl  # Python's operator on floats, where it is one
    partials_pullback = prim.fast_partials.pullback
    no_params = {}
    with_needs = prim.fast_partials.needs  # then the partials skip the unneeded ones

    def method(self, other):
        tape = self._trace
        a = self.value
        if tape._redirect is not None or tape._paused is not None:
            return general(self, other)
        # values traced by outer transforms (forward over reverse: Duals) are fine: the
        # operator below dispatches on them exactly as the general path would
        if type(other) is Var:
            if other._trace is not tape:
                return general(self, other)
            b, ib = other.value, other.index
        elif isinstance(other, Tracer):
            return general(self, other)
        else:
            b, ib = other, -1
        ia = self.index
        if reflected:
            a, b, ia, ib = b, a, ib, ia
        try:
            if reflected and isinstance(b, Tracer):
                ans = getattr(b, name)(a)  # c * (Dual): its own reflected operator, no ufunc
            else:
                ans = impl(a, b)
        except (ArithmeticError, ValueError, TypeError):
            return general(self, other)
        if type(ans) is complex:
            return general(self, other)
        needs = (ia >= 0, ib >= 0)
        pb = partials_pullback((a, b), ans, {"needs": needs} if with_needs else no_params,
                               broadcasting, needs)
        idx = len(tape._pullbacks)
        tape._parents.append((ia, ib))
        tape._pullbacks.append(pb)
        tape._names.append(prim.name)
        return Var(ans, tape, idx)
    method.__name__ = name
    return method


def _unary_fast_path(prim, name, general):
    """``-v`` and the like: a partials-declared unary operator, recorded directly."""
    impl, partials_pullback = prim.impl, prim.fast_partials.pullback
    no_params = {}
    need = (True,)

    def method(self):
        tape = self._trace
        if tape._redirect is not None or tape._paused is not None:
            return general(self)
        a = self.value
        ans = impl(a)
        pb = partials_pullback((a,), ans, no_params, False, need)
        idx = len(tape._pullbacks)
        tape._parents.append((self.index,))
        tape._pullbacks.append(pb)
        tape._names.append(prim.name)
        return Var(ans, tape, idx)
    method.__name__ = name
    return method


def _index_fast_path(prim, plain_index, noted, general):
    """``v[k]`` and ``v[a:b]`` recorded directly, the rule's own pullback: a loop body reads
    rows and slices of its weights many times a step (issue 32's LSTM: 27 of its 80
    operations).  On a tape redirected to a sub-tape (a scan's step, a checkpoint) the read
    goes there, as ``process`` sends it."""
    need = (True,)

    def method(self, idx):
        tape = self._trace
        if tape._paused is not None or not plain_index(idx):
            return general(self, idx)
        x = self
        if tape._redirect is not None:
            tape = tape.resolve()
            if tape._paused is not None:
                return general(self, idx)
            x = tape.own(self)
        a = x.value
        if type(a) is not np.ndarray:  # an outer trace's value, or a foreign array
            return general(self, idx)
        nidx = (idx,)
        ans, pb = prim.pullback_of((a,), {"idx": nidx}, need, True)
        i = len(tape._pullbacks)
        tape._parents.append((x.index,))
        tape._pullbacks.append(pb)
        tape._names.append(prim.name)
        return noted(Var(ans, tape, i), self, nidx)
    method.__name__ = "__getitem__"
    return method


install_fast_paths(Var, _binary_fast_path, _unary_fast_path, _index_fast_path)
