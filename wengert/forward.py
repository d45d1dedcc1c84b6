"""Forward mode: dual numbers, value + tangent, pushed through every primitive's frule.

A ``Dual`` belongs to a ``ForwardTrace``; each transform opens a trace at a new
level, so nested derivatives never confuse their perturbations.  A tangent has its
primal's shape; several directions in one pass (a Jacobian in one go) are ``wg.vmap``
over the pass, the tangents then batched values of a lower trace (``BatchTracer``).
"""
import numpy as np

from ._dispatch import ArrayTracer, install_fast_paths
from .arrays import broadcast_view as _broadcast_view, ones, shape_of, zeros_like_value
from .batching import BatchTrace, BatchTracer
from .core import MINUS_ONE, ONE, Trace, Tracer, scaled, tangent_sum
from .rules.lowering import python_operator

__all__ = ["Dual", "ForwardTrace"]


class ForwardTrace(Trace):
    __slots__ = ("level", "finished_by")
    tracer_name = "Dual"

    def __init__(self, level):
        self.level = level
        self.finished_by = None

    def __repr__(self):
        return f"<ForwardTrace level={self.level}>"

    def process(self, prim, args, params):
        if self.finished_by is not None:
            raise self.escaped(f"in {prim.name}")
        if len(args) == 1:
            if type(args[0]) is Dual and args[0]._trace is self:
                d = self._unary(prim, args[0], params)
                if d is not None:
                    return d
        elif len(args) == 2 and (prim.bilinear or prim.fast_partials is not None):
            d = self._binary(prim, args, params)
            if d is not None:
                return d
        primals = []
        tangents = []
        plain = True
        for a in args:
            if isinstance(a, Tracer):
                if a._trace is self:
                    primals.append(a.value)
                    tangents.append(a._tangent)
                    if isinstance(a.value, Tracer):  # nested: an outer trace's value
                        plain = False
                    continue
                plain = False
            primals.append(a)
            tangents.append(None)
        ans, tangent = prim.pushforward(primals, tangents, params, plain)
        if prim.multiple_results:
            if tangent is None:
                tangent = (None,) * len(ans)
            return tuple(Dual(a, t, _trace=self) for a, t in zip(ans, tangent))
        return Dual(ans, tangent, _trace=self)

    def _unary(self, prim, a, params):
        """One-argument primitives on a plain value, in fewer calls; ``None`` if not covered.

        A linear primitive's tangent is the primitive applied to the tangent; an
        elementwise one's is the tangent times its partial.  Both read the rule's own
        declarations, so they are the same rule, taken in fewer Python calls.
        """
        v = a.value
        if type(v) not in _PLAIN:
            return None
        t = a._tangent
        fp = prim.fast_partials
        if fp is not None:
            if fp.needs or prim.broadcasting or prim.multiple_results:
                return None
            ans = prim.impl(v, **params)
            try:
                (p,) = fp.fn(ans, v, **params)
            except ArithmeticError:
                return None  # Python floats raise where NumPy gives inf: the general path
            t = None if t is None or p is None else scaled(t, p)
        elif prim.linear:
            if t is not None and type(t) is not type(v):
                if not _batched(t):
                    return None
                ans = prim.impl(v, **params)
                t = prim(t, **params)  # a batch of directions: mapped by its batch rule
            else:
                impl = prim.impl
                ans = impl(v, **params)
                t = None if t is None else impl(t, **params)
        else:
            return None
        d = _new(Dual)
        d.value, d._tangent, d._trace = ans, t, self
        return d

    def _binary(self, prim, args, params):
        """Two-argument primitives on plain values, in fewer calls.

        A bilinear primitive's tangent is ``f(da, b) + f(a, db)``; an elementwise one's
        is the sum of tangents times partials, spread over the result's shape.  A tangent
        may be a batch of directions (a ``vmap``'s value); nested traces and anything else:
        ``None``, for the general path.
        """
        vals = []
        tans = []
        for x in args:
            tx = type(x)
            if tx is Dual:
                if x._trace is not self:
                    return None
                v, t = x.value, x._tangent
                tv = type(v)
                if tv not in _PLAIN or t is not None and type(t) is not tv and not _batched(t):
                    return None
            elif tx in _PLAIN_ARG:
                v, t = x, None
            else:
                return None
            vals.append(v)
            tans.append(t)
        if prim.multiple_results:
            return None
        a, b = vals
        da, db = tans
        impl = prim.impl
        ans = impl(a, b, **params)
        fp = prim.fast_partials
        if fp is None:  # bilinear (a batch of directions: mapped by its batch rule)
            t = None if da is None else (impl if type(da) is type(a) else prim)(da, b, **params)
            if db is not None:
                u = (impl if type(db) is type(b) else prim)(a, db, **params)
                t = u if t is None else t + u
        else:
            ps_params = params
            if fp.needs:
                ps_params = dict(params, needs=(da is not None, db is not None))
            try:
                ps = fp.fn(ans, a, b, **ps_params)
            except ArithmeticError:
                return None  # Python floats raise where NumPy gives inf: the general path
            t = tangent_sum(ps, tans)
            if t is not None and prim.broadcasting:
                s_ans = () if type(ans) is float else ans.shape
                if (() if type(t) is float else t.shape) != s_ans:
                    t = _broadcast_view(t, s_ans)  # x + c: x's tangent over the result
        d = _new(Dual)
        d.value, d._tangent, d._trace = ans, t, self
        return d


_PLAIN = (float, np.ndarray, np.float64, np.float32)


def _batched(t):
    """Whether tangent ``t`` is a batch of directions (``vmap`` over the pass: jacobian)."""
    return isinstance(t, Tracer) and t._trace.batched
_PLAIN_ARG = _PLAIN + (int,)
_new = object.__new__


def _binary_fast_path(prim, name, reflected, general):
    """An operator method for Duals of plain numbers and arrays that skips the dispatch layers.

    It reads the primitive's own partials (``fast_partials``), so it is the same rule,
    taken in fewer Python calls.  It covers tangents of plain values (or batches of
    directions: ``vmap`` over the pass); anything else (nested traces, Python's exceptions
    on floats) takes the ``general`` path.
    """
    impl, partials = prim.impl, prim.fast_partials.fn
    impl = python_operator(prim) or impl  # Python's operator on floats, where it is one
    with_needs = prim.fast_partials.needs  # then the partials skip the unneeded ones
    plain = (float, int, np.ndarray, np.float64, np.float32)
    arrays = (np.ndarray, np.float64, np.float32)  # NumPy's scalars have .shape and .ndim
    new = object.__new__
    broadcast_to = _broadcast_view  # plain arrays: a fast view

    def method(self, other):
        tr = self._trace
        if tr.finished_by:  # (None or a tuple: the cheapest test)
            return general(self, other)  # escaped: the trace's process raises
        a = self.value
        ta = self._tangent
        to = type(other)
        if to is Dual:
            if other._trace is not tr:
                return general(self, other)
            b, tb = other.value, other._tangent
        elif to in plain:
            b, tb = other, None
        else:
            return general(self, other)
        tya, tyb = type(a), type(b)
        if tya is float and (tyb is float or tyb is int):
            scalar = True
        elif (tya in arrays or tya is float) and tyb in plain:
            scalar = False
            # tangents of the values' types, or batches of directions (jacobian's vmap)
            if ta is not None and type(ta) is not tya and not _batched(ta):
                return general(self, other)
            if tb is not None and type(tb) is not tyb and not _batched(tb):
                return general(self, other)
        else:
            return general(self, other)
        if reflected:
            a, b, ta, tb = b, a, tb, ta
        try:
            ans = impl(a, b)
        except (ArithmeticError, ValueError, TypeError):
            return general(self, other)  # NumPy's semantics (inf, nan) on the general path
        if type(ans) is complex:
            return general(self, other)
        try:
            if with_needs:
                pa, pb = partials(ans, a, b, needs=(ta is not None, tb is not None))
            else:
                pa, pb = partials(ans, a, b)
        except ArithmeticError:
            return general(self, other)
        # core.tangent_sum's arithmetic, written out: calling it here doubled the cost of a
        # scalar operation (the Babylonian derivative went from 27x to 51x the plain function)
        t = None
        if ta is not None and ta is tb and pa is not None and pb is not None:
            t = ta * (pa + pb)  # x * x: one product of the tangent, not two and a sum
        else:
            if ta is not None and pa is not None:
                t = ta if pa is ONE else ta * pa
            if tb is not None and pb is not None:
                if pb is MINUS_ONE:  # x - y
                    t = -tb if t is None else t - tb
                else:
                    u = tb if pb is ONE else tb * pb
                    t = u if t is None else t + u
        if not scalar and t is not None and (() if type(t) is float else t.shape) != ans.shape:
            t = broadcast_to(t, ans.shape)  # x + c: x's tangent, spread over the result
        d = new(Dual)  # slots set directly: cheaper than a call to __init__
        d.value, d._tangent, d._trace = ans, t, tr
        return d
    method.__name__ = name
    return method


def _unary_fast_path(prim, name, general):
    """``-d`` and the like: the trace's one-argument shortcut, straight from the operator."""
    no_params = {}

    def method(self):
        tr = self._trace
        d = None if tr.finished_by else tr._unary(prim, self, no_params)
        return general(self) if d is None else d
    method.__name__ = name
    return method


USER_TRACE = ForwardTrace(0)  # the trace of Duals a user makes by hand


class Dual(ArrayTracer):
    """A dual number ``value + tangent·ε`` with ``ε² = 0``.

    >>> d = Dual(3, 0) + Dual(5, 1) * Dual(6, 0)
    >>> d.value, d.tangent
    (33, 6)
    """

    __slots__ = ("value", "_tangent", "_trace")

    def __init__(self, value, tangent=0.0, _trace=USER_TRACE):
        self.value = value
        if _trace is USER_TRACE:
            if type(tangent) in (float, int) and getattr(value, "ndim", 0):
                # a number as the tangent of an array (Dual(x) for a constant): x's shape
                tangent = None if tangent == 0 else \
                    ones(value.shape, value.dtype, like=value) * tangent
            elif _directions(value, tangent):
                # several directions, stacked on a leading axis: a batch of one-direction
                # tangents (vmap's values), as jacobian pushes them; rules see one each
                tangent = BatchTracer(tangent, _user_batch(shape_of(tangent)[0]))
        self._tangent = tangent
        self._trace = _trace

    @property
    def tangent(self):
        t = self._tangent
        if t is None:
            return zeros_like_value(self.value)
        if self._trace is USER_TRACE and type(t) is BatchTracer and t._trace.level < 0:
            return t.value  # a hand-made Dual's directions, stacked as they were given
        return t

    def __repr__(self):
        return f"Dual({self.value!r}, {self.tangent!r})"


install_fast_paths(Dual, _binary_fast_path, _unary_fast_path)


def _directions(value, tangent):
    """Whether a hand-made Dual's ``tangent`` stacks several directions of ``value``."""
    if isinstance(tangent, Tracer) or not hasattr(tangent, "shape"):
        return False
    ts, vs = shape_of(tangent), shape_of(value)
    return len(ts) == len(vs) + 1 and ts[1:] == vs


_USER_BATCHES = {}  # k -> the batch trace of hand-made Duals' k directions


def _user_batch(k):
    """One batch trace per number of directions, below every transform's level (the Dual's
    own trace is level 0), and never finished: hand-made Duals live as long as the user's."""
    tr = _USER_BATCHES.get(k)
    if tr is None:
        tr = _USER_BATCHES.setdefault(k, BatchTrace(-1, k))
    return tr
