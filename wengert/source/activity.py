"""Which names a function body binds, what its free names refer to, and which values
can carry a derivative (the activity analysis the normaliser asks as it lowers)."""
from __future__ import annotations

import ast
import builtins
import types

import numpy as np

from . import methods
from .resolve import resolve_callable

__all__ = ["Scope"]

_PASSIVE_ATTRS = {"shape", "ndim", "size", "dtype", "nbytes", "itemsize", "strides"}


class Scope:
    """The names of one function: ``local`` (parameters and assigned names), ``ns`` (what
    free names refer to), ``active`` (names that may carry a derivative) and
    ``namespace`` (the free names the generated code refers to)."""

    def __init__(self, fdef, ns):
        self.fdef, self.ns = fdef, ns
        self.params = []
        self.local = set()
        self.active = set()
        self.namespace = {}   # free names referenced -> objects

    @staticmethod
    def assigned_names(body):
        out = set()
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    out.add(node.id)
        return out

    # -- which names can carry a derivative ---------------------------------------------------
    def activity(self):
        active = set(self.params)
        assigns = []
        for node in ast.walk(self.fdef):
            if isinstance(node, ast.Assign):
                assigns.append((node.targets, node.value))
            elif isinstance(node, ast.AugAssign):
                assigns.append(([node.target], node))
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                assigns.append(([node.target], node.value))
            elif isinstance(node, ast.For):
                target = node.target
                if isinstance(node.iter, ast.Call) and self.lookup(node.iter.func) is \
                        enumerate and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                    target = target.elts[1]   # the counter is an integer
                assigns.append(([target], node.iter))
        changed = True
        while changed:
            changed = False
            for targets, value in assigns:
                if self.is_active(value, active):
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name) and n.id not in active:
                                active.add(n.id)
                                changed = True
        return active

    def is_active(self, e, active=None):
        active = self.active if active is None else active
        if isinstance(e, ast.AugAssign):
            return self.is_active(e.value, active) or self.is_active(e.target, active)
        if isinstance(e, ast.Name):
            return e.id in active and e.id in self.local
        if isinstance(e, ast.BoolOp):   # x or 1.0 is x (or 1.0): a value, not a truth
            return any(self.is_active(v, active) for v in e.values)
        if isinstance(e, (ast.Constant, ast.Compare)):
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return False
        if isinstance(e, ast.Attribute):
            if e.attr in _PASSIVE_ATTRS:
                return False
            return self.is_active(e.value, active)
        if isinstance(e, ast.Subscript):
            return self.is_active(e.value, active)
        if isinstance(e, ast.Call):
            if self.integer_cast(e):
                return False   # x.astype(int): integers carry no derivative (an index)
            obj = self.lookup(e.func)
            if obj is getattr and e.args and not (
                    len(e.args) > 1 and isinstance(e.args[1], ast.Constant)
                    and e.args[1].value in _PASSIVE_ATTRS):
                return self.is_active(e.args[0], active)   # getattr(x, "T") is x.T
            kind = resolve_callable(obj)[0] if obj is not None else None
            if kind == "passive":
                return False
            parts = list(e.args) + [k.value for k in e.keywords]
            if isinstance(e.func, ast.Attribute) and obj is None:
                if e.func.attr in methods.PASSIVE:  # x.argmax(): an integer, no derivative
                    return False
                parts.append(e.func.value)  # a method call on a value
            return any(self.is_active(p, active) for p in parts)
        return any(self.is_active(c, active) for c in ast.iter_child_nodes(e)
                   if isinstance(c, ast.expr))

    def integer_cast(self, call):
        """Whether ``call`` is ``v.astype(T)`` (or ``dtype=T``) for an integer or bool ``T``."""
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "astype"):
            return False
        dt = call.args[0] if call.args else next(
            (k.value for k in call.keywords if k.arg == "dtype"), None)
        if isinstance(dt, ast.Constant):
            dt = dt.value
        elif isinstance(dt, (ast.Name, ast.Attribute)):
            dt = self.lookup(dt)
        else:
            return False
        try:
            return np.dtype(dt).kind in "biu"
        except TypeError:
            return False

    def lookup(self, node):
        """The object a (dotted) name refers to, if it is not a local variable."""
        if isinstance(node, ast.Name):
            if node.id in self.local:
                return None
            return self.ns.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.lookup(node.value)
            if base is None or not isinstance(base, types.ModuleType) and \
                    not isinstance(base, type):
                return None
            return getattr(base, node.attr, None)
        return None

    # -- inactive text: kept as written, its free names recorded --------------------------------
    def passive_text(self, e):
        self.collect_free(e)
        return ast.unparse(e)

    def passive_text_stmt(self, s):
        self.collect_free(s)
        return ast.unparse(s)

    def collect_free(self, e):
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and n.id not in self.local and n.id in self.ns and \
                    not hasattr(builtins, n.id):
                self.namespace.setdefault(n.id, self.ns[n.id])
