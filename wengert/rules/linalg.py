"""Linear algebra primitives, with rules at the matrix level.

Every rule works on stacks of matrices ``(..., m, n)`` and on tangents and
cotangents with extra leading batch axes: matrix products broadcast over the
leading axes, and axes are addressed from the end.  Rule bodies use wengert
operations only (``_solve``, ``inv``, ``_eigh``... and matmul), so every rule
can be differentiated again.

Conventions, where NumPy's function is not smooth or reads only part of its input:

* ``cholesky`` and ``eigh``/``eigvalsh`` read one triangle of ``a`` (the lower
  one by default, as LAPACK does).  The derivative is that of the function NumPy
  computes: the other triangle gets a zero derivative.  For a symmetric input
  built from parameters (``a = f(theta)``) this gives the same gradient in
  ``theta`` as the symmetrised convention of JAX and PyTorch.
* ``eigh`` and ``svd`` rules hold for distinct eigenvalues / singular values
  (nonzero ones for the vectors of a non-square ``svd``).  At degenerate ones
  the derivative contains ``inf``/``nan`` (as in JAX): never an exception.
* The 2-norm (and Frobenius norm) at 0 has derivative 0 (the subgradient PyTorch
  and JAX pick).
"""
import numpy as np

from ..core import ndim_of, primitive, shape_of
from ._zeros import dtype_of
from .arithmetic import absolute, power
from .elementwise import sign, where
from .indexing import getitem_basic, scatter_basic
from .joining import stack
from .products import matmul
from .shape import (broadcast_to, expand_reduced, kept_shape, reshape, sum_, sum_tangent,
                    transpose)

# -- helpers: matrix operations written with primitives ------------------------------------


def _mm(a, b):
    """Matrix product over the last two axes, broadcasting the leading ones."""
    return matmul(a, b)


def _mT(x):
    """Swap the last two axes."""
    nd = ndim_of(x)
    return transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _eye(n, like):
    return np.eye(n, dtype=dtype_of(like))


def _diag_part(x):
    """The diagonals of a stack of square matrices: ``(..., n, n) -> (..., n)``."""
    return sum_(x * _eye(shape_of(x)[-1], x), axis=-1)


def _diag_embed(v):
    """Diagonal matrices from vectors: ``(..., n) -> (..., n, n)``."""
    n = shape_of(v)[-1]
    return reshape(v, shape_of(v) + (1,)) * _eye(n, v)


def _tril(x, k=0):
    n = shape_of(x)[-1]
    return x * np.tri(n, n, k, dtype=dtype_of(x))


def _col(v):
    """``(..., k) -> (..., k, 1)``."""
    return reshape(v, shape_of(v) + (1,))


def _row(v):
    """``(..., k) -> (..., 1, k)``."""
    s = shape_of(v)
    return reshape(v, s[:-1] + (1, s[-1]))


def _sym_tangent(da, lower):
    """The tangent of the symmetric matrix a function reads from one triangle of ``a``."""
    if lower:
        return _tril(da) + _mT(_tril(da, -1))
    n = shape_of(da)[-1]
    return da * _triu_mask(n, 0, da) + _mT(da * _triu_mask(n, 1, da))


def _triu_mask(n, k, like):
    return np.triu(np.ones((n, n), dtype=dtype_of(like)), k)


def _sym_cotangent(gs, lower):
    """The adjoint of ``_sym_tangent``: ``gs`` pairs with the symmetric matrix."""
    n = shape_of(gs)[-1]
    if lower:
        return _tril(gs) + _tril(_mT(gs), -1)
    return gs * _triu_mask(n, 0, gs) + _mT(gs) * _triu_mask(n, 1, gs)


def _inv_differences(w, squared=False):
    """``F[i, j] = 1 / (w_j - w_i)`` (or ``1 / (w_j^2 - w_i^2)``), 0 on the diagonal.

    Equal eigenvalues give ``inf`` off the diagonal (a warning, not an error).
    """
    wr, wc = _row(w), _col(w)
    d = (wr + wc) * (wr - wc) if squared else wr - wc
    eye = np.eye(shape_of(w)[-1], dtype=bool)
    with np.errstate(divide="ignore"):
        return where(eye, 0.0, 1.0 / where(eye, 1.0, d))


# -- solve, inv, det, slogdet ------------------------------------------------------------


@primitive(name="solve")
def _solve(a, b):
    """``a x = b`` for stacks of matrices ``b`` (``(..., n, k)``, same leading axes as ``a``)."""
    return np.linalg.solve(a, b)


@_solve.frule(symbolic_zeros=True)
def solve_jvp(primals, tangents):
    a, b = primals
    da, db = tangents
    ans = _solve(a, b)
    r = db
    if da is not None:
        r = -_mm(da, ans) if r is None else r - _mm(da, ans)
    return ans, None if r is None else _solve(a, r)


@_solve.rrule(needs=True)
def solve_vjp(a, b, needs):
    ans = _solve(a, b)

    def pullback(g):
        gb = _solve(_mT(a), g)
        return (-_mm(gb, _mT(ans)) if needs[0] else None), (gb if needs[1] else None)
    return ans, pullback


@primitive
def inv(a):
    return np.linalg.inv(a)


@inv.frule(symbolic_zeros=True)
def inv_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    ans = inv(a)
    return ans, None if da is None else -_mm(ans, _mm(da, ans))


@inv.rrule
def inv_vjp(a):
    ans = inv(a)
    return ans, lambda g: (-_mm(_mT(ans), _mm(g, _mT(ans))),)


def _trace_prod(x, y):
    """``trace(x @ y)`` over the last two axes, without forming the product."""
    return sum_(_mT(x) * y, axis=(-2, -1))


@primitive
def det(a):
    return np.linalg.det(a)


def _plain(x):
    from ..core import Tracer
    while isinstance(x, Tracer):
        x = x.value
    return x


def _cofactor(a, ans):
    """``d det(a) / d a``: ``det(a) inv(a)^T``, or from the SVD where ``a`` is singular
    (``det(u) det(vh) u diag(prod_{j != i} s_j) vh``), so a singular matrix has its
    derivative (the transposed adjugate) too."""
    if not np.any(_plain(ans) == 0):
        return reshape(ans, shape_of(ans) + (1, 1)) * _mT(inv(a))
    from .reductions import prod
    u, s, vh = _svd(a)
    n = shape_of(s)[-1]
    others = where(np.eye(n, dtype=bool), 1.0, broadcast_to(_row(s), shape_of(s)[:-1] + (n, n)))
    p = prod(others, axis=-1)
    sign = np.linalg.det(_plain(u)) * np.linalg.det(_plain(vh))  # +-1, piecewise constant
    sign = np.asarray(sign, dtype=dtype_of(a))
    return reshape(sign, np.shape(sign) + (1, 1)) * _mm(u * _row(p), vh)


@det.frule(symbolic_zeros=True)
def det_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    ans = det(a)
    return ans, None if da is None else sum_(_cofactor(a, ans) * da, axis=(-2, -1))


@det.rrule
def det_vjp(a):
    ans = det(a)

    def pullback(g):
        return (reshape(g, shape_of(g) + (1, 1)) * _cofactor(a, ans),)
    return ans, pullback


@primitive(multiple_results=True)
def slogdet(a):
    """``(sign, log|det a|)``; the sign is not differentiated."""
    return np.linalg.slogdet(a)


@slogdet.frule(symbolic_zeros=True)
def slogdet_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    ans = slogdet(a)
    if da is None:
        return ans, (None, None)
    return ans, (None, _trace_prod(inv(a), da))


@slogdet.rrule
def slogdet_vjp(a):
    ans = slogdet(a)

    def pullback(g):
        g_logdet = g[1]
        if g_logdet is None:
            return (None,)
        return (reshape(g_logdet, shape_of(g_logdet) + (1, 1)) * _mT(inv(a)),)
    return ans, pullback


# -- cholesky ------------------------------------------------------------------------------


@primitive(name="cholesky")
def _cholesky(a, upper=False):
    return np.linalg.cholesky(a, upper=upper) if upper else np.linalg.cholesky(a)


def _phi(x):
    """Lower triangle with the diagonal halved."""
    n = shape_of(x)[-1]
    return x * (np.tri(n, n, -1, dtype=dtype_of(x)) + 0.5 * _eye(n, x))


@_cholesky.frule(symbolic_zeros=True)
def cholesky_jvp(primals, tangents, upper=False):
    (a,), (da,) = primals, tangents
    ans = _cholesky(a, upper=upper)
    if da is None:
        return ans, None
    lo = _mT(ans) if upper else ans
    ds = _sym_tangent(da, lower=not upper)
    x = _solve(lo, _mT(_solve(lo, ds)))  # L^-1 dS L^-T (symmetric)
    dl = _mm(lo, _phi(x))
    return ans, _mT(dl) if upper else dl


@_cholesky.rrule
def cholesky_vjp(a, upper=False):
    ans = _cholesky(a, upper=upper)
    lo = _mT(ans) if upper else ans

    def pullback(g):
        gl = _mT(g) if upper else g
        p = _phi(_mm(_mT(lo), gl))
        z = _solve(_mT(lo), p)                # L^-T P
        gs = _mT(_solve(_mT(lo), _mT(z)))     # L^-T P L^-1
        return (_sym_cotangent(gs, lower=not upper),)
    return ans, pullback


# -- symmetric eigenproblem ----------------------------------------------------------------


@primitive(name="eigh", multiple_results=True)
def _eigh(a, UPLO="L"):
    return np.linalg.eigh(a, UPLO=UPLO)


@_eigh.frule(symbolic_zeros=True)
def eigh_jvp(primals, tangents, UPLO="L"):
    (a,), (da,) = primals, tangents
    w, v = ans = _eigh(a, UPLO=UPLO)
    if da is None:
        return ans, (None, None)
    ds = _sym_tangent(da, lower=UPLO == "L")
    vdv = _mm(_mT(v), _mm(ds, v))
    return ans, (_diag_part(vdv), _mm(v, _inv_differences(w) * vdv))


@_eigh.rrule
def eigh_vjp(a, UPLO="L"):
    w, v = ans = _eigh(a, UPLO=UPLO)

    def pullback(g):
        gw, gv = g
        inner = None if gw is None else _diag_embed(gw)
        if gv is not None:
            t = _inv_differences(w) * _mm(_mT(v), gv)
            inner = t if inner is None else inner + t
        if inner is None:
            return (None,)
        return (_sym_cotangent(_mm(v, _mm(inner, _mT(v))), lower=UPLO == "L"),)
    return ans, pullback


@primitive
def eigvalsh(a, UPLO="L"):
    return np.linalg.eigvalsh(a, UPLO=UPLO)


@eigvalsh.frule(symbolic_zeros=True)
def eigvalsh_jvp(primals, tangents, UPLO="L"):
    (a,), (da,) = primals, tangents
    w, v = _eigh(a, UPLO=UPLO)
    if da is None:
        return w, None
    ds = _sym_tangent(da, lower=UPLO == "L")
    return w, _diag_part(_mm(_mT(v), _mm(ds, v)))


@eigvalsh.rrule
def eigvalsh_vjp(a, UPLO="L"):
    w, v = _eigh(a, UPLO=UPLO)

    def pullback(g):
        return (_sym_cotangent(_mm(v * _row(g), _mT(v)), lower=UPLO == "L"),)
    return w, pullback


# -- general (non-symmetric) eigenproblem: complex results ---------------------------------------


def _complex_dtype(a):
    return np.result_type(dtype_of(a), np.complex64)


@primitive(name="eig", multiple_results=True)
def _eig(a):
    """``(w, v)``, always complex (NumPy returns real arrays when the spectrum is real)."""
    w, v = np.linalg.eig(a)
    ct = _complex_dtype(a)
    return w.astype(ct, copy=False), v.astype(ct, copy=False)


def _is_complex(x):
    return np.issubdtype(dtype_of(x), np.complexfloating)


def _real_if_real(g, a):
    if _is_complex(a):
        return g
    from .complex import real
    return real(g)


@_eig.frule(symbolic_zeros=True)
def eig_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    w, v = ans = _eig(a)
    if da is None:
        return ans, (None, None)
    from .complex import conj, real
    x = _mm(inv(v), _mm(da, v))
    dv = _mm(v, _inv_differences(w) * x)
    # keep each column at unit norm (NumPy's normalisation); the phase stays free
    dv = dv - v * real(sum_(conj(v) * dv, axis=-2, keepdims=True))
    return ans, (_diag_part(x), dv)


@_eig.rrule
def eig_vjp(a):
    w, v = ans = _eig(a)

    def pullback(g):
        gw, gv = g
        if gw is None and gv is None:
            return (None,)
        inner = None if gw is None else _diag_embed(gw)
        if gv is not None:
            from .complex import conj, real
            c = real(sum_(gv * v, axis=-2, keepdims=True))
            gv0 = gv - conj(v) * c
            t = _inv_differences(w) * _mm(_mT(v), gv0)
            inner = t if inner is None else inner + t
        ga = _mm(_mT(inv(v)), _mm(inner, _mT(v)))
        return (_real_if_real(ga, a),)
    return ans, pullback


@primitive
def eigvals(a):
    return np.linalg.eigvals(a).astype(_complex_dtype(a), copy=False)


@eigvals.frule(symbolic_zeros=True)
def eigvals_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    w, v = _eig(a)
    if da is None:
        return w, None
    return w, _diag_part(_mm(inv(v), _mm(da, v)))


@eigvals.rrule
def eigvals_vjp(a):
    w, v = _eig(a)
    return w, lambda g: (_real_if_real(_mm(_mT(inv(v)), _mT(v) * _col(g)), a),)


# -- singular value decomposition (reduced) -------------------------------------------------


@primitive(name="svd", multiple_results=True)
def _svd(a):
    """``(u, s, vh)`` with ``full_matrices=False``."""
    return np.linalg.svd(a, full_matrices=False)


@_svd.frule(symbolic_zeros=True)
def svd_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    u, s, vh = ans = _svd(a)
    if da is None:
        return ans, (None, None, None)
    m, n = shape_of(a)[-2:]
    v = _mT(vh)
    ds_mat = _mm(_mT(u), _mm(da, v))
    ds = _diag_part(ds_mat)
    f = _inv_differences(s, squared=True)
    sr, sc = _row(s), _col(s)
    dss = ds_mat * sr   # dS @ diag(s)
    sds = sc * ds_mat   # diag(s) @ dS
    du = _mm(u, f * (dss + _mT(dss)))
    dv = _mm(v, f * (sds + _mT(sds)))
    if m > n:
        dav = _mm(da, v)
        du = du + (dav - _mm(u, _mm(_mT(u), dav))) / sr
    if n > m:
        datu = _mm(_mT(da), u)
        dv = dv + (datu - _mm(v, _mm(vh, datu))) / sr
    return ans, (du, ds, _mT(dv))


@_svd.rrule
def svd_vjp(a):
    u, s, vh = ans = _svd(a)
    m, n = shape_of(a)[-2:]

    def pullback(g):
        gu, gs, gvh = g
        if gu is None and gs is None and gvh is None:
            return (None,)
        f = _inv_differences(s, squared=True)
        sr, sc = _row(s), _col(s)
        inner = None if gs is None else _diag_embed(gs)
        if gu is not None:
            utgu = _mm(_mT(u), gu)
            t = (f * (utgu - _mT(utgu))) * sr
            inner = t if inner is None else inner + t
        if gvh is not None:
            v = _mT(vh)
            gv = _mT(gvh)
            vtgv = _mm(vh, gv)
            t = sc * (f * (vtgv - _mT(vtgv)))
            inner = t if inner is None else inner + t
        ga = _mm(u, _mm(inner, vh))
        if gu is not None and m > n:
            ga = ga + _mm((gu - _mm(u, utgu)) / sr, vh)
        if gvh is not None and n > m:
            ga = ga + _mm(u / sr, _mT(gv - _mm(v, vtgv)))
        return (ga,)
    return ans, pullback


@primitive
def svdvals(a):
    return np.linalg.svd(a, compute_uv=False)


@svdvals.frule(symbolic_zeros=True)
def svdvals_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    u, s, vh = _svd(a)
    if da is None:
        return s, None
    return s, _diag_part(_mm(_mT(u), _mm(da, _mT(vh))))


@svdvals.rrule
def svdvals_vjp(a):
    u, s, vh = _svd(a)
    return s, lambda g: (_mm(u * _row(g), vh),)


# -- QR (reduced, m >= n; wide matrices are handled in wengert.numpy.linalg.qr) --------------


@primitive(name="qr", multiple_results=True)
def _qr(a):
    return np.linalg.qr(a, mode="reduced")


def _right_solve_t(x, r):
    """``x @ inv(r).T``."""
    return _mT(_solve(r, _mT(x)))


def _right_solve(x, r):
    """``x @ inv(r)``."""
    return _mT(_solve(_mT(r), _mT(x)))


@_qr.frule(symbolic_zeros=True)
def qr_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    q, r = ans = _qr(a)
    if da is None:
        return ans, (None, None)
    da_rinv = _right_solve(da, r)
    qt_da_rinv = _mm(_mT(q), da_rinv)
    low = _tril(qt_da_rinv, -1)
    do = low - _mT(low)  # antisymmetric: the rotation part
    dq = _mm(q, do - qt_da_rinv) + da_rinv
    dr = _mm(qt_da_rinv - do, r)
    return ans, (dq, dr)


@_qr.rrule
def qr_vjp(a):
    q, r = ans = _qr(a)

    def pullback(g):
        gq, gr = g
        if gq is None and gr is None:
            return (None,)
        m = None
        if gr is not None:
            m = _mm(r, _mT(gr))
        if gq is not None:
            t = _mm(_mT(gq), q)
            m = -t if m is None else m - t
        copyltu = _tril(m) + _mT(_tril(m, -1))
        x = _mm(q, copyltu)
        if gq is not None:
            x = x + gq
        return (_right_solve_t(x, r),)
    return ans, pullback


# -- pseudo-inverse and least squares -------------------------------------------------------


@primitive
def pinv(a, rcond=None, hermitian=False):
    kw = {} if rcond is None else {"rcond": rcond}
    return np.linalg.pinv(a, hermitian=hermitian, **kw)


def _pinv_tangent(a, p, da):
    """Golub-Pereyra: the derivative of ``p = pinv(a)`` (valid where the rank is constant)."""
    dat = _mT(da)
    t1 = -_mm(p, _mm(da, p))
    t2 = _mm(p, _mm(_mT(p), dat - _mm(_mm(dat, a), p)))
    y = _mm(dat, _mm(_mT(p), p))
    t3 = y - _mm(p, _mm(a, y))
    return t1 + t2 + t3


def _pinv_cotangent(a, p, g):
    pt = _mT(p)
    gt = _mT(g)
    t1 = -_mm(pt, _mm(g, pt))
    z = _mm(gt, _mm(p, pt))
    t2 = z - _mm(a, _mm(p, z))
    w = _mm(_mm(pt, p), gt)
    t3 = w - _mm(_mm(w, p), a)
    return t1 + t2 + t3


@pinv.frule(symbolic_zeros=True)
def pinv_jvp(primals, tangents, rcond=None, hermitian=False):
    (a,), (da,) = primals, tangents
    p = pinv(a, rcond=rcond, hermitian=hermitian)
    return p, None if da is None else _pinv_tangent(a, p, da)


@pinv.rrule
def pinv_vjp(a, rcond=None, hermitian=False):
    p = pinv(a, rcond=rcond, hermitian=hermitian)
    return p, lambda g: (_pinv_cotangent(a, p, g),)


@primitive(name="lstsq")
def _lstsq(a, b, rcond=None):
    """The minimum-norm least-squares solution ``x`` (``b`` of shape ``(m, k)``)."""
    return np.linalg.lstsq(a, b, rcond=rcond)[0]


@_lstsq.frule(symbolic_zeros=True)
def lstsq_jvp(primals, tangents, rcond=None):
    a, b = primals
    da, db = tangents
    ans = _lstsq(a, b, rcond=rcond)
    p = None
    t = None
    if da is not None:
        p = pinv(a)
        t = _mm(_pinv_tangent(a, p, da), b)
    if db is not None:
        p = pinv(a) if p is None else p
        t2 = _mm(p, db)
        t = t2 if t is None else t + t2
    return ans, t


@_lstsq.rrule(needs=True)
def lstsq_vjp(a, b, needs, rcond=None):
    ans = _lstsq(a, b, rcond=rcond)

    def pullback(g):
        p = pinv(a)
        ga = _pinv_cotangent(a, p, _mm(g, _mT(b))) if needs[0] else None
        gb = _mm(_mT(p), g) if needs[1] else None
        return ga, gb
    return ans, pullback


def lstsq(a, b, rcond=None):
    """``numpy.linalg.lstsq`` on traced values: ``(x, residuals, rank, s)``. ``x`` is the
    ``lstsq`` rule's (NumPy's to the bit); the residuals are recomputed from it, so they
    agree with LAPACK's to rounding; ``rank`` is plain."""
    _, plain_res, rank, _ = np.linalg.lstsq(_plain(a), _plain(b), rcond=rcond)
    sb = shape_of(b)
    b2 = reshape(b, sb + (1,)) if len(sb) == 1 else b
    x2 = _lstsq(a, b2, rcond=rcond)
    x = reshape(x2, shape_of(x2)[:-1]) if len(sb) == 1 else x2
    if np.size(plain_res):
        r = b2 - _mm(a, x2)
        res = sum_(r * r, axis=0)
    else:
        res = plain_res
    return x, res, rank, svdvals(a)


# -- vector p-norms ------------------------------------------------------------------------------


@primitive(name="vector_norm")
def _vector_norm(x, ord=2.0, axis=None, keepdims=False):
    """``(sum |x|^ord) ^ (1/ord)`` over the axes in ``axis`` (a tuple, or None for all)."""
    if ord == 2:
        return np.sqrt(np.sum(np.square(x), axis=axis, keepdims=keepdims))
    if ord == 1:
        return np.sum(np.abs(x), axis=axis, keepdims=keepdims)
    return np.sum(np.abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _norm_weights(x, ans, ord, axis, keepdims):
    """d norm / d x; 0 where the norm is 0 (the subgradient JAX and PyTorch pick)."""
    ak = reshape(ans, kept_shape(shape_of(x), axis))
    safe = where(ak == 0, 1.0, ak)
    if ord == 2:
        return x / safe
    if ord == 1:
        return sign(x)
    return sign(x) * power(absolute(x) / safe, ord - 1.0)


@_vector_norm.frule(symbolic_zeros=True)
def vector_norm_jvp(primals, tangents, ord=2.0, axis=None, keepdims=False):
    (x,), (dx,) = primals, tangents
    ans = _vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)
    if dx is None:
        return ans, None
    return ans, sum_tangent(dx * _norm_weights(x, ans, ord, axis, keepdims), ndim_of(x), axis,
                            keepdims)


@_vector_norm.rrule
def vector_norm_vjp(x, ord=2.0, axis=None, keepdims=False):
    ans = _vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)
    xs = shape_of(x)

    def pullback(g):
        return (expand_reduced(g, ans, xs, axis) * _norm_weights(x, ans, ord, axis, keepdims),)
    return ans, pullback


# -- scipy.linalg: triangular solves and the matrix exponential ------------------------------------


@primitive(name="solve_triangular")
def _solve_triangular(a, b, lower=False, unit_diagonal=False):
    """``tri(a) x = b`` reading one triangle of ``a`` (``b`` of shape ``(n, k)``)."""
    import scipy.linalg
    return scipy.linalg.solve_triangular(a, b, lower=lower, unit_diagonal=unit_diagonal)


def _triangle(a, lower, unit_diagonal):
    """The triangular matrix ``solve_triangular`` reads from ``a``, as wengert operations."""
    n = shape_of(a)[-1]
    k = -1 if unit_diagonal else 0
    t = _tril(a, k) if lower else a * _triu_mask(n, -k, a)
    return t + _eye(n, a) if unit_diagonal else t


@_solve_triangular.frule(symbolic_zeros=True)
def solve_triangular_jvp(primals, tangents, lower=False, unit_diagonal=False):
    a, b = primals
    da, db = tangents
    ans = _solve_triangular(a, b, lower=lower, unit_diagonal=unit_diagonal)
    r = db
    if da is not None:
        n = shape_of(a)[-1]
        dt = _tril(da, -1 if unit_diagonal else 0) if lower else \
            da * _triu_mask(n, 1 if unit_diagonal else 0, da)
        r = -_mm(dt, ans) if r is None else r - _mm(dt, ans)
    if r is None:
        return ans, None
    # batched tangents: a general stacked solve with the same triangular matrix
    return ans, _solve(_triangle(a, lower, unit_diagonal), r)


@_solve_triangular.rrule(needs=True)
def solve_triangular_vjp(a, b, needs, lower=False, unit_diagonal=False):
    ans = _solve_triangular(a, b, lower=lower, unit_diagonal=unit_diagonal)

    def pullback(g):
        gb = _solve(_mT(_triangle(a, lower, unit_diagonal)), g)
        ga = None
        if needs[0]:
            n = shape_of(a)[-1]
            ga = -_mm(gb, _mT(ans))
            ga = _tril(ga, -1 if unit_diagonal else 0) if lower else \
                ga * _triu_mask(n, 1 if unit_diagonal else 0, ga)
        return ga, (gb if needs[1] else None)
    return ans, pullback


@primitive
def expm(a):
    import scipy.linalg
    return scipy.linalg.expm(a)


def _expm_frechet(a, e):
    """``L(a, e)``, the derivative of ``expm`` at ``a`` in direction ``e``: the top-right
    block of ``expm([[a, e], [0, a]])``.  ``e`` may carry leading batch axes."""
    from ..numpy import concatenate
    n = shape_of(a)[-1]
    a = broadcast_to(a, shape_of(e)) if shape_of(a) != shape_of(e) else a
    zero = np.zeros(shape_of(e), dtype=np.result_type(dtype_of(a), dtype_of(e)))
    top = concatenate([a, e], axis=-1)
    bottom = concatenate([zero, a], axis=-1)
    big = expm(concatenate([top, bottom], axis=-2))
    return _mm(_mm(np.eye(n, 2 * n, dtype=dtype_of(big)), big),
               np.eye(2 * n, n, -n, dtype=dtype_of(big)))


@expm.frule(symbolic_zeros=True)
def expm_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    return expm(a), None if da is None else _expm_frechet(a, da)


@expm.rrule
def expm_vjp(a):
    # the adjoint of L(a, .) is L(a^T, .)
    return expm(a), lambda g: (_expm_frechet(_mT(a), g),)


# -- scipy.linalg: Sylvester equations, the matrix square root, banded solves ----------------------


def _per_matrix(fn, cores, *arrays):
    """``fn`` on each matrix of stacks whose leading axes broadcast (``cores[i]``: the core
    ndim of ``arrays[i]``).  Older SciPy takes one system at a time, and batched tangents
    carry leading axes."""
    lead = np.broadcast_shapes(*(np.shape(a)[:np.ndim(a) - c] for a, c in zip(arrays, cores)))
    if not lead:
        return fn(*arrays)
    arrays = [np.broadcast_to(a, lead + np.shape(a)[np.ndim(a) - c:])
              for a, c in zip(arrays, cores)]
    outs = [fn(*(a[i] for a in arrays)) for i in np.ndindex(lead)]
    return np.stack(outs).reshape(lead + outs[0].shape)


@primitive(name="solve_sylvester")
def _solve_sylvester(a, b, q):
    """``a x + x b = q`` (stacks broadcast over leading axes)."""
    import scipy.linalg
    return _per_matrix(scipy.linalg.solve_sylvester, (2, 2, 2), a, b, q)


@_solve_sylvester.frule(symbolic_zeros=True)
def solve_sylvester_jvp(primals, tangents):
    # a dx + dx b = dq - da x - x db
    (a, b, q), (da, db, dq) = primals, tangents
    ans = _solve_sylvester(a, b, q)
    r = dq
    for t in (None if da is None else _mm(da, ans), None if db is None else _mm(ans, db)):
        if t is not None:
            r = -t if r is None else r - t
    return ans, None if r is None else _solve_sylvester(a, b, r)


@_solve_sylvester.rrule(needs=True)
def solve_sylvester_vjp(a, b, q, needs):
    ans = _solve_sylvester(a, b, q)

    def pullback(g):
        z = _solve_sylvester(_mT(a), _mT(b), g)  # the adjoint equation
        return (-_mm(z, _mT(ans)) if needs[0] else None,
                -_mm(_mT(ans), z) if needs[1] else None, z if needs[2] else None)
    return ans, pullback


@primitive
def sqrtm(a):
    """The principal square root; real for real ``a`` (an error where it is complex)."""
    import scipy.linalg
    s = _per_matrix(scipy.linalg.sqrtm, (2,), a)
    if np.iscomplexobj(s) and not np.iscomplexobj(a):
        raise ValueError("sqrtm: this real matrix has no real principal square root (an "
                         "eigenvalue on the negative real axis); pass a complex matrix")
    return s


@sqrtm.frule(symbolic_zeros=True)
def sqrtm_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    s = sqrtm(a)
    return s, None if da is None else _solve_sylvester(s, s, da)  # s ds + ds s = da


@sqrtm.rrule
def sqrtm_vjp(a):
    s = sqrtm(a)
    return s, lambda g: (_solve_sylvester(_mT(s), _mT(s), g),)


@primitive(name="solve_banded", nargs=2)
def _solve_banded(ab, b, l, u):
    """``a x = b`` with ``a`` in LAPACK band storage ``ab[u + i - j, j] == a[i, j]``
    (``b`` of shape ``(..., m, k)``)."""
    import scipy.linalg
    return _per_matrix(lambda ab, b: scipy.linalg.solve_banded((l, u), ab, b), (2, 2), ab, b)


def _shift(x, s, axis):
    """``y[j] = x[j + s]`` along ``axis`` (-1 or -2), zero where ``j + s`` is out of range."""
    n, nd = shape_of(x)[axis], ndim_of(x)

    def at(start, stop):
        return (slice(None),) * (nd + axis) + (slice(start, stop),) + (slice(None),) * (-1 - axis)
    if s == 0:
        return x
    if abs(s) >= n:
        return x * 0.0
    src = getitem_basic(x, at(max(s, 0), n + min(s, 0)))
    return scatter_basic(src, shape_of(x), at(max(-s, 0), n - max(s, 0)))


def _band_row(ab, r):
    """Row ``r`` of the band storage: ``(..., rows, m) -> (..., m)``."""
    return getitem_basic(ab, (slice(None),) * (ndim_of(ab) - 2) + (r, slice(None)))


def _band_matmul(ab, x, l, u):
    """``a @ x`` for ``a`` in band storage; the unused corners of ``ab`` are not read."""
    out = None
    for r in range(l + u + 1):  # a[i, j] = ab[r, j] on the diagonal i - j = r - u
        t = _shift(_col(_band_row(ab, r)) * x, u - r, -2)
        out = t if out is None else out + t
    return out


def _band_transpose(ab, l, u):
    """The band storage (``(u, l)``) of ``a.T``: ``abT[r, j] = ab[l + u - r, j + r - l]``."""
    return stack([_shift(_band_row(ab, l + u - r), r - l, -1) for r in range(l + u + 1)],
                 axis=-2)


@_solve_banded.frule(symbolic_zeros=True)
def solve_banded_jvp(primals, tangents, l, u):
    (ab, b), (dab, db) = primals, tangents
    ans = _solve_banded(ab, b, l, u)
    r = db
    if dab is not None:
        t = _band_matmul(dab, ans, l, u)
        r = -t if r is None else r - t
    return ans, None if r is None else _solve_banded(ab, r, l, u)


@_solve_banded.rrule(needs=True)
def solve_banded_vjp(ab, b, needs, l, u):
    ans = _solve_banded(ab, b, l, u)

    def pullback(g):
        gb = _solve_banded(_band_transpose(ab, l, u), g, u, l)
        gab = None
        if needs[0]:  # gab[r, j] = -sum_k gb[j + r - u, k] x[j, k]; zero at the corners
            gab = -stack([sum_(_shift(gb, r - u, -2) * ans, axis=-1) for r in range(l + u + 1)],
                         axis=-2)
        return gab, (gb if needs[1] else None)
    return ans, pullback


PRIMITIVES = {p.name: p for p in (_solve, inv, det, slogdet, _cholesky, _eigh, eigvalsh, _eig,
                                  eigvals, _svd,
                                  svdvals, _qr, pinv, _lstsq, _vector_norm, _solve_triangular,
                                  expm, _solve_sylvester, sqrtm, _solve_banded)}
