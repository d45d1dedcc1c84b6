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
import functools
import warnings

import numpy as np

from ..core import Tracer
from ..tree import flatten, unflatten
from .codegen import build_function
from .ir import GuardFailure
from .trace import ForeignTracerError, trace

__all__ = ["compile", "Compiled"]

_traced = object()


class _Unkeyable(Exception):
    pass


def _sig(x, flags):
    t = type(x)
    if t is float:
        return float
    if t is np.ndarray:
        return (x.shape, x.dtype.str)
    if t is list or t is tuple:
        if all(type(e) is float for e in x):
            return (t, "floats", len(x))
        return (t,) + tuple(_sig(e, flags) for e in x)
    if t is dict:
        return (dict, tuple(x), tuple(_sig(v, flags) for v in x.values()))
    if isinstance(x, Tracer):
        flags.append(True)
        while isinstance(x, Tracer):
            x = x.value
        return ("traced", _sig(x, flags))
    if isinstance(x, tuple):  # namedtuple
        return (t,) + tuple(_sig(e, flags) for e in x)
    if isinstance(x, np.generic):
        return (t, x.dtype.str)
    if isinstance(x, (int, bool, str, bytes, complex)) or x is None:
        return (t, x)
    try:
        hash(x)
    except TypeError:
        raise _Unkeyable from None
    return (t, x)


def _plain(tree):
    leaves, d = flatten(tree)
    out = []
    for x in leaves:
        while isinstance(x, Tracer):
            x = x.value
        out.append(x)
    return unflatten(d, out)


class Compiled:
    """The callable ``wg.compile(f)`` returns; ``.graphs`` lists what it traced."""

    def __init__(self, f, max_traces=16, simplify=True):
        self.f = f
        self.max_traces = max_traces
        self.simplify = simplify
        self.cache = {}      # signature -> list of (graph, generated function)
        self.num_traces = 0
        self._warned = False
        # name and docs of f, but not its __dict__ (f may itself be a Compiled)
        functools.update_wrapper(self, f, updated=())

    def __repr__(self):
        return f"<wengert compiled {getattr(self.f, '__name__', 'function')}: " \
               f"{self.num_traces} trace(s)>"

    @property
    def graphs(self):
        return [g for entries in self.cache.values() for g, _ in entries]

    def __get__(self, obj, objtype=None):  # methods: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        flags = []
        try:
            key = tuple(_sig(a, flags) for a in args)
            if kwargs:
                key += (tuple(sorted((k, _sig(v, flags)) for k, v in kwargs.items())),)
        except _Unkeyable:
            return self.f(*args, **kwargs)
        entries = self.cache.get(key)
        if entries is not None:
            if not flags:
                for _, fn in reversed(entries):
                    try:
                        return fn(*args)
                    except GuardFailure:
                        pass
            else:
                leaves = None
                for g, _ in reversed(entries):
                    if leaves is None:
                        leaves = g._input_leaves(args)
                    try:
                        return g.evaluate(leaves)
                    except GuardFailure:
                        pass
        return self._miss(key, args, kwargs, bool(flags))

    def _miss(self, key, args, kwargs, traced):
        if self.num_traces >= self.max_traces:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"wg.compile({getattr(self.f, '__name__', 'function')}): traced "
                    f"{self.num_traces} times (max_traces={self.max_traces}: new shapes, "
                    "dtypes, static arguments or branches); further new cases run eagerly, "
                    "without compilation. Raise max_traces, or make the branching data-"
                    "independent (wnp.where).", RuntimeWarning, stacklevel=3)
            return self.f(*args, **kwargs)
        try:
            g = trace(self.f, *_plain(args), **kwargs)
        except ForeignTracerError:
            # f closes over a value of an outer transform: no graph of it exists alone
            return self.f(*args, **kwargs)
        self.num_traces += 1
        if self.simplify:
            g = g.simplify()
        fn = build_function(g)
        self.cache.setdefault(key, []).append((g, fn))
        if traced:
            return g.evaluate(g._input_leaves(args))
        return fn(*args)

    def source(self, *args, **kwargs):
        """The generated program for these arguments (tracing if needed)."""
        return self.graph(*args, **kwargs).source()

    def graph(self, *args, **kwargs):
        """The graph for these arguments (the first one whose guards they pass)."""
        self(*args, **kwargs)
        flags = []
        key = tuple(_sig(a, flags) for a in args)
        if kwargs:
            key += (tuple(sorted((k, _sig(v, flags)) for k, v in kwargs.items())),)
        for g, fn in reversed(self.cache.get(key, [])):
            try:
                g.evaluate(g._input_leaves(_plain(args)))
                return g
            except GuardFailure:
                pass
        raise ValueError("no graph traced for these arguments (max_traces reached?)")


def compile(f=None, *, max_traces=16, simplify=True):
    """Trace ``f`` once per input signature and run generated code afterwards.

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
        return lambda fn: Compiled(fn, max_traces, simplify)
    return Compiled(f, max_traces, simplify)


del builtins
