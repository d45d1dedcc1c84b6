"""The rule registry and the tracer protocol that every engine shares.

Vocabulary, used everywhere in wengert:

* primal     -- a value a primitive is applied to; ``ans`` is its output.
* tangent    -- a forward-mode perturbation (``dx``).
* cotangent  -- a reverse-mode adjoint (``g``, ``gx``).
* frule      -- pushforward: ``(primals, tangents) -> (ans, tangent)``.
* rrule      -- ``(*primals) -> (ans, pullback)``; ``pullback(g)`` returns one
  cotangent per primal.
* partials   -- the shorthand for elementwise functions: ``partials(ans, *primals)``
  gives one local derivative per argument and both rules are derived from it.
* ``None``   -- a symbolic zero tangent or cotangent: cheaper than an array of zeros.

Tangents and cotangents may carry *leading batch axes* (several directions at
once): a tangent of a primal of shape ``s`` has shape ``B + s``.  Rules therefore
address axes from the end, and the broadcasting bookkeeping (expanding tangents,
summing cotangents back to an argument's shape) is done here, once, for every
primitive declared ``broadcasting=True``.

Engines (forward, reverse, graph) subclass :class:`Trace` and :class:`Tracer`;
they never name a primitive.  Rules never import an engine.  Neither does this module name
a primitive: NumPy's protocols on tracers (Python operators, ndarray methods, NEP 13/18)
are installed by the namespace floor above (``wengert._dispatch``); the array bookkeeping
it needs (``wengert.arrays``) reaches primitives through them.
"""
from __future__ import annotations

import dis
import functools
import inspect
import itertools
import operator
import sys
import types

import numpy as np

from .arrays import (check_library, expand_tangents as _expand_tangents,
                     fill_tangent as _fill_tangent, ndim_of, shape_of, times as _times,
                     unbroadcast as _unbroadcast, zeros_like_value)

__all__ = ["Primitive", "primitive", "Partials", "Tracer", "Trace", "EscapedTracerError",
           "SolverWarning", "new_level", "shape_of", "ndim_of", "check_differentiable", "check_live",
           "leaf_dtype", "NoDerivative"]

_levels = itertools.count(1)


def new_level():
    """A fresh nesting level: later (inner) transforms get higher levels."""
    return next(_levels)


class EscapedTracerError(RuntimeError):
    """A tracer was used after the transform that made it had finished.

    It escaped the function (a global, a list, a closure): its derivative belongs to a
    computation that is over, so any answer computed from it would be wrong."""


class SolverWarning(RuntimeWarning):
    """SciPy reported failure; the derivative was taken at the point it returned anyway."""


# The level of a finished trace: above every live one, so ``Primitive.__call__`` sends any
# operation that touches one of its tracers to its ``process``, which raises. A dead
# tracer is therefore never taken for an outer transform's constant, and the dispatch
# loop pays nothing for the check.
DEAD_LEVEL = sys.maxsize


class Trace:
    """One active differentiation: a forward perturbation, a tape, a graph."""

    level = 0
    # whether a tracer's value underneath holds a batch of values, one per example (wg.vmap),
    # rather than one: then no single plain value (an index, a branch) can be read off it
    batched = False
    # once the transform that ran it has returned: (transform name, function, live level)
    finished_by = None
    tracer_name = "traced value"

    def process(self, prim, args, params):  # pragma: no cover - interface
        raise NotImplementedError

    # -- liveness --------------------------------------------------------------------------
    def finish(self, transform, fn=None):
        """The transform ``transform`` (e.g. ``"wg.grad"``) of ``fn`` has returned: from now
        on this trace's tracers are dead and using one raises ``EscapedTracerError``."""
        if self.finished_by is None:
            self.finished_by = (transform, fn, self.level)
            self.level = DEAD_LEVEL

    def revive(self):
        """Undo ``finish`` (a ``vjp`` pullback sweeping its tape again); returns the
        transform and function to pass back to ``finish``."""
        by = self.finished_by
        if by is None:
            return None
        self.level = by[2]
        self.finished_by = None
        return by[:2]

    def escaped(self, what=None):
        """The ``EscapedTracerError`` to raise for a use (``what``) of a dead tracer."""
        transform, fn = (self.finished_by or ("a transform", None))[:2]
        made_by = transform if fn is None else f"{transform}({_function_name(fn)})"
        use = f" ({what})" if what else ""
        return EscapedTracerError(
            f"this {self.tracer_name} was made by {made_by}, which has finished: it escaped "
            f"the function (e.g. stored in a global, a list or a closure) and was used "
            f"afterwards{use}, where its derivative would be wrong. Return it from the "
            f"function instead (wg.grad(f, has_aux=True) returns values besides the "
            f"gradient), or keep its plain value, x.value.")


def _function_name(fn):
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def check_live(x, what):
    """Raise ``EscapedTracerError`` if ``x`` or a tracer under it is dead; ``what`` says
    where it was met, or a function giving that. For boundaries, not every operation."""
    while isinstance(x, Tracer):
        tr = x._trace
        if tr.finished_by is not None:
            raise tr.escaped(what() if callable(what) else what)
        x = x.value


class Tracer:
    """A value being watched by a trace.  Operators dispatch to primitives."""

    __slots__ = ("__weakref__",)  # weak references: wengert.numpy tracks views for x[i] = v
    __array_priority__ = 1000  # make ndarray's binary operators defer to us

    # -- what engines provide -------------------------------------------------
    # .value : the primal; ._trace : the Trace that owns this tracer

    # -- array-like attributes ------------------------------------------------
    @property
    def shape(self):
        return shape_of(self.value)

    @property
    def ndim(self):
        return ndim_of(self.value)

    @property
    def size(self):
        return int(np.size(self.value))

    @property
    def dtype(self):
        v = self.value
        return v.dtype if hasattr(v, "dtype") else np.result_type(v)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d traced value")
        for i in range(self.shape[0]):
            yield self[i]

    def __bool__(self):
        return bool(self.value)

    # -- conversions to Python numbers ------------------------------------------------
    # A float value would lose its derivative: refused, with what to write instead. A
    # boolean or integer value has none to lose (a mask, a count): converted, as NumPy
    # converts it, through ``_converted``, where a graph being traced records a guard.
    def __float__(self):
        if _integral(self):
            return self._converted(float)
        raise _conversion_error(sys._getframe(1), _FLOAT_MESSAGE, "a plain number")

    def __complex__(self):
        if _integral(self):
            return self._converted(complex)
        raise _conversion_error(sys._getframe(1), _FLOAT_MESSAGE, "a plain number")

    def __int__(self):
        if _integral(self):
            return self._converted(int)
        raise _conversion_error(sys._getframe(1), "int() of a traced value drops its "
                                "derivative; use wnp.floor(x) or x.value if the integer "
                                "really is not differentiated.")

    def __index__(self):
        if _integral(self):
            return self._converted(operator.index)
        raise _conversion_error(sys._getframe(1), "a traced value cannot be used as an index "
                                "or size; use x.value if the integer really is not "
                                "differentiated.")

    def item(self, *args):
        """The Python number inside (``x.item()``, as NumPy's): an explicit request for it,
        like ``x.value``, so its derivative is not followed."""
        return self._converted(_item, *args)

    def _converted(self, how, *args):
        """``how(value, *args)``: a Python number read off this tracer's value."""
        v = self.value
        if isinstance(v, Tracer):
            return v._converted(how, *args)
        return how(v, *args)

    def __hash__(self):
        return id(self)

    def __array__(self, dtype=None, copy=None):
        # a mask, counts, or integers asked for (np.asarray(x, dtype=int), as x.astype(int)):
        # no derivative to lose, NumPy's array of them (guarded under tracing)
        if _integral(self) or (dtype is not None and np.dtype(dtype).kind in "biu"):
            return self._converted(_as_array, dtype, copy)
        raise _conversion_error(sys._getframe(1), _ARRAY_MESSAGE, "a plain NumPy array")

    # -- installed by wengert._dispatch: NEP 13 / NEP 18 and the Python operators (each
    # -- leading to a primitive), and what a conversion error says about the SciPy
    # -- function that converted, if one did
    @staticmethod
    def _conversion_message(frame, generic, into):
        return generic


def _integral(x):
    """Whether a tracer's value is boolean or integer: no derivative to lose."""
    return x.dtype.kind in "biu"


def _item(v, *args):
    return np.asarray(v).item(*args)


def _as_array(v, dtype, copy):
    return np.array(v, dtype=dtype, copy=copy)


def _conversion_error(frame, generic, into=None):
    """The ``TypeError`` for a traced value converted to a plain one in ``frame``: ``a[i] = x``
    into a plain array, a SciPy function (``into`` names what it wanted), or ``generic``."""
    code = frame.f_code.co_code
    if 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] == _STORE_SUBSCR:
        err = TypeError(_STORE_MESSAGE)
        err.stored = True  # NumPy wraps it in its own ValueError: see plain_store_errors
        return err
    if into is None:
        return TypeError(generic)
    return TypeError(Tracer._conversion_message(frame, generic, into))


_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]
_STORE_MESSAGE = (
    "a[i] = v put a traced value v into a plain NumPy array a, which can hold only plain "
    "numbers: v's derivative would be lost. Make the array traced, and the assignment works "
    "and is differentiated: a = wnp.zeros(n, like=v), or a = wnp.zeros_like(x) for a traced "
    "x (np.zeros_like(x) and np.copy(x) of a traced x are traced too); or build the array "
    "from traced values with wnp.stack([...]).")


def plain(x):
    """The primal under every trace (a tracer's ``.value``, until it is not a tracer)."""
    while isinstance(x, Tracer):
        x = x.value
    return x


def holds_tracer(seq):
    """Whether a (nested) list or tuple holds a traced value."""
    for x in seq:
        if isinstance(x, Tracer) or (type(x) in (list, tuple) and holds_tracer(x)):
            return True
    return False


def lift(x):
    """``x``; a (nested) list or tuple holding traced values becomes the traced array NumPy
    would make of it (``wnp.asarray``), so ``wnp.f([x, 2 * x])`` is differentiated where
    NumPy's conversion would call ``__array__`` and drop the derivative."""
    if (type(x) is list or type(x) is tuple) and holds_tracer(x):
        return _NESTED_ARRAY[0](x)
    return x


# how a list holding tracers becomes one traced array: rules/creation.py installs wnp.asarray
_NESTED_ARRAY = [lambda x: x]


def plain_store_errors(fn):
    """``fn`` (a transform's entry), raising wengert's ``TypeError`` for ``a[i] = x`` into a
    plain array where NumPy raises "setting an array element with a sequence" (it catches
    the conversion's error and keeps it only as the cause, since a tracer is indexable)."""
    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as e:
            cause = e.__cause__
            if getattr(cause, "stored", False):
                raise TypeError(str(cause)).with_traceback(e.__traceback__) from None
            raise
    return entry


_FLOAT_MESSAGE = (
    "float() or a math.* function was called on a traced value, which would drop "
    "its derivative. Use wengert.numpy instead (e.g. wnp.sin(x) for math.sin(x)), "
    "or x.value for the plain number without its derivative. If it was stored into a "
    "plain NumPy array (a[i] = x), build the array from traced values with "
    "wnp.stack([...]) or wnp.array([...]), or assign into a traced array instead "
    "(e.g. a = wnp.zeros(n, like=x); a[i] = x).")
_ARRAY_MESSAGE = (
    "a traced value was converted to a plain NumPy array, which would drop its "
    "derivative. Call the wengert.numpy function (wnp.*) or use x.value. To fill an "
    "array with traced values use wnp.stack([...]) / wnp.array([...]), or assign "
    "into a traced array (a = wnp.zeros(n, like=x); a[i] = x). A NumPy function given a "
    "list holding traced values (np.array([x, y]), np.sin([x, y])) converts the list itself: "
    "NumPy dispatches on its arguments, not on what a list holds, so call wengert.numpy's "
    "(wnp.array([x, y]), wnp.sin([x, y]), wnp.r_[x, y]), which stack it.")


# -- input checks ------------------------------------------------------------------------------
def leaf_dtype(x):
    """The dtype of ``x``'s plain value (``None`` for what has none)."""
    while isinstance(x, Tracer):
        x = x.value
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(bool)
    if isinstance(x, int):
        return np.dtype(int)
    if isinstance(x, float):
        return np.dtype(float)
    if isinstance(x, complex):
        return np.dtype(complex)
    return getattr(x, "dtype", None)


def check_differentiable(x, what):
    """Raise ``TypeError`` unless ``x`` is a float or complex (array); ``what`` names it.

    ``what`` may be a function giving the name, so it costs nothing unless needed.
    """
    if type(x) is float or (type(x) is np.ndarray and x.dtype.kind == "f"):
        return  # the common cases, quickly
    if isinstance(x, Tracer):  # nested transforms: an outer tracer, which must be live
        check_live(x, lambda: f"passed to {what() if callable(what) else what}")
    check_library(x, what)  # an array wengert cannot keep in its own library
    dt = leaf_dtype(x)
    if dt is None or dt.kind not in "fc":
        if callable(what):
            what = what()
        kind = "bool" if dt == np.dtype(bool) else (
            "integer" if dt is not None and np.issubdtype(dt, np.integer) else type(x).__name__)
        raise TypeError(
            f"{what} is of {kind} type ({x!r:.60}); only floats and float or complex arrays "
            f"can be differentiated. Pass a float (e.g. 2.0 instead of 2) or cast with "
            f"np.asarray(x, dtype=float).")


class Primitive:
    """One primitive: its value on plain NumPy, and its rules.

    Value and rules are declared together, in one place, and every engine reads
    this record.  Call it like the function it wraps::

        @wg.primitive
        def softplus(x):
            return np.logaddexp(0.0, x)

    The facts engines and tests read are keywords, and attributes after (docs/rules.md):
    ``broadcasting`` (elementwise over broadcast arguments: cotangents are summed back to
    each argument's shape), ``multiple_results``, ``nargs`` (how many leading positional
    arguments are arrays), ``linear`` (``f(a x + b y) = a f(x) + b f(y)`` in its array
    arguments), ``bilinear`` (linear in each of its two), ``nondiff`` (not differentiated:
    its derivative is zero), ``domain`` (where generated tests sample it), ``ufunc`` (the
    NumPy ufunc it computes: it then takes NumPy's keywords, ``dtype=``...), ``sparsity``
    (which result elements depend on which argument elements: rules/patterns.py), ``batch``
    (how ``wg.vmap`` maps it: wengert/batching.py), ``lowering`` (how compiled code writes it:
    a ``rules.lowering.Lowering`` of its operator, Numba forms, element role; None: a call).
    """

    def __init__(self, impl, name=None, *, broadcasting=False, multiple_results=False,
                 nargs=None, linear=False, bilinear=False, nondiff=False, domain=None,
                 ufunc=None, sparsity=None, batch=None, lowering=None):
        self.impl = impl
        # positional arguments past ``nargs`` are static parameters, passed to rules by name
        self.nargs, self._static_names = _array_arity(impl, nargs)
        self.name = name or getattr(impl, "__name__", "primitive")
        self.__name__ = self.name
        self.__qualname__ = getattr(impl, "__qualname__", self.name)
        self.__doc__ = getattr(impl, "__doc__", None)
        self.__module__ = getattr(impl, "__module__", None)
        self.broadcasting = broadcasting
        self.multiple_results = multiple_results
        self.fast_partials = None  # a Partials record when declared by partials
        self._frule = self._rrule = None
        self._symbolic_zeros = False
        self._rrule_needs = False
        self.linear = linear
        self.bilinear = bilinear
        self._nondiff = False
        self.nondiff = nondiff
        self.domain = domain
        self.ufunc = ufunc
        # how its results depend on its arguments, structurally (rules/patterns.py); None:
        # every element on every element, which sparsity detection treats as dense
        self.sparsity = sparsity
        # how wg.vmap maps it: "elementwise", "linear", "axis", ("stacked", core ranks...) or
        # a rule (wengert/batching.py); None: read off the facts above, else a loop
        self.batch, self.lowering = batch, lowering  # lowering: rules/lowering.py

    def __repr__(self):
        return f"<wengert primitive {self.name}>"

    def __reduce__(self):
        return self.__qualname__

    @property
    def nondiff(self):
        """Not differentiated: a zero derivative in every argument (a symbolic zero, so no
        work in any engine).  Setting it true declares that rule."""
        return self._nondiff

    @nondiff.setter
    def nondiff(self, value):
        self._nondiff = bool(value)
        if value:
            self.fast_partials = _NO_PARTIALS
        elif self.fast_partials is _NO_PARTIALS:
            self.fast_partials = None

    # -- dispatch ---------------------------------------------------------------
    def __call__(self, *args, **params):
        ufunc = self.ufunc
        if ufunc is not None and (params or len(args) > ufunc.nin):
            if len(args) > ufunc.nin:  # np.negative(x, out): the outputs, by position
                outs = args[ufunc.nin:]
                args, params = args[:ufunc.nin], dict(params, out=outs)
            return self.call_with_ufunc_keywords(args, params)
        if self.nargs is not None and len(args) > self.nargs:
            args, params = self._split_static(args, params)
        top = None
        for a in args:
            if isinstance(a, Tracer):
                tr = a._trace
                if top is None or tr.level > top.level:
                    top = tr
            elif (type(a) is list or type(a) is tuple) and holds_tracer(a):
                # wnp.sin([x, 2 * x]): the array NumPy would make of the list, kept traced
                return self(*[lift(b) for b in args], **params)
        if top is None:
            # NumPy's own call where the primitive computes a ufunc: its result types (the
            # engines' impl may be Python's operator, which gives a float for 1.5 + 2.0)
            return (ufunc or self.impl)(*args, **params)
        return top.process(self, args, params)

    def call_with_ufunc_keywords(self, args, kwargs):
        """``wnp.add(x, 1, dtype=np.float32)``: NumPy's keywords on a ufunc's primitive.

        What they mean is NumPy's business: ``wengert._dispatch`` installs this method.
        """
        raise NotImplementedError(f"{self.name}() with NumPy's keywords needs wengert.numpy")

    def _split_static(self, args, params):
        n = self.nargs
        names = self._static_names
        if len(args) - n > len(names):
            raise TypeError(f"{self.name}() takes at most {n + len(names)} positional arguments")
        params = dict(params)
        for name, v in zip(names, args[n:]):
            if name in params:
                raise TypeError(f"{self.name}() got multiple values for argument '{name}'")
            params[name] = v
        return args[:n], params

    # -- declaring rules ----------------------------------------------------------
    def frule(self, fn=None, *, symbolic_zeros=False):
        """Declare the forward rule ``fn(primals, tangents) -> (ans, tangent)``.

        With ``symbolic_zeros=True`` the rule receives ``None`` for arguments that
        are not differentiated; otherwise those tangents arrive as zeros.
        """
        def deco(f):
            self._frule = f
            self._symbolic_zeros = symbolic_zeros
            return f
        return deco(fn) if fn is not None else deco

    def rrule(self, fn=None, *, needs=False):
        """Declare the reverse rule ``fn(*primals) -> (ans, pullback)``.

        With ``needs=True`` the rule is also given ``needs=``, a tuple of bools
        saying which arguments want a cotangent, so it can skip the others.
        """
        def deco(f):
            self._rrule = f
            self._rrule_needs = needs
            return f
        return deco(fn) if fn is not None else deco

    def partials(self, fn=None, *, needs=False):
        """Declare ``fn(ans, *primals) -> tuple of local derivatives``.

        For elementwise functions: both rules follow, ``tangent = sum(p * dx)``
        and ``gx = p * g``.  A partial may be ``None`` (zero).  With ``needs=True``
        the function is also given ``needs=``, a tuple of bools saying which partials
        are used, so it can skip the others (their values are then ignored).
        """
        def deco(f):
            self.fast_partials = Partials(f, needs)
            return f
        return deco(fn) if fn is not None else deco

    def batching(self, fn):
        """Declare the batching rule ``fn(args, batched, **params)``: ``batched[i]`` says
        whether ``args[i]`` carries a leading batch axis; the result carries one (wg.vmap)."""
        self.batch = fn
        return fn

    @property
    def has_frule(self):
        return self._frule is not None or self.fast_partials is not None

    @property
    def has_rrule(self):
        return self._rrule is not None or self.fast_partials is not None

    # -- used by engines ------------------------------------------------------------
    def pushforward(self, primals, tangents, params, plain=False):
        """``(ans, tangent)``; ``tangent`` is ``None`` when it is zero.

        ``plain`` says no primal is traced by another (outer) trace.
        """
        if self.broadcasting:
            tangents = _expand_tangents(primals, tangents)
        fp = self.fast_partials
        if fp is not None:
            ans = self.impl(*primals, **params) if plain else self(*primals, **params)
            if fp.needs:
                params = dict(params, needs=tuple(t is not None for t in tangents))
            ps = _call_partials(fp.fn, ans, primals, params)
            out = tangent_sum(ps, tangents)
            if self.broadcasting:
                out = _fill_tangent(out, ans)
            return ans, out
        fr = self._frule
        if fr is None:
            raise NotImplementedError(
                f"wengert primitive '{self.name}' has no forward rule (frule). "
                f"Declare one with @{self.name}.frule: a function (primals, tangents) -> "
                f"(value, tangent), or use reverse mode (wg.grad / wg.vjp).")
        if not self._symbolic_zeros and any(t is None for t in tangents):
            tangents = [zeros_like_value(p) if t is None else t
                        for p, t in zip(primals, tangents)]
        ans, t = fr(tuple(primals), tuple(tangents), **params)
        if self.broadcasting and not self.multiple_results:
            t = _fill_tangent(t, ans)
        return ans, t

    def pullback_of(self, primals, params, needs, plain=False):
        """``(ans, pullback)``; ``pullback(g)`` gives a tuple (``None`` = zero).

        ``needs[i]`` says whether argument ``i`` wants a cotangent; ``plain`` that
        no primal is traced by another (outer) trace.
        """
        fp = self.fast_partials
        if fp is not None:
            ans = self.impl(*primals, **params) if plain else self(*primals, **params)
            if fp.needs:
                params = dict(params, needs=tuple(needs))
            return ans, fp.pullback(primals, ans, params, self.broadcasting, needs)
        rr = self._rrule
        if rr is None:
            raise NotImplementedError(
                f"wengert primitive '{self.name}' has no reverse rule (rrule). "
                f"Declare one with @{self.name}.rrule: a function (*args) -> "
                f"(value, pullback), or use forward mode (wg.jvp / wg.derivative).")
        if self._rrule_needs:
            ans, pb = rr(*primals, needs=needs, **params)
        else:
            ans, pb = rr(*primals, **params)
        n = len(primals)
        if self.broadcasting:
            return ans, _UnbroadcastPullback(pb, primals, ans, n, needs, self.name)
        return ans, _CheckedPullback(pb, n, self.name)


class Partials:
    """``Primitive.fast_partials``: the partials a primitive was declared by, for engines.

    An engine may take such a primitive (``x * y``, ``sin(x)``) in fewer calls than
    ``pushforward`` / ``pullback_of`` do, by this record; it is the same rule:

    * ``fn(ans, *primals, **params)`` gives one local derivative per argument (``None``
      for a zero); when ``needs`` is true it also takes ``needs=``, a tuple of bools
      saying which partials are used.
    * ``pullback(primals, ans, params, broadcasting, needs)`` is the reverse rule's
      pullback, ``g -> cotangents``, each summed back to its argument's shape when
      ``broadcasting``; ``params`` are what ``fn`` is called with.
    """

    __slots__ = ("fn", "needs", "pullback")

    def __init__(self, fn, needs=False):
        self.fn, self.needs = fn, needs
        # ``fn`` bound as the class's first argument: called as cheaply as the class itself
        self.pullback = types.MethodType(_PartialsPullback, fn)

    def __repr__(self):
        return f"Partials({self.fn!r}, needs={self.needs})"


def _array_arity(impl, nargs):
    """How many leading positional arguments are arrays, and the static names after them."""
    try:
        sig = inspect.signature(impl)
    except (TypeError, ValueError):
        return nargs, ()
    pos = [p for p in sig.parameters.values()
           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values()):
        return None, ()
    if nargs is None:
        nargs = sum(1 for p in pos if p.default is p.empty)
    return nargs, tuple(p.name for p in pos[nargs:])


def tangent_sum(partials, tangents):
    """``Σ pᵢ·dxᵢ`` with as few new arrays as it takes: a Jacobian's tangents are big.

    A tangent shared by two arguments (``x * x``) is multiplied once, by the summed
    partials; a sum of plain arrays accumulates into the first product, which is new.
    """
    if len(tangents) == 2 and tangents[0] is tangents[1] and tangents[0] is not None:
        p, q = partials
        if p is not None and q is not None:
            return tangents[0] * (p + q)
    out = None
    fresh = False  # whether ``out`` is an array made here, so it may be added into
    for p, t in zip(partials, tangents):
        if p is None or t is None:
            continue
        if p is _MINUS_ONE and out is not None:  # x - y: one subtraction
            if fresh and type(out) is np.ndarray and type(t) is np.ndarray \
                    and t.shape == out.shape and t.dtype == out.dtype:
                out -= t
            else:
                out, fresh = out - t, True
            continue
        term = scaled(t, p)
        if out is None:
            out, fresh = term, term is not t
        elif fresh and type(out) is np.ndarray and type(term) is np.ndarray \
                and term.shape == out.shape and term.dtype == out.dtype:
            out += term
        else:
            out, fresh = out + term, True
    return out


def scaled(t, p):
    """A tangent or cotangent times a partial; exact ones and minus ones cost nothing."""
    if p is _ONE:
        return t
    if p is _MINUS_ONE:
        return -t
    if type(p) is not type(t) and isinstance(p, Tracer):
        return p * t  # the tracer's own operator: its fast path, not NumPy's dispatch
    return _times(t, p)


def _call_partials(pf, ans, primals, params):
    try:
        return pf(ans, *primals, **params)
    except ArithmeticError:
        # Python floats raise where NumPy gives inf or nan (1.0 / 0.0): use NumPy's scalars
        return pf(_np_scalar(ans), *[_np_scalar(p) for p in primals], **params)


def _np_scalar(x):
    return np.float64(x) if type(x) is float else x


class NoDerivative:
    """A partial a rule does not have (a Bessel function's derivative in its order).

    ``None`` would say the derivative is zero, a wrong number. An engine multiplies a partial
    only by a live tangent or cotangent, so a call that does not differentiate that argument
    never touches this one, and a call that does gets ``NotImplementedError``.
    """
    __slots__ = ("message",)

    def __init__(self, fn, arg):
        self.message = (f"{fn} has no wengert derivative with respect to its argument '{arg}' "
                        f"(it is differentiated with respect to the others); pass '{arg}' as a "
                        f"plain number, or declare the rule with @wg.primitive (docs/rules.md).")

    def _fail(self, *args, **kwargs):
        raise NotImplementedError(self.message)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __neg__ = __pow__ = __rpow__ = _fail
    __array__ = __array_ufunc__ = __array_function__ = __float__ = _fail

    def __repr__(self):
        return "NoDerivative()"


ONE = _ONE = 1.0  # a partial that *is* this object is an exact 1: no multiplication needed
MINUS_ONE = _MINUS_ONE = -1.0  # and this one an exact -1: a negation, or a subtraction


class _PartialsPullback:
    __slots__ = ("pf", "primals", "ans", "params", "broadcasting", "needs")

    def __init__(self, pf, primals, ans, params, broadcasting, needs):
        self.pf, self.primals, self.ans, self.params = pf, primals, ans, params
        self.broadcasting, self.needs = broadcasting, needs

    def __call__(self, g):
        ps = _call_partials(self.pf, self.ans, self.primals, self.params)
        out = []
        for p, x, need in zip(ps, self.primals, self.needs):
            if p is None or not need:
                out.append(None)
                continue
            gx = scaled(g, p)
            out.append(_unbroadcast(gx, x, self.ans) if self.broadcasting else gx)
        return out


def _no_derivative(ans, *primals, **params):
    return (None,) * len(primals)


_NO_PARTIALS = Partials(_no_derivative)  # what ``nondiff`` declares: every partial is zero


class _CheckedPullback:
    __slots__ = ("pb", "n", "name")

    def __init__(self, pb, n, name):
        self.pb, self.n, self.name = pb, n, name

    def __call__(self, g):
        return self._checked(self.pb(g))

    def _checked(self, cts):
        if not isinstance(cts, (tuple, list)):
            if self.n == 1:
                return (cts,)
        elif len(cts) == self.n:
            return cts
        raise ValueError(f"the pullback of '{self.name}' must return {self.n} cotangent(s), "
                         f"one per argument (None for no derivative)")


class _UnbroadcastPullback(_CheckedPullback):
    __slots__ = ("primals", "ans", "needs")

    def __init__(self, pb, primals, ans, n, needs, name=""):
        super().__init__(pb, n, name)
        self.primals, self.ans, self.needs = primals, ans, needs

    def __call__(self, g):
        cts = self.pb(g)
        if type(cts) is not tuple or len(cts) != self.n:
            cts = self._checked(cts)
        ans = self.ans
        return [None if c is None or not need else _unbroadcast(c, x, ans)
                for c, x, need in zip(cts, self.primals, self.needs)]


def primitive(fn=None, *, name=None, broadcasting=False, multiple_results=False, nargs=None,
              linear=False, bilinear=False, nondiff=False, domain=None, ufunc=None,
              sparsity=None, batch=None, lowering=None):
    """Make ``fn`` (plain NumPy in, plain NumPy out) a differentiable primitive.

    Use ``@wg.primitive`` or ``@wg.primitive(broadcasting=True)``, then declare
    ``@f.rrule`` and/or ``@f.frule`` (or ``@f.partials`` for elementwise
    functions).  The rules are written with ``wengert.numpy`` operations, so they
    are differentiable again.  The keywords are :class:`Primitive`'s facts
    (``broadcasting``, ``linear``, ``nondiff``...; docs/rules.md).

    Leading positional parameters without defaults are the (differentiable)
    arrays; ``nargs`` overrides that count.  Later positional arguments are
    static parameters, handed to the rules as keywords.
    """
    def make(f):
        return Primitive(f, name=name, broadcasting=broadcasting,
                         multiple_results=multiple_results, nargs=nargs, linear=linear,
                         bilinear=bilinear, nondiff=nondiff, domain=domain, ufunc=ufunc,
                         sparsity=sparsity, batch=batch, lowering=lowering)
    return make(fn) if fn is not None else make
