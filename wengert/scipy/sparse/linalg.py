"""``wengert.scipy.sparse.linalg``: SciPy's linear solvers, differentiable in the right-hand side
and the matrix.

``x = A⁻¹ b`` has ``dx = A⁻¹ (db - dA x)`` and the pullback ``b̄ = A⁻ᵀ x̄``, ``Ā = -b̄ xᵀ``
(at the stored entries for a sparse ``A``): the implicit function theorem on ``A x - b = 0``,
whose tangent solve is the same SciPy solver on ``A`` (pushforward) or ``Aᵀ`` (pullback) — the
transposed solve.  That solve is itself this module's differentiable solve, so second
derivatives go through it too.  ``A`` may be a dense array, a ``scipy.sparse`` array (plain),
a :class:`wengert.scipy.sparse.SparseArray` (its stored values traced), or a
``LinearOperator`` whose ``matvec`` is a function written with ``wengert.numpy`` (closing over
traced values); its transpose is then the ``vjp`` of ``matvec``, unless ``rmatvec`` is given.

>>> import numpy as np, wengert as wg
>>> from wengert.scipy.sparse import linalg
>>> A = np.array([[4.0, 1.0], [1.0, 3.0]])
>>> g = wg.grad(lambda b: linalg.cg(A, b, rtol=1e-12)[0].sum())(np.array([1.0, 2.0]))
>>> np.allclose(g, np.linalg.solve(A.T, np.ones(2)))
True
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as _sp
import scipy.sparse.linalg as _sla

from ... import numpy as wnp
from ...core import Primitive, Tracer, ndim_of, plain, shape_of
from ...implicit_diff import Captured, Problem, running, solve_implicit
from ...transforms import vjp
from .. import linalg as _wsl
from .._solving import warn_failure
from . import SparseArray, as_sparse

__all__ = ["cg", "gmres", "bicgstab", "minres", "spsolve", "splu", "expm_multiply",
           "LinearOperator", "aslinearoperator"]

_Operator = _sla.LinearOperator
aslinearoperator = _sla.aslinearoperator


def LinearOperator(shape, matvec, rmatvec=None, matmat=None, dtype=float, rmatmat=None):
    """SciPy's ``LinearOperator`` with ``dtype`` float by default: SciPy would otherwise call
    ``matvec`` on a probe to find it, converting a traced result."""
    return _sla.LinearOperator(shape, matvec, rmatvec=rmatvec, matmat=matmat, dtype=dtype,
                               rmatmat=rmatmat)


# -- the matrix, as SciPy sees it and as wengert applies it ------------------------------------------
def _matvec_fn(op):
    fn = getattr(op, "_CustomLinearOperator__matvec_impl", None)
    if fn is not None:
        return fn
    if hasattr(op, "A"):  # aslinearoperator of a matrix
        return lambda x: _apply(op.A, x, False)
    return op._matvec


def _rmatvec_fn(op):
    fn = getattr(op, "_CustomLinearOperator__rmatvec_impl", None)
    if fn is not None:
        return fn
    if hasattr(op, "A"):
        return lambda x: _apply(op.A, x, True)
    matvec = _matvec_fn(op)
    x0 = np.zeros(op.shape[1])
    return lambda y: vjp(matvec, x0)[1](y)[0]   # matvec is linear: its pullback anywhere


def _apply(a, x, transpose):
    """``A x`` (or ``Aᵀ x``) with wengert operations."""
    if isinstance(a, _Operator):
        fn = _rmatvec_fn(a) if transpose else _matvec_fn(a)
        if ndim_of(x) == 2:
            return wnp.stack([fn(x[:, j]) for j in range(shape_of(x)[1])], axis=1)
        return fn(x)
    if isinstance(a, SparseArray) or _sp.issparse(a):
        s = as_sparse(a)
        return (s.T if transpose else s) @ x
    return (wnp.transpose(a) if transpose else a) @ x


def _scipy_matrix(a, transpose):
    """What SciPy's solvers take for ``A`` (or ``Aᵀ``), plain."""
    if isinstance(a, _Operator):
        if not transpose:
            return a
        return _Operator(a.shape[::-1], matvec=_rmatvec_fn(a), rmatvec=_matvec_fn(a),
                              dtype=float)
    if isinstance(a, SparseArray):
        a = a.to_scipy()
    if _sp.issparse(a):
        return (a.T if transpose else a).tocsr()
    a = np.asarray(a, dtype=float)
    return a.T if transpose else a


# -- one linear solve as an implicit problem ----------------------------------------------------------
class _Linear(Problem):
    name = "linear solve"

    def __init__(self, method, a, b, x0, kwargs, transpose=False, lu=None):
        super().__init__(Captured((a, b, x0)))
        self.method, self.kwargs, self.transpose, self.lu = method, kwargs, transpose, lu
        self.shape = shape_of(b)

    def solve(self, leaves):
        return running(self.method, self._solve, leaves)

    def _solve(self, leaves):
        a, b, x0 = self.captured.build([plain(v) for v in leaves])
        b = np.asarray(b, dtype=float)
        m = self.method
        if m == "splu":
            lu = self.lu.factor_for(a)
            x, info = lu.solve(b, trans="T" if self.transpose else "N"), 0
        elif m == "spsolve":
            mat = _scipy_matrix(a, self.transpose)
            mat = _sp.csc_array(mat) if not _sp.issparse(mat) else mat.tocsc()
            x, info = _sla.spsolve(mat, b, **self.kwargs), 0
            x = np.asarray(x.toarray() if _sp.issparse(x) else x).reshape(b.shape)
        else:
            fn = getattr(_sla, m)
            x, info = fn(_scipy_matrix(a, self.transpose), b, x0=x0, **self.kwargs)
            if info != 0:
                warn_failure(m, f"info={info}")
        self.result = (x, info)
        return np.ravel(np.asarray(x, dtype=float)), np.zeros(0)

    def residual(self, z, active, leaves):
        a, b, _ = self.captured.build(leaves)
        x = wnp.reshape(z, self.shape)
        return wnp.reshape(_apply(a, x, self.transpose) - b, (-1,))

    def tangent_solve(self, z, active, leaves, rhs, transpose):
        a = self.captured.build(leaves)[0]
        t = self.transpose != transpose
        r = wnp.reshape(rhs, self.shape + shape_of(rhs)[1:])
        if len(self.shape) == 2 and ndim_of(rhs) == 2:   # spsolve with a matrix b
            cols = [self._again(a, r[..., j], t) for j in range(shape_of(rhs)[1])]
            return wnp.stack([wnp.reshape(c, (-1,)) for c in cols], axis=1)
        if ndim_of(r) == 1 or self.method in ("spsolve", "splu"):
            return wnp.reshape(self._again(a, r, t), shape_of(rhs))
        cols = [self._again(a, r[:, j], t) for j in range(shape_of(r)[1])]
        return wnp.stack(cols, axis=1)

    def _again(self, a, rhs, transpose):
        kwargs = {k: v for k, v in self.kwargs.items() if k != "callback"}
        return _solve(self.method, a, rhs, None, kwargs, transpose, self.lu)[0]


def _solve(method, a, b, x0, kwargs, transpose=False, lu=None):
    """``(x, info)``: ``x`` traced when ``a``, ``b`` or ``x0`` hold traced values."""
    problem = _Linear(method, a, b, x0, kwargs, transpose, lu)
    z, _ = solve_implicit(problem)
    if not problem.captured.leaves:
        return problem.result
    return wnp.reshape(z, problem.shape), problem.result[1]


def _iterative(name):
    def solver(A, b, x0=None, **kwargs):
        return _solve(name, A, b, x0, kwargs)
    solver.__name__ = solver.__qualname__ = name
    solver.__doc__ = (f"``scipy.sparse.linalg.{name}(A, b, x0=None, **kwargs) -> (x, info)``; "
                      "``x`` differentiable in ``b`` and ``A`` by the transposed solve (the "
                      "tangent solves use the same tolerances: set ``rtol`` tight).")
    return solver


cg = _iterative("cg")
gmres = _iterative("gmres")
bicgstab = _iterative("bicgstab")
minres = _iterative("minres")


def spsolve(A, b, permc_spec=None, use_umfpack=True):
    """``scipy.sparse.linalg.spsolve``; differentiable in ``b`` and ``A``'s values."""
    kwargs = {"permc_spec": permc_spec, "use_umfpack": use_umfpack}
    return _solve("spsolve", A, b, None, kwargs)[0]


class _Factor:
    """``splu`` of ``A``'s plain values, refactorised when a solve sees other values."""

    def __init__(self, a, kwargs):
        self.kwargs = kwargs
        self.values = None
        self.lu = None
        self.factor_for(a)

    def factor_for(self, a):
        mat = _scipy_matrix(a, False)
        mat = _sp.csc_array(mat) if not _sp.issparse(mat) else _sp.csc_array(mat)
        vals = (mat.data, mat.indices, mat.indptr)
        if self.values is None or not all(np.array_equal(u, v)
                                          for u, v in zip(vals, self.values)):
            self.lu = _sla.splu(mat, **self.kwargs)
            self.values = tuple(np.copy(v) for v in vals)
        return self.lu


class SuperLU:
    """``splu(A)`` of a traced ``A``: ``solve(rhs, trans)`` differentiable in ``rhs`` and
    ``A``; SciPy's factor (``L``, ``U``, ``perm_r``, ...) read through."""

    def __init__(self, a, factor):
        self._a, self._factor = a, factor

    def solve(self, rhs, trans="N"):
        if trans not in ("N", "T"):
            raise ValueError("solve: trans must be 'N' or 'T' (real matrices)")
        return _solve("splu", self._a, rhs, None, {}, trans == "T", self._factor)[0]

    def __getattr__(self, name):
        return getattr(self._factor.lu, name)


def splu(A, permc_spec=None, diag_pivot_thresh=None, relax=None, panel_size=None,
         options=None):
    """``scipy.sparse.linalg.splu``; its ``.solve`` is differentiable in ``A`` and ``rhs``."""
    kwargs = {k: v for k, v in dict(permc_spec=permc_spec, diag_pivot_thresh=diag_pivot_thresh,
                                    relax=relax, panel_size=panel_size, options=options).items()
              if v is not None}
    factor = _Factor(A, kwargs)
    return SuperLU(A, factor)


# -- expm_multiply ------------------------------------------------------------------------------------
def expm_multiply(A, B, start=None, stop=None, num=None, endpoint=None, traceA=None):
    """``scipy.sparse.linalg.expm_multiply``: ``expm(A) @ B``, differentiable in ``B`` (linear:
    the pullback is ``expm(Aᵀ) @ ȳ``) and in a dense or ``SparseArray`` ``A`` (the Fréchet
    derivative of ``expm``, wengert.scipy.linalg's).  The time grid (``start``...) is SciPy's,
    for a plain ``A``."""
    from_a = isinstance(A, Tracer) or isinstance(A, SparseArray)
    if from_a:
        if start is not None or num is not None:
            raise NotImplementedError("expm_multiply of a traced A on a time grid: call it "
                                      "once per time t with t * A")
        dense = A.toarray() if isinstance(A, SparseArray) else A
        return _wsl.expm(dense) @ B
    if not isinstance(B, Tracer):
        return _sla.expm_multiply(A, B, start=start, stop=stop, num=num, endpoint=endpoint,
                                  traceA=traceA)
    kw = dict(start=start, stop=stop, num=num, endpoint=endpoint, traceA=traceA)
    return _expm_b(B, a=A, kw=kw)


def _expm_b_impl(b, a, kw):
    return _sla.expm_multiply(a, b, **kw)


_expm_b = Primitive(_expm_b_impl, name="expm_multiply", linear=True)


@_expm_b.batching
def expm_multiply_batch(args, batched, a, kw):
    """``wg.vmap``: the examples become columns of one ``expm_multiply``."""
    (b,), (bat,) = args, batched
    if not bat:
        return wnp.broadcast_to(_expm_b(b, a=a, kw=kw), (1,) + shape_of(b))
    s = shape_of(b)
    cols = wnp.reshape(wnp.moveaxis(b, 0, -1), (s[1], -1))
    out = _expm_b(cols, a=a, kw=kw)
    return wnp.moveaxis(wnp.reshape(out, s[1:] + s[:1]), -1, 0)


@_expm_b.frule(symbolic_zeros=True)
def expm_multiply_jvp(primals, tangents, a, kw):
    (b,), (db,) = primals, tangents
    return _expm_b(b, a=a, kw=kw), None if db is None else _expm_b(db, a=a, kw=kw)


@_expm_b.rrule
def expm_multiply_vjp(b, a, kw):
    if kw.get("start") is not None or kw.get("num") is not None:
        raise NotImplementedError("expm_multiply on a time grid has no reverse rule: call it "
                                  "once per time")
    at = a.T if _sp.issparse(a) else np.transpose(a)
    return _expm_b(b, a=a, kw=kw), lambda g: (_expm_b(g, a=at, kw=kw),)


for _f in (cg, gmres, bicgstab, minres, spsolve, splu, expm_multiply):
    _f._wengert_solver = True  # wengert.coverage: SciPy's solver, differentiated
