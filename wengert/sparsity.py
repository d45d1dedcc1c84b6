"""Sparsity detection: index sets pushed through the program, one pattern per value.

A ``PatternTracer`` carries its value (so the program takes the branches the example
takes) and a *pattern*: a sparse boolean matrix with a row per element of the value and a
column per input element, true where the element depends on that input. Each primitive's
declaration in the rule registry (``prim.sparsity``, read from rules/patterns.py's
families) gives the pattern ``S_i`` of its local Jacobian in argument ``i``, and the
result's pattern is ``Σ S_i P_i``: seed 003's product of sparse factors, taken on
patterns instead of numbers, one factor per line of the program. A primitive without a
declaration is dense in its arguments, which is coarse but never misses a nonzero. One
declared ``inline`` (a custom function, whose value is computed by wengert operations) is
traced through: its operations are recorded instead.

Hessian patterns (``record=True``) come from the same propagation (Walther's index-set
propagation for Hessians, with element-wise liveness): each node keeps its parents and
local factors; a reverse pass marks the elements the scalar output depends on, and each
live nonlinear element adds the pairs of input indices that meet in it
(``X_a × X_b`` for arguments ``a``, ``b`` that interact at second order).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._dispatch import ArrayTracer
from .core import plain as _plain, Trace, Tracer, new_level

__all__ = ["PatternTrace", "PatternTracer", "stack_patterns", "MAX_ENTRIES"]

# A pattern with more entries than this is refused: the Jacobian is dense, and a dense
# method (wg.jacobian, or wg.jvp / wg.vjp matrix-free) is the right tool.
MAX_ENTRIES = 1 << 27

SAME = "same"    # rules/patterns.py's markers (plain strings: engines import no rule module)
DENSE = "dense"



def _differentiable(v):
    v = _plain(v)
    if isinstance(v, (float, complex)):
        return True
    dt = getattr(v, "dtype", None)
    return dt is not None and dt.kind in "fc"


def identity_rows(offset, size, n):
    """The pattern of ``size`` inputs numbered from ``offset`` among ``n``."""
    return sp.csr_array((np.ones(size, bool), np.arange(offset, offset + size),
                         np.arange(size + 1)), shape=(size, n))


def empty(m, n):
    return sp.csr_array((m, n), dtype=bool)


class PatternTrace(Trace):
    """One sparsity detection; ``record=True`` keeps the program for Hessian patterns."""

    tracer_name = "index-set tracer"

    def __init__(self, n, record=False):
        self.level = new_level()
        self.finished_by = None
        self.n = n
        self.record = record
        self.nodes = []  # when recording, per node: (pattern, parents, second-order kind)

    def __repr__(self):
        return f"<PatternTrace level={self.level} over {self.n} inputs>"

    def inputs(self, leaves):
        """Tracers for the input leaves, numbered one after another."""
        out = []
        off = 0
        for x in leaves:
            s = int(np.size(x))
            out.append(self._new(x, identity_rows(off, s, self.n), (), "linear"))
            off += s
        return out

    def _new(self, value, pattern, parents, kind):
        node = None
        if self.record:
            node = len(self.nodes)
            self.nodes.append((pattern, parents, kind))
        return PatternTracer(value, pattern, self, node)

    def process(self, prim, args, params):
        if self.finished_by is not None:
            raise self.escaped(f"in {prim.name}")
        if prim.sparsity is not None and prim.sparsity.inline:
            # its value is computed by wengert operations (a custom_vjp's body): run them
            # on the index sets, exact wherever those operations are, Hessians included
            return prim.impl(*args, **params)
        primals = []
        traced = []
        mine = []
        outer = False
        for a in args:
            if isinstance(a, PatternTracer) and a._trace is self:
                v = a.value
                primals.append(v)
                mine.append(a)
                traced.append(a.pattern is not None and _differentiable(v))
                outer = outer or isinstance(v, Tracer)
            else:
                primals.append(a)
                mine.append(None)
                traced.append(False)
                outer = outer or isinstance(a, Tracer)
        ans = prim(*primals, **params) if outer else prim.impl(*primals, **params)
        local, kind = None, "linear"
        if any(traced) and not prim.nondiff:
            decl = prim.sparsity if prim.sparsity is not None else _DENSE_DECL
            plain_ans = tuple(map(_plain, ans)) if prim.multiple_results else _plain(ans)
            local = decl.local(prim, [_plain(p) for p in primals], plain_ans, params,
                               tuple(traced))
            kind = _second_order(prim, decl)
            if self.record and kind == "multilinear" and hasattr(decl, "expansion"):
                terms = decl.expansion(prim, [_plain(p) for p in primals], _plain(ans), params)
                if terms is not None:
                    kind = ("terms",) + terms
        if prim.multiple_results:
            return tuple(self._result(a, None if local is None else local[k], mine, kind, prim)
                         for k, a in enumerate(ans))
        return self._result(ans, local, mine, kind, prim)

    def _result(self, ans, local, mine, kind, prim):
        if local is None:
            return self._new(ans, None, (), "linear")
        m = int(np.size(_plain(ans)))
        pattern = None
        parents = []
        for i, (entry, a) in enumerate(zip(local, mine)):
            if entry is None or a is None or a.pattern is None:
                continue
            factor = _factor(entry, m, a.pattern.shape[0])
            part = _apply(factor, a.pattern, prim.name)
            pattern = part if pattern is None else pattern + part
            parents.append((i, a.node, factor))
        if pattern is not None and len(parents) > 1:
            pattern.sum_duplicates()
        return self._new(ans, pattern, tuple(parents), kind)

    # -- Hessian patterns ------------------------------------------------------------------------
    def hessian_pattern(self, out):
        """The pattern of the Hessian of the scalar ``out`` (a tracer of this trace)."""
        if not self.record:
            raise RuntimeError("hessian_pattern needs a PatternTrace(record=True)")
        terms = []
        if isinstance(out, PatternTracer) and out._trace is self and out.pattern is not None:
            live = {out.node: np.ones(1, bool)}
            for v in range(out.node, -1, -1):
                d = live.pop(v, None)
                if d is None or not d.any():
                    continue
                pattern, parents, kind = self.nodes[v]
                if kind != "linear" and parents:
                    self._curvature(terms, pattern, parents, kind, np.flatnonzero(d))
                for _, u, factor in parents:
                    lu = _pull(factor, d, self.nodes[u][0].shape[0])
                    if u in live:
                        live[u] |= lu
                    else:
                        live[u] = lu
        h = empty(self.n, self.n)
        for t in terms:
            h = h + t
        h.sum_duplicates()
        return h

    def _curvature(self, terms, pattern, parents, kind, rows):
        """The input pairs that meet in the live elements ``rows`` of one node."""
        if kind == "nonlinear":
            q = pattern[rows]
            terms.append(q.T @ q)
            return
        by_arg = {i: (u, f) for i, u, f in parents}
        if kind[0] == "terms":  # a product listed term by term: operands meet within a term
            _, owner, sources = kind
            live = np.zeros(pattern.shape[0], bool)
            live[rows] = True
            on = live[owner]
            args = sorted(by_arg)
            e = {i: self.nodes[by_arg[i][0]][0][sources[i][on]] for i in args}
            for k, i in enumerate(args):
                for j in args[k + 1:]:
                    t = e[i].T @ e[j]
                    terms.append(t)
                    terms.append(t.T)
            return
        if kind == "multilinear":
            args = sorted(by_arg)
            pairs = [(a, b) for k, a in enumerate(args) for b in args[k + 1:]]
        else:
            pairs = [p for p in kind if p[0] in by_arg and p[1] in by_arg]
        parts = {}

        def part(i):
            if i not in parts:
                u, f = by_arg[i]
                parts[i] = _apply(f, self.nodes[u][0], "")[rows]
            return parts[i]
        for i, j in pairs:
            t = part(i).T @ part(j)
            terms.append(t)
            if i != j:
                terms.append(t.T)


class PatternTracer(ArrayTracer):
    """A value during sparsity detection: its example ``value`` and its ``pattern``."""

    __slots__ = ("value", "pattern", "_trace", "node")

    def __init__(self, value, pattern, trace, node=None):
        self.value = value
        self.pattern = pattern
        self._trace = trace
        self.node = node

    def __repr__(self):
        nnz = 0 if self.pattern is None else self.pattern.nnz
        return f"PatternTracer({self.value!r}, {nnz} dependencies)"


class _Dense:
    """The declaration of a primitive that has none: every element on every element."""

    hessian = None

    def local(self, prim, primals, ans, params, traced):
        entry = [DENSE if t else None for t in traced]
        return [entry for _ in ans] if prim.multiple_results else entry


_DENSE_DECL = _Dense()


# the second order a primitive's linearity gives (its record's one fact); a declaration's
# ``hessian`` says it for the others
_BY_LINEARITY = {"linear": "linear", "piecewise": "linear", "bilinear": "multilinear"}


def _second_order(prim, decl):
    h = _BY_LINEARITY.get(prim.linearity)
    if h is not None:
        return h
    return decl.hessian or "nonlinear"


# -- local factors ----------------------------------------------------------------------------------
def _factor(entry, m, size):
    """A declaration's entry as ``SAME``, a ``DenseFactor`` or a boolean ``csr_array`` (m, size)."""
    if isinstance(entry, str):
        if entry == DENSE:
            return DenseFactor(m)
        if entry != SAME or m != size:
            raise ValueError(f"a sparsity declaration gave {entry!r} for {m} elements from {size}")
        return SAME
    if isinstance(entry, np.ndarray):
        g = entry.astype(np.intp, copy=False).ravel()
        if g.size != m:
            raise ValueError(f"a sparsity declaration gave {g.size} sources for {m} elements")
        keep = g >= 0
        if keep.all():
            return sp.csr_array((np.ones(m, bool), g, np.arange(m + 1)), shape=(m, size))
        indptr = np.concatenate([[0], np.cumsum(keep)])
        return sp.csr_array((np.ones(int(keep.sum()), bool), g[keep], indptr), shape=(m, size))
    tag, a, b = entry
    if tag == "csr":
        s = sp.csr_array((np.ones(len(b), bool), b, a), shape=(m, size))
    else:
        s = sp.coo_array((np.ones(len(a), bool), (a, b)), shape=(m, size)).tocsr()
    s.sum_duplicates()
    return s


def _apply(factor, p, name):
    """``S @ P``: the pattern of the result from the argument's pattern ``p``."""
    if factor is SAME:
        return p
    if isinstance(factor, DenseFactor):
        return _dense(factor.m, p, name)
    if factor.shape[0] == 0:
        return empty(0, p.shape[1])
    return factor @ p


class DenseFactor:
    """Every one of ``m`` result elements depends on every element of the argument."""

    __slots__ = ("m",)

    def __init__(self, m):
        self.m = m


def _dense(m, p, name):
    """Every one of ``m`` rows depends on every input any row of ``p`` depends on."""
    cols = np.unique(p.indices)
    if m * cols.size > MAX_ENTRIES:
        raise ValueError(
            f"sparsity: '{name}' has no sparsity declaration that keeps its result sparse, "
            f"and every one of its {m} elements depends on {cols.size} inputs ({m * cols.size} "
            f"dependencies): the Jacobian is dense. Use wg.jacobian, or wg.jvp / wg.vjp "
            f"without forming it, or declare the primitive's pattern (docs/sparse.md).")
    return sp.csr_array((np.ones(m * cols.size, bool), np.tile(cols, m),
                         np.arange(m + 1) * cols.size), shape=(m, p.shape[1]))


def _pull(factor, d, size):
    """The elements of an argument that live elements ``d`` of the result read (``Sᵀ d``)."""
    if factor is SAME:
        return d.copy()
    if isinstance(factor, DenseFactor):
        return np.full(size, bool(d.any()))
    return (factor.T @ d.astype(np.int32)) > 0


def stack_patterns(patterns, sizes, n):
    """The Jacobian pattern: the outputs' patterns one above the other (``None``: none)."""
    blocks = [empty(s, n) if p is None else p for p, s in zip(patterns, sizes)]
    if not blocks:
        return empty(0, n)
    j = blocks[0] if len(blocks) == 1 else sp.vstack(blocks, format="csr")
    j = sp.csr_array(j, dtype=bool)
    j.sum_duplicates()
    j.sort_indices()
    return j
