"""Taylor mode: truncated Taylor arithmetic, one pass, read off the same rules.

A ``Jet`` carries the coefficients ``x_0, x_1, ..., x_K`` of a curve
``x(t) = Σ x_k t^k``.  Linear primitives map coefficients one by one, bilinear
ones (multiply, matmul) take the Cauchy product, and every other primitive uses
its forward rule once, on jets: with ``y = f(x)``, the rule applied to
``(x(t), x'(t))`` gives the series of ``y'(t)``, and ``y_k = [y']_{k-1} / k``.
Coefficients are computed on demand, each once, with an explicit work stack (no
recursion), and identical primitive applications are shared, so the cost grows
polynomially with the order instead of exponentially as nested duals would.
"""
from __future__ import annotations

from ._dispatch import ArrayTracer
from .arrays import shape_of, zeros_like_value
from .core import Trace, check_differentiable, check_live, new_level
from .tree import flatten, unflatten

__all__ = ["taylor_coefficients", "JetTrace", "Jet"]


class JetTrace(Trace):
    tracer_name = "Jet"

    def __init__(self):
        self.level = new_level()
        self._memo = {}

    def process(self, prim, args, params):
        if self.finished_by is not None:
            raise self.escaped(f"in {prim.name}")
        try:
            key = (prim, tuple(a if isinstance(a, Jet) and a._trace is self else _const_key(a)
                               for a in args), _freeze(params))
            hit = self._memo.get(key)
        except TypeError:  # an unhashable parameter (an index array; a slice before Python
            # 3.12): no sharing for this one
            hit, key = None, None
        if hit is not None:
            return hit
        c0s = [a.coeffs[0] if isinstance(a, Jet) and a._trace is self else a for a in args]
        ans = prim(*c0s, **params)
        if prim.multiple_results:
            group = _Group(prim, args, params)
            out = tuple(Jet(self, a, "generic", prim, args, params, group=group, index=i)
                        for i, a in enumerate(ans))
        else:
            # a linear primitive maps coefficients one by one, a bilinear one takes the
            # Cauchy product: its record's linearity says which
            kind = _KIND.get(prim.linearity, "generic")
            out = Jet(self, ans, kind, prim, args, params)
        if key is not None:
            self._memo[key] = out
            self._memo[("keep", id(args))] = args  # keep constants alive: ids stay unique
        return out


def _const_key(a):
    if isinstance(a, (int, float, complex, str, bool)) or a is None:
        return ("const", type(a), a)
    return ("id", id(a))


def _freeze(params):
    if not params:
        return ()
    return tuple(sorted((k, _hashable(v)) for k, v in params.items()))


def _hashable(v):
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return _freeze(v)
    hash(v)
    return v


class _Group:
    """A primitive with several results: one forward-rule evaluation for all of them."""

    __slots__ = ("prim", "args", "params", "tangents")

    def __init__(self, prim, args, params):
        self.prim, self.args, self.params, self.tangents = prim, args, params, None


class Jet(ArrayTracer):
    """A truncated Taylor series; ``.value`` is the constant coefficient."""

    __slots__ = ("_trace", "coeffs", "kind", "prim", "args", "params", "tangent_jet",
                 "source", "group", "index")
    # a jet is a node of a lazily evaluated series: rebinding it in place would make the
    # updated node one of its own arguments, so in-place updates are refused by name
    updates_in_place = False
    in_place_refusal = "wg.taylor is not supported in Taylor mode"

    def __init__(self, trace, c0, kind, prim=None, args=(), params=None, source=None,
                 group=None, index=0):
        self._trace = trace
        self.coeffs = [c0]
        self.kind = kind
        self.prim, self.args, self.params = prim, args, params or {}
        self.tangent_jet = _UNSET
        self.source = source  # for "derivative" jets: the jet they differentiate
        self.group, self.index = group, index

    @property
    def value(self):
        return self.coeffs[0]

    def __repr__(self):
        return f"Jet({self.coeffs!r})"


_UNSET = object()


def _own(a, trace):
    return isinstance(a, Jet) and a._trace is trace


def _coef(a, k, trace):
    """Coefficient k of an argument (constants have only the constant term); None = 0."""
    if _own(a, trace):
        return a.coeffs[k]
    return a if k == 0 else None


def _derivative_jet(x):
    """The jet of x'(t): coefficient m is (m + 1) x_{m+1} (x_1 must be known)."""
    trace = x._trace
    key = ("d", x)
    d = trace._memo.get(key)
    if d is None:
        c0 = x.coeffs[1]
        if c0 is None:
            c0 = zeros_like_value(x.coeffs[0])
        d = Jet(trace, c0, "derivative", source=x)
        trace._memo[key] = d
    return d


def _tangent_jet(node):
    """The series of y'(t), from the primitive's forward rule evaluated once on jets."""
    if node.tangent_jet is _UNSET:
        trace = node._trace
        group = node.group
        if group is not None and group.tangents is not None:
            t = group.tangents[node.index]
        else:
            primals = list(node.args)
            tangents = [_derivative_jet(a) if _own(a, trace) else None for a in node.args]
            _, t = node.prim.pushforward(primals, tangents, node.params, False)
            if group is not None:
                group.tangents = t if t is not None else (None,) * 64
                t = group.tangents[node.index]
        node.tangent_jet = t
    return node.tangent_jet


def _needs(node, k):
    """What must be known before coefficient k of ``node`` can be computed."""
    trace = node._trace
    if node.kind == "input":
        return ()
    if node.kind == "derivative":
        return ((node.source, k + 1),)
    if node.kind == "linear":
        return tuple((a, k) for a in node.args if _own(a, trace))
    if node.kind == "bilinear":
        return tuple((a, k) for a in node.args if _own(a, trace))
    if node.tangent_jet is _UNSET:  # the rule needs x'(0) = x_1 of every argument
        first = tuple((a, 1) for a in node.args if _own(a, trace) and len(a.coeffs) < 2)
        if first:
            return first
    t = _tangent_jet(node)
    return ((t, k - 1),) if _own(t, trace) else ()


def _compute(node, k):
    trace = node._trace
    kind = node.kind
    if kind == "input":
        return None
    if kind == "derivative":
        c = node.source.coeffs[k + 1]
        return None if c is None else c * float(k + 1)
    if kind == "linear":
        cs = [_coef(a, k, trace) for a in node.args]
        if all(c is None for c in cs):
            return None
        cs = [zeros_like_value(_coef(a, 0, trace)) if c is None else c
              for a, c in zip(node.args, cs)]
        return node.prim(*cs, **node.params)
    if kind == "bilinear":
        a, b = node.args
        out = None
        for j in range(k + 1):
            ca, cb = _coef(a, j, trace), _coef(b, k - j, trace)
            if ca is None or cb is None:
                continue
            term = node.prim(ca, cb, **node.params)
            out = term if out is None else out + term
        return out
    t = _tangent_jet(node)
    if t is None:
        return None
    c = _coef(t, k - 1, trace)
    return None if c is None else c / float(k)


_KIND = {"linear": "linear", "bilinear": "bilinear"}


def _ensure(node, k):
    """Compute coefficients of ``node`` up to ``k``, iteratively (no recursion)."""
    stack = [(node, k)]
    while stack:
        n, m = stack[-1]
        if len(n.coeffs) > m:
            stack.pop()
            continue
        have = len(n.coeffs)
        if have < m:  # earlier coefficients first
            stack.append((n, have))
            continue
        missing = [(d, j) for d, j in _needs(n, m) if len(d.coeffs) <= j]
        if missing:
            stack.extend(missing)
            continue
        stack.pop()
        n.coeffs.append(_compute(n, m))


def taylor_coefficients(f, x, v, order):
    """``[c_0, ..., c_order]`` of ``t -> f(x + t v)`` at 0, in one pass."""
    trace = JetTrace()
    xl, xd = flatten(x)
    vl, vd = flatten(v)
    if xd != vd:
        raise ValueError("the direction v must have the structure of x")
    for leaf in xl:
        check_differentiable(leaf, "taylor: x")
    jets = []
    for a, b in zip(xl, vl):
        if shape_of(a) != shape_of(b):
            raise ValueError(f"direction of shape {shape_of(b)} for x of shape {shape_of(a)}")
        j = Jet(trace, a, "input")
        j.coeffs.append(b)
        j.coeffs.extend([None] * max(0, order - 1))
        jets.append(j)
    try:
        out = f(unflatten(xd, jets))
        leaves, od = flatten(out)
        series = []
        for o in leaves:
            if _own(o, trace):
                _ensure(o, order)
                cs = [c if c is not None else zeros_like_value(o.coeffs[0])
                      for c in o.coeffs[:order + 1]]
            else:
                check_live(o, "returned by the function given to wg.taylor")
                cs = [o] + [zeros_like_value(o) for _ in range(order)]
            series.append(cs)
    finally:
        trace.finish("wg.taylor", f)  # the coefficients are known: its Jets are dead
    return [unflatten(od, [s[k] for s in series]) for k in range(order + 1)]
