"""``autograd.scipy.signal.convolve(A, B, axes=None, dot_axes=[(), ()], mode="full")``:
autograd's own N-d convolution, not SciPy's: ``axes`` pairs the axes of ``A`` and ``B``
convolved together, ``dot_axes`` pairs axes summed over (a tensor dot), and every other axis
is kept, ``A``'s first, then ``B``'s, then the convolved ones.

``B``'s sliding windows are a strided view (the primitive ``windows``, whose pullback adds each
window back where it came from: ``unwindows``, its adjoint), contracted with the flipped ``A`` by
one ``tensordot``; every engine differentiates it through those rules, at every order.
"""
import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .... import numpy as wnp
from ....core import primitive

__all__ = ["convolve"]


def _sizes(x, axes):
    return [np.shape(x)[i] for i in axes]


def convolve(A, B, axes=None, dot_axes=[(), ()], mode="full"):
    if mode not in ("valid", "full", "same"):
        raise ValueError(f"Mode {mode} undefined, it can be one of 'valid', 'full', and 'same'")
    if axes is None:
        axes = [list(range(np.ndim(A))), list(range(np.ndim(A)))]
    ax_a, ax_b = [list(a) for a in axes]
    dot_a, dot_b = [list(d) for d in dot_axes]
    la, lb = _sizes(A, ax_a), _sizes(B, ax_b)
    if mode == "valid" and any(b < a for a, b in zip(la, lb)):
        if not all(b <= a for a, b in zip(la, lb)):
            raise ValueError("One array must be larger than the other along all convolved "
                             "dimensions")
        # the larger slides under the smaller: convolution commutes, only the kept axes move
        out = _convolve(B, A, ax_b, ax_a, dot_b, dot_a, "valid")
        n_ib = np.ndim(B) - len(ax_b) - len(dot_b)
        n_ia = np.ndim(A) - len(ax_a) - len(dot_a)
        order = (list(range(n_ib, n_ib + n_ia)) + list(range(n_ib))
                 + list(range(n_ib + n_ia, np.ndim(out))))
        return wnp.transpose(out, order)
    return _convolve(A, B, ax_a, ax_b, dot_a, dot_b, mode)


def _convolve(A, B, ax_a, ax_b, dot_a, dot_b, mode):
    """``out[..., n] = sum_m A[..., m] B[..., n - m]`` over the convolved axes."""
    ign_a = [i for i in range(np.ndim(A)) if i not in ax_a + dot_a]
    ign_b = [i for i in range(np.ndim(B)) if i not in ax_b + dot_b]
    la, lb = _sizes(A, ax_a), _sizes(B, ax_b)
    A = wnp.transpose(A, ign_a + dot_a + ax_a)
    B = wnp.transpose(B, ign_b + dot_b + ax_b)
    k = len(ax_a)
    if mode != "valid":  # zeros around B, so that every overlap is a full window
        pad = [(0, 0)] * (len(ign_b) + len(dot_b)) + [(a - 1, a - 1) for a in la]
        B = wnp.pad(B, pad)
    if k:  # each convolved axis becomes two: (output position, window offset)
        B = windows(B, tuple(la))
    flip = (slice(None),) * (len(ign_a) + len(dot_a)) + (slice(None, None, -1),) * k
    A = A[flip]
    # A is (kept, dot, offsets), B (kept, dot, (position, offset) per convolved axis): sum the
    # dot axes and the offsets; what is left comes out as A's kept, B's kept, the positions.
    # A tensordot (one matrix product, BLAS) rather than einsum's loops: 6x faster on convnet's
    # second layer, and its cotangents are matrix products too
    na, nb, nd = len(ign_a), len(ign_b), len(dot_a)
    sum_a = list(range(na, na + nd + k))
    sum_b = list(range(nb, nb + nd)) + [nb + nd + 2 * j + 1 for j in range(k)]
    out = wnp.tensordot(A, B, axes=(sum_a, sum_b))
    if mode == "same":  # the middle of the full result, the size of A (SciPy's centring)
        lead = len(ign_a) + len(ign_b)
        cut = tuple(slice((b - 1) // 2, (b - 1) // 2 + a) for a, b in zip(la, lb))
        out = out[(slice(None),) * lead + cut]
    return out


# -- sliding windows: a strided view and its adjoint -----------------------------------------------
@primitive(nargs=1, linear=True)
def windows(x, sizes):
    """The windows of ``sizes`` sliding along ``x``'s last ``len(sizes)`` axes: each becomes two,
    (position, offset), ``out[..., n, m] = x[..., n + m]`` (a read-only view, no copy)."""
    x = np.asarray(x)
    k = len(sizes)
    lead, tail = x.shape[:-k], x.shape[-k:]
    shape, strides = list(lead), list(x.strides[:-k])
    for n, w, st in zip(tail, sizes, x.strides[-k:]):
        shape += [n - w + 1, w]
        strides += [st, st]
    return as_strided(x, tuple(shape), tuple(strides), writeable=False)


@primitive(nargs=1, linear=True)
def unwindows(g, sizes):
    """``windows``' adjoint: each window of ``g`` added back at its place (``x``'s shape)."""
    g = np.asarray(g)
    k = len(sizes)
    lead = g.shape[:-2 * k]
    n_out = g.shape[-2 * k::2]
    out = np.zeros(lead + tuple(n + w - 1 for n, w in zip(n_out, sizes)), dtype=g.dtype)
    for m in itertools.product(*(range(w) for w in sizes)):
        dst = (Ellipsis,) + tuple(slice(j, j + n) for j, n in zip(m, n_out))
        src = (Ellipsis,) + tuple(x for j in m for x in (slice(None), j))
        out[dst] += g[src]
    return out


@windows.frule
def _windows_jvp(primals, tangents, sizes):
    return windows(primals[0], sizes), windows(tangents[0], sizes)


@windows.rrule
def _windows_vjp(x, sizes):
    return windows(x, sizes), lambda g: (unwindows(g, sizes),)


@unwindows.frule
def _unwindows_jvp(primals, tangents, sizes):
    return unwindows(primals[0], sizes), unwindows(tangents[0], sizes)


@unwindows.rrule
def _unwindows_vjp(g, sizes):
    return unwindows(g, sizes), lambda h: (windows(h, sizes),)
