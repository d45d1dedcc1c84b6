"""1-D convolve and correlate, primitives so the values are NumPy's to the bit.

Each public function returns exactly what NumPy returns when no argument is traced.
"""
import numpy as np

from ..core import ndim_of, primitive, shape_of
from . import patterns
from .indexing import gather
from .joining import concatenate
from .products import _as, _matmul, _plain, _swap_last, _traced
from .shape import reshape

__all__ = ["convolve", "correlate"]


# -- convolve and correlate ------------------------------------------------------------------------
# Primitives so the values are NumPy's to the bit (a gathered Toeplitz product is not).  Both
# are bilinear, so their rules are convolutions again.  A batch of them (wg.vmap; a Jacobian
# in one pass) goes through the Toeplitz product, which matmul batches.
_MODES = ("full", "same", "valid")


@primitive(name="convolve", sparsity=patterns.Convolution())  # a stencil: banded in each
def _convolve(a, v, *, mode):
    return np.convolve(a, v, mode)


@primitive(name="correlate", sparsity=patterns.Convolution(correlate=True))
def _correlate(a, v, *, mode):
    return np.correlate(a, v, mode)


def _mode_name(mode):
    if isinstance(mode, (int, np.integer)) and not isinstance(mode, bool):  # NumPy's codes
        mode = {0: "valid", 1: "same", 2: "full"}.get(int(mode), mode)
    if mode not in _MODES:
        raise ValueError(f"mode must be one of 'valid', 'same', or 'full' (got {mode!r})")
    return mode


def _window(n, m, mode):
    """(offset, length) of ``mode``'s output inside the full convolution of lengths n, m."""
    full = n + m - 1
    length = {"full": full, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]
    return (full - length) // 2, length


def _correlate_window(n, m, mode):
    """As ``_window``, inside the full correlation; NumPy centres 'same' the other way
    round when ``v`` is the longer (it correlates the swapped pair and reverses)."""
    off, length = _window(n, m, mode)
    return (off, length) if n >= m else (n + m - 1 - length - off, length)


def _conv(x, w, off, length):
    """Entries ``off:off + length`` of the full convolution of x (along its last axis; it may
    carry a batch axis: wg.vmap) with the 1-D w."""
    n, m = shape_of(x)[-1], shape_of(w)[0]
    if ndim_of(x) == 1:
        for mode in _MODES:
            if _window(n, m, mode) == (off, length):
                return _convolve(x, w, mode=mode)
        return _convolve(x, w, mode="full")[off:off + length]
    k = np.arange(off, off + length)[:, None] - np.arange(n)[None, :]  # into w, or m: zero
    k = np.where((k >= 0) & (k < m), k, m).astype(np.intp)
    wz = concatenate([w, np.zeros(1, dtype=np.result_type(_plain(w)))])
    return _matmul(x, _swap_last(gather(wz, k)))


def _full_cotangent(g, off, full):
    """A cotangent of a window of a full convolution, as one of the whole: zeros outside."""
    length = shape_of(g)[-1]
    if length == full:
        return g
    lead, dt = shape_of(g)[:-1], np.result_type(_plain(g))
    return concatenate([np.zeros(lead + (off,), dt), g,
                        np.zeros(lead + (full - off - length,), dt)], axis=-1)


def _declare_conv_rules(prim, window, flip):
    """Both rules of a bilinear convolution: ``convolve`` (``flip=False``), or ``correlate``,
    which is convolve(a, v reversed) with its own window (real values only: NumPy conjugates
    v, which has no complex derivative)."""
    @prim.frule(symbolic_zeros=True)
    def _jvp(primals, tangents, mode):
        a, v = primals
        da, dv = tangents
        off, length = window(shape_of(a)[0], shape_of(v)[0], mode)
        t = None
        if da is not None:
            t = _conv(da, v[::-1] if flip else v, off, length)
        if dv is not None:  # convolution commutes
            t2 = _conv(dv[..., ::-1] if flip else dv, a, off, length)
            t = t2 if t is None else t + t2
        return prim(a, v, mode=mode), t

    @prim.rrule(needs=True)
    def _vjp(a, v, needs, mode):
        n, m = shape_of(a)[0], shape_of(v)[0]
        off, _ = window(n, m, mode)

        def pullback(g):
            g = _full_cotangent(g, off, n + m - 1)
            # convolving by w transposes to correlating with it: convolving with w reversed
            ga = _conv(g, v if flip else v[::-1], m - 1, n) if needs[0] else None
            gv = _conv(g, a[::-1], n - 1, m) if needs[1] else None
            return ga, (gv[..., ::-1] if flip and gv is not None else gv)
        return prim(a, v, mode=mode), pullback


_declare_conv_rules(_convolve, _window, flip=False)
_declare_conv_rules(_correlate, _correlate_window, flip=True)


def _declare_conv_batching(prim, window, flip):
    """``wg.vmap``: the Toeplitz product of ``_conv``, whose matmul maps the batch axis; a
    batched filter makes a batch of Toeplitz matrices."""
    @prim.batching
    def _batch(args, batched, mode):
        (a, v), (ba, bv) = args, batched
        n, m = shape_of(a)[-1], shape_of(v)[-1]
        off, length = window(n, m, mode)
        if flip:  # correlate(a, v) is convolve(a, v reversed), in its own window
            v = v[..., ::-1]
        if not bv:
            return _conv(a, v, off, length)
        if not ba:  # convolution commutes
            return _conv(v, a, off, length)
        k = np.arange(off, off + length)[:, None] - np.arange(n)[None, :]
        k = np.where((k >= 0) & (k < m), k, m).astype(np.intp)
        size = shape_of(v)[0]
        vz = concatenate([v, np.zeros((size, 1), dtype=np.result_type(_plain(v)))], axis=-1)
        t = gather(vz, k, 1)                                  # (B, length, n)
        return reshape(_matmul(t, reshape(a, (size, n, 1))), (size, length))


_declare_conv_batching(_convolve, _window, flip=False)
_declare_conv_batching(_correlate, _correlate_window, flip=True)


def _one_d_pair(a, v):
    a, v = _as(a), _as(v)
    if ndim_of(a) != 1 or ndim_of(v) != 1:
        raise ValueError("object too deep for desired array")
    if shape_of(a)[0] == 0 or shape_of(v)[0] == 0:
        raise ValueError("a cannot be empty" if shape_of(a)[0] == 0 else "v cannot be empty")
    return a, v


def convolve(a, v, mode="full"):
    """1-D ``np.convolve``, NumPy's value to the bit."""
    if not _traced(a, v):
        return np.convolve(a, v, mode)
    a, v = _one_d_pair(a, v)
    return _convolve(a, v, mode=_mode_name(mode))


def correlate(a, v, mode="valid"):
    """1-D ``np.correlate`` of real values, NumPy's value to the bit."""
    if not _traced(a, v):
        return np.correlate(a, v, mode)
    a, v = _one_d_pair(a, v)
    if np.iscomplexobj(_plain(a)) or np.iscomplexobj(_plain(v)):
        raise NotImplementedError("wnp.correlate of complex traced values: NumPy conjugates "
                                  "v, which has no complex derivative; split real and "
                                  "imaginary parts")
    return _correlate(a, v, mode=_mode_name(mode))

