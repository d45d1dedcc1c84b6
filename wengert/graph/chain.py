"""The order of a Jacobian chain (seed 004): forward, reverse, or the cheapest in between.

A traced program is a chain of steps, each taking the values still needed ("the state")
to the next state; the derivative of the program is the product of the steps'
Jacobians, ``J_n ... J_2 J_1``.  Forward mode multiplies it from the right (starting
at the inputs), reverse mode from the left (starting at the outputs); any other
bracketing is a mixed mode.  ``chain_order`` finds the cheapest bracketing by the
matrix-chain dynamic programme and counts the multiply-adds of each, as dense matrix
products: the seed's model, in which the shapes alone decide.  (An engine also uses
each Jacobian's structure, an elementwise step's being diagonal; the counts teach the
choice of order, not an engine's running time.)
"""
from __future__ import annotations

import numpy as np

from .graph import Graph, trace

__all__ = ["chain_order", "matrix_chain", "ChainOrder"]

MAX_STAGES = 3000  # the dynamic programme is cubic in the number of steps


def _float_size(value):
    """The number of differentiable (float or complex) numbers in a node's value."""
    if isinstance(value, (tuple, list)):
        return sum(_float_size(v) for v in value)
    a = np.asarray(value) if not hasattr(value, "dtype") else value
    return int(np.prod(np.shape(a), dtype=np.int64)) if a.dtype.kind in "fc" else 0


def _stages(g):
    """``(names, dims)``: one step per operation that changes the state, and the state's
    size before the first step and after each."""
    nodes = g.nodes
    size = [_float_size(n.value) if n.kind != "const" else 0 for n in nodes]
    last = {}  # node -> index of the last node reading it
    for k, n in enumerate(nodes):
        for a in n.args:
            last[a] = k
    outputs = set(g.outputs)
    state = {i for i in g.input_nodes if size[i]}
    dims, names = [sum(size[i] for i in state)], []
    for k, n in enumerate(nodes):
        if n.kind not in ("op", "proj"):
            continue
        new = set(state)
        if size[k] and (k in outputs or last.get(k, -1) > k):
            new.add(k)
        new -= {v for v in new if v not in outputs and last.get(v, -1) <= k}
        if new == state:
            continue  # nothing differentiable changed: an identity, not a step
        state = new
        names.append(n.prim.name if n.kind == "op" else f"{nodes[n.args[0]].prim.name}[]")
        dims.append(sum(size[i] for i in state))
    if names:  # the last state is the output, counted as often as it is returned
        dims[-1] = sum(size[i] for i in g.outputs)
    return names, dims


def matrix_chain(dims):
    """The cheapest bracketing of ``J_n ... J_1`` where ``J_k`` is ``dims[k] x dims[k-1]``:
    ``(cost, bracketing)``, the bracketing a nested tuple of step numbers (1 = first
    applied) and the cost in multiply-adds of dense products.

    >>> matrix_chain([10, 50, 50, 3, 3, 40])   # C tanh(B tanh(A x)), A 50x10, B 3x50, C 40x3
    (10290, (5, (4, ((3, 2), 1))))
    """
    n = len(dims) - 1
    if n < 1:
        return 0, ()
    if n > MAX_STAGES:
        raise ValueError(f"a chain of {n} steps is too long for the cubic dynamic programme "
                         f"(the limit is {MAX_STAGES})")
    # the standard problem on M_1 ... M_n = J_n ... J_1: M_i is p[i-1] x p[i]
    p = np.array(dims[::-1], dtype=float)
    cost = np.zeros((n + 1, n + 1))
    split = np.zeros((n + 1, n + 1), dtype=int)
    for length in range(2, n + 1):
        for i in range(1, n - length + 2):
            j = i + length - 1
            ks = np.arange(i, j)
            c = cost[i, i:j] + cost[i + 1:j + 1, j] + p[i - 1] * p[ks] * p[j]
            best = int(np.argmin(c))
            cost[i, j], split[i, j] = c[best], ks[best]

    # the bracketing as nested pairs of step numbers, built bottom up without recursion
    out, work = [], [(1, n, False)]
    while work:
        a, b, expanded = work.pop()
        if a == b:
            out.append(n + 1 - a)  # M_a is J_(n+1-a)
        elif expanded:
            right = out.pop()
            out.append((out.pop(), right))
        else:
            k = int(split[a, b])
            work += [(a, b, True), (k + 1, b, False), (a, k, False)]
    tree = out[0]
    return _cost(tree, dims), tree


def _cost(tree, dims):
    """Exact multiply-adds of a bracketing (Python integers: no rounding)."""
    total, out, work = 0, [], [(tree, False)]
    while work:
        t, expanded = work.pop()
        if isinstance(t, int):
            out.append((dims[t], dims[t - 1]))
        elif expanded:
            (_, c2), (r1, c1) = out.pop(), out.pop()
            total += r1 * c1 * c2
            out.append((r1, c2))
        else:
            work += [(t, True), (t[1], False), (t[0], False)]
    return total


def _text(tree):
    if isinstance(tree, int):
        return f"J{tree}"
    parts = []
    for s in tree:
        parts.append(_text(s) if isinstance(s, int) else f"({_text(s)})")
    return " ".join(parts)


def _left(n):   # ((J_n J_(n-1)) J_(n-2)) ...: reverse mode
    tree = n
    for k in range(n - 1, 0, -1):
        tree = (tree, k)
    return tree


def _right(n):  # J_n (J_(n-1) (... (J_2 J_1))): forward mode
    tree = 1
    for k in range(2, n + 1):
        tree = (k, tree)
    return tree


class ChainOrder:
    """What ``chain_order`` found: the steps, their Jacobians' shapes, and the cost of
    forward mode, reverse mode and the cheapest bracketing (``best``, ``order``)."""

    def __init__(self, names, dims):
        self.names, self.dims = list(names), list(dims)
        n = len(names)
        self.shapes = [(dims[k], dims[k - 1]) for k in range(1, n + 1)]
        if n == 0:
            self.forward = self.reverse = self.best = 0
            self.tree = ()
        else:
            self.forward = _cost(_right(n), dims) if n > 1 else 0
            self.reverse = _cost(_left(n), dims) if n > 1 else 0
            self.best, self.tree = matrix_chain(dims)
        self.order = _text(self.tree) if n else ""

    @property
    def mode(self):
        """``"forward"``, ``"reverse"`` or ``"mixed"``: which the cheapest order is (a tie
        goes to forward, then reverse)."""
        return ("forward" if self.best == self.forward else
                "reverse" if self.best == self.reverse else "mixed")

    def __repr__(self):
        return (f"<ChainOrder of {len(self.names)} Jacobians: forward {self.forward}, "
                f"reverse {self.reverse}, best {self.best} ({self.mode})>")

    def __str__(self):
        n = len(self.names)
        shapes = " ".join(f"{r}x{c}" for r, c in self.shapes)
        rows = [("forward", self.forward, _text(_right(n)) if n else ""),
                ("reverse", self.reverse, _text(_left(n)) if n else ""),
                (f"best ({self.mode})", self.best, self.order)]
        w = max(len(f"{c:,}") for _, c, _ in rows)
        return "\n".join([f"{n} Jacobians (J1 applied first): {shapes}",
                          f"{'':<14} {'multiply-adds':>{max(w, 13)}}  order"]
                         + [f"{name:<14} {c:>{max(w, 13)},}  {text}" for name, c, text in rows])


def chain_order(f, *example_args, **kwargs):
    """The cheapest order to multiply the Jacobian chain of ``f`` at ``example_args`` (or
    of a traced ``Graph``), against pure forward and pure reverse mode.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> A, B, C = np.ones((50, 10)), np.ones((3, 50)), np.ones((40, 3))
    >>> r = wg.chain_order(lambda x: C @ wnp.tanh(B @ wnp.tanh(A @ x)), np.ones(10))
    >>> r.shapes
    [(50, 10), (50, 50), (3, 50), (3, 3), (40, 3)]
    >>> r.forward, r.reverse, r.best, r.order
    (27790, 126360, 10290, 'J5 (J4 ((J3 J2) J1))')
    """
    g = f if isinstance(f, Graph) else trace(f, *example_args, _transform="wg.chain_order",
                                              **kwargs)
    names, dims = _stages(g)
    return ChainOrder(names, dims)
