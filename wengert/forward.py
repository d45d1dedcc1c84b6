"""Forward mode: dual numbers, value + tangent, pushed through every primitive's frule.

A ``Dual`` belongs to a ``ForwardTrace``; each transform opens a trace at a new
level, so nested derivatives never confuse their perturbations.  The tangent may
carry leading batch axes: several directions in one pass (a Jacobian in one go).
"""
from .core import Trace, Tracer

__all__ = ["Dual", "ForwardTrace"]


class ForwardTrace(Trace):
    __slots__ = ("level",)

    def __init__(self, level):
        self.level = level

    def __repr__(self):
        return f"<ForwardTrace level={self.level}>"

    def process(self, prim, args, params):
        primals = []
        tangents = []
        plain = True
        for a in args:
            if isinstance(a, Tracer):
                if a._trace is self:
                    primals.append(a.value)
                    tangents.append(a._tangent)
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


USER_TRACE = ForwardTrace(0)  # the trace of Duals a user makes by hand


class Dual(Tracer):
    """A dual number ``value + tangent·ε`` with ``ε² = 0``.

    >>> d = Dual(3, 0) + Dual(5, 1) * Dual(6, 0)
    >>> d.value, d.tangent
    (33, 6)
    """

    __slots__ = ("value", "_tangent", "_trace")

    def __init__(self, value, tangent=0.0, _trace=USER_TRACE):
        self.value = value
        self._tangent = tangent
        self._trace = _trace

    @property
    def tangent(self):
        t = self._tangent
        if t is None:
            from .rules._zeros import zeros_like_value
            return zeros_like_value(self.value)
        return t

    def __repr__(self):
        return f"Dual({self.value!r}, {self.tangent!r})"
