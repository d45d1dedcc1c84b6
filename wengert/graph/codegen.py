"""Code generation: a Graph as straight-line Python over NumPy, one assignment per node.

Each primitive node calls that primitive's plain implementation (``prim.impl``),
bound in the generated function's globals under the primitive's name, so the
generated program computes exactly what the eager program computes.  Where an
implementation is a Python operator (``operator.mul``...) the operator is
written infix (``x * y``): the same call, read as the seeds write it.

Implementations that try a Python operator first and fall back to NumPy when
Python raises (``x / 0.0`` on floats) are written infix too, inside
``try``/``except``; the ``except`` branch reruns the exact program, which calls
the implementations themselves, so results are identical in every case.
"""
from __future__ import annotations

import builtins
import re
import keyword
import math
import operator

import numpy as np

from .ir import GuardFailure
from ..rules.lowering import OPERATOR_FORMS, python_operator
from .passes import accumulations, live as live_nodes, symbol as _symbol
from .pool import out_ufunc, plan as pool_plan, pooled_text
from .. import tree as _tree

__all__ = ["generate", "build_function", "leaf_names"]


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


def _atom(src):
    return f"({src})" if src.startswith("-") else src


def _ident(s):
    s = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in str(s))
    if not s or s[0].isdigit():
        s = "_" + s
    if keyword.iskeyword(s):
        s += "_"
    return s


# -- names of inputs ----------------------------------------------------------------------
def _leaf_paths(d, prefix):
    k = d.kind
    if k == "leaf":
        return [prefix]
    if k == "none":
        return []
    out = []
    keys = d.meta if k == "dict" else d.meta._fields if k == "namedtuple" else \
        d.meta[1] if k == "dataclass" else range(len(d.children))
    for j, (key, c) in enumerate(zip(keys, d.children)):
        part = key if isinstance(key, str) and key.isidentifier() else str(j)
        out += _leaf_paths(c, f"{prefix}_{part}")
    return out


def leaf_names(g, reserved=()):
    """One Python name per graph input, from the traced function's parameter names."""
    names = []
    used = set(reserved)
    for name, d in zip(g.arg_names, g.in_def.children):
        names += _leaf_paths(d, name)
    out = []
    for n, slot in zip(names, g.leaf_slots):
        if isinstance(slot, tuple):
            continue
        n = _ident(n)
        base, k = n, 1
        while n in used or hasattr(builtins, n) or re.fullmatch(r"[vc]\d+", n):
            n = f"{base}_{k}" if k > 1 else f"{base}_"
            k += 1
        used.add(n)
        out.append(n)
    return out


class Generated:
    pool_text = entry = None
    pool = {}

    def __init__(self, text, namespace, name, exact_text=None):
        self.text, self.namespace, self.name, self.exact_text = text, namespace, name, exact_text


class _Emitter:
    def __init__(self, g):
        self.g = g
        self.ns = {"GuardFailure": GuardFailure}
        self.bound = {}  # id(obj) -> name
        self.used = set(self.ns)

    def bind(self, obj, hint):
        key = id(obj)
        if key in self.bound:
            return self.bound[key]
        base = _ident(hint)
        name, k = base, 2
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        self.ns[name] = obj
        self.bound[key] = name
        return name


def _is_py_scalar(v):
    return type(v) in (float, int, bool, complex)


def _body(g, em, names, fast):
    """Lines of the straight-line program; ``fast`` writes fallback-operators infix."""
    w = BodyWriter(g, em, names, fast)
    for i in range(len(g.nodes)):
        if w.live[i]:
            w.node(i)
    return w


class BodyWriter:
    """Writes one node at a time (in any topological order: the fused path reorders)."""

    def __init__(self, g, em, names, fast):
        self.g, self.em, self.fast = g, em, fast
        self.lines = []
        self.used_fast = False
        self.live = live_nodes(g)
        self.guard_of = {}
        for i, b in g.guards:
            self.guard_of.setdefault(i, []).append(b)
        self.counter = 0
        # buffer reuse (pool.py): node -> (line index, its ufunc or None for a kernel) for
        # calls that can write into a given buffer; line index -> (a function writing that
        # line from {node: the source of its output array}, {node: what the plain line
        # passes there, or None: keep the plain line unless pooled}); the nodes whose
        # statement allocates an array
        self.pool_alt = {}
        self.pool_lines = {}
        self.in_place_of = {}
        self.allocates = set()
        self.at = {}  # node -> index of the last line written for it (where it reads)
        self.fused, self.chain_end, _ = accumulations(g, self.live)
        self.expr = {}  # node index -> source of its value
        for k, i in enumerate(g.input_nodes):
            self.expr[i] = names[k]
        for i, n in enumerate(g.nodes):
            if self.live[i] and n.kind == "const":
                lit = literal(n.value)
                self.expr[i] = _atom(lit) if lit is not None else em.bind(n.value, f"c{i}")

    # in-place arithmetic: ``a += b`` where ``a`` is a temporary no one else reads.  Set
    # ``scratch`` to the nodes whose arrays the program itself allocated (fresh every call)
    scratch = None
    uses = None

    def _in_place(self, i, n):
        g = self.g
        if n.kind != "op" or n.params or type(n.value) is not np.ndarray:
            return False
        op = python_operator(n.prim)
        if op is None or not OPERATOR_FORMS[op].in_place:
            return False
        sides = (0, 1) if op in (operator.add, operator.mul) else (0,)
        for side in sides:
            a, b = n.args[side], n.args[1 - side]
            av = g.nodes[a].value
            if (a in self.scratch and self.uses[a] == 1 and type(av) is np.ndarray
                    and av.shape == n.value.shape and av.dtype == n.value.dtype and a != b):
                self.lines.append(f"{self.expr[a]} {OPERATOR_FORMS[op].symbol}= {self.expr[b]}")
                self.expr[i] = self.expr[a]
                self.scratch.add(i)
                self.in_place_of[i] = a  # i is a's memory; b is only read
                return True
        return False

    def fresh(self):
        self.counter += 1
        return f"v{self.counter}"

    def guards(self, i):
        for b in self.guard_of.get(i, ()):
            cond = f"not {self.expr[i]}" if b else self.expr[i]
            self.lines.append(f"if {cond}: raise GuardFailure({i})"
                              f"  # traced with {self.expr[i]} {'true' if b else 'false'}")

    def node(self, i):
        self._node(i)
        self.at[i] = len(self.lines) - 1

    def _node(self, i):
        g, em, lines, expr = self.g, self.em, self.lines, self.expr
        n = g.nodes[i]
        if n.kind == "const":
            return
        if i in self.fused:
            step = self.fused[i]
            kind = step[0]
            if kind == "skip":
                return
            if kind == "start":  # zeros of the shape, the first scatter written in
                v = expr[i] = self.fresh()
                sn = g.nodes[i]
                lines.append(f"{v} = {em.bind(np.zeros, 'zeros')}({_lit(sn.params['shape'], em)}"
                             f", {em.bind(step[2], 'dtype')})")
                lines.append(f"{v}[{_index_src(sn.params['idx'], em)}] = {expr[sn.args[0]]}")
                self.guards(i)
                return
            sn = g.nodes[step[2]]
            if kind == "start+":  # a copy of the accumulator, the first scatter added in
                v = expr[i] = self.fresh()
                lines.append(f"{v} = {expr[step[1]]}.copy()")
            else:
                v = expr[i] = expr[step[1]]
            lines.append(f"{v}[{_index_src(sn.params['idx'], em)}] += {expr[sn.args[0]]}")
            if i in self.chain_end:  # +0.0 where the unfused sums added zeros: -0.0 -> +0.0
                mask = self.chain_end[i]
                if mask is True:
                    lines.append(f"{v} += 0.0")
                elif mask is not None:
                    lines.append(f"{v}[{em.bind(mask, 'zero_added')}] += 0.0")
        elif n.kind != "input":
            if self.scratch is not None and self._in_place(i, n):
                self.guards(i)
                return
            v = self.fresh()
            if n.kind == "proj":
                rhs = f"{expr[n.args[0]]}[{n.params['index']}]"
            else:
                rhs, inline = _call(n, [expr[a] for a in n.args], em, self.fast,
                                    [g.nodes[a].value for a in n.args])
                self.used_fast |= inline
                args = [expr[a] for a in n.args]
                u = out_ufunc(n, [g.nodes[a].value for a in n.args])
                if u is not None:
                    self.allocates.add(i)
                    self.pool_alt[i] = (len(lines), u)
                    call = f"{v} = {em.bind(u, 'np_' + u.__name__)}({', '.join(args)}, out="
                    self.pool_lines[len(lines)] = (lambda out, i=i, call=call: f"{call}{out[i]})",
                                                   {i: None})
            lines.append(f"{v} = {rhs}")
            expr[i] = v
        self.guards(i)


# -- fusing sums of scatters: "gx = gx + zeros-with-v-at-idx" becomes "gx[idx] += v" -------
# Primitives declared ``scatter_into_zeros`` write their first argument at the static basic
# index ``idx`` of zeros of ``shape`` (dtype of the argument).  Reverse sweeps through
# indexing (x[i] in a loop) produce long sums of them; the fused form writes into one buffer.


def _lit(v, em):
    lit = literal(v)
    return lit if lit is not None else em.bind(v, "k")


def _index_src(idx, em):
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
    return _lit(idx, em)


def _call(n, args, em, fast, arg_values):
    impl = n.prim.impl
    op = python_operator(n.prim)
    sym = _symbol(op, len(args)) if not n.params else None
    if sym is not None:
        if op is impl:  # the implementation is the operator itself
            return (f"{args[0]} {sym} {args[1]}" if len(args) == 2 else f"{sym}{args[0]}"), False
        if fast and len(args) == 2 and _may_inline(op, arg_values):
            # it tries the operator, NumPy where Python raises: only Python numbers on both
            # sides can make Python raise
            risky = all(_is_py_scalar(v) for v in arg_values)
            return f"{args[0]} {sym} {args[1]}", risky
    fname = em.bind(impl, n.prim.name)
    parts = list(args)
    for key, val in n.params.items():
        lit = literal(val)
        parts.append(f"{key}={lit if lit is not None else em.bind(val, key)}")
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


def _out_expr(d, leaves, em):
    k = d.kind
    if k == "leaf":
        return next(leaves)
    if k == "none":
        return "None"
    kids = [_out_expr(c, leaves, em) for c in d.children]
    if k == "tuple":
        return "(" + ", ".join(kids) + ("," if len(kids) == 1 else "") + ")"
    if k == "list":
        return "[" + ", ".join(kids) + "]"
    if k == "dict":
        return "{" + ", ".join(f"{literal(key) or em.bind(key, 'key')}: {v}"
                               for key, v in zip(d.meta, kids)) + "}"
    if k in ("dataclass", "custom"):  # rebuilt as wengert.tree does
        return f"{em.bind(_tree.node, 'tree_node')}({em.bind(d, 'treedef')}, [{', '.join(kids)}])"
    return f"{em.bind(d.meta, d.meta.__name__)}({', '.join(kids)})"


def _unpack(g, names, em):
    """Lines that take the argument pytrees apart into one name per input leaf."""
    lines = []
    params = []
    leaf_names_all = []
    it = iter(names)
    for slot in g.leaf_slots:
        leaf_names_all.append(None if isinstance(slot, tuple) else next(it))
    pos = 0
    used = em.used
    for name, d in zip(g.arg_names, g.in_def.children):
        if d.kind == "leaf":
            pname = leaf_names_all[pos] or _fresh(name, used)
            params.append(pname)
            pos += 1
            continue
        pname = _fresh(name, used)
        params.append(pname)
        pos = _unpack_tree(pname, d, leaf_names_all, pos, lines, used, em)
    return params, lines


def _fresh(base, used):
    base = _ident(base)
    n, k = base, 1
    while n in used:
        n = f"{base}_{k}"
        k += 1
    used.add(n)
    return n


def _unpack_tree(expr, d, leaf_names_all, pos, lines, used, em):
    if d.kind == "none":
        return pos
    if d.kind == "leaf":
        if leaf_names_all[pos] is not None:
            lines.append(f"{leaf_names_all[pos]} = {expr}")
        return pos + 1
    if d.kind == "dict":
        for key, c in zip(d.meta, d.children):
            lit = literal(key)
            if c.kind == "leaf":
                if leaf_names_all[pos] is not None:
                    lines.append(f"{leaf_names_all[pos]} = {expr}[{lit}]")
                pos += 1
            else:
                tmp = _fresh(f"{expr}_{_ident(key)}", used)
                lines.append(f"{tmp} = {expr}[{lit}]")
                pos = _unpack_tree(tmp, c, leaf_names_all, pos, lines, used, em)
        return pos
    # tuple, list, namedtuple: one unpacking statement (it also checks the length)
    if not d.children:
        return pos
    targets = []
    deferred = []
    for j, c in enumerate(d.children):
        if c.kind == "leaf":
            targets.append(leaf_names_all[pos] or "_")
            pos += 1
        elif c.kind == "none":
            targets.append("_")
        else:
            tmp = _fresh(f"{expr}_{j}", used)
            targets.append(tmp)
            deferred.append((tmp, c, pos))
            pos += c.num_leaves
    if d.kind in ("dataclass", "custom"):  # taken apart as wengert.tree does
        expr = f"{em.bind(_tree.children, 'tree_children')}({expr}, {em.bind(d, 'treedef')})"
    lines.append(", ".join(targets) + ("," if len(targets) == 1 else "") + f" = {expr}")
    for tmp, c, p in deferred:
        _unpack_tree(tmp, c, leaf_names_all, p, lines, used, em)
    return pos


def preamble(g):
    """``(emitter, live, leaf names, parameters, unpacking lines, function name)``: what
    every generated program (plain or fused) starts from. The primitives are bound first,
    so that argument names never shadow them."""
    em = _Emitter(g)
    live = live_nodes(g)
    for i, n in enumerate(g.nodes):
        if live[i] and n.kind == "op":
            em.bind(n.prim.impl, n.prim.name)
    names = leaf_names(g, reserved=em.used)
    em.used |= set(names)
    params, unpack_lines = _unpack(g, names, em)
    return em, live, names, params, unpack_lines, _fresh(g.name, em.used)


def generate(g, fast=True, pool=False):
    """The program's source; with ``pool``, also a program reusing buffers (pool.py)."""
    em, live, names, params, unpack_lines, name = preamble(g)

    def program(fast_):
        w = _body(g, em, names, fast_)
        ret = _out_expr(g.out_def, iter(_fresh_output(g, o, w.expr) for o in g.outputs), em)
        return w, ret

    w, ret = program(fast)
    sig = ", ".join(params)
    exact_name = exact_text = None
    if w.used_fast:
        exact_name = _fresh(f"{name}_exact", em.used)
        ew, eret = program(False)
        exact_text = program_text(exact_name, sig, unpack_lines, ew.lines, eret)
    text = program_text(name, sig, unpack_lines, w.lines, ret, exact_name)
    gen = Generated(text, em.ns, name, exact_text)
    if pool:
        with_pool(gen, g, w, live, names, sig, unpack_lines, ret, exact_name)
    return gen


def with_pool(gen, g, w, live, names, sig, unpack_lines, ret, exact):
    """Add to ``gen`` the program writing into reused buffers, and its entry (pool.py)."""
    pooled = pool_plan(g, w, live)
    if pooled:
        gen.entry = _fresh(f"{gen.name}_entry", w.em.used)
        names2 = (gen.entry, _fresh(f"{gen.name}_pooled", w.em.used), gen.name)
        gen.pool_text = pooled_text(g, w, pooled, names, names2, sig, unpack_lines, ret, exact,
                                    program_text)
        gen.pool = pooled


def _fresh_output(g, o, expr):
    """An array constant is returned as a copy: a caller writing into one result must not
    change the next (the eager function makes a new array each call)."""
    n = g.nodes[o]
    return f"{expr[o]}.copy()" if n.kind == "const" and isinstance(n.value, np.ndarray) \
        else expr[o]


def _assemble(name, sig, unpack_lines, body, ret):
    lines = unpack_lines + body + [f"return {ret}"]
    return f"def {name}({sig}):\n" + "".join(f"    {ln}\n" for ln in lines)


def program_text(name, sig, unpack_lines, body, ret, exact=None):
    """``def name(sig)``: unpack, body, return; with ``exact`` (a function's name), run that
    where Python's operators on Python numbers raise (NumPy gives inf or nan)."""
    if exact is None:
        return _assemble(name, sig, unpack_lines, body, ret)
    inner = ["try:"] + ["    " + ln for ln in unpack_lines + body] + [f"    return {ret}"]
    inner += ["except (ZeroDivisionError, OverflowError):  # Python numbers: NumPy's answer",
              f"    return {exact}({sig})"]
    return f"def {name}({sig}):\n" + "".join(f"    {ln}\n" for ln in inner)


def compile_generated(gen, label):
    """The function ``gen`` defines (text we wrote, never user text): its entry reusing
    buffers when it has one, with ``source`` (the plain program), ``pooled_source`` and
    ``pool`` ({node: buffer}) attached."""
    ns = dict(gen.namespace)
    ns["__builtins__"] = builtins
    if gen.exact_text is not None:
        exec(builtins.compile(gen.exact_text, f"<{label} {gen.name}, exact>", "exec"), ns)
    exec(builtins.compile(gen.text, f"<{label} {gen.name}>", "exec"), ns)
    fn = ns[gen.name]
    if gen.pool_text is not None:
        exec(builtins.compile(gen.pool_text, f"<{label} {gen.name}, buffers reused>", "exec"),
             ns)
        fn = ns[gen.entry]
    fn.source = gen.text
    fn.exact_source = gen.exact_text
    fn.pooled_source = gen.pool_text
    fn.pool = gen.pool
    return fn


def build_function(g, reuse_buffers=False):
    """Compile the generated source to a function; ``reuse_buffers``: its internal
    temporaries written into buffers kept between calls (pool.py)."""
    return compile_generated(generate(g, pool=reuse_buffers), "wengert graph")
