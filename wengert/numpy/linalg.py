"""``wengert.numpy.linalg``: ``numpy.linalg``, differentiable.

On plain values every function returns what NumPy returns.  On traced values the
rules of :mod:`wengert.rules.linalg` apply, at the matrix level, for stacks of
matrices too.  ``numpy.linalg.solve(t, b)`` on a traced ``t`` comes here (NEP 18).

>>> import numpy as np, wengert as wg
>>> a = np.array([[2.0, 1.0], [0.5, 3.0]])
>>> g = wg.grad(lambda a: slogdet(a)[1])(a)
>>> np.allclose(g, np.linalg.inv(a).T)
True
"""
import numpy as _np
from numpy.linalg import LinAlgError  # noqa: F401

from ..core import plain as _plain, Tracer as _Tracer, shape_of as _shape
from ..rules import linalg as _rl
from ..rules.arithmetic import absolute as _abs
from ..rules.shape import (broadcast_to as _broadcast_to, reshape as _reshape,
                           sum_ as _sum, transpose as _transpose)
from .. import numpy as _wnp  # the namespace importing this module: read at call time
from . import _passthrough

__all__ = ["cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "inv", "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank",
           "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve",
           "svd", "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot",
           "vector_norm"]

det = _rl.det
inv = _rl.inv
eigvalsh = _rl.eigvalsh
svdvals = _rl.svdvals

try:
    from numpy.linalg._linalg import (EigResult as _EigResult, EighResult as _EighResult,
                                      QRResult as _QRResult,
                                      SlogdetResult as _SlogdetResult, SVDResult as _SVDResult)
except ImportError:  # pragma: no cover - older NumPy
    _EigResult = _EighResult = _QRResult = _SlogdetResult = _SVDResult = None
try:
    from numpy.linalg._linalg import _multi_dot_matrix_chain_order
except ImportError:  # pragma: no cover - older NumPy
    _multi_dot_matrix_chain_order = None


def _traced(*xs):
    for x in xs:
        if isinstance(x, _Tracer):
            return True
        if isinstance(x, (list, tuple)) and _traced(*x):
            return True
    return False


def _named(kind, values):
    return kind(*values) if kind is not None else tuple(values)


def solve(a, b):
    """Solve ``a x = b``; ``b`` is a vector when 1-D, else a stack of matrices."""
    if not _traced(a, b):
        return _np.linalg.solve(a, b)
    sa, sb = _shape(a), _shape(b)
    if len(sb) == 1:
        batch = sa[:-2]
        b2 = _broadcast_to(_reshape(b, sb + (1,)), batch + sb + (1,))
        return _reshape(_rl._solve(a, b2), batch + sb)
    batch = _np.broadcast_shapes(sa[:-2], sb[:-2])
    if sa[:-2] != batch:
        a = _broadcast_to(a, batch + sa[-2:])
    if sb[:-2] != batch:
        b = _broadcast_to(b, batch + sb[-2:])
    return _rl._solve(a, b)


def slogdet(a):
    """``(sign, logabsdet)``: only ``logabsdet`` is differentiated."""
    if not _traced(a):
        return _np.linalg.slogdet(a)
    return _named(_SlogdetResult, _rl.slogdet(a))


def cholesky(a, /, *, upper=False):
    """The Cholesky factor; reads the lower (``upper=True``: upper) triangle of ``a``."""
    if not _traced(a):
        return _np.linalg.cholesky(a, upper=upper) if upper else _np.linalg.cholesky(a)
    return _rl._cholesky(a, upper=bool(upper))


def eigh(a, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of a symmetric matrix read from one triangle.

    Derivatives hold for distinct eigenvalues; equal ones give inf/nan.
    """
    if not _traced(a):
        return _np.linalg.eigh(a, UPLO=UPLO)
    return _named(_EighResult, _rl._eigh(a, UPLO=UPLO))


def eig(a):
    """Eigenvalues and eigenvectors of a general square matrix.

    Traced, both are complex (also for a real spectrum).  Derivatives hold for distinct
    eigenvalues; eigenvectors keep unit norm but their phase is arbitrary, so only
    phase-independent functions of them (``abs(v)``, ``v @ diag(c) @ inv(v)``) have
    meaningful derivatives.
    """
    if not _traced(a):
        return _np.linalg.eig(a)
    return _named(_EigResult, _rl._eig(a))


def eigvals(a):
    """Eigenvalues of a general square matrix (complex when traced)."""
    if not _traced(a):
        return _np.linalg.eigvals(a)
    return _rl.eigvals(a)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition.

    Traced, ``full_matrices`` must be False for a non-square matrix (the extra
    columns are not unique); derivatives hold for distinct nonzero singular values.
    """
    if not _traced(a):
        return _np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv,
                              hermitian=hermitian)
    if not compute_uv:
        return _rl.svdvals(a)
    m, n = _shape(a)[-2:]
    if full_matrices and m != n:
        raise NotImplementedError(
            "svd(full_matrices=True) of a non-square traced matrix has no derivative (the "
            "completed bases are not unique); pass full_matrices=False or compute_uv=False")
    return _named(_SVDResult, _rl._svd(a))


def qr(a, mode="reduced"):
    """QR decomposition (``mode`` 'reduced', 'r', or 'complete' when ``m <= n``)."""
    if not _traced(a):
        return _np.linalg.qr(a, mode=mode)
    m, n = _shape(a)[-2:]
    if mode not in ("reduced", "r", "complete") or (mode == "complete" and m > n):
        raise NotImplementedError(f"qr(mode={mode!r}) of a traced {m}x{n} matrix has no "
                                  "derivative rule; use mode='reduced'")
    if m >= n:
        q, r = _rl._qr(a)
    else:  # wide: a = [x | y] = q [r_x | q^T y], with q from the square block x
        q, _ = _rl._qr(_left_block(a, m))
        r = _rl._mm(_rl._mT(q), a) * _np.triu(_np.ones((m, n), dtype=a.dtype))
    return r if mode == "r" else _named(_QRResult, (q, r))


def _left_block(a, m):
    """``a[..., :, :m]`` as a product with a selection matrix."""
    n = _shape(a)[-1]
    sel = _np.eye(n, m, dtype=a.dtype)
    return _rl._mm(a, sel)


def pinv(a, rcond=None, hermitian=False, **kwargs):
    """The Moore-Penrose pseudo-inverse; derivative valid where the rank is constant."""
    if not _traced(a):
        if rcond is not None:
            kwargs["rcond"] = rcond
        return _np.linalg.pinv(a, hermitian=hermitian, **kwargs)
    if kwargs:
        raise NotImplementedError("pinv(rtol=...) of a traced value; use rcond")
    return _rl.pinv(a, rcond=rcond, hermitian=hermitian)


def lstsq(a, b, rcond=None):
    """``(x, residuals, rank, s)``; ``x``, ``residuals`` and ``s`` are differentiated."""
    if not _traced(a, b):
        return _np.linalg.lstsq(a, b, rcond=rcond)
    return _rl.lstsq(a, b, rcond=rcond)



def matrix_power(a, n):
    """``a`` to the integer power ``n`` by repeated squaring (``inv`` for ``n < 0``)."""
    if not _traced(a):
        return _np.linalg.matrix_power(a, n)
    n = int(n)
    if n == 0:
        s = _shape(a)
        return _np.broadcast_to(_np.eye(s[-1], dtype=a.dtype), s).copy()
    if n < 0:
        a, n = inv(a), -n
    result = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else _rl._mm(result, base)
        n >>= 1
        if n:
            base = _rl._mm(base, base)
    return result


def multi_dot(arrays, *, out=None):
    """The product of several matrices, in the cheapest order (as NumPy chooses it)."""
    arrays = list(arrays)
    if not _traced(arrays):
        return _np.linalg.multi_dot(arrays, out=out)
    if out is not None:
        raise NotImplementedError("multi_dot(out=...) of traced values")
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    first_1d, last_1d = len(_shape(arrays[0])) == 1, len(_shape(arrays[-1])) == 1
    if first_1d:
        arrays[0] = _reshape(arrays[0], (1,) + _shape(arrays[0]))
    if last_1d:
        arrays[-1] = _reshape(arrays[-1], _shape(arrays[-1]) + (1,))
    order = _multi_dot_matrix_chain_order(arrays) \
        if _multi_dot_matrix_chain_order is not None and len(arrays) > 2 else None

    def product(i, j):
        if i == j:
            return arrays[i]
        if order is None:
            acc = arrays[i]
            for k in range(i + 1, j + 1):
                acc = _rl._mm(acc, arrays[k])
            return acc
        k = order[i, j]
        return _rl._mm(product(i, k), product(k + 1, j))

    ans = product(0, len(arrays) - 1)
    s = _shape(ans)
    if first_1d and last_1d:
        return _reshape(ans, ())
    if first_1d:
        return _reshape(ans, s[1:])
    if last_1d:
        return _reshape(ans, s[:-1])
    return ans


# -- norms ---------------------------------------------------------------------------------------


def _reduce(name, x, axis, keepdims):
    fn = getattr(_wnp, name)
    return fn(x, axis=axis, keepdims=keepdims)


def _vector(x, ord, axis, keepdims):
    """A vector norm over ``axis`` (a tuple)."""
    if ord is None or ord == 2:
        return _rl._vector_norm(x, ord=2, axis=axis, keepdims=keepdims)
    if ord == _np.inf:
        return _reduce("max", _abs(x), axis, keepdims)
    if ord == -_np.inf:
        return _reduce("min", _abs(x), axis, keepdims)
    if ord == 0:  # the number of nonzeros: piecewise constant
        return _np.sum(_plain(x) != 0, axis=axis, keepdims=keepdims).astype(x.dtype)
    if isinstance(ord, str):
        raise ValueError(f"Invalid norm order '{ord}' for vectors")
    return _rl._vector_norm(x, ord=float(ord), axis=axis, keepdims=keepdims)


def _matrix(x, ord, axis, keepdims):
    """A matrix norm over the two axes in ``axis``."""
    nd = len(_shape(x))
    r, c = (a % nd for a in axis)
    if r == c:
        raise ValueError("Duplicate axes given.")
    if ord is None or ord == "fro":
        return _rl._vector_norm(x, ord=2, axis=(r, c), keepdims=keepdims)
    if ord in (1, -1, _np.inf, -_np.inf):
        inner, outer = (r, c) if ord in (1, -1) else (c, r)
        sums = _sum(_abs(x), axis=inner, keepdims=True)
        res = _reduce("max" if ord > 0 else "min", sums, outer, True)
    elif ord in (2, -2, "nuc"):
        rest = tuple(i for i in range(nd) if i not in (r, c))
        s = _rl.svdvals(_transpose(x, rest + (r, c)))
        if ord == "nuc":
            res = _sum(s, axis=-1)
        else:
            k = _shape(s)[-1]
            pick = _np.zeros(k, dtype=s.dtype)
            pick[0 if ord == 2 else -1] = 1.0
            res = _sum(s * pick, axis=-1)
        kept = tuple(1 if i in (r, c) else d for i, d in enumerate(_shape(x)))
        res = _reshape(res, kept)
    else:
        raise ValueError("Invalid norm order for matrices.")
    if keepdims:
        return res
    s = _shape(res)
    return _reshape(res, tuple(d for i, d in enumerate(s) if i not in (r, c)))


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector and matrix norms, as ``numpy.linalg.norm``.

    The 2-norm and the Frobenius norm at 0 have derivative 0 (PyTorch's
    subgradient), never an exception.
    """
    if not _traced(x):
        return _np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    nd = len(_shape(x))
    if axis is None:
        if ord is None:
            return _rl._vector_norm(x, ord=2, axis=None, keepdims=keepdims)
        if nd == 1:
            axis = (0,)
        elif nd == 2:
            axis = (0, 1)
        else:
            raise ValueError("Improper number of dimensions to norm.")
    elif isinstance(axis, int):
        axis = (axis,)
    axis = tuple(int(a) % nd for a in axis)
    if len(axis) == 1:
        return _vector(x, ord, axis, keepdims)
    if len(axis) == 2:
        return _matrix(x, ord, axis, keepdims)
    raise ValueError("Improper number of dimensions to norm.")


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """``numpy.linalg.vector_norm`` (axis None: all axes, as one vector)."""
    if not _traced(x):
        return _np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)
    nd = len(_shape(x))
    axes = tuple(range(nd)) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    axes = tuple(a % nd for a in axes)
    return _vector(x, ord, axes, keepdims)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """``numpy.linalg.matrix_norm`` over the last two axes."""
    if not _traced(x):
        return _np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    return _matrix(x, ord, (-2, -1), keepdims)


for _fn, _prim in ((solve, _rl._solve), (slogdet, _rl.slogdet), (cholesky, _rl._cholesky),
                   (eigh, _rl._eigh), (eig, _rl._eig), (eigvals, _rl.eigvals), (svd, _rl._svd), (qr, _rl._qr), (pinv, _rl.pinv),
                   (lstsq, _rl._lstsq)):
    _fn.__wengert_primitive__ = _prim  # a NumPy-signature wrapper around one primitive
del _fn, _prim


# -- more compositions --------------------------------------------------------------------------


def cond(x, p=None):
    """The condition number (2-norm by default: largest over smallest singular value)."""
    if not _traced(x):
        return _np.linalg.cond(x, p)
    if p is None or p in (2, -2):
        s = _rl.svdvals(x)
        k = _shape(s)[-1]
        first = _np.zeros(k, dtype=s.dtype)
        last = _np.zeros(k, dtype=s.dtype)
        first[0], last[-1] = 1.0, 1.0
        big, small = _sum(s * first, axis=-1), _sum(s * last, axis=-1)
        return small / big if p == -2 else big / small
    return norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))


def matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """The rank: an integer, not differentiated."""
    return _np.linalg.matrix_rank(_plain(A), tol=None if tol is None else _plain(tol),
                                  hermitian=hermitian, rtol=rtol)


matrix_rank._nondiff = True


def tensorinv(a, ind=2):
    """The inverse of ``a`` seen as a linear map from its last axes to its first ``ind``."""
    if not _traced(a):
        return _np.linalg.tensorinv(a, ind)
    s = _shape(a)
    out_shape, in_shape = s[:ind], s[ind:]
    m = int(_np.prod(out_shape))
    ia = inv(_reshape(a, (m, int(_np.prod(in_shape)))))
    return _reshape(ia, in_shape + out_shape)


def tensorsolve(a, b, axes=None):
    """Solve ``tensordot(a, x, x.ndim) = b`` for ``x``."""
    if not _traced(a, b):
        return _np.linalg.tensorsolve(a, b, axes)
    nd = len(_shape(a))
    if axes is not None:
        allaxes = [i for i in range(nd) if i not in [k % nd for k in axes]]
        allaxes += [k % nd for k in axes]
        a = _transpose(a, tuple(allaxes))
    sb = _shape(b)
    q = _shape(a)[len(sb):]
    n = int(_np.prod(q))
    x = _rl._solve(_reshape(a, (n, n)), _reshape(b, (n, 1)))
    return _reshape(x, q)


def trace(x, /, *, offset=0, dtype=None):
    """The trace over the last two axes (``numpy.linalg.trace``)."""
    if not _traced(x):
        return _np.linalg.trace(x, offset=offset, dtype=dtype)
    return _wnp.trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def diagonal(x, /, *, offset=0):
    """The diagonals over the last two axes (``numpy.linalg.diagonal``)."""
    if not _traced(x):
        return _np.linalg.diagonal(x, offset=offset)
    return _wnp.diagonal(x, offset=offset, axis1=-2, axis2=-1)


def matrix_transpose(x, /):
    """Swap the last two axes."""
    if not _traced(x):
        return _np.linalg.matrix_transpose(x)
    return _rl._mT(x)


def _bind_from_wnp():
    """``matmul``, ``outer``, ``cross``, ``tensordot``, ``vecdot``: wengert.numpy's."""
    for name in ("matmul", "outer", "cross", "tensordot", "vecdot"):
        fn = vars(_wnp).get(name)
        if fn is not None and not getattr(fn, "_passthrough", False):
            globals()[name] = fn


_bind_from_wnp()


# -- everything else: NumPy's own -------------------------------------------------------------


def __getattr__(name):
    attr = getattr(_np.linalg, name)
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(f"numpy.linalg.{name}", attr)
        globals()[name] = attr
    return attr


from . import _register_numpy_dispatch  # noqa: E402

_register_numpy_dispatch(globals(), _np.linalg)
