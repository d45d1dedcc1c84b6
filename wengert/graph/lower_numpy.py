"""The NumPy dialect of the emitter (lower.py): the generated program's own statements.

A primitive node calls that primitive's plain implementation (``prim.impl``), bound in the
generated function's globals under the primitive's name, so the generated program computes
exactly what the eager program computes.  Where an implementation is a Python operator
(``operator.mul``...) the operator is written infix (``x * y``): the same call, read as the
seeds write it.  Implementations that try a Python operator first and fall back to NumPy when
Python raises (``x / 0.0`` on floats) are written infix too with ``fast``, inside the
``try``/``except`` that codegen.py puts around the body; the ``except`` branch reruns the
exact program, which calls the implementations themselves.

The passes' decisions, as this dialect writes them: an ``accumulate_into`` chain as
``gx[idx] += v`` into one array; an ``inplace`` node as ``a += b``; a call with an ``out``
buffer as its ufunc with ``out=``; a ``kernel`` step as one call of a compiled Numba kernel
(lower_numba.py writes its body); a ``python`` step -- a large all-scalar group -- as
statements on Python floats (:class:`PythonFloats`).
"""
from __future__ import annotations

import operator

import numpy as np

from ..rules.lowering import OPERATOR_FORMS, python_operator
from .lower import Dialect, index_source, lit, literal, operator_source, symbol
from .lower_numba import write_kernel
from .passes import ufunc_of

__all__ = ["NumPy", "PythonFloats", "call_source"]


def _is_py_scalar(v):
    return type(v) in (float, int, bool, complex)


def _zeros_added(w, i, v):
    """``+0.0`` where the unfused sums added zeros: ``-0.0`` becomes ``+0.0`` there."""
    mask = w.chain_end.get(i)
    if mask is True:
        w.lines.append(f"{v} += 0.0")
    elif mask is not None:
        w.lines.append(f"{v}[{w.names.bind(mask, 'zero_added')}] += 0.0")


class NumPy(Dialect):
    """One assignment per node.  ``fast``: fallback operators written infix (``used_fast``
    then says one was); ``out``: {node: buffer} (passes.buffers); ``uses`` (passes.users) and
    ``compile_kernel`` (kernel source -> compiled kernel) for the fused program's steps."""

    def __init__(self, fast, out=None, uses=None, compile_kernel=None):
        self.fast = fast
        self.out = out or {}
        self.uses = uses
        self.compile_kernel = compile_kernel
        self.used_fast = False
        self.kernel_sources = []

    def done(self, w, i):
        w.guards(i)

    def accumulate(self, w, i, step):
        g, names, lines, expr = w.g, w.names, w.lines, w.expr
        kind = step[0]
        if kind == "start":  # zeros of the shape, the first scatter written in
            v = expr[i] = w.fresh()
            sn = g.nodes[i]
            lines.append(f"{v} = {names.bind(np.zeros, 'zeros')}({lit(sn.params['shape'], names)}"
                         f", {names.bind(step[2], 'dtype')})")
            lines.append(f"{v}[{index_source(sn.params['idx'], names)}] = {expr[sn.args[0]]}")
            return
        sn = g.nodes[step[2]]
        if kind == "start+":  # a copy of the accumulator, the first scatter added in
            v = expr[i] = w.fresh()
            lines.append(f"{v} = {expr[step[1]]}.copy()")
        else:
            v = expr[i] = expr[step[1]]
        lines.append(f"{v}[{index_source(sn.params['idx'], names)}] += {expr[sn.args[0]]}")
        _zeros_added(w, i, v)

    def in_place(self, w, i, a):
        n = w.g.nodes[i]
        b = n.args[1] if n.args[0] == a else n.args[0]  # i is a's memory; b is only read
        w.lines.append(f"{w.expr[a]} {OPERATOR_FORMS[python_operator(n.prim)].symbol}= "
                       f"{w.expr[b]}")
        w.expr[i] = w.expr[a]

    def project(self, w, i):
        n = w.g.nodes[i]
        v = w.fresh()
        w.lines.append(f"{v} = {w.expr[n.args[0]]}[{n.params['index']}]")
        w.expr[i] = v

    def apply(self, w, i):
        n = w.g.nodes[i]
        v = w.fresh()
        args = [w.expr[a] for a in n.args]
        values = [w.g.nodes[a].value for a in n.args]
        rhs, inline = call_source(n, args, w.names, self.fast, values)
        self.used_fast |= inline
        buf = self.out.get(i)
        if buf is None:
            w.lines.append(f"{v} = {rhs}")
        else:  # the pooled twin: its ufunc writing into the kept buffer
            u = ufunc_of(n.prim)
            w.lines.append(f"{v} = {rhs}", f"{v} = {w.names.bind(u, 'np_' + u.__name__)}("
                           f"{', '.join(args)}, out={w.names.bind(buf, f'buf{i}')})")
        w.expr[i] = v

    # -- the fused program's steps (passes.schedule) ----------------------------------------
    def steps(self, w, steps):
        for step in steps:
            kind = step[0]
            if kind == "node":
                w.node(step[1])
            elif kind == "guards":
                w.guards(step[1])
            elif kind == "python":
                self.python(w, step[1])
            else:
                self.kernel_sources.append(write_kernel(
                    w, step[1], step[2], step[3], self.uses, self.out, self.compile_kernel))
        return w

    def python(self, w, members):
        """An all-scalar group as Python-float statements in the generated function itself."""
        w.dialect = PythonFloats(members, self.uses)
        w.write(members)
        w.dialect = self
        for i in members:
            if i in w.expr:
                w.guards(i)


def call_source(n, args, names, fast, arg_values):
    """``(source of the call, whether it is a fallback operator written infix)``."""
    impl = n.prim.impl
    op = python_operator(n.prim)
    sym = symbol(op, len(args)) if not n.params else None
    if sym is not None:
        if op is impl:  # the implementation is the operator itself
            return operator_source(op, args), False
        if fast and len(args) == 2 and _may_inline(op, arg_values):
            # it tries the operator, NumPy where Python raises: only Python numbers on both
            # sides can make Python raise
            risky = all(_is_py_scalar(v) for v in arg_values)
            return operator_source(op, args), risky
    fname = names.bind(impl, n.prim.name)
    parts = list(args)
    for key, val in n.params.items():
        src = literal(val)
        parts.append(f"{key}={src if src is not None else names.bind(val, key)}")
    return f"{fname}({', '.join(parts)})", False


def _may_inline(op, vals):
    """Python's operator gives the implementation's answer unless it raises, and
    ``**`` could give a complex number only for a Python-number base and a
    non-integral exponent."""
    if op is operator.pow:
        base, expo = vals
        if _is_py_scalar(base):
            return type(expo) is int or (type(expo) is float and expo.is_integer())
    return True


class PythonFloats(Dialect):
    """An all-scalar group on Python floats: a 1-D array read element by element becomes
    its list of floats once; an accumulation chain a list; each value leaving the group is
    converted back to its traced type."""
    reads_elements = True

    def __init__(self, members, uses):
        self.mset = set(members)
        self.uses = uses
        self.lists = {}

    def _leaves(self, i):
        return any(u not in self.mset for u in self.uses[i])

    def _elements(self, w, a):  # its list of Python floats, once
        if a not in self.lists:
            self.lists[a] = w.fresh()
            w.lines.append(f"{self.lists[a]} = {w.expr[a]}.tolist()")
        return self.lists[a]

    def accumulate(self, w, i, step):
        nodes, lines = w.g.nodes, w.lines
        kind = step[0]
        sn = nodes[i if kind == "start" else step[2]]
        idx = sn.params["idx"]
        acc = nodes[i].value
        flat = int(np.ravel_multi_index(idx, acc.shape, mode="wrap")) if acc.ndim else 0
        if kind == "start":
            w.expr[i] = w.fresh()
            lines.append(f"{w.expr[i]} = [0.0] * {acc.size}")
            lines.append(f"{w.expr[i]}[{flat}] = {w.expr[sn.args[0]]}")
        else:
            if kind == "start+":
                w.expr[i] = w.fresh()
                lines.append(f"{w.expr[i]} = {w.expr[step[1]]}.tolist()")
            else:
                w.expr[i] = w.expr[step[1]]
            lines.append(f"{w.expr[i]}[{flat}] += {w.expr[sn.args[0]]}")
        if self._leaves(i):  # the chain's end: back to an array
            lst, v = w.expr[i], w.fresh()
            lines.append(f"{v} = {w.names.bind(np.array, 'array')}({lst}).reshape("
                         f"{tuple(acc.shape)!r})")
            _zeros_added(w, i, v)
            w.expr[i] = v

    def gather(self, w, i):
        n = w.g.nodes[i]
        v = w.fresh()
        x = w.g.nodes[n.args[0]].value
        idx = n.params["idx"]
        if x.ndim == 1:
            w.lines.append(f"{v} = {self._elements(w, n.args[0])}[{idx[0]}]")
        else:
            w.lines.append(f"{v} = {w.expr[n.args[0]]}.item{tuple(idx)!r}")
        self._leave(w, i, v)

    def apply(self, w, i):
        nodes = w.g.nodes
        n = nodes[i]
        v = w.fresh()
        op = python_operator(n.prim)
        args = [w.expr[a] for a in n.args]
        if op is operator.pow and not (nodes[n.args[1]].kind == "const" and
                                       type(nodes[n.args[1]].value) is int):
            op = None  # Python's ** of a negative float gives a complex number
        src = operator_source(op, args) if op is not operator.invert else None
        if src is None:
            u = n.prim.ufunc
            src = f"{w.names.bind(u, u.__name__)}({', '.join(args)})"
        w.lines.append(f"{v} = {src}")
        self._leave(w, i, v)

    def _leave(self, w, i, v):
        w.expr[i] = v
        if self._leaves(i):  # leaving the group: the traced type
            t = type(w.g.nodes[i].value)
            w.lines.append(f"{v} = {w.names.bind(t, t.__name__)}({v})")

