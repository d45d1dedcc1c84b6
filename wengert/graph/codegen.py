"""Code generation: a Graph as a Python function -- the function around the body the emitter
writes (lower.py, in its NumPy dialect: lower_numpy.py), compiled.

Here: the parameters (one name per input leaf, taken from the traced function's parameter
names, the argument pytrees unpacked), the returned pytree, the ``try``/``except`` that reruns
the exact program where Python's operators on Python numbers raise, and -- with buffers kept
between calls (pool.py) -- the pooled program and its entry, which takes the pool's lock.
The body is written once per program, from the passes' decisions (passes.py).
"""
from __future__ import annotations

import builtins
import re
import threading

import numpy as np

from .ir import GuardFailure
from .lower import Names, Writer, atom, ident as _ident, literal
from .lower_numpy import NumPy
from .passes import accumulations, buffers, live as live_nodes, schedule
from .. import tree as _tree

__all__ = ["generate", "build_function", "leaf_names", "preamble", "program_text",
           "compile_generated", "Generated", "start", "returned", "with_pool", "Reusing",
           "write_steps"]


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


def start(g, w, names, live):
    """The inputs' and constants' sources in ``w``, before its first node."""
    for k, i in enumerate(g.input_nodes):
        w.expr[i] = names[k]
    for i, n in enumerate(g.nodes):
        if live[i] and n.kind == "const":
            src = literal(n.value)
            w.expr[i] = atom(src) if src is not None else w.names.bind(n.value, f"c{i}")
    return w


# -- names of temporaries ------------------------------------------------------------------
# CPython's compile() of one function slows per statement as its local names grow (12.6 µs a
# statement with 10⁴ names, 16.6 µs with 10⁵: docs/graph.md), so a temporary takes the name of
# one whose value no later statement reads: a program has about as many names as it holds
# values at once (two for an elementwise chain; a gradient's forward values kept for its
# reverse sweep each keep theirs).

class Reusing(Writer):
    """A :class:`~.lower.Writer` whose fresh names are, where there is one, names
    :func:`write_steps` freed (the last freed first)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.free = []  # free names
        self.made = []  # the names handed out in the step being written
        self.temps = set()  # every name handed out

    def fresh(self):
        if self.free:
            v = self.free.pop()
        else:
            v = super().fresh()
            self.temps.add(v)
        self.made.append(v)
        return v


def _last_reads(g, steps, fused):
    """Each node's last step reading its value (a list by node: -1 where none does; outputs:
    ``len(steps)``, the return).  A step reads its nodes' arguments (a skipped scatter's: its
    chain's step adds them in; over-counting would only keep a name longer); a step's own
    reads of what it writes (its guards, a group's members) need nothing: names are freed
    between steps."""
    nodes = g.nodes
    skipped = {j for j, f in fused.items() if f[0] == "skip"}
    last = [-1] * len(nodes)
    for s, step in enumerate(steps):
        kind = step[0]
        if kind == "node":
            args = nodes[step[1]].args
            if skipped:
                for a in args:
                    if a in skipped:
                        for b in nodes[a].args:
                            last[b] = s
                    else:
                        last[a] = s
            else:
                for a in args:
                    last[a] = s
        elif kind == "guards":
            last[step[1]] = s
        else:
            for i in _written(step):
                for a in nodes[i].args:
                    if a in skipped:
                        for b in nodes[a].args:
                            last[b] = s
                    else:
                        last[a] = s
    for o in g.outputs:
        last[o] = len(steps)
    return last


def _written(step):
    kind = step[0]
    if kind == "node":
        return (step[1],)
    if kind == "python":
        return step[1]
    if kind == "kernel":
        fold = step[3]
        return step[1] if fold is None else list(step[1]) + list(fold[2])
    return ()


_TEMP = re.compile(r"\bv\d+\b")


def write_steps(w, d, steps, fused):
    """Write ``steps`` with dialect ``d`` into ``w`` (a :class:`Reusing` writer), one at a
    time; after each, the names no later step reads are free for the next ones. A name is
    held by every node whose source reads it (``a += b`` gives ``a``'s name to its result)
    until that node's last reader has been written."""
    last = _last_reads(w.g, steps, fused)
    dying = [None] * (len(steps) + 1)  # by step: the names held by nodes it reads last
    count = {}  # name -> how many nodes read later hold it
    expr, temps, free, made = w.expr, w.temps, w.free, w.made
    push = free.append
    for s, step in enumerate(steps):
        d.steps(w, (step,))
        for j in ((step[1],) if step[0] == "node" else _written(step)):
            r = last[j]
            if r <= s:  # read by no later step (returned ones: by the return, which never comes)
                continue
            e = expr.get(j)
            if e in temps:
                hold = (e,)
            elif e is None or e.isidentifier():  # not written; an input, a constant
                continue
            else:  # an expression: the temporaries it names
                hold = [t for t in _TEMP.findall(e) if t in temps]
            at = dying[r]
            if at is None:
                at = dying[r] = []
            for t in hold:
                count[t] = count.get(t, 0) + 1
                at.append(t)
        at = dying[s]
        if at is not None:
            for t in at:
                c = count[t] - 1
                if c:
                    count[t] = c
                else:
                    del count[t]
                    push(t)
        if made:
            for t in made:  # handed out here and held by no value read later
                if t not in count:
                    push(t)
            made.clear()
    return w


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
    """``(names, live, leaf names, parameters, unpacking lines, function name)``: what
    every generated program (plain or fused) starts from. The primitives are bound first,
    so that argument names never shadow them."""
    em = Names({"GuardFailure": GuardFailure})
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
    fused, chain_end, _ = accumulations(g, live)
    steps = schedule(g, live)
    out = buffers(g, live, steps, fused, {}, None) if pool else {}  # (no kernels: no uses)

    def program(fast_, out=None):
        d = NumPy(fast_, out)
        w = start(g, Reusing(g, em, d, fused, chain_end, twin=bool(out)), names, live)
        write_steps(w, d, steps, fused)
        return w, d, returned(g, w, em)

    w, d, ret = program(fast, out)
    sig = ", ".join(params)
    exact_name = exact_text = None
    if d.used_fast:
        exact_name = _fresh(f"{name}_exact", em.used)
        ew, _, eret = program(False)
        exact_text = program_text(exact_name, sig, unpack_lines, ew.lines, eret)
    text = program_text(name, sig, unpack_lines, w.lines, ret, exact_name)
    gen = Generated(text, em.ns, name, exact_text)
    with_pool(gen, g, out, w.lines, em, names, sig, unpack_lines, ret, exact_name)
    return gen


def returned(g, w, em):
    """The source of the returned pytree."""
    return _out_expr(g.out_def, iter(_fresh_output(g, o, w.expr) for o in g.outputs), em)


def with_pool(gen, g, out, lines, em, names, sig, unpack_lines, ret, exact):
    """Add to ``gen`` the program writing into the buffers ``out`` ({node: buffer},
    passes.buffers), whose body the emitter wrote beside the plain one (``lines.pooled``:
    lower.Twin), and its entry, which runs it when no call in flight holds the buffers,
    else the plain program."""
    if not out:
        return
    gen.entry = name = _fresh(f"{gen.name}_entry", em.used)
    pname = _fresh(f"{gen.name}_pooled", em.used)
    lines = lines.pooled
    values = [g.nodes[i].value for i in g.input_nodes]
    checks = [f"{names[k]}.strides != {v.strides!r}" for k, v in enumerate(values)
              if type(v) is np.ndarray and v.ndim]
    check = [f"if {' or '.join(checks)}: return {gen.name}({sig})  # another layout"] \
        if checks else []
    text = program_text(pname, sig, unpack_lines + check, lines, ret, exact)
    lock = threading.Lock()
    acquire, release = em.bind(lock.acquire, "pool_acquire"), em.bind(lock.release, "pool_release")
    text += (f"def {name}({sig}):\n"
             f"    if {acquire}(False):  # no call in flight holds the buffers\n"
             f"        try:\n"
             f"            return {pname}({sig})\n"
             f"        finally:\n"
             f"            {release}()\n"
             f"    return {gen.name}({sig})\n")
    gen.pool_text = text
    gen.pool = out


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
