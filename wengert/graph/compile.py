"""``wg.compile``: trace once per input signature, then run generated code.

The signature of a call is the structure of its arguments, the type, shape and
dtype of every float or array leaf, and the value of every other leaf (ints,
bools, strings...).  A new signature traces the function, simplifies the graph
(exact rewrites only) and generates its code.  Guards recorded while tracing
(``if x > 0:``) are checked by the generated code; when one fails, the function
is traced again along the new branch and both programs are kept.  After
``max_traces`` traces a warning is given and calls that need a new trace run the
function eagerly.

Called with values traced by an outer transform (``wg.grad(wg.compile(f))``),
the graph is evaluated primitive by primitive on them, so the outer transform
differentiates it.
"""
from __future__ import annotations

import builtins
import contextlib
import functools
import gc
import threading
import warnings

import numpy as np

from .._interrupt import reraise_interrupts
from .._pickling import importable
from .._validate import check_callable
from ..arrays import is_foreign
from ..batching import one_example
from ..core import Tracer
from ..rules.logic import SAME_VALUE
from ..tree import flatten, unflatten
from .codegen import build_function
from .fuse import UnfusedWarning, build_fused, fuse_default
from .pool import reuse_default
from .graph import trace
from .ir import GuardFailure, SpecialisedNumber
from .kernel_cache import CacheWarning, cache_dir, clear_cache
from .roll import find_stretches, fusion_pays, keep_rolled, needs_rolled, roll as _roll
from .trace import ForeignTracerError

__all__ = ["compile", "Compiled", "RetraceWarning"]

_traced = object()

# One compiled function may be called from many threads: its trace count and its table of
# programs change together, under this lock (held for the bookkeeping only, never while
# tracing: a trace runs user code, which may call other compiled functions). Threads whose
# first calls race may each trace; every program they make is a correct one.
_BOOKKEEPING = threading.Lock()


_GC = {"depth": 0, "was": False}  # compiles running now; whether the collector was on
_GC_LOCK = threading.Lock()


@contextlib.contextmanager
def _collector_paused():
    """CPython's cyclic collector off while programs are traced and built: its full
    collections walk every object alive, the growing graph included, which made a
    10^5-node compile half as slow again as ten 10^4-node ones.  Reference counting still
    frees the trace's garbage; cycles wait until the last compile running ends."""
    with _GC_LOCK:
        if _GC["depth"] == 0:
            _GC["was"] = gc.isenabled()
            gc.disable()
        _GC["depth"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC["depth"] -= 1
            if _GC["depth"] == 0 and _GC["was"]:
                gc.enable()


class RetraceWarning(RuntimeWarning):
    """A compiled function traced again for arguments of the same shapes because a value
    computed from them sets how many times a loop runs (``while`` on a traced value,
    ``range(int(...))``): each new trip count traces and compiles the program again."""


def _trip_count_changed(old, new):
    """Whether ``new``, traced again for ``old``'s signature after a guard failed, differs
    from it by how many times a loop tested a traced value: more or fewer guards, one test
    repeated (``while x > tol``), or a number read off a traced value (``int()``) changed
    along with the program's length."""
    def sites(g):
        return [(g.nodes[i].prim if g.nodes[i].kind == "op" else None, b) for i, b in g.guards]
    a, b = sites(old), sites(new)
    if len(a) != len(b):
        longer = a if len(a) > len(b) else b
        return len(set(longer)) < len(longer)
    return len(old.nodes) != len(new.nodes) and any(p is SAME_VALUE for p, _ in a)


class _Unkeyable(Exception):
    pass


class _Traced(Exception):
    pass


def _sig(x):
    """The part of the cache key one argument contributes (raises _Traced for tracers)."""
    t = type(x)
    if t is float:
        return float
    if t is np.ndarray:
        return (x.shape, x.dtype.str)
    if t is list or t is tuple:
        for e in x:
            if type(e) is not float:
                return (t,) + tuple(map(_sig, x))
        return (t, "floats", len(x))
    if t is dict:
        return (dict, tuple(x), tuple(map(_sig, x.values())))
    if isinstance(x, Tracer):
        raise _Traced
    if isinstance(x, tuple):  # namedtuple
        return (t,) + tuple(map(_sig, x))
    if isinstance(x, np.generic):
        return (t, x.dtype.str)
    if is_foreign(x):  # an array of another library (CuPy, Dask): keyed as an array
        return (t, x.shape, x.dtype.str)
    if isinstance(x, (int, bool, str, bytes, complex)) or x is None:
        return (t, x)
    try:
        hash(x)
    except TypeError:
        raise _Unkeyable from None
    return (t, x)


def _sig_traced(x):
    """The key of a traced argument: that of its plain value, marked."""
    if isinstance(x, Tracer):
        return ("traced", _sig(one_example(x)))
    t = type(x)
    if t is list or t is tuple or (isinstance(x, tuple)):
        return (t,) + tuple(map(_sig_traced, x))
    if t is dict:
        return (dict, tuple(x), tuple(map(_sig_traced, x.values())))
    return _sig(x)


def _key(args, kwargs, sig):
    """Keyword arguments are static: baked into the graph, keyed by value."""
    key = tuple(map(sig, args))
    if kwargs:
        kw = ("kwargs",) + tuple(sorted(kwargs.items()))
        try:
            hash(kw)
        except TypeError:
            raise _Unkeyable from None
        if any(isinstance(v, Tracer) for v in kwargs.values()):
            raise _Unkeyable
        key += (kw,)
    return key


def _plain(tree):
    """The values to trace on: one example's under ``wg.vmap`` (the graph is then evaluated
    on the batched tracers, so ``x.shape`` in the function is an example's, as eagerly)."""
    leaves, d = flatten(tree)
    return unflatten(d, [one_example(x) for x in leaves])


class Compiled:
    """The callable ``wg.compile(f)`` returns; ``.graphs`` lists what it traced."""

    def __init__(self, f, max_traces=16, simplify=True, fuse=None, reuse_buffers=None,
                 roll=None):
        self.f = f
        self.roll = None if roll is None else bool(roll)
        self.rolled = []         # the repeating stretches rolled into loops (graph/roll.py)
        self.roll_failures = []  # why a program that repeats stayed unrolled (for tests)
        self.fuse = fuse_default() if fuse is None else bool(fuse)
        self.reuse_buffers = reuse_default() if reuse_buffers is None else bool(reuse_buffers)
        self.fuse_failures = []  # why a fused program fell back to NumPy (for tests)
        self.max_traces = max_traces
        self.simplify = simplify
        self.cache = {}      # signature -> list of (graph, generated function)
        self.num_traces = 0
        self._fast = {}      # signature -> the generated function, when it is the only one
        self._warned = False
        self._warned_retrace = False
        # name and docs of f, but not its __dict__ (f may itself be a Compiled)
        functools.update_wrapper(self, f, updated=())

    def __repr__(self):
        return f"<wengert compiled {getattr(self.f, '__name__', 'function')}: " \
               f"{self.num_traces} trace(s)>"

    @property
    def graphs(self):
        return [g for entries in self.cache.values() for g, _, _ in entries]

    def __get__(self, obj, objtype=None):  # methods: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __reduce__(self):
        """Pickled as the function and the options, not the programs and kernels: the
        receiver traces and compiles again on its first call (by name where ``@wg.compile``
        decorated a module's function)."""
        if importable(self):
            return self.__qualname__
        return Compiled, (self.f, self.max_traces, self.simplify, self.fuse,
                          self.reuse_buffers, self.roll)

    @reraise_interrupts  # Ctrl+C in a fused kernel: see _interrupt
    def __call__(self, *args, **kwargs):
        try:
            key = tuple(map(_sig, args)) if not kwargs else _key(args, kwargs, _sig)
        except _Traced:
            return self._call_traced(args, kwargs)
        except _Unkeyable:
            return self.f(*args, **kwargs)
        fn = self._fast.get(key)
        if fn is not None:  # one program for this signature: the common case
            try:
                return fn(*args)
            except GuardFailure:
                pass
        else:
            for _, fn, _ in reversed(self.cache.get(key, ())):
                try:
                    return fn(*args)
                except GuardFailure:
                    pass
        return self._miss(key, args, kwargs, False)

    def _call_traced(self, args, kwargs):
        try:
            key = _key(args, kwargs, _sig_traced)
        except _Unkeyable:
            return self.f(*args, **kwargs)
        entries = self.cache.get(key, ())
        leaves = None
        for _, _, g in reversed(entries):  # the graph as traced: an outer transform then
            if leaves is None:                # sees the primitives f ran, in f's order
                leaves = g._input_leaves(args)
            try:
                return g.evaluate(leaves)
            except GuardFailure:
                pass
            except SpecialisedNumber:  # a float read as a number: the function itself, whose
                return self.f(*args, **kwargs)  # float() says whether a derivative reaches it
        return self._miss(key, args, kwargs, True)

    def _miss(self, key, args, kwargs, traced):
        if self.num_traces >= self.max_traces:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"wg.compile({getattr(self.f, '__name__', 'function')}): traced "
                    f"{self.num_traces} times (max_traces={self.max_traces}: new shapes, "
                    "dtypes, static arguments, branches or floats read as numbers); further "
                    "new cases run eagerly, "
                    "without compilation. Raise max_traces, or make the branching data-"
                    "independent (wnp.where).", RuntimeWarning, stacklevel=3)
            return self.f(*args, **kwargs)
        try:
            with _collector_paused():
                raw = trace(self.f, *_plain(args), _transform="wg.compile", **kwargs)
        except ForeignTracerError:
            # f closes over a value of an outer transform: no graph of it exists alone
            return self.f(*args, **kwargs)
        with _BOOKKEEPING:
            self.num_traces += 1
            before = [r for _, _, r in self.cache.get(key, ())]
        if before and not self._warned_retrace and any(_trip_count_changed(r, raw)
                                                       for r in before):
            self._warned_retrace = True
            warnings.warn(
                f"wg.compile({getattr(self.f, '__name__', 'function')}): traced again for "
                "arguments of the same shapes because a value computed from them sets how "
                "many times a loop runs (a `while` on a traced value, or range(int(...))): "
                "every new trip count traces and compiles the whole program again. Give the "
                "loop a fixed number of steps -- wg.scan(step, init, length=n), holding the "
                "carry with wnp.where once done -- to compile it once (a "
                "wengert.checkpoint.while_loop is unrolled when traced, so it re-traces too).",
                RetraceWarning, stacklevel=4)
        with _collector_paused():
            g = self._rolled(raw) if self.roll is not False else raw  # first: simplify then sees one copy
            g = g.simplify() if self.simplify else g
            fn, result = self._build(g, args) if not traced else \
                (build_function(g, self.reuse_buffers), None)
            kept = g.without_values()  # the program, not this call's values (API.md §15)
            held = kept if raw is g else raw.without_values()
        with _BOOKKEEPING:
            entries = self.cache.setdefault(key, [])
            entries.append((kept, fn, held))
            if len(entries) == 1:
                self._fast[key] = fn
            else:
                self._fast.pop(key, None)
        if traced:
            try:
                return raw.evaluate(raw._input_leaves(args))
            except SpecialisedNumber:
                return self.f(*args, **kwargs)
        return result[0] if result is not None else fn(*args)

    def _rolled(self, g):
        """``g`` with its long repeating stretches as scans (exact: the same primitives in
        the same order); ``g`` itself should rolling fail."""
        try:
            if self.roll is None and not needs_rolled(g, self.fuse):
                if find_stretches(g):  # kept unrolled whatever the loops: say why, build nothing
                    self.roll_failures.append(keep_rolled(g, None, self.fuse))
                return g
            r, stretches = _roll(g)
        except Exception as e:  # the unrolled program is always right
            self.roll_failures.append(e)
            return g
        if stretches and self.roll is None:
            why = keep_rolled(g, r, self.fuse)
            if why is not None:
                self.roll_failures.append(why)
                return g
        self.rolled.extend(stretches)
        return r

    def _build(self, g, args):
        """The fused program when Numba compiles it (its first run compiles the kernels),
        else the NumPy one; and, when it ran, its result for ``args``."""
        if self.fuse:
            unfused_loops = []
            for n in g.nodes:  # a compiled scan's loop runs inside Numba too, where it can
                plan = n.params.get("plan")
                enable = getattr(plan, "enable_fusion", None)
                if enable is not None:
                    why = fusion_pays(plan)  # (a rolled loop: where it pays)
                    if why is None:
                        enable()
                    elif why not in unfused_loops:
                        unfused_loops.append(why)
            try:
                fn = build_fused(g, self.reuse_buffers)
            except Exception as e:  # a kernel we cannot write: the NumPy program
                self.fuse_failures.append(e)
                fn = None
            if fn is not None:
                # too big to be worth Numba's time: kernels, rolled loops
                for why in list(getattr(fn, "backed_off", ())) + unfused_loops:
                    self.fuse_failures.append(UnfusedWarning(why))
                    warnings.warn(f"wg.compile({getattr(self.f, '__name__', 'function')}): "
                                  f"{why}", UnfusedWarning, stacklevel=5)
                try:
                    return fn, (fn(*args),)
                except GuardFailure:
                    return fn, None
                except Exception as e:  # Numba could not compile a kernel (an unsupported
                    self.fuse_failures.append(e)  # type), or f raised: NumPy's program
        return build_function(g, self.reuse_buffers), None

    def source(self, *args, **kwargs):
        """The generated program for these arguments (tracing if needed)."""
        return self.graph(*args, **kwargs).source()

    def program(self, *args, **kwargs):
        """The generated function these arguments run (tracing if needed): its ``source``,
        and with buffers reused, ``pooled_source`` and ``pool`` ({node index: buffer})."""
        return self._entry(args, kwargs, "no program generated")[1]

    def graph(self, *args, **kwargs):
        """The graph for these arguments (the first one whose guards they pass)."""
        return self._entry(args, kwargs, "no graph traced")[0]

    def _entry(self, args, kwargs, missing):
        """``(graph, function)`` of the newest trace whose guards these arguments pass."""
        self(*args, **kwargs)
        try:
            key = _key(args, kwargs, _sig)
        except _Traced:
            key = _key(args, kwargs, _sig_traced)
        for g, fn, _ in reversed(self.cache.get(key, [])):
            try:  # the kept graph has no values: these arguments' (guards checked)
                return g.with_values(_plain(args)), fn
            except GuardFailure:
                pass
        raise ValueError(f"{missing} for these arguments (max_traces reached?)")

def compile(f=None, *, max_traces=16, simplify=True, fuse=None, reuse_buffers=None,
            roll=None):
    """Trace ``f`` once per input signature and run generated code afterwards.

    ``fuse``: elementwise nodes as Numba loop kernels (``True``, where Numba is installed),
    the NumPy program (``False``), or ``None``: fused unless ``WENGERT_FUSE=0``
    (docs/graph.md, "Fused kernels").  ``reuse_buffers``: the program's internal
    temporaries written into buffers it keeps between calls (``True``), allocated on every
    call (``False``), or ``None``: reused unless ``WENGERT_REUSE_BUFFERS=0`` (docs/graph.md,
    "Buffers reused across calls").  ``roll``: a trace that repeats (an unrolled ``for``
    loop, its gradient's sweeps) given back as ``wg.scan`` loops over one copy of the
    repeated stretch, bit-identical in its results (docs/graph.md, "Unrolled loops rolled
    back"): ``None`` where that pays (a program of ``wengert.graph.roll.LONG`` nodes or more,
    or one whose rolled loops all run inside Numba), ``True`` wherever it is exact, ``False``
    never.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> def f(x):
    ...     if x > 0:
    ...         return wnp.sin(x)
    ...     return x * x
    >>> cf = wg.compile(f)
    >>> print(cf(0.5) == f(0.5), cf(-2.0) == f(-2.0), cf.num_traces)
    True True 2
    >>> dcf = wg.compile(wg.grad(f))
    >>> print(dcf(0.5) == wg.grad(f)(0.5))
    True
    """
    if f is None:
        return lambda fn: compile(fn, max_traces=max_traces, simplify=simplify, fuse=fuse,
                                  reuse_buffers=reuse_buffers, roll=roll)
    check_callable(f, "wg.compile")
    own = getattr(f, "__wg_compile__", None)
    if own is not None:  # a transform with a compiled form of its own (wg.sparse_jacobian)
        return own(functools.partial(compile, max_traces=max_traces, simplify=simplify,
                                     fuse=fuse, reuse_buffers=reuse_buffers, roll=roll))
    return Compiled(f, max_traces, simplify, fuse, reuse_buffers, roll)


# the fused kernels' disk cache (graph/kernel_cache.py): where it is, and emptying it
compile.cache_dir = cache_dir
compile.clear_cache = clear_cache
compile.CacheWarning = CacheWarning  # the warning an untrusted cache gives
del builtins
