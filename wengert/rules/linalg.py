"""Linear algebra primitives, with rules at the matrix level: det, slogdet, lstsq, vector
norms, expm and sqrtm here; the solves (solve, inv, cholesky, pinv, triangular, banded,
Sylvester) in rules/solvers.py, the decompositions (eigh, eig, svd, qr) in
rules/decompositions.py, on the helpers of rules/matrices.py.  ``PRIMITIVES`` lists them all.

Every rule works on stacks of matrices ``(..., m, n)``: matrix products broadcast over
the leading axes, and axes are addressed from the end.  A tangent has its primal's shape
(several directions at once are ``wg.vmap`` over the pass, core.py).  Rule bodies use wengert
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

from ..core import plain as _plain, Tracer, ndim_of, primitive, shape_of
from ..arrays import chunks_of, dtype_of, implements, is_foreign
from . import patterns
from .arithmetic import absolute, power
from .complex import conj, imag, real
from .decompositions import _eig, _eigh, _qr, _svd, eigvals, eigvalsh, svdvals
from .elementwise import sign, where
from .joining import concatenate
from .matrices import _mm, _mT, _row, real_only
from .nondiff import recorded
from .reductions import prod
from .shape import broadcast_to, expand_reduced, kept_shape, reshape, sum_, sum_tangent
from .solvers import (_cholesky, _per_matrix, _pinv_cotangent, _pinv_tangent, _solve,
                      _solve_banded, _solve_sylvester, _solve_triangular, inv, pinv)

__all__ = ["PRIMITIVES", "det", "det_jvp", "det_vjp", "expm", "expm_jvp", "expm_vjp", "lstsq",
           "lstsq_jvp", "lstsq_vjp", "slogdet", "slogdet_jvp", "slogdet_vjp", "sqrtm", "sqrtm_jvp",
           "sqrtm_vjp", "vector_norm_jvp", "vector_norm_vjp"]


# -- determinants -----------------------------------------------------------------------------
def _trace_prod(x, y):
    """``trace(x @ y)`` over the last two axes, without forming the product."""
    return sum_(_mT(x) * y, axis=(-2, -1))


# sparsity: per matrix (batched over leading axes); the norm reduces over its axes. wg.vmap:
# stacked matrices (two core axes); norms reduce along ``axis``
@primitive(sparsity=patterns.Blocks(patterns.matrix_to(0)), batch=("stacked", 2))
def det(a):
    return np.linalg.det(a)



def _cofactor(a, ans):
    """``d det(a) / d a``: ``det(a) inv(a)^T``, or from the SVD where ``a`` is singular
    (``det(u) det(vh) u diag(prod_{j != i} s_j) vh``), so a singular matrix has its
    derivative (the transposed adjugate) too."""
    if not np.any(_plain(ans) == 0):
        return reshape(ans, shape_of(ans) + (1, 1)) * _mT(inv(a))
    u, s, vh = _svd(a)
    n = shape_of(s)[-1]
    others = where(np.eye(n, dtype=bool), 1.0, broadcast_to(_row(s), shape_of(s)[:-1] + (n, n)))
    p = prod(others, axis=-1)
    sign = recorded(_det_sign, u, vh)  # +-1, piecewise constant (recorded: vmap, graphs)
    return reshape(sign, shape_of(sign) + (1, 1)) * _mm(u * _row(p), vh)


def _det_sign(u, vh):
    return (np.linalg.det(u) * np.linalg.det(vh)).astype(u.dtype)


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


@primitive(multiple_results=True, sparsity=patterns.Blocks(patterns.matrix_to(0, 0)), batch=("stacked", 2))
def slogdet(a):
    """``(sign, log|det a|)``; a real sign is piecewise constant, a complex one a phase."""
    return np.linalg.slogdet(a)


@slogdet.frule(symbolic_zeros=True)
def slogdet_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    ans = slogdet(a)
    if da is None:
        return ans, (None, None)
    t = _trace_prod(inv(a), da)  # d log det = tr(a⁻¹ da); its real part for complex a
    if not np.iscomplexobj(_plain(a)):
        return ans, (None, t)
    return ans, (ans[0] * (1j * imag(t)), real(t))  # the phase turns by Im tr(a⁻¹ da)


@slogdet.rrule
def slogdet_vjp(a):
    ans = slogdet(a)

    cplx = np.iscomplexobj(_plain(a))

    def pullback(g):
        g_sign, g_logdet = g if cplx else (None, g[1])  # a real sign is piecewise constant
        if g_logdet is None and g_sign is None:
            return (None,)
        c = 0.0 if g_logdet is None else g_logdet
        if g_sign is not None:  # Re(g_s d sign) = Re(i Im(g_s sign) tr(a⁻¹ da))
            c = c + 1j * imag(g_sign * ans[0])
        return (reshape(c, shape_of(c) + (1, 1)) * _mT(inv(a)),)
    return ans, pullback


# -- least squares ------------------------------------------------------------------------------


@primitive(name="lstsq")
def _lstsq(a, b, rcond=None):
    """The minimum-norm least-squares solution ``x`` (``b`` of shape ``(m, k)``)."""
    return np.linalg.lstsq(a, b, rcond=rcond)[0]


@_lstsq.frule(symbolic_zeros=True)
def lstsq_jvp(primals, tangents, rcond=None):
    real_only("lstsq", *primals)
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
    real_only("lstsq", a, b)
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
    for v in (a, b):  # its derivatives take a pseudo-inverse (Dask has none; and no rcond)
        implements(v, np.linalg.pinv, "wnp.linalg.lstsq (and wnp.polyfit)")
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


@primitive(name="vector_norm", sparsity=patterns.Reduction(), batch="axis")
def _vector_norm(x, ord=2.0, axis=None, keepdims=False):
    """``(sum |x|^ord) ^ (1/ord)`` over the axes in ``axis`` (a tuple, or None for all)."""
    if ord == 2:
        sq = np.square(np.abs(x)) if np.iscomplexobj(x) else np.square(x)
        return np.sqrt(np.sum(sq, axis=axis, keepdims=keepdims))
    if ord == 1:
        return np.sum(np.abs(x), axis=axis, keepdims=keepdims)
    return np.sum(np.abs(x) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def _norm_weights(x, ans, ord, axis, keepdims):
    """d norm / d x; 0 where the norm is 0 (the subgradient PyTorch picks), and so are its
    derivatives there, as those of ``abs`` at 0 (the norm of one element). For complex ``x``
    the weights ``w`` are conjugated: ``d norm = Re(sum(w dx))``, and ``g w`` pulls back."""
    w = _real_norm_weights(x, ans, ord, axis, keepdims)
    return conj(w) if np.iscomplexobj(_plain(x)) else w


def _real_norm_weights(x, ans, ord, axis, keepdims):
    ak = reshape(ans, kept_shape(shape_of(x), axis))
    zero = ak == 0
    # no zero norm: no where (asked of NumPy values only: bool() would compute a Dask one)
    plain = not isinstance(zero, Tracer) and not is_foreign(zero) and not np.any(zero)
    safe = ak if plain else where(zero, 1.0, ak)
    if ord == 2:
        return x / safe if plain else where(zero, 0.0, x / safe)
    unit = sign(x) if not np.iscomplexobj(_plain(x)) else _unit(x)
    if ord == 1:
        return unit
    return unit * power(absolute(x) / safe, ord - 1.0)


def _unit(z):
    """``z / |z|`` (0 at 0), differentiable: wnp.sign of a complex value is not (yet)."""
    r = absolute(z)
    zero = r == 0
    return where(zero, 0.0, z / where(zero, 1.0, r))


@_vector_norm.frule(symbolic_zeros=True)
def vector_norm_jvp(primals, tangents, ord=2.0, axis=None, keepdims=False):
    (x,), (dx,) = primals, tangents
    ans = _vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)
    if dx is None:
        return ans, None
    t = sum_tangent(dx * _norm_weights(x, ans, ord, axis, keepdims), ndim_of(x), axis, keepdims)
    return ans, real(t) if np.iscomplexobj(_plain(x)) else t


@_vector_norm.rrule
def vector_norm_vjp(x, ord=2.0, axis=None, keepdims=False):
    ans = _vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)
    xs = shape_of(x)

    def pullback(g):
        return (expand_reduced(g, ans, xs, axis, chunks_of(x))
                * _norm_weights(x, ans, ord, axis, keepdims),)
    return ans, pullback


# -- scipy.linalg: the matrix exponential and square root -------------------------------------


@primitive(sparsity=patterns.Blocks(patterns.square), batch=("stacked", 2))
def expm(a):
    import scipy.linalg  # heavy (about 0.1 s to import): loaded on first use
    return scipy.linalg.expm(a)


def _expm_frechet(a, e):
    """``L(a, e)``, the derivative of ``expm`` at ``a`` in direction ``e``: the top-right
    block of ``expm([[a, e], [0, a]])``.  ``e`` may be a stack of directions."""
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


@primitive(sparsity=patterns.Blocks(patterns.square))
def sqrtm(a):
    """The principal square root, as SciPy's: a real matrix with an eigenvalue on the negative
    real axis has only complex roots, and gets the complex one (as from SciPy and autograd)."""
    import scipy.linalg  # heavy (about 0.1 s to import): loaded on first use
    return _per_matrix(scipy.linalg.sqrtm, (2,), a)


@sqrtm.frule(symbolic_zeros=True)
def sqrtm_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    s = sqrtm(a)
    return s, None if da is None else _solve_sylvester(s, s, da)  # s ds + ds s = da


@sqrtm.rrule
def sqrtm_vjp(a):
    s = sqrtm(a)
    # a real a's cotangent is the real part of the transpose (a complex root: complex ds)
    realify = dtype_of(s).kind == "c" and dtype_of(a).kind != "c"

    def pullback(g):
        ct = _solve_sylvester(_mT(s), _mT(s), g)
        return (real(ct) if realify else ct),
    return s, pullback


PRIMITIVES = {p.name: p for p in (_solve, inv, det, slogdet, _cholesky, _eigh, eigvalsh, _eig,
                                  eigvals, _svd,
                                  svdvals, _qr, pinv, _lstsq, _vector_norm, _solve_triangular,
                                  expm, _solve_sylvester, sqrtm, _solve_banded)}
