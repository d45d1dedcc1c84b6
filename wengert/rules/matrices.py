"""Stacks of matrices ``(..., m, n)`` as wengert operations: the helpers the linear-algebra
rules share (products and transposes over the last two axes, diagonals, triangles).

Matrix products broadcast over the leading axes (a stack of matrices), and axes are
addressed from the end.
"""
import numpy as np

from ..core import ndim_of, shape_of
from ..arrays import dtype_of
from .elementwise import where
from .products import matmul
from .shape import reshape, sum_, transpose

__all__ = ["real_only"]


def real_only(name, *xs):
    """Refuse complex matrices in a rule written for real ones (transposes where conjugate
    transposes belong): ``NotImplementedError`` rather than a wrong derivative."""
    for x in xs:
        if x is not None and np.issubdtype(dtype_of(x), np.complexfloating):
            raise NotImplementedError(
                f"wengert's derivative of {name} holds for real matrices only; of a complex "
                f"one it is not implemented. Write the complex matrix as real blocks "
                f"[[re, -im], [im, re]], or declare a rule (docs/rules.md).")


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
