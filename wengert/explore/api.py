"""The explorer's computations, as plain data (no HTTP here).

``expression_payload`` evaluates an expression the way seed 002's page shows it:
the forward pass (node values in evaluation order), then the backward pass
("pushing derivatives up": each edge's local derivative times the adjoint of the
node using it is added to the adjoint of its argument), the gradient from
``wg.grad``, the tape (Wengert list) that ``wg.Tape`` records, and the forward
and reverse derivative programs from :mod:`wengert.source`.
"""
from __future__ import annotations

import math
import random
import re
import time

import numpy as np

from ..checkpoint import checkpoint_schedule
from ..expr import SYMBOLS, ExprError, parse
from ..expr_derivatives import gradient, programs
from ..reverse import Tape, Var
from ..transforms import derivative

__all__ = ["ApiError", "expression_payload", "schedule_payload", "MAX_NODES"]

MAX_NODES = 400          # more would not be readable as a drawing
MAX_SECONDS = 5.0        # per request
MAX_SCHEDULE_LENGTH = 256


class ApiError(Exception):
    """A client error: HTTP ``status`` and a one-line message."""

    def __init__(self, message, status=400):
        super().__init__(message)
        self.status = status


def jsonable(v):
    """A float for JSON: non-finite values become the strings "inf", "-inf", "nan"."""
    if v is None:
        return None
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")


def _plain(v):
    while hasattr(v, "_trace"):
        v = v.value
    return v


class _Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def check(self):
        if time.monotonic() > self.end:
            raise ApiError("the expression took too long to evaluate", 422)


def expression_payload(text, inputs=None, *, rng=None, seconds=MAX_SECONDS):
    """Everything the explorer page shows for ``text`` at ``inputs``."""
    deadline = _Deadline(seconds)
    if not isinstance(text, str):
        raise ApiError("'expr' must be a string")
    try:
        expr = parse(text)
    except ExprError as e:
        raise ApiError(str(e)) from None
    if len(expr.nodes) > MAX_NODES:
        raise ApiError(f"expression too large for the explorer ({len(expr.nodes)} nodes; "
                       f"the limit is {MAX_NODES})", 413)
    env = _inputs(expr, inputs, rng)

    names = expr.names()

    # the tape, recorded by evaluating on Vars
    tape = Tape()
    tvars = {name: tape.var(v) for name, v in env.items()}
    try:
        tvals = expr.evaluate_all(tvars)
    except ExprError as e:
        raise ApiError(str(e), 422) from None
    deadline.check()
    values = [_plain(v) for v in tvals]
    tape_index = {}
    for n, v in zip(expr.nodes, tvals):
        if isinstance(v, Var) and v.tape is tape:
            tape_index.setdefault(v.index, n.id)
    node_of_tape = tape_index
    tape_of_node = {nid: i for i, nid in tape_index.items()}

    # forward steps
    forward = []
    for n in expr.nodes:
        if n.kind == "input":
            desc = f"{n.name} = {_num(values[n.id])}"
        elif n.kind == "const":
            desc = f"{names[n.id]} = {_num(values[n.id])}"
        else:
            desc = (f"{names[n.id]} = {_op_text(n, names)} = {_num(values[n.id])}")
        forward.append({"node": n.id, "value": jsonable(values[n.id]), "text": desc,
                        "tape": tape_of_node.get(n.id)})

    # local derivatives of each edge, by forward mode on plain floats
    local = {}
    for n in expr.nodes:
        deadline.check()
        if n.kind != "op":
            continue
        fn = expr._function(n.op)
        args = [values[a] for a in n.args]
        for i, a in enumerate(n.args):
            if expr.nodes[a].kind == "const":
                continue
            def partial(t, i=i):
                return fn(*args[:i], t, *args[i + 1:])
            local[(n.id, i)] = _partial(partial, args[i])

    # backward steps: reverse evaluation order, pushing derivatives up
    adj = {n.id: 0.0 for n in expr.nodes if n.kind != "const"}
    adj[expr.root] = 1.0
    backward = [{"kind": "seed", "node": expr.root, "adjoint": 1.0,
                 "text": f"g{names[expr.root]} = 1"}]
    edges = expr.graph()["edges"]
    edge_id = {(e["target"], e["index"]): e["id"] for e in edges}
    if expr.nodes[expr.root].kind == "const":
        backward = []
    for n in reversed(expr.nodes):
        if n.kind != "op":
            continue
        for i, a in enumerate(n.args):
            if expr.nodes[a].kind == "const":
                continue
            d = local[(n.id, i)]
            contribution = adj[n.id] * d
            adj[a] = adj[a] + contribution
            backward.append({
                "kind": "push", "edge": edge_id[(n.id, i)], "source": a, "target": n.id,
                "local": jsonable(d), "contribution": jsonable(contribution),
                "adjoint": jsonable(adj[a]), "tape": tape_of_node.get(n.id),
                "text": (f"g{names[a]} += g{names[n.id]} * d{names[n.id]}/d{names[a]} = "
                         f"{_num(adj[n.id])} * {_num(d)}  ->  g{names[a]} = {_num(adj[a])}")})

    # the gradient from wg.grad (one reverse sweep of a tape)
    deadline.check()
    value, grads = gradient(expr, env)

    tape_rows = []
    for i, (op, parents) in enumerate(zip(tape._names, tape._parents)):
        nid = node_of_tape.get(i)
        tape_rows.append({
            "index": i, "op": op, "node": nid,
            "name": names[nid] if nid is not None else None,
            "parents": [p for p in parents],
            "args": [(names[node_of_tape[p]] if p in node_of_tape else f"#{p}") if p >= 0
                     else "const" for p in parents],
            "value": jsonable(values[nid]) if nid is not None else None})

    progs, prog_error = None, None
    try:
        progs = programs(expr)
    except Exception as e:  # the source transformer may not cover everything
        prog_error = f"{type(e).__name__}: {e}"
    deadline.check()
    _program_lines(progs, expr, names, forward, backward)

    graph = expr.graph()
    layers = _layers(expr)
    for nd in graph["nodes"]:
        nd["value"] = jsonable(values[nd["id"]])
        nd["name"] = names[nd["id"]]
        nd["layer"] = layers[nd["id"]]
        nd["adjoint"] = jsonable(adj[nd["id"]]) if nd["id"] in adj else None
        nd["tape"] = tape_of_node.get(nd["id"])
    for e in graph["edges"]:
        e["local"] = jsonable(local.get((e["target"], e["index"])))

    return {
        "expr": text, "text": expr.to_text(), "source": expr.python_source("f"),
        "variables": list(expr.variables),
        "inputs": {k: jsonable(v) for k, v in env.items()},
        "graph": graph, "forward": forward, "backward": backward,
        "value": jsonable(value),
        "gradient": {k: jsonable(v) for k, v in grads.items()},
        "adjoints": {k: jsonable(adj[n.id]) for n in expr.nodes if n.kind == "input"
                     for k in [n.name]},
        "tape": tape_rows,
        "programs": {"forward": progs[0], "reverse": progs[1]} if progs else None,
        "programs_error": prog_error,
    }


def _program_lines(progs, expr, names, forward, backward):
    """Give every step the program lines it executes (indices into the lines of the
    forward and the reverse program): ``fwd_lines`` and ``rev_lines``.

    A forward step of node ``a`` runs ``a = ...`` and ``da = ...`` (or ``a, da =
    pushforward(...)``) in the forward program and ``a = ...`` in the reverse program's
    forward sweep; the seed runs the zero initialisation and ``gz = 1.0``; a push along
    an edge from ``s`` to its user ``t`` runs the next ``gs += ...`` (or ``-=``) line
    that reads ``gt``, directly or through a temporary (``ct = a_pullback(ga)``, whose
    line goes with the first push that reads it).  A push whose local derivative is zero
    whatever the inputs (``x // y``) has no line: the transformer leaves it out.
    """
    fwd = progs[0].splitlines() if progs else []
    rev = progs[1].splitlines() if progs else []
    for st in forward + backward:
        st["fwd_lines"], st["rev_lines"] = [], []
    if not progs:
        return
    root = names[expr.root]
    seed = next((i for i, ln in enumerate(rev) if ln == f"g{root} = 1.0"), len(rev))
    for st in forward:
        n = expr.nodes[st["node"]]
        if n.kind != "op":
            continue
        nm = names[n.id]
        st["fwd_lines"] = [i for i, ln in enumerate(fwd)
                           if ln.startswith((f"{nm} = ", f"d{nm} = ", f"{nm}, d{nm} = "))]
        st["rev_lines"] = [i for i, ln in enumerate(rev[:seed])
                           if ln.startswith((f"{nm} = ", f"{nm}, "))]
    init = [i for i, ln in enumerate(rev[:seed]) if _ZERO_INIT.fullmatch(ln)]
    # the reverse sweep: pushes "gs += ..." and temporaries "ct = ...", with what they read
    temps, pushes = {}, []
    for i in range(seed + 1, len(rev)):
        m = _ASSIGN.fullmatch(rev[i])
        if m is None:
            continue
        words = set(_WORD.findall(m["rhs"]))
        reads = set(words)
        used_temps = set()
        for w in words & set(temps):
            reads |= temps[w][1]
            used_temps |= {w} | temps[w][2]
        if m["op"] == "=":
            temps[m["lhs"]] = (i, reads, used_temps)
        else:
            pushes.append((i, m["lhs"], reads, used_temps))
    used, claimed = set(), set()
    for st in backward:
        if st["kind"] == "seed":
            st["rev_lines"] = init[-1:] + ([seed] if seed < len(rev) else [])
            continue
        s, t = "g" + names[st["source"]], "g" + names[st["target"]]
        hit = next((p for p in pushes if p[0] not in used and p[1] == s and t in p[2]), None)
        if hit is not None:
            used.add(hit[0])
            new = [temps[w][0] for w in hit[3] if w not in claimed]
            claimed |= hit[3]
            st["rev_lines"] = sorted(new + [hit[0]])


_ZERO_INIT = re.compile(r"g\w+( = g\w+)* = 0\.0")
_ASSIGN = re.compile(r"(?P<lhs>\w+) (?P<op>[+-]?=) (?P<rhs>.*)")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _partial(fn, x):
    with np.errstate(all="ignore"):
        try:
            return float(derivative(fn)(x))
        except (ArithmeticError, ValueError):
            return float("nan")


def _num(v):
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    return f"{v:.6g}"


def _op_text(n, names):
    a = [names[i] for i in n.args]
    if n.op in ("neg", "pos"):
        return f"{SYMBOLS[n.op]}{a[0]}"
    if n.op in SYMBOLS:
        return f"{a[0]} {SYMBOLS[n.op]} {a[1]}"
    return f"{n.op}({', '.join(a)})"


def _layers(expr):
    """Layers for drawing: inputs on layer 0, the result on the last layer, and every
    other node as late as possible (just above its first user), so edges stay short."""
    longest = {}
    for n in expr.nodes:
        longest[n.id] = 0 if not n.args else 1 + max(longest[a] for a in n.args)
    users = {n.id: [] for n in expr.nodes}
    for n in expr.nodes:
        for a in n.args:
            users[a].append(n.id)
    layer = {}
    for n in reversed(expr.nodes):
        if n.kind == "input":
            layer[n.id] = 0
        elif not users[n.id]:
            layer[n.id] = longest[n.id]
        else:
            layer[n.id] = min(layer[u] for u in users[n.id]) - 1
    return layer


def _inputs(expr, inputs, rng):
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise ApiError("'inputs' must be an object mapping variable names to numbers")
    if len(inputs) > 100:
        raise ApiError("too many inputs (the limit is 100)")
    rng = rng or random.Random()
    env = {}
    for name in expr.variables:
        if name in inputs and inputs[name] is not None and inputs[name] != "":
            v = inputs[name]
            if isinstance(v, str):
                try:
                    v = float(v)
                except ValueError:
                    raise ApiError(f"input {name}: {v[:40]!r} is not a number") from None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ApiError(f"input {name} must be a number")
            try:
                v = float(v)
            except OverflowError:
                raise ApiError(f"input {name} is too large") from None
            if not math.isfinite(v):
                raise ApiError(f"input {name} must be a finite number")
            env[name] = v
        else:
            env[name] = round(rng.random(), 4)  # uniformly in [0, 1], as in seed 002
    return env


def schedule_payload(query):
    """``GET /api/schedule?n=16&strategy=ctz&snapshots=3`` as data."""
    def one(key, default=None):
        vals = query.get(key)
        if not vals:
            return default
        if len(vals) > 1:
            raise ApiError(f"parameter {key!r} given more than once")
        return vals[0]

    def integer(key, default, lo, hi):
        raw = one(key)
        if raw is None or raw == "":
            return default
        try:
            v = int(raw, 10)
        except ValueError:
            raise ApiError(f"parameter {key!r} must be an integer, got {raw[:40]!r}") from None
        if not lo <= v <= hi:
            raise ApiError(f"parameter {key!r} must be between {lo} and {hi}")
        return v

    unknown = set(query) - {"n", "strategy", "snapshots"}
    if unknown:
        raise ApiError(f"unknown parameter {sorted(unknown)[0][:40]!r}")
    n = integer("n", 16, 1, MAX_SCHEDULE_LENGTH)
    strategy = one("strategy", "ctz")
    if strategy not in ("ctz", "binomial", "online", "all", "invert"):
        raise ApiError("parameter 'strategy' must be one of ctz, binomial, online, all, invert")
    snapshots = integer("snapshots", None, 1, MAX_SCHEDULE_LENGTH)
    try:
        sched = checkpoint_schedule(n, strategy,
                                    snapshots=snapshots if strategy in ("binomial", "online")
                                    else None)
    except (ValueError, TypeError) as e:
        raise ApiError(f"{e}") from None
    actions = [a.to_dict() for a in sched]
    out = {"n": n, "strategy": strategy,
           "snapshots": getattr(sched, "snapshots", snapshots), "actions": actions,
           "rows": schedule_rows(n, actions)}
    if hasattr(sched, "stats"):
        st = sched.stats()
        out["stats"] = {k: st[k] for k in ("advanced", "reversed", "inverted", "max_stored",
                                           "max_snapshots") if k in st}
    return out


def schedule_rows(n, actions):
    """The seed's diagram as data: one row per reversed step (after a first row for the
    forward sweep), one character per state: ``X`` stored, ``+`` recomputed since the
    previous row, ``<`` rebuilt by the inverse step, ``^`` the step reversed, ``.`` none."""
    stored, recomputed, inverted = set(), set(), set()
    rows = []

    def row(label, at):
        cells = []
        for j in range(n):
            cells.append("^" if j == at else "X" if j in stored else "<" if j in inverted
                         else "+" if j in recomputed else ".")
        rows.append({"label": label, "at": at, "cells": "".join(cells)})

    for a in actions:
        k = a["kind"]
        if k == "advance":
            if rows:  # the forward sweep itself is not a recomputation
                recomputed.update(range(a["start"] + 1, a["stop"] + 1))
        elif k == "store":
            stored.add(a["index"])
        elif k == "free":
            stored.discard(a["index"])
        elif k == "invert":
            inverted.add(a["index"])
        elif k == "reverse":
            if not rows:
                row("forward sweep", None)
            row(f"reverse {a['index']:x}", a["index"])
            recomputed, inverted = set(), set()
    return rows
