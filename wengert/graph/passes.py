"""The compiled program's optimisations as passes over the graph, before any text is written:
each reads the graph (and the primitives' ``lowering`` facts, rules/lowering.py) and returns
what the one emitter (lower.py, in its NumPy, Numba-kernel and Python-float dialects) then
writes.

* :func:`live` -- the nodes an output or a guard reads;
* :func:`accumulations` -- scatter fusion, once for every dialect: chains
  ``a_k = a_(k-1) + scatter(v_k)`` become in-place updates of one buffer (``accumulate_into``:
  steps ``start``, ``start+``, ``add``, ``skip`` per node), which the NumPy program writes
  ``gx[idx] += v``, a kernel ``acc[i, j] += v`` and an all-scalar group a list's element;
* :func:`plan` -- kernels (``kernel(subgraph)``): each node's loop shape (or None: a NumPy
  call) and stage, grouped into kernels that run before their stage's NumPy calls;
* :func:`gather_folds` -- a kernel whose one result only a ``gather_flat`` reads (through
  ``flat_view`` reshapes) computes the gathered elements instead;
* :func:`python_ok` -- a large all-scalar group that runs as Python floats instead;
* :func:`schedule` -- the order the program runs its steps in: one node's statement, a kernel,
  an all-scalar group as Python floats;
* :func:`in_place` -- ``a += b`` where ``a`` is a temporary the program allocated and no one
  else reads (``inplace``);
* :func:`buffers` -- the ``out=`` buffers: which calls write into buffers kept between calls,
  and which share one (wengert/graph/pool.py holds the settings).

Each returns plain data (node -> decision) that the emitter (lower.py) reads while writing
each statement once; nothing here or there rewrites text after it is written.
"""
from __future__ import annotations

import operator

import numpy as np

from . import pool
from ..rules.lowering import OPERATOR_FORMS, lowering_of, operator_symbol as symbol, \
    python_operator

__all__ = ["symbol", "live", "accumulations", "plan", "gather_folds", "python_ok", "users",
           "dtype_of", "ufunc_ok", "SIMD_SIZE", "NUMBA_MAX_NODES", "kernel_outputs",
           "schedule", "in_place", "out_ufunc", "ufunc_of", "given_outputs", "buffers",
           "sums_last_axis", "SHORT_AXIS", "joins_last_axis", "pad_box"]

_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


def live(g):
    live = [False] * len(g.nodes)
    stack = list(g.outputs) + [i for i, _ in g.guards]
    while stack:
        i = stack.pop()
        if live[i]:
            continue
        live[i] = True
        stack.extend(g.nodes[i].args)
    return live


def accumulations(g, live):
    """Chains ``a_k = a_(k-1) + scatter(v_k)`` to emit as in-place updates of one buffer.

    Exact: the unfused sum adds ``+0.0`` outside each ``idx``, which changes nothing but
    ``-0.0`` into ``+0.0``; the fused form does that once at the end, where it happened.
    """
    nodes = g.nodes
    uses = [0] * len(nodes)
    for i, n in enumerate(nodes):
        if live[i]:
            for a in n.args:
                uses[a] += 1
    for o in g.outputs:
        uses[o] += 1
    for i, _ in g.guards:
        uses[i] += 1
    scatter_of = {}
    for i, n in enumerate(nodes):
        if (live[i] and n.kind == "op" and lowering_of(n.prim).role == "scatter_into_zeros"
                and len(n.args) == 1
                and isinstance(n.value, np.ndarray) and uses[i] == 1):
            scatter_of[i] = n
    fused, chain_end = {}, {}
    prev_of = {}  # add node -> (accumulator node, scatter node)
    for i, n in enumerate(nodes):
        if not (live[i] and n.kind == "op" and python_operator(n.prim) is operator.add
                and not n.params and isinstance(n.value, np.ndarray)):
            continue
        a, b = n.args
        if b in scatter_of and a not in scatter_of or (b in scatter_of and a in scatter_of):
            acc, sc = a, b
        elif a in scatter_of:
            acc, sc = b, a
        else:
            continue
        av, sv = nodes[acc].value, nodes[sc].value
        if not (isinstance(av, np.ndarray) and av.shape == sv.shape == n.value.shape
                and av.dtype == sv.dtype == n.value.dtype and av.dtype.kind == "f"):
            continue
        prev_of[i] = (acc, sc)
    # follow chains from their ends
    taken = set()
    for end in sorted(prev_of, reverse=True):
        if end in taken:
            continue
        chain = [end]
        while True:
            acc, _ = prev_of[chain[-1]]
            if acc in prev_of and uses[acc] == 1 and acc not in taken:
                chain.append(acc)
            else:
                break
        chain.reverse()
        if len(chain) < 2:
            continue
        first_acc = prev_of[chain[0]][0]
        taken.update(chain)
        steps = [prev_of[c][1] for c in chain]
        if first_acc in scatter_of:
            fused[first_acc] = ("start", first_acc, nodes[first_acc].value.dtype)
            prev = first_acc
        else:
            prev = None
        shape = nodes[chain[-1]].value.shape
        inserted = np.zeros(shape, bool)
        for c, sc in zip(chain, steps):
            if prev is None:
                fused[c] = ("start+", first_acc, sc)
            else:
                fused[c] = ("add", prev, sc)
            prev = c
            covered = np.zeros(shape, bool)
            covered[nodes[sc].params["idx"]] = True
            inserted |= ~covered
        chain_end[chain[-1]] = True if inserted.all() else (inserted if inserted.any() else None)
        for sc in steps:
            fused[sc] = ("skip",)
    return fused, chain_end, scatter_of


def dtype_of(v):
    """The float dtype of a fusable value, or None."""
    t = type(v)
    if t is float:
        return _FLOATS[0]
    if t in (np.float64, np.float32):
        return np.dtype(t)
    if t is np.ndarray and v.dtype in _FLOATS and v.size:
        return v.dtype
    return None


def _scalar_arg(v):
    return type(v) in (float, int, bool, np.float64, np.float32, np.int64, np.bool_) or (
        type(v) is np.ndarray and v.dtype.kind in "biuf")


def ufunc_ok(n, supported):
    u = n.prim.ufunc
    if lowering_of(n.prim).scalar is not None:  # float64 only
        return u is not None and not n.params and dtype_of(n.value) == _FLOATS[0] and \
            len(n.args) == u.nin
    if u is None or n.params or n.prim.multiple_results or u not in supported \
            or getattr(np, u.__name__, None) is not u or u.nout != 1:
        return False
    c = dtype_of(n.value).char
    return f"{c * u.nin}->{c}" in u.types and len(n.args) == u.nin


def _classify(g, live, fused, supported):
    """Per node: its fusion key (the loop shape) or None (a NumPy call)."""
    nodes = g.nodes
    key = [None] * len(nodes)
    for i, n in enumerate(nodes):
        if not live[i] or n.kind != "op":
            continue
        step = fused.get(i)
        if step is not None:
            continue  # accumulation chains: below
        d = dtype_of(n.value)
        if d is None or not all(_scalar_arg(nodes[a].value) for a in n.args):
            continue
        role = lowering_of(n.prim).role
        if role == "join":
            if joins_last_axis(n, [nodes[a].value for a in n.args]):
                key[i] = n.value.shape  # its operands read in place
        elif role == "scatter_into_zeros":
            if pad_box(n, nodes[n.args[0]].value) is not None:
                key[i] = n.value.shape  # its operand read in place, zeros around it
        elif role == "sum_axes":
            if sums_last_axis(n, nodes[n.args[0]].value):
                key[i] = nodes[n.args[0]].value.shape  # in its operand's loop
        elif role == "gather_at_index":
            idx = n.params.get("idx")
            x = nodes[n.args[0]].value
            if np.ndim(n.value) == 0 and type(n.value) is not np.ndarray and \
                    type(x) is np.ndarray and type(idx) is tuple and len(idx) == x.ndim and \
                    all(type(e) is int for e in idx):
                key[i] = ()
        elif ufunc_ok(n, supported):
            key[i] = np.shape(n.value)
    # accumulation chains whose scattered values are scalars and indices whole elements
    for i, step in fused.items():
        if step[0] == "skip":
            continue
        sc = i if step[0] == "start" else step[2]
        sn = nodes[sc]
        v = nodes[sn.args[0]].value
        idx = sn.params["idx"]
        acc = nodes[i].value
        if dtype_of(v) is not None and np.ndim(v) == 0 and type(v) is not np.ndarray and \
                type(idx) is tuple and len(idx) == acc.ndim and \
                all(type(e) is int for e in idx):
            key[i] = ()
            if step[0] != "start":
                key[sc] = ()
    return _reconcile(key, fused)


# a sum over a last axis at most this long is summed inside its operand's kernel (each
# element added where it is computed) rather than by NumPy from an array written for it
SHORT_AXIS = 7  # (from 8 terms on NumPy adds in eight interleaved partial sums)


def sums_last_axis(n, x):
    """Whether node ``n`` is a sum over its operand ``x``'s short last axis alone that a
    kernel looping over ``x``'s shape can add up, from +0.0 and left to right as NumPy does
    (its result then the same to the bit)."""
    if lowering_of(n.prim).role != "sum_axes" or type(x) is not np.ndarray or x.ndim < 2 or \
            type(n.value) is not np.ndarray or n.value.dtype != x.dtype or \
            x.dtype not in _FLOATS or not 1 <= x.shape[-1] <= SHORT_AXIS or \
            set(n.params) - {"axis", "keepdims"} or len(n.args) != 1:
        return False
    axis = n.params.get("axis")
    if type(axis) is tuple and len(axis) == 1:
        axis = axis[0]
    return type(axis) is int and axis in (-1, x.ndim - 1) and \
        type(n.params.get("keepdims", False)) is bool


def joins_last_axis(n, xs):
    """Whether node ``n`` joins arrays ``xs`` of its dtype and rank along their last axis
    (a cross product's columns, a Jacobian pass's blocks), so that a kernel looping over
    ``n``'s shape can read each element from the operand holding it."""
    v = n.value
    if lowering_of(n.prim).role != "join" or type(v) is not np.ndarray or \
            v.dtype not in _FLOATS or not v.ndim or set(n.params) - {"axis"} or len(xs) < 2:
        return False
    axis = n.params.get("axis", 0)
    if type(axis) is not int or axis not in (-1, v.ndim - 1):
        return False
    return all(type(x) is np.ndarray and x.dtype == v.dtype and x.shape[:-1] == v.shape[:-1]
               and x.ndim == v.ndim and 0 < x.shape[-1] < v.shape[-1] for x in xs)


def pad_box(n, x):
    """``[(lo, hi)]`` per axis where node ``n`` writes ``x`` into zeros of its shape over a
    box of unit-step slices smaller than the whole (a pullback of ``x[1:]`` or of a
    concatenate's operand), so that a kernel looping over ``n``'s shape reads each element
    from ``x`` inside the box and 0.0 outside, with no zeros written and copied; else None."""
    v = n.value
    if lowering_of(n.prim).role != "scatter_into_zeros" or type(v) is not np.ndarray or \
            v.dtype not in _FLOATS or not v.ndim or len(n.args) != 1 or \
            type(x) is not np.ndarray or x.dtype != v.dtype or x.ndim != v.ndim or \
            not x.size or x.shape == v.shape:
        return None
    idx = n.params.get("idx")
    idx = idx if type(idx) is tuple else (idx,)
    if len(idx) > v.ndim:
        return None
    box = []
    for e, size, k in zip(idx + (slice(None),) * (v.ndim - len(idx)), v.shape, x.shape):
        if type(e) is not slice or not all(b is None or type(b) is int
                                           for b in (e.start, e.stop, e.step)):
            return None
        lo, hi, step = e.indices(size)
        if step != 1 or hi - lo != k:
            return None
        box.append((lo, hi))
    return box


def _stages(g, live, key):
    """Each node's stage: its kernel runs after every kernel and NumPy call of the stages
    before. A node reading a fused sum is one stage later even at the same loop shape: the
    sum is complete only when its kernel has run."""
    nodes = g.nodes
    stage = [0] * len(nodes)
    for i, n in enumerate(nodes):
        if not live[i] or n.kind in ("input", "const"):
            continue
        s = 0
        for a in n.args:
            an = nodes[a]
            if an.kind in ("input", "const"):
                continue
            if key[i] is None:
                s = max(s, stage[a])
            elif key[a] is None or key[a] != key[i] or \
                    lowering_of(an.prim).role == "sum_axes":
                s = max(s, stage[a] + 1)
            else:
                s = max(s, stage[a])
        stage[i] = s
    return stage


# NumPy's SIMD tanh, exp, log... beat the C library's scalar ones that a kernel calls: on
# large arrays those stay NumPy calls (the arithmetic around them still fuses)
SIMD_SIZE = 4096


def _is_operator(prim):
    op = python_operator(prim)
    return op is not None and symbol(op, OPERATOR_FORMS[op].arity) is not None


def plan(g, live, fused, supported):
    key = _classify(g, live, fused, supported)
    for i, k in enumerate(key):
        if k and int(np.prod(k)) > SIMD_SIZE and g.nodes[i].prim.ufunc is not None and \
                not _is_operator(g.nodes[i].prim) and \
                lowering_of(g.nodes[i].prim).scalar is None:  # SciPy's: scalar
            key[i] = None
    # a group of one computing node gains nothing: make it a NumPy call, and regroup (but a
    # join whose result is only gathered: its kernel reads the gathered elements in place)
    uses = None
    for _ in range(4):
        stage = _stages(g, live, key)
        groups = {}
        for i in range(len(g.nodes)):
            if key[i] is not None:
                groups.setdefault((stage[i], key[i]), []).append(i)
        # (counted once per group: per member, it was quadratic -- seconds at 8,000 nodes)
        lonely = [m for ms in groups.values()
                  if sum(1 for j in ms if fused.get(j, ("",))[0] != "skip") < 2 for m in ms]
        if any(lowering_of(g.nodes[m].prim).role == "join" for m in lonely):
            uses = uses or users(g, live)
            lonely = [m for m in lonely if lowering_of(g.nodes[m].prim).role != "join"
                      or _gathered(g, m, uses) is None]
        if not lonely:
            break
        for m in lonely:
            key[m] = None
        key = _reconcile(key, fused)
    else:
        stage = _stages(g, live, key)
        groups = {}
        for i in range(len(g.nodes)):
            if key[i] is not None:
                groups.setdefault((stage[i], key[i]), []).append(i)
    return key, stage, groups


def _reconcile(key, fused):
    changed = True
    while changed:
        changed = False
        for i, step in fused.items():
            if step[0] == "add" and (key[i] is None) != (key[step[1]] is None):
                key[i] = key[step[1]] = None
                changed = True
            if step[0] in ("add", "start+") and (key[i] is None) != (key[step[2]] is None):
                key[i] = key[step[2]] = None
                changed = True
    return key


# -- a gather by flat positions folded into the kernel whose result it reads -----------------
# A compressed sparse Jacobian pass ends ``y = kernel(...)`` (k, m), ``gather(reshape(y), flat)``
# (the nnz stored entries): the kernel then loops over the positions instead, computing each
# gathered element where it is needed -- one array of nnz instead of (k, m) and its copy.


def _gathered(g, u, uses):
    """The ``gather_flat`` node reading ``u`` alone (through ``flat_view`` reshapes read by
    nothing else), with the chain to it; or None."""
    nodes, chain = g.nodes, []
    while len(uses[u]) == 1:
        j = next(iter(uses[u]))
        n = nodes[j] if j >= 0 else None
        if n is None or n.kind != "op" or len(n.args) != 1 or n.args[0] != u:
            return None
        chain.append(j)
        role = lowering_of(n.prim).role
        if role == "gather_flat":
            return j, chain
        if role != "flat_view":
            return None
        u = j
    return None


def gather_folds(g, groups, fused, uses):
    """{first member: (output node, gather node, [flat views..., gather], positions)} for the
    groups whose one result is read only by a ``gather_flat`` primitive, through
    ``flat_view`` ones (reshapes: the same elements in C order)."""
    nodes = g.nodes
    folds = {}
    for ms in groups:
        mset = set(ms)
        outs = [i for i in ms if any(u not in mset for u in uses[i])]
        if len(outs) != 1 or any(i in fused for i in ms) or not np.ndim(nodes[outs[0]].value) \
                or any(lowering_of(nodes[i].prim).role == "sum_axes" for i in ms):
            continue
        o = outs[0]
        found = _gathered(g, o, uses)
        if found is not None:
            j, chain = found
            pos = _positions(nodes[nodes[j].args[0]].value, nodes[j].params, nodes[o].value,
                             nodes[j].value)
            if pos is not None:
                folds[ms[0]] = (o, j, chain, pos)
    return folds


def _positions(x, params, y, ans):
    """Each gathered element's flat position in ``y`` (the group's result, of which the
    gather's operand ``x`` is a C-order view), or None where NumPy's gather would raise."""
    flat = np.asarray(params["flat"])
    nb = params.get("lead", 0)
    if type(x) is not np.ndarray or type(ans) is not np.ndarray or ans.dtype != y.dtype or \
            x.size != y.size or flat.dtype.kind not in "iu" or not ans.size:
        return None
    inner = int(np.prod(x.shape[nb:], dtype=np.int64))
    if inner == 0 or (flat.size and (flat.min() < -inner or flat.max() >= inner)):
        return None
    pos = flat.ravel()
    if pos.dtype != np.intp or (pos.size and pos.min() < 0):
        pos = np.where(pos < 0, pos + inner, pos).astype(np.intp)
    nlead = int(np.prod(x.shape[:nb], dtype=np.int64))
    if nlead * flat.size > x.size:  # more positions than elements: computing each once is less
        return None
    if nlead != 1:
        pos = (np.arange(nlead, dtype=np.intp)[:, None] * inner + pos[None, :]).ravel()
    return np.ascontiguousarray(pos)


# Numba's compile time grows faster than the number of statements (a Rosenbrock gradient over
# 100 elements, 1,200 scalar statements: 24 s); a larger all-scalar group of float64 values
# runs as Python floats instead -- the same IEEE operations, without NumPy scalars' overhead
NUMBA_MAX_NODES = 300


def python_ok(g, members, fused):
    nodes = g.nodes
    mset = set(members)
    for i in members:
        n = nodes[i]
        step = fused.get(i)
        if step is not None:
            if step[0] == "skip":
                continue
            if n.value.dtype != np.float64 or (step[0] == "add" and step[1] not in mset):
                return False
            if step[0] == "start+" and (type(nodes[step[1]].value) is not np.ndarray
                                        or nodes[step[1]].value.ndim != 1):
                return False
            args = [nodes[step[2] if step[0] != "start" else i].args[0]]
        else:
            if type(n.value) not in (float, np.float64):
                return False
            args = n.args
        for a in args:
            v = nodes[a].value
            if a in mset:
                continue
            if lowering_of(n.prim).role == "gather_at_index" and a == n.args[0]:
                if v.dtype != np.float64:
                    return False
            elif type(v) not in (float, int, bool, np.float64):
                return False
    return True


def users(g, live):
    users = [set() for _ in g.nodes]
    for i, n in enumerate(g.nodes):
        if live[i]:
            for a in n.args:
                users[a].add(i)
    for o in g.outputs:
        users[o].add(-1)
    for i, _ in g.guards:
        users[i].add(-1)
    return users




# -- the schedule: what the program runs, in order ---------------------------------------------

def kernel_outputs(members, fused, uses):
    """The members of a kernel whose values leave it: read outside it, or by a skipped
    scatter (whose accumulation may run in another kernel)."""
    mset = set(members)

    def skipped(j):
        return fused.get(j, ("",))[0] == "skip"
    return [i for i in members
            if not skipped(i) and any(u not in mset or skipped(u) for u in uses[i])]


def schedule(g, live, fused=None, kernels=None, uses=None):
    """The program's steps in order: ``("node", i)`` (one node's statements), ``("kernel",
    members, shape, fold)``, ``("python", members)`` (an all-scalar group as Python floats)
    and ``("guards", i)`` (an input's guards).  Without ``kernels`` (``plan``'s ``(key, stage,
    groups)``): every live node in the graph's order.  With them, each stage's kernels run
    before its NumPy calls, so every kernel's inputs exist when it runs."""
    if kernels is None:
        return [("node", i) for i in range(len(g.nodes)) if live[i]]
    key, stage, groups = kernels
    by_stage = {}
    for (s, k), ms in groups.items():
        by_stage.setdefault(s, []).append(ms)
    top = max(stage[i] for i in range(len(g.nodes)) if live[i]) if any(live) else 0
    folds = gather_folds(g, groups.values(), fused, uses)
    folded = {j for f in folds.values() for j in f[2]}
    calls_at = {}  # stage -> its NumPy calls, in the graph's order
    for i, n in enumerate(g.nodes):
        if live[i] and key[i] is None and n.kind in ("op", "proj") and i not in folded:
            calls_at.setdefault(stage[i], []).append(i)
    steps = []
    for s in range(top + 1):
        for ms in sorted(by_stage.get(s, ()), key=lambda ms: ms[0]):
            if key[ms[0]] == () and len(ms) > NUMBA_MAX_NODES and python_ok(g, ms, fused):
                steps.append(("python", ms))
            else:
                steps.append(("kernel", ms, key[ms[0]], folds.get(ms[0])))
        steps += [("node", i) for i in calls_at.get(s, ())]
    return steps + [("guards", i) for i in g.input_nodes]


# -- inplace: ``a += b`` into a temporary no one else reads --------------------------------------

def in_place(g, live, steps, fused, uses):
    """``{node: a}`` for the arithmetic nodes written ``a op= b``: ``a`` an array the program
    itself allocated (a ufunc call's, a kernel's result: fresh every call) that nothing else
    reads, of the result's shape and dtype."""
    nodes = g.nodes
    count = [len(u) for u in uses]
    scratch = {i for i, n in enumerate(nodes) if live[i] and n.kind == "op"
               and n.prim.ufunc is not None and i not in fused
               and type(n.value) is np.ndarray and n.value.ndim}
    out = {}
    for step in steps:
        if step[0] == "kernel":
            fold = step[3]
            if fold is not None:
                scratch.add(fold[1])
            else:
                scratch.update(i for i in kernel_outputs(step[1], fused, uses)
                               if type(nodes[i].value) is np.ndarray and i not in fused)
        elif step[0] == "node" and step[1] not in fused and nodes[step[1]].kind == "op":
            i = step[1]
            a = _overwritten(nodes, nodes[i], scratch, count)
            if a is not None:
                out[i] = a
                scratch.add(i)
    return out


def _overwritten(nodes, n, scratch, count):
    if n.params or type(n.value) is not np.ndarray:
        return None
    op = python_operator(n.prim)
    if op is None or not OPERATOR_FORMS[op].in_place:
        return None
    for side in ((0, 1) if OPERATOR_FORMS[op].commutes else (0,)):
        a, b = n.args[side], n.args[1 - side]
        av = nodes[a].value
        if (a in scratch and count[a] == 1 and type(av) is np.ndarray
                and av.shape == n.value.shape and av.dtype == n.value.dtype and a != b):
            return a
    return None


# -- out=: buffers kept between calls (pool.py's settings; docs/graph.md) -----------------------
# What "never leaves" means, proved on the program's data flow: each node gets the set of pool
# buffers its value may share memory with -- its own buffer for a pooled call, none for a call
# that allocates (an unpooled ufunc call, a fused kernel's new array), ``a``'s for ``a += b``,
# and for every other node (reshapes, transposes, indexing, sums, kernels' accumulators,
# anything unknown) the union over its arguments: it may be a view of any of them.  A buffer in
# the set of an output (any leaf of the returned pytree) escapes; so does one passed to a
# primitive that may run user code (a ``custom_vjp`` body, a primitive outside
# ``wengert.rules``, a parameter that is a function), which could keep it.

_NUMBERS = (float, int, bool, complex, np.number, np.bool_)


def out_ufunc(n, arg_values):
    """The ufunc that computes node ``n`` exactly as its generated statement does, taking
    ``out=``; or None.  Only array results of ufunc calls without keywords qualify."""
    v = n.value
    if n.kind != "op" or n.params or type(v) is not np.ndarray or not v.ndim or \
            v.dtype.kind not in "biufc" or n.prim.multiple_results:
        return None
    u = ufunc_of(n.prim)
    if u is not n.prim.impl:
        # Python's operators on an ndarray operand are NumPy's ufuncs (OPERATOR_FORMS: not ``**``,
        # whose ``__pow__`` takes shortcuts for scalar exponents, ``square``, ``sqrt``...)
        if u is None or not any(type(a) is np.ndarray for a in arg_values) or \
                not all(type(a) is np.ndarray or isinstance(a, _NUMBERS) for a in arg_values):
            return None  # a Python operator is NumPy's ufunc only with an ndarray operand
    if u.nout != 1 or u.nin != len(arg_values):
        return None
    return u


def ufunc_of(prim):
    """The ufunc a call of ``prim`` is, or is on an ndarray operand (its operator's), or None."""
    impl = prim.impl
    if isinstance(impl, np.ufunc):
        return impl
    op = python_operator(prim)
    return OPERATOR_FORMS[op].ufunc if op is not None else None


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


def _statements(g, steps, fused, inplace, uses):
    """Read off the schedule: each node's position (where its statements end; a step writing
    nothing reads where the last written one ended), the calls that could write into a given
    buffer ({node: (position of the call, its ufunc, or None for a kernel)}) and the nodes
    whose statement allocates an array.  Positions count written steps, two apart: a call's
    own position is even, and odd where lines (guards, casts) follow it in its step."""
    nodes = g.nodes
    guarded = {i for i, _ in g.guards}
    at, calls, allocates = {}, {}, set()
    count, last = -1, -1
    for step in steps:
        kind = step[0]
        if kind == "node":
            i = step[1]
            n = nodes[i]
            f = fused.get(i)
            if n.kind in ("op", "proj") and (f is None or f[0] != "skip") or \
                    (n.kind == "input" and i in guarded):
                count += 1
                last = 2 * count + (i in guarded or f is not None)
            at[i] = last
            if n.kind == "op" and f is None and i not in inplace:
                u = out_ufunc(n, [nodes[a].value for a in n.args])
                if u is not None:
                    allocates.add(i)
                    calls[i] = (2 * count, u)
        elif kind == "kernel":
            members, shape, fold = step[1], step[2], step[3]
            outs = kernel_outputs(members, fused, uses)
            if outs or fold is not None:
                count += 1
                last = 2 * count + 1
            for i in members + (fold[2] if fold is not None else []):
                at[i] = last
            if fold is not None:
                allocates.add(fold[1])
                continue
            allocates.update(i for i in outs
                             if type(nodes[i].value) is np.ndarray and i not in fused)
            for i in given_outputs(nodes, members, shape, fused, uses):
                calls[i] = (2 * count, None)
        elif kind == "python":
            count += 1
            last = 2 * count + 1
            for i in step[1]:
                at[i] = last
    return at, calls, allocates


def given_outputs(nodes, members, shape, fused, uses):
    """A kernel's results the caller gives it as arrays (a new one, or a kept buffer)."""
    if not shape:
        return []
    return [i for i in kernel_outputs(members, fused, uses)
            if i not in fused and nodes[i].value.size >= pool.POOL_MIN_SIZE]


def buffers(g, live, steps, fused, inplace, uses):
    """``{node: buffer}``: the calls whose results provably stay inside the program (above),
    within ``POOL_MAX_BYTES``, one buffer shared by calls whose lifetimes do not overlap."""
    nodes = g.nodes
    at, calls, allocates = _statements(g, steps, fused, inplace, uses)
    cands = [i for i in sorted(calls)
             if nodes[i].value.size >= pool.POOL_MIN_SIZE and nodes[i].value.flags.c_contiguous]
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
        if i in allocates:
            continue
        if i in inplace:  # ``a += b``: a's memory, b only read
            b = bases.get(inplace[i], empty)
            if b:
                bases[i] = b
            continue
        srcs = list(n.args)
        step = fused.get(i)
        if step is not None:  # an accumulation writes into its chain's buffer
            srcs += [s for s in step[1:] if type(s) is int]
        b = empty.union(*(bases.get(a, empty) for a in srcs))
        if n.kind == "op" and not _trusted(n):
            escaped |= b
        if b:
            bases[i] = b
    for o in g.outputs:
        escaped |= bases.get(o, empty)
    keep = [c for c in cands if c not in escaped]
    return _share(g, live, keep, bases, at, calls, fused)


def _share(g, live, keep, bases, at, calls, fused):
    """A buffer's lifetime runs from its call to the last statement reading a value that may
    share its memory (a node whose position is unknown reads at the end).  A call may take a
    buffer whose last reading is its own statement when it is an elementwise ufunc (NumPy
    computes overlapping operands as if copied first): ``np.add(v1, b, out=v1's buffer)``;
    never a kernel (it may read an operand at other positions than it writes)."""
    nodes, inf = g.nodes, float("inf")
    last = {c: calls[c][0] for c in keep}
    in_place = {c for c in keep if isinstance(calls[c][1], np.ufunc)
                and calls[c][1].signature is None}  # elementwise: not matmul, kernels
    reads = [(j, a) for j, n in enumerate(nodes) if live[j] and n.kind in ("op", "proj")
             for a in list(n.args) + [s for s in fused.get(j, ())[1:] if type(s) is int]]
    reads += [(i, i) for i, _ in g.guards]
    for j, a in reads:
        pos = at.get(j, inf)
        for c in bases.get(a, ()):
            if c in last and pos > last[c]:
                last[c] = pos
    slots, out, total = [], {}, 0  # slots: [buffer, last reading]
    for c in sorted(keep, key=lambda c: calls[c][0]):
        line, v = calls[c][0], nodes[c].value
        for s in slots:
            b = s[0]
            if b.shape == v.shape and b.dtype == v.dtype and \
                    (s[1] < line or (s[1] == line and c in in_place)):
                break
        else:
            if total + v.nbytes > pool.POOL_MAX_BYTES:
                continue
            total += v.nbytes
            s = [np.empty(v.shape, v.dtype), None]
            slots.append(s)
        s[1] = last[c]
        out[c] = s[0]
    return out
