"""``wengert.scipy.signal``: ``convolve`` and ``correlate`` of n-dimensional arrays, differentiable
in both arguments.

On traced values the full convolution is a sum of shifted copies of the larger array, one per
element of the smaller (``pad`` and products, whose rules differentiate it to any order): direct
convolution, as ``method="direct"``, so meant for small kernels. ``mode`` is SciPy's
(``"full"``, ``"valid"``, ``"same"``); on plain values SciPy computes it.

>>> import numpy as np, wengert as wg
>>> a, k = np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0])
>>> convolve(a, k)
array([ 0.5,  0. , -0.5, -3. ])
>>> wg.jacobian(lambda k: convolve(a, k, mode="valid"))(k)   # d(a * k)/dk: a's windows
array([[2., 1.],
       [3., 2.]])
"""
import itertools

import numpy as np

from .. import numpy as wnp
from ..core import Tracer
from ..numpy import _passthrough

__all__ = ["convolve", "correlate"]


def _traced(*xs):
    return any(isinstance(x, Tracer) for x in xs)


def _full(a, b):
    """The full n-D convolution, looping over the smaller array's elements."""
    if int(np.prod(np.shape(b))) > int(np.prod(np.shape(a))):
        a, b = b, a
    sa, sb = np.shape(a), np.shape(b)
    out = None
    for p in itertools.product(*(range(n) for n in sb)):
        term = wnp.pad(a * b[p], [(i, n - 1 - i) for i, n in zip(p, sb)])
        out = term if out is None else out + term
    return out


def _check(in1, in2, mode):
    if np.ndim(in1) != np.ndim(in2):
        raise ValueError("in1 and in2 should have the same dimensionality")
    if mode not in ("full", "valid", "same"):
        raise ValueError("acceptable mode flags are 'valid', 'same', or 'full'")
    s1, s2 = np.shape(in1), np.shape(in2)
    if mode == "valid" and not (all(i >= j for i, j in zip(s1, s2)) or
                                all(j >= i for i, j in zip(s1, s2))):
        raise ValueError("For 'valid' mode, one must be at least as large as the other in every "
                         "dimension")


def convolve(in1, in2, mode="full", method="auto"):
    """``scipy.signal.convolve``; traced, by the direct method."""
    if not _traced(in1, in2):
        import scipy.signal  # heavy: loaded on first use
        return scipy.signal.convolve(in1, in2, mode=mode, method=method)
    in1, in2 = wnp.asarray(in1), wnp.asarray(in2)
    _check(in1, in2, mode)
    if np.ndim(in1) == 0:
        return in1 * in2
    s1, s2 = np.shape(in1), np.shape(in2)
    full = _full(in1, in2)
    if mode == "full":
        return full
    if mode == "same":  # centred on in1, as SciPy's
        start = [(f - n) // 2 for f, n in zip(np.shape(full), s1)]
        return full[tuple(slice(b, b + n) for b, n in zip(start, s1))]
    small = [min(i, j) for i, j in zip(s1, s2)]
    big = [max(i, j) for i, j in zip(s1, s2)]
    return full[tuple(slice(s - 1, b) for s, b in zip(small, big))]


def correlate(in1, in2, mode="full", method="auto"):
    """``scipy.signal.correlate``: the convolution with ``in2`` reversed and conjugated."""
    if not _traced(in1, in2):
        import scipy.signal  # heavy: loaded on first use
        return scipy.signal.correlate(in1, in2, mode=mode, method=method)
    in2 = wnp.asarray(in2)
    flipped = in2[(slice(None, None, -1),) * np.ndim(in2)]
    return convolve(in1, wnp.conj(flipped) if wnp.iscomplexobj(in2) else flipped, mode=mode)


def __getattr__(name):
    import scipy.signal  # heavy: loaded on first use
    try:
        attr = getattr(scipy.signal, name)
    except AttributeError:
        raise AttributeError(f"module 'wengert.scipy.signal' has no attribute {name!r}") \
            from None
    return _passthrough(f"scipy.signal.{name}", attr) if callable(attr) else attr
