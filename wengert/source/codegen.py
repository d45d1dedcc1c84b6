"""Derivative programs from the normalised IR: forward (tangents ``dx``) and reverse
(a forward sweep, then adjoints ``gx`` in reverse order).

The derivative text of each primitive comes from its rules, evaluated on symbols
(see :mod:`wengert.source.symbolic`); when that is not possible the program calls
the rule at run time (``b, b_pullback = pullback(sum, (x,), ...)``).

Values the reverse sweep needs and that may be overwritten later (anything
assigned twice or inside a loop) are pushed on ``stack`` right after they are
computed and popped just before the adjoint statements that read them.  Branches
push which way they went (unless the test can simply be evaluated again) and loops
push their iteration count (unless they run over a ``range`` that can be reversed).

Programs are generated per kind of argument (scalar, integer, vector, array): what
may be an array decides whether a cotangent is summed back (``unbroadcast``) and
whether adjoints accumulate with ``gx += c`` (immutable scalars) or ``gx = gx + c``
(arrays, never updated in place, so traced values can flow through them).
"""
from __future__ import annotations

import ast as _ast
import re

from ..core import Primitive
from .normalize import Break, If, Keep, Loop, Op, SourceError
from .symbolic import (ADD, ATOM, MUL, Sym, SymTrace, Unknowable,
                       prim_display, render_const)

__all__ = ["ReverseGen", "ForwardGen"]

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


def _names_in(text):
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


class _Base:
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
            from .. import numpy as wnp
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


# ================================================================================================
class ForwardGen(_Base):
    """Program B: each statement followed by its differential."""

    def __init__(self, fn, scalar_params, transform):
        super().__init__(fn, [p for p, k in zip(fn.params, scalar_params) if k != "i"],
                         scalar_params)
        self.transform = transform  # f -> name of its generated jvp (for user calls)

    def block(self, body, ind):
        lines = []
        for s in body:
            if isinstance(s, Op):
                for line in self.op(s):
                    lines.append(ind + line)
            elif isinstance(s, Keep):
                lines.append(ind + s.text)
            elif isinstance(s, Break):
                lines.append(ind + "break")
            elif isinstance(s, If):
                lines.append(f"{ind}if {s.test}:")
                lines += self.block(s.body, ind + "    ") or [ind + "    pass"]
                if s.orelse:
                    lines.append(f"{ind}else:")
                    lines += self.block(s.orelse, ind + "    ")
            elif isinstance(s, Loop):
                lines.append(f"{ind}{s.header}:")
                lines += self.block(s.body, ind + "    ") or [ind + "    pass"]
        return lines

    def tangent(self, operand):
        return self.dname(operand.name) if self.is_active(operand) else None

    def op(self, op):
        v = op.target
        if v not in self.active:
            return [self.primal_line(op)]
        dv = self.dname(v)
        if op.kind == "inactive":
            return [self.primal_line(op), f"{dv} = 0.0"]
        if op.kind == "copy":
            t = self.tangent(op.args[0])
            return [self.primal_line(op), f"{dv} = {t if t else '0.0'}"]
        if op.kind == "pack":   # the tangent of a list is the list of tangents
            ts = [self.tangent(a) or "0.0" for a in op.args]
            return [self.primal_line(op), f"{dv} = " + (
                f"[{', '.join(ts)}]" if op.text == "list" else self.tuple_text(ts))]
        if op.kind == "sub":
            base = op.args[0].name
            t = self.tangent(op.args[0])
            if not t:
                return [self.primal_line(op), f"{dv} = 0.0"]
            if base in self.fn.params and self.counts.get(base) == 1:
                # a parameter's tangent has its shape (the caller's, broadcast on entry)
                return [self.primal_line(op), f"{dv} = {t}[{op.index}]"]
            # any other tangent may still be the zero 0.0 on the path the program took
            self.namespace["tangent_at"] = _runtime("tangent_at")
            return [self.primal_line(op),
                    f"{dv} = tangent_at({t}, {base}, {_index_value(op.index)})"]
        if op.kind == "prim":
            try:
                text = self.symbolic(op)
                line = self.primal_line(op)
                if text is None:
                    return [line, f"{dv} = 0.0"]
                if any(self.needs_unbroadcast(op, i) for i in range(len(op.args))
                       if self.is_active(op.args[i])):
                    self.namespace["broadcast_like"] = _runtime("broadcast_like")
                    text = f"broadcast_like({text}, {v})"
                return [line, f"{dv} = {text}"]
            except Exception:
                pass
            name = self.prim_ref(op.fn)
            self.namespace["pushforward"] = _runtime("pushforward")
            ts = [self.tangent(a) or "None" for a in op.args]
            return [f"{v}, {dv} = pushforward({name}, {self.tuple_text(a.src() for a in op.args)}"
                    f", {self.tuple_text(ts)}, {self.params_text(op)})"]
        if op.kind == "call":
            name = self.transform(op.fn)
            ts = [self.tangent(a) or "0.0" for a in op.args]
            return [f"{v}, {dv} = {name}({self.tuple_text(a.src() for a in op.args)}, "
                    f"{self.tuple_text(ts)})"]
        if op.kind == "opaque":
            self.namespace[op.fname] = op.fn
            self.namespace["jvp_call"] = _runtime("jvp_call")
            ts = [self.tangent(a) or "None" for a in op.args]
            kw = "{" + ", ".join(f"{k!r}: {o.src() if not isinstance(o, str) else o}"
                                 for k, o in op.params.items()) + "}"
            return [f"{v}, {dv} = jvp_call({op.fname}, {self.tuple_text(a.src() for a in op.args)}"
                    f", {self.tuple_text(ts)}, {kw})"]
        raise AssertionError(op.kind)

    def symbolic(self, op):
        """The tangent text of a primitive, from its rules; None if it is zero."""
        trace = SymTrace(self.local_names)
        args, params = self.sym_args(trace, op)
        ans = trace.sym(op.target)
        trace.remember(op.fn, args, params, ans)
        prim = op.fn
        tangents = [trace.sym(self.dname(a.name), lin=True) if self.is_active(a) else None
                    for a in op.args]
        if prim._partials is not None:
            ps = prim._partials(ans, *args, **params)
            terms = []
            for p, t in zip(ps, tangents):
                if p is None or t is None:
                    continue
                terms.append(p * t)
            out = None
            for t in terms:
                out = t if out is None else out + t
        else:
            if prim._frule is None:
                raise Unknowable("no frule")
            if not prim._symbolic_zeros and any(t is None for t in tangents):
                raise Unknowable("zeros needed")
            _, out = prim._frule(tuple(args), tuple(tangents), **params)
        if out is None:
            return None
        self.namespace.update(trace.used)
        if not isinstance(out, Sym):
            return render_const(out)[0]
        return out.text

    def generate(self, name):
        body = self.block(self.fn.body, "    ")
        ps = self.fn.params
        dps = [self.dname(p) for p in ps]
        outs = self.fn.outputs
        douts = []
        for o in outs:
            douts.append(self.dname(o) if o in self.active else "0.0")
        head = [f"def {name}(primals, tangents):",
                f"    {', '.join(ps)}{',' if len(ps) == 1 else ''} = primals",
                f"    {', '.join(dps)}{',' if len(dps) == 1 else ''} = tangents"]
        if self.fn.out_is_tuple:
            ret = f"    return ({', '.join(outs)},), ({', '.join(douts)},)"
        else:
            ret = f"    return {outs[0]}, {douts[0]}"
        return "\n".join(head + body + [ret]) + "\n", body


# ================================================================================================
class ReverseGen(_Base):
    """A forward sweep, then the adjoint statements in reverse order."""

    def __init__(self, fn, active_inputs, scalar_params, transform, split=False):
        super().__init__(fn, active_inputs, scalar_params)
        self.transform = transform  # f -> name of its generated vjp (for user calls)
        self.split = split
        self.stack = None
        self.restored = set()       # loop targets the reverse loop sets again
        self.accumulated = set()    # adjoint names that receive contributions
        self.ct = None
        self.pb_unstable = set()
        self.list_adjoints = {}     # adjoint lists of list arguments: gx -> x

    def check_lists(self):
        """A list argument used whole would get a list as adjoint, which ``+=`` would
        concatenate: refuse it (arrays work)."""
        for p, kind in zip(self.fn.params, self.scalar_params):
            if kind == "l" and p in self.active and p not in self.lists:
                raise SourceError(f"the list argument {p!r} used as a whole (not only indexed)",
                                  self.fn.first_line, self.fn.filename,
                                  "pass a NumPy array instead of a list")

    def stack_name(self):
        if self.stack is None:
            self.stack = self.fresh("stack")
        return self.stack

    def g(self, v):
        return self.gname(v)

    # -- one assignment -----------------------------------------------------------------------
    def acc(self, target_var, contribution):
        """``gx += c`` (``gx -= c`` for a negation; ``gx = gx + c`` for arrays)."""
        gv = self.g(target_var)
        self.accumulated.add(gv)
        if target_var in self.packs:
            # a list passed to one call: its adjoint (a list) is that call's contribution
            return f"{gv} = {contribution.text if isinstance(contribution, Sym) else contribution}"
        if isinstance(contribution, Sym):
            neg = contribution.neg
            c, prec = (neg.text, neg.prec) if neg is not None else (contribution.text,
                                                                    contribution.prec)
            op = "-" if neg is not None else "+"
        else:
            c, prec, op = contribution, ATOM, "+"
        if target_var in self.arrays:
            if prec <= ADD:
                c = f"({c})"
            return f"{gv} = {gv} {op} {c}"
        return f"{gv} {op}= {c}"

    def op(self, op):
        """(forward lines, reverse lines) for one assignment."""
        v = op.target
        fwd = [self.primal_line(op)]
        if v not in self.active or id(op) not in self.live:
            return fwd, []
        gv = self.g(v)
        rev = []
        actives = [i for i, a in enumerate(op.args) if self.is_active(a)]
        if op.kind == "inactive":
            pass
        elif op.kind == "copy":
            if actives:
                rev.append(self.acc(op.args[0].name, Sym(gv, None)))
        elif op.kind == "pack":   # the adjoint of a list is a list: element i goes to args[i]
            for i in actives:
                rev.append(self.acc(op.args[i].name, f"{gv}[{i}]"))
        elif op.kind == "sub":
            if actives:
                base = op.args[0].name
                gb = self.g(base)
                if base in self.lists:
                    self.list_adjoints[gb] = base
                    rev.append(f"{gb}[{op.index}] += {gv}")
                else:
                    self.namespace["add_at"] = _runtime("add_at")
                    self.accumulated.add(gb)
                    rev.append(f"{gb} = add_at({gb}, {base}, {_index_value(op.index)}, {gv})")
        elif op.kind == "prim":
            try:
                rev = self.symbolic(op, actives)
            except Exception:
                name = self.prim_ref(op.fn)
                self.namespace["pullback"] = _runtime("pullback")
                pb = self.pullback_name(v)
                needs = self.tuple_text("True" if i in actives else "False"
                                        for i in range(len(op.args)))
                fwd = [f"{v}, {pb} = pullback({name}, "
                       f"{self.tuple_text(a.src() for a in op.args)}, {needs}, "
                       f"{self.params_text(op)})"]
                rev = self.spread(pb, gv, op, actives)
        elif op.kind in ("call", "opaque"):
            pb = self.pullback_name(v)
            args = self.tuple_text(a.src() for a in op.args)
            if op.kind == "call":
                name = self.transform(op.fn)
                fwd = [f"{v}, {pb} = {name}({', '.join(a.src() for a in op.args)})"]
            else:
                self.namespace[op.fname] = op.fn
                self.namespace["vjp_call"] = _runtime("vjp_call")
                act = self.tuple_text("True" if i in actives else "False"
                                      for i in range(len(op.args)))
                kw = "{" + ", ".join(f"{k!r}: {o.src() if not isinstance(o, str) else o}"
                                     for k, o in op.params.items()) + "}"
                fwd = [f"{v}, {pb} = vjp_call({op.fname}, {args}, {act}, {kw})"]
            rev = self.spread(pb, gv, op, actives)
        if v in self.unstable and rev:
            rev.append(f"{gv} = 0.0")
        elif v in self.unstable and v in self.active:
            rev.append(f"{gv} = 0.0")
        return fwd, rev

    def live_adjoints(self):
        """The assignments whose adjoint may be nonzero when the reverse sweep reaches them.

        The others (a value never used on the way to the output, or used only where no
        derivative flows) get no adjoint statements: their adjoint would be the scalar
        ``0.0``, which a pullback expecting an array cotangent rejects, and work anyway.
        The analysis runs the reverse sweep on sets of names whose adjoint may be nonzero
        (branches: the union; loops: until nothing changes).
        """
        live = set()

        def block(body, nz):
            for s in reversed(body):
                if isinstance(s, Op):
                    if s.target in nz and s.target in self.active:
                        live.add(id(s))
                        nz |= {a.name for a in s.args if self.is_active(a)}
                    if s.target in self.unstable:
                        nz.discard(s.target)  # the reset after its adjoint statements
                elif isinstance(s, If):
                    nz = block(s.body, set(nz)) | block(s.orelse, set(nz))
                elif isinstance(s, Loop):
                    head = set(nz)
                    while True:
                        grown = head | block(s.body, set(head))
                        if grown == head:
                            break
                        head = grown
                    nz = head
            return nz

        block(self.fn.body, {self.fn.outputs[0]})
        return live

    def pullback_name(self, v):
        pb = self.fresh(f"{v}_pullback")
        if v in self.unstable:
            self.pb_unstable.add(pb)
        return pb

    def spread(self, pb, gv, op, actives):
        if not actives:
            return []
        if len(actives) == 1:
            i = actives[0]
            return [self.acc(op.args[i].name, f"{pb}({gv})[{i}]")]
        if self.ct is None:
            self.ct = self.fresh("ct")
        lines = [f"{self.ct} = {pb}({gv})"]
        for i in actives:
            lines.append(self.acc(op.args[i].name, f"{self.ct}[{i}]"))
        return lines

    def symbolic(self, op, actives):
        trace = SymTrace(self.local_names)
        args, params = self.sym_args(trace, op)
        ans = trace.sym(op.target)
        trace.remember(op.fn, args, params, ans)
        g = trace.sym(self.g(op.target), lin=True)
        prim = op.fn
        n = len(op.args)
        if prim._partials is not None:
            ps = prim._partials(ans, *args, **params)
            cts = [None if (p is None or i not in actives) else p * g
                   for i, p in enumerate(ps)]
        else:
            if prim._rrule is None:
                raise Unknowable("no rrule")
            needs = tuple(i in actives for i in range(n))
            if prim._rrule_needs:
                _, pb = prim._rrule(*args, needs=needs, **params)
            else:
                _, pb = prim._rrule(*args, **params)
            cts = pb(g)
            if not isinstance(cts, (tuple, list)):
                cts = (cts,)
        if len(cts) != n:
            raise Unknowable("pullback arity")
        self.namespace.update(trace.used)
        lines = []
        for i in actives:
            c = cts[i]
            if c is None:
                continue
            if not isinstance(c, Sym):
                c = Sym(render_const(c)[0], trace)
            if self.needs_unbroadcast(op, i):
                self.namespace["unbroadcast"] = _runtime("unbroadcast")
                neg = c.neg
                inner = neg if neg is not None else c
                wrapped = Sym(f"unbroadcast({inner.text}, {op.args[i].name})", trace)
                c = Sym(f"-{wrapped.text}", trace, 14, neg=wrapped) if neg is not None else wrapped
            lines.append(self.acc(op.args[i].name, c))
        return lines

    # -- blocks -------------------------------------------------------------------------------
    def block(self, body, ind, btail=()):
        """(forward lines, reverse lines) of a block; the reverse lines are already reversed.

        ``btail``: statements the forward sweep runs just before a ``break`` (the branch
        flags of the enclosing ifs, which must be the last things pushed).
        """
        fwd, rev_parts = [], []
        for s in body:
            f, r = self.stmt(s, ind, btail)
            fwd += f
            rev_parts.append(r)
        rev = []
        for r in reversed(rev_parts):
            rev += r
        return fwd, rev

    def stmt(self, s, ind, btail=()):
        inner = ind + "    "
        if isinstance(s, Op):
            fwd, rev = self.op(s)
            need = set()
            for line in rev:
                need |= _names_in(line)
            need = sorted(n for n in need if (n in self.unstable and n not in self.restored
                                              and n not in self.gnames.values() and n != self.ct
                                              and n in self.counts) or n in self.pb_unstable)
            if need:
                st = self.stack_name()
                one = need[0] if len(need) == 1 else None
                fwd.append(f"{st}.append({one if one else '(' + ', '.join(need) + ')'})")
                rev = [f"{', '.join(need)} = {st}.pop()"] + rev
            return [ind + x for x in fwd], [ind + x for x in rev]
        if isinstance(s, Keep):
            return [ind + s.text], []
        if isinstance(s, Break):
            return [ind + x for x in btail] + [ind + "break"], []
        if isinstance(s, If):
            raises = [_raises(s.body), _raises(s.orelse)]
            if any(raises) and not all(raises):
                # a completed run went the other way: nothing to record
                bf, br = self.block(s.body, inner, btail)
                of, orv = self.block(s.orelse, inner, btail)
                fwd = [f"{ind}if {s.test}:"] + (bf or [inner + "pass"])
                if of:
                    fwd += [f"{ind}else:"] + of
                return fwd, [x[4:] for x in (orv if raises[0] else br)]
            stable = all(n not in self.unstable for n in _names_in(s.test))
            st = None if stable else self.stack_name()
            push_t = () if stable else (f"{st}.append(True)",)
            push_f = () if stable else (f"{st}.append(False)",)
            bf, br = self.block(s.body, inner, tuple(push_t) + tuple(btail))
            of, orv = self.block(s.orelse, inner, tuple(push_f) + tuple(btail))
            if (not br and not orv) or stable:
                if not br and not orv and not stable:
                    # nothing to reverse: run it again without the flags
                    bf, _ = self.block(s.body, inner, btail)
                    of, _ = self.block(s.orelse, inner, btail)
                fwd = [f"{ind}if {s.test}:"] + (bf or [inner + "pass"])
                if of:
                    fwd += [f"{ind}else:"] + of
                if not br and not orv:
                    return fwd, []
                test = s.test
            else:
                fwd = [f"{ind}if {s.test}:"] + _ending(bf, inner + push_t[0], s.body)
                fwd += [f"{ind}else:"] + _ending(of, inner + push_f[0], s.orelse)
                test = f"{st}.pop()"
            if br:
                rev = [f"{ind}if {test}:"] + br
                if orv:
                    rev += [f"{ind}else:"] + orv
            else:
                rev = [f"{ind}if not ({test}):" if stable else f"{ind}if not {test}:"] + orv
            return fwd, rev
        if isinstance(s, Loop):
            reversible = (not s.is_while and s.target is not None and s.range_args is not None
                          and self.counts.get(s.target, 0) == 1
                          and all(n not in self.unstable for a in s.range_args
                                  for n in _names_in(a))
                          and not _has_break(s.body))
            if reversible and not self.split:
                # the reverse loop sets the loop variable again: nothing to push for it.
                # (In a pullback closure that assignment would make it local to the
                # pullback, so there it is pushed like any other value.)
                self.restored.add(s.target)
            bf, br = self.block(s.body, inner)
            br = self.iteration_locals(s.body, br, inner)
            if not br:
                return [f"{ind}{s.header}:"] + (bf or [inner + "pass"]), []
            if reversible:
                uses_target = not self.split and any(s.target in _names_in(x) for x in br)
                head = (f"for {s.target} in reversed(range({', '.join(s.range_args)}))"
                        if uses_target else f"for {s.target} in range({', '.join(s.range_args)})")
                return [f"{ind}{s.header}:"] + bf, [f"{ind}{head}:"] + br
            st = self.stack_name()
            cnt = self.fresh("count")
            fwd = [f"{ind}{cnt} = 0", f"{ind}{s.header}:", f"{inner}{cnt} += 1"] + bf + \
                  [f"{ind}{st}.append({cnt})"]
            rev = [f"{ind}for _ in range({st}.pop()):"] + br
            return fwd, rev
        raise AssertionError(type(s))

    def iteration_locals(self, body, rev, ind):
        """Inside a loop, a value defined and used only in one iteration starts its adjoint
        with ``gv = ...`` (its first contribution) instead of ``gv += ...`` and a reset."""
        defined = {}
        used_in_text = set()
        for s, depth in self.walk(self.fn.body):
            if isinstance(s, If):
                used_in_text |= _names_in(s.test)
            elif isinstance(s, Loop):
                used_in_text |= _names_in(s.header)
            elif isinstance(s, Keep):
                used_in_text |= _names_in(s.text)
            elif isinstance(s, Op):
                for t in (s.text, s.index):
                    if t:
                        used_in_text |= _names_in(t)
        direct = [s for s in body if isinstance(s, Op)]
        pos = {id(s): k for k, s in enumerate(body)}
        for s in direct:
            defined.setdefault(s.target, []).append(s)
        local = set()
        for v, defs in defined.items():
            if len(defs) != 1 or self.counts.get(v) != 1 or v in self.fn.params or \
                    v in self.fn.outputs or v in used_in_text or v not in self.active:
                continue
            k = pos[id(defs[0])]
            ok = True
            for s, _ in self.walk(self.fn.body):
                if not isinstance(s, Op) or s is defs[0]:
                    continue
                names = {a.name for a in s.args if a.is_name} | {
                    o.name for o in s.params.values() if not isinstance(o, str) and o.is_name}
                if v in names and (id(s) not in pos or pos[id(s)] <= k):
                    ok = False
                    break
            if ok:
                local.add(v)
        if not local:
            return rev
        out = list(rev)
        for v in local:
            g = self.gnames.get(v)
            if g is None:
                continue
            pat = re.compile(rf"\b{g}\b")
            first = None
            for k, line in enumerate(out):
                if pat.search(line):
                    first = k
                    break
            if first is None:
                continue
            line = out[first]
            m = re.match(rf"^{ind}{g} ([+-])= (.*)$", line) or \
                re.match(rf"^{ind}{g} = {g} ([+-]) (.*)$", line)
            if not m:
                continue
            sign, e = m.groups()
            later = any(re.match(rf"^\s*{g} [+-]= ", x) for x in out[first + 1:])
            if sign == "+" and later and not _fresh_value(e):
                continue  # gv = gs, then gv += ... would change gs's object too
            if sign == "-":
                e = f"-({e})" if not re.fullmatch(r"[\w.]+", e) else f"-{e}"
            out[first] = f"{ind}{g} = {e}"
            # the reset after the definition is no longer needed
            for k in range(len(out) - 1, first, -1):
                if out[k] == f"{ind}{g} = 0.0":
                    del out[k]
                    break
        return out

    def generate(self, name, argnums, out_tuple):
        if self.fn.out_is_tuple:
            raise SourceError("reverse mode of a function returning a tuple",
                              self.fn.first_line, self.fn.filename,
                              "wg.source.grad needs a scalar output")
        self.check_lists()
        self.live = self.live_adjoints()
        fwd, rev = self.block(self.fn.body, "    ")
        out = self.fn.outputs[0]
        ps = self.fn.params
        wrt = ps if self.split else [ps[i] for i in argnums]
        # (a parameter assigned again has its adjoint reset: the reset is read by the return)
        rev = _peephole(rev, {self.g(p) for p in wrt if p in self.active})
        gout = self.g(out) if out in self.active else None
        # (in a pullback every parameter gets an entry; integers get 0.0)
        read = set()
        for line in rev:
            read |= _names_in(line)
        read &= set(self.gnames.values())
        init = sorted((self.accumulated | read | {self.g(p) for p in wrt if p in self.active})
                      - {gout} - set(self.list_adjoints))
        init_lines = [f"    {' = '.join(init)} = 0.0"] if init else []
        init_lines += [f"    {g} = [0.0] * len({x})" for g, x in sorted(self.list_adjoints.items())]
        grads = [self.g(p) if p in self.active else "0.0" for p in wrt]
        st = [f"    {self.stack} = []"] if self.stack else []
        sig = ", ".join(f"{p}={self.fn.defaults[p]}" if p in self.fn.defaults else p for p in ps)
        if not self.split:
            lines = [f"def {name}({sig}):"] + st + fwd + init_lines
            if gout:
                if out in self.arrays:  # may not be a scalar: checked when the program runs
                    self.namespace["seed"] = _runtime("seed")
                    lines.append(f"    {gout} = seed({out})")
                else:
                    lines.append(f"    {gout} = 1.0")
            lines += rev
            if out_tuple:
                lines.append(f"    return {self.tuple_text(grads)}")
            else:
                lines.append(f"    return {grads[0]}")
            return "\n".join(lines) + "\n", (fwd, init_lines, gout, rev)
        # split: the forward sweep returns its value and a pullback closing over it
        gparam = gout or self.fresh("g" + out)
        lines = [f"def {name}({sig}):"] + st + fwd
        lines.append(f"    def pullback({gparam}):")
        lines += ["    " + x for x in init_lines]
        lines += ["    " + x for x in rev]
        lines.append(f"        return {self.tuple_text(grads)}")
        lines.append(f"    return {out}, pullback")
        return "\n".join(lines) + "\n", None


_ELEMENTWISE = None


def _elementwise(prim):
    """Scalar in, scalar out: read from the registries (partials, operators, elementwise)."""
    global _ELEMENTWISE
    if _ELEMENTWISE is None:
        from ..rules import OPERATORS
        from ..rules.elementwise import REGISTRY
        _ELEMENTWISE = {p for p in REGISTRY.values() if isinstance(p, Primitive)}
        _ELEMENTWISE |= {p for k, p in OPERATORS.items()
                         if isinstance(p, Primitive) and k not in ("__getitem__", "__setitem__",
                                                                   "__matmul__", "__rmatmul__")}
    return prim._partials is not None or prim.broadcasting or prim in _ELEMENTWISE


_RESET = re.compile(r"^(\s*)(\w+) = 0\.0$")


def _peephole(lines, returned=()):
    """``gt = 0.0`` then ``gt += c`` is ``gt = c``; resets never read again (nor
    ``returned``) are dropped."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _RESET.match(line)
        if m and i + 1 < len(lines):
            ind, g = m.groups()
            nxt = lines[i + 1]
            m2 = re.match(rf"^{ind}{g} ([+-])= (.*)$", nxt)
            if m2 and m2.group(1) == "+" and not _fresh_value(m2.group(2)):
                # gt = gc would share gc's object, and a later gt += ... (in place for a
                # 0-d array) would change gc too: keep the reset
                m2 = None
            m2 = m2 or re.match(rf"^{ind}{g} = {g} ([+-]) (.*)$", nxt)
            if m2:
                sign, e = m2.groups()
                if sign == "-":
                    e = f"-{e}" if re.fullmatch(r"[\w.]+(\(.*\))?", e) and not \
                        e.startswith("(") else f"-({e})"
                out.append(f"{ind}{g} = {e}")
                i += 2
                continue
        out.append(line)
        i += 1
    # a reset at the outermost level that nothing reads afterwards
    if out:
        base = min(len(x) - len(x.lstrip()) for x in out)
        keep = []
        for k, line in enumerate(out):
            m = _RESET.match(line)
            if m and len(m.group(1)) == base:
                g = m.group(2)
                if g not in returned and \
                        not any(re.search(rf"\b{g}\b", later) for later in out[k + 1:]):
                    continue
            keep.append(line)
        out = keep
    return out


def _index_value(text):
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


def _fresh_value(text):
    """Does the expression build a new value (an operator at the top)?"""
    try:
        node = _ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (_ast.BinOp, _ast.UnaryOp))


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
_IN_PROGRESS = set()


def callee_scalar(f, pattern):
    """Does the user function ``f`` return a scalar for arguments of these kinds?"""
    key = (f, pattern)
    if key in _CALLEE:
        return _CALLEE[key]
    if key in _IN_PROGRESS:
        return False  # recursion: assume the worst
    _IN_PROGRESS.add(key)
    try:
        from .normalize import normalise
        fn = normalise(f)
        if fn.out_is_tuple or len(pattern) > len(fn.params):
            res = False
        else:
            pat = tuple(pattern) + ("s",) * (len(fn.params) - len(pattern))
            res = fn.outputs[0] not in _Base(fn, (), pat).arrays
    except Exception:
        res = False
    finally:
        _IN_PROGRESS.discard(key)
    _CALLEE[key] = res
    return res


def _has_break(body):
    for s in body:
        if isinstance(s, Break):
            return True
        if isinstance(s, If) and (_has_break(s.body) or _has_break(s.orelse)):
            return True
    return False


def _raises(body):
    """Does every path through the block end in a raise?"""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, Keep):
        return last.text.startswith("raise")
    if isinstance(last, If):
        return _raises(last.body) and _raises(last.orelse)
    return False


def _ending(lines, push, body):
    """Append the flag push to a branch, unless the branch ends in a break (which has it)
    or a raise."""
    if body and (isinstance(body[-1], Break) or (isinstance(body[-1], Keep) and
                                                 body[-1].text.startswith("raise"))):
        return lines
    return lines + [push]


def _runtime(name):
    from . import runtime
    return getattr(runtime, name)
