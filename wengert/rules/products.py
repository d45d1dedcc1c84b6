"""Products: matmul and einsum are primitives; dot, vdot, inner, outer, tensordot, kron
and cross are compositions.

A tangent has its primal's shape (core.py): matmul is declared ``broadcasting=True`` so
the core sums cotangents back to each operand's shape.  A whole Jacobian in one pass is
``wg.vmap`` over the pass: each product's batch rule (at the end) maps it.
"""
import math
import string
from collections import Counter

import numpy as np

from ..arrays import asarray
from ..core import holds_tracer, lift, plain as _plain, Tracer, ndim_of, primitive, shape_of
from . import patterns
from .lowering import Lowering
from .complex import conj
from .indexing import gather
from .joining import stack
from .reshaping import moveaxis
from .shape import broadcast_to, reshape, sum_, transpose

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron", "cross",
           "vecdot", "matvec", "vecmat"]



def _traced(*xs):
    for x in xs:  # a loop, not any(<generator>): this runs on every product
        if isinstance(x, Tracer) or (type(x) in (list, tuple) and holds_tracer(x)):
            return True
    return False


def _swap_last(x):
    if type(x) is np.ndarray:
        return x.swapaxes(-1, -2)  # what transpose does on a plain array, without the dispatch
    nd = ndim_of(x)
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


# -- matmul --------------------------------------------------------------------------------------------
# the ufunc itself: no Python frame between a call (eager or generated) and BLAS
# a product of at most this many multiply-adds is a loop nest in a compiled scan's step:
# a BLAS call (and np.dot's new array) costs more than the arithmetic there
SMALL_PRODUCT = 1 << 13


def _nb_matmul(a, p, v, out):
    """Numba (a compiled scan's loop): a small product as a loop nest (``_product_loops``),
    a larger one ``np.dot``, which calls BLAS, on 1-D and 2-D operands of one float dtype
    (Numba's dot has no stacked operands and does not mix dtypes)."""
    if not all(type(x) is np.ndarray and 1 <= x.ndim <= 2 and x.dtype.kind == "f"
               for x in v) or v[0].dtype != v[1].dtype:
        return None
    m = v[0].shape[0] if v[0].ndim == 2 else 1
    k, n = v[0].shape[-1], (v[1].shape[1] if v[1].ndim == 2 else 1)
    if m * k * n <= SMALL_PRODUCT and type(out) is np.ndarray:
        return _ProductLoops(a[0], a[1], v[0].ndim, v[1].ndim, out.shape, out.dtype, k)
    return f"np.dot({a[0]}, {a[1]})"


class _ProductLoops:
    """The statements of a small product into ``name``: each element one sum over the
    shared axis, in order.  ``buffer``: an array of the result's shape the caller keeps
    across calls (written over), else a new one."""
    buffered = True

    def __init__(self, x, y, xd, yd, shape, dtype, k):
        self.x, self.y, self.xd, self.yd = x, y, xd, yd
        self.shape, self.dtype, self.k = tuple(shape), np.dtype(dtype), k

    def __call__(self, name, buffer=None):
        dt = self.dtype.name
        lines = [f"{name} = {buffer}" if buffer else
                 f"{name} = np.empty({self.shape!r}, np.{dt})"]
        # loop variables of this product's own (two products may differ in dtype)
        i = [f"{name}_i"] if self.xd == 2 else []
        j = [f"{name}_j"] if self.yd == 2 else []
        s, k = f"{name}_s", f"{name}_k"
        xs = f"{self.x}[{', '.join(i + [k])}]"
        ys = f"{self.y}[{', '.join([k] + j)}]"
        ind = ""
        for lv, size in zip(i + j, self.shape):
            lines.append(f"{ind}for {lv} in range({size}):")
            ind += "    "
        lines += [f"{ind}{s} = np.{dt}(0.0)", f"{ind}for {k} in range({self.k}):",
                  f"{ind}    {s} += {xs} * {ys}",
                  f"{ind}{name}[{', '.join(i + j)}] = {s}"]
        return lines


_MATMUL = Lowering(array=_nb_matmul)
# sparsity: NumPy's matmul as an einsum (which elements of each operand meet in an element);
# wg.vmap: NumPy's stacked products (core axes per operand)
_matmul = primitive(np.matmul, name="matmul", broadcasting=True, nargs=2,
                    sparsity=patterns.Contraction(), batch=("stacked", 2, 2), lowering=_MATMUL)


@_matmul.frule(symbolic_zeros=True)
def _matmul_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    ans = _matmul(a, b)
    t = None
    if da is not None:
        t = _matmul(da, b)
    if db is not None:
        t2 = _matmul(a, db)
        t = t2 if t is None else t + t2
    return ans, t


@_matmul.rrule(needs=True)
def _matmul_vjp(a, b, needs):
    ans = _matmul(a, b)

    def pullback(g):
        return (_product(g, _swap_last(b)) if needs[0] else None,
                _product(_swap_last(a), g) if needs[1] else None)
    return ans, pullback


def _product(x, y):
    """``x @ y`` for a cotangent.  Over an axis of length 1 that is an outer product, which
    NumPy's matmul runs in its slow loop when an operand is a transposed view (the pullback
    of ``h @ w`` for a column ``w``): a broadcast product is the same numbers, twice as fast."""
    if shape_of(x)[-1] == 1:
        return x * y
    return _matmul(x, y)


# -- matrix-vector products -------------------------------------------------------------------------
# ``A @ v``, ``v @ A`` and ``u @ v`` as primitives of their own: NumPy's 1-D semantics
# directly, rather than reshapes around ``_matmul``.  Every pass over such a product
# (forward, reverse, forward over reverse) then costs one operation, not three.  Their
# primals, tangents and cotangents are exactly (2-D, 1-D), (1-D, 2-D) and (1-D, 1-D).
_matvec = primitive(np.matmul, name="matvec", nargs=2, bilinear=True,
                    sparsity=patterns.Contraction(), lowering=_MATMUL)
_vecmat = primitive(np.matmul, name="vecmat", nargs=2, bilinear=True,
                    sparsity=patterns.Contraction(), lowering=_MATMUL)
_dot1 = primitive(np.matmul, name="dot", nargs=2, bilinear=True, sparsity=patterns.Contraction(),
                  lowering=_MATMUL)


def _column(v):  # (..., k) -> (..., k, 1)
    return reshape(v, shape_of(v) + (1,))


def _row(v):  # (..., k) -> (..., 1, k)
    s = shape_of(v)
    return reshape(v, s[:-1] + (1,) + s[-1:])


@_matvec.frule(symbolic_zeros=True)
def _matvec_jvp(primals, tangents):
    a, v = primals
    da, dv = tangents
    t = None
    if da is not None:
        t = _matvec(da, v)
    if dv is not None:
        t2 = _matvec(a, dv)
        t = t2 if t is None else t + t2
    return _matvec(a, v), t


@_matvec.rrule(needs=True)
def _matvec_vjp(a, v, needs):
    def pullback(g):  # g: (m,)
        return (_column(g) * v if needs[0] else None), (_vecmat(g, a) if needs[1] else None)
    return _matvec(a, v), pullback


@_vecmat.frule(symbolic_zeros=True)
def _vecmat_jvp(primals, tangents):
    v, a = primals
    dv, da = tangents
    t = None
    if dv is not None:
        t = _vecmat(dv, a)
    if da is not None:
        t2 = _vecmat(v, da)
        t = t2 if t is None else t + t2
    return _vecmat(v, a), t


@_vecmat.rrule(needs=True)
def _vecmat_vjp(v, a, needs):
    def pullback(g):  # g: (n,)
        return (_matvec(a, g) if needs[0] else None), \
            (_column(v) * _row(g) if needs[1] else None)
    return _vecmat(v, a), pullback


@_dot1.frule(symbolic_zeros=True)
def _dot1_jvp(primals, tangents):
    u, v = primals
    du, dv = tangents
    t = None
    if du is not None:
        t = _dot1(du, v)
    if dv is not None:
        t2 = _dot1(u, dv)
        t = t2 if t is None else t + t2
    return _dot1(u, v), t


@_dot1.rrule(needs=True)
def _dot1_vjp(u, v, needs):
    def pullback(g):  # g: ()
        return (g * v if needs[0] else None), (g * u if needs[1] else None)
    return _dot1(u, v), pullback




def matmul(x1, x2, /, out=None, **kwargs):
    if not _traced(x1, x2):
        return np.matmul(x1, x2, out=out, **kwargs)
    if out is not None:
        raise NotImplementedError("wnp.matmul with out= is not supported on traced values")
    a = x1 if isinstance(x1, Tracer) or type(x1) is np.ndarray else _as(x1)
    b = x2 if isinstance(x2, Tracer) or type(x2) is np.ndarray else _as(x2)
    ra, rb = ndim_of(a), ndim_of(b)
    if ra == 0 or rb == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    ka = shape_of(a)[-1]
    kb = shape_of(b)[0 if rb == 1 else -2]
    if ka != kb:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {kb} is different from {ka})")
    if rb == 1 and ra <= 2:
        return _matvec(a, b) if ra == 2 else _dot1(a, b)
    if ra == 1 and rb == 2:
        return _vecmat(a, b)
    va, vb = ra == 1, rb == 1
    if va:
        a = reshape(a, (1,) + shape_of(a))
    if vb:
        b = reshape(b, shape_of(b) + (1,))
    r = _matmul(a, b)
    if va or vb:
        s = shape_of(r)
        s = s[:-2] + (() if va else s[-2:-1]) + (() if vb else s[-1:])
        r = reshape(r, s)
    return r


# -- einsum ----------------------------------------------------------------------------------------------
@primitive(name="einsum", sparsity=patterns.Contraction(patterns.einsum_subscripts))
def _einsum(*operands, ins, out):
    if len(operands) == 2:
        r = _einsum_matmul(operands[0], operands[1], ins[0], ins[1], out)
        if r is not None:
            return r
    opt = "greedy" if len(operands) > 2 else False
    return np.einsum(",".join(ins) + "->" + out, *operands, optimize=opt)


_MATMUL_WORK = 16384  # multiply-adds below which np.einsum's own loop is as fast


def _einsum_matmul(a, b, sa, sb, out):
    """A contraction of two operands as one batched matmul, or ``None`` where it is not one.

    np.einsum without ``optimize`` loops in C without BLAS (~10x slower on a layer of a
    network, ``mnd,mdo->mno``), and with it spends more in Python than a small product costs.
    """
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype.kind not in "fc" \
            or b.dtype.kind not in "fc":
        return None
    contract = [c for c in sa if c in sb and c not in out]
    if not contract or len(set(sa)) != len(sa) or len(set(sb)) != len(sb) \
            or len(set(out)) != len(out) or any(c not in sa and c not in sb for c in out):
        return None  # an elementwise product (nothing contracted), or a diagonal: einsum's loop
    size = dict(zip(sa, a.shape))
    size.update(zip(sb, b.shape))
    batch = [c for c in out if c in sa and c in sb]
    free_a = [c for c in sa if c in out and c not in sb]
    free_b = [c for c in sb if c in out and c not in sa]
    n_batch, m, n, k = (math.prod(size[c] for c in s) for s in (batch, free_a, free_b, contract))
    if n_batch * m * n * k < _MATMUL_WORK or (m == n == 1 and n_batch > 1):
        return None  # small, or a batch of dot products: einsum's loop costs less
    lone_a = tuple(i for i, c in enumerate(sa) if c not in sb and c not in out)
    if lone_a:
        a = a.sum(axis=lone_a)
        sa = "".join(c for i, c in enumerate(sa) if i not in lone_a)
    lone_b = tuple(i for i, c in enumerate(sb) if c not in sa and c not in out)
    if lone_b:
        b = b.sum(axis=lone_b)
        sb = "".join(c for i, c in enumerate(sb) if i not in lone_b)
    a2 = a.transpose([sa.index(c) for c in batch + free_a + contract]).reshape(n_batch, m, k)
    b2 = b.transpose([sb.index(c) for c in batch + contract + free_b]).reshape(n_batch, k, n)
    r = np.matmul(a2, b2).reshape([size[c] for c in batch + free_a + free_b])
    order = batch + free_a + free_b
    if not out:
        return r[()]  # a scalar, as einsum gives
    return r.transpose([order.index(c) for c in out])


def _free_letters(ins, out, k):
    used = set("".join(ins) + out)
    free = [c for c in string.ascii_letters if c not in used]
    if len(free) < k:
        raise ValueError("einsum: too many axes for the available subscript letters")
    return "".join(free[:k])


@_einsum.frule(symbolic_zeros=True)
def _einsum_jvp(primals, tangents, ins, out):
    ans = _einsum(*primals, ins=ins, out=out)
    t = None
    for i, dt in enumerate(tangents):
        if dt is None:
            continue
        ops = list(primals)
        ops[i] = dt
        term = _einsum(*ops, ins=ins, out=out)
        t = term if t is None else t + term
    return ans, t


@_einsum.rrule(needs=True)
def _einsum_vjp(*operands, needs, ins, out):
    ans = _einsum(*operands, ins=ins, out=out)

    def pullback(g):
        cts = []
        for i, need in enumerate(needs):
            if not need:
                cts.append(None)
                continue
            others = [op for j, op in enumerate(operands) if j != i]
            osubs = tuple(s for j, s in enumerate(ins) if j != i)
            cts.append(_einsum(g, *others, ins=(out,) + osubs, out=ins[i]))
        return tuple(cts)
    return ans, pullback


def _parse_einsum(subscripts, shapes):
    """Explicit subscripts with ``...`` expanded into letters: ``(ins, out)``."""
    s = subscripts.replace(" ", "")
    if "->" in s:
        lhs, out = s.split("->")
    else:
        lhs, out = s, None
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError("einsum: number of subscripts does not match the number of operands")
    used = set(c for c in s if c.isalpha())
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = 0
    for sub, shape in zip(ins, shapes):
        if "..." in sub:
            n_ell = max(n_ell, len(shape) - (len(sub) - 3))
    ell = "".join(free[:n_ell])
    new_ins = []
    for sub, shape in zip(ins, shapes):
        if "..." in sub:
            k = len(shape) - (len(sub) - 3)
            sub = sub.replace("...", ell[n_ell - k:] if k else "")
        if len(sub) != len(shape):
            raise ValueError(f"einsum: operand has {len(shape)} dimensions but subscripts "
                             f"'{sub}' name {len(sub)}")
        new_ins.append(sub)
    if out is None:
        counts = Counter("".join(i.replace("...", "") for i in lhs.split(",")))
        out = ell + "".join(sorted((c for c in counts if counts[c] == 1 and c not in ell),
                                   key=lambda c: (c.isupper(), c) if False else c))
    else:
        out = out.replace("...", ell)
    return new_ins, out


def _sublist_letter(k):
    if k is Ellipsis:
        return "..."
    if not isinstance(k, (int, np.integer)) or not 0 <= k < 52:
        raise ValueError(f"einsum: a subscript in the sublist form is an int in [0, 52) or "
                         f"Ellipsis, got {k!r}")
    return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[k]


def _sublist_subscripts(args):
    """NumPy's interleaved form (operand, sublist, ..., [output sublist]) as a subscripts string
    and the operands: one parser for both forms."""
    ops, subs = args[0::2], args[1::2]
    out = None
    if len(args) % 2:
        ops, out = ops[:-1], ops[-1]
    text = ",".join("".join(_sublist_letter(k) for k in sub) for sub in subs)
    if out is not None:
        text += "->" + "".join(_sublist_letter(k) for k in out)
    return text, tuple(ops)


def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    """``np.einsum`` with string subscripts (explicit, implicit, ``...``) or NumPy's interleaved
    form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``."""
    if not isinstance(subscripts, str):
        subscripts, operands = _sublist_subscripts((subscripts,) + operands)
    if not _traced(*operands):
        return np.einsum(subscripts, *operands, out=out, optimize=optimize, **kwargs)
    if out is not None:
        raise NotImplementedError("wnp.einsum with out= is not supported on traced values")
    ops = [_as(o) for o in operands]
    ins, outs = _parse_einsum(subscripts, [shape_of(o) for o in ops])
    # sizes of each letter, broadcasting size-1 axes as NumPy does
    size = {}
    for sub, o in zip(ins, ops):
        for c, d in zip(sub, shape_of(o)):
            if d != 1 or c not in size:
                if c in size and size[c] != 1 and d != size[c]:
                    raise ValueError(f"einsum: operands could not be broadcast together: "
                                     f"axis '{c}' has sizes {size[c]} and {d}")
                size[c] = d
    new_ops, new_ins = [], []
    for k, (sub, o) in enumerate(zip(ins, ops)):
        # a repeated letter in one operand: take that diagonal first
        if len(set(sub)) != len(sub):
            uniq = "".join(dict.fromkeys(sub))
            pos = np.arange(int(np.prod(shape_of(o), dtype=int)), dtype=np.intp)
            pos = np.einsum(f"{sub}->{uniq}", pos.reshape(shape_of(o)))
            o = gather(o, pos) if isinstance(o, Tracer) else np.einsum(f"{sub}->{uniq}", o)
            sub = uniq
        # a letter only this operand has and the output lacks: sum it out first
        others = "".join(s for j, s in enumerate(ins) if j != k) + outs
        lone = tuple(i for i, c in enumerate(sub) if c not in others)
        if lone:
            o = sum_(o, axis=lone) if isinstance(o, Tracer) else np.sum(o, axis=lone)
            sub = "".join(c for i, c in enumerate(sub) if i not in lone)
        want = tuple(size[c] for c in sub)
        if shape_of(o) != want:
            o = broadcast_to(o, want) if isinstance(o, Tracer) else np.broadcast_to(o, want)
        new_ops.append(o)
        new_ins.append(sub)
    return _einsum(*new_ops, ins=tuple(new_ins), out=outs)


# -- compositions ----------------------------------------------------------------------------------------
def _as(x):
    if not isinstance(x, Tracer):
        x = lift(x)  # a list holding traced values: stacked
    return x if isinstance(x, Tracer) else asarray(x)  # a CuPy or Dask array stays one


def tensordot(a, b, axes=2):
    if not _traced(a, b):
        return np.tensordot(a, b, axes)
    a, b = _as(a), _as(b)
    sa, sb = shape_of(a), shape_of(b)
    if np.ndim(axes) == 0:
        n = int(axes)
        ax_a = list(range(len(sa) - n, len(sa)))
        ax_b = list(range(n))
    else:
        ax_a, ax_b = axes
        ax_a = [int(i) for i in np.atleast_1d(ax_a)]
        ax_b = [int(i) for i in np.atleast_1d(ax_b)]
    ax_a = [i % len(sa) for i in ax_a]
    ax_b = [i % len(sb) for i in ax_b]
    for i, j in zip(ax_a, ax_b):
        if sa[i] != sb[j]:
            raise ValueError("shape-mismatch for sum")
    free_a = [i for i in range(len(sa)) if i not in ax_a]
    free_b = [i for i in range(len(sb)) if i not in ax_b]
    k = math.prod(sa[i] for i in ax_a)
    m = math.prod(sa[i] for i in free_a)
    n = math.prod(sb[i] for i in free_b)
    at = transpose(a, tuple(free_a + ax_a)) if free_a + ax_a != list(range(len(sa))) else a
    bt = transpose(b, tuple(ax_b + free_b)) if ax_b + free_b != list(range(len(sb))) else b
    r = _matmul(reshape(at, (m, k)), reshape(bt, (k, n)))
    return reshape(r, tuple(sa[i] for i in free_a) + tuple(sb[i] for i in free_b))


def dot(a, b, out=None):
    if not _traced(a, b):
        return np.dot(a, b, out=out)
    if out is not None:
        raise NotImplementedError("wnp.dot with out= is not supported on traced values")
    a, b = _as(a), _as(b)
    ra, rb = ndim_of(a), ndim_of(b)
    if ra == 0 or rb == 0:
        return a * b
    if ra <= 2 and rb <= 2:
        return matmul(a, b)
    return tensordot(a, b, axes=([-1], [0 if rb == 1 else -2]))


def vdot(a, b, /):
    if not _traced(a, b):
        return np.vdot(a, b)
    a, b = _as(a), _as(b)
    if np.iscomplexobj(_plain(a)):
        a = conj(a)  # NumPy's vdot conjugates its first argument
    return sum_(reshape(a, (-1,)) * reshape(b, (-1,)))


def inner(a, b, /):
    if not _traced(a, b):
        return np.inner(a, b)
    a, b = _as(a), _as(b)
    if ndim_of(a) == 0 or ndim_of(b) == 0:
        return a * b
    return tensordot(a, b, axes=([-1], [-1]))


def outer(a, b, out=None):
    if not _traced(a, b):
        return np.outer(a, b, out=out)
    a, b = _as(a), _as(b)
    return reshape(a, (-1, 1)) * reshape(b, (1, -1))


def vecdot(x1, x2, /, *, axis=-1, **kwargs):
    if not _traced(x1, x2):
        return np.vecdot(x1, x2, axis=axis, **kwargs)
    return sum_(_as(x1) * _as(x2), axis=axis)


def matvec(x1, x2, /, **kwargs):
    if not _traced(x1, x2):
        return np.matvec(x1, x2, **kwargs)
    x2 = _as(x2)
    return reshape(matmul(x1, reshape(x2, shape_of(x2) + (1,))),
                   np.broadcast_shapes(shape_of(x1)[:-2], shape_of(x2)[:-1])
                   + shape_of(x1)[-2:-1])


def vecmat(x1, x2, /, **kwargs):
    if not _traced(x1, x2):
        return np.vecmat(x1, x2, **kwargs)
    x1 = _as(x1)
    r = matmul(reshape(x1, shape_of(x1)[:-1] + (1,) + shape_of(x1)[-1:]), x2)
    s = shape_of(r)
    return reshape(r, s[:-2] + s[-1:])


def kron(a, b):
    if not _traced(a, b):
        return np.kron(a, b)
    a, b = _as(a), _as(b)
    sa, sb = shape_of(a), shape_of(b)
    nd = max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + sa
    sb = (1,) * (nd - len(sb)) + sb
    ai = reshape(a, tuple(v for d in sa for v in (d, 1)))
    bi = reshape(b, tuple(v for d in sb for v in (1, d)))
    return reshape(ai * bi, tuple(x * y for x, y in zip(sa, sb)))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if not _traced(a, b):
        return np.cross(a, b, axisa, axisb, axisc, axis)
    a, b = _as(a), _as(b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(a, axisa, -1) if ndim_of(a) > 1 else a
    b = moveaxis(b, axisb, -1) if ndim_of(b) > 1 else b
    na, nb_ = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb_ not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n"
                         "(dimension must be 2 or 3)")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    a2 = a[..., 2] if na == 3 else None
    b2 = b[..., 2] if nb_ == 3 else None
    if na == 2 and nb_ == 2:
        return a0 * b1 - a1 * b0
    if na == 2:
        c = [a1 * b2, -(a0 * b2), a0 * b1 - a1 * b0]
    elif nb_ == 2:
        c = [-(a2 * b1), a2 * b0, a0 * b1 - a1 * b0]
    else:
        c = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]
    c = [ci if isinstance(ci, Tracer) else asarray(ci) for ci in c]
    s = np.broadcast_shapes(*(shape_of(ci) for ci in c))
    c = [broadcast_to(ci, s) if shape_of(ci) != s else ci for ci in c]
    r = stack(c, axis=-1)
    return moveaxis(r, -1, axisc) if ndim_of(r) > 1 else r


@_einsum.batching
def _einsum_batch(operands, batched, ins, out):
    """A fresh subscript letter for the batch axis, leading on the batched operands and the
    result."""
    b = _free_letters(ins, out, 1)
    ins = type(ins)(b + s if bt else s for s, bt in zip(ins, batched))
    return _einsum(*operands, ins=ins, out=b + out)


def _vector_product_batch(cores):
    """matvec, vecmat, dot on a batch: a batched vector becomes a row (the first operand) or a
    column (the second) of a stacked ``matmul``; the length-1 axes go again after."""
    def rule(operands, batched):
        a, b = operands
        if cores != (1, 1) and ndim_of(a) == 2 and ndim_of(b) == 2 and batched.count(True) == 1:
            # a batch of vectors against one matrix: a plain matrix product, rows = the batch
            # (no length-1 axes, and one BLAS call a compiled scan's Numba loop can make)
            if cores == (1, 2) and batched[0]:
                return _matmul(a, b)
            if cores == (2, 1) and batched[1]:
                return _matmul(b, _swap_last(a))
        ops = []
        for i, (x, bt, core) in enumerate(zip(operands, batched, cores)):
            s = shape_of(x)
            if core == 1:
                x = reshape(x, s[:-1] + ((1,) + s[-1:] if i == 0 else s[-1:] + (1,)))
            ops.append(x)
        r = _matmul(*ops)
        s = shape_of(r)
        keep = s[:-2] + (() if cores[0] == 1 else s[-2:-1]) + (() if cores[1] == 1 else s[-1:])
        return reshape(r, keep)
    return rule


_matvec.batching(_vector_product_batch((2, 1)))
_vecmat.batching(_vector_product_batch((1, 2)))
_dot1.batching(_vector_product_batch((1, 1)))
