"""Colourings of sparsity patterns: how few derivative passes a sparse Jacobian or Hessian
takes (Gebremedhin, Manne and Pothen, "What color is your Jacobian? Graph coloring for
computing derivatives", SIAM Review 47(4), 2005).

* ``column_coloring`` (forward mode): columns that share no row may share a colour, since
  one forward pass with the sum of their unit directions reads each of them off its own
  rows. A distance-2 colouring of the bipartite row/column graph (a colouring of the column
  intersection graph ``AᵀA``, formed only where it is small, for the orders).
* ``row_coloring`` (reverse mode): the same for the rows, one reverse sweep per colour.
* ``star_coloring`` (symmetric Hessians): a distance-1 colouring of the adjacency graph in
  which every path on four vertices takes at least three colours. Each entry ``H[i, j]``
  is then read directly off the product with one of the two colours' directions, and
  symmetry makes far fewer colours do: an arrowhead needs 2, where columns need n.

Each is the fewest colours of a few greedy colourings (each vertex in turn takes the
smallest colour its rule allows), stopping early at a lower bound (the widest row; for a
star colouring 3 where a path on four vertices exists):

* a banded pattern first takes its vertices by their index modulo the band's reach, one
  vectorised round per residue class -- optimal on full bands (3 colours for a tridiagonal
  Jacobian, 5 for a pentadiagonal one), a handful of rounds at any n;
* then the classical orders (Gebremedhin, Manne and Pothen): largest first,
  the natural order, and, where the graph is small enough to walk in Python, smallest
  last and incidence degree. Degrees are those of the column intersection graph ``AᵀA``
  for columns, of the adjacency graph for stars.

The sequential passes are Python loops whose steps read sets of colours, not the
neighbours' neighbours: a column looks at its rows' colour sets (starting at the largest
of their smallest free colours), a star step at per-vertex colour sets kept up to date as
vertices are coloured. So a dense row or a hub costs its size once, and the time grows with
the nonzeros, never with the square of a row. No colouring gives up and hands out a
colour per vertex: the result is always one of the greedy colourings.

Pure NumPy and SciPy: nothing here knows about differentiation.
"""
import heapq

import numpy as np
import scipy.sparse as sp

__all__ = ["as_pattern", "column_coloring", "row_coloring", "star_coloring", "color",
           "is_column_coloring", "is_star_coloring", "star_sources"]

BAND_ROUNDS = 256  # a band whose reach needs more rounds than this is coloured by orders
GRAPH_BUDGET = 2 * 10 ** 6  # the column intersection graph is formed up to this size
MASK_COLOURS = 1024  # up to this many possible colours, a row's colours are kept as bits
ORDER_BUDGET = 2 * 10 ** 6  # smallest-last and incidence-degree orders up to this many edges


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
def _banded(reach, n):
    """Whether the band rounds pay: each round scans the whole pattern, so ``reach``
    rounds cost ``reach`` times the nonzeros. They are for long bands (a tridiagonal
    Jacobian at any n); a pattern whose "band" spans most of it (hand tracking's 26 dense
    pose columns beside 200 barycentric ones: 226 rounds, 1.2 s) goes to the orders."""
    return reach <= min(BAND_ROUNDS, max(16, n // 8))


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


# -- column and row colouring (distance 2) ------------------------------------------------------------
def column_coloring(sparsity):
    """Colours of the columns such that no two columns of one colour share a row: the
    fewest of the greedy colourings tried (see the module docstring)."""
    a = as_pattern(sparsity)
    m, n = a.shape
    at = sp.csr_array(a.T)
    at.sort_indices()
    counts = np.diff(a.indptr)
    if not counts.any():
        return np.zeros(n, np.intp)
    lower = int(counts.max())  # a row's columns all differ: never fewer colours than this
    best = None
    full = counts > 0
    first = a.indices[a.indptr[:-1][full]]
    last = a.indices[a.indptr[1:][full] - 1]
    reach = int((last - first).max()) + 1  # columns this far apart never share a row
    if _banded(reach, n):
        best = _band_columns(a, at, reach)
        if best.max() + 1 <= lower:
            return best
    work = int(counts.astype(np.int64) @ counts)  # the column intersection graph's size
    graph = _intersection_graph(a, at) if work <= GRAPH_BUDGET else None
    for order in _orders(graph, at, counts):
        c = _greedy_columns(at, order, m)
        if best is None or c.max() < best.max():
            best = c
        if best.max() + 1 <= lower:
            break
    return best


def _band_columns(a, at, reach):
    """The greedy colouring taking the columns by their index modulo ``reach``, one
    vectorised round per residue (columns ``reach`` apart share no row)."""
    n = a.shape[1]
    colors = np.full(n, -1, np.intp)
    used = np.diff(at.indptr) > 0
    colors[~used] = 0
    cls = np.arange(n) % reach
    for r in range(reach):
        _colour_distance2(a, at, colors, np.flatnonzero(used & (cls == r)))
    return colors


def _intersection_graph(a, at):
    """The column intersection graph ``AᵀA`` without its diagonal (canonical csr)."""
    g = sp.csr_array(at.astype(np.int32) @ a.astype(np.int32) != 0)
    g.setdiag(False)
    g.eliminate_zeros()
    g.sort_indices()
    return g


def _orders(graph, at, counts):
    """Vertex orders for the greedy colourings, the cheap first: largest first (by degree
    in ``graph``, or, without it, by the sum of the row lengths, which bounds it), the
    natural order, and on ``graph`` (when given) smallest last and incidence degree."""
    if graph is not None:
        degree = np.diff(graph.indptr)
    else:
        degree = at @ counts
    yield np.argsort(-degree, kind="stable")
    yield np.arange(at.shape[0])
    if graph is not None:
        ptr, idx = graph.indptr.tolist(), graph.indices.tolist()
        yield _smallest_last(ptr, idx)
        yield _incidence_degree(ptr, idx)


def _greedy_columns(at, order, m):
    """The greedy distance-2 colouring in ``order``: each column takes the smallest colour
    that no column sharing a row with it has. Each row keeps the set of its colours and the
    smallest colour not in it, where the search starts: a column's step costs its number
    of rows times the colours it tries, not its distance-2 degree (a dense row stays
    linear)."""
    ptr, idx = at.indptr.tolist(), at.indices.tolist()
    colors = _greedy_columns_masks(ptr, idx, order, m)
    if colors is not None:
        return colors
    sets = [None] * m
    mex = [0] * m
    colors = [0] * at.shape[0]
    for v in order.tolist():
        rows = idx[ptr[v]:ptr[v + 1]]
        if not rows:
            continue
        c = max(mex[r] for r in rows)
        taken = [s for s in (sets[r] for r in rows) if s]
        while any(c in s for s in taken):
            c += 1
        colors[v] = c
        for r in rows:
            s = sets[r]
            if s is None:
                s = sets[r] = set()
            s.add(c)
            if c == mex[r]:
                k = c + 1
                while k in s:
                    k += 1
                mex[r] = k
    return np.array(colors, np.intp)


def _greedy_columns_masks(ptr, idx, order, m):
    """``_greedy_columns`` while the colours are few: each row's colours as the bits of
    one int, so a column's step is two plain loops over its rows (an OR, then setting its
    bit), with no sets or generators: the same colouring, several times sooner (bundle
    adjustment's 55,710 columns, 923,447 entries). ``None`` once a colour passes
    ``MASK_COLOURS``."""
    masks = [0] * m
    colors = [0] * (len(ptr) - 1)
    for v in order.tolist():
        rows = idx[ptr[v]:ptr[v + 1]]
        if not rows:
            continue
        taken = 0
        for r in rows:
            taken |= masks[r]
        bit = ~taken & (taken + 1)  # the lowest colour no row of v has
        c = colors[v] = bit.bit_length() - 1
        if c >= MASK_COLOURS:  # many colours: the ints grow long, the sets do better
            return None
        for r in rows:
            masks[r] |= bit
    return np.array(colors, np.intp)


def _smallest_last(ptr, idx):
    """Matula and Beck's smallest-last order: repeatedly remove a vertex of least degree
    among those left (ties: the lowest index); colour in the reverse of removal. A heap
    with stale entries skipped: O(edges log n)."""
    n = len(ptr) - 1
    deg = [ptr[v + 1] - ptr[v] for v in range(n)]
    heap = [(d, v) for v, d in enumerate(deg)]
    heapq.heapify(heap)
    gone = [False] * n
    removed = []
    while heap:
        d, v = heapq.heappop(heap)
        if gone[v] or d != deg[v]:
            continue
        gone[v] = True
        removed.append(v)
        for w in idx[ptr[v]:ptr[v + 1]]:
            if not gone[w]:
                deg[w] -= 1
                heapq.heappush(heap, (deg[w], w))
    return np.array(removed[::-1], np.intp)


def _incidence_degree(ptr, idx):
    """The incidence-degree order: next the vertex with the most neighbours already
    ordered (ties: the larger degree, then the lowest index). A heap with stale entries
    skipped: O(edges log n)."""
    n = len(ptr) - 1
    deg = [ptr[v + 1] - ptr[v] for v in range(n)]
    inc = [0] * n
    heap = [(0, -d, v) for v, d in enumerate(deg)]
    heapq.heapify(heap)
    done = [False] * n
    out = []
    while heap:
        k, d, v = heapq.heappop(heap)
        if done[v] or -k != inc[v]:
            continue
        done[v] = True
        out.append(v)
        for w in idx[ptr[v]:ptr[v + 1]]:
            if not done[w]:
                inc[w] += 1
                heapq.heappush(heap, (-inc[w], -deg[w], w))
    return np.array(out, np.intp)


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
    differ, and every path on four vertices takes at least three colours. The fewest of
    the greedy colourings tried (see the module docstring)."""
    g = _adjacency(sparsity)
    n = g.shape[0]
    deg = np.diff(g.indptr)
    if not (deg > 0).any():
        return np.zeros(n, np.intp)
    # a lower bound: an edge takes 2 colours, a path on four vertices 3 (the largest
    # degree + 1 is none: neighbours of a vertex may share a colour)
    rows = np.repeat(np.arange(n), deg)
    lower = 3 if _has_path4(g, rows, deg) else 2
    best = None
    reach = 3 * int(np.abs(rows - g.indices).max()) + 1  # vertices 4 steps apart or more
    if _banded(reach, n):
        colors = np.full(n, -1, np.intp)
        colors[deg == 0] = 0
        cls = np.arange(n) % reach
        for r in range(reach):
            batch = np.flatnonzero((colors < 0) & (cls == r))
            if batch.size:
                colors[batch] = _star_choice(g, colors, batch)
        best = colors
        if best.max() + 1 <= lower:
            return best
    work = int(deg.astype(np.int64) @ deg)
    if work <= 16 * (g.nnz + n):
        # where it is cheap (no hub), a distance-2 colouring is a star colouring too, and
        # on a band the optimal one (2b + 1 colours)
        d2 = column_coloring(g + sp.eye_array(n, dtype=bool, format="csr"))
        if best is None or d2.max() < best.max():
            best = d2
        if best.max() + 1 <= lower:
            return best
    ptr, idx = g.indptr.tolist(), g.indices.tolist()
    orders = [lambda: np.argsort(-deg, kind="stable"), lambda: np.arange(n)]
    if g.nnz <= ORDER_BUDGET:
        orders += [lambda: _smallest_last(ptr, idx), lambda: _incidence_degree(ptr, idx)]
    for order in orders:
        c = _greedy_star(ptr, idx, order())
        if best is None or c.max() < best.max():
            best = c
        if best.max() + 1 <= lower:
            break
    return best


def _has_path4(g, w, deg):
    """Whether the graph has a path on four vertices: an edge ``(w, x)`` whose ends have
    other neighbours, distinct ones (two of degree 2 each with the same other neighbour
    are a triangle)."""
    x = g.indices
    both = (deg[w] >= 2) & (deg[x] >= 2)
    if ((deg[w] + deg[x] >= 5) & both).any():
        return True
    total = np.bincount(w, weights=x, minlength=g.shape[0]).astype(np.int64)
    pair = both & (deg[w] == 2) & (deg[x] == 2)
    return bool((total[w[pair]] - x[pair] != total[x[pair]] - w[pair]).any())


def _greedy_star(ptr, idx, order):
    """The sequential greedy star colouring (GMP 2005, Algorithm 4.1) in ``order``: a vertex
    takes the smallest colour not forbidden by its neighbours ``w`` -- ``w``'s colour, and
    then, for a coloured ``w``, the colours ``far[w]`` of its neighbours ``x`` that have
    another neighbour of ``w``'s colour (``v`` would close a two-coloured path through
    ``x, w``); for an uncoloured ``w``, the colours of all its coloured neighbours (two
    neighbours of one vertex never share a colour while it is uncoloured).

    ``seen[x]`` maps each colour among ``x``'s neighbours to the first such neighbour
    (-1 once there are two), and ``far[w]`` is kept up to date as vertices are coloured,
    so a vertex's step reads sets of colours, never its neighbours' neighbours: a hub costs
    its degree once, not once per neighbour."""
    n = len(ptr) - 1
    col = [-1] * n
    seen = [{} for _ in range(n)]
    far = [set() for _ in range(n)]
    for v in order.tolist():
        nbrs = idx[ptr[v]:ptr[v + 1]]
        forbidden = set()
        for w in nbrs:
            cw = col[w]
            if cw >= 0:
                forbidden.add(cw)
                forbidden |= far[w]
            else:
                forbidden.update(seen[w])
        c = 0
        while c in forbidden:
            c += 1
        col[v] = c
        sv = seen[v]
        for x in nbrs:
            cx = col[x]
            if cx >= 0 and sv.get(cx) == -1:  # v has two neighbours of x's colour
                far[x].add(c)
            sx = seen[x]
            first = sx.get(c)
            if first is None:
                sx[c] = v
            elif first >= 0:  # x now has two neighbours of colour c: first and v
                sx[c] = -1
                if cx >= 0:
                    far[first].add(cx)
                    far[v].add(cx)
            elif cx >= 0:
                far[v].add(cx)
    return np.array(col, np.intp)


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
