"""Rolling: a traced program that repeats (an unrolled Python loop, its gradient's forward
and reverse sweeps) given back as ``wg.scan`` loops over one copy of the repeated stretch.

A ``for`` loop under ``wg.compile`` is traced into one copy of its body per iteration, and
every later pass (simplify, code generation, fusion, Numba) pays for each copy.  This pass
finds where the trace repeats and replaces each long enough stretch by a ``scan_loop`` node
whose step is one copy, so the rest of the pipeline sees the body once.

Finding the period is linear in the program: each primitive node gets a local signature
(primitive, parameters, shape and dtype, its arguments' kinds -- never their positions), the
gaps between equal signatures vote for a period ``p``, and runs where node ``i`` matches node
``i + p`` mark candidate stretches.  Each candidate is then checked exactly: every argument
of copy ``k`` must come from the same copy (at the same offset), from copy ``k - 1`` (the
carry; copy 0 reads its initial value from before the stretch), from one node before the
stretch (a loop constant), or from one value per copy made before it (the ``xs``: constants
of one shape stacked, or per-step values of earlier rolled loops sliced).  Values later code
reads from inside the stretch come out as the scan's stacked ``ys``.

Only exact rolls are made: the step runs the same primitives on the same values in the same
order, so the rolled program's results are bit-identical to the unrolled one's.  What cannot
be proven so (a Python scalar carried or stacked, whose type the stacking would change; a
guard inside the stretch) stays unrolled.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..numpy import stack
from ..rules.lowering import lowering_of
from . import budget
from .graph import Graph
from .ir import Node
from .trace import GraphTrace, pop_active, push_active

__all__ = ["roll", "keep_rolled", "needs_rolled", "find_stretches", "use_scan", "fusion_pays", "MIN_COPIES",
           "LONG", "Stretch"]

_SCAN = []  # wg.scan, given by wengert.checkpoint (which imports this package) as it loads


def use_scan(scan):
    """The loop a rolled stretch becomes: ``wg.scan`` (wengert.checkpoint calls this)."""
    _SCAN[:] = [scan]

# A stretch is rolled from this many copies on: below it the scan's own costs (tracing and
# compiling its step apart, a driver loop, no fusion across copies) eat what it saves.
MIN_COPIES = 8
_CANDIDATES = 24  # periods tried: the most voted


class Stretch:
    """One repeating stretch: ``copies`` copies of a body of ``period`` primitive nodes,
    starting at position ``start`` of the program's primitive nodes; ``plan`` says where
    each body argument comes from (see :func:`_check`)."""

    __slots__ = ("start", "period", "copies", "plan", "first", "last")

    def __init__(self, start, period, copies, plan, first, last):
        self.start, self.period, self.copies, self.plan = start, period, copies, plan
        self.first, self.last = first, last  # graph node indices of its first and last node

    def __repr__(self):
        return (f"<stretch: {self.copies} copies of {self.period} nodes from node "
                f"{self.first}>")


# -- signatures -------------------------------------------------------------------------------
def _vkey(v):
    if type(v) is np.ndarray:
        return (v.shape, v.dtype)
    if isinstance(v, np.generic):
        return (v.dtype,)
    return (type(v),)


def _pkey(params):
    try:
        key = tuple(sorted((k, _hashable(v)) for k, v in params.items()))
        hash(key)
        return key
    except TypeError:
        return ("unhashable", id(params))


def _hashable(v):
    if isinstance(v, np.ndarray):
        return ("nd", v.shape, v.dtype.str, v.tobytes())
    if isinstance(v, list):
        return ("list",) + tuple(_hashable(e) for e in v)
    if isinstance(v, dict):
        return ("dict",) + tuple(sorted((k, _hashable(e)) for k, e in v.items()))
    if type(v) is tuple:
        return tuple(_hashable(e) for e in v)
    if type(v) is slice:  # (not hashable before Python 3.12)
        return ("slice", v.start, v.stop, v.step)
    return (type(v), v)  # True, 1 and 1.0 are equal keys, and compute differently


def _step_index(n):
    """``k`` where node ``n`` reads ``x[k]`` at a static int ``k`` (a loop reading its
    step's row of an array: ``k`` changes from copy to copy), else None."""
    if n.kind != "op" or lowering_of(n.prim).role != "gather_at_index" or len(n.params) != 1:
        return None
    idx = n.params.get("idx")
    if type(idx) is tuple and len(idx) == 1 and type(idx[0]) is int and idx[0] >= 0:
        return idx[0]
    return None


def _signatures(g, seq):
    """Per primitive node two small integers: equal ``coarse`` ones may be copies of each
    other (the arguments' types only: copy 0 reads its carry from an input where later
    copies read a primitive's result); the ``fine`` ones also name the arguments'
    primitives, so that the gaps between equal ones point at the period."""
    nodes, table, fine_table = g.nodes, {}, {}
    vk = [_vkey(n.value) for n in nodes]
    coarse = np.empty(len(seq), dtype=np.int64)
    fine = np.empty(len(seq), dtype=np.int64)
    for q, i in enumerate(seq):
        n = nodes[i]
        args = n.args
        pk = ("row",) if _step_index(n) is not None else _pkey(n.params) if n.params else ()
        sig = (n.kind, n.prim, pk, vk[i],
               tuple([vk[a] for a in args]))
        coarse[q] = c = table.setdefault(sig, len(table))
        fine[q] = fine_table.setdefault((c,) + tuple([nodes[a].prim for a in args]),
                                        len(fine_table))
    return coarse, fine


def _periods(fine, coarse):
    """Candidate periods, those whose repeating runs cover the most nodes first: the gaps
    between successive equal fine signatures vote for the candidates."""
    last, votes = {}, {}
    for q, s in enumerate(fine.tolist()):
        p = last.get(s)
        if p is not None:
            d = q - p
            votes[d] = votes.get(d, 0) + 1
        last[s] = q
    ranked = sorted(votes.items(), key=lambda kv: (-kv[1], kv[0]))
    cands = [p for p, v in ranked[:_CANDIDATES] if v >= MIN_COPIES - 1]
    none = np.zeros(len(coarse), dtype=bool)
    cover = {p: sum(b - a for a, b in _runs(coarse, p, none)) for p in cands}
    return sorted((p for p in cands if cover[p]), key=lambda p: (-cover[p], p))


def _runs(ids, p, taken):
    """Maximal ranges ``[a, b)`` of positions where ``ids[q] == ids[q + p]`` throughout, none
    touching a position already taken: each holds ``(b - a + p) // p`` copies."""
    n = len(ids)
    if p >= n:
        return []
    eq = (ids[p:] == ids[:-p]) & ~taken[p:] & ~taken[:-p]
    out = []
    edges = np.flatnonzero(np.diff(np.concatenate(([0], eq.view(np.int8), [0]))))
    for a, b in zip(edges[::2], edges[1::2]):
        if (b - a + p) // p >= MIN_COPIES:
            out.append((int(a), int(b)))
    return out


# -- the exact check ------------------------------------------------------------------------
def _array(v):
    """A value a scan carries, stacks or slices back as the same type: an array or a NumPy
    scalar (a Python float would come back as a NumPy one, with other promotion rules)."""
    return type(v) is np.ndarray or isinstance(v, np.generic)


def _same_value(v, w):
    """The same type and the same bits (-0.0 is not 0.0; a NaN is itself)."""
    if type(v) is not type(w):
        return False
    if type(v) is np.ndarray:
        return v.shape == w.shape and v.dtype == w.dtype and v.tobytes() == w.tobytes()
    if isinstance(v, (float, int, complex, np.generic)):
        return repr(v) == repr(w)
    return v is w


def _check(g, seq, ids, start, p, copies, pos_of, guarded, late_use):
    """How many leading copies of the candidate form an exact loop, and the plan of their
    arguments: per body node, per argument, one of ``("in", j)`` (same copy, position j),
    ``("carry", j, init)`` (copy k - 1's position j; copy 0 reads node ``init``),
    ``("const", node)`` (one node before the stretch, for every copy) or ``("xs", [node per
    copy]) or ``("rows", array node, first row, step)``.  Returns ``(copies, plan)``;
    ``(-1, None)`` when the copies matched but their values cannot be carried exactly."""
    nodes = g.nodes
    body = seq[start:start + p]
    first = body[0]

    def outside(a):  # before the stretch; constants may sit anywhere (they hold no work)
        return a < first or nodes[a].kind == "const"
    plan = [None] * p
    for j, i in enumerate(body):  # copy 0 fixes what each argument may be
        n = nodes[i]
        if i in guarded or n.kind not in ("op", "proj"):
            return 0, None
        kinds = []
        for a in n.args:
            q = pos_of.get(a)
            if q is not None and start <= q < start + p:
                kinds.append(("in", q - start))
            elif outside(a):
                kinds.append(("outer", a))
            else:
                return 0, None
        plan[j] = kinds
    rows = {j: [_step_index(nodes[i]), None] for j, i in enumerate(body)
            if _step_index(nodes[i]) is not None}  # position -> [row in copy 0, step]
    k = 1
    carries = {}  # body position -> init node
    while k < copies:
        base = start + k * p
        ok = True
        for j in range(p):
            i = seq[base + j]
            n = nodes[i]
            if ids[base + j] != ids[start + j] or i in guarded:  # (ids hold the params)
                ok = False
                break
            if j in rows:  # x[k]: the row read must move by one each copy, or stay
                r0, d = rows[j]
                at = _step_index(n)
                if d is None and abs(at - r0) <= 1:
                    rows[j][1] = d = at - r0
                if d is None or at != r0 + d * k:
                    ok = False
                    break
            for r, a in enumerate(n.args):
                kind = plan[j][r]
                q = pos_of.get(a)
                if kind[0] == "in":
                    if q != base + kind[1]:
                        ok = False
                        break
                elif kind[0] == "outer":  # becomes const, carry or xs at copy 1
                    if k == 1 and q is not None and start <= q < start + p:
                        c = q - start
                        if carries.get(c, kind[1]) != kind[1]:
                            ok = False
                            break
                        carries[c] = kind[1]
                        plan[j][r] = ("carry", c, kind[1])
                    elif a == kind[1]:
                        plan[j][r] = ("const", a)
                    elif outside(a):
                        plan[j][r] = ("xs", [kind[1], a])
                    else:
                        ok = False
                        break
                elif kind[0] == "carry":
                    if q != base - p + kind[1]:
                        ok = False
                        break
                elif kind[0] == "const":
                    if a != kind[1]:
                        ok = False
                        break
                else:  # xs
                    if not outside(a):
                        ok = False
                        break
                    kind[1].append(a)
            if not ok:
                break
        if not ok:
            break
        k += 1
    if k < MIN_COPIES:
        return 0, None
    # cut every xs list back to the copies kept (a failed copy may have added to some);
    # constants equal in every copy (a fresh wnp.zeros(n) per step) are one loop constant
    for kinds in plan:
        for r, kind in enumerate(kinds):
            if kind[0] == "xs":
                del kind[1][k:]
                v0 = nodes[kind[1][0]].value
                if all(nodes[a].kind == "const" and _same_value(nodes[a].value, v0)
                       for a in kind[1]):
                    kinds[r] = ("const", kind[1][0])
            elif kind[0] == "outer":
                kinds[r] = ("const", kind[1])
    for j, (r0, d) in rows.items():  # rows of one loop-constant array: the scan's xs
        if d:
            if plan[j][0][0] != "const" or type(nodes[plan[j][0][1]].value) is not np.ndarray \
                    or r0 + d * (k - 1) < 0:
                return -1, None
            plan[j] = [("rows", plan[j][0][1], r0, d)]
    if not _types_ok(g, seq, start, p, k, plan, carries, late_use):
        return -1, None
    return k, plan


def _types_ok(g, seq, start, p, copies, plan, carries, late_use):
    """Values the scan would carry, stack or slice are arrays of one shape and dtype (a
    Python or NumPy scalar would come back as another type, with other promotion rules)."""
    nodes = g.nodes
    for c, init in carries.items():
        v, w = nodes[seq[start + c]].value, nodes[init].value
        if not (_array(v) and _vkey(v) == _vkey(w) and type(v) is type(w)):
            return False
    for kinds in plan:
        for kind in kinds:
            if kind[0] == "xs":
                vals = [nodes[a].value for a in kind[1]]
                t = _vkey(vals[0])
                if not all(_vkey(v) == t for v in vals):
                    return False
                if not _array(vals[0]):
                    return False
    end = start + copies * p
    last = seq[end - 1]
    for j in range(p):  # values read after the stretch: stacked ys, or the final carry
        for k in range(copies):
            i = seq[start + k * p + j]
            if late_use[i] > last and not (k == copies - 1 and j in carries):
                if not _array(nodes[i].value):
                    return False
    return True


def _late_use(g):
    """Per node the last node reading it (itself if none; past the end for results)."""
    nodes = g.nodes
    late_use = list(range(len(nodes)))
    for i, n in enumerate(nodes):
        for a in n.args:
            late_use[a] = i
    for o in g.outputs:
        late_use[o] = len(nodes)
    for o, _ in g.guards:
        late_use[o] = len(nodes)
    return late_use


def find_stretches(g, guarded=(), late_use=None):
    """The stretches of ``g`` worth rolling, in program order, none overlapping."""
    nodes = g.nodes
    seq = [i for i, n in enumerate(nodes) if n.kind in ("op", "proj")]
    if len(seq) < 2 * MIN_COPIES:
        return []
    pos_of = {i: q for q, i in enumerate(seq)}
    late_use = _late_use(g) if late_use is None else late_use
    guarded = set(guarded) | {i for i, _ in g.guards}
    ids, fine = _signatures(g, seq)
    taken = np.zeros(len(seq), dtype=bool)
    found = []
    for p in _periods(fine, ids):
        for a, b in _runs(ids, p, taken):
            start, stop = a, b + p  # positions [start, stop) hold whole copies from start
            late = 0  # checks that read the whole run and then refused it
            while (stop - start) // p >= MIN_COPIES:
                copies, plan = _check(g, seq, ids, start, p, (stop - start) // p, pos_of, guarded,
                                      late_use)
                if copies < 0:  # copy 0 may be the odd one (a Python 0.0 the carry starts
                    late += 1   # from): try once more a copy later, then give the run up
                    if late > 2:
                        break
                    start += p
                elif copies:
                    taken[start:start + copies * p] = True
                    found.append(Stretch(start, p, copies, plan, seq[start],
                                         seq[start + copies * p - 1]))
                    start += copies * p
                else:
                    start += p
    found.sort(key=lambda s: s.start)
    return found


# -- rebuilding the program ------------------------------------------------------------------
def _rolled_step(carry, x):
    """A rolled loop's step as its plan names it (in messages): the step is the plan's step
    graph; the function that traced it closed over the whole unrolled program."""
    raise TypeError("a rolled loop's step runs as its plan's step graph")


class _Rebuild:
    """The program traced again, node by node, with each stretch run as one ``wg.scan``."""

    def __init__(self, g, stretches, late_use):
        self.g, self.late_use = g, late_use
        self.stretches = {s.first: s for s in stretches}
        self.env = {}
        self.loc = {}      # node -> (stacked array tracer, index): where a copy's value lives
        self.alias = {}    # node -> more (array id, index) pairs holding the same value
        self.arrays = []   # stacked arrays, by id

    def get(self, i):
        v = self.env.get(i, self)
        if v is not self:
            return v
        n = self.g.nodes[i]
        if n.kind == "const":
            return n.value
        y, k = self.loc[i]
        v = self.env[i] = self.arrays[y][k]
        return v

    def _places(self, i):
        out = list(self.alias.get(i, ()))
        if i in self.loc:
            out.append(self.loc[i])
        return out

    def xs_of(self, seq_nodes):
        """One stacked value per copy: a slice of an earlier loop's ys when they are that
        (in order or reversed), else the values stacked."""
        g = self.g
        m = len(seq_nodes)
        if all(g.nodes[a].kind == "const" for a in seq_nodes):
            return np.stack([g.nodes[a].value for a in seq_nodes])
        for y, k0 in self._places(seq_nodes[0]):
            for d in (1, -1):
                if all((y, k0 + d * k) in self._places(a) for k, a in enumerate(seq_nodes)):
                    arr = self.arrays[y]
                    if d == 1:
                        return arr if k0 == 0 and m == len(arr) else arr[k0:k0 + m]
                    stop = k0 - m
                    return arr[k0:stop if stop >= 0 else None:-1]
        return stack([self.get(a) for a in seq_nodes])

    def run(self):
        g = self.g
        tr = GraphTrace()
        for i in g.input_nodes:
            self.env[i] = tr.input(g.nodes[i].value)
        outer = push_active(tr)
        try:
            i = 0
            nodes = g.nodes
            while i < len(nodes):
                s = self.stretches.get(i)
                if s is not None:
                    self.loop(s)
                    i = s.last + 1
                    continue
                n = nodes[i]
                if n.kind == "op":
                    self.env[i] = n.prim(*[self.get(a) for a in n.args], **n.params)
                elif n.kind == "proj":
                    self.env[i] = self.get(n.args[0])[n.params["index"]]
                i += 1
            outs = [self.get(o) for o in g.outputs]
            guards = [(self.get(i), b) for i, b in g.guards]
        finally:
            pop_active(outer)
            tr.finished = True

        def foreign(o):
            raise AssertionError("a rolled program met a tracer of another trace")
        out_nodes = tr.output_nodes(outs, foreign)
        guard_nodes = tr.output_nodes([v for v, _ in guards], foreign)
        r = Graph(tr.nodes, g.in_def, g.leaf_slots, [self.env[i].node for i in g.input_nodes],
                  g.arg_names, g.out_def, out_nodes, [(n, b) for n, (_, b) in
                                                      zip(guard_nodes, guards)],
                  name=g.name, example_args=g.example_args)
        r.stats = g.stats
        return r

    def loop(self, s):
        g, nodes, p, m = self.g, self.g.nodes, s.period, s.copies
        seq = [i for i in range(s.first, s.last + 1) if nodes[i].kind in ("op", "proj")]
        body = seq[:p]
        carry_pos = sorted({k[1] for kinds in s.plan for k in kinds if k[0] == "carry"})
        init = {}
        for kinds in s.plan:
            for k in kinds:
                if k[0] == "carry":
                    init[k[1]] = k[2]
        xs_at = {}      # (body position, argument position) -> xs leaf
        xs, leaf_of = [], {}  # one leaf per sequence of values, however often it is read
        for j, kinds in enumerate(s.plan):
            for r, k in enumerate(kinds):
                if k[0] == "xs":
                    key = tuple(k[1])
                    if key not in leaf_of:
                        leaf_of[key] = len(xs)
                        xs.append(self.xs_of(k[1]))
                    xs_at[(j, r)] = leaf_of[key]
                elif k[0] == "rows":  # rows r0, r0 + d, ... of an array: a slice of it
                    if k not in leaf_of:
                        leaf_of[k] = len(xs)
                        arr, r0, d = self.get(k[1]), k[2], k[3]
                        stop = r0 + d * m
                        xs.append(arr[r0:stop] if d == 1 else
                                  arr[r0:stop if stop >= 0 else None:-1])
                    xs_at[(j, r)] = leaf_of[k]
        last = s.last
        late = [False] * p     # read after the stretch from some copy before the last
        for k in range(m):
            for j in range(p):
                i = seq[k * p + j]
                if self.late_use[i] > last and not (k == m - 1 and j in init):
                    late[j] = True
        ys_pos = [j for j in range(p) if late[j] and j not in init]
        ys_carry = [c for c in carry_pos if late[c]]  # stacked as each copy's carry in
        plan = s.plan
        get = self.get

        def step(carry, x):
            carry = dict(zip(carry_pos, carry))
            local = [None] * p
            for j, i in enumerate(body):
                n = nodes[i]
                args = []
                for r, k in enumerate(plan[j]):
                    if k[0] == "in":
                        args.append(local[k[1]])
                    elif k[0] == "carry":
                        args.append(carry[k[1]])
                    elif k[0] == "const":
                        args.append(get(k[1]))
                    else:  # xs, rows
                        args.append(x[xs_at[(j, r)]])
                if plan[j][0][0] == "rows":
                    local[j] = args[0]
                elif n.kind == "op":
                    local[j] = n.prim(*args, **n.params)
                else:
                    local[j] = args[0][n.params["index"]]
            return ([local[c] for c in carry_pos],
                    [local[j] for j in ys_pos] + [carry[c] for c in ys_carry])

        init_vals = [get(init[c]) for c in carry_pos]
        final, ys = _SCAN[0](step, init_vals, xs if xs else None, length=None if xs else m)
        plan = _plan_of(final[0] if final else ys[0])
        if plan is not None:
            _ROLLED.add(plan)
            plan.user_step = _rolled_step  # not ``step``: its closure holds the whole trace
        ys = list(ys) if ys is not None else []
        for c, v in zip(carry_pos, final):
            self.env[seq[(m - 1) * p + c]] = v
        for q, j in enumerate(ys_pos):
            y = len(self.arrays)
            self.arrays.append(ys[q])
            for k in range(m):
                self.loc[seq[k * p + j]] = (y, k)
        for q, c in enumerate(ys_carry):
            y = len(self.arrays)
            self.arrays.append(ys[len(ys_pos) + q])
            self.alias.setdefault(init[c], []).append((y, 0))
            for k in range(m - 1):
                self.loc[seq[k * p + c]] = (y, k + 1)


# -- fusing a rolled loop ---------------------------------------------------------------------
# Numba's compile of a compiled scan's loop (checkpoint/fused.py: the schedule's interpreter
# and the step) is far slower per node than a kernel's: measured on the shared development
# machine, about 5 s for a 4-node step, 13 s for 9 nodes, 54 s for an LSTM cell's 45-node
# pullback step.  A rolled loop runs inside Numba only where that pays as budget.fit
# decides for kernels: at most what RUNS unfused runs of the loop cost (FLOOR to CAP).
LOOP_SECONDS, LOOP_NODE_SECONDS = 1.0, 1.2
_ROLLED = weakref.WeakSet()  # the plans of rolled loops


def _plan_of(tracer):
    node = tracer._trace.nodes[tracer.node]
    while node.kind == "proj":
        node = tracer._trace.nodes[node.args[0]]
    return node.params.get("plan")


def fusion_pays(plan):
    """``None`` where the loop of ``plan`` may run inside Numba (every scan but a rolled
    loop whose Numba compile would cost more than it saves), else why not."""
    if plan not in _ROLLED:
        return None
    ops = [n for n in plan.step_graph.nodes if n.kind == "op"]
    unfused = plan.n * sum(budget._node_cost(n) for n in ops)
    allowed = max(budget.FLOOR, min(budget.RUNS * unfused, budget.CAP))
    cost = LOOP_SECONDS + LOOP_NODE_SECONDS * len(ops)
    if cost <= allowed:
        return None
    return (f"fusion backed off: a rolled loop of {plan.n} steps runs its {len(ops)}-node "
            f"step from Python (NumPy calls): Numba would take about {cost:.0f} s to compile "
            f"its loop, more than {budget.RUNS} runs of it unfused (about "
            f"{budget.RUNS * unfused:.2g} s; budget {allowed:.2g} s) (wengert.graph.roll)")


# Under ``roll=None`` (wg.compile's default) a program is rolled where that pays at run time
# as well: when it is this long (its unrolled compile, seconds at 10^4 primitives, is what
# costs), or when every loop it rolls into runs inside Numba.  A rolled loop whose step runs
# from Python pays a call per step and NumPy's 0-d arithmetic where the straight line had
# Python floats or one fused kernel: measured 36x slower on bench_compile's 100-step chain
# (fused, 52.7 us -> 1.9 ms) and 26x on its Rosenbrock loop (349 us -> 9.1 ms).
LONG = 20_000


def keep_rolled(g, rolled, fuse):
    """``None`` where ``rolled`` (``g`` rolled) should replace ``g`` under ``roll=None``,
    else why the straight line is kept.  ``rolled`` is only read when ``fuse`` is true and
    ``g`` is short (see :func:`needs_rolled`)."""
    if len(g.nodes) >= LONG:
        return None
    if fuse:
        said = [fusion_pays(n.params.get("plan")) for n in rolled.nodes
                if n.params.get("plan") is not None]
        if all(why is None for why in said):
            return None
    return (f"kept unrolled: a program of {len(g.nodes)} nodes (under {LONG}) whose rolled "
            "loops would run their steps from Python, slower than the straight line "
            "(roll=True rolls it anyway)")


def needs_rolled(g, fuse):
    """Whether :func:`keep_rolled` must see the rolled program to decide: an unfused
    program under ``LONG`` nodes keeps its straight line whatever the loops, so only
    :func:`find_stretches` (to say why) is worth running for it."""
    return fuse or len(g.nodes) >= LONG


def roll(g):
    """``g`` with its repeating stretches as ``wg.scan`` loops, and what was rolled (a list
    of :class:`Stretch`); ``g`` itself and ``[]`` where nothing repeats long enough."""
    if not _SCAN:
        return g, []
    late_use = _late_use(g)
    stretches = find_stretches(g, late_use=late_use)
    if not stretches:
        return g, []
    return _Rebuild(g, stretches, late_use).run(), stretches
