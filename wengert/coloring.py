"""Colourings of sparsity patterns: how few derivative passes a sparse Jacobian or Hessian
takes (Gebremedhin, Manne and Pothen, "What color is your Jacobian? Graph coloring for
computing derivatives", SIAM Review 47(4), 2005).

* ``column_coloring`` (forward mode): columns that share no row may share a colour, since
  one forward pass with the sum of their unit directions reads each of them off its own
  rows. A distance-2 colouring of the bipartite row/column graph (a colouring of the column
  intersection graph ``AᵀA``, never formed).
* ``row_coloring`` (reverse mode): the same for the rows, one reverse sweep per colour.
* ``star_coloring`` (symmetric Hessians): a distance-1 colouring of the adjacency graph in
  which every path on four vertices takes at least three colours. Each entry ``H[i, j]``
  is then read directly off the product with one of the two colours' directions, and
  symmetry makes far fewer colours do: an arrowhead needs 2, where columns need n.

Vertices are coloured in rounds, vectorised with scipy.sparse: a round takes a set of
vertices whose choices cannot affect one another and gives each the smallest colour its
rule allows, for the whole set at once. For a banded pattern the rounds are the residue
classes of the index modulo the band's reach -- a greedy colouring in a valid order, which
is optimal on full bands (3 colours for a tridiagonal Jacobian, 5 for a pentadiagonal one)
and takes a handful of rounds at any n. Other patterns take the vertices largest-first
(most neighbours first, ties at random but reproducibly), in rounds of local maxima.

Pure NumPy and SciPy: nothing here knows about differentiation.
"""
import numpy as np
import scipy.sparse as sp

__all__ = ["as_pattern", "column_coloring", "row_coloring", "star_coloring", "color",
           "is_column_coloring", "is_star_coloring", "star_sources"]

BAND_ROUNDS = 256  # a band whose reach needs more rounds than this is coloured by priorities


def as_pattern(sparsity, square=False):
    """A sparsity pattern (scipy.sparse matrix, or an array whose nonzeros are the
    pattern) as a canonical boolean ``csr_array``: sorted indices, no duplicates."""
    if sp.issparse(sparsity):
        a = sp.csr_array(sparsity)
        a = sp.csr_array((a.data != 0, a.indices, a.indptr), shape=a.shape)
    else:
        arr = np.asarray(sparsity)
        if arr.ndim != 2:
            raise ValueError(f"a sparsity pattern is a 2-D matrix, got shape {arr.shape}")
        a = sp.csr_array(arr != 0)
    a.sum_duplicates()
    a.eliminate_zeros()
    a.sort_indices()
    a.data = a.data.astype(bool, copy=False)
    if square and a.shape[0] != a.shape[1]:
        raise ValueError(f"a Hessian's pattern is square, got shape {a.shape}")
    return a


def color(sparsity, mode="column"):
    """The colouring for ``mode``: ``"column"`` (forward), ``"row"`` (reverse) or
    ``"star"`` (a symmetric Hessian); an int array, one colour per column (row)."""
    if mode == "column":
        return column_coloring(sparsity)
    if mode == "row":
        return row_coloring(sparsity)
    if mode == "star":
        return star_coloring(sparsity)
    raise ValueError(f"mode must be 'column', 'row' or 'star', got {mode!r}")


# -- shared pieces ------------------------------------------------------------------------------------
def _smallest_missing(f):
    """Per row of the canonical boolean csr ``f`` (rows: vertices, columns: colours they may
    not take), the smallest colour that is not there."""
    counts = np.diff(f.indptr)
    out = counts.copy()  # a row holding 0..k-1 gets k
    if f.nnz:
        starts = np.repeat(f.indptr[:-1], counts)
        pos = np.arange(f.nnz) - starts
        cand = np.where(f.indices != pos, pos, np.repeat(counts, counts))
        nonempty = counts > 0
        out[nonempty] = np.minimum.reduceat(cand, f.indptr[:-1][nonempty])
    return out


def _colour_sets(rows, colours, n_rows, k):
    """The canonical boolean csr (n_rows, k) with an entry at each (row, colour) given."""
    s = sp.csr_array((np.ones(rows.size, bool), (rows, colours)), shape=(n_rows, max(k, 1)))
    s.sum_duplicates()
    s.sort_indices()
    return s


def _row_max(a, values):
    """``max(values[j] for j in row i of a)`` per row (-1 for an empty row)."""
    out = np.full(a.shape[0], -1, values.dtype)
    counts = np.diff(a.indptr)
    nonempty = counts > 0
    if a.nnz:
        out[nonempty] = np.maximum.reduceat(values[a.indices], a.indptr[:-1][nonempty])
    return out


def _priorities(degree, seed=0):
    """Distinct integer priorities: larger degree first, ties in a fixed random order."""
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.permutation(degree.size), degree))
    prio = np.empty(degree.size, np.int64)
    prio[order] = np.arange(degree.size)
    return prio


# -- column and row colouring (distance 2) ------------------------------------------------------------
def column_coloring(sparsity):
    """Colours of the columns such that no two columns of one colour share a row."""
    a = as_pattern(sparsity)
    m, n = a.shape
    colors = np.full(n, -1, np.intp)
    at = sp.csr_array(a.T)
    at.sort_indices()
    used = np.diff(at.indptr) > 0
    colors[~used] = 0  # a column in no row may take any colour
    if not used.any():
        return colors
    counts = np.diff(a.indptr)
    full = counts > 0
    first = a.indices[a.indptr[:-1][full]]
    last = a.indices[a.indptr[1:][full] - 1]
    reach = int((last - first).max()) + 1  # columns this far apart never share a row
    if reach <= BAND_ROUNDS:
        cls = np.arange(n) % reach
        for r in range(reach):
            _colour_distance2(a, at, colors, np.flatnonzero(used & (cls == r)))
        return colors
    prio = _priorities(at @ counts)  # sum of the row lengths: a bound on the neighbours
    slow = _Patience()
    while (colors < 0).any() and not slow.gives_up(colors):
        pm = np.where(colors < 0, prio, -1)
        best = _row_max(at, _row_max(a, pm))  # the largest uncoloured priority 2 steps away
        _colour_distance2(a, at, colors, np.flatnonzero((colors < 0) & (best == pm)))
    return colors


class _Patience:
    """Rounds that colour almost nothing mean a near-clique (a dense row), which needs about
    as many colours as it has vertices: after ``ROUNDS`` of them in a row, each remaining
    vertex gets a colour of its own. That is a valid column, row and star colouring (a
    colour used once can be in no conflict and on no two-coloured path), found at once
    instead of in a round per vertex."""

    ROUNDS = 8

    def __init__(self):
        self.left = None
        self.idle = 0

    def gives_up(self, colors):
        left = int((colors < 0).sum())
        if self.left is not None:
            self.idle = self.idle + 1 if self.left - left < max(1, left / 100) else 0
        self.left = left
        if self.idle < self.ROUNDS:
            return False
        todo = np.flatnonzero(colors < 0)
        colors[todo] = colors.max() + 1 + np.arange(todo.size)
        return True


def row_coloring(sparsity):
    """Colours of the rows such that no two rows of one colour share a column."""
    return column_coloring(as_pattern(sparsity).T)


def _colour_distance2(a, at, colors, batch):
    """Give each column in ``batch`` (no two of which share a row) the smallest colour
    that no coloured column sharing a row with it has."""
    if batch.size == 0:
        return
    done = colors[a.indices] >= 0
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))[done]
    k = int(colors.max()) + 1 if (colors >= 0).any() else 1
    in_row = _colour_sets(rows, colors[a.indices[done]], a.shape[0], k)
    forbidden = at[batch] @ in_row
    forbidden.sum_duplicates()
    forbidden.sort_indices()
    colors[batch] = _smallest_missing(forbidden)


def is_column_coloring(sparsity, colors):
    """Whether no two columns of one colour share a row."""
    a = as_pattern(sparsity)
    rows = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    keys = rows.astype(np.int64) * (int(np.max(colors, initial=0)) + 1) + colors[a.indices]
    return np.unique(keys).size == keys.size


# -- star colouring -----------------------------------------------------------------------------------
def _adjacency(sparsity):
    """The symmetric pattern without its diagonal, canonical."""
    a = as_pattern(sparsity, square=True)
    g = sp.csr_array(a + a.T)
    g.setdiag(False)
    g.eliminate_zeros()
    g.sum_duplicates()
    g.sort_indices()
    return g


def star_coloring(sparsity):
    """A star colouring of a symmetric pattern (its diagonal aside): adjacent vertices
    differ, and every path on four vertices takes at least three colours."""
    g = _adjacency(sparsity)
    n = g.shape[0]
    colors = np.full(n, -1, np.intp)
    deg = np.diff(g.indptr)
    colors[deg == 0] = 0
    if not (deg > 0).any():
        return colors
    rows = np.repeat(np.arange(n), deg)
    reach = 3 * int(np.abs(rows - g.indices).max()) + 1  # vertices 4 steps apart or more
    if reach <= BAND_ROUNDS:
        cls = np.arange(n) % reach
        for r in range(reach):
            batch = np.flatnonzero((colors < 0) & (cls == r))
            if batch.size:
                colors[batch] = _star_choice(g, colors, batch)
    else:
        prio = _priorities(deg)
        slow = _Patience()
        while (colors < 0).any() and not slow.gives_up(colors):
            _star_round(g, colors, prio)
    if int((deg.astype(np.int64) + 1) @ (deg + 1)) <= 16 * (g.nnz + n):
        # where it is cheap (no hub), a distance-2 colouring is a star colouring too, and
        # on a band the optimal one (2b + 1 colours): keep the fewer
        d2 = column_coloring(g + sp.eye_array(n, dtype=bool, format="csr"))
        if d2.max() < colors.max():
            return d2
    return colors


def _star_choice(g, colors, batch):
    """The smallest colour the greedy star rule (GMP 2005, Algorithm 4.1) allows each
    vertex v of ``batch``, against the colours given so far. For each neighbour w of v it
    forbids w's colour and, for each coloured neighbour x of w: x's colour when w is not
    coloured yet, or when x has another neighbour of w's colour (v would close a
    two-coloured path x', x, w, v)."""
    n = g.shape[0]
    coloured = colors >= 0
    if not coloured.any():
        return np.zeros(batch.size, np.intp)
    k = int(colors.max()) + 1
    w = np.repeat(np.arange(n), np.diff(g.indptr))  # each edge (w, x), both ways
    x = g.indices
    cnt = _neighbour_colours(g, colors, k)
    seen = coloured[x]
    pass_on = seen & ~coloured[w]
    both = seen & coloured[w]
    twice = both.copy()
    twice[both] = _lookup(cnt, x[both], colors[w[both]], k) >= 2
    cw = np.flatnonzero(coloured)
    t_rows = np.concatenate([w[pass_on], w[twice], cw])
    t_cols = np.concatenate([colors[x[pass_on]], colors[x[twice]], colors[cw]])
    passed = _colour_sets(t_rows, t_cols, n, k)
    forbidden = g[batch] @ passed
    forbidden.sum_duplicates()
    forbidden.sort_indices()
    return _smallest_missing(forbidden)


def _neighbour_colours(g, colors, k):
    """``cnt[v, c]``: how many neighbours of ``v`` have colour ``c`` (canonical csr)."""
    v = np.repeat(np.arange(g.shape[0]), np.diff(g.indptr))
    c = colors[g.indices]
    on = c >= 0
    cnt = sp.csr_array((np.ones(int(on.sum()), np.int64), (v[on], c[on])),
                       shape=(g.shape[0], max(k, 1)))
    cnt.sum_duplicates()
    cnt.sort_indices()
    return cnt


def _lookup(cnt, rows, cols, k):
    """``cnt[rows, cols]`` for a canonical csr, vectorised (0 where absent)."""
    if cnt.nnz == 0 or rows.size == 0:
        return np.zeros(rows.size, np.int64)
    k = cnt.shape[1]
    keys = np.repeat(np.arange(cnt.shape[0], dtype=np.int64), np.diff(cnt.indptr)) * k \
        + cnt.indices
    q = rows.astype(np.int64) * k + cols
    pos = np.minimum(np.searchsorted(keys, q), keys.size - 1)
    return np.where(keys[pos] == q, cnt.data[pos], 0)


def _within(g, values, steps):
    """``max(values)`` over each vertex and the vertices ``steps`` edges from it."""
    for _ in range(steps):
        values = np.maximum(values, _row_max(g, values))
    return values


def _star_round(g, colors, prio):
    """One round for a pattern without a narrow band: every uncoloured vertex tries the
    colour the rule gives it against the colours so far; those whose choices clash (see
    ``_star_violations``) are uncoloured again, but never the vertices that are local
    maxima of priority within 3 steps: no two of those can affect each other, so the
    round colours at least them, as the sequential greedy would in priority order."""
    todo = colors < 0
    pm = np.where(todo, prio, -1)
    safe = todo & (_within(g, pm, 3) == pm)
    batch = np.flatnonzero(todo)
    colors[batch] = _star_choice(g, colors, batch)
    tentative = todo & ~safe
    while True:
        drop = _star_violations(g, colors) & tentative
        if not drop.any():
            break
        colors[drop] = -1
        tentative &= ~drop
    if _star_violations(g, colors).any():  # pragma: no cover - would be a bug here
        raise RuntimeError("star colouring: the safe vertices clash; please report this")


def _star_violations(g, colors):
    """The vertices in a clash of a partial colouring: adjacent vertices of one colour, a
    path on four coloured vertices in two colours, or two vertices of one colour next to
    the same uncoloured vertex (which the greedy rule keeps apart, so that it can still be
    coloured)."""
    n = g.shape[0]
    bad = np.zeros(n, bool)
    coloured = colors >= 0
    if not coloured.any():
        return bad
    k = int(colors.max()) + 1
    w = np.repeat(np.arange(n), np.diff(g.indptr))
    x = g.indices
    cw, cx = colors[w], colors[x]
    both = coloured[w] & coloured[x]
    same = both & (cw == cx)
    bad[w[same]] = True
    cnt = _neighbour_colours(g, colors, k)
    # the middle edge (w, x) of a two-coloured path: w has another neighbour of x's colour
    # and x another of w's
    mid = both & ~same
    mid[mid] = (_lookup(cnt, w[mid], cx[mid], k) >= 2) & (_lookup(cnt, x[mid], cw[mid], k) >= 2)
    bad[w[mid]] = True
    keys = [w[mid].astype(np.int64) * k + cx[mid]]  # (vertex, colour) whose holders clash
    # two neighbours of one colour around an uncoloured vertex
    open_ = ~coloured[w] & coloured[x]
    doubled = open_.copy()
    doubled[open_] = _lookup(cnt, w[open_], cx[open_], k) >= 2
    keys.append(w[doubled].astype(np.int64) * k + cx[doubled])
    keys = np.concatenate(keys)
    if keys.size:
        on = coloured[x]
        hit = np.zeros(x.size, bool)
        hit[on] = np.isin(w[on].astype(np.int64) * k + cx[on], keys)
        bad[x[hit]] = True
    return bad


def is_star_coloring(sparsity, colors):
    """Whether ``colors`` is a star colouring of the symmetric pattern: every entry is
    then recoverable (see ``star_sources``)."""
    g = _adjacency(sparsity)
    colors = np.asarray(colors)
    if (colors < 0).any():
        return False
    return not _star_violations(g, colors).any()


def star_sources(sparsity, colors):
    """For each stored entry ``(i, j)`` of the canonical pattern (csr order), where to read
    ``H[i, j]`` in the compressed ``B = (H S)ᵀ`` (``B[c, v]``: row ``v`` of ``H`` summed
    over the columns of colour ``c``): the flat index ``c * n + v`` into ``B``. The
    diagonal reads ``B[c(i), i]``; an off-diagonal entry ``B[c(j), i]`` when ``j`` is the
    only neighbour of ``i`` of its colour, else ``B[c(i), j]`` (a star colouring makes one
    of the two hold)."""
    a = as_pattern(sparsity, square=True)
    n = a.shape[0]
    colors = np.asarray(colors, np.intp)
    g = _adjacency(a)
    k = int(colors.max(initial=0)) + 1
    cnt = _neighbour_colours(g, colors, k)
    i = np.repeat(np.arange(n), np.diff(a.indptr))
    j = a.indices
    ci, cj = colors[i], colors[j]
    direct = (i == j) | (_lookup(cnt, i, cj, k) == 1)
    ok = direct | (_lookup(cnt, j, ci, k) == 1)
    if not ok.all():
        raise ValueError("the colouring is not a star colouring of this pattern")
    return np.where(direct, cj.astype(np.int64) * n + i, ci.astype(np.int64) * n + j)
