"""Derivative expressions as text, read off the rule registry itself.

A :class:`Sym` is a tracer whose "value" is a piece of Python source.  Running a
primitive's ``partials``, ``frule`` or ``rrule`` pullback on symbols (instead of
numbers) records what the rule computes, e.g. ``sin``'s partial gives the text
``cos(x)``, so the generated program ``gx += cos(x) * gb`` comes from the same
rule that ``Dual`` and ``Tape`` use: there is no second table of derivatives.

A rule that needs something a symbol cannot know (a shape, a branch on a value,
an array constant) raises :class:`Unknowable`; the code generator then falls
back to calling the rule at run time.
"""
from __future__ import annotations

import builtins
import functools
import math
import numbers
import operator

import numpy as np

from .. import numpy as wnp
from .._dispatch import ArrayTracer
from ..core import Primitive, Trace, Tracer, new_level
from ..rules import OPERATORS
from ..rules.lowering import OPERATOR_FORMS

__all__ = ["Sym", "SymTrace", "Unknowable", "display_names", "render_const"]


class Unknowable(Exception):
    """The rule needs something a symbolic value cannot provide (shape, branch...)."""


# operator precedence, as Python's grammar has it
ATOM, POW, UNARY, MUL, ADD, CMP, NOT, AND, OR = 100, 15, 14, 13, 12, 8, 6, 5, 4

_BINARY = {"__add__": ADD, "__sub__": ADD, "__mul__": MUL, "__truediv__": MUL,
           "__floordiv__": MUL, "__mod__": MUL, "__pow__": POW, "__matmul__": MUL}
_UNARY = ("__neg__", "__pos__")


def _symbol(dunder):
    """How the operator ``__add__`` names is written: the one operator table's symbol."""
    return OPERATOR_FORMS[getattr(operator, dunder.strip("_"))].symbol

@functools.cache
def operator_table():
    """Which primitives are Python operators: read from the registry's OPERATORS table
    (once, on first use): primitive -> (symbol, precedence, arity)."""
    table = {}
    for dunder, fn in OPERATORS.items():
        if not isinstance(fn, Primitive):
            continue
        if dunder in _BINARY:
            table[fn] = (_symbol(dunder), _BINARY[dunder], 2)
        elif dunder in _UNARY:
            table[fn] = (_symbol(dunder), UNARY, 1)
    return table


@functools.cache
def display_names():
    """primitive -> the name generated code calls it by, and name -> object to import.

    Names come from ``wengert.numpy``'s namespace (``sin``, ``where``...); names that
    would shadow a Python builtin (``sum``, ``abs``, ``round``) are written ``wnp.sum``.
    (Read once, on first use.)
    """
    by_prim = {}
    for name, obj in sorted(vars(wnp).items()):
        if name.startswith("_") or not isinstance(obj, Primitive):
            continue
        # prefer the primitive's own name (absolute over abs), else the first alias
        if obj in by_prim and name != obj.name:
            continue
        by_prim[obj] = name
    out = {}
    for prim, name in by_prim.items():
        out[prim] = f"wnp.{name}" if hasattr(builtins, name) else name
    return out


def prim_display(prim):
    """The text naming ``prim`` in generated code (and whether it needs importing)."""
    name = display_names().get(prim)
    if name is not None:
        return name
    return _safe_ident(prim.name)


def _safe_ident(name):
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return s if s and not s[0].isdigit() else "_" + s


def render_const(v):
    """Python source for a constant, or raise Unknowable."""
    if v is None or isinstance(v, (bool, np.bool_)):
        return repr(bool(v)) if v is not None else "None", ATOM
    if isinstance(v, numbers.Integral):
        v = int(v)
        return repr(v), (UNARY if v < 0 else ATOM)
    if isinstance(v, numbers.Real):
        v = float(v)
        if math.isinf(v) or math.isnan(v):
            raise Unknowable("a non-finite constant")
        if math.isinf(v):
            return ("math.inf" if v > 0 else "-math.inf"), (ATOM if v > 0 else UNARY)
        if math.isnan(v):
            return "math.nan", ATOM
        return repr(v), (UNARY if v < 0 or repr(v).startswith("-") else ATOM)
    if isinstance(v, str):
        return repr(v), ATOM
    if isinstance(v, tuple) and all(isinstance(e, (int, np.integer)) or e is None for e in v):
        return repr(tuple(None if e is None else int(e) for e in v)), ATOM
    raise Unknowable(f"constant {type(v).__name__}")


class Sym(ArrayTracer):
    """A symbolic value: ``text`` is Python source, ``prec`` its precedence.

    ``lin`` marks expressions linear in a tangent or cotangent (rendered last in a
    product, as the seeds write ``cos(x) * dx``); ``neg`` holds the operand of a
    negation so ``a + -b`` prints as ``a - b``.
    """

    __slots__ = ("text", "prec", "_trace", "lin", "neg", "const")

    def __init__(self, text, trace, prec=ATOM, lin=False, neg=None):
        self.text, self._trace, self.prec, self.lin, self.neg = text, trace, prec, lin, neg

    @property
    def value(self):
        raise Unknowable("a rule asked for the value of a symbolic argument")

    def __bool__(self):
        raise Unknowable("a rule branched on a symbolic value")

    def __repr__(self):
        return f"Sym({self.text!r})"

    # comparisons and boolean masks become text too (rules use them inside where())
    def _cmp(self, other, op):
        return self._trace.compare(self, other, op)

    def __lt__(self, o): return self._cmp(o, "<")
    def __le__(self, o): return self._cmp(o, "<=")
    def __gt__(self, o): return self._cmp(o, ">")
    def __ge__(self, o): return self._cmp(o, ">=")
    def __eq__(self, o): return self._cmp(o, "==")
    def __ne__(self, o): return self._cmp(o, "!=")
    def __or__(self, o): return self._cmp(o, "|")
    def __ror__(self, o): return self._trace.compare(o, self, "|")
    def __and__(self, o): return self._cmp(o, "&")
    def __rand__(self, o): return self._trace.compare(o, self, "&")
    def __invert__(self): return Sym(f"~{_wrap(self, UNARY)}", self._trace, UNARY)
    __hash__ = Tracer.__hash__


def _wrap(s, prec, strict=False):
    t, p = (s.text, s.prec) if isinstance(s, Sym) else render_const(s)
    if p < prec or (strict and p == prec):
        return f"({t})"
    return t


def _is_const(v, c):
    return not isinstance(v, Tracer) and isinstance(v, numbers.Real) and \
        not isinstance(v, (bool, np.bool_)) and float(v) == c


class SymTrace(Trace):
    """Builds expression text for every primitive applied to symbols.

    ``memo`` maps a primitive applied to given arguments to an existing symbol,
    so that a rule recomputing its own output (``ans = power(x, y)``) refers to
    the variable the program already assigned.
    """

    def __init__(self, reserved=(), operators=True):
        self.level = new_level()
        # operators=False: ``subtract(x, y)`` rather than ``x - y`` (on Python floats the
        # call gives NumPy's scalar type, the operator a float)
        self.operators = operators
        self.memo = {}
        self.used = {}   # names the texts call -> the objects they must resolve to
        self.reserved = set(reserved)  # the program's own variables: not function names

    def sym(self, text, lin=False):
        return Sym(text, self, ATOM, lin)

    @staticmethod
    def key(prim, args, params):
        parts = []
        for a in args:
            parts.append(("s", a.text) if isinstance(a, Sym) else ("c", render_const(a)[0]))
        return (id(prim), tuple(parts), tuple(sorted((k, repr(v)) for k, v in params.items())))

    def remember(self, prim, args, params, result):
        self.memo[self.key(prim, args, params)] = result

    def compare(self, a, b, op):
        prec = CMP if op not in ("|", "&") else (7 if op == "|" else 9)
        return Sym(f"{_wrap(a, prec + 1)} {op} {_wrap(b, prec + 1)}", self, prec)

    def process(self, prim, args, params):
        if prim.multiple_results:
            raise Unknowable("primitive with several results")
        try:
            k = self.key(prim, args, params)
        except Unknowable:
            k = None
        if k is not None and k in self.memo:
            return self.memo[k]
        for a in args:
            if isinstance(a, Tracer) and not isinstance(a, Sym):
                raise Unknowable("mixed tracers")
        lin = any(isinstance(a, Sym) and a.lin for a in args)
        op = operator_table().get(prim) if self.operators else None
        if op is not None and not params:
            sym, prec, arity = op
            if arity == 1:
                return self._unary(sym, args[0], lin)
            return self._binary(sym, prec, args[0], args[1], lin)
        name = prim_display(prim)
        if name in self.reserved or name in ("wnp",):
            short = display_names().get(prim)
            if short is None or "wnp" in self.reserved:
                raise Unknowable(f"the name {name} is a variable of the program")
            name = short if short.startswith("wnp.") else f"wnp.{short}"
        if name.startswith("wnp."):
            self.used["wnp"] = wnp
        else:
            self.used[name] = prim
        parts = [_wrap(a, 0) for a in args]
        for kname, v in params.items():
            parts.append(f"{kname}={render_const(v)[0]}")
        return Sym(f"{name}({', '.join(parts)})", self, ATOM, lin)

    # -- algebra kept to what makes the text read like the seeds' -------------------
    def _unary(self, sym, x, lin):
        if sym == "+":
            return x
        if isinstance(x, Sym) and x.neg is not None:
            return x.neg  # --a is a
        return Sym(f"-{_wrap(x, UNARY)}", self, UNARY, lin, neg=x)

    def _binary(self, sym, prec, a, b, lin):
        if sym == "*":
            if _is_const(a, 1.0):
                return b
            if _is_const(b, 1.0):
                return a
            if _is_const(a, -1.0):
                return self._unary("-", b, lin)
            if _is_const(b, -1.0):
                return self._unary("-", a, lin)
            if isinstance(a, Sym) and a.neg is not None:   # (-a) * b is -(a * b)
                return self._unary("-", self._binary("*", MUL, a.neg, b, lin), lin)
            if isinstance(b, Sym) and b.neg is not None:
                return self._unary("-", self._binary("*", MUL, a, b.neg, lin), lin)
            # the seeds write the local derivative first: cos(x) * dx, y * ga
            if isinstance(a, Sym) and a.lin and not (isinstance(b, Sym) and b.lin):
                a, b = b, a
        elif sym == "/":
            if _is_const(b, 1.0):
                return a
            if isinstance(a, Sym) and a.neg is not None:
                return self._unary("-", self._binary("/", MUL, a.neg, b, lin), lin)
        elif sym == "+":
            if isinstance(b, Sym) and b.neg is not None:
                return self._binary("-", ADD, a, b.neg, lin)
            if isinstance(a, Sym) and a.neg is not None and isinstance(b, Sym):
                return self._binary("-", ADD, b, a.neg, lin)
        elif sym == "-":
            if isinstance(b, Sym) and b.neg is not None:
                return self._binary("+", ADD, a, b.neg, lin)
        elif sym == "**":
            if _is_const(b, 1.0):
                return a
            # right-associative: the left operand needs parentheses at equal precedence
            return Sym(f"{_wrap(a, POW, strict=True)} ** {_wrap(b, UNARY)}", self, POW, lin)
        return Sym(f"{_wrap(a, prec)} {sym} {_wrap(b, prec, strict=True)}", self, prec, lin)
