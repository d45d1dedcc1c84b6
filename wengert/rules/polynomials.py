"""Polynomials (NumPy's ``poly*`` functions): polyval by Horner's rule, vander, polyfit by the
``lstsq`` rule, coefficient arithmetic (polyadd ... polyint), and roots, poly and polydiv.

Each follows NumPy's algorithm operation by operation, so the values are NumPy's to the bit.
Each public function returns exactly what NumPy returns when no argument is traced.
"""
import warnings

import numpy as np

from ..arrays import is_foreign, underneath
from ..core import Tracer, ndim_of, primitive, shape_of
from .complex import real
from .conversion import astype
from .convolution import convolve
from .creation import asarray
from .decompositions import eigvals
from .elementwise import sqrt, where
from .indexing import _has_tracer
from .joining import concatenate, stack
from .linalg import lstsq
from .nondiff import concrete, recorded
from .products import _plain, _swap_last, _traced, matmul, outer
from .rearranging import flip
from .reductions import cumprod, sum as sum_all
from .reshaping import atleast_1d
from .shape import broadcast_to, reshape, sum_, transpose
from .solvers import inv

__all__ = ["polyval", "vander", "polyfit", "polyadd", "polysub", "polymul", "polyder",
           "polyint", "roots", "poly", "polydiv"]


def polyval(p, x):
    """``np.polyval``: Horner's rule as NumPy runs it, differentiable in ``p`` and ``x``."""
    if not isinstance(p, Tracer) and not isinstance(x, Tracer) and not (
            isinstance(p, (list, tuple)) and any(isinstance(c, Tracer) for c in p)):
        return np.polyval(p, x)
    if isinstance(p, np.poly1d) or isinstance(x, np.poly1d):
        raise NotImplementedError("wnp.polyval with a poly1d on traced values: pass its "
                                  "coefficients (p.coeffs)")
    p = asarray(p) if isinstance(p, (list, tuple)) else p
    y = np.zeros(shape_of(x), np.result_type(_plain(x)))  # the tracer's own shape (wg.vmap)
    for i in range(shape_of(p)[0]):
        y = y * x + p[i]
    return y


def vander(x, N=None, increasing=False):
    """``np.vander``: the powers by repeated multiplication, as NumPy's
    ``multiply.accumulate`` forms them (not ``x ** k``), so the values are NumPy's."""
    if not isinstance(x, Tracer):
        return np.vander(x, N, increasing)
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
    if not full and not is_foreign(underneath(rank)) and rank != order:  # (CuPy, Dask: not read)
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
    return [atleast_1d(p) for p in ps]


def _poly_aligned(a1, a2):
    """The two coefficient vectors, the shorter padded with leading zeros, as NumPy does."""
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


# -- roots, poly, polydiv ----------------------------------------------------------------------
# NumPy's algorithms operation by operation, so the values are NumPy's to the bit.  What NumPy
# decides on values (zeros to strip, a real spectrum, a remainder's negligible leading
# entries) is decided on the plain values with ``concrete``: a compiled graph guards it, so
# other inputs re-trace.
def _poly_vector_traced(*ps):
    """Traced, also as a list holding traced entries (which NumPy's dispatch cannot see)."""
    return _has_tracer(ps)


def _poly_vectors(*ps):
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
    w = eigvals(a)
    if not np.iscomplexobj(_plain(a)) and concrete(_real_spectrum, w, name="real_spectrum"):
        w = real(w)
    return w


# wg.vmap: the three arrays have one shape: all batched alike
@primitive(name="value_of", batch="axis")
def _value_of(x, y, undefined):
    """``x``'s value with ``y``'s derivative, NaN where ``undefined`` holds: ``x`` is the value
    NumPy computes, ``y`` a formula equal to it up to rounding that differentiates."""
    return np.array(x, copy=True)


@_value_of.frule(symbolic_zeros=True)
def _value_of_jvp(primals, tangents):
    dy, undefined = tangents[1], primals[2]
    if dy is not None and undefined.any():
        dy = where(undefined, np.nan, dy)
    return _value_of(*primals), dy


@_value_of.rrule
def _value_of_vjp(x, y, undefined):

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

