"""Matrix decompositions: eigh and eigvalsh, eig and eigvals (complex results), svd and svdvals
(reduced), qr (reduced).

``eigh`` and ``eigvalsh`` read one triangle of ``a``, as cholesky does.  The ``eigh`` and
``svd`` rules hold for distinct eigenvalues / singular values (nonzero ones for the vectors of
a non-square ``svd``); at degenerate ones the derivative contains ``inf``/``nan`` (as in
JAX), never an exception.
"""
import numpy as np

from ..core import primitive, shape_of
from ..arrays import dtype_of
from . import patterns
from .complex import conj, imag, real
from .matrices import (real_only, _col, _diag_embed, _diag_part, _inv_differences, _mm, _mT, _row,
                       _sym_cotangent, _sym_tangent, _tril, _triu_mask)
from .elementwise import where
from .shape import sum_
from .solvers import _solve, inv

__all__ = ["eig_jvp", "eig_vjp", "eigh_jvp", "eigh_vjp", "eigvals", "eigvals_jvp", "eigvals_vjp",
           "eigvalsh", "eigvalsh_jvp", "eigvalsh_vjp", "qr_jvp", "qr_vjp", "svd_jvp", "svd_vjp",
           "svdvals", "svdvals_jvp", "svdvals_vjp"]


def _cplx(x):
    return np.issubdtype(dtype_of(x), np.complexfloating)


def _mH(x):
    return conj(_mT(x))


def _herm_tangent(da, lower):
    """The tangent of the Hermitian matrix read from one triangle of a complex ``a`` (LAPACK
    ignores the imaginary parts of the diagonal)."""
    n = shape_of(da)[-1]
    eye = np.eye(n, dtype=bool)
    off = _tril(da, -1) if lower else da * _triu_mask(n, 1, da)
    return off + _mH(off) + where(eye, real(da), 0.0)


def _herm_cotangent(p, lower):
    """The transpose of ``_herm_tangent`` under the pairing Re(sum(g * t))."""
    n = shape_of(p)[-1]
    eye = np.eye(n, dtype=bool)
    q = p + _mH(p)
    off = _tril(q, -1) if lower else q * _triu_mask(n, 1, q)
    return off + where(eye, real(p), 0.0)


# -- symmetric eigenproblem ----------------------------------------------------------------


# sparsity: every result of a matrix depends on the whole matrix (batched over leading axes);
# wg.vmap: NumPy's linalg maps over leading axes (two core axes each)
@primitive(name="eigh", multiple_results=True, sparsity=patterns.Blocks(patterns.matrix_to(1, 2)),
           batch=("stacked", 2))
def _eigh(a, UPLO="L"):
    return np.linalg.eigh(a, UPLO=UPLO)


@_eigh.frule(symbolic_zeros=True)
def eigh_jvp(primals, tangents, UPLO="L"):
    (a,), (da,) = primals, tangents
    w, v = ans = _eigh(a, UPLO=UPLO)
    if da is None:
        return ans, (None, None)
    if _cplx(a) or _cplx(da):  # Hermitian: the eigenvectors' phases are fixed by dV = V (F o M)
        vdv = _mm(_mH(v), _mm(_herm_tangent(da, lower=UPLO == "L"), v))
        return ans, (real(_diag_part(vdv)), _mm(v, _inv_differences(w) * vdv))
    ds = _sym_tangent(da, lower=UPLO == "L")
    vdv = _mm(_mT(v), _mm(ds, v))
    return ans, (_diag_part(vdv), _mm(v, _inv_differences(w) * vdv))


@_eigh.rrule
def eigh_vjp(a, UPLO="L"):
    w, v = ans = _eigh(a, UPLO=UPLO)
    c = _cplx(a)

    def pullback(g):
        gw, gv = g
        inner = None if gw is None else _diag_embed(real(gw) if c else gw)
        if gv is not None:
            t = _inv_differences(w) * _mm(_mT(v), gv)
            inner = t if inner is None else inner + t
        if inner is None:
            return (None,)
        if c:
            return (_herm_cotangent(_mm(conj(v), _mm(inner, _mT(v))), lower=UPLO == "L"),)
        return (_sym_cotangent(_mm(v, _mm(inner, _mT(v))), lower=UPLO == "L"),)
    return ans, pullback


@primitive(sparsity=patterns.Blocks(patterns.matrix_to(1)), batch=("stacked", 2))
def eigvalsh(a, UPLO="L"):
    return np.linalg.eigvalsh(a, UPLO=UPLO)


@eigvalsh.frule(symbolic_zeros=True)
def eigvalsh_jvp(primals, tangents, UPLO="L"):
    (a,), (da,) = primals, tangents
    w, v = _eigh(a, UPLO=UPLO)
    if da is None:
        return w, None
    if _cplx(a) or _cplx(da):
        return w, real(_diag_part(_mm(_mH(v), _mm(_herm_tangent(da, lower=UPLO == "L"), v))))
    ds = _sym_tangent(da, lower=UPLO == "L")
    return w, _diag_part(_mm(_mT(v), _mm(ds, v)))


@eigvalsh.rrule
def eigvalsh_vjp(a, UPLO="L"):
    w, v = _eigh(a, UPLO=UPLO)

    def pullback(g):
        if _cplx(a):
            return (_herm_cotangent(_mm(conj(v) * _row(real(g)), _mT(v)), lower=UPLO == "L"),)
        return (_sym_cotangent(_mm(v * _row(g), _mT(v)), lower=UPLO == "L"),)
    return w, pullback


# -- general (non-symmetric) eigenproblem: complex results ---------------------------------------


def _complex_dtype(a):
    return np.result_type(dtype_of(a), np.complex64)


@primitive(name="eig", multiple_results=True, sparsity=patterns.Blocks(patterns.matrix_to(1, 2)),
           batch=("stacked", 2))
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
    return real(g)


@_eig.frule(symbolic_zeros=True)
def eig_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    w, v = ans = _eig(a)
    if da is None:
        return ans, (None, None)
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
            c = real(sum_(gv * v, axis=-2, keepdims=True))
            gv0 = gv - conj(v) * c
            t = _inv_differences(w) * _mm(_mT(v), gv0)
            inner = t if inner is None else inner + t
        ga = _mm(_mT(inv(v)), _mm(inner, _mT(v)))
        return (_real_if_real(ga, a),)
    return ans, pullback


@primitive(sparsity=patterns.Blocks(patterns.matrix_to(1)), batch=("stacked", 2))
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


@primitive(name="svd", multiple_results=True,
           sparsity=patterns.Blocks(patterns.matrix_to(2, 1, 2)), batch=("stacked", 2))
def _svd(a):
    """``(u, s, vh)`` with ``full_matrices=False``."""
    return np.linalg.svd(a, full_matrices=False)


@_svd.frule(symbolic_zeros=True)
def svd_jvp(primals, tangents):
    """A = U S V^H: with dP = U^H dA V, ds = Re diag(dP); U^H dU = F o (dP S + S dP^H), plus,
    for complex values, i Im(dP_kk) / s_k on its diagonal (the phases U and V share: V^H dV's
    diagonal is 0). Real values: the same with transposes, and no phase."""
    (a,), (da,) = primals, tangents
    u, s, vh = ans = _svd(a)
    if da is None:
        return ans, (None, None, None)
    c = _cplx(a) or _cplx(da)
    mh = _mH if c else _mT
    m, n = shape_of(a)[-2:]
    v = mh(vh)
    dp = _mm(mh(u), _mm(da, v))
    dpd = _diag_part(dp)
    f = _inv_differences(s, squared=True)
    sr, sc = _row(s), _col(s)
    dps = dp * sr   # dP @ diag(s)
    sdp = sc * dp   # diag(s) @ dP
    inner_u = f * (dps + mh(dps))
    if c:
        inner_u = inner_u + _diag_embed(1j * imag(dpd) / s)
    du = _mm(u, inner_u)
    dv = _mm(v, f * (sdp + mh(sdp)))
    if m > n:
        dav = _mm(da, v)
        du = du + (dav - _mm(u, _mm(mh(u), dav))) / sr
    if n > m:
        dahu = _mm(mh(da), u)
        dv = dv + (dahu - _mm(v, _mm(vh, dahu))) / sr
    return ans, (du, real(dpd) if c else dpd, mh(dv))


@_svd.rrule
def svd_vjp(a):
    u, s, vh = ans = _svd(a)
    m, n = shape_of(a)[-2:]
    if _cplx(a):
        return ans, lambda g: _svd_vjp_complex(g, u, s, vh, m, n)

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


def _svd_vjp_complex(g, u, s, vh, m, n):
    """The transpose of ``svd_jvp`` on complex values under the pairing Re(sum(g * t)): the
    coefficient K of dP, then dA's from dP = U^H dA V (and the parts outside U's and V's
    ranges)."""
    gu, gs, gvh = g
    if gu is None and gs is None and gvh is None:
        return (None,)
    f = _inv_differences(s, squared=True)
    sr, sc = _row(s), _col(s)
    k = 0.0 if gs is None else _diag_embed(real(gs) + 0j)
    if gu is not None:
        ju = f * _mm(_mT(u), gu)
        k = k + ju * sr + conj(_mT(sc * ju)) + _diag_embed(1j * imag(_diag_part(
            _mm(_mT(u), gu))) / s)
    if gvh is not None:
        jv = f * conj(_mm(vh, _mT(gvh)))
        k = k + sc * jv + conj(_mT(jv * sr))
    ga = conj(_mm(u, _mm(conj(k), vh)))
    if gu is not None and m > n:
        gc = conj(gu)
        ga = ga + conj(_mm((gc - _mm(u, _mm(_mH(u), gc))) / sr, vh))
    if gvh is not None and n > m:
        ga = ga + _mm(conj(u) / sr, gvh - _mm(_mm(gvh, _mT(vh)), conj(vh)))
    return (ga,)


@primitive(sparsity=patterns.Blocks(patterns.matrix_to(1)), batch=("stacked", 2))
def svdvals(a):
    return np.linalg.svd(a, compute_uv=False)


@svdvals.frule(symbolic_zeros=True)
def svdvals_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    u, s, vh = _svd(a)
    if da is None:
        return s, None
    if _cplx(a) or _cplx(da):
        return s, real(_diag_part(_mm(_mH(u), _mm(da, _mH(vh)))))
    return s, _diag_part(_mm(_mT(u), _mm(da, _mT(vh))))


@svdvals.rrule
def svdvals_vjp(a):
    u, s, vh = _svd(a)
    if _cplx(a):
        return s, lambda g: (conj(_mm(u * _row(real(g)), vh)),)
    return s, lambda g: (_mm(u * _row(g), vh),)


# -- QR (reduced, m >= n; wide matrices are handled in wengert.numpy.linalg.qr) --------------


@primitive(name="qr", multiple_results=True, sparsity=patterns.Blocks(patterns.matrix_to(2, 2)),
           batch=("stacked", 2))
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
    real_only("qr", primals[0])
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
    real_only("qr", a)
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
