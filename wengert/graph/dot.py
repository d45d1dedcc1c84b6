"""Graphviz DOT text for graphs and tapes: node labels with their values.

``wg.to_dot``, which also takes a function and its example arguments, is in
:mod:`.graph` (it traces).
"""
from __future__ import annotations

import numpy as np

from ..core import Tracer
from .codegen import leaf_names

__all__ = ["graph_to_dot", "tape_to_dot"]


def _short(v, width=40):
    while isinstance(v, Tracer):
        v = v.value
    if isinstance(v, np.ndarray):
        if v.size <= 4:
            s = np.array2string(v, precision=4, separator=", ").replace("\n", "")
        else:
            s = f"{v.dtype}{list(v.shape)}"
    elif isinstance(v, (float, np.floating)):
        s = f"{float(v):.6g}"
    elif isinstance(v, tuple):
        s = "(" + ", ".join(_short(e, 12) for e in v) + ")"
    else:
        s = repr(v)
    return s if len(s) <= width else s[:width - 3] + "..."


def _esc(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def graph_to_dot(g, values=True):
    """DOT text of a Graph: inputs as ellipses, constants as plain text, primitives
    as boxes labelled with their names (and traced values), outputs double-circled."""
    names = leaf_names(g)
    in_name = {i: names[k] for k, i in enumerate(g.input_nodes)}
    outs = set(g.outputs)
    guards = dict(g.guards)
    lines = [f'digraph "{_esc(g.name)}" {{', "  rankdir=LR;",
             '  node [fontname="Helvetica", fontsize=11];']
    for i, n in enumerate(g.nodes):
        val = f"\\n= {_esc(_short(n.value))}" if values else ""
        if n.kind == "input":
            label, shape = in_name.get(i, f"input {i}"), "ellipse"
        elif n.kind == "const":
            label, shape = _short(n.value), "plaintext"
            val = ""
        elif n.kind == "proj":
            label, shape = f"[{n.params['index']}]", "box"
        else:
            params = ", ".join(f"{k}={_short(v, 16)}" for k, v in n.params.items())
            label, shape = n.prim.name + (f"({params})" if params else ""), "box"
        extra = ""
        if i in outs:
            extra = ", peripheries=2"
        if i in guards:
            extra += f', color=red, xlabel="guard: {str(guards[i]).lower()}"'
        lines.append(f'  n{i} [label="{_esc(label)}{val}", shape={shape}{extra}];')
    for i, n in enumerate(g.nodes):
        for j, a in enumerate(n.args):
            lab = f' [label="{j}"]' if len(n.args) > 1 and n.kind == "op" else ""
            lines.append(f"  n{a} -> n{i}{lab};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def tape_to_dot(var):
    """DOT text of the tape a Var was recorded on (names and parent links)."""
    tape = var._trace
    lines = ['digraph tape {', "  rankdir=LR;", '  node [fontname="Helvetica", fontsize=11];']
    n = len(tape._names)
    for i in range(n):
        name = tape._names[i]
        val = f"\\n= {_esc(_short(var.value))}" if i == var.index else ""
        shape = "ellipse" if name == "input" else "box"
        extra = ", peripheries=2" if i == var.index else ""
        lines.append(f'  n{i} [label="{i}: {_esc(name)}{val}", shape={shape}{extra}];')
    for i in range(n):
        for p in tape._parents[i]:
            if p >= 0:
                lines.append(f"  n{p} -> n{i};")
    lines.append("}")
    return "\n".join(lines) + "\n"
