"""The rule record every engine reads: ``Primitive``, a primitive's value, rules and facts.

A record is closed (``__slots__``) and sealed once declared: every fact is a keyword of its
one declaration (``FACTS``), read by engines as a plain attribute, never probed with
``getattr`` nor assigned later; rules are declared by its decorators. One linearity fact
(``linear=``) gives the default forward rule here, and Taylor's, vmap's and sparsity's linear
cases where those engines read it. The tracer protocol (``Trace``, ``Tracer``) is
``wengert.tracing``'s, re-exported here.

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

A tangent or cotangent has its primal's shape: it carries no batch axes.  Several
directions at once (a Jacobian, a Hessian, a sparse Jacobian's colours) are ``wg.vmap``
over ``jvp`` or over a pullback, as in JAX: the tangents are then ``BatchTracer`` values,
each one direction, and ``wengert.batching`` maps every primitive they meet by its
``batch`` fact.  A rule is therefore written for one direction, and never looks for a
batch axis.  The broadcasting bookkeeping (summing cotangents back to an argument's
shape) is done here, once, for every primitive declared ``broadcasting=True``.

Engines (forward, reverse, graph) subclass :class:`Trace` and the namespace floor's
``wengert._dispatch.ArrayTracer`` (a :class:`Tracer` with NumPy's protocols: Python
operators, ndarray methods, NEP 13/18); they never name a primitive.  Rules never import an
engine.  Neither does this module name a primitive: the array bookkeeping it needs
(``wengert.arrays``, stacking a list of tracers, a ufunc's keywords) reaches primitives
through those protocols of the tracers it is given.
"""
from __future__ import annotations

import importlib
import inspect
import sys
import types
import weakref

import numpy as np

from .arrays import (check_library, fill_tangent as _fill_tangent, ndim_of, shape_of,
                     times as _times, unbroadcast as _unbroadcast, zeros_like_value)
from .tracing import (DEAD_LEVEL, EscapedTracerError, SolverWarning, Trace, Tracer,
                      check_differentiable, check_live, holds_tracer, leaf_dtype, lift,
                      new_level, plain, plain_store_errors)

__all__ = ["Primitive", "primitive", "Partials", "Tracer", "Trace", "EscapedTracerError",
           "SolverWarning", "new_level", "shape_of", "ndim_of", "check_differentiable", "check_live",
           "leaf_dtype", "NoDerivative", "plain", "holds_tracer", "lift", "plain_store_errors",
           "DEAD_LEVEL", "tangent_sum", "scaled", "ONE", "MINUS_ONE", "LINEARITIES",
           "UFUNC_NAMES", "without_ufunc_keywords"]


# The degrees of linearity a primitive may declare (``linear=``), and what each gives:
# "linear"    f(a x + b y) = a f(x) + b f(y) jointly in its array arguments: its pushforward is
#             itself applied to the tangents (the default frule), Taylor coefficients map one
#             by one, wg.vmap maps a batch of tangents through it, its Hessian is zero;
# "bilinear"  linear in each of its two array arguments (multiply, matmul): Taylor's Cauchy
#             product, a Hessian that pairs the two arguments only;
# "piecewise" linear on each piece of a partition (abs, maximum, where, clip): a zero Hessian
#             wherever it has one, and nothing else.
LINEARITIES = (None, "linear", "bilinear", "piecewise")

# the facts of a record other than its rules; each is a keyword of ``Primitive``/``primitive``
FACTS = ("broadcasting", "multiple_results", "nargs", "linearity", "nondiff", "domain", "ufunc",
         "sparsity", "batch", "identity_when", "impure", "lowering")

# what a sealed record lets be assigned: its rules (what the decorators declare; a test may
# wrap one)
_RULES = ("fast_partials", "_frule", "_rrule", "_symbolic_zeros", "_rrule_needs")
_ASSIGNABLE = frozenset(_RULES)
_KEYWORD = {"linearity": "linear", "bilinear": "linear"}  # the keyword declaring a fact


class _PerRecord(str):
    """``Primitive.__doc__`` / ``__module__``: the class's own string on the class, the
    record's (its ``impl``'s) on a record, so help() and pickle see a function's."""

    def __new__(cls, value, slot):
        s = str.__new__(cls, value or "")
        s.slot = slot
        return s

    def __get__(self, obj, cls=None):
        return self if obj is None else getattr(obj, self.slot)


class Primitive:
    """One primitive: its value on plain NumPy, and its rules.

    Value and rules are declared together, in one place, and every engine reads
    this record.  Call it like the function it wraps::

        @wg.primitive
        def softplus(x):
            return np.logaddexp(0.0, x)

    Its facts are keywords of the declaration, read-only afterwards (docs/rules.md):
    ``broadcasting`` (elementwise over broadcast arguments: cotangents are summed back to
    each argument's shape), ``multiple_results``, ``nargs`` (how many leading positional
    arguments are arrays), ``linear`` (``True``, ``"bilinear"`` or ``"piecewise"``:
    ``LINEARITIES``; ``bilinear=True`` is ``linear="bilinear"``), ``nondiff`` (not
    differentiated: its derivative is zero), ``domain`` (where generated tests sample it),
    ``ufunc`` (the NumPy ufunc it computes: it then takes NumPy's keywords, ``dtype=``...),
    ``sparsity`` (which result elements depend on which argument elements:
    rules/patterns.py), ``batch`` (how ``wg.vmap`` maps it: wengert/batching.py),
    ``identity_when`` (when it returns its one operand unchanged: ``True``, whenever the
    result keeps the operand's shape and dtype, or a predicate ``when(x, **params)``; a
    rewrite declared with the primitive, not known to an engine), ``impure`` (never folded
    into a constant), ``lowering`` (how compiled code writes it: a ``rules.lowering.Lowering``
    of its operator, Numba forms, element role; None: a call). Rules are declared by
    decorators after it (``@p.frule``, ``@p.rrule``, ``@p.partials``, ``@p.batching``), the
    documented way; a fact is never assigned later, so
    what an engine reads is what the declaration says.
    """

    __slots__ = ("impl", "nargs", "_static_names", "name", "__name__", "__qualname__", "_doc",
                 "_module", "__weakref__", "broadcasting", "multiple_results", "linearity",
                 "nondiff", "domain", "ufunc", "sparsity", "batch", "identity_when", "impure",
                 "lowering", "fast_partials", "_frule", "_rrule", "_symbolic_zeros",
                 "_rrule_needs", "_sealed")

    def __init__(self, impl, name=None, *, broadcasting=False, multiple_results=False,
                 nargs=None, linear=False, bilinear=False, nondiff=False, domain=None,
                 ufunc=None, sparsity=None, batch=None, identity_when=None, impure=False,
                 lowering=None):
        self.impl = impl
        # positional arguments past ``nargs`` are static parameters, passed to rules by name
        self.nargs, self._static_names = _array_arity(impl, nargs)
        self.name = name or getattr(impl, "__name__", "primitive")
        self.__name__ = self.name
        self.__qualname__ = getattr(impl, "__qualname__", self.name)
        self._doc = getattr(impl, "__doc__", None)
        self._module = getattr(impl, "__module__", None)
        self.broadcasting = broadcasting
        self.multiple_results = multiple_results
        self.linearity = _linearity(linear, bilinear, self.name)
        # not differentiated: a zero derivative in every argument (a symbolic zero, so no work in
        # any engine); declaring it declares that rule
        self.nondiff = bool(nondiff)
        # a Partials record when declared by partials; nondiff declares them all zero
        self.fast_partials = _NO_PARTIALS if nondiff else None
        self._frule = None
        self._rrule = None
        self._symbolic_zeros = False
        self._rrule_needs = False
        self.domain = domain
        self.ufunc = ufunc
        # how its results depend on its arguments, structurally (rules/patterns.py); None:
        # every element on every element, which sparsity detection treats as dense
        self.sparsity = sparsity
        # how wg.vmap maps it: "elementwise", "axis", ("stacked", core ranks...) or
        # a rule (wengert/batching.py); None: read off the facts above, else a loop
        self.batch = batch
        # when it returns its one operand unchanged (graph simplification drops it then, if
        # the result keeps the operand's shape and dtype): True, or ``when(x, **params)``
        self.identity_when = identity_when
        self.impure = impure
        self.lowering = lowering
        self._sealed = True

    def __setattr__(self, name, value):
        if getattr(self, "_sealed", False) and name not in _ASSIGNABLE:
            raise AttributeError(
                f"primitive '{self.name}': '{name}' is a fact of its declaration, read-only "
                f"afterwards; pass it as a keyword where it is declared "
                f"(wg.primitive(..., {_KEYWORD.get(name, name.lstrip('_'))}=...)), or declare "
                f"a rule with "
                f"@{self.name}.frule / .rrule / .partials / .batching (docs/rules.md)")
        object.__setattr__(self, name, value)

    def _declare(self, **rules):
        """What the rule decorators set: the record's rules, not its facts."""
        for k, v in rules.items():
            object.__setattr__(self, k, v)

    def __repr__(self):
        return f"<wengert primitive {self.name}>"

    def __reduce__(self):
        # by reference, as pickle saves functions: under its own module and name when that
        # finds it (a user's @primitive), else where wengert publishes it (wnp.sin's impl is
        # numpy.sin, not the primitive)
        where = _published_as(self)
        return self.__qualname__ if where is None else (_published, where)

    @property
    def linear(self):
        """``f(a x + b y) = a f(x) + b f(y)`` in its array arguments (``linearity``)."""
        return self.linearity == "linear"

    @property
    def bilinear(self):
        """Linear in each of its two array arguments (``linearity == "bilinear"``)."""
        return self.linearity == "bilinear"

    @property
    def sealed(self):
        """Whether its facts are fixed (always, once declared)."""
        return getattr(self, "_sealed", False)


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
        """``wnp.add(x, 1, dtype=np.float32)``: a ufunc's primitive called with NumPy's keywords.

        On plain values it is NumPy's own call (``out=`` included); on traced values the
        keywords are applied as ``np.add(x, 1, dtype=...)`` on a traced value is.
        """
        ufunc = self.ufunc
        if not any(isinstance(a, Tracer) for a in args):
            return ufunc(*args, **kwargs)
        name = UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
        if kwargs.get("out") is not None:
            raise NotImplementedError(
                f"wnp.{name} with out= on a traced value has no wengert rule (it writes in "
                "place); call it without out=.")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        args, _ = without_ufunc_keywords(ufunc, name, args, kwargs)
        return self(*args)

    def _split_static(self, args, params):
        n = self.nargs
        names = self._static_names
        if not params and len(args) == n + 1 and names:  # p(x, idx): the usual one static
            return args[:n], {names[0]: args[n]}
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
            self._declare(_frule=f, _symbolic_zeros=symbolic_zeros)
            return f
        return deco(fn) if fn is not None else deco

    def rrule(self, fn=None, *, needs=False):
        """Declare the reverse rule ``fn(*primals) -> (ans, pullback)``.

        With ``needs=True`` the rule is also given ``needs=``, a tuple of bools
        saying which arguments want a cotangent, so it can skip the others.
        """
        def deco(f):
            self._declare(_rrule=f, _rrule_needs=needs)
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
            self._declare(fast_partials=Partials(f, needs))
            return f
        return deco(fn) if fn is not None else deco

    def batching(self, fn):
        """Declare the batching rule ``fn(args, batched, **params)``: ``batched[i]`` says
        whether ``args[i]`` carries a leading batch axis; the result carries one (wg.vmap)."""
        self._declare(batch=fn)
        return fn

    @property
    def has_frule(self):
        return self._frule is not None or self.fast_partials is not None or self.linear

    @property
    def has_rrule(self):
        return self._rrule is not None or self.fast_partials is not None

    @property
    def frule_declared(self):
        """Whether its forward rule was declared (``@p.frule``), not derived (from partials,
        or from ``linear``: itself on the tangents, one tangent at a time)."""
        return self._frule is not None

    @property
    def symbolic_zeros(self):
        """Whether ``jvp_rule`` takes ``None`` (a zero) for a tangent as it is."""
        return self._symbolic_zeros or (self._frule is None and self.linear)

    # -- the declared rules, for whoever transforms them (source mode) ------------------
    def jvp_rule(self, primals, tangents, **params):
        """``(ans, tangent)`` by the declared forward rule: the ``@p.frule``, else, for a
        linear primitive, itself applied to the tangents. A ``None`` tangent is a zero,
        passed on as is when ``symbolic_zeros``, else as zeros. Partials are not a forward
        rule here: ``fast_partials`` gives them."""
        fr = self._frule
        if fr is None:
            if not self.linear:
                raise NotImplementedError(
                    f"wengert primitive '{self.name}' has no forward rule (frule). Declare one "
                    f"with @{self.name}.frule: a function (primals, tangents) -> (value, "
                    f"tangent), or use reverse mode (wg.grad / wg.vjp).")
            return self._linear_pushforward(tuple(primals), tuple(tangents), params)
        if not self._symbolic_zeros and any(t is None for t in tangents):
            tangents = [zeros_like_value(p) if t is None else t
                        for p, t in zip(primals, tangents)]
        return fr(tuple(primals), tuple(tangents), **params)

    def vjp_rule(self, *primals, needs=None, **params):
        """``(ans, pullback)`` by the declared ``@p.rrule``; ``needs`` (which arguments want a
        cotangent) is passed on when the rule was declared to take it. ``pullback(g)`` gives
        what the rule wrote: not yet summed back to broadcast arguments' shapes."""
        rr = self._rrule
        if rr is None:
            raise NotImplementedError(
                f"wengert primitive '{self.name}' has no reverse rule (rrule). "
                f"Declare one with @{self.name}.rrule: a function (*args) -> "
                f"(value, pullback), or use forward mode (wg.jvp / wg.derivative).")
        if self._rrule_needs:
            return rr(*primals, needs=(True,) * len(primals) if needs is None else needs,
                      **params)
        return rr(*primals, **params)

    def _linear_pushforward(self, primals, tangents, params):
        """A linear primitive's pushforward: itself, applied to the tangents (zeros where
        none: it is linear jointly in its array arguments; an index is a static parameter)."""
        ans = self(*primals, **params)
        if all(t is None for t in tangents):
            return ans, None
        args = [zeros_like_value(p) if t is None else t for p, t in zip(primals, tangents)]
        return ans, self(*args, **params)

    # -- used by engines ------------------------------------------------------------
    def pushforward(self, primals, tangents, params, plain=False):
        """``(ans, tangent)``; ``tangent`` is ``None`` when it is zero.

        ``plain`` says no primal is traced by another (outer) trace.
        """
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
        ans, t = self.jvp_rule(primals, tangents, **params)
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
        ans, pb = self.vjp_rule(*primals, needs=needs, **params)
        n = len(primals)
        if self.broadcasting:
            return ans, _UnbroadcastPullback(pb, primals, ans, n, needs, self.name)
        return ans, _CheckedPullback(pb, n, self.name)


Primitive.__doc__ = _PerRecord(Primitive.__doc__, "_doc")
Primitive.__module__ = _PerRecord(__name__, "_module")


# wengert.numpy's names of the ufuncs whose NumPy names differ
UFUNC_NAMES = {"true_divide": "divide", "absolute": "absolute", "conjugate": "conj"}


def without_ufunc_keywords(ufunc, name, inputs, kwargs):
    """The arithmetic primitives are Python's operators, which take no ufunc keywords:
    NumPy checks them (on empty arrays of the inputs' dtypes, so its errors are its own),
    ``dtype=`` casts the inputs first (``astype``, the tracers' method), as NumPy's loop does,
    and the rest change nothing for a call without ``out=``."""
    where = kwargs.get("where", True)
    if where is not True:
        raise NotImplementedError(
            f"numpy.{name} with where= on a traced value: without out= the unselected "
            f"entries are uninitialised memory. Use wnp.where(cond, wnp.{name}(...), other).")
    probe = [np.empty(0, _dtype(x)) if isinstance(x, (Tracer, np.ndarray)) else x
             for x in inputs]
    dt = ufunc(*probe, **kwargs).dtype  # NumPy's checks (casting=, dtype=, signature=)
    if "dtype" in kwargs or "signature" in kwargs:
        inputs = [x.astype(dt) if isinstance(x, Tracer) and _dtype(x) != dt else
                  np.asarray(x).astype(dt) if _dtype(x) != dt else x for x in inputs]
    return inputs, {}


def _dtype(x):
    return np.asarray(plain(x)).dtype


def _linearity(linear, bilinear, name):
    """The one linearity fact, from the keywords (``bilinear=True`` is ``linear="bilinear"``)."""
    if bilinear:
        if linear not in (False, None, "bilinear"):
            raise ValueError(f"primitive '{name}': linear={linear!r} and bilinear=True; "
                             f"declare one of them")
        return "bilinear"
    if linear is True:
        return "linear"
    if linear is False or linear is None:
        return None
    if linear not in LINEARITIES:
        raise ValueError(f"primitive '{name}': linear={linear!r}; declare True, 'bilinear' or "
                         f"'piecewise' (or leave it out)")
    return linear



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


def primitive(fn=None, *, name=None, **facts):
    """Make ``fn`` (plain NumPy in, plain NumPy out) a differentiable primitive.

    Use ``@wg.primitive`` or ``@wg.primitive(broadcasting=True)``, then declare
    ``@f.rrule`` and/or ``@f.frule`` (or ``@f.partials`` for elementwise
    functions).  The rules are written with ``wengert.numpy`` operations, so they
    are differentiable again.  The keywords are :class:`Primitive`'s facts
    (``broadcasting``, ``linear``, ``nondiff``, ``sparsity``...; docs/rules.md).

    Leading positional parameters without defaults are the (differentiable)
    arrays; ``nargs`` overrides that count.  Later positional arguments are
    static parameters, handed to the rules as keywords.
    """
    def make(f):
        return Primitive(f, name=name, **facts)
    return make(fn) if fn is not None else make


def _published(module, name):
    """The primitive pickled as ``(module, name)`` (:meth:`Primitive.__reduce__`)."""
    return getattr(importlib.import_module(module), name)


def _published_as(prim):
    """``None`` when pickle finds ``prim`` under its own module and qualified name; else the
    ``(module, name)`` of a loaded wengert module holding it, the shortest module name first
    (``wengert.numpy`` before the rules module that declares it)."""
    mod = sys.modules.get(prim._module or "")
    if mod is not None and getattr(mod, prim.__qualname__, None) is prim:
        return None
    where = _published_cache.get(prim)
    if where is not None and getattr(sys.modules.get(where[0]), where[1], None) is prim:
        return where
    where = _find_published(prim)
    if where is not None:
        _published_cache[prim] = where
    return where


# a pickled primitive's (module, name): found once by a walk over every loaded wengert module,
# then checked (one getattr) on each pickle
_published_cache = weakref.WeakKeyDictionary()


def _find_published(prim):
    for name in sorted((m for m in list(sys.modules) if m == "wengert" or
                        m.startswith("wengert.")), key=lambda m: (m.count("."), m)):
        module = sys.modules.get(name)
        for attr, value in list(getattr(module, "__dict__", {}).items()):
            if value is prim and not attr.startswith("_"):
                return name, attr
    return None
