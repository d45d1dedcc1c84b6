"""The compiled program's optimisations as passes over the graph, before any text is written:
each reads the graph (and the primitives' ``lowering`` facts, rules/lowering.py) and returns
what the emitters (codegen.py's NumPy program, fuse.py's Numba kernels) then write.

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
* the ``out=`` buffers: pool.py's :func:`~wengert.graph.pool.plan` (which calls write into
  buffers kept between calls, and which share one).
"""
from __future__ import annotations

import operator

import numpy as np

from ..rules.lowering import OPERATOR_FORMS, lowering_of, python_operator

__all__ = ["symbol", "live", "accumulations", "plan", "gather_folds", "python_ok", "users",
           "dtype_of", "ufunc_ok", "SIMD_SIZE", "NUMBA_MAX_NODES"]

_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


def symbol(op, nargs):
    """The symbol Python's ``op`` is written with on ``nargs`` operands (OPERATOR_FORMS), or None."""
    o = OPERATOR_FORMS.get(op)
    return o.symbol if o is not None and o.arity == nargs else None


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
        if lowering_of(n.prim).role == "gather_at_index":
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


def _stages(g, live, key):
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
            elif key[a] is None or key[a] != key[i]:
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
    # a group of one computing node gains nothing: make it a NumPy call, and regroup
    for _ in range(4):
        stage = _stages(g, live, key)
        groups = {}
        for i in range(len(g.nodes)):
            if key[i] is not None:
                groups.setdefault((stage[i], key[i]), []).append(i)
        # (counted once per group: per member, it was quadratic -- seconds at 8,000 nodes)
        lonely = [m for ms in groups.values()
                  if sum(1 for j in ms if fused.get(j, ("",))[0] != "skip") < 2 for m in ms]
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


def gather_folds(g, groups, fused, uses):
    """{first member: (output node, gather node, [flat views..., gather], positions)} for the
    groups whose one result is read only by a ``gather_flat`` primitive, through
    ``flat_view`` ones (reshapes: the same elements in C order)."""
    nodes = g.nodes
    folds = {}
    for ms in groups:
        mset = set(ms)
        outs = [i for i in ms if any(u not in mset for u in uses[i])]
        if len(outs) != 1 or any(i in fused for i in ms) or not np.ndim(nodes[outs[0]].value):
            continue
        o = u = outs[0]
        chain = []
        while len(uses[u]) == 1:
            j = next(iter(uses[u]))
            n = nodes[j] if j >= 0 else None
            if n is None or n.kind != "op" or len(n.args) != 1 or n.args[0] != u:
                break
            chain.append(j)
            role = lowering_of(n.prim).role
            if role == "flat_view":
                u = j
                continue
            if role == "gather_flat":
                pos = _positions(nodes[u].value, n.params, nodes[o].value, n.value)
                if pos is not None:
                    folds[ms[0]] = (o, j, chain, pos)
            break
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


