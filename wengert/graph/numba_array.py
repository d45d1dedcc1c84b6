"""A graph as one Numba function on whole arrays (a compiled scan's step and its VJP).

:mod:`.fuse` fuses the elementwise runs of a program and leaves the rest to NumPy calls;
a compiled scan wants its whole step inside Numba, so that the loop over the steps runs
there too (wengert/checkpoint/fused.py).  Here every node becomes one whole-array
statement in the NumPy subset Numba compiles: an elementwise primitive its ufunc (or
Python operator), as :mod:`.fuse` derives it from the rule record; any other primitive
its record's ``lowering.array`` form (matmul as ``np.dot``, which is BLAS; sums, reshapes,
transposes, broadcasts: rules/shape.py, rules/products.py).  A node with neither, or a
value Numba would type differently (integers, 0-d arrays, complex), raises
``NotExpressible`` saying which: the caller keeps its NumPy program.

Scalar operands of a float32 operation are cast to float32 (NumPy treats a Python float
as weak; Numba would promote to float64).
"""
from __future__ import annotations

import numpy as np

from .fuse import _load, _scalar_form, numba_or_none
from .passes import ufunc_ok as _ufunc_ok
from ..rules.lowering import lowering_of

__all__ = ["NotExpressible", "njit_source", "float_kind"]


class NotExpressible(Exception):
    """The graph has a node Numba's NumPy subset cannot run as the NumPy program does;
    ``primitive``: the name of a primitive with no Numba form, where that is why."""

    def __init__(self, message, primitive=None):
        super().__init__(message)
        self.primitive = primitive


def float_kind(v):
    """``("array", shape, dtype)`` or ``("scalar",)`` for a value a loop can carry; else None."""
    t = type(v)
    if t is np.ndarray:
        if v.ndim and v.size and v.dtype in (np.float64, np.float32):
            return ("array", v.shape, v.dtype)
        return None
    if t in (float, np.float64):
        return ("scalar",)
    return None


def _scalar_const(v):
    return type(v) in (float, int, bool, np.float64, np.float32, np.int64)


def _literal(v, dt):
    """A scalar constant as an operand of a ``dt`` operation (NumPy's weak Python scalar)."""
    f = float(v)
    text = repr(f) if np.isfinite(f) else ("np.nan" if f != f else ("-" if f < 0 else "")
                                           + "np.inf")
    return f"np.{dt.name}({text})"


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
    supported = nb[1]
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
    expr, consts, lines = dict(given), [], []
    users = [0] * len(nodes)
    for i, n in enumerate(nodes):
        if live[i] and i not in given:
            for a in n.args:
                users[a] += 1
    for o in outputs:
        users[o] += 2
    elementwise = [n.kind == "op" and live[i] and i not in given and n.prim.ufunc is not None and
                   float_kind(n.value) is not None and _ufunc_ok(n, supported)
                   for i, n in enumerate(nodes)]
    for pos, i in enumerate(g.input_nodes):
        if float_kind(nodes[i].value) is None:
            raise NotExpressible(f"input {pos} is {type(nodes[i].value).__name__} "
                                 f"{getattr(nodes[i].value, 'dtype', '')}, not a float (array)")
        expr[i] = f"{prefix}a{pos}"
        if live[i] and inputs[pos] is not None:
            lines.append(f"{expr[i]} = {inputs[pos]}")

    def arg(a, dt):
        n = nodes[a]
        if n.kind == "const" and a not in expr:
            return _literal(n.value, dt)
        if dt == np.float32 and float_kind(n.value) == ("scalar",):
            return f"np.float32({expr[a]})"
        return expr[a]

    inlined = set()

    def _loop_nest(root, buf, shape, prefix, op="="):
        """The elementwise tree at ``root`` element by element into ``buf``."""
        loops = [f"{prefix}i{d}" for d in range(len(shape))]
        members, stack = [], [root]
        while stack:
            m = stack.pop()
            members.append(m)
            stack += [a for a in nodes[m].args if a in inlined]
        scal = {}
        for m in sorted(members):
            n = nodes[m]
            dt = np.dtype(n.value.dtype if type(n.value) is np.ndarray else np.float64)
            args = []
            for a in n.args:
                v = nodes[a].value
                if a in scal:
                    args.append(scal[a])
                elif type(v) is np.ndarray and a in expr:
                    args.append(_load(v, shape, expr[a], loops))
                else:
                    args.append(arg(a, dt))
            scal[m] = _scalar_form(n.prim, args)
        out, ind = [], ""
        for d, lv in enumerate(loops):
            out.append(f"{ind}for {lv} in range({shape[d]}):")
            ind += "    "
        out.append(f"{ind}{buf}[{', '.join(loops)}] {op} {scal[root]}")
        return out

    consumers = {}
    for i, n in enumerate(nodes):
        if live[i] and i not in given:
            for a in n.args:
                consumers.setdefault(a, []).append(i)
    for i, n in enumerate(nodes):
        if not live[i] or n.kind == "input" or i in given:
            continue
        if n.kind == "const":
            v = n.value
            if type(v) is np.ndarray and v.ndim and v.dtype.kind in "fiub":
                expr[i] = f"{prefix}k{len(consts)}"
                consts.append(v)
            elif not _scalar_const(v):
                raise NotExpressible(f"constant {type(v).__name__} {v!r:.40}")
            continue
        if n.kind != "op":
            raise NotExpressible(f"a {n.kind} node")
        kind = float_kind(n.value)
        if kind is None or n.prim.multiple_results:
            raise NotExpressible(f"{n.prim.name} gives {type(n.value).__name__} "
                                 f"{getattr(n.value, 'dtype', '')}{np.shape(n.value)}")
        dt = np.dtype(n.value.dtype if kind[0] == "array" else np.float64)
        if elementwise[i] and kind[0] == "array" and buffers is None and \
                lowering_of(n.prim).scalar is not None:
            # a SciPy function's scalar form (math.erf...) works on elements only: a loop
            expr[i] = f"{prefix}t{i}"
            lines.append(f"{expr[i]} = np.empty({n.value.shape!r}, np.{n.value.dtype.name})")
            lines += _loop_nest(i, expr[i], n.value.shape, prefix)
            continue
        if elementwise[i]:
            src = _scalar_form(n.prim, [arg(a, dt) for a in n.args])
            if users[i] == 1 and all(elementwise[u] for u in consumers.get(i, ())) and \
                    (kind[0] != "array" or lowering_of(n.prim).scalar is None):
                expr[i] = src  # read once, by an elementwise node: one Numba array expression
                inlined.add(i)
                continue
            if buffers is not None and kind[0] == "array":
                into = [p for p, o in enumerate(outputs) if o == i]
                if users[i] == 2 and len(into) == 1 and into[0] in (accumulate or {}):
                    expr[i] = None  # added into its accumulator, no buffer
                    lines += _loop_nest(i, accumulate[into[0]], n.value.shape, prefix, "+=")
                    continue
                expr[i] = f"{prefix}b{len(buffers)}"
                buffers.append((n.value.shape, n.value.dtype))
                lines += _loop_nest(i, expr[i], n.value.shape, prefix)
                continue
        else:
            form = lowering_of(n.prim).array
            src = None
            if form is not None and all(nodes[a].kind != "const" or _scalar_const(
                    nodes[a].value) or a in expr for a in n.args):
                src = form([arg(a, dt) if nodes[a].kind == "const" and a not in expr
                            else expr[a] for a in n.args], n.params,
                           [nodes[a].value for a in n.args], n.value)
            if src is None:
                raise NotExpressible(f"{n.prim.name} has no Numba form for these arguments "
                                     f"(params {n.params!r:.60})",
                                     None if form is not None else n.prim.name)
        expr[i] = f"{prefix}t{i}"
        if callable(src):  # statements assigning to the name it is given
            lines += src(expr[i])
        else:
            lines.append(f"{expr[i]} = {src}")
    outs = []
    for o in outputs:
        n = nodes[o]
        if n.kind == "const" and o not in expr:
            v = n.value
            raise NotExpressible(f"a constant result {v!r:.40}")
        fresh = elementwise[o] or o in given
        if expr[o] is None:
            outs.append(None)
        elif float_kind(n.value) == ("scalar",) or fresh:
            outs.append(expr[o])
        else:  # an input, a constant or a view of one
            outs.append(f"np.copy({expr[o]})")
    return lines, outs, consts


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
