"""NEP 13/18 dispatch and Python operators on tracers: both lead to the same primitives.

``ArrayTracer`` is the tracer that behaves as a NumPy array: every engine's tracer is one
(``wengert.core.Tracer`` is only the protocol, below the rules). The namespace
(``wengert.numpy``, on this floor) gives it all of that once it is built (``install``): the
operators from the rules' table, NumPy's methods and the NEP 13/18 hooks.  Engines give their
tracers the operators' shortcuts through ``install_fast_paths``.
"""
import contextvars
import importlib
import operator
import sys
import types

import numpy as np

from .core import (UFUNC_NAMES, plain as _value, Primitive, Tracer,
                   without_ufunc_keywords as _without_ufunc_kwargs)
from .rules import OPERATORS
from .rules.indexing import _plain_basic, getitem_basic, read_view, sort_inplace

__all__ = ["ArrayTracer", "HANDLED", "array_function", "array_ufunc", "conversion_message", "install",
           "install_fast_paths", "integer_values", "only_integers", "register_special",
           "scipy_caller"]

_namespace = None  # the namespace that installed the dispatch (wengert.numpy): see ``install``


class ArrayTracer(Tracer):
    """A traced value that behaves as a NumPy array: Python's operators, comparisons,
    ndarray's methods and properties, NEP 13/18, each leading to the function of that name in
    wengert.numpy (``install``). The class every engine's tracer derives from."""

    __slots__ = ()



def _compare(op):
    # comparisons are not differentiable: they compare the values one level down, which
    # ends in plain booleans -- or in a graph tracer, which records the comparison
    return lambda self, other: op(self.value, other.value if isinstance(other, Tracer) else other)


def install(namespace):
    """Give every tracer NumPy's protocols, leading to the primitives: Python operators
    (``OPERATORS``), comparisons, NEP 13/18, the ndarray methods and properties (each the
    function of that name in ``namespace``), and the messages of refused conversions that
    name the SciPy function responsible.
    """
    global _namespace
    _namespace = namespace
    cls = ArrayTracer
    for name, fn in OPERATORS.items():
        setattr(cls, name, _as_method(fn))
    for name in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(cls, f"__{name}__", _compare(getattr(operator, name)))
    cls.__hash__ = lambda self: id(self)
    for name in _METHODS:
        setattr(cls, name, _method(name))
    cls.reshape = _reshape
    cls.transpose = _transpose
    cls.T = property(lambda self: namespace.transpose(self))
    cls.mT = property(lambda self: namespace.swapaxes(self, -1, -2))
    cls.real = property(lambda self: namespace.real(self))  # complex intermediates (fft)
    cls.imag = property(lambda self: namespace.imag(self))
    cls.__array_ufunc__ = _array_ufunc_method
    cls.__array_function__ = _array_function_method
    cls._conversion_message = staticmethod(conversion_message)  # SciPy's conversions


def install_fast_paths(cls, binary, unary, index=None):
    """Give the tracer class ``cls`` an engine's shortcut for each Python operator whose
    primitive is declared by partials (``Primitive.fast_partials``): ``binary(prim, name,
    reflected, general)`` or, for one-argument ones, ``unary(prim, name, general)`` makes
    the method; ``general`` is the operator every tracer has, for the cases it leaves.
    ``index(prim, plain_index, noted, general)``: ``x[k]`` and ``x[a:b]`` (``plain_index``
    says which indices), ``noted(ans, x, idx)`` records the view as ``x[idx]`` would."""
    if index is not None:
        cls.__getitem__ = index(getitem_basic, _plain_basic, read_view,
                                _as_method(OPERATORS["__getitem__"]))
    for name, fn in OPERATORS.items():
        prim = getattr(fn, "_reflects", fn)
        if not isinstance(prim, Primitive) or prim.fast_partials is None:
            continue
        general = _as_method(fn)
        if prim.nargs == 2:
            setattr(cls, name, binary(prim, name, name.startswith("__r"), general))
        elif prim.nargs == 1 and not prim.broadcasting and not prim.fast_partials.needs:
            setattr(cls, name, unary(prim, name, general))


def _as_method(fn):
    """A plain function is a method as it is; a Primitive (not a descriptor) needs a wrapper."""
    if isinstance(fn, types.FunctionType):
        return fn

    def method(self, *args):
        return fn(self, *args)
    return method


_METHODS = ("sum", "mean", "prod", "var", "std", "max", "min", "cumsum", "cumprod", "dot",
            "ravel", "flatten", "squeeze", "swapaxes", "clip", "round", "trace", "diagonal",
            "take", "repeat", "conj", "argmax", "argmin", "argsort", "nonzero", "any", "all",
            "astype", "copy", "ptp", "sort")


def _method(name):
    if name == "sort":  # ndarray.sort sorts in place and returns None
        def sort(self, *args, **kwargs):
            sort_inplace(self, *args, **kwargs)
        return sort

    def method(self, *args, **kwargs):
        return getattr(_namespace, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


def _reshape(self, *shape, **kwargs):
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = shape[0]
    return _namespace.reshape(self, shape, **kwargs)


def _transpose(self, *axes):
    if len(axes) == 1 and not isinstance(axes[0], int):
        axes = axes[0]
    return _namespace.transpose(self, axes or None)


# -- NEP 13 / NEP 18 ---------------------------------------------------------------------------
def _array_ufunc_method(self, ufunc, method, *inputs, **kwargs):
    return array_ufunc(ufunc, method, inputs, kwargs)


def _array_function_method(self, func, types, args, kwargs):
    return array_function(func, args, kwargs)


_UFUNC_ALIASES = UFUNC_NAMES


# ``ndarray * tracer`` reaches us as np.multiply(ndarray, tracer): send the common binary
# ufuncs to the tracer's operator methods, which take the engines' fast paths
_OPERATOR_OF = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.true_divide: "truediv",
                np.power: "pow", np.matmul: "matmul"}


def array_ufunc(ufunc, method, inputs, kwargs):
    if method == "__call__" and not kwargs and len(inputs) == 2:
        op = _OPERATOR_OF.get(ufunc)
        if op is not None:
            a, b = inputs
            if isinstance(a, Tracer):
                r = getattr(a, f"__{op}__")(b)
            else:
                r = getattr(b, f"__r{op}__")(a)
            if r is not NotImplemented:
                return r
    name = _UFUNC_ALIASES.get(ufunc.__name__, ufunc.__name__)
    if method != "__call__":
        return _ufunc_method(ufunc, name, method, inputs, kwargs)
    if kwargs.get("out") is not None:
        if _no_derivative(inputs, kwargs["out"]):  # count += mask: NumPy's, on plain values
            return ufunc(*[np.asarray(a) if isinstance(a, Tracer) else a for a in inputs],
                         **kwargs)
        if _into_first_input(inputs, kwargs["out"]):
            raise TypeError(_augmented_message(ufunc, name))
        where, wmod = _home(ufunc)
        raise NotImplementedError(
            f"{where}.{name} with out= on a traced value has no wengert rule (it writes in "
            f"place); call it without out=, or use {wmod}.{name}.")
    fn = HANDLED.get(ufunc)
    if fn is None:
        if _home(ufunc)[0] == "scipy.special":
            register_special()
            fn = HANDLED.get(ufunc)
        if fn is None:  # (scipy.special's cbrt, exp2, expm1, log1p, round are NumPy's too)
            fn = getattr(_namespace, name, None)
    if fn is None or getattr(fn, "_passthrough", False):
        raise NotImplementedError(
            f"{_home(ufunc)[0]}.{name} has no wengert rule. Declare one with @wg.primitive "
            "and @f.rrule / @f.frule (see docs/rules.md).")
    kwargs = {k: v for k, v in kwargs.items() if k != "out"}
    if kwargs:  # NumPy's keywords are not the rule's parameters (its partials take none)
        inputs, kwargs = _without_ufunc_kwargs(ufunc, name, inputs, kwargs)
    return fn(*inputs, **kwargs)


_AUGMENTED = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/",
              "floor_divide": "//", "remainder": "%", "power": "**", "matmul": "@",
              "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
              "left_shift": "<<", "right_shift": ">>"}


def _no_derivative(inputs, out):
    """Whether the traced inputs are all masks or counts (no derivative to lose) and the
    outputs plain arrays: then NumPy's own call computes it."""
    out = out if isinstance(out, tuple) else (out,)
    return (not any(isinstance(o, Tracer) for o in out)
            and all(a.dtype.kind in "biu" for a in inputs if isinstance(a, Tracer)))


def _into_first_input(inputs, out):
    """``x op= v`` with ``x`` a plain array: NumPy calls ``ufunc(x, v, out=(x,))``."""
    out = out if isinstance(out, tuple) else (out,)
    return (len(out) == 1 and len(inputs) == 2 and out[0] is inputs[0]
            and isinstance(out[0], np.ndarray))


def _augmented_message(ufunc, name):
    op = _AUGMENTED.get(name)
    if op is None:
        what = f"numpy.{name}(x, v, out=x) with x a plain NumPy array and v traced"
        new = f"x = wnp.{name}(x, v)"
    else:
        what = (f"x {op}= v with x a plain NumPy array and v traced (NumPy runs it as "
                f"numpy.{name}(x, v, out=x))")
        new = f"x = x {op} v"
    return (f"{what}: x can hold only plain numbers, so v's derivative would be lost. Write "
            f"{new} (a new, traced array), or make x traced from the start: "
            "x = wnp.zeros(n, like=v), or x = wnp.zeros_like(y) for a traced y; then "
            f"x {op or '+'}= v updates it in place and is differentiated.")


def _dtype(x):
    return np.asarray(_value(x)).dtype


def register_special():
    """Send scipy.special's ufuncs met on a traced value (NEP 13) to their rules
    (``wengert.rules.special``, below this floor), and return those rules by name. Loaded on
    first use: scipy.special is a heavy import (HEAVY in tests/test_layering.py)."""
    import scipy.special as sp
    from .rules.special import SPECIAL  # loads scipy.special (see the docstring)
    if not _SPECIAL_DONE:
        for name, fn in list(SPECIAL.items()):
            u = getattr(sp, name, None)
            if isinstance(u, np.ufunc):
                HANDLED[u] = fn
        # the private ufuncs SciPy's Python wrappers call: sp.zeta(traced) is _zeta(x, q, out)
        for private, public in (("_zeta", "zeta"), ("_riemann_zeta", "zeta"),
                                ("_lambertw", "lambertw")):
            u = getattr(sp._ufuncs, private, None)
            if isinstance(u, np.ufunc) and public in SPECIAL:
                HANDLED[u] = SPECIAL[public]
        _SPECIAL_DONE.append(True)
    return SPECIAL


_SPECIAL_DONE = []  # whether register_special has run


# ufunc methods that are NumPy functions with rules: np.add.reduce(x) is np.sum(x, axis=0)
_METHOD_AS = {("add", "reduce"): "sum", ("multiply", "reduce"): "prod",
              ("maximum", "reduce"): "max", ("minimum", "reduce"): "min",
              ("add", "accumulate"): "cumsum", ("multiply", "accumulate"): "cumprod"}
_METHOD_KWARGS = {"reduce": {"axis", "dtype", "keepdims", "initial", "where", "out"},
                  "accumulate": {"axis", "dtype", "out"}}  # what those functions take too


def _ufunc_method(ufunc, name, method, inputs, kwargs):
    fn = _METHOD_AS.get((name, method))
    if fn is not None and len(inputs) == 1 and kwargs.get("out") is None \
            and set(kwargs) <= _METHOD_KWARGS[method]:
        kw = {k: v for k, v in kwargs.items() if k != "out"}
        kw.setdefault("axis", 0)  # the methods' default, not the functions' (all axes)
        return getattr(_namespace, fn)(inputs[0], **kw)
    where = _home(ufunc)[0]
    hint = f"; use wnp.{fn} instead" if fn is not None else ""
    raise NotImplementedError(
        f"{where}.{name}.{method} on a traced value has no wengert rule (the differentiable "
        f"ufunc methods are {', '.join(f'{u}.{m}' for u, m in _METHOD_AS)}, without out=)"
        f"{hint}.")


HANDLED = {}  # numpy function -> wengert function, filled by wengert.numpy (and .scipy)


def _home(ufunc):
    """Where ``ufunc`` comes from, and its differentiable counterpart: NumPy or scipy.special
    (a ufunc does not say; scipy.special is imported if the caller holds one of its own)."""
    sp = sys.modules.get("scipy.special")
    if sp is not None and ufunc in (getattr(sp, ufunc.__name__, None),
                                    getattr(sp._ufuncs, ufunc.__name__, None)):
        return "scipy.special", "wengert.scipy.special"  # (_zeta: what sp.zeta calls)
    return "numpy", "wnp"


# (numpy function, args, kwargs) of the rules now running in this thread (this contextvars
# context), innermost last
_RUNNING = contextvars.ContextVar("wengert_running_rules", default=())


def _traced_ids(args, kwargs):
    ids = set()
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tracer):
            ids.add(id(a))
        elif isinstance(a, (list, tuple)):
            ids.update(id(b) for b in a if isinstance(b, Tracer))
    return ids


def _public_name(func):
    """``numpy.linalg.solve``, as users call it (not ``numpy.linalg._linalg.solve``)."""
    mod = (func.__module__ or "numpy").replace("numpy.linalg._linalg", "numpy.linalg")
    return f"{mod}.{func.__name__}"


def only_integers(args, kwargs):
    """Whether every traced value among the arguments is of integer or bool dtype."""
    def ok(a):
        if isinstance(a, Tracer):
            return a.dtype.kind in "biu"
        if isinstance(a, (list, tuple)):
            return all(ok(b) for b in a)
        return True
    return all(ok(a) for a in (*args, *kwargs.values()))


def integer_values(args):
    """``args`` (a tuple, list or dict) with each traced integer replaced by its primal value,
    read as NumPy reads it (``__array__``: guarded inside a graph being traced)."""
    if isinstance(args, dict):
        return {k: integer_values([v])[0] for k, v in args.items()}
    out = [np.asarray(a) if isinstance(a, Tracer) else
           integer_values(a) if isinstance(a, (list, tuple)) else a for a in args]
    return type(args)(out) if isinstance(args, tuple) else out


def array_function(func, args, kwargs):
    fn = HANDLED.get(func)
    if fn is None and only_integers(args, kwargs):
        # no rule, but only integers traced (a count, positions): no derivative to follow
        return func(*integer_values(args), **integer_values(kwargs))
    if fn is None:
        raise NotImplementedError(
            f"{_public_name(func)} has no wengert rule for traced values. Declare one with "
            "@wg.primitive and @f.rrule / @f.frule (see docs/rules.md), or call a wnp "
            "function that has one.")
    # A rule whose differentiated arguments are all plain hands the call back to NumPy; if a
    # traced value sits in another argument (an index, a count, a shape), NumPy dispatches
    # the same call to the rule again. Say so, instead of recursing until Python gives up.
    running = _RUNNING.get()
    for f, a, k in running:
        if f is func and _traced_ids(a, k) == _traced_ids(args, kwargs):
            raise TypeError(
                f"{_public_name(func)}: a traced value was passed as an argument wengert does "
                "not differentiate (an index, a count, a shape or positions). Indices are not "
                "differentiable: pass a plain value (x.value if it really does not depend on "
                "the derivative).")
    _RUNNING.set(running + ((func, args, kwargs),))
    try:
        return fn(*args, **kwargs)
    finally:
        _RUNNING.set(running)


# -- SciPy's Python functions ---------------------------------------------------------------
# They do not dispatch (no NEP 18): they turn a traced value into a plain array. When that
# happens, the error names the SciPy function and wengert's differentiable one.
def scipy_caller(frame):
    """``(public name, wengert's name or None)`` of the SciPy function converting a traced
    value, found from the converting ``frame`` outwards; ``None`` if it was not SciPy.

    Only a SciPy call innermost (NumPy's own frames aside) counts: a user's objective that
    converts inside ``scipy.optimize.minimize`` is the user's, not SciPy's.
    """
    found = None
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if mod == "scipy" or mod.startswith("scipy."):
            found = _public(mod, frame.f_code.co_name) or _wrapped(frame) or found
        elif not (mod == "numpy" or mod.startswith("numpy.")):
            break  # the caller of SciPy (or, before any SciPy, the user's own code)
        frame = frame.f_back
    if found is None:
        return None
    module, name = found
    try:
        ours = getattr(importlib.import_module(f"wengert.{module}"), name, None)
    except ImportError:
        ours = None
    return f"{module}.{name}", (f"wengert.{module}.{name}" if ours is not None
                                and not getattr(ours, "_passthrough", False) else None)


def _public(mod, name):
    """``(module, name)`` as SciPy exports it (scipy.special._logsumexp -> scipy.special)."""
    parts = mod.split(".")
    for i, p in enumerate(parts):
        if p.startswith("_"):
            parts = parts[:i]
            break
    module = ".".join(parts)
    if getattr(sys.modules.get(module), name, None) is None:
        return None
    return module, name


def _wrapped(frame):
    """A SciPy decorator's frame: the public function it wraps (a free variable of it)."""
    for v in frame.f_locals.values():
        if isinstance(v, types.FunctionType) and v.__module__.startswith("scipy."):
            public = _public(v.__module__, v.__name__)
            if public is not None:
                return public
    return None


def conversion_message(frame, generic, into):
    """``generic``, or, when a SciPy function did the conversion (``into`` "a plain NumPy
    array", say), a message naming it."""
    caller = scipy_caller(frame)
    if caller is None:
        return _numpy_message(frame, into) or generic
    public, ours = caller
    if ours is not None:
        return (f"{public} converted a traced value into {into}, which would drop "
                f"its derivative: SciPy's Python functions do not dispatch to wengert. Call "
                f"{ours} instead (same arguments), which differentiates.")
    return (f"{public} converted a traced value into {into}, which would drop its "
            f"derivative, and wengert has no rule for it. Declare one with @wg.primitive and "
            f"@f.rrule / @f.frule (see docs/rules.md).")


def _numpy_message(frame, into):
    """A message naming the NumPy function that converted (np.r_, np.linalg.norm of a
    list): NEP 18 hands it the list, never what the list holds."""
    module = frame.f_globals.get("__name__", "")
    if not (module == "numpy" or module.startswith("numpy.")):
        return None
    name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    if "AxisConcatenator" in name:
        name, ours = "np.r_ / np.c_", "wnp.r_[...] / wnp.c_[...]"
    else:
        ours = f"wengert.numpy's {name.rsplit('.', 1)[-1]} (wnp.*, wnp.linalg.*)"
    return (f"NumPy's {name} ({module}) converted a traced value into {into}, which would "
            f"drop its derivative: NumPy hands wengert the traced values that are arguments "
            f"themselves (NEP 18), never those inside a list or an np.r_[...] expression. "
            f"Call {ours} instead, which stacks such lists, or make the list one traced "
            f"array first with wnp.stack([...]) / wnp.array([...]).")
