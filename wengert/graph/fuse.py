"""Fused code generation: runs of elementwise primitives become one Numba loop kernel.

Where Numba is installed (``pip install "wengert[fast]"``), ``wg.compile`` groups the
graph's elementwise nodes -- primitives whose record names a NumPy ``ufunc`` with a
homogeneous float loop (``dd->d``), element reads ``x[i, j]`` (lowering role
``gather_at_index``) and sums of element writes (``scatter_into_zeros``) -- into kernels: one loop nest over the
group's shape, one scalar statement per node, the ufunc itself called on scalars.  An
all-scalar program (a Python loop over ``x[i]``, the Babylonian iteration) becomes one
compiled scalar function.  Everything else (matmul, reductions, reshapes...) stays the
NumPy call :mod:`.codegen` writes, so BLAS does the products.

Grouping: a node's *stage* is the latest stage of its arguments, one later past a
non-fused node or a fused node of another shape; the fused nodes of one stage and shape
form a kernel, run before that stage's NumPy calls.  So every kernel's inputs exist when
it runs, whatever the order of the original nodes.

A kernel whose one result is read only by a gather by flat positions (``gather_flat``,
through ``flat_view`` reshapes: a compressed sparse Jacobian pass's last step) loops over
those positions instead and writes the gathered elements straight into the gather's result.

Results equal the NumPy program's except for rounding inside transcendental functions:
Numba calls the C library's ``tanh``, ``exp``... where NumPy may use its own SIMD
versions, so those may differ in the last place (1 ulp); ``+ - * /``, ``sqrt`` and the
casts are the same IEEE operations.  Division by zero gives NumPy's ``inf``/``nan``
(without NumPy's warning).
"""
from __future__ import annotations

import operator
import os
import threading
import warnings
import weakref

import numpy as np

from . import budget, pool
from .codegen import BodyWriter, Generated, _fresh_output, _out_expr, \
    build_function, compile_generated, literal, preamble, program_text, with_pool
from .kernel_cache import njit_module
from ..rules.lowering import lowering, lowering_of, python_operator
from .passes import NUMBA_MAX_NODES, dtype_of as _dtype, gather_folds, plan, python_ok, \
    symbol as _symbol, users

__all__ = ["build_fused", "numba_or_none", "fuse_default", "lowering", "UnfusedWarning",
           "warn_unfused"]

# kernel source -> Numba dispatcher, while a program holds it (kernel_cache keeps the
# recently used alive): one compilation per source and types, none kept for dead programs
_KERNELS = weakref.WeakValueDictionary()
_NUMBA = []


def numba_or_none():
    """The numba module, or None when it is not installed (imported on first use only)."""
    if not _NUMBA:
        try:
            import numba
            from numba.np.ufunc_db import get_ufuncs
            _NUMBA.append((numba, frozenset(get_ufuncs())))
        except Exception:  # not installed, or broken against this NumPy
            _NUMBA.append(None)
    return _NUMBA[0]


class UnfusedWarning(RuntimeWarning):
    """A compiled program runs part of its work unfused: a primitive in it has no Numba
    lowering (``python -m wengert.coverage --compile`` lists which do)."""


_WARNED = set()  # primitives already warned about in this process
_WARN_LOCK = threading.Lock()


def warn_unfused(names, what):
    """One ``UnfusedWarning`` naming the primitives of ``names`` not warned about yet."""
    with _WARN_LOCK:
        new = sorted(set(names) - _WARNED)
        _WARNED.update(new)
    if new:
        warnings.warn(
            f"wg.compile: {what} runs unfused: no Numba lowering for {', '.join(new)} "
            "(the results are the same, only slower). `python -m wengert.coverage --compile` "
            "lists the primitives that have one; an elementwise primitive gets one from a "
            "`Lowering(scalar=...)` form in its declaration (rules/lowering.py).",
            UnfusedWarning, stacklevel=4)


def fuse_default():
    """Fuse unless ``WENGERT_FUSE=0`` or Numba is missing."""
    return os.environ.get("WENGERT_FUSE", "1") != "0" and numba_or_none() is not None


def build_fused(g, reuse_buffers=False):
    """A function for ``g`` with fused kernels and in-place temporaries, or None (no Numba);
    ``reuse_buffers``: its NumPy calls' temporaries kept between calls (pool.py)."""
    nb = numba_or_none()
    if nb is None:
        return None
    numba, supported = nb
    em, live, names, params, unpack_lines, name = preamble(g)
    w = BodyWriter(g, em, names, False)
    key, stage, groups = plan(g, live, w.fused, supported)
    key, stage, groups, backed_off = budget.fit(g, live, w.fused, key, stage, groups)
    missing = {n.prim.name for i, n in enumerate(g.nodes) if live[i] and n.kind == "op"
               and n.prim.ufunc is not None and _dtype(n.value) is not None
               and lowering(n.prim, supported) == "none"}
    if missing:
        warn_unfused(missing, "elementwise work of this program")
    uses = users(g, live)
    # arrays the program allocates itself (ufunc results, kernel outputs): scratch that an
    # in-place ``+=`` may reuse when nothing else reads it
    w.uses = [len(u) for u in uses]
    w.scratch = {i for i, n in enumerate(g.nodes) if live[i] and n.kind == "op"
                 and n.prim.ufunc is not None and i not in w.fused
                 and type(n.value) is np.ndarray and n.value.ndim}
    by_stage = {}
    for (s, k), ms in groups.items():
        by_stage.setdefault(s, []).append(ms)
    top = max(stage[i] for i in range(len(g.nodes)) if live[i]) if any(live) else 0
    folds = gather_folds(g, groups.values(), w.fused, uses)
    folded = {j for f in folds.values() for j in f[2]}
    calls_at = {}  # stage -> its NumPy calls, in the graph's order
    for i, n in enumerate(g.nodes):
        if live[i] and key[i] is None and n.kind in ("op", "proj") and i not in folded:
            calls_at.setdefault(stage[i], []).append(i)
    calls = []
    exact = None
    for s in range(top + 1):
        for ms in sorted(by_stage.get(s, ()), key=lambda ms: ms[0]):
            if key[ms[0]] == () and len(ms) > NUMBA_MAX_NODES and python_ok(g, ms, w.fused):
                _emit_python(g, w, ms, uses)
                exact = exact or em.bind(build_function(g), f"{g.name}_exact")
            else:
                calls.append(_emit_kernel(g, w, ms, key, uses, numba, folds.get(ms[0])))
            for i in ms + (folds[ms[0]][2] if ms[0] in folds else []):
                w.at[i] = len(w.lines) - 1  # where the group reads its inputs (pool.py)
        for i in calls_at.get(s, ()):
            w.node(i)
    for i in g.input_nodes:
        w.guards(i)
    ret = _out_expr(g.out_def, iter(_fresh_output(g, o, w.expr) for o in g.outputs), em)
    sig = ", ".join(params)
    # Python floats raise where NumPy gives inf or nan: then NumPy's program (``exact``)
    gen = Generated(program_text(name, sig, unpack_lines, w.lines, ret, exact), em.ns, name)
    if reuse_buffers:
        with_pool(gen, g, w, live, names, sig, unpack_lines, ret, exact)
    fn = compile_generated(gen, "wengert fused graph")
    fn.kernel_sources = [c for c in calls]
    fn.folded_gathers = len(folds)
    fn.backed_off = backed_off
    return fn


def _emit_python(g, w, members, uses):
    """An all-scalar group as Python-float statements in the generated function itself."""
    nodes, em, lines, fused = g.nodes, w.em, w.lines, w.fused
    mset = set(members)
    lists = {}

    def val(a):
        return w.expr[a]

    def elements(a):  # a 1-D array read element by element: its list of Python floats, once
        if a not in lists:
            lists[a] = w.fresh()
            lines.append(f"{lists[a]} = {val(a)}.tolist()")
        return lists[a]

    for i in members:
        n = nodes[i]
        step = fused.get(i)
        if step is not None:
            kind = step[0]
            if kind == "skip":
                continue
            sn = nodes[i if kind == "start" else step[2]]
            idx = sn.params["idx"]
            acc = n.value
            flat = int(np.ravel_multi_index(idx, acc.shape, mode="wrap")) if acc.ndim else 0
            if kind == "start":
                w.expr[i] = w.fresh()
                lines.append(f"{w.expr[i]} = [0.0] * {acc.size}")
                lines.append(f"{w.expr[i]}[{flat}] = {val(sn.args[0])}")
            else:
                if kind == "start+":
                    w.expr[i] = w.fresh()
                    lines.append(f"{w.expr[i]} = {val(step[1])}.tolist()")
                else:
                    w.expr[i] = w.expr[step[1]]
                lines.append(f"{w.expr[i]}[{flat}] += {val(sn.args[0])}")
            if any(u not in mset for u in uses[i]):  # the chain's end: back to an array
                lst, v = w.expr[i], w.fresh()
                lines.append(f"{v} = {em.bind(np.array, 'array')}({lst}).reshape("
                             f"{tuple(acc.shape)!r})")
                mask = w.chain_end.get(i)
                if mask is True:
                    lines.append(f"{v} += 0.0")
                elif mask is not None:
                    lines.append(f"{v}[{em.bind(mask, 'zero_added')}] += 0.0")
                w.expr[i] = v
            continue
        v = w.fresh()
        if lowering_of(n.prim).role == "gather_at_index":
            x = nodes[n.args[0]].value
            idx = n.params["idx"]
            if x.ndim == 1:
                lines.append(f"{v} = {elements(n.args[0])}[{idx[0]}]")
            else:
                lines.append(f"{v} = {val(n.args[0])}.item{tuple(idx)!r}")
        else:
            op = python_operator(n.prim)
            args = [val(a) for a in n.args]
            if op is operator.pow and not (nodes[n.args[1]].kind == "const" and
                                           type(nodes[n.args[1]].value) is int):
                op = None  # Python's ** of a negative float gives a complex number
            sym = _symbol(op, len(args)) if op is not operator.invert else None
            if sym is not None and len(args) == 2:
                lines.append(f"{v} = {args[0]} {sym} {args[1]}")
            elif sym is not None:
                lines.append(f"{v} = {sym}{args[0]}")
            else:
                lines.append(f"{v} = {em.bind(n.prim.ufunc, n.prim.ufunc.__name__)}"
                             f"({', '.join(args)})")
        w.expr[i] = v
        if any(u not in mset for u in uses[i]):  # leaving the group: the traced type
            t = type(n.value)
            lines.append(f"{v} = {em.bind(t, t.__name__)}({v})")
    for i in members:
        if i in w.expr:
            w.guards(i)


def _scalar_form(prim, args):
    """The primitive on scalars: Python's operator where its implementation is one (Numba
    types those fastest), else its ufunc, which Numba also compiles for scalars."""
    form = lowering_of(prim).scalar
    if form is not None:
        return form(*args)
    op = python_operator(prim)
    sym = _symbol(op, len(args)) if op not in (operator.matmul, operator.invert) else None
    if sym is not None:
        return f"({args[0]} {sym} {args[1]})" if len(args) == 2 else f"({sym}{args[0]})"
    return f"np.{prim.ufunc.__name__}({', '.join(args)})"


def _load(value, shape, var, loops):
    """Source of one element of input ``var`` (broadcast against ``shape``) in the loop."""
    if type(value) is not np.ndarray:
        return var
    if value.ndim == 0:
        return var  # passed as its element
    r, q = len(shape), value.ndim
    parts = []
    for j in range(q):
        d = r - q + j
        parts.append("0" if value.shape[j] == 1 and shape[d] != 1 else loops[d])
    return f"{var}[{', '.join(parts)}]"


def _cast(src, have, want):
    if have == want:
        return src
    return f"{'float32' if want == np.float32 else 'float64'}({src})"


def _emit_kernel(g, w, members, key, uses, numba, fold=None):
    """Write one kernel's source, compile it (cached by source), and its call into ``w``;
    ``fold``: its result's gather (passes.gather_folds) computed instead of the result."""
    nodes, fused, em = g.nodes, w.fused, w.em
    mset = set(members)
    shape = key[members[0]]
    r = len(shape)
    loops = [f"i{d}" for d in range(r)]
    ins, in_src, outs = [], [], []   # kernel inputs (node index), their call-site source
    local = {}                      # node index -> scalar name in the kernel
    acc_name = {}                   # accumulator node -> its array name in the kernel
    pre, body, post = [], [], []

    def arg(a, want):
        if a in local:
            return _cast(local[a], _dtype(nodes[a].value), want)
        n = nodes[a]
        v = n.value
        if n.kind == "const":  # ints and bools in the text; floats are arguments, so
            lit = literal(v)      # closures differing in a constant share one kernel (and
            if lit is not None and type(v) in (int, bool):  # its machine code: Numba never
                return _cast(repr(float(v)), np.float64, want)  # frees that)
        if a not in ins:
            ins.append(a)
            src = w.expr[a]
            if type(v) is np.ndarray and v.ndim == 0:
                src = f"{src}[()]"
            in_src.append(src)
        var = f"a{ins.index(a)}"
        have = _dtype(v)
        if type(v) is np.ndarray and v.ndim == 0:
            have = v.dtype
        elif type(v) in (int, bool) or have is None:
            have = None
        return _cast(_load(v, shape, var, loops), have, want)

    def array_in(a):  # a whole array argument (read or written at an index)
        if a not in ins:
            ins.append(a)
            in_src.append(w.expr[a])
        return f"a{ins.index(a)}"

    for i in members:
        n = nodes[i]
        step = fused.get(i)
        if step is not None and step[0] == "skip":
            continue
        t = f"t{len(local)}"  # names by position: equal groups give one source, one compile
        if step is not None:  # accumulation: ``acc[idx] += value``
            kind = step[0]
            sc = i if kind == "start" else step[2]
            sn = nodes[sc]
            dt = n.value.dtype
            val = arg(sn.args[0], dt.type)
            idx = ", ".join(map(str, sn.params["idx"]))
            if kind == "start":
                acc = acc_name[i] = f"acc{len(acc_name)}"
                pre.append(f"{acc} = np.zeros({tuple(n.value.shape)!r}, np.{dt.name})")
                body.append(f"{acc}[{idx}] = {val}")
            elif kind == "start+":
                acc = acc_name[i] = f"acc{len(acc_name)}"
                pre.append(f"{acc} = {array_in(step[1])}.copy()")
                body.append(f"{acc}[{idx}] += {val}")
            else:
                prev = step[1]
                acc = acc_name[i] = acc_name[prev] if prev in acc_name else array_in(prev)
                body.append(f"{acc}[{idx}] += {val}")
            mask = w.chain_end.get(i)
            if mask is True:
                post.append(f"{acc} += 0.0")
            elif mask is not None:
                in_src.append(em.bind(np.argwhere(mask), "zero_added"))
                ins.append(("zeros added", i))
                zi = f"a{len(ins) - 1}"
                post.append(f"for _k in range({zi}.shape[0]): {acc}["
                            + ", ".join(f"{zi}[_k, {d}]" for d in range(n.value.ndim))
                            + "] += 0.0")
            continue
        dt = _dtype(n.value).type
        if lowering_of(n.prim).role == "gather_at_index":
            x = array_in(n.args[0])
            src = f"{x}[{', '.join(map(str, n.params['idx']))}]"
            src = _cast(src, nodes[n.args[0]].value.dtype.type, dt)
        else:
            src = _scalar_form(n.prim, [arg(a, dt) for a in n.args])
        body.append(f"{t} = {src}")
        local[i] = t
    # outputs: members used outside the kernel
    for i in members:
        if fused.get(i, ("",))[0] == "skip":
            continue
        # a skipped member (a scatter whose accumulation may run in another kernel) reads
        # its value from outside: what it reads is an output too
        if any(u not in mset or fused.get(u, ("",))[0] == "skip" for u in uses[i]):
            outs.append(i)
    if not outs and fold is None:
        return ""  # every member is dead (read by no live node): nothing to run
    store, ret, given = [], [], []
    head = []  # loop header: the loops over the shape, or over the gathered positions
    if fold is not None:
        # each position's loop indices, unsigned (no wraparound test on reading), one row
        # per axis: no division in the loop
        ut = np.uint32 if max(shape) < 2 ** 32 else np.uint64
        at = np.stack(np.unravel_index(fold[3], shape)).astype(ut)
        ins.append(("positions", fold[1]))
        in_src.append(em.bind(at, "positions"))
        pa = f"a{len(ins) - 1}"
        m = fold[3].size
        head.append(f"for _q in range({m}):")
        for d in range(r):
            head.append(f"    {loops[d]} = {pa}[{d}, _q]")
        pre.append(f"o0 = np.empty(({m},), np.{nodes[outs[0]].value.dtype.name})")
        store.append(f"o0[_q] = {local[outs[0]]}")
        ret.append("o0")
    for k, i in enumerate(outs if fold is None else ()):
        v = nodes[i].value
        if i in acc_name:
            ret.append(acc_name[i])
        elif r == 0:
            ret.append(local[i])
        elif v.size < pool.POOL_MIN_SIZE:  # small: Numba's allocation is the cheaper
            o = f"o{k}"
            pre.append(f"{o} = np.empty({tuple(shape)!r}, np.{v.dtype.name})")
            store.append(f"{o}[{', '.join(loops)}] = {local[i]}")
            ret.append(o)
        else:  # given by the caller: a new array, or a buffer reused across calls (pool.py)
            o = f"a{len(ins)}"
            ins.append(("out", i))
            in_src.append(f"{em.bind(np.empty, 'empty')}({tuple(shape)!r}, "
                          f"{em.bind(v.dtype, 'dtype')})")
            given.append((i, len(in_src) - 1))
            store.append(f"{o}[{', '.join(loops)}] = {local[i]}")
            ret.append(o)
    lines = list(pre)
    ind = ""
    if fold is not None:
        lines += head
        ind = "    "
    else:
        for d in range(r):
            lines.append(f"{ind}for {loops[d]} in range({shape[d]}):")
            ind += "    "
    if r and not body:
        lines.append(ind + "pass")
    lines += [ind + b for b in body + store]
    lines += post
    lines.append(f"return ({', '.join(ret)},)")
    src = "def kernel(" + ", ".join(f"a{j}" for j in range(len(ins))) + "):\n" + \
        "".join(f"    {ln}\n" for ln in lines)
    kern = _KERNELS.get(src)
    if kern is None:  # compiled once while in use, and kept on disk (kernel_cache); threads
        # that raced here each compiled one: every caller gets the first one kept
        kern = _KERNELS.setdefault(src, njit_module([("kernel", src)])["kernel"])
    kname = em.bind(kern, "kernel")
    if fold is not None:  # the gather's value: the kernel's positions, in its shape
        j = fold[1]
        t = w.expr[j] = w.fresh()
        w.lines.append(f"{t}, = {kname}({', '.join(in_src)})")
        if nodes[j].value.ndim != 1:
            w.lines.append(f"{t} = {t}.reshape({tuple(nodes[j].value.shape)!r})")
        w.guards(j)
        w.scratch.add(j)
        w.allocates.add(j)
        return src
    targets = []
    for i in outs:
        t = w.expr[i] = w.fresh()
        targets.append(t)
    w.lines.append(f"{', '.join(targets)}, = {kname}({', '.join(in_src)})")
    if given:  # the same call writing into buffers (Numba returns the arrays it was given)
        for i, p in given:
            w.pool_alt[i] = (len(w.lines) - 1, None)

        def write(out, head=f"{', '.join(targets)}, = {kname}(", src=tuple(in_src),
                  at={p: i for i, p in given}):
            return head + ", ".join(out[at[p]] if p in at else s for p, s in enumerate(src)) + ")"
        w.pool_lines[len(w.lines) - 1] = (write, {i: in_src[p] for i, p in given})
    for i in outs:
        v = nodes[i].value
        if type(v) in (np.float64, np.float32):  # NumPy scalars stay NumPy scalars
            w.lines.append(f"{w.expr[i]} = {em.bind(type(v), type(v).__name__)}({w.expr[i]})")
    for i in outs:
        w.guards(i)
        if type(nodes[i].value) is np.ndarray and i not in acc_name:
            w.scratch.add(i)
            w.allocates.add(i)  # the kernel's new array (an accumulator is its input's)
    return src
