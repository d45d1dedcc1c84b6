"""Buffer reuse across calls: a compiled program's internal temporaries written with ``out=``.

A generated program allocates one array per NumPy call.  Where a call is a ufunc (``tanh``,
``matmul``, or a Python operator on arrays, which NumPy runs as the ufunc) or a fused kernel
(given its result arrays) and its result provably never leaves the call, ``wg.compile`` keeps
a buffer for it per program (so per input signature and branch) and writes into it with
``out=`` on every call; calls whose lifetimes do not overlap share one (:func:`_share`).

What "never leaves" means, proved on the program's data flow (:func:`plan`): each node gets
the set of pool buffers its value may share memory with -- its own buffer for a pooled call,
none for a call that allocates (an unpooled ufunc call, a fused kernel's new array), ``a``'s
for ``a += b``, and for every other node (reshapes, transposes, indexing, sums, kernels'
accumulators, anything unknown) the union over its arguments: it may be a view of any of them.
A buffer in the set of an output (any leaf of the returned pytree) escapes; so does one passed
to a primitive that may run user code (a ``custom_vjp`` body, a primitive outside
``wengert.rules``, a parameter that is a function), which could keep it.  Escaping buffers are
not pooled: those calls allocate as before.

Re-entrancy: each program's pool has a lock taken without waiting.  A call that finds it taken
-- another thread's call in flight, or a recursive call from inside the program (a callback
calling the compiled function) -- runs the unpooled program, so no two calls in flight ever
share a buffer.  The pooled program gives the unpooled program's bits: the same ufunc loops
write the same values, into a buffer laid out as the traced result was (C order); a call whose
array arguments are laid out otherwise than the traced ones (a transposed input: other layouts
downstream, so other summation orders) runs the unpooled program too.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from ..rules.lowering import OPERATOR_FORMS, python_operator

__all__ = ["reuse_default", "out_ufunc", "plan", "POOL_MIN_SIZE", "POOL_MAX_BYTES"]

POOL_MIN_SIZE = 1024       # smaller arrays are allocated: NumPy's allocator caches them anyway
POOL_MAX_BYTES = 1 << 28   # the most one program keeps between calls (256 MiB)

_NUMBERS = (float, int, bool, complex, np.number, np.bool_)


def reuse_default():
    """Reuse buffers unless ``WENGERT_REUSE_BUFFERS=0``."""
    return os.environ.get("WENGERT_REUSE_BUFFERS", "1") != "0"


def out_ufunc(n, arg_values):
    """The ufunc that computes node ``n`` exactly as its generated statement does, taking
    ``out=``; or None.  Only array results of ufunc calls without keywords qualify."""
    v = n.value
    if n.kind != "op" or n.params or type(v) is not np.ndarray or not v.ndim or \
            v.dtype.kind not in "biufc" or n.prim.multiple_results:
        return None
    impl = n.prim.impl
    if isinstance(impl, np.ufunc):
        u = impl
    else:
        # Python's operators on an ndarray operand are NumPy's ufuncs (OPERATOR_FORMS: not ``**``,
        # whose ``__pow__`` takes shortcuts for scalar exponents, ``square``, ``sqrt``...)
        op = python_operator(n.prim)
        u = OPERATOR_FORMS[op].ufunc if op is not None else None
        if u is None or not any(type(a) is np.ndarray for a in arg_values) or \
                not all(type(a) is np.ndarray or isinstance(a, _NUMBERS) for a in arg_values):
            return None  # a Python operator is NumPy's ufunc only with an ndarray operand
    if u.nout != 1 or u.nin != len(arg_values):
        return None
    return u


def _trusted(n):
    """False for a node that may run user code (which could keep a reference to an argument):
    only wengert's own rules, NumPy's functions and Python's operators are trusted, and none
    given a function as a parameter."""
    impl = n.prim.impl
    if not (isinstance(impl, np.ufunc) or python_operator(n.prim) is not None):
        mod = getattr(impl, "__module__", None) or ""
        if not (mod.startswith("wengert.rules.") or mod == "numpy" or mod.startswith("numpy.")):
            return False
    for p in n.params.values():
        for q in (p if type(p) in (tuple, list) else (p,)):
            if callable(q) and not isinstance(q, (type, np.ufunc, np.dtype)):
                return False
    return True


def plan(g, w, live):
    """``{node: buffer}``: the candidate calls ``w`` (a BodyWriter after writing) recorded whose
    results provably stay inside the program (module docstring), within ``POOL_MAX_BYTES``."""
    nodes = g.nodes
    cands = [i for i in sorted(w.pool_alt)
             if nodes[i].value.size >= POOL_MIN_SIZE and nodes[i].value.flags.c_contiguous]
    if not cands:
        return {}
    cset = set(cands)
    empty = frozenset()
    bases = {}
    escaped = set()
    for i, n in enumerate(nodes):
        if not live[i] or n.kind in ("input", "const"):
            continue
        if i in cset:
            bases[i] = frozenset((i,))
            continue
        if i in w.allocates:
            continue
        if i in w.in_place_of:  # ``a += b``: a's memory, b only read
            b = bases.get(w.in_place_of[i], empty)
            if b:
                bases[i] = b
            continue
        srcs = list(n.args)
        step = w.fused.get(i)
        if step is not None:  # an accumulation writes into its chain's buffer
            srcs += [s for s in step[1:] if type(s) is int]
        b = empty.union(*(bases.get(a, empty) for a in srcs))
        if n.kind == "op" and not _trusted(n):
            escaped |= b
        if b:
            bases[i] = b
    for o in g.outputs:
        escaped |= bases.get(o, empty)
    return _share(g, w, live, [c for c in cands if c not in escaped], bases)


def _share(g, w, live, keep, bases):
    """Buffers for the ``keep`` calls, one shared by calls whose lifetimes do not overlap.

    A buffer's lifetime runs from its call's line to the last line reading a value that may
    share its memory (a node whose position is unknown reads at the end).  A call may take a
    buffer whose last reading is its own statement when it is an elementwise ufunc (NumPy
    computes overlapping operands as if copied first): ``np.add(v1, b, out=v1's buffer)``;
    never a kernel (it may read an operand at other positions than it writes)."""
    nodes, at, inf = g.nodes, w.at, float("inf")
    last = {c: w.pool_alt[c][0] for c in keep}
    in_place = {c for c in keep if isinstance(w.pool_alt[c][1], np.ufunc)
                and w.pool_alt[c][1].signature is None}  # elementwise: not matmul, kernels
    reads = [(j, a) for j, n in enumerate(nodes) if live[j] and n.kind in ("op", "proj")
             for a in list(n.args) + [s for s in w.fused.get(j, ())[1:] if type(s) is int]]
    reads += [(i, i) for i, _ in g.guards]
    for j, a in reads:
        pos = at.get(j, inf)
        for c in bases.get(a, ()):
            if c in last and pos > last[c]:
                last[c] = pos
    slots, out, total = [], {}, 0  # slots: [buffer, last reading]
    for c in sorted(keep, key=lambda c: w.pool_alt[c][0]):
        line, v = w.pool_alt[c][0], nodes[c].value
        for s in slots:
            b = s[0]
            if b.shape == v.shape and b.dtype == v.dtype and \
                    (s[1] < line or (s[1] == line and c in in_place)):
                break
        else:
            if total + v.nbytes > POOL_MAX_BYTES:
                continue
            total += v.nbytes
            s = [np.empty(v.shape, v.dtype), None]
            slots.append(s)
        s[1] = last[c]
        out[c] = s[0]
    return out


def pooled_text(g, w, pooled, names, functions, sig, unpack_lines, ret, exact, assemble):
    """Source of the program writing into the buffers and of the entry calling it when its
    lock is free, else the plain program: ``functions`` names (entry, pooled, plain);
    ``assemble`` writes a program from its parts (codegen.program_text)."""
    name, pname, plain = functions
    em = w.em
    lines = list(w.lines)
    for k, (write, plain_src) in w.pool_lines.items():  # each such line written again, whole
        if any(i in pooled for i in plain_src):
            lines[k] = write({i: em.bind(pooled[i], f"buf{i}") if i in pooled else src
                              for i, src in plain_src.items()})
    values = [g.nodes[i].value for i in g.input_nodes]
    checks = [f"{names[k]}.strides != {v.strides!r}" for k, v in enumerate(values)
              if type(v) is np.ndarray and v.ndim]
    check = [f"if {' or '.join(checks)}: return {plain}({sig})  # another layout"] \
        if checks else []
    text = assemble(pname, sig, unpack_lines + check, lines, ret, exact)
    lock = threading.Lock()
    acquire, release = em.bind(lock.acquire, "pool_acquire"), em.bind(lock.release, "pool_release")
    text += (f"def {name}({sig}):\n"
             f"    if {acquire}(False):  # no call in flight holds the buffers\n"
             f"        try:\n"
             f"            return {pname}({sig})\n"
             f"        finally:\n"
             f"            {release}()\n"
             f"    return {plain}({sig})\n")
    return text

