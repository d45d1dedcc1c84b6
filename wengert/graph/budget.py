"""What fusing a program may cost: kernels of a bounded size, and fusion given up where
Numba's compile would cost more than the program saves.

Numba's compile time grows faster than a kernel's statements (:func:`compile_seconds`),
so a group of fused nodes (passes.plan) longer than :data:`KERNEL_STATEMENTS` is cut into
several kernels where the estimate says that is cheaper (each cut adds results to return).
The cut follows the trace's period where it repeats (an unrolled loop, its gradient): each
kernel then spans whole periods from the same phase, so the kernels of the repeating part
have one source, which Numba compiles once (fuse.py keeps kernels by source).

The estimated compile of the distinct kernels is then weighed against what the program
costs unfused, a NumPy call per node: past :data:`RUNS` such runs (at least :data:`FLOOR`
seconds, which every program may spend, at most :data:`CAP`), whole groups are left to
NumPy, those saving least per second of compile first.  :func:`fit` returns why, for
``fuse_failures`` and the ``UnfusedWarning``.
"""
from __future__ import annotations

import numpy as np

from . import passes
from .passes import _reconcile, _stages, python_ok, users

__all__ = ["fit", "split", "compile_seconds", "KERNEL_STATEMENTS", "RUNS", "FLOOR", "CAP"]

KERNEL_STATEMENTS = 200  # the longest kernel: Numba's cost per statement is near flat below
RUNS = 1000              # fusion may cost what this many unfused runs cost (the disk cache
#                          keeps the machine code: a compile is paid once, not per process),
FLOOR, CAP = 4.0, 10.0   # these seconds (any program may spend FLOOR; none more than CAP)
_CALL = 1.5e-6           # one NumPy call on a small array (s): the unfused program's cost
_ELEMENT = 3e-9          # and per element of its result (measured: BA's compressed pass
#                          unfused, 161 calls on 2.2 M and on 69 M elements, 2.85 ns each:
#                          a call reads its operands and writes a fresh array)
_FAR = 64                # argument distances beyond this are "far" when finding the period


def compile_seconds(statements, arrays=1):
    """Numba's compile time of one kernel on an idle core, estimated: typing and LLVM setup,
    then superlinear in the statements (a chain's gradient on 10 elements: 700 statements
    about 1.2 s, 1,400 about 3.4 s, 3,500 about 50 s); each array it reads or returns costs
    about as much as fifty statements (their loads and stores, and aliasing checks)."""
    return 0.05 + 0.001 * statements + 1e-6 * statements * statements + 0.05 * arrays


def _node_cost(n):
    v = n.value  # a primitive with several results (a scan's) holds a tuple of them
    size = sum(int(np.size(e)) for e in v) if type(v) is tuple else int(np.size(v))
    return _CALL + _ELEMENT * size


def _local_ids(g, members, fused, table):
    """Per member an id of its operation and the distances to its arguments (near ones
    only): equal ids at a fixed shift are the trace repeating."""
    nodes = g.nodes
    mset = set(members)
    out = []
    for i in members:
        n = nodes[i]
        step = fused.get(i)
        op = step[0] if step is not None else n.prim.name
        sig = (op, tuple(min(i - a, _FAR) if a in mset else -1 for a in n.args))
        out.append(table.setdefault(sig, len(table)))
    return np.asarray(out, dtype=np.int64)


def _period(ids, longest):
    """The smallest shift under which at least 80% of the sequence repeats, or None."""
    n = len(ids)
    for p in range(1, min(longest, n // 2) + 1):
        if np.count_nonzero(ids[p:] == ids[:-p]) >= 0.8 * (n - p):
            return p
    return None


def _cut(g, k, ms, fused, table, limit):
    """``ms`` as consecutive chunks of at most ``limit`` (of whole periods where it repeats)."""
    if len(ms) <= limit or _python(g, k, ms, fused):
        return [ms]
    p = _period(_local_ids(g, ms, fused, table), 2 * limit)
    step = limit if p is None else (p * max(1, limit // p) if p <= limit else p)
    return [ms[j:j + step] for j in range(0, len(ms), step)]


def _python(g, k, ms, fused):
    """An all-scalar group fuse.py runs as Python floats (no Numba): kept whole."""
    return k == () and len(ms) > passes.NUMBA_MAX_NODES and python_ok(g, ms, fused)


def split(g, groups, fused, limit=KERNEL_STATEMENTS):
    """``groups`` ({(stage, shape): members}) with every group longer than ``limit`` cut into
    consecutive chunks (of whole periods where the trace repeats), keyed ``(stage, (shape,
    j))``: chunks of one stage run in order of their first member, each reading earlier ones."""
    out, table = {}, {}
    for (s, k), ms in groups.items():
        parts = _cut(g, k, ms, fused, table, limit)
        if len(parts) == 1:
            out[(s, k)] = ms
        else:
            out.update(((s, (k, j)), c) for j, c in enumerate(parts))
    return out


def _chunk_sig(g, ms, fused, uses, shape):
    """What a chunk's kernel source depends on, without writing it (equal signatures: one
    Numba compile), and how many arrays it reads or returns."""
    nodes = g.nodes
    pos = {i: j for j, i in enumerate(ms)}
    ext = {}
    parts = [shape]
    outs = 0
    for j, i in enumerate(ms):
        n = nodes[i]
        step = fused.get(i)
        args = []
        for a in n.args:
            if a in pos:
                args.append(pos[a] - j)
            else:
                v = nodes[a].value
                if nodes[a].kind == "const" and type(v) in (int, bool):
                    args.append(("lit", v))
                else:
                    args.append((ext.setdefault(a, len(ext)), type(v),
                                 getattr(v, "shape", ()), getattr(v, "dtype", None)))
        out = any(u not in pos for u in uses[i])
        outs += out
        v = n.value
        parts.append((step[0] if step else n.prim, tuple(args),
                      (_hashable(n.params.get("idx")), n.params.get("keepdims"))
                      if n.kind == "op" else None,
                      getattr(v, "dtype", type(v)), out))
    arrays = outs + sum(1 for a in ext if type(nodes[a].value) is np.ndarray)
    try:
        return hash(tuple(parts)), arrays
    except TypeError:  # an unhashable index: this chunk is its own
        return id(ms), arrays


def _hashable(idx):
    """An index with its slices as tuples (a slice is unhashable before Python 3.12: a
    chunk holding one, a pad's, would count as a kernel of its own)."""
    if type(idx) is slice:
        return ("slice", idx.start, idx.stop, idx.step)
    if type(idx) is tuple:
        return tuple(_hashable(e) for e in idx)
    return idx


def _regroup(g, live, key):
    stage = _stages(g, live, key)
    groups = {}
    for i in range(len(g.nodes)):
        if key[i] is not None:
            groups.setdefault((stage[i], key[i]), []).append(i)
    return stage, groups


def fit(g, live, fused, key, stage, groups, runs=None, floor=None, cap=None):
    """passes.plan's ``(key, stage, groups)`` with long groups cut (:func:`split`) and, where
    the distinct kernels' estimated compile exceeds ``runs`` unfused runs of the program
    (``floor`` seconds at least, ``cap`` at most), the kernels saving least per second of
    compile left to NumPy calls; and a list of messages saying what was left and why (empty when nothing was)."""
    if not groups:
        return key, stage, groups, []
    runs = RUNS if runs is None else runs
    floor = FLOOR if floor is None else floor
    cap = CAP if cap is None else cap
    uses = users(g, live)
    unfused = sum(_node_cost(n) for i, n in enumerate(g.nodes) if live[i] and n.kind == "op")
    budget = max(floor, min(runs * unfused, cap))
    by_group, chunks, table, seen = {}, {}, {}, {}
    for (s, k), ms in groups.items():
        if _python(g, k, ms, fused):
            chunks[(s, k)] = ms
            continue
        parts = _cut(g, k, ms, fused, table, KERNEL_STATEMENTS)
        order = []  # (signature, members) per kernel, in the order they run
        for c in parts:
            sig, arrays = _chunk_sig(g, c, fused, uses, k)
            seen[sig] = compile_seconds(len(c), arrays)
            order.append((sig, c))
        if len(parts) > 1:  # cut only where that is the cheaper: each cut adds results
            mset = set(ms)
            outs = sum(1 for i in ms if any(u not in mset for u in uses[i]))
            whole = compile_seconds(len(ms), outs)
            if whole <= sum(seen[sig] for sig in {sig for sig, _ in order}):
                parts, order = [ms], [(("whole", s, k), ms)]
                seen[("whole", s, k)] = whole
        if len(parts) == 1:
            chunks[(s, k)] = ms
        else:
            chunks.update(((s, (k, j)), c) for j, c in enumerate(parts))
        by_group[(s, k)] = order
    needed = {sig for order in by_group.values() for sig, _ in order}
    total = sum(seen[sig] for sig in needed)
    if total <= budget:
        return key, stage, chunks, []
    # greedy: the groups that save the most unfused time per second of compile first; of a
    # group cut in kernels, those that fit (each kernel reads only the ones before it, so
    # the ones past the first that does not fit run as NumPy calls, after them)
    ranked = []
    for gk, order in by_group.items():
        cost = sum(seen[sig] for sig in {sig for sig, _ in order})
        saved = sum(_node_cost(g.nodes[i]) for i in groups[gk])
        ranked.append((saved / cost, gk, order))
    ranked.sort(key=lambda r: -r[0])
    paid, compiled = 0.0, set()
    dropped = []
    for _, gk, order in ranked:
        for j, (sig, c) in enumerate(order):
            extra = 0.0 if sig in compiled else seen[sig]
            if paid + extra > budget:
                dropped.extend(m for _, c2 in order[j:] for m in c2)
                break
            paid += extra
            compiled.add(sig)
    key = list(key)
    for i in dropped:
        key[i] = None
    left = len(dropped)
    key = _reconcile(key, fused)
    stage, groups = _regroup(g, live, key)
    key, stage, groups, _ = fit(g, live, fused, key, stage, groups, runs, float("inf"),
                                float("inf"))
    message = (f"fusion backed off: Numba would take about {total:.0f} s to compile this "
               f"program's {len(needed)} distinct kernels, more than {runs} runs of it unfused "
               f"(about {runs * unfused:.2g} s; budget {budget:.2g} s); {left} of its "
               "elementwise nodes run as NumPy calls instead (wengert.graph.budget)")
    return key, stage, groups, [message]
