"""Graph rewriting: constant folding, common subexpressions, identities, dead code.

By default every rewrite is exact: the simplified graph computes bit for bit
what the original computes (``x * 1``, ``x / 1``, ``x ** 1``, ``x - 0.0``,
``x + (-0.0)``, ``-(-x)``, ``+x`` and shape operations to the same shape are
the identity in IEEE arithmetic).  An identity is used only when the node's
traced value has the type, dtype and shape of the operand it is replaced by, so
a constant that broadcasts ``x`` to a larger shape, or promotes its dtype, is
never dropped.

``fast_math=True`` adds rewrites that hold for finite numbers only: ``x + 0``
(``-0.0 + 0.0`` is ``+0.0``), ``x * 0`` and ``x - x`` (``nan``, ``inf``),
``exp(log x)`` and ``log(exp x)`` (rounding).  Zero cotangents never become
nodes in the first place (rules return ``None``, a symbolic zero); zeros that
were materialised as constants go with ``fast_math``.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..rules import OPERATORS
from ..rules.lowering import python_operator
from .ir import Node

__all__ = ["simplify"]

# algebraic facts about primitives are declared with them, in the rules: ``identity_when``
# (when one returns its operand unchanged: always, if the result keeps the operand's shape
# and dtype, or by its own predicate, as transpose's identity permutation)
_ZERO_IF_EQUAL = {operator.sub}


def _op_of(prim):
    """The Python operator ``prim`` computes (its lowering), for the algebra below."""
    return python_operator(prim)


def _freeze(v):
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        return ("np", v.dtype.str, v.tobytes())
    if isinstance(v, float):
        return ("f", v.hex() if v == v else "nan")
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_freeze(e) for e in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _freeze(e)) for k, e in v.items())
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    return (type(v).__name__, v)


def _same_kind(a, b):
    """Can ``b`` (a value) stand in for ``a`` (another): same type, dtype, shape."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype == b.dtype and np.shape(a) == np.shape(b)
    return True


def _is_numeric(v):
    return isinstance(v, (int, float, np.ndarray, np.generic)) and not isinstance(v, bool) \
        and np.asarray(v).dtype.kind in "iuf"


def _all_equal(v, c, sign=None):
    t = type(v)
    if t is float or t is int:  # the constants of most programs: no array made
        return v == c and (sign is None or (math.copysign(1.0, v) < 0) == sign)
    if not _is_numeric(v):
        return False
    a = np.asarray(v)
    if a.size == 0 or not np.all(a == c):
        return False
    if sign is not None:
        return bool(np.all(np.signbit(a) == sign))
    return True


def _zeros_like(v):
    if isinstance(v, np.ndarray):
        return np.zeros(v.shape, v.dtype)
    if isinstance(v, np.generic):
        return v.dtype.type(0)
    return type(v)(0)


class _Builder:
    def __init__(self):
        self.nodes = []
        self.constant = []  # per node: whether it is a constant (read for every argument)
        self.consts = {}
        self.cse = {}
        self.equal = {}  # (constant node, c, sign) -> _all_equal of its value
        self.stats = {"folded": 0, "cse": 0, "identities": 0, "rewritten": 0}

    def add(self, node):
        self.nodes.append(node)
        self.constant.append(node.kind == "const")
        return len(self.nodes) - 1

    def all_equal(self, i, c, sign=None):
        """``_all_equal`` of constant node ``i``'s value, once per constant: a program's
        few constants are each an argument of many nodes."""
        key = (i, c, sign)
        r = self.equal.get(key)
        if r is None:
            r = self.equal[key] = _all_equal(self.nodes[i].value, c, sign)
        return r

    def const(self, value):
        key = _freeze(value)
        if key in self.consts:
            return self.consts[key]
        idx = self.add(Node("const", value=value))
        self.consts[key] = idx
        return idx

    def is_const(self, i):
        return self.constant[i]


def _identity(b, n, args, fast_math):
    """An existing node (or a new constant) equal to ``n`` applied to ``args``; else None."""
    op = None if n.params else _op_of(n.prim)
    if op is None and n.prim.identity_when is None and not fast_math:
        return None  # most nodes: no identity to look for
    nodes = b.nodes
    vals = [nodes[a].value for a in args]
    consts = [b.constant[a] for a in args]
    ans = n.value

    def keep(i):
        return args[i] if _same_kind(ans, vals[i]) else None

    if op is operator.mul:
        for i, j in ((0, 1), (1, 0)):
            if consts[j] and b.all_equal(args[j], 1):
                r = keep(i)
                if r is not None:
                    return r
            if fast_math and consts[j] and b.all_equal(args[j], 0) and _is_numeric(ans):
                return b.const(_zeros_like(ans))
    elif op is operator.add:
        for i, j in ((0, 1), (1, 0)):
            if consts[j] and b.all_equal(args[j], 0, None if fast_math else True):
                r = keep(i)
                if r is not None:
                    return r
    elif op is operator.sub:
        if consts[1] and b.all_equal(args[1], 0, None if fast_math else False):
            return keep(0)
        if fast_math and args[0] == args[1] and _is_numeric(ans):
            return b.const(_zeros_like(ans))
    elif op in (operator.truediv, operator.pow):
        if consts[1] and b.all_equal(args[1], 1):
            return keep(0)
    elif op is operator.neg:
        inner = b.nodes[args[0]]
        if inner.kind == "op" and _op_of(inner.prim) is operator.neg and not inner.params:
            return inner.args[0] if _same_kind(ans, b.nodes[inner.args[0]].value) else None
    elif op is operator.pos:
        return keep(0)
    when = n.prim.identity_when  # a rewrite declared with the primitive
    if when is not None and len(args) == 1 and (when is True or when(vals[0], **n.params)):
        return keep(0)
    if fast_math and len(args) == 1:
        inner = b.nodes[args[0]]
        if inner.kind == "op" and not inner.params and not n.params:
            pair = (n.prim.impl, inner.prim.impl)
            if pair in ((np.exp, np.log), (np.log, np.exp)):
                r = inner.args[0]
                return r if _same_kind(ans, b.nodes[r].value) else None
    return None


def _neg_of(b, i):
    """The operand of node ``i`` if it is a plain negation, else None."""
    node = b.nodes[i]
    if node.kind == "op" and not node.params and _op_of(node.prim) is operator.neg:
        return node.args[0]
    return None


def _rewrite(b, n, args):
    """Exact rewrites into another primitive call, as ``(prim, args)``; else None.

    In IEEE arithmetic ``-(x * c) == x * (-c)``, ``(-x) * c == x * (-c)`` and
    ``a + (-y) == a - y`` bit for bit, so the negations reverse sweeps produce fold
    into constants and subtractions.
    """
    if n.params:
        return None
    op = _op_of(n.prim)
    if op is not operator.neg and op is not operator.mul and op is not operator.add:
        return None
    vals = [b.nodes[a].value for a in args]
    if op is operator.neg:
        inner = b.nodes[args[0]]
        if inner.kind == "op" and not inner.params and _op_of(inner.prim) is operator.mul:
            for i, j in ((0, 1), (1, 0)):
                c = b.nodes[inner.args[j]]
                if c.kind == "const" and _is_numeric(c.value):
                    return inner.prim, (inner.args[i], b.const(-c.value))
    elif op is operator.mul:
        for i, j in ((0, 1), (1, 0)):
            x = _neg_of(b, args[i])
            if x is not None and b.is_const(args[j]) and _is_numeric(vals[j]):
                return n.prim, (x, b.const(-vals[j]))
    elif op is operator.add:
        for i, j in ((0, 1), (1, 0)):
            y = _neg_of(b, args[j])
            if y is not None:
                return OPERATORS["__sub__"], (args[i], y)
    return None


def simplify(g, *, fast_math=False, report=False):
    """A new graph computing the same values with fewer nodes (see the module docs).

    ``g2.stats`` records the node counts before and after and what each pass did;
    ``report=True`` also prints them.
    """
    b = _Builder()
    rep = [None] * len(g.nodes)
    for i, n in enumerate(g.nodes):
        k = n.kind
        if k == "input":
            rep[i] = b.add(Node("input", value=n.value))
        elif k == "const":
            rep[i] = b.const(n.value)
        elif k == "proj":
            parent = rep[n.args[0]]
            j = n.params["index"]
            if b.is_const(parent):
                rep[i] = b.const(n.value)
                continue
            key = ("proj", parent, j)
            if key in b.cse:
                rep[i] = b.cse[key]
                b.stats["cse"] += 1
            else:
                rep[i] = b.cse[key] = b.add(Node("proj", None, (parent,), {"index": j}, n.value))
        else:
            args = tuple(rep[a] for a in n.args)
            constant = b.constant
            if all(constant[a] for a in args) and not n.prim.impure:
                rep[i] = b.const(n.value)
                b.stats["folded"] += 1
                continue
            r = _identity(b, n, args, fast_math)
            if r is not None:
                rep[i] = r
                b.stats["identities"] += 1
                continue
            rw = _rewrite(b, n, args)
            prim = n.prim
            if rw is not None:
                prim, args = rw
                b.stats["rewritten"] += 1
            key = (id(prim), args, _freeze(n.params) if n.params else ())
            if key in b.cse:
                rep[i] = b.cse[key]
                b.stats["cse"] += 1
                continue
            rep[i] = b.cse[key] = b.add(Node("op", prim, args, dict(n.params), n.value))
    outputs = [rep[o] for o in g.outputs]
    guards = []
    seen = set()
    for i, want in g.guards:
        j = rep[i]
        if b.is_const(j) or (j, want) in seen:
            continue  # decided at trace time, or checked already
        seen.add((j, want))
        guards.append((j, want))
    input_nodes = [rep[i] for i in g.input_nodes]
    # dead code: keep what the outputs and guards need, and every input
    live = [False] * len(b.nodes)
    stack = outputs + [j for j, _ in guards] + input_nodes
    while stack:
        j = stack.pop()
        if not live[j]:
            live[j] = True
            stack.extend(b.nodes[j].args)
    new_index = {}
    nodes = []
    for j, node in enumerate(b.nodes):
        if live[j]:
            new_index[j] = len(nodes)
            node.args = tuple(new_index[a] for a in node.args)
            nodes.append(node)
    # a graph of g's own class (wengert.graph.Graph, which sits above this pass)
    out = type(g)(nodes, g.in_def, g.leaf_slots, [new_index[j] for j in input_nodes],
                  g.arg_names, g.out_def, [new_index[j] for j in outputs],
                  [(new_index[j], w) for j, w in guards], name=g.name,
                  example_args=g.example_args)
    stats = dict(b.stats)
    stats.update(before=len(g), after=len(out), ops_before=g.num_ops, ops_after=out.num_ops,
                 dead=len(b.nodes) - len(nodes))
    out.stats = stats
    if report:
        print(f"simplify {g.name}: {stats['before']} -> {stats['after']} nodes "
              f"({stats['ops_before']} -> {stats['ops_after']} primitive calls; "
              f"{stats['folded']} folded, {stats['cse']} shared, {stats['identities']} "
              f"identities, {stats['dead']} dead)")
    return out
