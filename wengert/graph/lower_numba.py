"""The Numba dialects of the emitter (lower.py): a fused kernel's loop body, and a graph on
whole arrays (a compiled scan's step).

:class:`NumbaScalar` writes one scalar statement per kernel member: the primitive's ufunc
called on scalars (Numba compiles NumPy's ufuncs for scalars), Python's operator where the
implementation is one (Numba types those fastest), or its ``lowering.scalar`` form (SciPy's
functions); an element read ``x[i, j]`` (role ``gather_at_index``); an ``accumulate_into``
step as ``acc[idx] += v``.  :func:`write_kernel` puts the loop nest around them and writes the
kernel's call into the NumPy program (the passes decided which results it is given, and with
``out``, which of those are kept buffers).

:class:`NumbaArray` writes one whole-array statement per node in the NumPy subset Numba
compiles: an elementwise primitive its ufunc or operator on arrays (a run of them one array
expression, or a loop nest of scalar forms), any other its ``lowering.array`` form (matmul as
``np.dot``, sums, reshapes...).  A node with neither, or a value Numba would type differently
(integers, 0-d arrays, complex), raises ``NotExpressible`` saying which.
"""
from __future__ import annotations

import operator

import numpy as np

from ..rules.lowering import lowering_of, python_operator
from .lower import Dialect, Writer, literal, operator_source
from .passes import dtype_of, given_outputs, kernel_outputs, pad_box, ufunc_ok

__all__ = ["NumbaScalar", "NumbaArray", "NotExpressible", "float_kind", "scalar_form", "load",
           "write_kernel"]


# a strided constant array of at least this many elements is given to kernels as a
# contiguous copy, made once per program (a kernel's loop order fixes its results, whatever
# the layout)
CONTIGUOUS_MIN = 1024


def scalar_form(prim, args):
    """The primitive on scalars: Python's operator where its implementation is one (Numba
    types those fastest), else its ufunc, which Numba also compiles for scalars."""
    form = lowering_of(prim).scalar
    if form is not None:
        return form(*args)
    op = python_operator(prim)
    src = operator_source(op, args, parens=True) \
        if op not in (operator.matmul, operator.invert) else None
    return src if src is not None else f"np.{prim.ufunc.__name__}({', '.join(args)})"


def load(value, shape, var, loops):
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


def cast(src, have, want):
    if have == want:
        return src
    return f"{'float32' if want == np.float32 else 'float64'}({src})"


# -- a fused kernel ----------------------------------------------------------------------------

class NumbaScalar(Dialect):
    """A kernel's loop body.  Its inputs are the outer program's values (``outer.expr``),
    passed as ``a0, a1...`` (``ins``, with their call-site source ``in_src``); members get
    scalar names by position (``t0, t1...``), so equal groups give one source, one compile."""
    reads_elements = True

    def __init__(self, outer, shape):
        self.outer = outer
        self.shape = shape
        self.loops = [f"i{d}" for d in range(len(shape))]
        self.ins, self.in_src = [], []
        self.local = {}     # node index -> scalar name in the kernel
        self.acc_name = {}  # accumulator node -> its array name in the kernel
        self.pre, self.post = [], []
        self.sums = {}      # a sum over the last axis -> its operand's element (passes.plan)

    def _input(self, a, src):
        if a not in self.ins:
            self.ins.append(a)
            self.in_src.append(src)
        return f"a{self.ins.index(a)}"

    def arg(self, a, want):
        if a in self.local:
            return cast(self.local[a], dtype_of(self.outer.g.nodes[a].value), want)
        n = self.outer.g.nodes[a]
        v = n.value
        if n.kind == "const":  # ints and bools in the text; floats are arguments, so
            src = literal(v)    # closures differing in a constant share one kernel (and
            if src is not None and type(v) in (int, bool):  # its machine code: Numba never
                return cast(repr(float(v)), np.float64, want)  # frees that)
        zero_d = type(v) is np.ndarray and v.ndim == 0
        src = f"{self.outer.expr[a]}[()]" if zero_d else self.outer.expr[a]
        if n.kind == "const" and type(v) is np.ndarray and v.size >= CONTIGUOUS_MIN and \
                not v.flags.c_contiguous:  # a strided view (a seed's columns): read whole
            src = self.outer.names.bind_made(  # cache lines of its own, not of its base
                ("contiguous", a), lambda: np.ascontiguousarray(v), f"c{a}_c")
        var = self._input(a, src)
        have = dtype_of(v)
        if zero_d:
            have = v.dtype
        elif type(v) in (int, bool) or have is None:
            have = None
        return cast(load(v, self.shape, var, self.loops), have, want)

    def array_in(self, a):  # a whole array argument (read or written at an index)
        return self._input(a, self.outer.expr[a])

    def accumulate(self, w, i, step):
        nodes = w.g.nodes
        n = nodes[i]
        kind = step[0]
        sn = nodes[i if kind == "start" else step[2]]
        dt = n.value.dtype
        val = self.arg(sn.args[0], dt.type)
        idx = ", ".join(map(str, sn.params["idx"]))
        if kind == "start":
            acc = self.acc_name[i] = f"acc{len(self.acc_name)}"
            self.pre.append(f"{acc} = np.zeros({tuple(n.value.shape)!r}, np.{dt.name})")
            w.lines.append(f"{acc}[{idx}] = {val}")
        elif kind == "start+":
            acc = self.acc_name[i] = f"acc{len(self.acc_name)}"
            self.pre.append(f"{acc} = {self.array_in(step[1])}.copy()")
            w.lines.append(f"{acc}[{idx}] += {val}")
        else:
            prev = step[1]
            acc = self.acc_name[i] = self.acc_name[prev] if prev in self.acc_name \
                else self.array_in(prev)
            w.lines.append(f"{acc}[{idx}] += {val}")
        mask = w.chain_end.get(i)
        if mask is True:
            self.post.append(f"{acc} += 0.0")
        elif mask is not None:
            self.in_src.append(self.outer.names.bind_made(
                ("zeros added", i), lambda: np.argwhere(mask), "zero_added"))
            self.ins.append(("zeros added", i))
            zi = f"a{len(self.ins) - 1}"
            self.post.append(f"for _k in range({zi}.shape[0]): {acc}["
                             + ", ".join(f"{zi}[_k, {d}]" for d in range(n.value.ndim))
                             + "] += 0.0")

    def gather(self, w, i):
        nodes = w.g.nodes
        n = nodes[i]
        x = self.array_in(n.args[0])
        src = f"{x}[{', '.join(map(str, n.params['idx']))}]"
        self._assign(w, i, cast(src, nodes[n.args[0]].value.dtype.type,
                                dtype_of(n.value).type))

    def reduce(self, w, i):
        """A sum over the loop's last axis: added up where the results are stored (no
        member reads it: its readers run in a later stage)."""
        n = w.g.nodes[i]
        self.sums[i] = self.arg(n.args[0], n.value.dtype.type)

    def join(self, w, i):
        """An element of operands joined along the last axis: read from the one holding
        it, in place (no joined array is written)."""
        n = w.g.nodes[i]
        last, lead = self.loops[-1], ", ".join(self.loops[:-1])
        lead = lead + ", " if lead else ""
        parts, off = [], 0
        for a in n.args:
            k = w.g.nodes[a].value.shape[-1]
            at = f"{last} - {off}" if off else last
            parts.append((off + k, f"{self.array_in(a)}[{lead}{at}]"))
            off += k
        src = parts[-1][1]
        for end, read in reversed(parts[:-1]):
            src = f"({read} if {last} < {end} else {src})"
        self._assign(w, i, src)

    def pad(self, w, i):
        """An element of an operand written into zeros (passes.pad_box): the operand's,
        read in place, inside its box; 0.0 outside."""
        n = w.g.nodes[i]
        box = pad_box(n, w.g.nodes[n.args[0]].value)
        at, inside = [], []
        for lv, (lo, hi), size in zip(self.loops, box, n.value.shape):
            at.append(f"{lv} - {lo}" if lo else lv)
            inside += [f"{lv} >= {lo}"] * (lo > 0) + [f"{lv} < {hi}"] * (hi < size)
        zero = "0.0" if n.value.dtype == np.float64 else "float32(0.0)"
        self._assign(w, i, f"({self.array_in(n.args[0])}[{', '.join(at)}] if "
                           f"{' and '.join(inside)} else {zero})")

    def apply(self, w, i):
        n = w.g.nodes[i]
        dt = dtype_of(n.value).type
        self._assign(w, i, scalar_form(n.prim, [self.arg(a, dt) for a in n.args]))

    def _assign(self, w, i, src):
        t = f"t{len(self.local)}"
        w.lines.append(f"{t} = {src}")
        self.local[i] = t


def write_kernel(w, members, shape, fold, uses, out, compile_kernel):
    """Write one kernel's source, compile it (``compile_kernel``), and its call into the
    NumPy program ``w``; ``fold``: its result's gather (passes.gather_folds) computed instead
    of the result; ``out``: {node: kept buffer} for the results it is given.  Returns the
    kernel's source ("" where no member is read: nothing to run)."""
    g, nodes, names = w.g, w.g.nodes, w.names
    d = NumbaScalar(w, shape)
    body = Writer(g, names, d, fused=w.fused, chain_end=w.chain_end).write(members).lines
    outs = kernel_outputs(members, w.fused, uses)
    if not outs and fold is None:
        return ""
    r, loops, ins, in_src = len(shape), d.loops, d.ins, d.in_src
    pre, post, local = d.pre, d.post, d.local
    given = set(given_outputs(nodes, members, shape, w.fused, uses)) if fold is None else set()
    store, ret, at = [], [], {}
    head = []  # loop header: the loops over the shape, or over the gathered positions
    if fold is not None:
        # each position's loop indices, unsigned (no wraparound test on reading), one row
        # per axis: no division in the loop
        ut = np.uint32 if max(shape) < 2 ** 32 else np.uint64
        ins.append(("positions", fold[1]))
        in_src.append(names.bind_made(
            ("positions", fold[1]),
            lambda: np.stack(np.unravel_index(fold[3], shape)).astype(ut), "positions"))
        pa = f"a{len(ins) - 1}"
        m = fold[3].size
        head.append(f"for _q in range({m}):")
        for k in range(r):
            head.append(f"    {loops[k]} = {pa}[{k}, _q]")
        pre.append(f"o0 = np.empty(({m},), np.{nodes[outs[0]].value.dtype.name})")
        store.append(f"o0[_q] = {local[outs[0]]}")
        ret.append("o0")
    for k, i in enumerate(outs if fold is None else ()):
        v = nodes[i].value
        if i in d.sums:  # from +0.0, left to right, as NumPy adds up to 7 terms
            at_ = ", ".join(loops[:-1] + ["0"] * (v.ndim == r))
            o = f"o{k}"
            if i not in given:
                pre.append(f"{o} = np.empty({tuple(v.shape)!r}, np.{v.dtype.name})")
            else:
                o = f"a{len(ins)}"
                ins.append(("out", i))
                at[len(in_src)] = i
                in_src.append(f"{names.bind(np.empty, 'empty')}({tuple(v.shape)!r}, "
                              f"{names.bind(v.dtype, 'dtype')})")
            store.append(f"{o}[{at_}] = {d.sums[i]} + 0.0 if {loops[-1]} == 0 else "
                         f"{o}[{at_}] + {d.sums[i]}")
            ret.append(o)
        elif i in d.acc_name:
            ret.append(d.acc_name[i])
        elif r == 0:
            ret.append(local[i])
        elif i not in given:  # small: Numba's allocation is the cheaper
            o = f"o{k}"
            pre.append(f"{o} = np.empty({tuple(shape)!r}, np.{v.dtype.name})")
            store.append(f"{o}[{', '.join(loops)}] = {local[i]}")
            ret.append(o)
        else:  # given by the caller: a new array, or a buffer kept across calls (out)
            o = f"a{len(ins)}"
            ins.append(("out", i))
            at[len(in_src)] = i
            in_src.append(f"{names.bind(np.empty, 'empty')}({tuple(shape)!r}, "
                          f"{names.bind(v.dtype, 'dtype')})")
            store.append(f"{o}[{', '.join(loops)}] = {local[i]}")
            ret.append(o)
    lines = list(pre)
    ind = ""
    if fold is not None:
        lines += head
        ind = "    "
    else:
        for k in range(r):
            lines.append(f"{ind}for {loops[k]} in range({shape[k]}):")
            ind += "    "
    if r and not body:
        lines.append(ind + "pass")
    lines += [ind + b for b in body + store]
    lines += post
    lines.append(f"return ({', '.join(ret)},)")
    src = "def kernel(" + ", ".join(f"a{j}" for j in range(len(ins))) + "):\n" + \
        "".join(f"    {ln}\n" for ln in lines)
    kname = names.bind(compile_kernel(src), "kernel")
    if fold is not None:  # the gather's value: the kernel's positions, in its shape
        j = fold[1]
        t = w.expr[j] = w.fresh()
        w.lines.append(f"{t}, = {kname}({', '.join(in_src)})")
        if nodes[j].value.ndim != 1:
            w.lines.append(f"{t} = {t}.reshape({tuple(nodes[j].value.shape)!r})")
        w.guards(j)
        return src
    targets = []
    for i in outs:
        t = w.expr[i] = w.fresh()
        targets.append(t)
    call = f"{', '.join(targets)}, = {kname}("
    if any(i in out for i in at.values()):  # the pooled twin: given its kept buffers
        pooled = [names.bind(out[at[p]], f"buf{at[p]}") if at.get(p) in out else s
                  for p, s in enumerate(in_src)]
        w.lines.append(f"{call}{', '.join(in_src)})", f"{call}{', '.join(pooled)})")
    else:
        w.lines.append(f"{call}{', '.join(in_src)})")
    for i in outs:
        v = nodes[i].value
        if type(v) in (np.float64, np.float32):  # NumPy scalars stay NumPy scalars
            w.lines.append(f"{w.expr[i]} = {names.bind(type(v), type(v).__name__)}({w.expr[i]})")
    for i in outs:
        w.guards(i)
    return src


# -- a graph on whole arrays -------------------------------------------------------------------

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


class NumbaArray(Dialect):
    """Whole-array statements (``njit_body``'s): see numba_array.py for the contract.
    Scalar operands of a float32 operation are cast to float32 (NumPy treats a Python float
    as weak; Numba would promote to float64)."""

    def __init__(self, g, live, given, outputs, supported, prefix, buffers, accumulate):
        nodes = g.nodes
        self.prefix, self.buffers, self.accumulate = prefix, buffers, accumulate
        self.outputs = outputs
        self.consts = []
        self.inlined = set()
        self.views = {}  # a unit-axis reshape read only by loop nests -> its operand
        self.users = [0] * len(nodes)
        self.consumers = {}
        for i, n in enumerate(nodes):
            if live[i] and i not in given:
                for a in n.args:
                    self.users[a] += 1
                    self.consumers.setdefault(a, []).append(i)
        for o in outputs:
            self.users[o] += 2
        self.elementwise = [n.kind == "op" and live[i] and i not in given
                            and n.prim.ufunc is not None and float_kind(n.value) is not None
                            and ufunc_ok(n, supported) for i, n in enumerate(nodes)]

    def arg(self, w, a, dt):
        n = w.g.nodes[a]
        if n.kind == "const" and a not in w.expr:
            return _literal(n.value, dt)
        if dt == np.float32 and float_kind(n.value) == ("scalar",):
            return f"np.float32({w.expr[a]})"
        return w.expr[a]

    def constant(self, w, i):
        v = w.g.nodes[i].value
        if type(v) is np.ndarray and v.ndim and v.dtype.kind in "fiub":
            w.expr[i] = f"{self.prefix}k{len(self.consts)}"
            self.consts.append(v)
        elif not _scalar_const(v):
            raise NotExpressible(f"constant {type(v).__name__} {v!r:.40}")

    def project(self, w, i):
        raise NotExpressible("a proj node")

    def _loop_nest(self, w, root, buf, shape, op="="):
        """The elementwise tree at ``root`` element by element into ``buf``."""
        nodes, expr = w.g.nodes, w.expr
        loops = [f"{self.prefix}i{d}" for d in range(len(shape))]
        members, stack = [], [root]
        while stack:
            m = stack.pop()
            members.append(m)
            stack += [a for a in nodes[m].args if a in self.inlined]
        scal = {}
        for m in sorted(members):
            n = nodes[m]
            dt = np.dtype(n.value.dtype if type(n.value) is np.ndarray else np.float64)
            args = []
            for a in n.args:
                v = nodes[a].value
                if a in scal:
                    args.append(scal[a])
                elif a in self.views:
                    args.append(self._view_load(w, a, shape, loops))
                elif type(v) is np.ndarray and a in expr:
                    args.append(load(v, shape, expr[a], loops))
                else:
                    args.append(self.arg(w, a, dt))
            scal[m] = scalar_form(n.prim, args)
        out, ind = [], ""
        for d, lv in enumerate(loops):
            out.append(f"{ind}for {lv} in range({shape[d]}):")
            ind += "    "
        out.append(f"{ind}{buf}[{', '.join(loops)}] {op} {scal[root]}")
        return out

    def _unit_view(self, w, i):
        """A reshape that only adds or drops axes of length one and that only loop nests
        read (scratch arrays given): no view is made, the loops index its operand instead
        (Numba's reshape of an array of unknown layout compiles the copy that makes it
        contiguous: a third of a small VJP's compile, the outer product of its cotangent)."""
        if self.buffers is None or not self._unit_reshape(w.g.nodes, i):
            return False
        a = w.g.nodes[i].args[0]
        if w.expr.get(a) is None or w.g.nodes[a].kind == "const":
            return False
        # read by loop nests only: directly, or through further such reshapes
        stack, seen = [i], set()
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            cons = self.consumers.get(j, ())
            if j in self.outputs or not cons:
                return False
            for c in cons:
                if self._unit_reshape(w.g.nodes, c):
                    stack.append(c)
                elif not self.elementwise[c]:
                    return False
        self.views[i] = self.views.get(a, a)  # a chain of them reads the first operand
        w.expr[i] = w.expr[a]  # read only through _view_load
        return True

    @staticmethod
    def _unit_reshape(nodes, i):
        n = nodes[i]
        if n.kind != "op" or lowering_of(n.prim).role != "flat_view" or len(n.args) != 1:
            return False
        v, sv = n.value, nodes[n.args[0]].value
        return type(v) is np.ndarray and type(sv) is np.ndarray and \
            [d for d in v.shape if d != 1] == [d for d in sv.shape if d != 1]

    def _view_load(self, w, a, shape, loops):
        """One element of the unit-axis view ``a`` in a loop nest over ``shape``: its
        operand's element (the view's axes longer than one are the operand's, in order)."""
        nodes = w.g.nodes
        src = self.views[a]
        v, sv = nodes[a].value, nodes[src].value
        r, q = len(shape), v.ndim
        kept = iter([loops[r - q + j] for j in range(q) if v.shape[j] != 1])
        parts = ["0" if d == 1 else next(kept) for d in sv.shape]
        return f"{w.expr[src]}[{', '.join(parts)}]"

    def apply(self, w, i):
        nodes, expr, lines, prefix = w.g.nodes, w.expr, w.lines, self.prefix
        n = nodes[i]
        if self._unit_view(w, i):
            return
        kind = float_kind(n.value)
        if kind is None or n.prim.multiple_results:
            raise NotExpressible(f"{n.prim.name} gives {type(n.value).__name__} "
                                 f"{getattr(n.value, 'dtype', '')}{np.shape(n.value)}")
        dt = np.dtype(n.value.dtype if kind[0] == "array" else np.float64)
        scalar = lowering_of(n.prim).scalar
        if self.elementwise[i] and kind[0] == "array" and self.buffers is None and \
                scalar is not None:
            # a SciPy function's scalar form (math.erf...) works on elements only: a loop
            expr[i] = f"{prefix}t{i}"
            lines.append(f"{expr[i]} = np.empty({n.value.shape!r}, np.{n.value.dtype.name})")
            lines += self._loop_nest(w, i, expr[i], n.value.shape)
            return
        if self.elementwise[i]:
            src = scalar_form(n.prim, [self.arg(w, a, dt) for a in n.args])
            if self.users[i] == 1 and all(self.elementwise[u]
                                          for u in self.consumers.get(i, ())) and \
                    (kind[0] != "array" or scalar is None):
                expr[i] = src  # read once, by an elementwise node: one Numba array expression
                self.inlined.add(i)
                return
            if self.buffers is not None and kind[0] == "array":
                into = [p for p, o in enumerate(self.outputs) if o == i]
                if self.users[i] == 2 and len(into) == 1 and into[0] in (self.accumulate or {}):
                    expr[i] = None  # added into its accumulator, no buffer
                    lines += self._loop_nest(w, i, self.accumulate[into[0]], n.value.shape,
                                             "+=")
                    return
                expr[i] = f"{prefix}b{len(self.buffers)}"
                self.buffers.append((n.value.shape, n.value.dtype))
                lines += self._loop_nest(w, i, expr[i], n.value.shape)
                return
        else:
            form = lowering_of(n.prim).array
            src = None
            if form is not None and all(nodes[a].kind != "const" or _scalar_const(
                    nodes[a].value) or a in expr for a in n.args):
                src = form([self.arg(w, a, dt) if nodes[a].kind == "const" and a not in expr
                            else expr[a] for a in n.args], n.params,
                           [nodes[a].value for a in n.args], n.value)
            if src is None:
                raise NotExpressible(f"{n.prim.name} has no Numba form for these arguments "
                                     f"(params {n.params!r:.60})",
                                     None if form is not None else n.prim.name)
        expr[i] = f"{prefix}t{i}"
        if callable(src):  # statements assigning to the name it is given
            if getattr(src, "buffered", False) and self.buffers is not None:
                # written into a scratch array the caller allocates once, not every call
                buf = f"{prefix}b{len(self.buffers)}"
                self.buffers.append((n.value.shape, n.value.dtype))
                lines += src(expr[i], buf)
            else:
                lines += src(expr[i])
        else:
            lines.append(f"{expr[i]} = {src}")

