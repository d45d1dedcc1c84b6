"""What both code generators share: the analyses of the normalised IR and the primal
statements.

Which values carry a derivative (``active``), which may be overwritten (``unstable``:
assigned twice on a path, or inside a loop), and which may hold arrays (``arrays``):
programs are generated per kind of argument (scalar, integer, vector, array), and what
may be an array decides whether a cotangent is summed back (``unbroadcast``) and whether
adjoints accumulate with ``gx += c`` (immutable scalars) or ``gx = gx + c`` (arrays,
never updated in place, so traced values can flow through them).

The derivative text of each primitive comes from its rules, evaluated on symbols
(see :mod:`wengert.source.symbolic`); when that is not possible the program calls
the rule at run time (``b, b_pullback = pullback(sum, (x,), ...)``).  The generators
themselves: :mod:`.forward` (tangents ``dx``) and :mod:`.reverse` (a forward sweep,
then adjoints ``gx`` in reverse order).
"""
from __future__ import annotations

import ast as _ast
import contextvars
import functools

from .. import numpy as wnp
from ..core import Primitive
from ..rules import OPERATORS
from ..rules.elementwise import REGISTRY
from .ir import If, Keep, Loop, Op
from .normalize import normalise
from .symbolic import ADD, ATOM, MUL, Sym, SymTrace, Unknowable, prim_display

__all__ = ["BaseGen", "names_in", "index_value", "callee_scalar"]

_HELPERS = ("pullback", "pushforward", "vjp_call", "jvp_call", "unbroadcast", "broadcast_like",
            "add_at", "tangent_at")


def _text_prec(text):
    try:
        node = _ast.parse(text, mode="eval").body
    except SyntaxError:
        return 0
    if isinstance(node, (_ast.Name, _ast.Call, _ast.Attribute, _ast.Subscript, _ast.Constant)):
        if isinstance(node, _ast.Constant) and isinstance(node.value, (int, float)) and \
                node.value < 0:
            return 14
        return ATOM
    if isinstance(node, _ast.BinOp):
        return {_ast.Add: ADD, _ast.Sub: ADD, _ast.Pow: 15}.get(type(node.op), MUL)
    if isinstance(node, _ast.UnaryOp):
        return 14
    return 0


def names_in(text):
    """The names a line of generated code mentions (a header ``for ...:`` or ``else:`` too)."""
    text = text.strip()
    if text.endswith(":"):
        text += " pass"
    if text.startswith(("else:", "elif")):
        text = "if 1: pass\n" + text
    try:
        tree = _ast.parse(text)
    except SyntaxError:
        return set()
    return {n.id for n in _ast.walk(tree) if isinstance(n, _ast.Name)}


def _literal(text):
    try:
        return _ast.literal_eval(text), True
    except (ValueError, SyntaxError):
        return None, False


class BaseGen:
    """Analyses shared by both modes: activity, stability, which values may be arrays."""

    def __init__(self, fn, active_inputs, scalar_params):
        self.fn = fn
        self.used = set(fn.names) | set(_HELPERS)
        self.namespace = {}       # name -> object the generated code needs
        self.scalar_params = scalar_params
        self.count_assignments()
        self.activity(active_inputs)
        self.shapes()
        self.dnames = {}
        self.gnames = {}
        self.packs = {s.target for s, _ in self.walk(fn.body)
                      if isinstance(s, Op) and s.kind == "pack"}

    # -- naming ------------------------------------------------------------------------------
    def fresh(self, base):
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}{k}"
        self.used.add(name)
        return name

    def dname(self, v):
        if v not in self.dnames:
            self.dnames[v] = self.fresh("d" + v if "d" + v not in self.fn.names else "d_" + v)
        return self.dnames[v]

    def gname(self, v):
        if v not in self.gnames:
            self.gnames[v] = self.fresh("g" + v if "g" + v not in self.fn.names else "g_" + v)
        return self.gnames[v]

    # -- analyses ------------------------------------------------------------------------------
    def walk(self, body, depth=0):
        for s in body:
            yield s, depth
            if isinstance(s, If):
                yield from self.walk(s.body, depth)
                yield from self.walk(s.orelse, depth)
            elif isinstance(s, Loop):
                yield from self.walk(s.body, depth + 1)

    def count_assignments(self):
        """``counts``: how often a name is assigned along one path (branches are
        exclusive); ``unstable``: names that may be overwritten (more than once on a
        path, or inside a loop), whose old values the reverse sweep must keep."""
        in_loop = set()

        def path(body, depth):
            c = {}
            for s in body:
                sub = {}
                if isinstance(s, Op):
                    sub = {s.target: 1}
                elif isinstance(s, Keep):
                    sub = {t: 1 for t in s.targets}
                elif isinstance(s, If):
                    a, b = path(s.body, depth), path(s.orelse, depth)
                    sub = {k: max(a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b)}
                elif isinstance(s, Loop):
                    sub = path(s.body, depth + 1)
                    for t in s.names:
                        sub[t] = sub.get(t, 0) + 1
                    in_loop.update(sub)
                for k, v in sub.items():
                    c[k] = c.get(k, 0) + v
            return c

        counts = path(self.fn.body, 0)
        for p in self.fn.params:
            counts[p] = counts.get(p, 0) + 1
        self.unstable = {n for n, c in counts.items() if c > 1} | in_loop
        self.counts = counts

    def activity(self, inputs):
        active = set(inputs)
        changed = True
        while changed:
            changed = False
            for s, _ in self.walk(self.fn.body):
                if isinstance(s, Op) and s.kind != "inactive" and s.target not in active:
                    ops = list(s.args) + [v for v in s.params.values()
                                          if not isinstance(v, str)]
                    if any(o.is_name and o.name in active for o in ops):
                        active.add(s.target)
                        changed = True
        self.active = active

    def is_active(self, operand):
        return operand.is_name and operand.name in self.active

    def shapes(self):
        """``self.arrays``: names that may hold arrays (the rest are surely scalars)."""
        arrays = {p for p, s in zip(self.fn.params, self.scalar_params) if s not in "si"}
        self.vectors = {p for p, s in zip(self.fn.params, self.scalar_params) if s in "1ln"}
        int_names = {s.target for s, _ in self.walk(self.fn.body)
                     if isinstance(s, Loop) and s.range_args is not None
                     and self.counts.get(s.target) == 1}
        self.int_names = int_names
        # lists of scalars only ever indexed at integers: adjoint lists updated in place
        self.lists = {p for p, s in zip(self.fn.params, self.scalar_params)
                      if s in "ln" and self.counts.get(p) == 1}
        for st, _ in self.walk(self.fn.body):
            if isinstance(st, Op):
                for i, a in enumerate(st.args):
                    if a.is_name and a.name in self.lists and not (
                            st.kind == "sub" and i == 0 and _int_index(st.index, int_names)):
                        self.lists.discard(a.name)
                for v in st.params.values():
                    if not isinstance(v, str) and v.is_name:
                        self.lists.discard(v.name)
        changed = True
        while changed:
            changed = False
            for s, _ in self.walk(self.fn.body):
                targets = []
                if isinstance(s, Op):
                    if s.target in arrays:
                        continue
                    if s.kind == "inactive":
                        may = not self.scalar_text(s.text, arrays)
                    elif s.kind == "copy":
                        may = self.maybe_array(s.args[0], arrays)
                    elif s.kind == "prim" and _elementwise(s.fn) and not s.params:
                        may = any(self.maybe_array(a, arrays) for a in s.args)
                    elif s.kind == "sub":
                        # an element of a vector, at an integer index
                        may = not (s.args[0].is_name and s.args[0].name in self.vectors
                                   and self.counts.get(s.args[0].name) == 1
                                   and _int_index(s.index, int_names))
                    elif s.kind == "call":
                        may = not callee_scalar(s.fn, tuple(
                            "a" if self.maybe_array(a, arrays) else "s" for a in s.args))
                    else:
                        may = True
                    if may:
                        targets = [s.target]
                elif isinstance(s, Keep):
                    targets = [t for t in s.targets if t not in arrays]
                elif isinstance(s, Loop):
                    targets = [t for t in s.names if t not in arrays and t not in int_names]
                for t in targets:
                    arrays.add(t)
                    changed = True
        self.arrays = arrays

    def scalar_text(self, text, arrays):
        """Is an expression kept as written surely a scalar (numbers, scalar names,
        arithmetic, comparisons, len(), elementwise functions of those)?"""
        try:
            node = _ast.parse(text, mode="eval").body
        except SyntaxError:
            return False
        ns = self.fn.namespace

        def ok(n):
            if isinstance(n, _ast.Constant):
                return isinstance(n.value, (int, float, bool))
            if isinstance(n, _ast.Name):
                if n.id in self.counts:
                    return n.id not in arrays
                v = ns.get(n.id)
                return isinstance(v, (int, float, bool)) and not isinstance(v, type)
            if isinstance(n, _ast.Attribute) and isinstance(n.value, _ast.Name) and \
                    n.value.id not in self.counts:
                v = getattr(ns.get(n.value.id), n.attr, None)   # math.pi, np.e
                return isinstance(v, (int, float)) and not isinstance(v, bool)
            if isinstance(n, (_ast.BinOp,)):
                return not isinstance(n.op, _ast.MatMult) and ok(n.left) and ok(n.right)
            if isinstance(n, _ast.UnaryOp):
                return ok(n.operand)
            if isinstance(n, (_ast.Compare, _ast.BoolOp)):
                return True
            if isinstance(n, _ast.Call) and not n.keywords:
                if isinstance(n.func, _ast.Name) and n.func.id in ("len", "int", "float", "bool"):
                    return True
                f = None
                if isinstance(n.func, _ast.Name):
                    f = ns.get(n.func.id)
                elif isinstance(n.func, _ast.Attribute) and isinstance(n.func.value, _ast.Name):
                    mod = ns.get(n.func.value.id)
                    f = getattr(mod, n.func.attr, None) if mod is not None else None
                    if f is not None and getattr(mod, "__name__", "") == "math":
                        return all(ok(a) for a in n.args)
                if isinstance(f, Primitive) and _elementwise(f):
                    return all(ok(a) for a in n.args)
            return False
        return ok(node)

    def maybe_array(self, operand, arrays=None):
        arrays = self.arrays if arrays is None else arrays
        if operand.is_name:
            return operand.name in arrays or (operand.name not in self.fn.params and
                                              operand.name not in self.counts)
        if operand.has_value:
            return not isinstance(operand.value, (int, float))
        return not self.scalar_text(operand.text, arrays)

    def needs_unbroadcast(self, op, i):
        """Can argument ``i`` of a broadcasting primitive be smaller than the result?"""
        if not op.fn.broadcasting or len(op.args) < 2:
            return False
        a = op.args[i]
        others = [b for j, b in enumerate(op.args) if j != i]
        if not self.maybe_array(a):
            return any(self.maybe_array(b) for b in others)
        return any(self.maybe_array(b) and not (b.is_name and a.is_name and b.name == a.name)
                   for b in others)

    # -- symbols for a primitive's arguments ---------------------------------------------------
    def sym_args(self, trace, op):
        out = []
        for a in op.args:
            if a.is_name:
                out.append(trace.sym(a.name))
            elif a.has_value and isinstance(a.value, (int, float)):
                out.append(a.value)
            else:
                out.append(Sym(a.text, trace, _text_prec(a.text)))
        params = {}
        for k, text in op.params.items():
            v, ok = _literal(text)
            if not ok:
                raise Unknowable("a parameter that is not a literal")
            params[k] = v
        return out, params

    @property
    def local_names(self):
        return set(self.counts) | set(self.fn.params)

    def prim_ref(self, prim):
        """A name for calling ``prim`` itself (the run-time fallback)."""
        name = prim_display(prim)
        if name in self.local_names:
            name = self.fresh(name + "_")
        if name.startswith("wnp."):
            self.namespace["wnp"] = wnp
            return name
        if name in self.namespace and self.namespace[name] is not prim:
            name = self.fresh(name)
        self.namespace[name] = prim
        return name

    def args_text(self, op):
        return ", ".join(a.src() for a in op.args)

    def params_text(self, op):
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in op.params.items()) + "}"

    def tuple_text(self, items):
        items = list(items)
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def primal_line(self, op):
        """The statement computing ``op`` itself (the original program's line)."""
        if op.kind == "inactive":
            return f"{op.target} = {op.text}"
        if op.kind == "copy":
            return f"{op.target} = {op.args[0].src()}"
        if op.kind == "pack":
            items = [a.src() for a in op.args]
            return f"{op.target} = " + (f"[{', '.join(items)}]" if op.text == "list" else
                                        self.tuple_text(items))
        if op.kind == "sub":
            return f"{op.target} = {op.args[0].src()}[{op.index}]"
        if op.kind in ("call", "opaque"):
            self.namespace[op.fname] = op.fn
            kw = "".join(f", {k}={o.src() if not isinstance(o, str) else o}"
                         for k, o in op.params.items())
            return f"{op.target} = {op.fname}({self.args_text(op)}{kw})"
        if op.kind == "prim":
            trace = SymTrace(self.local_names, operators=not op.called)
            try:
                args, params = self.sym_args(trace, op)
                s = op.fn(*args, **params)
                if not isinstance(s, Sym):
                    raise Unknowable("constant")
                self.namespace.update(trace.used)
                return f"{op.target} = {s.text}"
            except Exception:
                name = self.prim_ref(op.fn)
                kw = "".join(f", {k}={v}" for k, v in op.params.items())
                return f"{op.target} = {name}({self.args_text(op)}{kw})"
        raise AssertionError(op.kind)


@functools.cache
def _elementwise_prims():
    """The primitives that are scalar in, scalar out: the elementwise registry and the
    operators (read once, on first use)."""
    prims = {p for p in REGISTRY.values() if isinstance(p, Primitive)}
    prims |= {p for k, p in OPERATORS.items()
              if isinstance(p, Primitive) and k not in ("__getitem__", "__setitem__",
                                                        "__matmul__", "__rmatmul__")}
    return frozenset(prims)


def _elementwise(prim):
    """Scalar in, scalar out: read from the registries (partials, operators, elementwise)."""
    return prim.fast_partials is not None or prim.broadcasting or prim in _elementwise_prims()


def index_value(text):
    """The index of ``x[...]`` as a value: ``1:`` is ``slice(1, None)``."""
    node = _ast.parse(f"_[{text}]", mode="eval").body.slice

    class Slices(_ast.NodeTransformer):
        def visit_Slice(self, n):
            parts = [self.visit(p) if p is not None else _ast.Constant(None)
                     for p in (n.lower, n.upper, n.step)]
            return _ast.Call(_ast.Name("slice", _ast.Load()), parts, [])
    node = Slices().visit(node)
    out = _ast.unparse(node)
    return f"({out})" if isinstance(node, _ast.Tuple) and not out.startswith("(") else out


def _int_index(text, int_names):
    """Is the index surely one integer (a constant, a range loop's variable, arithmetic)?"""
    try:
        node = _ast.parse(text, mode="eval").body
    except SyntaxError:
        return False

    def ok(n):
        if isinstance(n, _ast.Constant):
            return isinstance(n.value, int) and not isinstance(n.value, bool)
        if isinstance(n, _ast.Name):
            return n.id in int_names
        if isinstance(n, _ast.BinOp) and isinstance(n.op, (_ast.Add, _ast.Sub, _ast.Mult,
                                                            _ast.FloorDiv, _ast.Mod)):
            return ok(n.left) and ok(n.right)
        if isinstance(n, _ast.UnaryOp) and isinstance(n.op, _ast.USub):
            return ok(n.operand)
        return False
    return ok(node)


_CALLEE = {}
# the questions being answered in this thread (this contextvars context): a recursive
# function asks its own again
_IN_PROGRESS = contextvars.ContextVar("wengert_source_callee_in_progress", default=frozenset())


def callee_scalar(f, pattern):
    """Does the user function ``f`` return a scalar for arguments of these kinds?"""
    key = (f, pattern)
    if key in _CALLEE:
        return _CALLEE[key]
    asking = _IN_PROGRESS.get()
    if key in asking:
        return False  # recursion: assume the worst
    _IN_PROGRESS.set(asking | {key})
    try:
        fn = normalise(f)
        if fn.out_is_tuple or len(pattern) > len(fn.params):
            res = False
        else:
            pat = tuple(pattern) + ("s",) * (len(fn.params) - len(pattern))
            res = fn.outputs[0] not in BaseGen(fn, (), pat).arrays
    except Exception:
        res = False
    finally:
        _IN_PROGRESS.set(asking)
    _CALLEE[key] = res
    return res
