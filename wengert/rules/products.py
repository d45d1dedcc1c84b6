"""Products: matmul and einsum are primitives; dot, vdot, inner, outer, tensordot, kron
and cross are compositions.

Tangents and cotangents may carry leading batch axes (a whole Jacobian in one
pass): matmul is declared ``broadcasting=True`` so the core gives a batched
tangent of a lower-rank operand its broadcast axes and sums cotangents back to
each operand's shape; einsum gives the batch axes letters of their own.
"""
import math
import string
from collections import Counter

import numpy as np

from ..core import Tracer, ndim_of, primitive, shape_of
from .indexing import gather
from .nondiff import concrete, recorded
from .shape import broadcast_to, reshape, sum_, transpose

__all__ = ["matmul", "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron", "cross",
           "vecdot", "matvec", "vecmat", "convolve", "correlate", "polyval", "vander", "polyfit",
           "polyadd", "polysub", "polymul", "polyder", "polyint", "roots", "poly", "polydiv"]


def _plain(x):
    while isinstance(x, Tracer):
        x = x.value
    return x


def _traced(*xs):
    for x in xs:  # a loop, not any(<generator>): this runs on every product
        if isinstance(x, Tracer):
            return True
    return False


def _swap_last(x):
    if type(x) is np.ndarray:
        return x.swapaxes(-1, -2)  # what transpose does on a plain array, without the dispatch
    nd = ndim_of(x)
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


# -- matmul --------------------------------------------------------------------------------------------
# the ufunc itself: no Python frame between a call (eager or generated) and BLAS
_matmul = primitive(np.matmul, name="matmul", broadcasting=True, nargs=2)


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
# primals are exactly (2-D, 1-D), (1-D, 2-D) and (1-D, 1-D); batched tangents and
# cotangents (Jacobians) go through the general matmul.
_matvec = primitive(np.matmul, name="matvec", nargs=2)
_vecmat = primitive(np.matmul, name="vecmat", nargs=2)
_dot1 = primitive(np.matmul, name="dot", nargs=2)


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
        t = _matvec(da, v) if ndim_of(da) == 2 else matmul(da, v)
    if dv is not None:
        t2 = _matvec(a, dv) if ndim_of(dv) == 1 else _matmul(dv, _swap_last(a))
        t = t2 if t is None else t + t2
    return _matvec(a, v), t


@_matvec.rrule(needs=True)
def _matvec_vjp(a, v, needs):
    def pullback(g):  # g: (m,), or (B..., m) batched
        ga = _column(g) * v if needs[0] else None
        gv = None
        if needs[1]:
            gv = _vecmat(g, a) if ndim_of(g) == 1 else _matmul(g, a)
        return ga, gv
    return _matvec(a, v), pullback


@_vecmat.frule(symbolic_zeros=True)
def _vecmat_jvp(primals, tangents):
    v, a = primals
    dv, da = tangents
    t = None
    if dv is not None:
        t = _vecmat(dv, a) if ndim_of(dv) == 1 else _matmul(dv, a)
    if da is not None:
        t2 = _vecmat(v, da) if ndim_of(da) == 2 else matmul(v, da)
        t = t2 if t is None else t + t2
    return _vecmat(v, a), t


@_vecmat.rrule(needs=True)
def _vecmat_vjp(v, a, needs):
    def pullback(g):  # g: (n,), or (B..., n)
        gv = None
        if needs[0]:
            gv = _matvec(a, g) if ndim_of(g) == 1 else _matmul(g, _swap_last(a))
        ga = _column(v) * _row(g) if needs[1] else None
        return gv, ga
    return _vecmat(v, a), pullback


@_dot1.frule(symbolic_zeros=True)
def _dot1_jvp(primals, tangents):
    u, v = primals
    du, dv = tangents
    t = None
    if du is not None:
        t = _dot1(du, v) if ndim_of(du) == 1 else matmul(du, v)
    if dv is not None:
        t2 = _dot1(u, dv) if ndim_of(dv) == 1 else matmul(dv, u)
        t = t2 if t is None else t + t2
    return _dot1(u, v), t


@_dot1.rrule(needs=True)
def _dot1_vjp(u, v, needs):
    def pullback(g):  # g: (), or (B...,)
        if ndim_of(g) == 0:
            return (g * v if needs[0] else None), (g * u if needs[1] else None)
        gc = _column(g)
        return (gc * v if needs[0] else None), (gc * u if needs[1] else None)
    return _dot1(u, v), pullback


_matvec.bilinear = _vecmat.bilinear = _dot1.bilinear = True


def matmul(x1, x2, /, out=None, **kwargs):
    if not _traced(x1, x2):
        return np.matmul(x1, x2, out=out, **kwargs)
    if out is not None:
        raise NotImplementedError("wnp.matmul with out= is not supported on traced values")
    a = x1 if isinstance(x1, Tracer) or type(x1) is np.ndarray else np.asarray(x1)
    b = x2 if isinstance(x2, Tracer) or type(x2) is np.ndarray else np.asarray(x2)
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    ka = shape_of(a)[-1]
    kb = shape_of(b)[0 if nb == 1 else -2]
    if ka != kb:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
                         f"(size {kb} is different from {ka})")
    if nb == 1 and na <= 2:
        return _matvec(a, b) if na == 2 else _dot1(a, b)
    if na == 1 and nb == 2:
        return _vecmat(a, b)
    va, vb = na == 1, nb == 1
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
@primitive(name="einsum")
def _einsum(*operands, ins, out):
    opt = "greedy" if len(operands) > 2 else False
    return np.einsum(",".join(ins) + "->" + out, *operands, optimize=opt)


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
        nb = ndim_of(dt) - ndim_of(primals[i])
        bl = _free_letters(ins, out, nb)
        ops = list(primals)
        ops[i] = dt
        sub = list(ins)
        sub[i] = bl + ins[i]
        term = _einsum(*ops, ins=tuple(sub), out=bl + out)
        t = term if t is None else t + term
    return ans, t


@_einsum.rrule(needs=True)
def _einsum_vjp(*operands, needs, ins, out):
    ans = _einsum(*operands, ins=ins, out=out)

    def pullback(g):
        nb = ndim_of(g) - len(out)
        bl = _free_letters(ins, out, nb)
        cts = []
        for i, need in enumerate(needs):
            if not need:
                cts.append(None)
                continue
            others = [op for j, op in enumerate(operands) if j != i]
            osubs = tuple(s for j, s in enumerate(ins) if j != i)
            cts.append(_einsum(g, *others, ins=(bl + out,) + osubs, out=bl + ins[i]))
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


def einsum(subscripts, *operands, out=None, optimize=False, **kwargs):
    """``np.einsum`` with string subscripts (explicit, implicit, ``...``)."""
    if not isinstance(subscripts, str):
        raise NotImplementedError("wnp.einsum takes string subscripts on traced values")
    if not _traced(*operands):
        return np.einsum(subscripts, *operands, out=out, optimize=optimize, **kwargs)
    if out is not None:
        raise NotImplementedError("wnp.einsum with out= is not supported on traced values")
    ops = [o if isinstance(o, Tracer) else np.asarray(o) for o in operands]
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
    return x if isinstance(x, Tracer) else np.asarray(x)


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
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        return matmul(a, b)
    return tensordot(a, b, axes=([-1], [0 if nb == 1 else -2]))


def vdot(a, b, /):
    if not _traced(a, b):
        return np.vdot(a, b)
    a, b = _as(a), _as(b)
    if np.iscomplexobj(_plain(a)) or np.iscomplexobj(_plain(b)):
        raise NotImplementedError("wnp.vdot of complex traced values has no wengert rule")
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
    from .joining import stack
    from .reshaping import moveaxis
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
    c = [ci if isinstance(ci, Tracer) else np.asarray(ci) for ci in c]
    s = np.broadcast_shapes(*(shape_of(ci) for ci in c))
    c = [broadcast_to(ci, s) if shape_of(ci) != s else ci for ci in c]
    r = stack(c, axis=-1)
    return moveaxis(r, -1, axisc) if ndim_of(r) > 1 else r


def polyval(p, x):
    """``np.polyval``: Horner's rule as NumPy runs it, differentiable in ``p`` and ``x``."""
    if not isinstance(p, Tracer) and not isinstance(x, Tracer) and not (
            isinstance(p, (list, tuple)) and any(isinstance(c, Tracer) for c in p)):
        return np.polyval(p, x)
    if isinstance(p, np.poly1d) or isinstance(x, np.poly1d):
        raise NotImplementedError("wnp.polyval with a poly1d on traced values: pass its "
                                  "coefficients (p.coeffs)")
    from .creation import asarray
    p = asarray(p) if isinstance(p, (list, tuple)) else p
    y = np.zeros_like(_plain(x))
    for i in range(shape_of(p)[0]):
        y = y * x + p[i]
    return y


def vander(x, N=None, increasing=False):
    """``np.vander``: the powers by repeated multiplication, as NumPy's
    ``multiply.accumulate`` forms them (not ``x ** k``), so the values are NumPy's."""
    if not isinstance(x, Tracer):
        return np.vander(x, N, increasing)
    from .conversion import astype
    from .joining import concatenate
    from .rearranging import flip
    from .reductions import cumprod
    if ndim_of(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    n = shape_of(x)[0]
    N = n if N is None else int(N)
    dt = np.promote_types(_plain(x).dtype, int)
    x = reshape(astype(x, dt), (n, 1))
    if N == 0:
        return x[:, :0]
    cols = [np.ones((n, 1), dt)]
    if N > 1:
        cols.append(cumprod(broadcast_to(x, (n, N - 1)), axis=1))
    v = concatenate(cols, axis=1)
    return v if increasing else flip(v, axis=1)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """``np.polyfit``: NumPy's scaled least-squares problem, solved by the ``lstsq`` rule, so
    the coefficients are NumPy's to the bit and differentiable in ``x``, ``y`` and ``w``.

    With ``full=True`` or ``cov=True``, the residuals, singular values and covariance agree
    with NumPy's to rounding (they come from wengert's ``lstsq``)."""
    if not _traced(x, y, w):
        return np.polyfit(x, y, deg, rcond, full, w, cov)
    import warnings
    from .creation import asarray
    from .linalg import inv, lstsq
    from .reductions import sum as sum_all
    from .elementwise import sqrt
    order = int(deg) + 1
    x = asarray(x) + 0.0
    y = asarray(y) + 0.0
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if ndim_of(x) != 1:
        raise TypeError("expected 1D vector for x")
    if shape_of(x)[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if ndim_of(y) < 1 or ndim_of(y) > 2:
        raise TypeError("expected 1D or 2D array for y")
    if shape_of(x)[0] != shape_of(y)[0]:
        raise TypeError("expected x and y to have same length")
    m = shape_of(x)[0]
    if rcond is None:
        rcond = m * np.finfo(_plain(x).dtype).eps
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = asarray(w) + 0.0
        if ndim_of(w) != 1:
            raise TypeError("expected a 1-d array for weights")
        if shape_of(w)[0] != shape_of(y)[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * reshape(w, (m, 1))
        rhs = rhs * reshape(w, (m, 1)) if ndim_of(rhs) == 2 else rhs * w
    scale = sqrt(sum_all(lhs * lhs, axis=0))
    lhs = lhs / scale
    c, resids, rank, s = lstsq(lhs, rhs, rcond=rcond)
    c = c / (scale if ndim_of(c) == 1 else reshape(scale, (order, 1)))  # NumPy's (c.T / s).T
    if rank != order and not full:
        warnings.warn("Polyfit may be poorly conditioned", np.exceptions.RankWarning,
                      stacklevel=2)
    if full:
        return c, resids, rank, s, rcond
    if not cov:
        return c
    Vbase = inv(matmul(transpose(lhs), lhs)) / outer(scale, scale)
    if cov == "unscaled":
        fac = 1
    else:
        if m <= order:
            raise ValueError("the number of data points must exceed order to scale the "
                             "covariance matrix")
        fac = resids / (m - order)
    if ndim_of(y) == 1:
        return c, Vbase * fac
    return c, reshape(Vbase, (order, order, 1)) * fac


def _poly_traced(*ps):
    if any(isinstance(p, np.poly1d) for p in ps):
        raise NotImplementedError("wnp.poly* with a poly1d on traced values: pass its "
                                  "coefficients (p.coeffs)")
    from .reshaping import atleast_1d
    return [atleast_1d(p) for p in ps]


def _poly_aligned(a1, a2):
    """The two coefficient vectors, the shorter padded with leading zeros, as NumPy does."""
    from .joining import concatenate
    a1, a2 = _poly_traced(a1, a2)
    d = shape_of(a2)[0] - shape_of(a1)[0]
    if d > 0:
        a1 = concatenate([np.zeros(d, _plain(a1).dtype), a1])
    elif d < 0:
        a2 = concatenate([np.zeros(-d, _plain(a2).dtype), a2])
    return a1, a2


def polyadd(a1, a2):
    if not _traced(a1, a2):
        return np.polyadd(a1, a2)
    a1, a2 = _poly_aligned(a1, a2)
    return a1 + a2


def polysub(a1, a2):
    if not _traced(a1, a2):
        return np.polysub(a1, a2)
    a1, a2 = _poly_aligned(a1, a2)
    return a1 - a2


def polymul(a1, a2):
    """``np.polymul``: ``convolve`` of the coefficients."""
    if not _traced(a1, a2):
        return np.polymul(a1, a2)
    a1, a2 = _poly_traced(a1, a2)
    return convolve(a1, a2)


def polyder(p, m=1):
    """``np.polyder``: coefficients times their powers, ``m`` times."""
    if not _traced(p):
        return np.polyder(p, m)
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    (p,) = _poly_traced(p)
    for _ in range(m):
        n = shape_of(p)[0] - 1
        p = p[:-1] * np.arange(n, 0, -1)
    return p


def polyint(p, m=1, k=None):
    """``np.polyint``: coefficients over their new powers, with the constants ``k``
    (differentiable too)."""
    if not _traced(p, k):
        return np.polyint(p, m, k)
    from .joining import concatenate
    from .reshaping import atleast_1d
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = np.zeros(m, float) if k is None else atleast_1d(k)
    if shape_of(k)[0] == 1 and m > 1:
        k = k[0] * np.ones(m, float)
    if shape_of(k)[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    (p,) = _poly_traced(p)
    for i in range(m):
        p = concatenate([p / np.arange(shape_of(p)[0], 0, -1), reshape(k[i], (1,))])
    return p


# -- convolve and correlate ------------------------------------------------------------------------
# Primitives so the values are NumPy's to the bit (a gathered Toeplitz product is not).  Both
# are bilinear, so their rules are convolutions again.  A tangent or cotangent with leading
# batch axes (a Jacobian in one pass) goes through the Toeplitz product, which matmul batches.
_MODES = ("full", "same", "valid")


@primitive(name="convolve")
def _convolve(a, v, *, mode):
    return np.convolve(a, v, mode)


@primitive(name="correlate")
def _correlate(a, v, *, mode):
    return np.correlate(a, v, mode)


def _mode_name(mode):
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):  # NumPy's codes
        mode = {0: "valid", 1: "same", 2: "full"}.get(int(mode), mode)
    if mode not in _MODES:
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    return mode


def _window(n, m, mode):
    """(offset, length) of ``mode``'s output inside the full convolution of lengths n, m."""
    full = n + m - 1
    length = {"full": full, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]
    return (full - length) // 2, length


def _correlate_window(n, m, mode):
    """As ``_window``, inside the full correlation; NumPy centres 'same' the other way
    round when ``v`` is the longer (it correlates the swapped pair and reverses)."""
    off, length = _window(n, m, mode)
    return (off, length) if n >= m else (n + m - 1 - length - off, length)


def _conv(x, w, off, length):
    """Entries ``off:off + length`` of the full convolution of x (along its last axis; it may
    carry batch axes) with the 1-D w."""
    n, m = shape_of(x)[-1], shape_of(w)[0]
    if ndim_of(x) == 1:
        for mode in _MODES:
            if _window(n, m, mode) == (off, length):
                return _convolve(x, w, mode=mode)
        return _convolve(x, w, mode="full")[off:off + length]
    from .joining import concatenate
    k = np.arange(off, off + length)[:, None] - np.arange(n)[None, :]  # into w, or m: zero
    k = np.where((k >= 0) & (k < m), k, m).astype(np.intp)
    wz = concatenate([w, np.zeros(1, dtype=np.result_type(_plain(w)))])
    return _matmul(x, _swap_last(gather(wz, k)))


def _full_cotangent(g, off, full):
    """A cotangent of a window of a full convolution, as one of the whole: zeros outside."""
    length = shape_of(g)[-1]
    if length == full:
        return g
    from .joining import concatenate
    lead, dt = shape_of(g)[:-1], np.result_type(_plain(g))
    return concatenate([np.zeros(lead + (off,), dt), g,
                        np.zeros(lead + (full - off - length,), dt)], axis=-1)


def _declare_conv_rules(prim, window, flip):
    """Both rules of a bilinear convolution: ``convolve`` (``flip=False``), or ``correlate``,
    which is convolve(a, v reversed) with its own window (real values only: NumPy conjugates
    v, which has no complex derivative)."""
    @prim.frule(symbolic_zeros=True)
    def _jvp(primals, tangents, mode):
        a, v = primals
        da, dv = tangents
        off, length = window(shape_of(a)[0], shape_of(v)[0], mode)
        t = None
        if da is not None:
            t = _conv(da, v[::-1] if flip else v, off, length)
        if dv is not None:  # convolution commutes
            t2 = _conv(dv[..., ::-1] if flip else dv, a, off, length)
            t = t2 if t is None else t + t2
        return prim(a, v, mode=mode), t

    @prim.rrule(needs=True)
    def _vjp(a, v, needs, mode):
        n, m = shape_of(a)[0], shape_of(v)[0]
        off, _ = window(n, m, mode)

        def pullback(g):
            g = _full_cotangent(g, off, n + m - 1)
            # convolving by w transposes to correlating with it: convolving with w reversed
            ga = _conv(g, v if flip else v[::-1], m - 1, n) if needs[0] else None
            gv = _conv(g, a[::-1], n - 1, m) if needs[1] else None
            return ga, (gv[..., ::-1] if flip and gv is not None else gv)
        return prim(a, v, mode=mode), pullback


_declare_conv_rules(_convolve, _window, flip=False)
_declare_conv_rules(_correlate, _correlate_window, flip=True)


def _one_d_pair(a, v):
    a, v = _as(a), _as(v)
    if ndim_of(a) != 1 or ndim_of(v) != 1:
        raise ValueError("object too deep for desired array")
    if shape_of(a)[0] == 0 or shape_of(v)[0] == 0:
        raise ValueError("a cannot be empty" if shape_of(a)[0] == 0 else "v cannot be empty")
    return a, v


def convolve(a, v, mode="full"):
    """1-D ``np.convolve``, NumPy's value to the bit."""
    if not _traced(a, v):
        return np.convolve(a, v, mode)
    a, v = _one_d_pair(a, v)
    return _convolve(a, v, mode=_mode_name(mode))


def correlate(a, v, mode="valid"):
    """1-D ``np.correlate`` of real values, NumPy's value to the bit."""
    if not _traced(a, v):
        return np.correlate(a, v, mode)
    a, v = _one_d_pair(a, v)
    if np.iscomplexobj(_plain(a)) or np.iscomplexobj(_plain(v)):
        raise NotImplementedError("wnp.correlate of complex traced values: NumPy conjugates "
                                  "v, which has no complex derivative; split real and "
                                  "imaginary parts")
    return _correlate(a, v, mode=_mode_name(mode))


# -- roots, poly, polydiv ----------------------------------------------------------------------
# NumPy's algorithms operation by operation, so the values are NumPy's to the bit.  What NumPy
# decides on values (zeros to strip, a real spectrum, a remainder's negligible leading
# entries) is decided on the plain values with ``concrete``: a compiled graph guards it, so
# other inputs re-trace.
def _poly_vector_traced(*ps):
    """Traced, also as a list holding traced entries (which NumPy's dispatch cannot see)."""
    from .indexing import _has_tracer
    return _has_tracer(ps)


def _poly_vectors(*ps):
    from .creation import asarray
    return _poly_traced(*(asarray(p) if isinstance(p, (list, tuple)) else p for p in ps))


def _not_0d(p, name):
    """NumPy's dispatcher for roots and poly wants an iterable: np.roots(3.0) is a TypeError."""
    if not isinstance(p, (list, tuple)) and ndim_of(p) == 0:
        raise TypeError(f"wnp.{name} of a 0-d value: NumPy raises TypeError too (its "
                        "dispatcher needs an iterable); pass a 1-D array")


def _real_spectrum(w):
    return bool(np.all(np.imag(w) == 0))


def _numpy_eigvals(a):
    """``np.linalg.eigvals(a)`` by the differentiable rule, with NumPy's type: the rule's
    eigenvalues are complex, NumPy's are real when a real matrix has a real spectrum (and are
    then LAPACK's real parts, which ``real`` gives to the bit)."""
    from .complex import real
    from .linalg import eigvals
    w = eigvals(a)
    if not np.iscomplexobj(_plain(a)) and concrete(_real_spectrum, w, name="real_spectrum"):
        w = real(w)
    return w


@primitive(name="value_of")
def _value_of(x, y, undefined):
    """``x``'s value with ``y``'s derivative, NaN where ``undefined`` holds: ``x`` is the value
    NumPy computes, ``y`` a formula equal to it up to rounding that differentiates."""
    return np.array(x, copy=True)


@_value_of.frule(symbolic_zeros=True)
def _value_of_jvp(primals, tangents):
    from .elementwise import where
    dy, undefined = tangents[1], primals[2]
    if dy is not None and undefined.any():
        dy = where(undefined, np.nan, dy)
    return _value_of(*primals), dy


@_value_of.rrule
def _value_of_vjp(x, y, undefined):
    from .elementwise import where

    def pullback(g):
        if undefined.any():  # NaN only for an output that is used: 0 * undefined is 0 here
            g = where(undefined & (g != 0), np.nan, g)
        return None, g, None
    return _value_of(x, y, undefined), pullback


def _repeated(w, zeros):
    """Which of the roots ``w`` followed by ``zeros`` roots at 0 equal another exactly."""
    w = np.concatenate([np.asarray(w), np.zeros(zeros, np.result_type(w))])
    return (w[:, None] == w[None, :]).sum(axis=1) > 1


_NEWTON_STEPS = 3


def _newton_derivatives(p, r, repeated):
    """A formula for the roots ``r`` of ``p`` (values to rounding) with their derivatives,
    for ``_value_of``: Newton steps on ``p``.  A start whose derivatives are off at first
    order (a constant; eigenvalues missing the stripped trailing zeros) is right to order
    2**k - 1 after k steps.  A repeated root has no derivative (``_value_of`` makes it NaN)."""
    from .elementwise import where
    dp = polyder(p)
    for _ in range(_NEWTON_STEPS):  # (1, not p'(r) = 0, at a repeated root: no inf)
        r = r - polyval(p, r) / where(repeated, 1.0, polyval(dp, r))
    return r


def roots(p):
    """``np.roots``: the eigenvalues of NumPy's companion matrix by the ``eigvals`` rule, so
    the values (and their real or complex type) are NumPy's to the bit.

    Derivatives hold at simple roots: ``dr/dp_k = -r**(n-k) / p'(r)``, roots at 0 from a
    trailing zero included (Newton steps on the whole polynomial add what the stripped
    zero changes).  A repeated root has none (it moves like a square root): several
    trailing zeros, or computed roots that coincide exactly, give NaN derivatives for those
    roots.  Where rounding has split a multiple root apart (usual) the derivative is huge
    and finite, about 1 / gap, as for any nearly repeated root: not meaningful.  Stripped
    leading zeros get no derivative (a change there would add a root at infinity).
    """
    if not _poly_vector_traced(p):
        return np.roots(p)
    from .conversion import astype
    from .joining import concatenate
    _not_0d(p, "roots")
    (p,) = _poly_vectors(p)
    if ndim_of(p) != 1:
        raise ValueError("Input must be a rank-1 array.")
    non_zero = concrete(np.flatnonzero, p, name="flatnonzero")  # decided on the values
    if len(non_zero) == 0:
        return np.array([])
    trailing = shape_of(p)[0] - int(non_zero[-1]) - 1
    p = p[int(non_zero[0]):]
    stripped = p[:shape_of(p)[0] - trailing]
    if not np.issubdtype(_plain(p).dtype, np.inexact):
        p, stripped = astype(p, float), astype(stripped, float)
    n = shape_of(stripped)[0]
    r = np.array([])
    if n > 1:
        row = reshape(-stripped[1:] / stripped[0], (1, n - 1))
        companion = concatenate([row, np.eye(n - 2, n - 1, dtype=_plain(stripped).dtype)])
        r = recorded(np.linalg.eigvals, companion)  # plain, or recorded while compiling
    repeated = concrete(_repeated, r, zeros=trailing, name="repeated_roots")
    if n > 1 and not repeated.any():  # (the eigenvalue rule fails at a repeated root)
        r = _numpy_eigvals(companion)
    if not (trailing or repeated.any()):
        return r
    r = concatenate([r, np.zeros(trailing, np.result_type(_plain(r)))])
    return _value_of(r, _newton_derivatives(p, r, repeated), repeated)


def _conjugate_pairs(z):
    z = np.asarray(z, complex)
    return bool(np.all(np.sort(z) == np.sort(z.conjugate())))


def _charpoly(a):
    """The characteristic polynomial's coefficients by Faddeev-LeVerrier, for ``_value_of``:
    matrix products only, so its derivatives of every order hold where eigenvalues repeat
    too (those through the eigenvalue rule do not: a Jordan block gives a wrong one)."""
    from .joining import stack
    n = shape_of(a)[0]
    dt = np.result_type(_plain(a))
    eye = np.eye(n, dtype=dt)
    c, m = [np.ones((), dt)], eye
    for k in range(1, n + 1):
        if k > 1:
            m = matmul(a, m) + c[-1] * eye
        c.append(-sum_(a * _swap_last(m)) / k)  # -trace(a @ m) / k
    return stack(c)


def poly(seq_of_zeros):
    """``np.poly``: NumPy's product of the factors ``(x - zero)`` by ``convolve``, so the
    coefficients are NumPy's to the bit.  A square matrix's zeros are its eigenvalues: there
    the values are NumPy's own, and the derivatives those of the characteristic polynomial
    by Faddeev-LeVerrier (valid at repeated eigenvalues too, where the eigenvalue rule's are
    not; its rounding grows with the size, like the conditioning of the coefficients)."""
    if not _poly_vector_traced(seq_of_zeros):
        return np.poly(seq_of_zeros)
    from .complex import real
    from .conversion import astype
    from .joining import concatenate
    _not_0d(seq_of_zeros, "poly")
    (z,) = _poly_vectors(seq_of_zeros)
    sh = shape_of(z)
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        # the values: NumPy's own (eigenvalues, then as below); the derivatives: _charpoly's
        a = recorded(np.poly, z)
        y = _charpoly(z)
        if not np.iscomplexobj(_plain(a)) and np.iscomplexobj(_plain(y)):
            y = real(y)
        return _value_of(a, y, np.zeros(sh[0] + 1, bool))
    if len(sh) == 1:
        dt = np.dtype(np.mintypecode(_plain(z).dtype.char))
        z = z if _plain(z).dtype == dt else astype(z, dt)
    else:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if shape_of(z)[0] == 0:
        return 1.0
    dt = np.result_type(_plain(z))
    a = np.ones((1,), dtype=dt)
    for k in range(shape_of(z)[0]):
        a = convolve(a, concatenate([np.ones(1, dt), reshape(-z[k], (1,))]))
    if np.issubdtype(dt, np.complexfloating) and concrete(_conjugate_pairs, z,
                                                           name="conjugate_pairs"):
        a = real(a)  # conjugate pairs: the product is real
    return a


def _remainder_start(r):
    """How many leading entries of the remainder NumPy's polydiv drops as zero."""
    k = 0
    while np.allclose(r[k], 0, rtol=1e-14) and r.shape[-1] - k > 1:
        k += 1
    return k


def polydiv(u, v):
    """``np.polydiv``: NumPy's long division step by step, so quotient and remainder are
    NumPy's to the bit.  The remainder's leading entries NumPy drops as zero (``allclose``,
    so up to 1e-8) are chosen on the values; the dropped ones have no derivative.  A zero
    leading divisor gives inf/nan with a warning, as NumPy (no exception)."""
    if not _poly_vector_traced(u, v):
        return np.polydiv(u, v)
    from .conversion import astype
    from .joining import concatenate, stack
    u, v = _poly_vectors(u, v)
    if ndim_of(u) != 1 or ndim_of(v) != 1:  # NumPy fails on a 2-D one in q[k] = d
        raise ValueError("setting an array element with a sequence.")
    u, v = u + 0.0, v + 0.0
    dt = np.result_type(_plain(u)[0] + _plain(v)[0])  # NumPy's w = u[0] + v[0]
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    scale = 1. / v[0]
    r = u if _plain(u).dtype == dt else astype(u, dt)
    q = []
    for k in range(m - n + 1):
        d = scale * r[k]
        q.append(d)
        r = concatenate([r[:k], r[k:k + n + 1] - d * v, r[k + n + 1:]])
    q = stack(q) if q else np.zeros((1,), dt)  # each d has the type dt already
    start = concrete(_remainder_start, r, name="remainder_start")
    return q, (r[start:] if start else r)
