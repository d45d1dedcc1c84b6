"""``wengert.scipy.linalg``: the parts of ``scipy.linalg`` with rules.

``solve_triangular``, ``cholesky``, ``cho_factor``/``cho_solve``, ``expm`` (whose
derivative is the Fréchet derivative, computed as a block of ``expm`` of a
``2n x 2n`` matrix), ``solve_sylvester`` and ``sqrtm`` (both derivatives solve another
Sylvester equation), ``solve_banded`` (its gradient in band storage too), plus ``solve``,
``inv``, ``det`` (NumPy's rules).  Other names pass through to SciPy for plain values.

>>> import numpy as np, wengert as wg
>>> a = np.array([[0.0, 1.0], [-1.0, 0.0]])
>>> np.allclose(wg.jvp(expm, (a,), (a,))[1], a @ expm(a))   # d/dt expm(t a) = a expm(a)
True
"""
import scipy.linalg as _sl

from ..core import Tracer as _Tracer, shape_of as _shape
from ..numpy import _passthrough, linalg as _wla
from ..rules import linalg as _rl, matrices as _rm
from ..rules.shape import reshape as _reshape

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "expm", "inv", "solve", "solve_banded",
           "solve_sylvester", "solve_triangular", "sqrtm"]


def _traced(*xs):
    return any(isinstance(x, _Tracer) for x in xs)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """Solve ``tri(a) x = b`` (``trans`` 0/'N', 1/'T' or 2/'C'), reading one triangle of ``a``."""
    if not _traced(a, b):
        return _sl.solve_triangular(a, b, trans=trans, lower=lower,
                                    unit_diagonal=unit_diagonal, overwrite_b=overwrite_b,
                                    check_finite=check_finite)
    if trans in (1, 2, "T", "C"):  # real matrices: the transpose of the other triangle
        a, lower = _rl._mT(a), not lower
    elif trans not in (0, "N"):
        raise ValueError(f"invalid trans {trans!r}")
    vec = len(_shape(b)) == 1
    x = _rl._solve_triangular(a, _reshape(b, _shape(b) + (1,)) if vec else b,
                              lower=bool(lower), unit_diagonal=bool(unit_diagonal))
    return _reshape(x, _shape(b)) if vec else x


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor (upper by default, as SciPy), reading that triangle of ``a``."""
    if not _traced(a):
        return _sl.cholesky(a, lower=lower, overwrite_a=overwrite_a, check_finite=check_finite)
    return _wla.cholesky(a, upper=not lower)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for :func:`cho_solve`.  Traced, the unused triangle of ``c`` is zero
    (SciPy leaves arbitrary values there)."""
    if not _traced(a):
        return _sl.cho_factor(a, lower=lower, overwrite_a=overwrite_a, check_finite=check_finite)
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` given ``cho_factor(a)``: two triangular solves."""
    c, lower = c_and_lower
    if not _traced(c, b):
        return _sl.cho_solve((c, lower), b, overwrite_b=overwrite_b, check_finite=check_finite)
    if lower:  # L L^T x = b
        return solve_triangular(c, solve_triangular(c, b, lower=True), trans=1, lower=True)
    return solve_triangular(c, solve_triangular(c, b, trans=1), lower=False)  # U^T U x = b


def expm(A):
    """The matrix exponential (stacks too); its derivative is the Fréchet derivative."""
    if not _traced(A):
        return _sl.expm(A)
    return _rl.expm(A)


def solve_sylvester(a, b, q):
    """``X`` with ``a X + X b = q``."""
    if not _traced(a, b, q):
        return _sl.solve_sylvester(a, b, q)
    return _rl._solve_sylvester(a, b, q)


_UNSET = object()


def sqrtm(A, disp=_UNSET, blocksize=_UNSET):
    """The principal square root, as SciPy's: complex where a real ``A`` has an eigenvalue on
    the negative real axis (its dtype then depends on the values, as SciPy's does), and
    differentiated there too (a real ``A``'s cotangent is real). The deprecated
    ``disp=False`` error estimate is not offered."""
    if not _traced(A):
        kw = {k: v for k, v in (("disp", disp), ("blocksize", blocksize)) if v is not _UNSET}
        return _sl.sqrtm(A, **kw)
    if disp is False:
        raise NotImplementedError("sqrtm(disp=False) (deprecated in SciPy) on a traced value: "
                                  "compute the error estimate from the result")
    return _rl.sqrtm(A)


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` with ``a`` in band storage ``ab[u + i - j, j] == a[i, j]``.  Traced,
    entries of ``ab`` outside the matrix (SciPy ignores them) get zero derivative."""
    if not _traced(ab, b):
        return _sl.solve_banded(l_and_u, ab, b, overwrite_ab=overwrite_ab,
                                overwrite_b=overwrite_b, check_finite=check_finite)
    l, u = (int(k) for k in l_and_u)
    vec = len(_shape(b)) == 1
    x = _rl._solve_banded(ab, _reshape(b, _shape(b) + (1,)) if vec else b, l=l, u=u)
    return _reshape(x, _shape(x)[:-1]) if vec else x


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a=None, transposed=False):
    """``scipy.linalg.solve``; traced, a general solve (``assume_a`` only picks the method)."""
    if not _traced(a, b):
        kw = {} if assume_a is None else {"assume_a": assume_a}
        return _sl.solve(a, b, lower=lower, overwrite_a=overwrite_a, overwrite_b=overwrite_b,
                         check_finite=check_finite, transposed=transposed, **kw)
    if assume_a in ("sym", "symmetric", "her", "hermitian", "pos", "positive definite"):
        a = _rm._sym_tangent(a, lower=lower)  # scipy reads one triangle for these
    return _wla.solve(_rl._mT(a) if transposed else a, b)


def inv(a, overwrite_a=False, check_finite=True):
    if not _traced(a):
        return _sl.inv(a, overwrite_a=overwrite_a, check_finite=check_finite)
    return _wla.inv(a)


def det(a, overwrite_a=False, check_finite=True):
    if not _traced(a):
        return _sl.det(a, overwrite_a=overwrite_a, check_finite=check_finite)
    return _wla.det(a)


solve_triangular.__wengert_primitive__ = _rl._solve_triangular
expm.__wengert_primitive__ = _rl.expm
solve_sylvester.__wengert_primitive__ = _rl._solve_sylvester
sqrtm.__wengert_primitive__ = _rl.sqrtm
solve_banded.__wengert_primitive__ = _rl._solve_banded


def __getattr__(name):
    attr = getattr(_sl, name)
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(f"scipy.linalg.{name}", attr)
        globals()[name] = attr
    return attr
