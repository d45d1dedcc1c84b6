"""How a primitive's results depend on its array arguments, structurally: the data the
sparsity engine (wengert/sparsity.py) reads, declared once per family of primitives.

A declaration's ``local(prim, primals, ans, params, traced)`` gives, for each array argument
(``traced[i]`` says whether argument ``i`` carries a pattern; the others get ``None``), how
the elements of the result (flattened in C order) depend on the elements of that argument:

* ``None``             -- not at all;
* ``SAME``             -- element r on element r (the argument has the result's shape);
* ``DENSE``            -- every element on every element;
* an int array ``g``   -- element r on element ``g[r]`` (on none where ``g[r] < 0``);
* ``("csr", indptr, indices)`` -- element r on ``indices[indptr[r]:indptr[r + 1]]``;
* ``("coo", rows, cols)``      -- element ``rows[k]`` on element ``cols[k]``.

That is the local Jacobian of the primitive, as a pattern: seed 003's sparse factor of one
line of the program. A primitive with several results gets one such list per result.

Which arguments interact at second order is the primitive's one linearity fact first
(``linear=True`` or ``"piecewise"``: none; ``"bilinear"``: the two arguments with each other),
declared with the primitive, not here; for the others a declaration's ``hessian`` says it:
``"multilinear"`` (pairs of different arguments, as in a product), ``"nonlinear"`` (every
pair), a tuple of argument pairs ``(i, j)`` (``divide``: ``((0, 1), (1, 1))``), ``"linear"``
only where no argument is read at all (``Constant``), or ``None`` (nonlinear). A primitive without a declaration is
dense in every argument and nonlinear: never wrong, only coarse. Only NumPy here: the
declarations are computed on shapes and index arrays, never on derivatives.
"""
import numpy as np

__all__ = ["SAME", "DENSE", "Sparsity", "Elementwise", "Moves", "ScatterAdd", "Reduction",
           "Contraction", "Blocks", "Solve", "Convolution", "Fibres", "Constant", "ELEMENTWISE",
           "CONSTANT", "MOVES", "matmul_subscripts", "einsum_subscripts"]

SAME = "same"
DENSE = "dense"


def _size(shape):
    return int(np.prod(shape, dtype=np.int64))


class Sparsity:
    """A family's declaration (see the module docstring)."""

    hessian = None
    inline = False  # True: sparsity detection runs the primitive's impl on the index sets

    def local(self, prim, primals, ans, params, traced):  # pragma: no cover - interface
        raise NotImplementedError

    def _per_result(self, prim, ans, each):
        """``each(result)`` for the one result, or a list of them for several."""
        if prim.multiple_results:
            return [each(a) for a in ans]
        return each(ans)


def broadcast_map(shape, out_shape):
    """Element r of a result of ``out_shape`` reads element ``g[r]`` of an argument of
    ``shape`` broadcast to it (``SAME`` when no broadcasting happens)."""
    shape, out_shape = tuple(shape), tuple(out_shape)
    if shape == out_shape:
        return SAME
    size = _size(shape)
    if size == 1:
        return np.zeros(_size(out_shape), np.intp)
    idx = np.arange(size, dtype=np.intp).reshape(shape)
    return np.broadcast_to(idx, out_shape).ravel()


class Elementwise(Sparsity):
    """Result element r depends on element r of each argument (after broadcasting): exact.

    ``results``: for a primitive with several results, the ones that depend on the
    arguments (``modf``'s integral part does not).
    """

    def __init__(self, hessian=None, results=None):
        self.hessian = hessian
        self.results = results

    def local(self, prim, primals, ans, params, traced):
        if prim.multiple_results:
            return [[broadcast_map(np.shape(p), np.shape(a)) if t and
                     (self.results is None or k in self.results) else None
                     for p, t in zip(primals, traced)] for k, a in enumerate(ans)]
        s = np.shape(ans)
        return [broadcast_map(np.shape(p), s) if t else None for p, t in zip(primals, traced)]


class Moves(Sparsity):
    """Primitives that only move elements (reshape, transpose, slicing, gathering, writing
    into a copy, concatenating): the primitive's own implementation, run on the arguments'
    element numbers, says where each element of the result comes from. Run twice with the
    numbers shifted by one, an element that is a constant (padding zeros, a fill value)
    stays put while a moved one shifts; anything else (a sum of two elements) makes the
    declaration fall back to dense, which is still correct. A moving primitive is linear:
    it declares ``linear=True``, which gives its Hessian."""

    def local(self, prim, primals, ans, params, traced):
        bases, base = [], 0
        for p, t in zip(primals, traced):
            bases.append(base)
            if t:
                base += _size(np.shape(p))

        def run(shift):
            vals = [np.arange(b, b + _size(np.shape(p)), dtype=np.float64).reshape(np.shape(p))
                    + shift if t else p for p, t, b in zip(primals, traced, bases)]
            return prim.impl(*vals, **params)

        dense = [DENSE if t else None for t in traced]
        try:
            one, two = run(1.0), run(2.0)
        except Exception:  # the implementation refuses numbers in place of its values
            return self._per_result(prim, ans, lambda a: dense)
        if not prim.multiple_results:
            return self._sources(one, two, primals, traced, bases, dense)
        return [self._sources(a, b, primals, traced, bases, dense) for a, b in zip(one, two)]

    @staticmethod
    def _sources(one, two, primals, traced, bases, dense):
        one = np.asarray(one).ravel()
        two = np.asarray(two).ravel()
        shift = two - one
        moved = shift == 1.0
        if not np.all(moved | (shift == 0.0)):
            return dense  # not a move: the result combines elements
        src = np.full(one.shape, -1, np.intp)
        src[moved] = np.rint(np.real(one[moved]) - 1.0).astype(np.intp)
        out = []
        for p, t, b in zip(primals, traced, bases):
            if not t:
                out.append(None)
                continue
            size = _size(np.shape(p))
            mine = (src >= b) & (src < b + size)
            if not mine.any():
                out.append(None)
                continue
            g = np.where(mine, src - b, -1)
            out.append(SAME if size == g.size and np.array_equal(g, np.arange(size)) else g)
        return out


class ScatterAdd(Sparsity):
    """``scatter_add(g, flat, shape, lead)``: zeros with ``g`` added at flat positions
    (after ``lead`` leading axes); repeated positions add up, so each result element depends
    on every element of ``g`` sent to it. Linear: ``linear=True`` gives its Hessian."""

    def local(self, prim, primals, ans, params, traced):
        if not traced[0]:
            return [None]
        g = primals[0]
        flat = np.asarray(params["flat"], dtype=np.intp).ravel()
        nlead = _size(np.shape(g)[:params.get("lead", 0)])
        size = _size(params["shape"])
        rows = (np.arange(nlead, dtype=np.intp)[:, None] * size + flat[None, :]).ravel()
        cols = np.arange(rows.size, dtype=np.intp)
        return [("coo", rows, cols)]


def _axes(axis, nd):
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, (tuple, list)):
        return tuple(sorted(int(a) % nd for a in axis))
    return (int(axis) % nd,)


class Reduction(Sparsity):
    """A reduction over ``axis`` (``params[axis_param]``; ``None``: all): each result
    element depends on the fibre it reduces. ``prefix=True`` for a cumulative one along one
    axis (``None``: the flattened array), whose element j depends on elements 0..j."""

    def __init__(self, hessian=None, prefix=False, axis_param="axis"):
        self.hessian = hessian
        self.prefix = prefix
        self.axis_param = axis_param

    def local(self, prim, primals, ans, params, traced):
        shape = np.shape(primals[0])
        axis = params.get(self.axis_param)
        if self.prefix:
            dep = _prefix_map(shape, axis)
        else:
            dep = _fibre_map(shape, _axes(axis, len(shape)) if shape else ())
        return self._per_result(prim, ans, lambda a: [
            (dep if np.shape(p) == shape else DENSE) if t else None
            for p, t in zip(primals, traced)])


def _fibre_map(shape, axes):
    size = _size(shape)
    if not axes:
        return SAME
    keep = [a for a in range(len(shape)) if a not in axes]
    k = _size([shape[a] for a in axes])
    idx = np.arange(size, dtype=np.intp).reshape(shape).transpose(keep + list(axes))
    m = size // k if k else _size([shape[a] for a in keep])
    return ("csr", np.arange(m + 1, dtype=np.intp) * k, idx.reshape(m, k).ravel())


def _prefix_map(shape, axis):
    if axis is None:
        shape, axis = (_size(shape),), 0
    nd = len(shape)
    if nd == 0:
        return SAME
    axis = int(axis) % nd
    n = shape[axis]
    idx = np.arange(_size(shape), dtype=np.intp).reshape(shape)
    moved = np.moveaxis(idx, axis, -1).reshape(-1, n)  # (fibres, n): element numbers
    lengths = np.arange(1, n + 1)
    pos = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    row_in_fibre = np.repeat(np.arange(n), lengths)
    rows = moved[:, row_in_fibre].ravel()  # the result has the operand's shape
    cols = moved[:, pos].ravel()
    return ("coo", rows, cols)


def matmul_subscripts(a_shape, b_shape):
    """Einsum subscripts of ``np.matmul`` for operands of these shapes."""
    na, rb = len(a_shape), len(b_shape)
    if na == 1 and rb == 1:
        return ["y", "y"], ""
    if rb == 1:
        batch = "abcdefghijklmnop"[:na - 2]
        return [batch + "xy", "y"], batch + "x"
    if na == 1:
        batch = "abcdefghijklmnop"[:rb - 2]
        return ["y", batch + "yz"], batch + "z"
    nd = max(na, rb)
    batch = "abcdefghijklmnop"[:nd - 2]
    return [batch[nd - na:] + "xy", batch[nd - rb:] + "yz"], batch + "xz"


def einsum_subscripts(primals, params):
    return list(params["ins"]), params["out"]


class Contraction(Sparsity):
    """Products written as einsum (``subscripts(primals, params) -> (ins, out)``): a result
    element depends on the elements of each operand whose kept indices agree with its own,
    over every value of the summed ones. Multilinear: only different operands interact."""

    hessian = "multilinear"

    def __init__(self, subscripts=None):
        self.subscripts = subscripts

    def local(self, prim, primals, ans, params, traced):
        if self.subscripts is None:
            ins, out = matmul_subscripts(np.shape(primals[0]), np.shape(primals[1]))
        else:
            ins, out = self.subscripts(primals, params)
        out_shape = np.shape(ans)
        return [_contraction_map(sub, np.shape(p), out, out_shape) if t else None
                for p, t, sub in zip(primals, traced, ins)]


    def expansion(self, prim, primals, ans, params):
        """The product as a sum of terms, one element of each operand per term:
        ``(owner, sources)``, ``owner[t]`` the result element term t adds to and
        ``sources[i][t]`` the element of operand i it reads (``None`` when there are too
        many terms to list). Pairs of operands meet only within a term, so the Hessian's
        pattern of ``r @ r`` is that of ``JᵀJ``, not a dense block."""
        if self.subscripts is None:
            ins, out = matmul_subscripts(np.shape(primals[0]), np.shape(primals[1]))
        else:
            ins, out = self.subscripts(primals, params)
        if any(len(set(sub)) != len(sub) or len(sub) != np.ndim(p)
               for sub, p in zip(ins, primals)):
            return None
        dims = dict(zip(out, np.shape(ans)))
        for sub, p in zip(ins, primals):
            for c, d in zip(sub, np.shape(p)):
                dims[c] = max(dims.get(c, 1), d)
        summed = sorted({c for sub in ins for c in sub} - set(out))
        letters = list(out) + summed
        full = tuple(dims[c] for c in letters)
        terms = _size(full)
        if terms > EXPANSION_LIMIT:
            return None
        owner = np.repeat(np.arange(_size(np.shape(ans)), dtype=np.intp),
                          _size([dims[c] for c in summed]))
        sources = []
        for sub, p in zip(ins, primals):
            shape = np.shape(p)
            idx = np.arange(_size(shape), dtype=np.intp).reshape(shape)
            idx = idx.transpose([sub.index(c) for c in letters if c in sub])
            lined = idx.reshape([shape[sub.index(c)] if c in sub else 1 for c in letters])
            sources.append(np.broadcast_to(lined, full).ravel())
        return owner, sources


EXPANSION_LIMIT = 1 << 24  # terms of a product listed for its Hessian pattern, at most


def _contraction_map(sub, shape, out, out_shape):
    if len(set(sub)) != len(sub) or len(sub) != len(shape):
        return DENSE  # a repeated index (a diagonal) or an ellipsis: coarse, still correct
    kept = [c for c in out if c in sub]
    summed = [c for c in sub if c not in out]
    order = [sub.index(c) for c in kept + summed]
    idx = np.arange(_size(shape), dtype=np.intp).reshape(shape).transpose(order)
    k = _size([shape[sub.index(c)] for c in summed])
    idx = idx.reshape([shape[sub.index(c)] for c in kept] + [k])
    # as many axes as the result, of length 1 for the indices this operand lacks
    lined = idx.reshape([shape[sub.index(c)] if c in sub else 1 for c in out] + [k])
    rows = np.broadcast_to(lined, tuple(out_shape) + (k,)).reshape(-1, k)
    m = rows.shape[0]
    return ("csr", np.arange(m + 1, dtype=np.intp) * k, rows.ravel())


class Blocks(Sparsity):
    """Linear algebra on the last axes (a matrix, a right-hand side), batched over the
    leading ones: each result block depends on the whole of each argument's block for the
    same batch index. ``cores(primals, ans) -> (argument core ranks, result core ranks)``."""

    def __init__(self, cores):
        self.cores = cores

    def local(self, prim, primals, ans, params, traced):
        arg_cores, out_cores = self.cores(primals, ans)
        results = ans if prim.multiple_results else (ans,)
        per = []
        for a, co in zip(results, out_cores):
            so = np.shape(a)
            batch = so[:len(so) - co]
            per.append([_block_map(np.shape(p), ci, batch, _size(so[len(so) - co:]))
                        if t else None for p, t, ci in zip(primals, traced, arg_cores)])
        return per if prim.multiple_results else per[0]


def _block_map(shape, core, batch, block):
    nd = len(shape)
    k = _size(shape[nd - core:])
    idx = np.arange(_size(shape), dtype=np.intp).reshape(shape[:nd - core] + (k,))
    try:
        rows = np.broadcast_to(idx, tuple(batch) + (k,)).reshape(-1, k)
    except ValueError:
        return DENSE
    rows = np.repeat(rows, block, axis=0)
    m = rows.shape[0]
    return ("csr", np.arange(m + 1, dtype=np.intp) * k, rows.ravel())


def square(primals, ans):
    """A function of one matrix (``inv``, ``expm``), or the cores ``(result ranks)``."""
    return (2,) * len(primals), (2,)


def matrix_to(*ranks):
    """Cores of a function of one matrix with results of these ranks (``det``: 0)."""
    return lambda primals, ans: ((2,) * len(primals), ranks)


class Solve(Blocks):
    """``solve(a, b)`` and ``solve_triangular(a, b)``: the solution depends on the whole
    matrix ``a`` (per batch index) and, column by column, on the same column of ``b``
    (``b`` is a vector only when it is 1-D, as in NumPy 2)."""

    def __init__(self):
        super().__init__(lambda primals, ans: ((2, 1), (1,)))

    def local(self, prim, primals, ans, params, traced):
        a, b = primals
        if np.ndim(b) == 1:
            return super().local(prim, primals, ans, params, traced)
        so = np.shape(ans)
        entry_a = _block_map(np.shape(a), 2, so[:-2], so[-2] * so[-1]) if traced[0] else None
        entry_b = None
        if traced[1]:
            shape = np.shape(b)
            idx = np.swapaxes(np.arange(_size(shape), dtype=np.intp).reshape(shape), -1, -2)
            try:  # element (..., i, j) reads column j of b: (..., :, j)
                rows = np.broadcast_to(idx[..., None, :, :], so[:-2] + (so[-2],) + idx.shape[-2:])
            except ValueError:
                rows = None
            if rows is None:
                entry_b = DENSE
            else:
                rows = rows.reshape(-1, shape[-2])
                entry_b = ("csr", np.arange(rows.shape[0] + 1, dtype=np.intp) * shape[-2],
                           rows.ravel())
        return [entry_a, entry_b]


class Convolution(Sparsity):
    """``np.convolve(a, v, mode)`` and ``np.correlate``: a banded Toeplitz pattern in each
    argument (a stencil), cut to the mode's window, whose offset in the full result is read
    off the implementation on two probe vectors."""

    hessian = "multilinear"

    def __init__(self, correlate=False):
        self.correlate = correlate

    def local(self, prim, primals, ans, params, traced):
        a, v = primals
        na, nv, m = np.size(a), np.size(v), np.size(ans)
        if np.ndim(a) != 1 or np.ndim(v) != 1 or na == 0 or nv == 0:
            return [DENSE if t else None for t in traced]
        rng = np.random.default_rng(0)
        pa, pv = rng.standard_normal(na), rng.standard_normal(nv)
        full = np.asarray(prim.impl(pa, pv, **dict(params, mode="full")))
        cut = np.asarray(prim.impl(pa, pv, **params))
        start = next((s for s in range(full.size - m + 1)
                      if np.allclose(full[s:s + m], cut, rtol=1e-12, atol=1e-12)), None)
        if start is None:
            return [DENSE if t else None for t in traced]
        k = np.arange(m) + start  # positions in the full result
        out = [None, None]
        if traced[0]:  # full[k] reads a[k - nv + 1 .. k]
            out[0] = _ranges(np.maximum(0, k - nv + 1), np.minimum(na - 1, k))
        if traced[1]:
            if self.correlate:  # full[k] = sum_n a[n + k - nv + 1] v[n]
                out[1] = _ranges(np.maximum(0, nv - 1 - k), np.minimum(nv - 1, nv - 2 - k + na))
            else:  # full[k] = sum_j a[k - j] v[j]
                out[1] = _ranges(np.maximum(0, k - na + 1), np.minimum(nv - 1, k))
        return out


def _ranges(lo, hi):
    """CSR rows holding ``lo[r] .. hi[r]`` (none where ``hi < lo``)."""
    lengths = np.maximum(hi - lo + 1, 0)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    pos = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lengths)
    return ("csr", indptr, np.repeat(lo, lengths) + pos)


class Fibres(Sparsity):
    """Transforms along ``params[axes_param]`` (an FFT): a result element depends on the
    whole fibre of the operand through it, along those axes; the other axes match. Its
    primitives are linear (``linear=True``), which gives their Hessian."""

    def __init__(self, axes_param="axes"):
        self.axes_param = axes_param

    def local(self, prim, primals, ans, params, traced):
        if not traced[0]:
            return [None] * len(primals)
        shape, out_shape = np.shape(primals[0]), np.shape(ans)
        nd = len(shape)
        axes = _axes(params.get(self.axes_param), nd) if nd else ()
        keep = [a for a in range(nd) if a not in axes]
        if len(out_shape) != nd or any(shape[a] != out_shape[a] for a in keep):
            return [DENSE] + [None] * (len(primals) - 1)
        src = np.arange(_size(shape), dtype=np.intp).reshape(shape).transpose(
            keep + list(axes))
        dst = np.arange(_size(out_shape), dtype=np.intp).reshape(out_shape).transpose(
            keep + list(axes))
        rest = _size([shape[a] for a in keep])
        src = src.reshape(rest, 1, -1)
        dst = dst.reshape(rest, -1, 1)
        rows, cols = np.broadcast_arrays(dst, src)
        return [("coo", rows.ravel(), cols.ravel())] + [None] * (len(primals) - 1)


class Constant(Sparsity):
    """A result that depends on no argument (``constant_like``: only its shape is read)."""

    hessian = "linear"  # no argument is read: nothing at second order

    def local(self, prim, primals, ans, params, traced):
        return self._per_result(prim, ans, lambda a: [None] * len(primals))


ELEMENTWISE = Elementwise()
CONSTANT = Constant()
MOVES = Moves()
