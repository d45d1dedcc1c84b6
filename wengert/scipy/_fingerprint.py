"""A hashable description of everything a residual reads: what lets a solver's derivative
code, generated for one call, be reused by a later call without tracing the residual again.

``fingerprint(obj, leaf_index)`` walks functions (code, defaults, closure cells and the
globals their code names), containers and values.  Plain values enter by value (an array by
its bytes: one changed in place gives another fingerprint), traced values by their position
among the call's captured leaves (``leaf_index``), wengert's and NumPy's own functions and
modules by identity.  Whatever could change behind a fingerprint's back (an object's
attributes, another module's globals, a generator) raises :class:`Unkeyable`: that call
takes the uncached path, which is always correct.  Identities stay valid because the cache
entry keeps the objects alive (``keep``).
"""
from __future__ import annotations

import builtins
import functools
import hashlib
import types

import numpy as np

from ..core import Primitive, Tracer

__all__ = ["Unkeyable", "fingerprint", "fingerprint_items"]

# modules whose attributes a residual may read: libraries, not state that changes between calls
_TRUSTED = ("numpy", "wengert", "math", "cmath", "scipy", "operator", "functools")
_DEPTH = 12
_ATOMS = frozenset([type(None), bool, int, str, bytes])
_LARGE = 1 << 16
_DISPATCHER = type(np.sum)  # numpy's array-function dispatchers: np.sum, np.dot, ...


class Unkeyable(Exception):
    """A value whose behaviour a fingerprint cannot vouch for."""


@functools.lru_cache(maxsize=1024)
def _trusted(name):
    return name.partition(".")[0] in _TRUSTED


def _trusted_module(name):
    return isinstance(name, str) and _trusted(name)


# id(code) -> (code, names): by identity, the code kept alive so that its id stays its own
# (an lru_cache would hash the code object, whose hash walks its constants, on every gradient)
_NAMES = {}
_NAMES_MAX = 4096


def _names(code):
    """Every global a code object (and the functions defined inside it) may read."""
    hit = _NAMES.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    out, work = set(), [code]
    while work:
        c = work.pop()
        out.update(c.co_names)
        work.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    names = tuple(sorted(out))
    if len(_NAMES) >= _NAMES_MAX:
        _NAMES.clear()
    _NAMES[id(code)] = (code, names)
    return names


class _Walker:
    def __init__(self, leaf_index, known):
        self.leaf_index, self.known = leaf_index, known
        self.keep = []           # objects named by identity: alive as long as the entry
        self.seen = {}

    def value(self, x, depth):
        t = type(x)   # the common kinds first, by exact type (this runs on every gradient)
        if t is float:
            return (t, repr(x))    # -0.0 and 0.0 differ; nan equals itself
        if t in _ATOMS:
            return (t, x)
        if depth > _DEPTH:
            raise Unkeyable("too deep")
        if t is tuple or t is list:
            return (t.__name__,) + tuple([self.value(v, depth + 1) for v in x])
        if t is types.FunctionType:
            return self.function(x, depth)
        if t is np.ndarray:
            if x.dtype.hasobject:
                raise Unkeyable("an object array")
            if x.nbytes > _LARGE:   # a digest, not a copy, of a large array's bytes
                return ("nd#", x.shape, x.dtype.str,
                        hashlib.blake2b(np.ascontiguousarray(x).data).digest())
            return ("nd", x.shape, x.dtype.str, x.tobytes())
        if isinstance(x, Tracer):
            k = self.leaf_index.get(id(x))
            if k is None:   # a traced value the call did not capture
                raise Unkeyable("a traced value outside the captured leaves")
            return ("leaf", k)
        if t is complex:
            return (t, repr(x))
        if isinstance(x, np.generic):
            return ("np", x.dtype.str, x.tobytes())
        if t is dict:
            return ("dict",) + tuple((self.value(k, depth + 1), self.value(v, depth + 1))
                                     for k, v in x.items())
        if t is functools.partial:
            return ("partial", self.value(x.func, depth + 1), self.value(x.args, depth + 1),
                    self.value(x.keywords, depth + 1))
        if t is types.ModuleType:
            if not _trusted_module(x.__name__):
                raise Unkeyable(f"module {x.__name__}")
            return ("module", x.__name__)
        known = self.known.get(id(x))
        if known is not None and known[0] is x:
            return known[1]
        if isinstance(x, (np.ufunc, np.dtype)) or (
                isinstance(x, types.BuiltinFunctionType)
                and isinstance(getattr(x, "__self__", None), (types.ModuleType, type(None)))) \
                or (isinstance(x, type) and _trusted_module(x.__module__)) \
                or isinstance(x, (Primitive, _DISPATCHER)):
            # NumPy's and wengert's own callables (ufuncs, np.sum, primitives): fixed
            # behaviour; a library's callable *object* (a SciPy spline, np.vectorize) holds
            # state that can change, so it is not keyed by identity
            self.keep.append(x)
            return ("id", id(x))
        raise Unkeyable(type(x).__name__)

    def function(self, fn, depth):
        known = self.known.get(id(fn))
        if known is not None and known[0] is fn:
            return known[1]
        seen = self.seen
        hit = seen.get(id(fn))
        if hit is not None:   # a function that names itself
            return ("again", hit)
        seen[id(fn)] = len(seen)
        code = fn.__code__
        cells = fn.__closure__
        trusted = _trusted_module(fn.__module__)
        if trusted and cells is None:
            self.keep.append(fn)   # a library function: its code and globals are fixed
            return ("id", id(fn))
        if code.co_flags & (0x20 | 0x80 | 0x200):   # generators, coroutines: not a residual
            raise Unkeyable("a generator")
        self.keep.append(code)
        depth += 1
        out = ()
        if cells:
            # a cell's usual contents (a traced value, a number) keyed here, without a call
            out = []
            index, known_ = self.leaf_index, self.known
            for c in cells:
                try:
                    v = c.cell_contents
                except ValueError:   # an empty cell
                    out.append(("empty",))
                    continue
                t = type(v)
                if t is float:
                    out.append((t, repr(v)))
                    continue
                if isinstance(v, Tracer):
                    k = index.get(id(v))
                    if k is None:   # a traced value the call did not capture
                        raise Unkeyable("a traced value outside the captured leaves")
                    out.append(("leaf", k))
                    continue
                known = known_.get(id(v))
                out.append(known[1] if known is not None and known[0] is v
                           else self.value(v, depth))
            out = tuple(out)
        gl = ()
        if not trusted:   # a library's globals are fixed
            names = _names(code)
            if names:
                glob = fn.__globals__
                gl = []
                for name in names:
                    if name in glob:
                        gl.append((name, self.value(glob[name], depth)))
                    elif not hasattr(builtins, name):
                        gl.append((name, ("absent",)))   # defined later, read then
                gl = tuple(gl)
        d, kd = fn.__defaults__, fn.__kwdefaults__
        return ("fn", id(code), None if d is None else self.value(d, depth),
                None if kd is None else self.value(kd, depth), out, gl)


def fingerprint(obj, leaf_index, known=None):
    """``(key, keep)``: a hashable key of ``obj`` and the objects it names by identity.
    ``leaf_index`` maps ``id(tracer)`` to its position among the captured leaves; ``known``
    maps ``id(x)`` to ``(x, token)`` for objects the caller describes itself."""
    w = _Walker(leaf_index, known or _NONE)
    key = w.value(obj, 0)
    return key, w.keep


_NONE = {}


def fingerprint_items(items, leaf_index, known=None):
    """``fingerprint(tuple(items))``'s key and keep, with a key of its own shape: a gradient
    asks for this on every call, so the usual items (functions, empty ``args``) are met
    without a call of the general walk each."""
    w = _Walker(leaf_index, known or _NONE)
    out = []
    for x in items:
        t = type(x)
        if t is types.FunctionType:
            out.append(w.function(x, 1))
        elif (t is tuple or t is list) and not x:
            out.append((t,))
        else:
            out.append(w.value(x, 1))
    return tuple(out), w.keep
