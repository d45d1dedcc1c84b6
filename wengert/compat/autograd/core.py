"""autograd's ``core``: ``make_vjp``/``make_jvp``, ``primitive`` with ``defvjp``/``defjvp``, and
``vspace``, each onto wengert's own transforms and rule record (no second engine).

An autograd primitive becomes one :class:`wengert.core.Primitive` whose arguments are the
call's traced positional arguments; the others (and the keywords) travel as the static
parameter ``call``. Its reverse rule calls the ``defvjp`` makers only for the arguments that
want a cotangent, as autograd does; its forward rule sums the ``defjvp`` tangents. Rules written
with ``autograd.numpy`` are differentiable again, so nesting works as in autograd. wengert's
cotangents on complex values are autograd's (the plain transpose), so complex rules carry over.
"""
import functools
import itertools
import warnings

import numpy as np

from ...batching import BatchedControlFlowError, per_example_call
from ... import transforms as _tf
from ...core import Primitive, Tracer, plain
from ...tree import flatten as _tree_flatten, unflatten as _tree_unflatten

__all__ = ["make_vjp", "make_jvp", "primitive", "notrace_primitive", "defvjp", "defvjp_argnum",
           "defvjp_argnums", "defjvp", "defjvp_argnum", "defjvp_argnums", "def_linear",
           "vspace", "VSpace", "Box", "getval", "isbox", "register_notrace", "primitive_vjps",
           "primitive_jvps", "SparseObject", "VJPNode", "JVPNode"]


# -- reverse and forward mode ---------------------------------------------------------------------
def as_float(x):
    """``x`` with integer and bool arrays among its leaves made float: autograd differentiates
    in an integer array (its values become the floats they equal), where wengert refuses."""
    if type(x) is np.ndarray:
        return x.astype(float) if x.dtype.kind in "biu" else x
    if type(x) in (tuple, list, dict):
        leaves, d = _tree_flatten(x)
        return _tree_unflatten(d, [as_float(v) for v in leaves])
    return x


def make_vjp(fun, x):
    """``(vjp, ans)``: autograd's order; ``vjp(g)`` is the cotangent of ``x``."""
    ans, pullback = _tf.vjp(fun, as_float(x))
    return (lambda g: pullback(g)[0]), ans


def make_jvp(fun, x):
    """``jvp(v) -> (ans, tangent)``."""
    def jvp(v):
        return _tf.jvp(fun, (as_float(x),), (v,))
    return jvp


# -- boxes ------------------------------------------------------------------------------------------
class _BoxType(type):
    def __instancecheck__(cls, obj):
        if cls is Box:
            return isinstance(obj, Tracer)
        return type.__instancecheck__(cls, obj)


class Box(metaclass=_BoxType):
    """What autograd wraps a traced value in: here, every wengert tracer is one
    (``isinstance(x, Box)``). ``Box.register`` is accepted and ignored: wengert's tracers
    already behave as arrays."""
    type_mappings = {}
    types = set()

    @classmethod
    def register(cls, value_type):
        Box.types.add(cls)
        Box.type_mappings[value_type] = cls


def getval(x):
    """The primal under every trace."""
    return plain(x)


def isbox(x):
    return isinstance(x, Tracer)


# -- primitives -------------------------------------------------------------------------------------
primitive_vjps = {}
primitive_jvps = {}


class _Call:
    """The static part of one call: the positional arguments, where the traced values among
    them sit (``parts``: a traced argument, or the traced leaves of a tuple, list or dict, as
    autograd boxes a container), and the keywords."""

    __slots__ = ("args", "parts", "kwargs")

    def __init__(self, args, parts, kwargs):
        self.args, self.parts, self.kwargs = args, parts, kwargs

    @property
    def argnums(self):
        return [n for n, _, _, where in self.parts for _ in (where or (None,))]

    def full(self, dyn):
        """The positional arguments with ``dyn`` (one value per traced leaf) in place."""
        args, it = list(self.args), iter(dyn)
        for n, d, leaves, where in self.parts:
            if d is None:
                args[n] = next(it)
            else:
                leaves = list(leaves)
                for w in where:
                    leaves[w] = next(it)
                args[n] = _tree_unflatten(d, leaves)
        return tuple(args)

    def leaves_of(self, n, value):
        """The traced leaves' parts of ``value``, a cotangent or tangent of argument ``n``."""
        for m, d, _, where in self.parts:
            if m == n:
                if d is None:
                    return [value]
                if value is None:
                    return [None] * len(where)
                flat = _tree_flatten(value)[0]
                return [flat[w] for w in where]
        raise KeyError(n)

    def whole(self, n, parts):
        """Argument ``n``'s tangent from its traced leaves' (zeros at the other leaves)."""
        for m, d, leaves, where in self.parts:
            if m == n:
                if d is None:
                    return parts[0]
                full = [vspace(v).zeros() if _numeric(v) else v for v in leaves]
                for w, t in zip(where, parts):
                    full[w] = vspace(leaves[w]).zeros() if t is None else t
                return _tree_unflatten(d, full)
        raise KeyError(n)


def _numeric(v):
    return isinstance(v, (Tracer, np.ndarray, np.generic, float, complex))


def _traced_parts(args):
    """``(parts, dyn)``: where the traced values among ``args`` are, and those values."""
    parts, dyn = [], []
    for n, a in enumerate(args):
        if isinstance(a, Tracer):
            parts.append((n, None, None, None))
            dyn.append(a)
        elif type(a) in (tuple, list, dict):
            leaves, d = _tree_flatten(a)
            where = [k for k, v in enumerate(leaves) if isinstance(v, Tracer)]
            if where:
                parts.append((n, d, leaves, where))
                dyn.extend(leaves[k] for k in where)
    return parts, dyn


class _Primitive:
    """A function whose derivatives autograd's ``defvjp``/``defjvp`` give."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        name = getattr(fun, "__name__", None)
        name = name if isinstance(name, str) and name.isidentifier() else "primitive"

        def impl(*dyn, call):
            return fun(*call.full(dyn), **call.kwargs)
        impl.__name__ = impl.__qualname__ = name
        self.prim = Primitive(impl, name=name)
        self.prim.rrule(self._rrule, needs=True)
        self.prim.frule(self._frule, symbolic_zeros=True)
        self._old_rules = {}

    def __repr__(self):
        return f"<autograd primitive {self.prim.name} on wengert>"

    def __get__(self, obj, objtype=None):  # a primitive defined in a class body is a method
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        parts, dyn = _traced_parts(args)
        if not dyn:
            return self.fun(*args, **kwargs)
        return self.prim(*dyn, call=_Call(args, parts, kwargs))

    # -- autograd's deprecated ways of declaring rules (a warning each, as autograd) ----------
    def defgrad(self, gradfun, argnum=0):
        """``gradfun(ans, *args) -> (g -> cotangent)`` for ``args[argnum]`` (deprecated)."""
        _deprecated("defgrad")
        self._old_rules[argnum] = gradfun
        nums = sorted(self._old_rules)
        defvjp(self, *[self._old_rules[n] for n in nums], argnums=nums)

    def defvjp(self, vjpmaker, argnum=0):
        """``vjpmaker(g, ans, vs, gvs, *args) -> cotangent`` for ``args[argnum]`` (deprecated)."""
        _deprecated("defvjp")

        def staged(ans, *args, **kwargs):
            return lambda g: vjpmaker(g, ans, vspace(args[argnum]), vspace(g), *args, **kwargs)
        self._old_rules[argnum] = staged
        nums = sorted(self._old_rules)
        defvjp(self, *[self._old_rules[n] for n in nums], argnums=nums)

    def defvjp_is_zero(self, argnums=(0,)):
        """A zero derivative in ``argnums`` (deprecated)."""
        _deprecated("defvjp_is_zero")
        for n in argnums:
            self._old_rules[n] = None
        nums = sorted(self._old_rules)
        defvjp(self, *[self._old_rules[n] for n in nums], argnums=nums)

    def _rrule(self, *dyn, call, needs):
        args = call.full(dyn)
        ans = self(*args, **call.kwargs)
        owners = call.argnums  # the argument each traced leaf belongs to
        want = sorted({n for n, need in zip(owners, needs) if need})
        maker = primitive_vjps.get(self)
        if maker is None:
            if not want:
                return ans, lambda g: (None,) * len(dyn)
            raise NotImplementedError(f"VJP of {self.prim.name} wrt argnums {tuple(want)} not "
                                      "defined: declare it with autograd.extend.defvjp")
        vjp = maker(tuple(want), ans, args, call.kwargs) if want else None

        def pullback(g):
            if vjp is None:
                return [None] * len(dyn)
            per_arg = dict(zip(want, _one_direction(vjp, g)))
            out = []
            for n, d, _, where in call.parts:
                out.extend(call.leaves_of(n, per_arg.get(n)))
            return out
        return ans, pullback

    def _frule(self, primals, tangents, call):
        args = call.full(primals)
        ans = self(*args, **call.kwargs)
        if all(t is None for t in tangents):
            return ans, None
        maker = primitive_jvps.get(self)
        owners = call.argnums
        nums = sorted({n for n, t in zip(owners, tangents) if t is not None})
        if maker is None:
            raise NotImplementedError(f"JVP of {self.prim.name} wrt argnums {tuple(nums)} not "
                                      "defined: declare it with autograd.extend.defjvp")
        return ans, _one_direction(
            lambda ts: self._jvp_one(maker, nums, ts, ans, args, call), list(tangents))

    @staticmethod
    def _jvp_one(maker, nums, tangents, ans, args, call):
        owners = call.argnums
        gs = tuple(call.whole(n, [t for m, t in zip(owners, tangents) if m == n])
                   for n in nums)
        return maker(tuple(nums), gs, ans, args, call.kwargs)


def _deprecated(method):
    warnings.warn(f"The {method} method is deprecated: declare rules with "
                  "autograd.extend.defvjp / defjvp (see autograd's update guide)",
                  DeprecationWarning, stacklevel=3)


def _one_direction(rule, t):
    """A user's rule on one direction ``t``.  Several directions at once (a Jacobian's, as
    batched values: wengert.batching) go through it as they are, NumPy's calls mapping over
    them; a rule that converts one to a plain array runs once per example."""
    try:
        return rule(t)
    except BatchedControlFlowError:
        return per_example_call(rule, t)


def primitive(fun):
    """Make ``fun`` (on plain values) a primitive, whose derivatives ``defvjp`` and ``defjvp``
    declare."""
    return _Primitive(fun)


def notrace_primitive(fun):
    """``fun`` applied to the primal values: its result carries no derivative."""
    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        return fun(*[plain(a) for a in args], **kwargs)
    wrapped._is_autograd_primitive = True
    return wrapped


def register_notrace(trace_type, primitive_fun):
    """autograd's hook for a primitive that a trace type ignores: nothing to do here."""


def _check(fun, what):
    if not isinstance(fun, _Primitive):
        raise TypeError(f"{what} takes a function made with autograd.extend.primitive, got "
                        f"{fun!r}; decorate the function with @primitive first")


# -- declaring rules -------------------------------------------------------------------------------
def defvjp_argnums(fun, vjpmaker):
    """``vjpmaker(argnums, ans, args, kwargs) -> (g -> cotangents of those argnums)``."""
    _check(fun, "defvjp_argnums")
    primitive_vjps[fun] = vjpmaker


def defvjp_argnum(fun, vjpmaker):
    """``vjpmaker(argnum, ans, args, kwargs) -> (g -> cotangent)``, one argument at a time."""
    def vjp_argnums(argnums, ans, args, kwargs):
        vjps = [vjpmaker(n, ans, args, kwargs) for n in argnums]
        return lambda g: [v(g) for v in vjps]
    defvjp_argnums(fun, vjp_argnums)


def _zero_vjp(argnum):
    def maker(ans, *args, **kwargs):
        return lambda g: vspace(args[argnum]).zeros()
    return maker


def defvjp(fun, *vjpmakers, argnums=None):
    """``defvjp(f, maker_0, maker_1, ...)``: ``maker_i(ans, *args, **kwargs) -> (g -> cotangent
    of args[i])``; ``None`` is a zero derivative; ``argnums=`` names the arguments."""
    nums = itertools.count() if argnums is None else argnums
    makers = {n: (_zero_vjp(n) if m is None else m) for n, m in zip(nums, vjpmakers)}

    def vjp_argnums(want, ans, args, kwargs):
        try:
            vjps = [makers[n](ans, *args, **kwargs) for n in want]
        except KeyError:
            raise NotImplementedError(f"VJP of {fun.prim.name} wrt argnums {tuple(want)} not "
                                      "defined") from None
        return lambda g: [v(g) for v in vjps]
    defvjp_argnums(fun, vjp_argnums)


def defjvp_argnums(fun, jvpmaker):
    """``jvpmaker(argnums, tangents, ans, args, kwargs) -> the output's tangent``."""
    _check(fun, "defjvp_argnums")
    primitive_jvps[fun] = jvpmaker


def defjvp_argnum(fun, jvpmaker):
    """``jvpmaker(argnum, g, ans, args, kwargs) -> that argument's part of the tangent``."""
    def jvp_argnums(argnums, gs, ans, args, kwargs):
        return _sum(jvpmaker(n, g, ans, args, kwargs) for n, g in zip(argnums, gs))
    defjvp_argnums(fun, jvp_argnums)


def defjvp(fun, *jvpfuns, argnums=None):
    """``defjvp(f, jvp_0, ...)``: ``jvp_i(g, ans, *args, **kwargs)`` is the tangent from
    ``args[i]``'s tangent ``g``; ``None`` is a zero derivative."""
    nums = itertools.count() if argnums is None else argnums
    fns = dict(zip(nums, jvpfuns))

    def jvp_argnums(want, gs, ans, args, kwargs):
        parts = []
        for n, g in zip(want, gs):
            if n not in fns:
                raise NotImplementedError(f"JVP of {fun.prim.name} wrt argnum {n} not defined")
            if fns[n] == "same":   # linear in this argument: the function of its tangent
                parts.append(fun(*[g if i == n else a for i, a in enumerate(args)], **kwargs))
            elif fns[n] is not None:
                parts.append(fns[n](g, ans, *args, **kwargs))
        return _sum(parts) if parts else vspace(ans).zeros()
    defjvp_argnums(fun, jvp_argnums)


def def_linear(fun):
    """A function linear in each argument: its tangent is itself applied to the tangent."""
    def jvp(argnum, g, ans, args, kwargs):
        args = list(args)
        args[argnum] = g
        return fun(*args, **kwargs)
    defjvp_argnum(fun, jvp)


def _sum(parts):
    out = None
    for p in parts:
        out = p if out is None else out + p
    return out


class VJPNode:
    """autograd's tape node type: here only a name (wengert's tape is ``wg.Tape``)."""


class JVPNode:
    """autograd's forward node type: here only a name (wengert's is ``wg.Dual``)."""


class SparseObject:
    """autograd's sparse cotangent record; a dense one is used here."""

    def __init__(self, vs, mut_add):
        self.vs, self.mut_add = vs, mut_add


# -- vector spaces ----------------------------------------------------------------------------------
class VSpace:
    """The vector space a value lives in: its shape and dtype, zeros, ones, a basis, random
    vectors and the inner product, for arrays, numbers and containers of them."""

    iscomplex = False
    mappings = {}

    def __init__(self, value):
        value = plain(value)
        self.dtype = np.result_type(value) if not isinstance(value, np.ndarray) else value.dtype
        if self.dtype.kind in "biu":
            self.dtype = np.dtype(float)
        self.shape = np.shape(value)
        self.size = int(np.prod(self.shape, dtype=int))
        self.ndim = len(self.shape)
        self.iscomplex = self.dtype.kind == "c"

    def zeros(self):
        return np.zeros(self.shape, dtype=self.dtype)

    def ones(self):
        return np.ones(self.shape, dtype=self.dtype)

    def standard_basis(self):
        for i in range(self.size):
            v = np.zeros(self.size, dtype=self.dtype)
            v[i] = 1.0
            yield v.reshape(self.shape)

    def randn(self):
        r = np.random.randn(*self.shape)
        if self.iscomplex:
            r = r + 1j * np.random.randn(*self.shape)
        return np.asarray(r, dtype=self.dtype)

    def flatten(self, value, covector=False):
        v = np.ravel(value)
        return np.conj(v) if covector else v

    def unflatten(self, value, covector=False):
        v = np.reshape(value, self.shape)
        return np.conj(v) if covector else v

    def add(self, x, y):
        return x + y

    def mut_add(self, x_prev, x_new):
        return x_new if x_prev is None else x_prev + x_new

    def scalar_mul(self, x, a):
        return x * a

    def inner_prod(self, x, y):
        return np.real(np.vdot(np.ravel(x), np.ravel(y)))

    def covector(self, x):
        return np.conj(x)

    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self), self.shape, self.dtype))

    def __repr__(self):
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"

    @classmethod
    def register(cls, value_type, vspace_maker=None):
        VSpace.mappings[value_type] = vspace_maker or cls


class ContainerVSpace(VSpace):
    """A tuple, list or dict of values: each leaf its own space."""

    def __init__(self, value):
        leaves, self.treedef = _tree_flatten(value)
        self.spaces = [vspace(x) for x in leaves]
        self.shape = tuple(s.shape for s in self.spaces)
        self.size = sum(s.size for s in self.spaces)
        self.iscomplex = any(s.iscomplex for s in self.spaces)
        self.dtype = None
        self.ndim = None

    def _each(self, how, *trees):
        parts = [_tree_flatten(t)[0] for t in trees]
        return _tree_unflatten(self.treedef, [how(s, *xs) for s, *xs in zip(self.spaces, *parts)])

    def zeros(self):
        return _tree_unflatten(self.treedef, [s.zeros() for s in self.spaces])

    def ones(self):
        return _tree_unflatten(self.treedef, [s.ones() for s in self.spaces])

    def randn(self):
        return _tree_unflatten(self.treedef, [s.randn() for s in self.spaces])

    def standard_basis(self):
        for k, s in enumerate(self.spaces):
            for b in s.standard_basis():
                leaves = [t.zeros() for t in self.spaces]
                leaves[k] = b
                yield _tree_unflatten(self.treedef, leaves)

    def add(self, x, y):
        return self._each(lambda s, a, b: s.add(a, b), x, y)

    def scalar_mul(self, x, a):
        return self._each(lambda s, v: s.scalar_mul(v, a), x)

    def covector(self, x):
        return self._each(lambda s, v: s.covector(v), x)

    def inner_prod(self, x, y):
        xs, ys = _tree_flatten(x)[0], _tree_flatten(y)[0]
        return sum(s.inner_prod(a, b) for s, a, b in zip(self.spaces, xs, ys))

    def flatten(self, value, covector=False):
        parts = [s.flatten(v, covector) for s, v in zip(self.spaces, _tree_flatten(value)[0])]
        return np.concatenate(parts) if parts else np.zeros(0)

    def __eq__(self, other):
        return isinstance(other, ContainerVSpace) and self.treedef == other.treedef and \
            self.spaces == other.spaces

    __hash__ = VSpace.__hash__


def vspace(value):
    """The vector space of ``value`` (arrays, numbers, tuples, lists and dicts of them)."""
    if isinstance(value, (tuple, list, dict)):
        return ContainerVSpace(value)
    maker = VSpace.mappings.get(type(value))
    if maker is not None:
        return maker(value)
    v = plain(value)
    if not (isinstance(v, (np.ndarray, np.generic, float, int, complex)) or hasattr(v, "shape")):
        raise TypeError(f"Can't find vector space for value {value!r} of type {type(value)}. "
                        "Valid types are arrays, numbers, tuples, lists and dicts of them.")
    return VSpace(value)


def _warn_independent():
    warnings.warn("Output seems independent of input.")
