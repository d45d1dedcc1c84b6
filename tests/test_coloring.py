"""Colourings on any pattern (issue 32): against plain reference greedy colourings.

The reference below is the textbook greedy written as plainly as possible (sets of
neighbours, the orders by their definitions, GMP 2005's Algorithm 4.1 for stars, loops
over everything): slow and obviously right. ``wengert.coloring`` must give at most 1.1
times the fewest colours of the three classical orders on every pattern family, and a
valid colouring, checked here by brute force from the definitions in docs/sparse.md.
"""
import itertools
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

import wengert as wg
from wengert import coloring


# -- the reference --------------------------------------------------------------------------------
def _csr(p):
    return sp.csr_array(p != 0) if sp.issparse(p) else sp.csr_array(np.asarray(p) != 0)


def intersection_neighbours(p):
    """Columns sharing a row with each column."""
    p = _csr(p)
    nb = [set() for _ in range(p.shape[1])]
    for i in range(p.shape[0]):
        cols = set(p.indices[p.indptr[i]:p.indptr[i + 1]].tolist())
        for c in cols:
            nb[c] |= cols
    for c in range(p.shape[1]):
        nb[c].discard(c)
    return nb


def adjacency_neighbours(s):
    s = _csr(s)
    s = sp.csr_array(s + s.T)
    return [set(s.indices[s.indptr[i]:s.indptr[i + 1]].tolist()) - {i} for i in range(s.shape[0])]


def largest_first(nb):
    return sorted(range(len(nb)), key=lambda v: -len(nb[v]))


def smallest_last(nb):
    left, deg, out = set(range(len(nb))), [len(x) for x in nb], []
    while left:
        v = min(left, key=lambda u: (deg[u], u))
        left.remove(v)
        out.append(v)
        for w in nb[v] & left:
            deg[w] -= 1
    return out[::-1]


def incidence_degree(nb):
    left, inc, out = set(range(len(nb))), [0] * len(nb), []
    while left:
        v = max(left, key=lambda u: (inc[u], len(nb[u]), -u))
        left.remove(v)
        out.append(v)
        for w in nb[v] & left:
            inc[w] += 1
    return out


ORDERS = (largest_first, smallest_last, incidence_degree)


def greedy(nb, order):
    col = [-1] * len(nb)
    for v in order:
        used = {col[w] for w in nb[v]}
        col[v] = next(c for c in itertools.count() if c not in used)
    return col


def greedy_star(nb, order):
    """GMP 2005, Algorithm 4.1, as printed."""
    col = [-1] * len(nb)
    for v in order:
        forbidden = set()
        for w in nb[v]:
            if col[w] >= 0:
                forbidden.add(col[w])
            for x in nb[w] - {v}:
                if col[x] < 0:
                    continue
                if col[w] < 0 or any(col[y] == col[w] for y in nb[x] - {w}):
                    forbidden.add(col[x])
        col[v] = next(c for c in itertools.count() if c not in forbidden)
    return col


def reference(p, mode):
    """{order name: colours} of the reference greedy colourings."""
    if mode == "star":
        nb = adjacency_neighbours(p)
        return {o.__name__: max(greedy_star(nb, o(nb)), default=-1) + 1 for o in ORDERS}
    nb = intersection_neighbours(p if mode == "column" else _csr(p).T)
    return {o.__name__: max(greedy(nb, o(nb)), default=-1) + 1 for o in ORDERS}


def valid_column(p, c):
    """No two columns of one colour share a row (from the definition)."""
    p = _csr(p)
    for i in range(p.shape[0]):
        cols = p.indices[p.indptr[i]:p.indptr[i + 1]]
        if len(set(c[cols].tolist())) != cols.size:
            return False
    return True


def valid_star(s, c):
    """Adjacent vertices differ and every path on four vertices takes at least three
    colours (docs/sparse.md), by enumerating the paths."""
    nb = adjacency_neighbours(s)
    for v in range(len(nb)):
        if any(c[v] == c[w] for w in nb[v]):
            return False
    for a in range(len(nb)):
        for b in nb[a]:
            for d in nb[b] - {a}:
                for e in nb[d] - {a, b}:
                    if len({c[a], c[b], c[d], c[e]}) < 3:
                        return False
    return True


def colours(c):
    return int(np.max(c, initial=-1)) + 1


def check(p, mode):
    ours = coloring.color(p, mode)
    assert (valid_star(p, ours) if mode == "star" else
            valid_column(p if mode == "column" else _csr(p).T, ours))
    ref = reference(p, mode)
    assert colours(ours) <= 1.1 * min(ref.values()), (colours(ours), ref)
    return colours(ours), ref


# -- pattern families -----------------------------------------------------------------------------
def band(n, b):
    return sp.diags_array([np.ones(n - abs(k)) for k in range(-b, b + 1)],
                          offsets=list(range(-b, b + 1)), format="csr")


def bundle_adjustment(p, n, m):
    """Issue 32's pattern: residual j touches camera j % n (11 columns), point j % m (3)
    and its own weight."""
    j = np.arange(p)
    cols = np.c_[11 * (j % n)[:, None] + np.arange(11), 11 * n + 3 * (j % m)[:, None]
                 + np.arange(3), 11 * n + 3 * m + j]
    return sp.csr_array((np.ones(15 * p, bool), (np.repeat(j, 15), cols.ravel())),
                        shape=(p, 11 * n + 3 * m + p))


def hand_tracking(points, pose=26):
    """Each point's 3 residuals touch every pose column and the point's own 2."""
    rows = np.arange(3 * points)
    cols = np.c_[np.tile(np.arange(pose), (rows.size, 1)),
                 pose + 2 * (rows // 3)[:, None] + np.arange(2)]
    return sp.csr_array((np.ones(cols.size, bool), (np.repeat(rows, pose + 2), cols.ravel())),
                        shape=(rows.size, pose + 2 * points))


def stencil(k, dims):
    t, eye = band(k, 1), sp.eye_array(k)
    out = 0
    for d in range(dims):
        term = None
        for e in range(dims):
            f = t if e == d else eye
            term = f if term is None else sp.kron(term, f)
        out = out + term
    return sp.csr_array(out)


def arrowhead(n):
    a = sp.lil_array((n, n))
    a[0, :] = 1
    a[:, 0] = 1
    a.setdiag(1)
    return a.tocsr()


FAMILIES = {
    "banded": lambda: band(300, 2),
    "block": lambda: sp.block_diag([np.ones((6, 6))] * 30, format="csr"),
    "arrowhead": lambda: arrowhead(200),
    "bundle adjustment": lambda: bundle_adjustment(600, 5, 150),
    "hand tracking": lambda: hand_tracking(100),
    "2-D stencil": lambda: stencil(18, 2),
    "3-D stencil": lambda: stencil(6, 3),
    "random sparse": lambda: sp.random_array((300, 300), density=0.015,
                                             rng=np.random.default_rng(3), format="csr"),
}

# for star colourings, whose reference and brute-force check read paths on four vertices
SMALL = {"bundle adjustment": bundle_adjustment(60, 3, 15), "hand tracking": hand_tracking(8)}


@pytest.mark.parametrize("mode", ["column", "row", "star"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_families_within_a_tenth_of_the_best_greedy_order(family, mode):
    p = FAMILIES[family]()
    if mode == "star" and p.shape[0] != p.shape[1]:
        p = SMALL.get(family, p)
        p = sp.csr_array(p.T @ p)  # a Hessian's pattern from the Jacobian's
    k, ref = check(p, mode)
    print(f"{family:18s} {mode:6s} {k:4d} colours; reference {ref}")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 25), st.integers(1, 25), st.floats(0.02, 0.5), st.booleans(),
       st.integers(0, 2 ** 31 - 1))
def test_random_patterns_against_the_greedy_orders(m, n, density, dense_row, seed):
    rng = np.random.default_rng(seed)
    a = sp.random_array((m, n), density=density, rng=rng, format="lil")
    s = sp.random_array((n, n), density=density, rng=rng, format="lil")
    if dense_row:
        a[0, :] = 1
        s[0, :] = 1
    a, s = a.tocsr(), sp.csr_array(s + s.T)
    check(a, "column")
    check(a, "row")
    check(s, "star")


def test_the_issue_reproduction_takes_the_widest_row():
    p = bundle_adjustment(1000, 5, 250)
    assert wg.color(p, "column").max() + 1 == 15  # 1,773 before: a round-by-round give-up


def test_bundle_adjustment_at_ba1_size():
    # ADBench's ba1 shape: 49 cameras, 7,776 points, 31,843 observations
    p = bundle_adjustment(31843, 49, 7776)
    t = time.perf_counter()
    c = wg.color(p, "column")
    print(f"\nBA p = 31,843: {c.max() + 1} column colours in {time.perf_counter() - t:.2f} s")
    assert c.max() + 1 == 15 and coloring.is_column_coloring(p, c)


@pytest.mark.parametrize("points", [191, 192, 1000])
def test_hand_tracking_pattern_does_not_explode(points):
    # 26 pose columns in every row, 2 of its own per point: 28 colours at any size (the
    # old rounds gave every column its own colour from 192 points on)
    p = hand_tracking(points)
    c = wg.color(p, "column")
    assert c.max() + 1 == 28 and coloring.is_column_coloring(p, c)


def test_a_dense_row_costs_linear_time():
    # a dense row over a diagonal: n colours, each column's step starting at the row's
    # smallest free colour (no quadratic search); 4x the size takes about 4x the time
    def run(n):
        p = sp.csr_array(sp.eye_array(n, format="lil") + sp.csr_array(
            (np.ones(n), (np.zeros(n, int), np.arange(n))), shape=(n, n)))
        t = time.perf_counter()
        c = coloring.column_coloring(p)
        assert c.max() + 1 == n and coloring.is_column_coloring(p, c)
        return time.perf_counter() - t
    run(1000)
    small, large = min(run(10_000) for _ in range(2)), min(run(40_000) for _ in range(2))
    assert large < 12 * small + 0.5, (small, large)


def test_wide_band_goes_to_the_orders(monkeypatch):
    """Hand tracking's pattern (ht, issue 32): each residual reads the 26 pose columns and
    its point's 2 barycentric ones, so its "band" spans 226 of 226 columns; the band rounds
    would scan the pattern 226 times (1.2 s), the orders colour it in milliseconds."""
    from wengert import coloring
    pts = 100
    i = np.arange(3 * pts)
    cols = np.c_[np.repeat(2 * (i // 3)[:, None], 1, 1), 2 * (i // 3)[:, None] + 1,
                 2 * pts + np.tile(np.arange(24), (3 * pts, 1))]
    P = sp.csr_array((np.ones(cols.size, bool), (np.repeat(i, cols.shape[1]), cols.ravel())),
                     shape=(3 * pts, 2 * pts + 26))

    def no_rounds(*a):
        raise AssertionError("band rounds on a pattern whose band spans it")
    monkeypatch.setattr(coloring, "_band_columns", no_rounds)
    c = coloring.column_coloring(P)
    assert coloring.is_column_coloring(P, c) and c.max() + 1 == 26
    assert coloring._banded(3, 10 ** 6) and coloring._banded(5, 10)  # long bands keep them


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.floats(0.02, 0.7), st.integers(0, 2 ** 31))
def test_bit_masks_give_the_set_route_colouring(m, n, density, seed):
    """The greedy pass keeps each row's colours as bits while they are few (4x sooner on
    bundle adjustment's pattern); the colouring must be the one the sets give, colour for
    colour, in any order."""
    rng = np.random.default_rng(seed)
    a = coloring.as_pattern(sp.random_array((m, n), density=density, rng=rng) != 0)
    at = sp.csr_array(a.T)
    at.sort_indices()
    order = rng.permutation(n)
    masks = coloring._greedy_columns_masks(at.indptr.tolist(), at.indices.tolist(), order, m)
    real = coloring._greedy_columns_masks
    try:
        coloring._greedy_columns_masks = lambda *a: None  # the set route alone
        sets = coloring._greedy_columns(at, order, m)
    finally:
        coloring._greedy_columns_masks = real
    assert np.array_equal(masks, sets)


def test_bit_masks_hand_over_past_their_colours():
    a = coloring.as_pattern(np.ones((2, coloring.MASK_COLOURS + 5), bool))
    at = sp.csr_array(a.T)
    order = np.arange(a.shape[1])
    assert coloring._greedy_columns_masks(at.indptr.tolist(), at.indices.tolist(), order, 2) \
        is None
    assert np.array_equal(coloring._greedy_columns(at, order, 2), order)
