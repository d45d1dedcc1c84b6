"""What a JAX user reaches for beyond grad: ``jacfwd``/``jacrev``, ``stop_gradient`` and
user-defined derivatives, ``custom_vjp`` and ``custom_jvp``.

A custom function is a :class:`~wengert.core.Primitive` made on the fly, one per decorated
function: its value runs the function's body on plain values, its forward and reverse rules
come from the user's rules, so every engine (``Dual``, ``Tape``, Taylor mode, graph tracing and
compilation, source transformation, checkpointing; sparsity detection traces the body)
handles it as it handles any primitive, with no code of its own.  Its arguments are the leaves of the call's
pytrees (floats and arrays; ints, strings and ``nondiff_argnums`` travel as the static
parameter ``call``), its results the leaves of the output.

* ``custom_vjp``: reverse mode calls ``fwd`` and, in the sweep, ``bwd``; forward and Taylor
  mode differentiate the body.
* ``custom_jvp``: forward mode calls the rule; Taylor mode evaluates it on truncated series,
  which differentiates the rule along the curve (as JAX's ``jet`` does); reverse mode records
  the rule's tangent computation on a tape of its own, linear in the tangents, and sweeps it
  backwards: the transpose.

Rules written with ``wengert.numpy`` operations are differentiable again, so derivatives of
derivatives (``hessian``, ``grad`` of ``grad``) go through them.
"""
from __future__ import annotations

import functools
import inspect

from .arrays import shape_of, zeros_like_value
from .batching import BatchedControlFlowError, per_example_call
from .core import Primitive, Tracer, new_level, primitive
from .forward import Dual, ForwardTrace
from .reverse import Tape, Var
from ._pickling import importable, travels
from ._validate import check_argnums
from .transforms import _jacobian
from .tree import LEAF, flatten, unflatten

__all__ = ["jacfwd", "jacrev", "stop_gradient", "custom_vjp", "custom_jvp"]


# -- jacfwd, jacrev -------------------------------------------------------------------------------
def jacfwd(f, argnums=0, *, holomorphic=False):
    """The Jacobian by forward mode: ``wg.jacobian(f, argnums, mode="forward")``.

    Every input direction is pushed at once (batched tangents): the cheaper mode when
    inputs are fewer than outputs.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> wg.jacfwd(lambda x: wnp.sin(x) * x[0])(np.array([0.0, 1.0]))
    array([[0.        , 0.        ],
           [0.84147098, 0.        ]])
    """
    return travels(_jacobian(f, argnums, "forward", "wg.jacfwd", holomorphic=holomorphic),
                   jacfwd, f, argnums, holomorphic=holomorphic)


def jacrev(f, argnums=0, *, holomorphic=False):
    """The Jacobian by reverse mode: ``wg.jacobian(f, argnums, mode="reverse")``.

    Every output row is pulled back in one sweep (batched cotangents): the cheaper mode
    when outputs are fewer than inputs.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> wg.jacrev(lambda x, y: x * y, argnums=(0, 1))(np.array([2.0]), np.array([3.0]))
    (array([[3.]]), array([[2.]]))
    """
    return travels(_jacobian(f, argnums, "reverse", "wg.jacrev", holomorphic=holomorphic),
                   jacrev, f, argnums, holomorphic=holomorphic)


# -- stop_gradient --------------------------------------------------------------------------------
@primitive(name="stop_gradient", nondiff=True, batch="elementwise")
def _stop(x):
    return x


def stop_gradient(x):
    """``x``'s value, with a derivative of zero in every engine and at every order.

    ``x`` may be a pytree; plain values pass through unchanged.  The value is a constant to
    every transform, as JAX's ``lax.stop_gradient`` (PyTorch: ``x.detach()``).

    >>> import wengert as wg
    >>> wg.grad(lambda x: x * wg.stop_gradient(x))(3.0)
    3.0
    """
    leaves, d = flatten(x)
    if not any(isinstance(v, Tracer) for v in leaves):
        return x
    return unflatten(d, [_stop(v) if isinstance(v, Tracer) else v for v in leaves])


stop_gradient._nondiff = True  # to source transformation: a value with no derivative


# -- one call of a custom function ------------------------------------------------------------------
_DYN = object()  # the place of a traced leaf among a call's static ones


def _dynamic(x):
    """Leaves that become the primitive's arguments: traced values, floats, arrays."""
    if isinstance(x, (Tracer, float, complex)):
        return True
    if isinstance(x, (bool, int, str, bytes)) or x is None:
        return False
    return hasattr(x, "shape") and hasattr(x, "dtype")


class _Call:
    """The static part of one call (the primitive's parameter ``call``): the arguments'
    structure, their static leaves, the ``nondiff_argnums`` values, and the output's
    structure once the function has run."""

    __slots__ = ("in_def", "slots", "nondiff", "nargs", "out_def")

    def __init__(self, in_def, slots, nondiff, nargs):
        self.in_def, self.slots, self.nondiff, self.nargs = in_def, slots, nondiff, nargs
        self.out_def = None

    def __repr__(self):
        return f"<call with {self.in_def!r}>"

    def diff_args(self, dyn):
        """The differentiable arguments (a tuple) with ``dyn`` at the traced leaves."""
        it = iter(dyn)
        return unflatten(self.in_def, [next(it) if s is _DYN else s for s in self.slots])

    def all_args(self, diff):
        """Every positional argument, the ``nondiff_argnums`` ones put back in place."""
        if not self.nondiff:
            return tuple(diff)
        out, it = [], iter(diff)
        for i in range(self.nargs):
            out.append(self.nondiff[i] if i in self.nondiff else next(it))
        return tuple(out)

    def outputs(self, out, custom, what):
        """The output's leaves; its structure is remembered (and must not change)."""
        leaves, d = flatten(out)
        if self.out_def is None:
            self.out_def = d
        elif d != self.out_def:
            raise ValueError(f"{custom.kind} function '{custom.__name__}': {what} returned an "
                             f"output structured as {d!r}, but the function's is "
                             f"{self.out_def!r}")
        return leaves


class _Custom:
    """What custom_vjp and custom_jvp share: the call taken apart, the primitive, forward
    mode through the body."""

    kind = "custom"

    def __init__(self, fun, nondiff_argnums=()):
        if not callable(fun):
            raise TypeError(f"{self.kind} decorates a function, not {type(fun).__name__}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        nums = check_argnums(nondiff_argnums, self.kind, "nondiff_argnums")
        nums = (nums,) if isinstance(nums, int) else nums
        self.nondiff_argnums = tuple(sorted(set(int(i) for i in nums)))
        name = getattr(fun, "__name__", None)
        name = name if isinstance(name, str) and name.isidentifier() else "custom"

        def impl(*leaves, call):
            return tuple(call.outputs(self.fun(*call.all_args(call.diff_args(leaves))),
                                      self, "the function"))
        impl.__name__ = impl.__qualname__ = name
        self.prim = Primitive(impl, name=name, multiple_results=True, sparsity=_INLINE)

    def __repr__(self):
        return f"<wengert {self.kind} function {self.__name__}>"

    def __reduce__(self):
        """By name where the decorated function is found under its own (plain pickle of a
        module's function); else the function and its rules (cloudpickle of a closure)."""
        if importable(self):
            return self.__qualname__
        return type(self), (self.fun, self.nondiff_argnums), self._rules()  # (the rules last:
        # one made by defjvps refers to this object)

    def __setstate__(self, rules):
        for name, rule in rules.items():
            setattr(self, name, rule)

    def _check_rules(self):  # pragma: no cover - interface
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        self._check_rules()
        if kwargs:
            args = self._positional(args, kwargs)
        nargs = len(args)
        for i in self.nondiff_argnums:
            if i >= nargs:
                raise TypeError(f"{self.kind} function '{self.__name__}' has nondiff_argnums="
                                f"{self.nondiff_argnums} but was called with {nargs} "
                                "positional argument(s)")
            if any(isinstance(v, Tracer) for v in flatten(args[i])[0]):
                raise TypeError(
                    f"{self.kind} function '{self.__name__}': argument {i} is in "
                    "nondiff_argnums but holds a traced value; nondiff_argnums are for values "
                    "that are not differentiated (functions, sizes, flags): pass this one as an "
                    "ordinary argument and return None as its cotangent")
        nondiff = {i: args[i] for i in self.nondiff_argnums}
        diff = tuple(a for i, a in enumerate(args) if i not in nondiff)
        leaves, in_def = flatten(diff)
        if not any(isinstance(v, Tracer) for v in leaves):
            return self.fun(*args)  # nothing traced: the function itself
        slots = [_DYN if _dynamic(v) else v for v in leaves]
        call = _Call(in_def, slots, nondiff, nargs)
        dyn = [v for v, s in zip(leaves, slots) if s is _DYN]
        outs = self.prim(*dyn, call=call)
        self._check_closure(dyn, outs)
        return unflatten(call.out_def, list(outs))

    def _positional(self, args, kwargs):
        try:
            bound = inspect.signature(self.fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{self.kind} function '{self.__name__}': {e}") from None
        if bound.kwargs:
            raise TypeError(f"{self.kind} function '{self.__name__}' got keyword-only "
                            f"arguments {sorted(bound.kwargs)}; custom functions take "
                            "positional arguments (close over constants instead)")
        return bound.args

    def _check_closure(self, dyn, outs):
        """A result holding a value of the trace that made it was computed from a traced
        value the function closed over instead of taking it as an argument: its derivative
        would be lost or counted twice."""
        top = None
        for v in dyn:
            if isinstance(v, Tracer) and (top is None or v._trace.level > top.level):
                top = v._trace
        for o in outs:
            if not (isinstance(o, Tracer) and o._trace is top):
                continue
            v = o.value
            while isinstance(v, Tracer):
                if v._trace is top:
                    raise ValueError(
                        f"{self.kind} function '{self.__name__}' closed over a value that is "
                        "being differentiated (a traced value it was not given as an "
                        "argument); pass that value as an argument")
                v = v.value

    def _error(self, msg):
        return ValueError(f"{self.kind} function '{self.__name__}': {msg}")

    # -- forward mode through the body ------------------------------------------------------------
    def _body_jvp(self, primals, tangents, call):
        """``(outputs, tangents)`` of the body, by dual numbers on a trace of its own."""
        trace = ForwardTrace(new_level())
        ins = [p if t is None else Dual(p, t, trace) for p, t in zip(primals, tangents)]
        try:
            try:
                out = self.fun(*call.all_args(call.diff_args(ins)))
            except NotImplementedError as e:
                raise NotImplementedError(
                    f"{self.kind} function '{self.__name__}': forward mode differentiates its "
                    f"body, which has no forward derivative: {e} Use reverse mode (wg.grad, "
                    "wg.vjp, wg.jacrev), or give it a forward rule with wg.custom_jvp.") from e
            leaves = call.outputs(out, self, "the function")
            vals, tans = [], []
            for o in leaves:
                if isinstance(o, Dual) and o._trace is trace:
                    vals.append(o.value)
                    tans.append(o._tangent)
                else:
                    vals.append(o)
                    tans.append(None)
        finally:
            trace.finish(f"wg.{self.kind}", self.fun)
        return tuple(vals), tuple(tans)


def _user_rule(rule, *args, pair=False):
    """A user's rule, called on one direction.  Under ``wg.jacobian``, ``wg.hessian``,
    ``jvp(batched=True)``, ``sparse_jacobian`` and ``wg.vmap`` that direction is a batched
    value (``wengert.batching``), which NumPy calls map over; a rule that converts it to a
    plain array runs once per example instead (BatchTrace's loop, ``per_example_call``).
    ``pair``: the rule gives ``(out, tangent)``, of which only the tangent is batched."""
    try:
        return rule(*args)
    except BatchedControlFlowError:
        pass
    if not pair:
        return per_example_call(rule, *args)
    first = []

    def tangent(*a):
        res = rule(*a)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            return res  # (the caller says what is wrong with it)
        first[:] = [res[0]]
        return res[1]
    tout = per_example_call(tangent, *args)
    return (first[0], tout) if first else tout


# -- custom_vjp -----------------------------------------------------------------------------------------
class CustomVJP(_Custom):
    """A function whose reverse-mode derivative is given by ``defvjp(fwd, bwd)``."""

    kind = "custom_vjp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.fwd = self.bwd = None
        self.prim.frule(self._jvp, symbolic_zeros=True)
        self.prim.rrule(self._vjp, needs=True)

    def defvjp(self, fwd, bwd):
        """Declare the rule: ``fwd(*args) -> (out, residuals)``, ``bwd(residuals, g) ->``
        one cotangent per argument (``None`` for none); with ``nondiff_argnums``, ``bwd``
        takes those arguments first and returns cotangents for the others only."""
        if not (callable(fwd) and callable(bwd)):
            raise TypeError(f"{self.__name__}.defvjp(fwd, bwd) takes two functions")
        self.fwd, self.bwd = fwd, bwd

    def _rules(self):
        return {"fwd": self.fwd, "bwd": self.bwd}

    def _check_rules(self):
        if self.fwd is None:
            raise NotImplementedError(
                f"custom_vjp function '{self.__name__}' has no rule: declare it with "
                f"{self.__name__}.defvjp(fwd, bwd), fwd(*args) -> (out, residuals) and "
                "bwd(residuals, cotangent) -> one cotangent per argument")

    def _jvp(self, primals, tangents, call):
        return self._body_jvp(primals, tangents, call)

    def _vjp(self, *primals, call, needs):
        self._check_rules()
        diff = call.diff_args(primals)
        res = self.fwd(*call.all_args(diff))
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise self._error("fwd must return a pair (output, residuals)")
        out, residuals = res
        outs = tuple(call.outputs(out, self, "fwd"))
        nondiff = tuple(call.nondiff[i] for i in sorted(call.nondiff))

        def pullback(gs):
            g = unflatten(call.out_def, [zeros_like_value(o) if c is None else c
                                         for o, c in zip(outs, gs)])
            return self._cotangents(_user_rule(self.bwd, *nondiff, residuals, g), diff, call)
        return outs, pullback

    def _cotangents(self, cts, diff, call):
        """bwd's answer, checked, as one entry per traced leaf."""
        n = len(diff)
        if not isinstance(cts, (tuple, list)) or len(cts) != n:
            got = f"{len(cts)} values" if isinstance(cts, (tuple, list)) else \
                type(cts).__name__
            raise self._error(f"bwd must return a tuple of {n} cotangent(s), one per "
                              f"differentiated argument (None for no derivative), got {got}")
        leaves = []
        for i, (c, a) in enumerate(zip(cts, diff)):
            al, ad = flatten(a)
            if c is None:
                leaves.extend([None] * len(al))
                continue
            cl, cd = flatten(c)
            if cd != ad and not (ad is LEAF and len(cl) == 1):
                raise self._error(f"bwd's cotangent {i} is structured as {cd!r}, but the "
                                  f"argument is {ad!r}")
            for x, g in zip(al, cl):
                if g is not None and _dynamic(x) and shape_of(g) != shape_of(x):
                    raise self._error(f"bwd's cotangent {i} has shape {shape_of(g)}, but the "
                                      f"argument has shape {shape_of(x)}")
            leaves.extend(cl)
        return tuple(g for g, s in zip(leaves, call.slots) if s is _DYN)


# -- custom_jvp -----------------------------------------------------------------------------------------
class CustomJVP(_Custom):
    """A function whose forward-mode derivative is given by ``defjvp(rule)``."""

    kind = "custom_jvp"

    def __init__(self, fun, nondiff_argnums=()):
        super().__init__(fun, nondiff_argnums)
        self.rule = None
        self.prim.frule(self._jvp, symbolic_zeros=True)
        self.prim.rrule(self._vjp, needs=True)

    def defjvp(self, rule):
        """Declare ``rule(primals, tangents) -> (out, tangent_out)``, linear in the tangents
        (with ``nondiff_argnums``: ``rule(*those, primals, tangents)``).  Returns ``rule``, so
        it can decorate it."""
        if not callable(rule):
            raise TypeError(f"{self.__name__}.defjvp(rule) takes a function")
        self.rule = rule
        return rule

    def _rules(self):
        return {"rule": self.rule}

    def defjvps(self, *jvps):
        """One rule per argument: ``jvp_i(t_i, ans, *args)`` is the tangent of the output
        along argument ``i``'s tangent ``t_i`` (``None``: no derivative); they are summed."""
        if self.nondiff_argnums:
            raise TypeError(f"{self.__name__}.defjvps does not take nondiff_argnums; use defjvp")

        def rule(primals, tangents):
            if len(jvps) != len(primals):
                raise self._error(f"defjvps got {len(jvps)} rules for {len(primals)} "
                                  "arguments")
            out = self.fun(*primals)
            total = None
            for jvp_i, t in zip(jvps, tangents):
                if jvp_i is not None:
                    term = jvp_i(t, out, *primals)
                    total = term if total is None else _tree_add(total, term)
            return out, _tree_zeros(out) if total is None else total
        self.rule = rule

    def _check_rules(self):
        if self.rule is None:
            raise NotImplementedError(
                f"custom_jvp function '{self.__name__}' has no rule: declare it with "
                f"@{self.__name__}.defjvp on rule(primals, tangents) -> (out, tangent_out)")

    def _apply(self, primals, ts, call):
        """The user's rule on leaves: ``(out leaves, tangent leaves)``."""
        diff = call.diff_args(primals)
        zeros = [zeros_like_value(p) if t is None else t for p, t in zip(primals, ts)]
        tdiff = _tangent_args(diff, call, zeros)
        nondiff = tuple(call.nondiff[i] for i in sorted(call.nondiff))
        res = _user_rule(self.rule, *nondiff, tuple(diff), tuple(tdiff), pair=True)
        if not (isinstance(res, (tuple, list)) and len(res) == 2):
            raise self._error("the jvp rule must return a pair (output, tangent_out)")
        out, tout = res
        outs = call.outputs(out, self, "the jvp rule")
        if tout is None:  # a zero tangent
            return outs, [None] * len(outs)
        tl, td = flatten(tout)
        if td != call.out_def and not (len(outs) == 1 and len(tl) == 1):
            raise self._error(f"the jvp rule's tangent is structured as {td!r}, its output "
                              f"as {call.out_def!r}")
        for o, t in zip(outs, tl):
            if t is not None and shape_of(t) != shape_of(o):
                raise self._error(f"the jvp rule gave a tangent of shape {shape_of(t)} for "
                                  f"an output of shape {shape_of(o)}")
        return outs, tl

    def _jvp(self, primals, tangents, call):
        self._check_rules()
        outs, tl = self._apply(primals, tangents, call)
        return tuple(outs), tuple(tl)

    def _vjp(self, *primals, call, needs):
        """The rule's tangent map, recorded on a tape of its own at zero tangents (it is
        linear in them) and swept backwards: its transpose, with the rule's own operations."""
        self._check_rules()
        tape = Tape()
        try:
            ts = [tape._leaf(zeros_like_value(p)) if need else None
                  for p, need in zip(primals, needs)]
            with tape.active():
                outs, tl = self._apply(primals, ts, call)
            for o in outs:
                if isinstance(o, Var) and o._trace is tape:
                    raise self._error("the jvp rule's output depends on the tangents")
        finally:
            tape.finish(f"wg.{self.kind}", self.fun)

        def pullback(gs):
            seeds = {}
            for t, g in zip(tl, gs):
                if g is None or not (isinstance(t, Var) and t._trace is tape):
                    continue
                seeds[t.index] = g if t.index not in seeds else seeds[t.index] + g
            if not seeds:
                return (None,) * len(primals)
            by = tape.revive()
            try:
                adj = tape.sweep(seeds)
            finally:
                tape.finish(*by)
            return tuple(None if t is None else adj[t.index] for t in ts)
        return tuple(outs), pullback


def _tangent_args(diff, call, dyn_tangents):
    """Tangents shaped like the differentiable arguments: the given ones at the traced
    leaves, zeros at the static numbers (and the static value itself elsewhere)."""
    it = iter(dyn_tangents)
    leaves = []
    for s in call.slots:
        if s is _DYN:
            leaves.append(next(it))
        else:  # an int's tangent is a zero, as JAX's float0; other objects stay themselves
            leaves.append(0.0 if type(s) is int else s)
    return unflatten(call.in_def, leaves)


def _tree_add(a, b):
    al, ad = flatten(a)
    bl, _ = flatten(b)
    return unflatten(ad, [x if y is None else y if x is None else x + y for x, y in zip(al, bl)])


def _tree_zeros(t):
    leaves, d = flatten(t)
    return unflatten(d, [zeros_like_value(x) for x in leaves])


# -- sparsity detection: through the body --------------------------------------------------------
class _Inline:
    """A custom function's sparsity declaration: sparsity detection runs its body on the
    index sets (``inline``), so its pattern is the body's, exact as the body's operations."""

    inline = True
    hessian = None

    def local(self, prim, primals, ans, params, traced):  # pragma: no cover - never asked
        raise AssertionError("an inline declaration is traced through, not asked")


_INLINE = _Inline()


# -- the decorators -----------------------------------------------------------------------------------
def custom_vjp(fun=None, nondiff_argnums=()):
    """Give ``fun`` a reverse-mode derivative of your own, as JAX's ``jax.custom_vjp``.

    Declare it with ``fun.defvjp(fwd, bwd)``: ``fwd(*args)`` returns ``(out, residuals)``
    (what the backward pass needs), ``bwd(residuals, g)`` returns one cotangent per argument,
    shaped as the argument (``None`` for no derivative).  Reverse mode (``grad``, ``vjp``,
    ``jacrev``, graphs, compiled and source-transformed code) uses them; forward and Taylor
    mode differentiate ``fun``'s body.  ``bwd`` written with ``wengert.numpy`` is itself
    differentiable, so second derivatives go through it.  Arguments in ``nondiff_argnums``
    are not differentiated: ``bwd`` takes them first and returns cotangents for the others.

    >>> import wengert as wg, wengert.numpy as wnp
    >>> @wg.custom_vjp
    ... def clip_gradient(x):
    ...     return x
    >>> clip_gradient.defvjp(lambda x: (x, None),
    ...                      lambda res, g: (wnp.clip(g, -1.0, 1.0),))
    >>> wg.grad(lambda x: 5.0 * clip_gradient(x))(2.0)
    1.0
    """
    if fun is None:  # @wg.custom_vjp(nondiff_argnums=...)
        return lambda f: CustomVJP(f, nondiff_argnums)
    return CustomVJP(fun, nondiff_argnums)


def custom_jvp(fun=None, nondiff_argnums=()):
    """Give ``fun`` a forward-mode derivative of your own, as JAX's ``jax.custom_jvp``.

    Declare it with ``@fun.defjvp`` on ``rule(primals, tangents) -> (out, tangent_out)``,
    linear in the tangents.  Forward mode calls it; Taylor mode evaluates it on series
    (differentiating the rule); reverse mode runs it on a tape of tangents and sweeps that
    backwards (its transpose).  ``fun.defjvps(jvp_0, jvp_1, ...)`` gives one rule per
    argument instead: ``jvp_i(t_i, ans, *args)``.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> @wg.custom_jvp
    ... def log1pexp(x):
    ...     return wnp.log(1.0 + wnp.exp(x))
    >>> @log1pexp.defjvp
    ... def _(primals, tangents):
    ...     (x,), (dx,) = primals, tangents
    ...     return log1pexp(x), dx * (1.0 - 1.0 / (1.0 + wnp.exp(x)))
    >>> wg.grad(log1pexp)(100.0)       # the body's derivative is exp(x) / (1 + exp(x)): nan
    1.0
    """
    if fun is None:  # @wg.custom_jvp(nondiff_argnums=...)
        return lambda f: CustomJVP(f, nondiff_argnums)
    return CustomJVP(fun, nondiff_argnums)
