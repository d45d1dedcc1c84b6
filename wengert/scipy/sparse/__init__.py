"""``wengert.scipy.sparse``: a sparse matrix whose nonzeros are traced, for the differentiable
solvers of :mod:`wengert.scipy.sparse.linalg`.

A ``scipy.sparse`` array holds plain numbers only, so a matrix being differentiated in its
nonzeros is a :class:`SparseArray`: SciPy's structure (rows and columns, plain) with the values
``data`` traced.  ``csr_array((data, indices, indptr), shape)``, ``coo_array((data, (row,
col)), shape)`` and ``with_data(A, data)`` make one when ``data`` is traced and SciPy's own
array otherwise.  ``A @ x`` is a segment sum (``bincount`` with weights), differentiable in
``data`` and ``x``.  (On the floor built on transforms, with the solvers that use it.)

>>> import numpy as np, scipy.sparse as sp, wengert as wg, wengert.numpy as wnp
>>> from wengert.scipy import sparse
>>> A = sp.csr_array(np.array([[2.0, 1.0], [0.0, 3.0]]))
>>> wg.grad(lambda d: wnp.sum(sparse.with_data(A, d) @ np.ones(2)))(A.data)
array([1., 1., 1.])
"""
from __future__ import annotations

import importlib

import numpy as np
import scipy.sparse as _sp

from ... import numpy as wnp
from ...core import Tracer, ndim_of, plain, shape_of

__all__ = ["SparseArray", "csr_array", "csr_matrix", "coo_array", "csc_array", "with_data",
           "as_sparse", "is_sparse", "linalg"]


class SparseArray:
    """SciPy's sparsity pattern (``row``, ``col``, plain) with values ``data`` (traced)."""

    def __init__(self, data, row, col, shape):
        self.data, self.row, self.col = data, np.asarray(row), np.asarray(col)
        self.shape = tuple(int(s) for s in shape)
        self.ndim = 2

    def __repr__(self):
        return f"<wengert SparseArray {self.shape[0]}x{self.shape[1]}, {self.row.size} stored>"

    @property
    def nnz(self):
        return int(self.row.size)

    @property
    def dtype(self):
        return np.result_type(plain(self.data))

    @property
    def T(self):
        return SparseArray(self.data, self.col, self.row, self.shape[::-1])

    def transpose(self):
        return self.T

    def to_scipy(self):
        """SciPy's CSR array of the plain values."""
        return _sp.coo_array((np.asarray(plain(self.data), dtype=float), (self.row, self.col)),
                             shape=self.shape).tocsr()

    def toarray(self):
        flat = self.row * self.shape[1] + self.col
        size = self.shape[0] * self.shape[1]
        return wnp.reshape(wnp.bincount(flat, weights=self.data, minlength=size), self.shape)

    def __matmul__(self, x):
        if ndim_of(x) == 2:
            return wnp.stack([self @ x[:, j] for j in range(shape_of(x)[1])], axis=1)
        w = self.data * x[self.col]
        if not (_batched(w)):
            return wnp.bincount(self.row, weights=w, minlength=self.shape[0])
        # under wg.vmap: bincount takes one vector, so sum rows by a cumulative sum instead
        order = np.argsort(self.row, kind="stable")
        ends = np.searchsorted(self.row[order], np.arange(self.shape[0] + 1))
        c = wnp.concatenate([wnp.zeros(1), wnp.cumsum(w[order])])
        return c[ends[1:]] - c[ends[:-1]]

    def dot(self, x):
        return self @ x


def _batched(x):
    """Whether a trace under ``x`` holds a batch (``wg.vmap``)."""
    while isinstance(x, Tracer):
        if x._trace.batched:
            return True
        x = x.value
    return False


def is_sparse(a):
    return isinstance(a, SparseArray) or _sp.issparse(a)


def as_sparse(a):
    """A ``SparseArray`` of a SciPy sparse array (its values plain) or of itself."""
    if isinstance(a, SparseArray):
        return a
    coo = _sp.coo_array(a)
    return SparseArray(coo.data, coo.row, coo.col, coo.shape)


def with_data(a, data):
    """SciPy's sparse array ``a`` with its stored values replaced by ``data`` (in ``a.data``'s
    order: CSR/CSC order for those formats), traced or not."""
    if not isinstance(data, Tracer):
        out = a.copy()
        out.data = np.asarray(data, dtype=float)
        return out
    fmt = a.format
    if fmt in ("csr", "csc"):
        major = np.repeat(np.arange(len(a.indptr) - 1), np.diff(a.indptr))
        row, col = (major, a.indices) if fmt == "csr" else (a.indices, major)
    elif fmt == "coo":
        row, col = a.row, a.col
    else:
        raise TypeError(f"with_data: give a CSR, CSC or COO array, not {fmt}")
    return SparseArray(data, row, col, a.shape)


def _make(fmt, arg1, shape):
    if isinstance(arg1, tuple) and len(arg1) in (2, 3) and isinstance(arg1[0], Tracer):
        data = arg1[0]
        if len(arg1) == 2:
            row, col = arg1[1]
            return SparseArray(data, row, col, shape)
        indices, indptr = np.asarray(arg1[1]), np.asarray(arg1[2])
        major = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        if fmt.startswith("csc"):
            return SparseArray(data, indices, major, shape)
        return SparseArray(data, major, indices, shape)
    return getattr(_sp, fmt)(arg1, shape=shape)


def csr_array(arg1, shape=None):
    """``scipy.sparse.csr_array``; a ``SparseArray`` when the data is traced."""
    return _make("csr_array", arg1, shape)


def csr_matrix(arg1, shape=None):
    return _make("csr_matrix", arg1, shape)


def csc_array(arg1, shape=None):
    return _make("csc_array", arg1, shape)


def coo_array(arg1, shape=None):
    return _make("coo_array", arg1, shape)


def __getattr__(name):
    if name == "linalg":
        return importlib.import_module("wengert.scipy.sparse.linalg")
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_sp, name)
