"""Linear solves on stacks of matrices: solve, inv, cholesky, pinv, and scipy.linalg's
triangular, banded and Sylvester solves.

``cholesky`` and ``solve_triangular`` read one triangle of ``a`` (for cholesky the lower one
by default, as LAPACK does): the derivative is that of the function computed, and the other
triangle gets a zero derivative (rules/linalg.py says why that is the right one).
"""
import numpy as np

from ..core import ndim_of, primitive, shape_of
from ..arrays import dtype_of
from . import patterns
from .indexing import getitem_basic, scatter_basic
from .joining import stack
from .matrices import (_col, _eye, _mm, _mT, _sym_cotangent, _sym_tangent, _tril, _triu_mask,
                       real_only)
from .shape import sum_

__all__ = ["cholesky_jvp", "cholesky_vjp", "inv", "inv_jvp", "inv_vjp", "pinv", "pinv_jvp",
           "pinv_vjp", "solve_banded_jvp", "solve_banded_vjp", "solve_jvp", "solve_sylvester_jvp",
           "solve_sylvester_vjp", "solve_triangular_jvp", "solve_triangular_vjp", "solve_vjp"]


# -- solve, inv -------------------------------------------------------------------------


# sparsity: dense within each matrix (block), batched over the leading axes; wg.vmap:
# stacked matrices (solve's right-hand side is a stack of matrices too)
@primitive(name="solve", sparsity=patterns.Solve(), batch=("stacked", 2, 2))
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


@primitive(sparsity=patterns.Blocks(patterns.square), batch=("stacked", 2))
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


# -- cholesky ------------------------------------------------------------------------------


@primitive(name="cholesky", sparsity=patterns.Blocks(patterns.square), batch=("stacked", 2))
def _cholesky(a, upper=False):
    return np.linalg.cholesky(a, upper=upper) if upper else np.linalg.cholesky(a)


def _phi(x):
    """Lower triangle with the diagonal halved."""
    n = shape_of(x)[-1]
    return x * (np.tri(n, n, -1, dtype=dtype_of(x)) + 0.5 * _eye(n, x))


@_cholesky.frule(symbolic_zeros=True)
def cholesky_jvp(primals, tangents, upper=False):
    real_only("cholesky", primals[0])
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
    real_only("cholesky", a)
    ans = _cholesky(a, upper=upper)
    lo = _mT(ans) if upper else ans

    def pullback(g):
        gl = _mT(g) if upper else g
        p = _phi(_mm(_mT(lo), gl))
        z = _solve(_mT(lo), p)                # L^-T P
        gs = _mT(_solve(_mT(lo), _mT(z)))     # L^-T P L^-1
        return (_sym_cotangent(gs, lower=not upper),)
    return ans, pullback


# -- pseudo-inverse -----------------------------------------------------------------------------


@primitive(sparsity=patterns.Blocks(patterns.square), batch=("stacked", 2))
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


# -- scipy.linalg: triangular solves ---------------------------------------------------------------


@primitive(name="solve_triangular", sparsity=patterns.Solve())
def _solve_triangular(a, b, lower=False, unit_diagonal=False):
    """``tri(a) x = b`` reading one triangle of ``a`` (``b`` of shape ``(n, k)``)."""
    import scipy.linalg  # heavy (about 0.1 s to import): loaded on first use
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


# -- scipy.linalg: Sylvester equations, banded solves ----------------------------------------------


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


@primitive(name="solve_sylvester", batch=("stacked", 2, 2, 2))
def _solve_sylvester(a, b, q):
    """``a x + x b = q`` (stacks broadcast over leading axes)."""
    import scipy.linalg  # heavy (about 0.1 s to import): loaded on first use
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


@primitive(name="solve_banded", nargs=2)
def _solve_banded(ab, b, l, u):
    """``a x = b`` with ``a`` in LAPACK band storage ``ab[u + i - j, j] == a[i, j]``
    (``b`` of shape ``(..., m, k)``)."""
    import scipy.linalg  # heavy (about 0.1 s to import): loaded on first use
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
