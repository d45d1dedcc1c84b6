"""Discrete Fourier transforms.

Complex values follow JAX's convention (rules/complex.py): the pullback of a
complex-linear map is its plain transpose (the DFT matrix is symmetric: the pullback
of ``fft`` is ``fft``), and where a real input becomes complex (``fft`` of a real
array, ``rfft``) the pullback keeps the real part: the cotangent of a real input is
real.

All FFT primitives are linear, so each rule applies a transform to the tangent
or cotangent.  Axes are stored negative (counted from the end).
"""
import numpy as np

from ..core import primitive, shape_of
from ..arrays import dtype_of
from . import patterns
from .complex import _is_complex, conj, real

__all__ = ["FFT", "fft", "fft2", "fftn", "fix_length_jvp", "fix_length_vjp", "ifft", "ifft2",
           "ifftn", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftn"]

# -- padding / truncation: the adjoint of n= and s= ---------------------------------------------


_FIBRES = patterns.Fibres("axes")


# zero-padding and truncation: linear, moving elements; transformed along ``axes`` under vmap
@primitive(name="fix_length", linear=True, sparsity=patterns.MOVES, batch="axis")
def _fix_length(x, lengths, axes):
    """Zero-pad or truncate ``x`` to ``lengths`` along ``axes`` (negative axis numbers)."""
    x = np.asarray(x)
    for n, ax in zip(lengths, axes):
        cur = x.shape[ax]
        if n < cur:
            idx = [slice(None)] * x.ndim
            idx[ax] = slice(0, n)
            x = x[tuple(idx)]
        elif n > cur:
            pad = [(0, 0)] * x.ndim
            pad[ax] = (0, n - cur)
            x = np.pad(x, pad)
    return x


@_fix_length.frule(symbolic_zeros=True)
def fix_length_jvp(primals, tangents, lengths, axes):
    (x,), (dx,) = primals, tangents
    ans = _fix_length(x, lengths=lengths, axes=axes)
    return ans, None if dx is None else _fix_length(dx, lengths=lengths, axes=axes)


@_fix_length.rrule
def fix_length_vjp(x, lengths, axes):
    back = tuple(shape_of(x)[a] for a in axes)
    ans = _fix_length(x, lengths=lengths, axes=axes)
    return ans, lambda g: (_fix_length(g, lengths=back, axes=axes),)


def _fit_lengths(x, lengths, axes):
    cur = tuple(shape_of(x)[a] for a in axes)
    return x if cur == tuple(lengths) else _fix_length(x, lengths=tuple(lengths), axes=axes)


# -- the transforms --------------------------------------------------------------------------------
# Every primitive takes (a, s, axes, norm): s the transform lengths (None: the input's),
# axes negative.  One-dimensional NumPy functions get n=s[0], axis=axes[0].

_INVERSE_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _impl(np_fn, one_d):
    if one_d:
        def impl(a, s=None, axes=(-1,), norm=None):
            return np_fn(a, n=None if s is None else s[0], axis=axes[0], norm=norm)
    else:
        def impl(a, s=None, axes=(-1,), norm=None):
            return np_fn(a, s=s, axes=axes, norm=norm)
    impl.__name__ = np_fn.__name__
    impl.__doc__ = np_fn.__doc__
    return impl


def _c2c(np_fn, one_d):
    """fft / ifft / fft2 / fftn ...: complex-linear, with a symmetric matrix."""
    # linear (its pushforward: itself on the tangent); every output along the axes reads the
    # whole input fibre; wg.vmap: transforms along ``axes``, which move past the batch axis
    p = primitive(_impl(np_fn, one_d), name=np_fn.__name__, linear=True, sparsity=_FIBRES,
                  batch="axis")

    @p.rrule
    def vjp(x, s=None, axes=(-1,), norm=None):
        ans = p(x, s=s, axes=axes, norm=norm)
        lengths = tuple(shape_of(x)[a] for a in axes)
        cplx = _is_complex(x)

        def pullback(g):
            gx = _fit_lengths(p(g, s=None, axes=axes, norm=norm), lengths, axes)
            return (gx if cplx else real(gx),)
        return ans, pullback
    return p


def _r2c(np_fn, full_fn, one_d):
    """rfft / rfftn: the first half (last axis) of the full transform of a real input."""
    # linear (its pushforward: itself on the tangent); every output along the axes reads the
    # whole input fibre; wg.vmap: transforms along ``axes``, which move past the batch axis
    p = primitive(_impl(np_fn, one_d), name=np_fn.__name__, linear=True, sparsity=_FIBRES,
                  batch="axis")
    full = _FULL[full_fn]

    @p.rrule
    def vjp(x, s=None, axes=(-1,), norm=None):
        ans = p(x, s=s, axes=axes, norm=norm)
        lengths = tuple(shape_of(x)[a] for a in axes)
        n = tuple(s) if s is not None else lengths

        def pullback(g):
            # fftn zero-pads the half spectrum back to the full length along the last axis
            gx = full(g, s=n, axes=axes, norm=norm)
            return (real(_fit_lengths(gx, lengths, axes)),)
        return ans, pullback
    return p


def _c2r(np_fn, half_fn, one_d):
    """irfft / irfftn: real output from a half spectrum (imaginary parts of the
    self-conjugate bins are ignored, so the map is real-linear only)."""
    # linear (its pushforward: itself on the tangent); every output along the axes reads the
    # whole input fibre; wg.vmap: transforms along ``axes``, which move past the batch axis
    p = primitive(_impl(np_fn, one_d), name=np_fn.__name__, linear=True, sparsity=_FIBRES,
                  batch="axis")
    half = _HALF[half_fn]

    @p.rrule
    def vjp(x, s=None, axes=(-1,), norm=None):
        ans = p(x, s=s, axes=axes, norm=norm)
        lengths = tuple(shape_of(x)[a] for a in axes)
        n = tuple(shape_of(ans)[a] for a in axes)
        last = n[-1]
        k = last // 2 + 1
        w = np.full(k, 2.0, dtype=dtype_of(ans))
        w[0] = 1.0
        if last % 2 == 0:
            w[-1] = 1.0
        w = w.reshape((k,) + (1,) * (-axes[-1] - 1))  # along the last transformed axis
        cplx = _is_complex(x)

        def pullback(g):
            gx = conj(half(g, s=n, axes=axes, norm=_INVERSE_NORM[norm])) * w
            gx = _fit_lengths(gx, lengths, axes)
            return (gx if cplx else real(gx),)
        return ans, pullback
    return p


_FULL = {}
_HALF = {}

fft = _c2c(np.fft.fft, True)
ifft = _c2c(np.fft.ifft, True)
fft2 = _c2c(np.fft.fft2, False)
ifft2 = _c2c(np.fft.ifft2, False)
fftn = _c2c(np.fft.fftn, False)
ifftn = _c2c(np.fft.ifftn, False)
_FULL.update(fft=fft, fftn=fftn, fft2=fft2)
rfft = _r2c(np.fft.rfft, "fft", True)
rfft2 = _r2c(np.fft.rfft2, "fft2", False)
rfftn = _r2c(np.fft.rfftn, "fftn", False)
_HALF.update(rfft=rfft, rfft2=rfft2, rfftn=rfftn)
irfft = _c2r(np.fft.irfft, "rfft", True)
irfft2 = _c2r(np.fft.irfft2, "rfft2", False)
irfftn = _c2r(np.fft.irfftn, "rfftn", False)

FFT = {p.name: p for p in (fft, ifft, fft2, ifft2, fftn, ifftn, rfft, rfft2, rfftn, irfft,
                           irfft2, irfftn)}
