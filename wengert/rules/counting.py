"""Counting by value: unique, bincount, histogram, histogram_bin_edges.

Which entry is unique, which bin a sample falls in: those are found on the values (plain,
and guarded under graph tracing, so other inputs re-trace).  What is differentiable is
then gathered or summed with the same floating-point operations NumPy uses: the unique
values (from their first occurrence, as JAX), bincount's and histogram's weights, and
histogram's bin edges (which move with the data's min and max, or with ``range``).
Counting a sample has no derivative, so unweighted counts stay plain integers.
"""
import numpy as np

from ..arrays import host_values
from ..core import Tracer
from .calculus import diff
from .conversion import _dtype, _plain, astype
from .grids import linspace
from .indexing import scatter_add, take
from .joining import concatenate
from .nondiff import concrete
from .reductions import cumsum, max as amax, min as amin
from .reshaping import ravel

__all__ = ["unique", "bincount", "histogram", "histogram_bin_edges"]


def _traced(*xs):
    return any(isinstance(x, Tracer) for x in xs)


def _first_index(v, axis, equal_nan, kw):
    return np.unique(v, return_index=True, axis=axis, equal_nan=equal_nan, **dict(kw))[1]


def _unique_part(v, j, axis, equal_nan, kw):
    return np.unique(v, False, True, True, axis, equal_nan=equal_nan, **dict(kw))[j]


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, **kw):
    """``np.unique``: the values are the input's entries at their first occurrence, so a
    repeated value's derivative goes to its first occurrence; indices and counts are
    plain."""
    if not _traced(ar):
        return np.unique(ar, return_index, return_inverse, return_counts, axis,
                         equal_nan=equal_nan, **kw)
    host_values(ar, "wnp.unique")
    kw = tuple(sorted(kw.items()))  # hashable: a graph node's parameters
    idx = concrete(_first_index, ar, axis=axis, equal_nan=equal_nan, kw=kw)
    values = ravel(ar)[idx] if axis is None else take(ar, idx, axis=axis)
    out = [values]
    if return_index:
        out.append(idx)
    for j, want in ((1, return_inverse), (2, return_counts)):
        if want:
            out.append(concrete(_unique_part, ar, j=j, axis=axis, equal_nan=equal_nan, kw=kw))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(x, weights=None, minlength=0):
    """``np.bincount``; traced weights are summed per bin in NumPy's order, in float64 as
    NumPy sums them."""
    if not _traced(x, weights):
        return np.bincount(x, weights, minlength)
    xv = concrete(np.asarray, x) if _traced(x) else np.asarray(x)
    if not _traced(weights):
        return np.bincount(xv, weights, minlength)
    n = np.bincount(xv, _plain(weights), minlength).shape[0]  # NumPy's checks and length
    w = weights if _dtype(weights).kind == "c" else astype(weights, np.float64)
    return scatter_add(w, xv.ravel().astype(np.intp), (n,))


# -- histogram ------------------------------------------------------------------------------
_BLOCK = 65536  # NumPy sums a histogram's weights block by block: so does this


def _outer_edges(a, range, av):
    """NumPy's ``_get_outer_edges`` with the edges traced when they come from traced data
    (its min and max) or a traced ``range``."""
    if range is not None:
        first, last = range
    elif av.size == 0:
        return 0, 1
    else:
        first, last = amin(a), amax(a)
    if _plain(first) == _plain(last):
        first, last = first - 0.5, last + 0.5
    return first, last


def _edges(a, bins, range, av, edges_v):
    """The bin edges, traced where they depend on traced values."""
    if np.ndim(_plain(bins)) == 1:
        return bins if isinstance(bins, Tracer) else edges_v
    if not _traced(a) and not (range is not None and _traced(*range)):
        return edges_v
    first, last = _outer_edges(a, range, av)
    bin_type = np.result_type(_plain(first), _plain(last), av)
    if np.issubdtype(bin_type, np.integer):
        bin_type = np.result_type(bin_type, float)
    return linspace(first, last, edges_v.shape[0], endpoint=True, dtype=bin_type)


def _weighted_counts(av, w, edges_v, uniform):
    """Histogram of traced weights ``w`` over samples ``av``, as NumPy adds them up."""
    ntype = _dtype(w)
    nbins = edges_v.shape[0] - 1
    total = None
    for i in range(0, av.shape[0], _BLOCK):
        tmp_a, tmp_w = av[i:i + _BLOCK], w[i:i + _BLOCK]
        if uniform:  # NumPy's bincount route: each sample's bin, sums in float64
            keep = np.flatnonzero((tmp_a >= edges_v[0]) & (tmp_a <= edges_v[-1]))
            sel = tmp_a[keep]
            idx = np.searchsorted(edges_v, sel, side="right") - 1
            idx[idx == nbins] = nbins - 1  # the last bin includes its right edge
            part = scatter_add(tmp_w[keep] if ntype.kind == "c"
                               else astype(tmp_w[keep], np.float64), idx, (nbins,))
            part = astype(part, ntype) if ntype.kind != "c" else part
        else:  # NumPy's cumulative route: sorted samples, a cumulative sum of weights
            order = np.argsort(tmp_a)
            sa = tmp_a[order]
            cw = concatenate([np.zeros(1, ntype), cumsum(tmp_w[order])])
            at = np.concatenate((sa.searchsorted(edges_v[:-1], "left"),
                                 sa.searchsorted(edges_v[-1:], "right")))
            part = cw[at]
        total = part if total is None else total + part
    if total is None:
        return np.zeros(nbins, ntype)
    return total if uniform else diff(total)


def _plain_range(range):
    return None if range is None else tuple(_plain(r) for r in range)


def _on_host(a, bins, weights, range, what):
    why = "its bins and each sample's bin are read off the values"
    for v in (a, bins, weights) + (() if range is None else tuple(range)):
        host_values(v, what, why)


def histogram(a, bins=10, range=None, density=None, weights=None):
    """``np.histogram``: counts of traced samples are plain (counting has no derivative);
    traced weights and bin edges are differentiated, NumPy's values to the bit."""
    rng_traced = range is not None and _traced(*range)
    if not (_traced(a, bins, weights) or rng_traced):
        return np.histogram(a, bins, range, density, weights)
    _on_host(a, bins, weights, range, "wnp.histogram")
    av = concrete(np.ravel, a) if _traced(a) else np.ravel(a)
    wv = None if weights is None else np.ravel(_plain(weights))
    counts_v, edges_v = np.histogram(av, _plain(bins), _plain_range(range), None, wv)
    edges = _edges(ravel(a) if _traced(a) else av, bins, range, av, edges_v)
    if _traced(weights):
        uniform = np.ndim(_plain(bins)) == 0 and np.can_cast(wv.dtype, complex)
        counts = _weighted_counts(av, ravel(weights), edges_v, uniform)
    else:
        counts = counts_v
    if density:
        db = astype(diff(edges), float) if isinstance(edges, Tracer) else \
            np.array(np.diff(edges), float)
        return counts / db / counts.sum(), edges
    return counts, edges


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """``np.histogram_bin_edges``: traced when they depend on traced data or range."""
    rng_traced = range is not None and _traced(*range)
    if not (_traced(a, bins) or rng_traced):
        return np.histogram_bin_edges(a, bins, _plain_range(range), _plain(weights))
    _on_host(a, bins, weights, range, "wnp.histogram_bin_edges")
    av = concrete(np.ravel, a) if _traced(a) else np.ravel(a)
    edges_v = np.histogram_bin_edges(av, _plain(bins), _plain_range(range), _plain(weights))
    return _edges(ravel(a) if _traced(a) else av, bins, range, av, edges_v)
