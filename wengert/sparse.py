"""Sparse Jacobians and Hessians: detect the pattern, colour it, compress the passes.

``wg.jacobian`` of a function of n inputs takes n forward directions (or m reverse ones).
When each output depends on a few inputs, columns that share no row can share a
direction: one forward pass with the sum of their unit vectors gives each column's
entries on its own rows. So the Jacobian takes as many passes as a colouring of the
columns has colours (3 for a tridiagonal one, at any n), all in *one* forward pass with
a batch of that many tangents; or one reverse sweep with a batch of cotangents over the
rows' colours, when that needs fewer (a dense row over a diagonal: 2 instead of n).

1. the pattern is read off the program by index-set propagation (``wengert.sparsity``),
   once per input signature, and cached;
2. ``wengert.coloring`` colours it (columns, rows, or a star colouring for a Hessian);
3. one compressed pass computes ``J S`` (or ``Wᵀ J``, or ``H S`` by forward over
   reverse), and its entries are placed into a ``scipy.sparse.csr_array``.

``wg.compile(wg.sparse_jacobian(f))`` compiles the compressed pass (the pattern and the
colouring are worked out once per signature, outside the compiled code).
"""
from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from . import coloring
from . import numpy as wnp
from .core import plain as _plain, Tracer, shape_of
from .reverse import Tape, Var
from .sparsity import PatternTrace, PatternTracer, stack_patterns
from .transforms import (_argnums_tuple, _check_args, _leaf_dtype, _place_inputs,
                         _value_and_grad, _value_in, check_output)
from .directions import pull_directions, push_directions
from .tree import flatten, unflatten

__all__ = ["jacobian_sparsity", "hessian_sparsity", "sparse_jacobian", "sparse_hessian",
           "color"]

color = coloring.color


def _size(x):
    return int(np.prod(shape_of(x), dtype=np.int64))



def _inputs(f, args, argnums, fname):
    """``(argument numbers, one?, input leaves, their treedef)`` for ``argnums``."""
    nums = _argnums_tuple(argnums, len(args), fname)
    if len(set(nums)) != len(nums):  # one column per input element: a repeat would be zeros
        raise ValueError(f"{fname}: argnums={argnums!r} names an argument twice; a sparse "
                         "matrix has one column per input element, so give each position "
                         "once (and repeat its columns afterwards if needed)")
    _check_args(f, args, nums, fname)
    one = isinstance(argnums, int)
    tree = args[nums[0]] if one else tuple(args[i] for i in nums)
    leaves, d = flatten(tree)
    return nums, one, leaves, d


# -- patterns --------------------------------------------------------------------------------------
def jacobian_sparsity(f, *args, argnums=0):
    """The structural pattern of ``f``'s Jacobian at ``args``: a boolean
    ``scipy.sparse.csr_array`` of shape ``(out.size, in.size)`` (pytrees flattened, leaves
    one after another), read from the program ``f`` runs on these arguments. It covers
    every nonzero for inputs that take the same branches; elementwise, stencil and
    indexing programs get exactly their pattern.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> def f(x):
    ...     return x[1:] * x[:-1]
    >>> print(wg.jacobian_sparsity(f, np.ones(4)).toarray().astype(int))
    [[1 1 0 0]
     [0 1 1 0]
     [0 0 1 1]]
    """
    nums, one, leaves, d = _inputs(f, args, argnums, "jacobian_sparsity")
    return _detect(f, args, {}, nums, one, leaves, d, False, "wg.jacobian_sparsity")[0]


def hessian_sparsity(f, *args, argnums=0):
    """The structural pattern of the Hessian of the scalar function ``f`` at ``args``
    (``csr_array`` of bools, ``(in.size, in.size)``): the pairs of inputs that meet in a
    nonlinear operation whose result the output depends on."""
    nums, one, leaves, d = _inputs(f, args, argnums, "hessian_sparsity")
    return _detect(f, args, {}, nums, one, leaves, d, True, "wg.hessian_sparsity")[0]


def _detect(f, args, kwargs, nums, one, leaves, in_def, hessian, transform):
    """``(pattern, output leaves' (shape, dtype))`` by one run of ``f`` on index sets."""
    plain = [_plain(x) for x in leaves]
    n = sum(_size(x) for x in plain)
    trace = PatternTrace(n, record=hessian)
    try:
        wrapped = trace.inputs(plain)
        out = f(*_place_inputs(args, nums, in_def, wrapped, one), **kwargs)
        check_output(out, transform)
        outs = flatten(out)[0]
        info = []
        pats = []
        for o in outs:
            mine = isinstance(o, PatternTracer) and o._trace is trace
            v = o.value if mine else _value_in(o, trace, transform)
            info.append((shape_of(v), _leaf_dtype(v) or np.dtype(float)))
            pats.append(o.pattern if mine else None)
        if hessian:
            if len(outs) != 1 or info[0][0] != ():
                raise ValueError(f"{transform[3:]} needs a function with a scalar output, but "
                                 f"it returned {len(outs)} leaves of shapes "
                                 f"{[s for s, _ in info]}")
            return trace.hessian_pattern(outs[0]), info
        return stack_patterns(pats, [int(np.prod(s, dtype=np.int64)) for s, _ in info], n), info
    finally:
        trace.finish(transform, f)


# -- the plans: one per input signature ---------------------------------------------------------------
class Plan:
    """What one input signature needs: the pattern, the colouring, the seed directions and
    where each stored entry is read in the compressed product."""

    def __init__(self, pattern, mode, colors, in_info, out_info):
        if any(np.dtype(dt).kind == "c" for _, dt in list(in_info) + list(out_info or ())):
            raise NotImplementedError(
                "sparse Jacobians and Hessians are for real values: compressed columns of a "
                "complex derivative would mix conventions (docs/complex.md). Use wg.jacobian "
                "(holomorphic=True for df/dz) or pass real and imaginary parts separately.")
        self.sparsity = pattern
        self.mode = mode  # "forward", "reverse" or "hessian"
        self.colors = colors
        self.num_colors = int(colors.max()) + 1 if colors.size else 0
        m, n = pattern.shape
        rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(pattern.indptr))
        cols = pattern.indices.astype(np.int64)
        if mode == "forward":  # B = (J S)ᵀ, (k, m): J[i, j] = B[c(j), i]
            self.take = colors[cols] * m + rows
        elif mode == "reverse":  # C = Wᵀ J, (k, n): J[i, j] = C[c(i), j]
            self.take = colors[rows] * n + cols
        else:  # B = (H S)ᵀ, (k, n), read by the star rule
            self.take = coloring.star_sources(pattern, colors)
        # as wg.jacobian: the derivative has the inputs' dtype (float32 stays float32)
        self.dtype = np.result_type(*[dt for _, dt in in_info]) if in_info else np.dtype(float)
        seeded = in_info if mode != "reverse" else out_info
        self.seeds = _seeds(colors, self.num_colors, seeded)
        self.out_info = out_info
        self.indices = pattern.indices.astype(np.int32, copy=False) \
            if max(pattern.shape, default=0) < 2 ** 31 else pattern.indices
        self.indptr = pattern.indptr.astype(self.indices.dtype, copy=False)

    def __repr__(self):
        m, n = self.sparsity.shape
        return (f"<sparse plan: {self.mode}, {self.num_colors} colours for a {m} x {n} "
                f"pattern with {self.sparsity.nnz} entries>")

    def assemble(self, data):
        """The ``csr_array`` holding ``data`` (the stored entries, in csr order)."""
        if data.dtype != self.dtype:
            if data.dtype.kind == "c" and self.dtype.kind != "c":
                data = data.real  # a real input's derivative is real, as in wg.jacobian
            data = data.astype(self.dtype)
        out = sp.csr_array((data, self.indices, self.indptr), shape=self.sparsity.shape,
                           copy=False)
        out.has_sorted_indices = True
        return out


def _seeds(colors, k, info):
    """The directions, one batch of ``k`` per leaf: ``S[c, j] = 1`` where ``c(j) = c``."""
    seeds = []
    off = 0
    for shape, dt in info:
        size = int(np.prod(shape, dtype=np.int64))
        s = np.zeros((k, size), dtype=dt if np.dtype(dt).kind in "fc" else float)
        s[colors[off:off + size], np.arange(size)] = 1
        seeds.append(s.reshape((k,) + tuple(shape)))
        off += size
    return seeds


def _choose(pattern, mode):
    """``(mode, colours)``: forward over column colours, reverse over row colours, or for
    ``"auto"`` the fewer (forward on a tie). A colouring needs at least the longest row
    (column) of colours, so the one that cannot win is not computed: an arrowhead's n
    column colours are never worked out beside its 2 row colours."""
    if mode == "forward":
        return "forward", coloring.column_coloring(pattern)
    if mode == "reverse":
        return "reverse", coloring.row_coloring(pattern)
    row_nnz = np.diff(pattern.indptr)
    col_nnz = np.bincount(pattern.indices, minlength=pattern.shape[1])
    at_least_col = int(row_nnz.max(initial=0))
    at_least_row = int(col_nnz.max(initial=0))
    if int((row_nnz.astype(np.int64) ** 2).sum()) <= int((col_nnz.astype(np.int64) ** 2).sum()):
        cc = coloring.column_coloring(pattern)
        kc = int(cc.max(initial=-1)) + 1
        if kc <= at_least_row:
            return "forward", cc
        rc = coloring.row_coloring(pattern)
        return ("forward", cc) if kc <= int(rc.max(initial=-1)) + 1 else ("reverse", rc)
    rc = coloring.row_coloring(pattern)
    kr = int(rc.max(initial=-1)) + 1
    if kr < at_least_col:
        return "reverse", rc
    cc = coloring.column_coloring(pattern)
    return ("forward", cc) if int(cc.max(initial=-1)) + 1 <= kr else ("reverse", rc)


def _signature(args, kwargs):
    """The cache key of a call: structure, shapes and dtypes, and the other leaves' values
    (``None`` when one cannot be a key: then nothing is cached)."""
    leaves, d = flatten((args, kwargs))
    key = [repr(d)]
    for x in leaves:
        x = _plain(x)
        if type(x) is float:
            key.append(float)
        elif isinstance(x, np.ndarray):
            key.append((x.shape, x.dtype.str))
        elif isinstance(x, np.generic):
            key.append((type(x), x.dtype.str))
        else:
            try:
                hash(x)
            except TypeError:
                return None
            key.append((type(x), x))
    return tuple(key)


# -- the transforms ------------------------------------------------------------------------------------
class _Sparse:
    """What ``sparse_jacobian`` and ``sparse_hessian`` return: a function of ``f``'s
    arguments, with its plans cached per input signature (``.plan(*args)`` shows one)."""

    transform = "wg.sparse_jacobian"

    def __init__(self, f, argnums, sparsity):
        functools.update_wrapper(self, f, updated=())
        self.f = f
        self.argnums = argnums
        self.given = None if sparsity is None else coloring.as_pattern(sparsity)
        self._plans = {}
        self._coloured = None  # (mode, colours) of a given pattern, worked out once

    def __repr__(self):
        return f"<{self.transform} of {getattr(self.f, '__name__', 'a function')}>"

    def __get__(self, obj, objtype=None):  # methods: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        plan = self.plan(*args, **kwargs)
        return plan.assemble(self._data(plan, args, kwargs))

    def plan(self, *args, **kwargs):
        """The plan for these arguments: ``.sparsity``, ``.mode``, ``.colors``,
        ``.num_colors`` (worked out on the first call with their signature)."""
        for x in flatten((args, kwargs))[0]:
            if isinstance(x, Tracer):
                raise TypeError(
                    f"{self.transform} returns a scipy.sparse matrix, which holds plain "
                    f"numbers, so it cannot run on traced values (inside wg.grad, wg.jvp, "
                    f"or a function given to wg.compile). Call it outside those, or compile "
                    f"it as a whole: wg.compile({self.transform}(f)).")
        key = _signature(args, kwargs)
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = self._make_plan(args, kwargs)
            if key is not None:  # (threads racing here all use the first plan kept)
                plan = self._plans.setdefault(key, plan)
        return plan

    def _data(self, plan, args, kwargs):
        """The stored entries, in csr order, from one compressed pass."""
        if plan.num_colors == 0:
            return np.zeros(plan.sparsity.nnz)
        b = self._compressed(plan, args, kwargs)
        return wnp.reshape(b, (-1,))[plan.take]

    def __wg_compile__(self, compile):
        """``wg.compile`` of this: the compressed pass compiled, once per signature."""
        return _CompiledSparse(self, compile)


class _SparseJacobian(_Sparse):
    def __init__(self, f, argnums, sparsity, mode):
        if mode not in ("auto", "forward", "reverse"):
            raise ValueError(f"mode must be 'auto', 'forward' or 'reverse', got {mode!r}")
        super().__init__(f, argnums, sparsity)
        self.mode = mode

    def _make_plan(self, args, kwargs):
        nums, one, leaves, d = _inputs(self.f, args, self.argnums, "sparse_jacobian")
        in_info = [(shape_of(_plain(x)), _leaf_dtype(x)) for x in leaves]
        if self.given is None:
            pattern, out_info = _detect(self.f, args, kwargs, nums, one, leaves, d, False,
                                        self.transform)
            mode, colors = _choose(pattern, self.mode)
        else:
            pattern = self.given
            out_info = _output_info(self.f, args, kwargs)
            if self._coloured is None:
                self._coloured = _choose(pattern, self.mode)
            mode, colors = self._coloured
        _check_shape(pattern, in_info, out_info, self.transform)
        return Plan(pattern, mode, colors, in_info, out_info)

    def _compressed(self, plan, args, kwargs):
        nums, one, leaves, d = _inputs(self.f, args, self.argnums, "sparse_jacobian")
        if plan.mode == "forward":
            return _push(self.f, args, kwargs, nums, one, leaves, d, plan, self.transform)
        return _pull(self.f, args, kwargs, nums, one, leaves, d, plan, self.transform)


class _SparseHessian(_Sparse):
    transform = "wg.sparse_hessian"

    def _make_plan(self, args, kwargs):
        nums, one, leaves, d = _inputs(self.f, args, self.argnums, "sparse_hessian")
        in_info = [(shape_of(_plain(x)), _leaf_dtype(x)) for x in leaves]
        if self.given is None:
            pattern = _detect(self.f, args, kwargs, nums, one, leaves, d, True,
                              self.transform)[0]
            colors = coloring.star_coloring(pattern)
        else:
            pattern = coloring.as_pattern(self.given + self.given.T)
            if self._coloured is None:
                self._coloured = coloring.star_coloring(pattern)
            colors = self._coloured
        n = sum(int(np.prod(s, dtype=np.int64)) for s, _ in in_info)
        if pattern.shape != (n, n):
            raise ValueError(f"{self.transform}: the sparsity has shape {pattern.shape}, but "
                             f"the Hessian of {n} inputs is ({n}, {n})")
        return Plan(pattern, "hessian", colors, in_info, None)

    def _compressed(self, plan, args, kwargs):
        nums, one, leaves, d = _inputs(self.f, args, self.argnums, "sparse_hessian")
        f, argnums, transform = self.f, self.argnums, self.transform

        def grad_f(*a, **kw):
            return _value_and_grad(f, argnums, False, a, kw, transform)[1]
        return _push(grad_f, args, kwargs, nums, one, leaves, d, plan, transform)


def _output_info(f, args, kwargs):
    """The output leaves' shapes and dtypes, from a plain run (a pattern was given).
    The inputs are copied: ``f`` may write into them."""
    leaves, d = flatten(tuple(args))
    copies = [x.copy() if type(x) is np.ndarray else x for x in leaves]
    out = f(*unflatten(d, copies), **kwargs)
    check_output(out, "sparse_jacobian")
    return [(shape_of(o), _leaf_dtype(o) or np.dtype(float)) for o in flatten(out)[0]]


def _check_shape(pattern, in_info, out_info, transform):
    n = sum(int(np.prod(s, dtype=np.int64)) for s, _ in in_info)
    m = sum(int(np.prod(s, dtype=np.int64)) for s, _ in out_info)
    if pattern.shape != (m, n):
        raise ValueError(f"{transform}: the sparsity has shape {pattern.shape}, but the "
                         f"Jacobian of {m} outputs in {n} inputs is ({m}, {n})")


# -- the compressed passes ---------------------------------------------------------------------------
def _push(f, args, kwargs, nums, one, leaves, in_def, plan, transform):
    """``(J S)ᵀ``, shape ``(k, m)``: ``vmap`` over ``jvp``, the ``k`` seeds in one pass."""
    k = plan.num_colors
    _, _, tangents = push_directions(
        lambda w: f(*_place_inputs(args, nums, in_def, w, one), **kwargs), leaves, plan.seeds,
        transform, f)
    return _joined([wnp.reshape(t, (k, -1)) for t in tangents])


def _pull(f, args, kwargs, nums, one, leaves, in_def, plan, transform):
    """``Wᵀ J``, shape ``(k, n)``: ``vmap`` over the pullback, one sweep for the ``k``
    seeds."""
    k = plan.num_colors
    tape = Tape()
    try:
        wrapped = [tape._leaf(x) for x in leaves]
        index = [v.index for v in wrapped]  # f may rebind a Var (x[i] = v)
        with tape.active():
            out = f(*_place_inputs(args, nums, in_def, wrapped, one), **kwargs)
        check_output(out, transform)
        outs = flatten(out)[0]
        if len(outs) != len(plan.seeds):
            raise ValueError(f"{transform}: the function returned {len(outs)} leaves; its "
                             f"plan was made for {len(plan.seeds)}")
        seeds = {}
        for o, w in zip(outs, plan.seeds):
            if isinstance(o, Var) and o._trace is tape:
                seeds[o.index] = w if o.index not in seeds else seeds[o.index] + w
            else:
                _value_in(o, tape, transform)
        if not seeds:
            return _joined([np.zeros((k, _size(x)), _leaf_dtype(x)) for x in leaves])
        return _joined([wnp.reshape(g, (k, -1))
                        for g in pull_directions(tape, seeds, index, leaves)])
    finally:
        tape.finish(transform, f)


def _joined(blocks):
    return blocks[0] if len(blocks) == 1 else wnp.concatenate(blocks, axis=1)


class _CompiledSparse:
    """``wg.compile(wg.sparse_jacobian(f))``: per input signature, the plan (pattern and
    colouring) and the compressed pass compiled to straight-line code."""

    def __init__(self, sparse, compile):
        self.sparse = sparse
        self.compile = compile
        self._passes = {}
        functools.update_wrapper(self, sparse, updated=())

    def __repr__(self):
        return f"<wengert compiled {self.sparse!r}>"

    def __reduce__(self):  # the compiled passes stay behind: compiled again where it lands
        return _CompiledSparse, (self.sparse, self.compile)

    def __call__(self, *args, **kwargs):
        plan = self.sparse.plan(*args, **kwargs)
        run = self._passes.get(id(plan))
        if run is None:
            sparse = self.sparse

            def compressed(*a, **kw):
                return sparse._data(plan, a, kw)
            compressed.__name__ = f"compressed_{getattr(sparse.f, '__name__', 'f')}"
            run = self._passes.setdefault(id(plan), (self.compile(compressed), plan))
        return plan.assemble(run[0](*args, **kwargs))

    def plan(self, *args, **kwargs):
        return self.sparse.plan(*args, **kwargs)


def sparse_jacobian(f, argnums=0, *, sparsity=None, mode="auto"):
    """The Jacobian of ``f`` as a ``scipy.sparse.csr_array`` of shape ``(out.size, in.size)``
    (pytrees flattened), from one compressed pass: forward mode over the column colours,
    reverse over the row colours, ``"auto"`` the fewer. ``sparsity`` (a sparse matrix or a
    boolean array) is the pattern to use; when not given it is detected once per input
    signature (``wg.jacobian_sparsity``). Equal to ``wg.jacobian`` at every stored entry,
    zero elsewhere.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> def f(x):
    ...     return x[1:] ** 2 - x[:-1]
    >>> J = wg.sparse_jacobian(f)(np.arange(5.0))
    >>> print(J.toarray())
    [[-1.  2.  0.  0.  0.]
     [ 0. -1.  4.  0.  0.]
     [ 0.  0. -1.  6.  0.]
     [ 0.  0.  0. -1.  8.]]
    >>> wg.sparse_jacobian(f).plan(np.arange(5.0)).num_colors
    2
    """
    return _SparseJacobian(f, argnums, sparsity, mode)


def sparse_hessian(f, argnums=0, *, sparsity=None):
    """The Hessian of the scalar function ``f`` as a symmetric ``scipy.sparse.csr_array``
    ``(in.size, in.size)``, from compressed Hessian-vector products (forward over reverse,
    one pass with a batch of tangents) over a star colouring of its pattern, which is
    detected once per input signature when ``sparsity`` is not given.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> def f(x):
    ...     return wnp.sum((x[1:] - x[:-1] ** 2) ** 2)
    >>> H = wg.sparse_hessian(f)(np.ones(4))
    >>> print(H.toarray())
    [[ 8. -4.  0.  0.]
     [-4. 10. -4.  0.]
     [ 0. -4. 10. -4.]
     [ 0.  0. -4.  2.]]
    """
    return _SparseHessian(f, argnums, sparsity)
