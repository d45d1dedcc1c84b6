"""Implicit differentiation: the derivative of a solver's answer read off the equation it
solves, never off its iterations.

A solver returns ``z`` with ``F(z, θ) = 0``.  By the implicit function theorem
``dz = -J⁻¹ ∂F/∂θ·dθ`` with ``J = ∂F/∂z`` at the solution: one linear solve (the tangent
solve) per pushforward, one transposed solve per pullback.  Everything here is a layer over
one primitive, ``implicit_solve``, whose value runs the solver on plain values and whose rules
run ``F`` with wengert's own transforms (``jvp``, ``vjp``, ``jacobian``) at the traced
solution: the rules are wengert operations, so they differentiate again (Hessians, HVPs),
batch under ``wg.vmap`` (the solver runs once per example) and trace into ``wg.compile``
(the solver stays a call inside the compiled program).

Parameters reach a solver the way SciPy users write them: as ``args`` and as values the
functions close over.  ``Captured`` finds the traced values among a pytree of functions and
arrays (closure cells, defaults, ``functools.partial`` arguments, bound ``self``) and rebuilds
the functions around other values: plain ones for the solver, traced ones for the rules.

This module sits on the floor built on transforms (6): its rules call ``jvp``/``vjp``/
``jacobian``, which live on floor 5.  ``wengert.scipy.optimize``, ``.sparse.linalg`` and
``.integrate`` use it and sit on the same floor.
"""
from __future__ import annotations

import copy
import functools
import itertools
import math
import threading
import types

import numpy as np

from . import numpy as wnp
from .core import Primitive, Tracer, ndim_of, plain, shape_of
from .reverse import Var
from .transforms import jacobian, jvp, vjp
from .tree import LEAF, flatten, ravel, unflatten

__all__ = ["Captured", "Problem", "solve_implicit", "implicit_solve", "custom_root", "implicit",
           "running", "PerThread"]


# -- closure conversion ---------------------------------------------------------------------------
class _Fn:
    """A function rebuilt around new cell contents and defaults; unchanged cells are shared
    (a ``nonlocal`` counter keeps counting)."""
    __slots__ = ("fn", "cells", "defaults", "kwdefaults")

    def __init__(self, fn, cells, defaults, kwdefaults):
        self.fn, self.cells, self.defaults, self.kwdefaults = fn, cells, defaults, kwdefaults

    def build(self, leaves):
        fn = self.fn
        closure = fn.__closure__
        if self.cells is not None:
            closure = tuple([c if t is None else types.CellType(_build(t, leaves))
                             for c, t in zip(closure, self.cells)])
        defaults = fn.__defaults__ if self.defaults is None else _build(self.defaults, leaves)
        new = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults, closure)
        kw = fn.__kwdefaults__ if self.kwdefaults is None else _build(self.kwdefaults, leaves)
        new.__kwdefaults__ = kw
        if fn.__dict__:
            new.__dict__.update(fn.__dict__)
        new.__qualname__, new.__module__ = fn.__qualname__, fn.__module__
        return new


def _build(t, leaves):
    """The object a template ``t`` describes, with ``leaves`` at its traced places."""
    kind = t[0]
    if kind == "leaf":
        return leaves[t[1]]
    if kind == "seq":   # a tuple or a list, one level
        items = [_build(c, leaves) if c is not None else v for c, v in zip(t[2], t[3])]
        return tuple(items) if t[1] is tuple else items
    if kind == "tree":
        return unflatten(t[1], [_build(c, leaves) if c is not None else v
                                for c, v in zip(t[2], t[3])])
    if kind == "fn":
        return t[1].build(leaves)
    if kind == "partial":
        return functools.partial(_build(t[1], leaves) if t[1] else t[4].func,
                                 *(_build(t[2], leaves) if t[2] else t[4].args),
                                 **(_build(t[3], leaves) if t[3] else t[4].keywords))
    if kind == "method":
        return types.MethodType(_build(t[1], leaves) if t[1] else t[3].__func__,
                                _build(t[2], leaves) if t[2] else t[3].__self__)
    if kind == "object":
        new = copy.copy(t[1])
        for name, sub in t[2].items():
            setattr(new, name, _build(sub, leaves))
        return new
    raise AssertionError(kind)  # pragma: no cover


_ATOMS = frozenset([type(None), bool, int, float, complex, str, bytes, np.ndarray, np.float64])


class Captured:
    """The traced values inside a pytree of functions and arrays, and that pytree rebuilt
    around other values: ``Captured(obj).leaves`` are the tracers (in a fixed order),
    ``.build(values)`` the pytree with ``values`` in their places (``.build(plain values)``
    is what a SciPy call gets).  Globals are not searched: pass a value that is being
    differentiated as an argument or close over it."""

    _DEPTH = 8
    _wengert_opaque = True  # wengert's own bookkeeping is never searched for parameters

    def __init__(self, obj):
        self.obj = obj
        self.leaves = []
        self._ids = {}
        self._seen = set()
        self.template = self._scan(obj, 0)

    def build(self, leaves):
        if self.template is None:
            return self.obj
        return _build(self.template, list(leaves))

    # -- scanning ------------------------------------------------------------------------------
    def _leaf(self, x):
        k = self._ids.get(id(x))
        if k is None:
            k = self._ids[id(x)] = len(self.leaves)
            self.leaves.append(x)
        return ("leaf", k)

    def _scan(self, x, depth):
        # every gradient through a solver runs this walk, and so does every plain call
        # (whose answer is "nothing traced"): the common kinds are met by exact type first,
        # and ``any`` over the parts' templates (tuples, or None) asks whether one is traced
        t = type(x)
        if t in _ATOMS:
            return None
        if t is tuple or t is list:
            # a plain container's items, one level at a time (flatten's depth: containers
            # count no level), so that nothing is flattened when none is traced
            if not x or depth > self._DEPTH:
                return None
            subs = [None if type(v) in _ATOMS else self._scan(v, depth) for v in x]
            return ("seq", t, subs, list(x)) if any(subs) else None
        if t is types.FunctionType:   # a leaf to flatten: asked before it
            return None if depth > self._DEPTH else self._function(x, depth)
        if isinstance(x, Tracer):
            return self._leaf(x)
        if depth > self._DEPTH or isinstance(x, (str, bytes, int, float, complex, np.ndarray,
                                                 np.generic, type, types.ModuleType)):
            return None
        leaves, d = flatten(x)
        if d is not LEAF:
            subs = [self._scan(v, depth + 1) for v in leaves]
            return ("tree", d, subs, leaves) if any(subs) else None
        if id(x) in self._seen:
            return None
        self._seen.add(id(x))
        if isinstance(x, functools.partial):
            f, a, k = (self._scan(x.func, depth + 1), self._scan(x.args, depth + 1),
                       self._scan(x.keywords, depth + 1))
            return None if f is None and a is None and k is None else ("partial", f, a, k, x)
        if isinstance(x, types.MethodType):
            f, s = self._scan(x.__func__, depth + 1), self._scan(x.__self__, depth + 1)
            return None if f is None and s is None else ("method", f, s, x)
        attrs = getattr(x, "__dict__", None)
        if isinstance(attrs, dict) and not callable(getattr(x, "__get__", None)) \
                and not getattr(x, "_wengert_opaque", False):
            subs = {}
            for name, v in attrs.items():
                s = self._scan(v, depth + 1)
                if s is not None:
                    subs[name] = s
            return ("object", x, subs) if subs else None
        return None

    def _function(self, x, depth):
        if id(x) in self._seen:  # a recursive function names itself
            return None
        self._seen.add(id(x))
        cells = None
        if x.__closure__:
            subs = []
            for c in x.__closure__:
                try:
                    v = c.cell_contents
                except ValueError:  # an empty cell
                    subs.append(None)
                    continue
                subs.append(None if type(v) in _ATOMS else self._scan(v, depth + 1))
            cells = subs if any(subs) else None
        defaults = self._scan(x.__defaults__, depth + 1) if x.__defaults__ else None
        kwd = self._scan(x.__kwdefaults__, depth + 1) if x.__kwdefaults__ else None
        if cells is None and defaults is None and kwd is None:
            return None
        return ("fn", _Fn(x, cells, defaults, kwd))


def running(name, fn, *args):
    """``fn(*args)``, SciPy's call on plain values; a traced value that reaches it anyway came
    from a place ``Captured`` does not search (a global, a container it cannot rebuild)."""
    try:
        return fn(*args)
    except (TypeError, SystemError) as e:
        if "traced value" not in str(e) and "traced value" not in str(e.__cause__ or ""):
            raise
        raise TypeError(
            f"{name}: a traced value reached SciPy's call from a place wengert does not search "
            "for parameters (a global variable, or an object it cannot copy); pass it in args, "
            "as an argument, or close over it in a function") from e


# -- the primitive ---------------------------------------------------------------------------------
class PerThread:
    """An attribute a solve writes and its rules then read: kept per thread, because one
    compiled program (and so one problem object) may run in many threads at once (API.md §15).
    Unset in a thread, it reads as None.  A problem that only one call ever uses (a plain
    call, or a gradient recorded straight onto a tape: ``private``) keeps it in an ordinary
    slot instead, sparing every call a ``threading.local``."""

    def __set_name__(self, owner, name):
        self.name, self.slot = name, "_slot_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        d = obj.__dict__
        local = d.get("_per_thread")   # made by the first write, not by a read
        if local is None:
            return d.get(self.slot)
        return getattr(local, self.name, None)

    def __set__(self, obj, value):
        d = obj.__dict__
        local = d.get("_per_thread")
        if local is None:
            if d.get("_private"):
                d[self.slot] = value
                return
            # setdefault: two threads writing first share one
            local = d.setdefault("_per_thread", threading.local())
        setattr(local, self.name, value)


def private(problem):
    """Mark ``problem`` as used by this call alone (see ``PerThread``)."""
    problem.__dict__["_private"] = True
    return problem


class Problem:
    """One solver call: ``solve`` (plain values in, ``(z, active)`` out: the solution as a
    1-D float array, or a 0-d one for a single unknown when the residual and the caller read
    it through ``unraveler`` only, and an int8 array of flags, e.g. which bounds are
    active), ``residual``
    (``F(z, active, leaves)``, 1-D, with wengert operations), and ``tangent_solve`` (``J⁻¹ r``
    or ``J⁻ᵀ r`` for ``r`` of shape ``(n,)`` or ``(n, k)``; by default with the dense
    Jacobian of the residual, which suits problems of up to a few thousand unknowns).

    ``result`` keeps the solver's last plain answer (SciPy's ``OptimizeResult``...), read by
    the wrappers for the fields that are not differentiated."""

    name = "implicit"
    _wengert_opaque = True
    taped = False               # recorded straight onto a reverse tape (``_recorded``)
    result = PerThread()        # SciPy's (or the user's) latest plain answer
    aux = PerThread()           # custom_root's auxiliary output
    multipliers = PerThread()   # the active constraints' multipliers, read off the solution

    def __init__(self, captured):
        self.captured = captured

    def __repr__(self):
        return f"<{self.name} problem>"

    def solve(self, leaves):  # pragma: no cover - interface
        raise NotImplementedError

    def residual(self, z, active, leaves):  # pragma: no cover - interface
        raise NotImplementedError

    def jacobian(self, z, active, leaves):
        # forward mode pushes all n directions in one pass (batched tangents): cheaper than n
        # reverse sweeps for the square Jacobian of a residual
        return jacobian(lambda zz: self.residual(zz, active, leaves), mode="forward")(z)

    def plain_pullback(self, z, active, leaves, idx, gz):
        """The cotangents of ``leaves[i]`` for ``i`` in ``idx`` from one plain cotangent
        ``gz`` of the solution, all values plain (a first derivative); None: the rule
        takes its general path.  A problem that can reuse work across calls says how."""
        return None

    def tangent_solve(self, z, active, leaves, rhs, transpose):
        jac = self.jacobian(z, active, leaves)
        if transpose:
            jac = wnp.transpose(jac)
        if ndim_of(jac) == 0:
            return rhs / jac
        return wnp.linalg.solve(jac, rhs)


def _impl(*leaves, problem):
    z, active = problem.solve(leaves)
    return np.asarray(z, dtype=float), np.asarray(active, dtype=np.int8)


# wg.vmap runs the solver once per example ("loop"): SciPy solves one problem a call
implicit_solve = Primitive(_impl, name="implicit_solve", multiple_results=True, batch="loop")


def _diff(x):
    v = plain(x)
    t = type(v)
    if t is float or t is complex:
        return True
    kind = v.dtype.kind if t is np.ndarray or isinstance(v, np.generic) else \
        np.result_type(v).kind
    return kind in "fc"


def _plain(*xs):
    return not any(isinstance(x, Tracer) for x in xs)


def _reshape(x, shape):
    return np.reshape(x, shape) if _plain(x) else wnp.reshape(x, shape)


def _T(x):
    return np.transpose(x) if _plain(x) else wnp.transpose(x)


def _solve(a, b):
    """``a⁻¹ b``; NumPy's own where nothing is traced (the first derivative's common case),
    a division for one unknown (LAPACK's call costs more than the scalar problem's pullback)."""
    if not _plain(a, b):
        return wnp.linalg.solve(a, b)
    if np.shape(a) == (1, 1):
        return np.asarray(b, dtype=float) / a[0, 0]
    return np.linalg.solve(a, b)


def _dense(problem):
    """Whether ``problem`` solves with its residual's dense Jacobian (the default)."""
    return type(problem).tangent_solve is Problem.tangent_solve


def _residual_of(problem, active, primals, idx):
    """``(z, *the idx leaves) -> F``: the residual as a function of what is differentiated."""
    def residual(zz, *vals):
        leaves = list(primals)
        for i, v in zip(idx, vals):
            leaves[i] = v
        return problem.residual(zz, active, leaves)
    return residual


@implicit_solve.frule(symbolic_zeros=True)
def implicit_solve_jvp(primals, tangents, problem):
    """``dz = -J⁻¹ ∂F/∂θ·dθ``.  With the dense Jacobian, one forward pass pushes the ``n``
    unit directions of ``z`` (``J``'s columns) and ``θ``'s direction together (several
    directions of ``θ``: ``wg.vmap`` over this rule, the tangents batched values)."""
    z, active = implicit_solve(*primals, problem=problem)
    idx = [i for i, t in enumerate(tangents) if t is not None and _diff(primals[i])]
    if not idx:
        return (z, active), (None, None)
    zshape = shape_of(z)   # (n,), or () for one unknown (a problem's choice: see _impl)
    n = math.prod(zshape)
    residual = _residual_of(problem, active, primals, idx)
    ps = tuple(primals[i] for i in idx)
    ts = tuple(_reshape(tangents[i], (1,) + shape_of(primals[i])) for i in idx)
    if _dense(problem):
        tz = np.concatenate([np.eye(n), np.zeros((1, n))]).reshape((n + 1,) + zshape)
        tps = tuple(wnp.concatenate([wnp.zeros((n,) + shape_of(p)), t])
                    for p, t in zip(ps, ts))
        _, cols = jvp(residual, (z,) + ps, (tz,) + tps, batched=True)   # (n + 1, n)
        jac = _T(cols[:n])
        rhs = _T(cols[n:])
        dz = -_solve(jac, rhs)                                # (n, 1)
    else:
        _, v = jvp(lambda *vals: residual(z, *vals), ps, ts, batched=True)    # (1, n)
        dz = -problem.tangent_solve(z, active, primals, _T(v), False)
    dz = _T(dz)[0]
    return (z, active), (dz if zshape == (n,) else _reshape(dz, zshape), None)


@implicit_solve.rrule(needs=True)
def implicit_solve_vjp(*primals, problem, needs):
    """``θ̄ = -(∂F/∂θ)ᵀ J⁻ᵀ z̄``.  With the dense Jacobian, one taped evaluation of the
    residual and one batched sweep give ``J``'s rows and ``∂F/∂θ``'s together."""
    z, active = implicit_solve(*primals, problem=problem)
    idx = [i for i, n in enumerate(needs) if n and _diff(primals[i])]
    return (z, active), lambda gs: _pullback(problem, z, active, primals, idx, gs[0])


def _pullback(problem, z, active, primals, idx, gz):
    """The cotangents of ``primals`` (None where not in ``idx``) from ``gz``, ``z``'s."""
    out = [None] * len(primals)
    if gz is None or not idx:
        return tuple(out)
    zshape, gshape = shape_of(z), shape_of(gz)
    n = math.prod(zshape)
    batch = gshape[:len(gshape) - len(zshape)]
    if not batch and _dense(problem) and _plain(gz, *primals):
        cts = problem.plain_pullback(z, active, primals, idx, gz)
        if cts is not None:
            for i, c in zip(idx, cts):
                if type(c) is float and type(primals[i]) is float:
                    out[i] = c   # a number's cotangent, as the generated code gives it
                    continue
                if type(c) is not np.ndarray:
                    c = np.asarray(c)
                shape = shape_of(primals[i])
                if c.shape != shape:
                    c = c.reshape(shape)
                out[i] = c[()] if c.ndim == 0 else c
            return tuple(out)
    g2 = _reshape(gz, (-1, n))                       # (m, n)
    residual = _residual_of(problem, active, primals, idx)
    ps = [primals[i] for i in idx]
    if _dense(problem):
        _, pb = vjp(residual, z, *ps)
        if n == 1:   # one sweep with a plain cotangent, not a batched one of a 1 x 1 eye
            rows = [_reshape(r, (1,) + shape_of(r)) for r in pb(np.ones(1))]
        else:
            rows = pb(np.eye(n))                        # J's rows, ∂F/∂θ's rows
        jac = rows[0] if shape_of(rows[0]) == (n, n) else _reshape(rows[0], (n, n))
        lam = _solve(_T(jac), _T(g2))   # (n, m)
        cts = [-(np.tensordot(_T(lam), r, axes=1) if _plain(lam, r) else
                 wnp.tensordot(_T(lam), r, axes=1)) for r in rows[1:]]
    else:
        _, pb = vjp(lambda *vals: residual(z, *vals), *ps)
        lam = problem.tangent_solve(z, active, primals, _T(g2), True)
        m = shape_of(g2)[0]
        cols = [pb(-lam[:, j]) for j in range(m)]
        cts = [wnp.stack([c[pos] for c in cols]) for pos in range(len(idx))]
    for i, c in zip(idx, cts):
        c = _reshape(c, tuple(batch) + shape_of(primals[i]))
        out[i] = c[()] if type(c) is np.ndarray and c.ndim == 0 else c   # a scalar's
    return tuple(out)


def _tape_of(leaves):
    """The reverse tape every leaf is a Var of, holding plain values, when it records as
    usual (a first derivative by ``wg.grad``/``wg.vjp``); None for anything else (another
    transform, a nested derivative, a paused or redirected tape)."""
    tape = None
    for x in leaves:
        if type(x) is not Var or isinstance(x.value, Tracer):
            return None
        if tape is None:
            tape = x._trace
        elif x._trace is not tape:
            return None
    if tape._redirect is not None or tape._paused is not None or \
            tape.finished_by is not None:
        return None
    return tape


def _recorded(problem, tape, leaves):
    """The solve recorded onto ``tape`` as one node: the rule ``implicit_solve`` would
    record, in fewer calls (no dispatch, no second primitive call for the primal, no output
    nodes for ``active``, which is never differentiated).  A first derivative's path: the
    primal is plain, so ``z`` is too, and the pullback meets a traced cotangent only when
    the sweep itself is traced (then ``_pullback`` takes its general path)."""
    primals = [x.value for x in leaves]
    z, active = _impl(*primals, problem=private(problem))
    problem.__dict__["taped"] = True
    idx = [i for i, v in enumerate(primals) if _diff(v)]
    var = tape.record(leaves, lambda g: _pullback(problem, z, active, primals, idx, g),
                      "implicit_solve", z)
    return var, active


def solve_implicit(problem):
    """``(z, active)`` for ``problem``: the primitive when a captured value is traced, the
    solver itself when none is (and, for a first reverse derivative, the primitive's rule
    recorded directly)."""
    leaves = problem.captured.leaves
    if not leaves:
        return _impl(problem=private(problem))
    tape = _tape_of(leaves)
    if tape is not None:
        return _recorded(problem, tape, leaves)
    return implicit_solve(*leaves, problem=problem)


# -- custom_root and implicit ----------------------------------------------------------------------
class _LinearMap:
    """``v ↦ J v`` (or ``Jᵀ v``) of a residual at the solution, on the solution's pytree:
    what a user's ``tangent_solve(g, y)`` is given."""

    def __init__(self, problem, z, active, leaves, unravel, transpose):
        self.problem, self.z, self.active, self.leaves = problem, z, active, leaves
        self.unravel, self.transpose = unravel, transpose

    def __call__(self, v):
        vec = _pack(v)
        fn = lambda zz: self.problem.residual(zz, self.active, self.leaves)  # noqa: E731
        if self.transpose:
            _, pb = vjp(fn, self.z)
            return self.unravel(pb(vec)[0])
        return self.unravel(jvp(fn, (self.z,), (vec,))[1])


def _pack(tree):
    leaves, _ = flatten(tree)
    parts = [wnp.reshape(x, (-1,)) for x in leaves]
    return parts[0] if len(parts) == 1 else wnp.concatenate(parts)


class _RootProblem(Problem):
    """``custom_root``: ``f(x) = 0`` solved by the user's ``solve``."""

    name = "custom_root"

    def __init__(self, f, x0, solve, tangent_solve, has_aux):
        super().__init__(Captured((f, x0, solve)))
        self.tangent_fn, self.has_aux = tangent_solve, has_aux
        self.unravel = unraveler(x0)

    def solve(self, leaves):
        f, x0, solve = self.captured.build(leaves)
        out = running("custom_root", solve, f, x0)
        if self.has_aux:
            out, self.aux = out
        self.result = out
        return np.ravel(ravel(out)[0]).astype(float), np.zeros(0)

    def residual(self, z, active, leaves):
        f = self.captured.build(leaves)[0]
        return _pack(f(self.unravel(z)))   # (with has_aux, only solve returns aux, as JAX)

    def tangent_solve(self, z, active, leaves, rhs, transpose):
        if self.tangent_fn is None:
            return Problem.tangent_solve(self, z, active, leaves, rhs, transpose)
        g = _LinearMap(self, z, active, leaves, self.unravel, transpose)
        if ndim_of(rhs) == 1:
            return _pack(self.tangent_fn(g, self.unravel(rhs)))
        k = shape_of(rhs)[1]
        cols = [_pack(self.tangent_fn(g, self.unravel(rhs[:, j]))) for j in range(k)]
        return wnp.stack(cols, axis=1)


def _unravel_number(vec):
    """A number from a solution of one entry: of shape (1,), or () where the problem keeps
    its one unknown 0-d (no indexing operation to record)."""
    if type(vec) is np.ndarray:
        return float(vec if vec.ndim == 0 else vec[0])
    return vec if ndim_of(vec) == 0 else vec[0]


def unraveler(tree):
    """``vector -> tree`` shaped as ``tree``'s leaves (wengert operations, so a traced or
    batched vector gives traced leaves; a Python float leaf comes back a 0-d value)."""
    if type(tree) is float or type(tree) is np.float64:
        return _unravel_number   # a scalar root's: the common case, made once
    if type(tree) is np.ndarray:   # an array of unknowns (root, fsolve): no tree to walk
        shape = tree.shape

        def array(vec):   # a vector already of the array's shape is the array: no reshape
            if type(vec) is np.ndarray:
                return vec.reshape(shape)
            return vec if shape_of(vec) == shape else wnp.reshape(vec, shape)
        return array
    leaves, d = flatten(tree)
    shapes = [x.shape if type(x) is np.ndarray else np.shape(x) for x in leaves]
    floats = [isinstance(x, (float, int)) for x in leaves]
    ends = list(itertools.accumulate(math.prod(s) for s in shapes))   # Python's: no NumPy call

    if len(leaves) == 1 and not floats[0]:
        shape = shapes[0]

        def one(vec):   # a vector already of the leaf's shape is the leaf: no reshape to record
            if type(vec) is np.ndarray:
                return unflatten(d, [vec.reshape(shape)])
            return unflatten(d, [vec if shape_of(vec) == shape else wnp.reshape(vec, shape)])
        return one

    def unravel(vec):
        if type(vec) is np.ndarray:   # plain: NumPy's own slicing
            return unflatten(d, [float(vec[lo]) if f else vec[lo:hi].reshape(shape)
                                 for lo, hi, shape, f in zip([0, *ends[:-1]], ends, shapes,
                                                             floats)])
        out = []
        for lo, hi, shape, f in zip([0, *ends[:-1]], ends, shapes, floats):
            # a number stays a number (a traced one a traced scalar), as SciPy returns it
            out.append(vec[lo] if f else wnp.reshape(vec[lo:hi], shape))
        return unflatten(d, out)
    return unravel


def plain_tree(tree):
    leaves, d = flatten(tree)
    return unflatten(d, [plain(v) for v in leaves])


def custom_root(*args, has_aux=False):
    """The root of ``f`` found by your own ``solve``, differentiated by the implicit function
    theorem, as ``jax.lax.custom_root``: ``custom_root(f, initial_guess, solve,
    tangent_solve)``.  ``solve(f, initial_guess)`` runs on plain values (any algorithm, any
    library); ``tangent_solve(g, y)`` solves the linear ``g(x) = y`` (``None``: a dense solve
    with the Jacobian of ``f``; for a scalar, ``lambda g, y: y / g(1.0)``).  The root is
    differentiable with respect to every traced value ``f`` closes over.
    ``custom_root(solve, tangent_solve)`` returns ``root(f, initial_guess)``.

    >>> import wengert as wg
    >>> def bisect(f, x0):
    ...     lo, hi = 0.0, 10.0
    ...     for _ in range(80):
    ...         mid = 0.5 * (lo + hi)
    ...         lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    ...     return 0.5 * (lo + hi)
    >>> sqrt = lambda a: wg.custom_root(lambda x: x * x - a, 1.0, bisect,
    ...                                 lambda g, y: y / g(1.0))
    >>> print(round(float(wg.grad(sqrt)(4.0)), 12))   # 1 / (2 sqrt(4))
    0.25
    """
    if len(args) == 2:
        solve, tangent_solve = args
        return lambda f, initial_guess: custom_root(f, initial_guess, solve, tangent_solve,
                                                    has_aux=has_aux)
    if len(args) != 4:
        raise TypeError("custom_root(f, initial_guess, solve, tangent_solve), or "
                        "custom_root(solve, tangent_solve) for a function of (f, initial_guess)")
    f, x0, solve, tangent_solve = args
    problem = _RootProblem(f, x0, solve, tangent_solve, has_aux)
    z, _ = solve_implicit(problem)
    if not problem.captured.leaves:
        return (problem.result, problem.aux) if has_aux else problem.result
    x = problem.unravel(z)
    return (x, problem.aux) if has_aux else x


class _ImplicitProblem(Problem):
    name = "implicit"

    def __init__(self, solver, optimality, init, args, tangent_fn):
        super().__init__(Captured((optimality, init, args)))
        self.solver, self.tangent_fn = solver, tangent_fn
        self.shape = None

    def solve(self, leaves):
        _, init, args = self.captured.build(leaves)
        out = running("wg.implicit", self.solver, init, *args)
        self.result = out
        vec, _ = ravel(plain_tree(out))
        self.unravel = unraveler(plain_tree(out))
        return np.asarray(vec, dtype=float), np.zeros(0)

    def residual(self, z, active, leaves):
        optimality, _, args = self.captured.build(leaves)
        return _pack(optimality(self.unravel(z), *args))

    tangent_solve = _RootProblem.tangent_solve


def implicit(optimality, *, tangent_solve=None):
    """Decorate ``solver(init, *args) -> x`` so that ``x`` is differentiated through
    ``optimality(x, *args) = 0`` (the implicit function theorem, as jaxopt's
    ``implicit_diff.custom_root``): the solver's body runs on plain values and is never
    differentiated, so it may be any algorithm or library.  ``x`` is differentiable with
    respect to ``args`` and what ``optimality`` closes over; ``init`` gets no derivative.
    For an argmin, ``optimality`` is the gradient of the objective (``wg.grad``).

    >>> import numpy as np, wengert as wg
    >>> @wg.implicit(lambda x, a: x ** 3 - a)
    ... def cube_root(x0, a):
    ...     return np.cbrt(a)
    >>> print(round(float(wg.grad(lambda a: cube_root(1.0, a))(8.0)), 12))  # a^(-2/3) / 3
    0.083333333333
    """
    if not callable(optimality):
        raise TypeError("wg.implicit(optimality) takes the optimality function "
                        "optimality(x, *args), zero at the solution")

    def deco(solver):
        @functools.wraps(solver)
        def solved(init, *args):
            problem = _ImplicitProblem(solver, optimality, init, args, tangent_solve)
            z, _ = solve_implicit(problem)
            if not problem.captured.leaves:
                return problem.result
            return problem.unravel(z)
        return solved
    return deco
