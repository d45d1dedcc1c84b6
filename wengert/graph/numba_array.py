"""A graph as one Numba function on whole arrays (a compiled scan's step and its VJP).

:mod:`.fuse` fuses the elementwise runs of a program and leaves the rest to NumPy calls;
a compiled scan wants its whole step inside Numba, so that the loop over the steps runs
there too (wengert/checkpoint/fused.py).  The emitter writes every node as one whole-array
statement in its Numba-array dialect (lower_numba.NumbaArray: an elementwise primitive its
ufunc or Python operator, any other its record's ``lowering.array`` form); here the
function's parameters and results are assembled around those statements, and the step and
its VJP cut in two where the cotangents come in (``split_sources``).  A node with no form, or
a value Numba would type differently (integers, 0-d arrays, complex), raises
``NotExpressible`` saying which: the caller keeps its NumPy program.
"""
from __future__ import annotations

import numpy as np

from .fuse import numba_or_none
from .lower import Writer
from .lower_numba import NotExpressible, NumbaArray, float_kind

__all__ = ["NotExpressible", "njit_source", "njit_body", "split_sources", "float_kind"]


def njit_source(g, name, buffers=None, accumulate=()):
    """The source of ``def name(a0.., k0.., b0.., c0..)``: the graph's inputs, the array
    constants, -- when ``buffers`` is a list -- scratch arrays whose ``(shape, dtype)`` it
    appends there, and accumulators for the outputs at the positions ``accumulate`` (see
    ``njit_body``).  Returns the source, the constants and the positions of the outputs
    added into their accumulators (the function returns the others, in order)."""
    n_in = len(g.input_nodes)
    acc = {p: f"c{j}" for j, p in enumerate(accumulate)}
    lines, outs, consts = njit_body(g, [f"a{p}" for p in range(n_in)], "", buffers, acc)
    sig = ", ".join([f"a{p}" for p in range(n_in)] + [f"k{j}" for j in range(len(consts))]
                    + [f"b{j}" for j in range(len(buffers or ()))] + list(acc.values()))
    body = lines + [f"return ({''.join(o + ', ' for o in outs if o is not None)})"]
    done = [p for p, o in enumerate(outs) if o is None]
    return f"def {name}({sig}):\n" + "".join(f"    {ln}\n" for ln in body), consts, done


def njit_body(g, inputs, prefix, buffers=None, accumulate=None, outputs=None, given=None):
    """Statements computing ``g`` from the sources ``inputs`` (one per input, each read
    once), with temporaries and array constants named ``{prefix}t..`` and ``{prefix}k..``;
    returns ``(lines, output sources, constants)``.  Each output is a fresh array (so a
    caller may copy it into a buffer that one of the inputs is a view of) or a scalar.

    ``buffers`` a list: each elementwise tree with an array result becomes one loop nest
    writing into a scratch array ``{prefix}b..`` the caller allocates once (their shapes and
    dtypes are appended to the list), instead of an array expression allocating its result
    on every call -- so then an output may be such a buffer, overwritten by the next call:
    copy it out before.  ``accumulate``: output position -> an array of its shape; such an
    output, when it is such a tree read by nothing else, is added into that array element
    by element instead (its entry in the output sources is then None).  ``outputs``: the
    nodes to compute (default the graph's); ``given``: node -> the source of its value,
    passed in rather than computed."""
    nb = numba_or_none()
    if nb is None:
        raise NotExpressible("Numba is not installed")
    nodes = g.nodes
    outputs = list(g.outputs) if outputs is None else list(outputs)
    given = given or {}
    live = [False] * len(nodes)
    stack = list(outputs)
    while stack:
        i = stack.pop()
        if not live[i]:
            live[i] = True
            if i not in given:
                stack.extend(nodes[i].args)
    d = NumbaArray(g, live, given, outputs, nb[1], prefix, buffers, accumulate)
    w = Writer(g, None, d)
    w.expr.update(given)
    for pos, i in enumerate(g.input_nodes):
        if float_kind(nodes[i].value) is None:
            raise NotExpressible(f"input {pos} is {type(nodes[i].value).__name__} "
                                 f"{getattr(nodes[i].value, 'dtype', '')}, not a float (array)")
        w.expr[i] = f"{prefix}a{pos}"
        if live[i] and inputs[pos] is not None:
            w.lines.append(f"{w.expr[i]} = {inputs[pos]}")
    w.write([i for i, n in enumerate(nodes) if live[i] and n.kind != "input" and i not in given])
    expr = w.expr
    outs = []
    for o in outputs:
        n = nodes[o]
        if n.kind == "const" and o not in expr:
            v = n.value
            raise NotExpressible(f"a constant result {v!r:.40}")
        fresh = d.elementwise[o] or o in given
        if expr[o] is None:
            outs.append(None)
        elif float_kind(n.value) == ("scalar",) or fresh:
            outs.append(expr[o])
        else:  # an input, a constant or a view of one
            outs.append(f"np.copy({expr[o]})")
    return w.lines, outs, d.consts


def split_sources(g, n_primal, n_out, buffers_f, buffers_b, accumulate=()):
    """A step-and-VJP graph (inputs: the step's, then the cotangents from ``n_primal`` on;
    outputs: the step's ``n_out`` results, then the cotangents) cut in two where the
    cotangents come in: ``fwd(inputs.., k.., b..)`` returns the step's results and the
    *residuals* (its values the cotangent part reads), ``bwd(inputs.., residuals.., k..,
    b.., c..)`` the cotangents (see ``njit_source``).  So a loop that keeps every step's
    residuals ("all") reverses a step without recomputing it.  Returns the two sources,
    their constants, the residuals' ``(shape, dtype)`` and the accumulated positions."""
    nodes = g.nodes
    n_in = len(g.input_nodes)
    late = [False] * len(nodes)  # depends on a cotangent
    for pos, i in enumerate(g.input_nodes):
        late[i] = pos >= n_primal
    for i, n in enumerate(nodes):
        if n.kind not in ("input", "const") and any(late[a] for a in n.args):
            late[i] = True
    primal_outs, ct_outs = list(g.outputs[:n_out]), list(g.outputs[n_out:])
    if any(late[o] for o in primal_outs):
        raise NotExpressible("a step result depends on a cotangent")
    # residuals: early computed values the late part (or a cotangent result) reads
    res = set()
    stack, seen = list(ct_outs), set()
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        n = nodes[i]
        if not late[i]:
            if n.kind == "op":
                res.add(i)
            continue
        stack.extend(n.args)
    res = sorted(res)
    for i in res:
        if float_kind(nodes[i].value) is None:
            raise NotExpressible(f"a residual {nodes[i].prim.name} is not a float (array)")
    ins = [f"a{p}" for p in range(n_in)]
    f_lines, f_outs, f_consts = njit_body(g, ins[:n_primal] + [None] * (n_in - n_primal), "",
                                          buffers_f, None, primal_outs + res)
    given = {i: f"r{j}" for j, i in enumerate(res)}
    acc = {p: f"c{j}" for j, p in enumerate(accumulate)}  # positions among the cotangents
    b_lines, b_outs, b_consts = njit_body(g, ins, "", buffers_b, acc, ct_outs, given)
    f_sig = ", ".join(ins[:n_primal] + [f"k{j}" for j in range(len(f_consts))] +
                      [f"b{j}" for j in range(len(buffers_f))])
    b_sig = ", ".join(ins + list(given.values()) + [f"k{j}" for j in range(len(b_consts))] +
                      [f"b{j}" for j in range(len(buffers_b))] + list(acc.values()))

    def text(name, sig, lines, outs):
        body = lines + [f"return ({''.join(o + ', ' for o in outs if o is not None)})"]
        return f"def {name}({sig}):\n" + "".join(f"    {ln}\n" for ln in body)
    done = [p for p, o in enumerate(b_outs) if o is None]
    return (text("fwd", f_sig, f_lines, f_outs), text("bwd", b_sig, b_lines, b_outs),
            f_consts, b_consts, [(np.shape(nodes[i].value), np.dtype(
                nodes[i].value.dtype if type(nodes[i].value) is np.ndarray else np.float64))
                for i in res], done)
