"""The one emitter: a graph's nodes written as statements, one node at a time, in a dialect.

Everything a program does differently from "one call per node" is decided before any text
exists, by the passes (passes.py), and handed here as data: the order of the steps
(``schedule``), the sums of scatters that accumulate into one buffer (``accumulate_into``:
``fused``), the arithmetic that overwrites a temporary (``inplace``), the elementwise runs
that become a kernel (``kernel`` steps), the calls that write into a kept buffer (``out``).
:class:`Writer` walks the nodes and asks its dialect how to write each one -- a constant, an
input, a projection, an accumulation, an in-place update, an element read, a primitive -- and
the dialect reads the primitive's ``lowering`` fact and the one operator table
(rules/lowering.py's ``OPERATOR_FORMS``) to answer.  The dialects:

* :mod:`.lower_numpy` -- the NumPy program (a call of ``prim.impl``, an infix operator, a
  ufunc with ``out=``), and an all-scalar group as Python floats;
* :mod:`.lower_numba` -- a fused kernel's loop body (the primitive's ufunc or scalar form on
  scalars) and a compiled scan's step on whole arrays (its ``lowering.array`` form).

Text is written once per program from those decisions; nothing rewrites it afterwards.
codegen.py, fuse.py and numba_array.py assemble functions around what is written here and
compile them.
"""
from __future__ import annotations

import keyword
import math

from ..rules.lowering import lowering_of, operator_symbol as symbol

__all__ = ["Writer", "Dialect", "Twin", "Names", "literal", "lit", "index_source", "ident", "atom",
           "operator_source", "symbol"]


def literal(v):
    """Python source that evaluates to exactly ``v``, or ``None``."""
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return repr(v)
    if t is float:
        return repr(v) if math.isfinite(v) else None
    if v is Ellipsis:
        return "..."
    if t is slice:
        parts = [literal(p) for p in (v.start, v.stop, v.step)]
        return None if None in parts else f"slice({', '.join(parts)})"
    if t is tuple or t is list:
        parts = [literal(p) for p in v]
        if None in parts:
            return None
        if t is tuple:
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        return "[" + ", ".join(parts) + "]"
    return None


def atom(src):
    return f"({src})" if src.startswith("-") else src


def ident(s):
    """``s`` made a Python identifier (not a keyword)."""
    s = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in str(s))
    if not s or s[0].isdigit():
        s = "_" + s
    if keyword.iskeyword(s):
        s += "_"
    return s


def operator_source(op, args, parens=False):
    """``a op b`` or ``op a`` (parenthesised with ``parens``), or None where ``op`` is
    written as a call."""
    sym = symbol(op, len(args))
    if sym is None:
        return None
    src = f"{args[0]} {sym} {args[1]}" if len(args) == 2 else f"{sym}{args[0]}"
    return f"({src})" if parens else src


class Names:
    """The generated function's globals: each object bound once, under a fresh name."""

    def __init__(self, ns):
        self.ns = dict(ns)
        self.bound = {}  # id(obj) -> name
        self.used = set(self.ns)
        self.made = {}  # key -> an object made for the program (kept: every walk binds it)

    def bind_made(self, key, make, hint):
        """The object ``make()`` gives, made once per ``key``, bound as :meth:`bind` does."""
        if key not in self.made:
            self.made[key] = make()
        return self.bind(self.made[key], hint)

    def bind(self, obj, hint):
        key = id(obj)
        if key in self.bound:
            return self.bound[key]
        base = ident(hint)
        name, k = base, 2
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        self.ns[name] = obj
        self.bound[key] = name
        return name


def lit(v, names):
    """``v`` as a literal, or the name it is bound under."""
    src = literal(v)
    return src if src is not None else names.bind(v, "k")


def index_source(idx, names):
    """``x[idx]`` source: ``3``, ``1:3``, ``::2, 0``..."""
    def one(e):
        if type(e) is slice and all(p is None or type(p) is int
                                    for p in (e.start, e.stop, e.step)):
            a, b, c = ("" if p is None else repr(p) for p in (e.start, e.stop, e.step))
            return f"{a}:{b}" + (f":{c}" if c else "")
        if e is Ellipsis:
            return "..."
        return literal(e) if type(e) in (int, bool) or e is None else None
    if type(idx) is tuple and idx:
        parts = [one(e) for e in idx]
        if None not in parts:
            return ", ".join(parts) + ("," if len(parts) == 1 and ":" not in parts[0]
                                       and parts[0] != "..." and type(idx[0]) is not int
                                       else "")
    return lit(idx, names)


class Twin(list):
    """A program's lines and, in ``pooled``, its twin's -- the same program writing into the
    buffers passes.buffers kept: every line is both programs' but where ``append`` is given
    the twin's own (a call with ``out=``).  So both are written in one walk, each once."""

    def __init__(self):
        super().__init__()
        self.pooled = []

    def append(self, line, pooled=None):
        super().append(line)
        self.pooled.append(line if pooled is None else pooled)


# roles whose nodes an element-reading dialect (a kernel's scalar body) writes its own way:
# the dialect's method for each
_ELEMENT_ROLES = {"gather_at_index": "gather", "sum_axes": "reduce", "join": "join",
                  "scatter_into_zeros": "pad"}


class Writer:
    """Writes nodes one at a time (in any topological order: the passes choose it) into
    ``lines``, keeping each written node's source in ``expr``; its ``dialect`` says how.

    A dialect answers ``constant``, ``input``, ``project``, ``accumulate`` (a step of an
    ``accumulate_into`` chain: ``fused``), ``in_place`` (the node overwrites its argument
    ``a``: ``inplace``), ``gather``, ``reduce`` and ``join`` (where the dialect
    ``reads_elements``: an element read, a short last axis summed, operands joined),
    ``apply`` (any other primitive) and ``done`` (after each node).  With ``twin``, ``lines``
    is a :class:`Twin`: the pooled program is written beside the plain one."""

    def __init__(self, g, names, dialect, fused=None, chain_end=None, inplace=None, twin=False):
        self.g, self.names, self.dialect = g, names, dialect
        self.lines = Twin() if twin else []
        self.expr = {}  # node index -> source of its value
        self.counter = 0
        self.fused = fused or {}
        self.chain_end = chain_end or {}
        self.inplace = inplace or {}
        self.guard_of = {}
        for i, b in g.guards:
            self.guard_of.setdefault(i, []).append(b)

    def fresh(self):
        self.counter += 1
        return f"v{self.counter}"

    def guards(self, i):
        for b in self.guard_of.get(i, ()):
            cond = f"not {self.expr[i]}" if b else self.expr[i]
            self.lines.append(f"if {cond}: raise GuardFailure({i})"
                              f"  # traced with {self.expr[i]} {'true' if b else 'false'}")

    def node(self, i):
        n = self.g.nodes[i]
        d = self.dialect
        step = self.fused.get(i)
        if n.kind == "const":
            d.constant(self, i)
            return
        if step is not None:
            if step[0] == "skip":  # its value is added in by its chain's next step
                return
            d.accumulate(self, i, step)
        elif n.kind == "input":
            d.input(self, i)
        elif n.kind == "proj":
            d.project(self, i)
        elif i in self.inplace:
            d.in_place(self, i, self.inplace[i])
        elif d.reads_elements and lowering_of(n.prim).role in _ELEMENT_ROLES:
            getattr(d, _ELEMENT_ROLES[lowering_of(n.prim).role])(self, i)
        else:
            d.apply(self, i)
        d.done(self, i)

    def write(self, order):
        for i in order:
            self.node(i)
        return self


class Dialect:
    """What every dialect does unless it says otherwise."""
    reads_elements = False

    def constant(self, w, i):
        pass

    def input(self, w, i):
        pass

    def done(self, w, i):
        pass

    def project(self, w, i):
        raise NotImplementedError(f"{type(self).__name__} has no form for a projection")

    def in_place(self, w, i, a):
        raise NotImplementedError(f"{type(self).__name__} has no in-place form")
