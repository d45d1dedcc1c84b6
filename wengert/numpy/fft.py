"""``wengert.numpy.fft``: ``numpy.fft``, differentiable.

On plain values every function returns what NumPy returns.  Traced, the
transforms are linear primitives (:mod:`wengert.rules.fft`); complex
intermediates follow JAX's convention, and derivatives with respect to real
inputs are real.

>>> import numpy as np, wengert as wg, wengert.numpy as wnp
>>> x = np.array([1.0, 2.0, 0.5, -1.0])
>>> g = wg.grad(lambda x: wnp.sum(wnp.abs(fft(x)) ** 2))(x)  # Parseval: n * sum(x**2)
>>> np.allclose(g, 2 * 4 * x)
True
"""
import numpy as _np

from .. import _dispatch
from ..core import Tracer as _Tracer, ndim_of as _ndim, shape_of as _shape
from ..rules import fft as _rf
from ..rules.complex import angle, conj, conjugate, imag, real  # noqa: F401
from .. import numpy as wnp  # the namespace importing this module: read at call time
from . import _passthrough

__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn",
           "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "real_if_close", "rfft", "rfft2",
           "rfftfreq", "rfftn"]


def _traced(a):
    return isinstance(a, _Tracer)


def _axis(axis, nd):
    if not -nd <= axis < nd:
        raise _np.exceptions.AxisError(axis, nd)
    return axis % nd - nd


def _axes(s, axes, nd, default_all=True):
    if axes is None:
        axes = tuple(range(nd)) if s is None else tuple(range(nd - len(s), nd))
    axes = tuple(_axis(a, nd) for a in axes)
    if s is not None:
        s = tuple(int(n) for n in s)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    return s, axes


def _one_d(name):
    np_fn = getattr(_np.fft, name)
    prim = getattr(_rf, name)

    def fn(a, n=None, axis=-1, norm=None, out=None):
        if not _traced(a):
            return np_fn(a, n=n, axis=axis, norm=norm, out=out)
        if out is not None:
            raise NotImplementedError(f"fft.{name}(out=...) of a traced value")
        return prim(a, s=None if n is None else (int(n),), axes=(_axis(axis, _ndim(a)),),
                    norm=norm)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``numpy.fft.{name}``, differentiable (a linear primitive)."
    fn.__wengert_primitive__ = prim
    return fn


def _n_d(name, default_axes=None):
    np_fn = getattr(_np.fft, name)
    prim = getattr(_rf, name)

    def fn(a, s=None, axes=default_axes, norm=None, out=None):
        if not _traced(a):
            return np_fn(a, s=s, axes=axes, norm=norm, out=out)
        if out is not None:
            raise NotImplementedError(f"fft.{name}(out=...) of a traced value")
        s2, ax = _axes(s, axes, _ndim(a))
        return prim(a, s=s2, axes=ax, norm=norm)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``numpy.fft.{name}``, differentiable (a linear primitive)."
    fn.__wengert_primitive__ = prim
    return fn


fft = _one_d("fft")
ifft = _one_d("ifft")
rfft = _one_d("rfft")
irfft = _one_d("irfft")
fft2 = _n_d("fft2", (-2, -1))
ifft2 = _n_d("ifft2", (-2, -1))
rfft2 = _n_d("rfft2", (-2, -1))
irfft2 = _n_d("irfft2", (-2, -1))
fftn = _n_d("fftn")
ifftn = _n_d("ifftn")
rfftn = _n_d("rfftn")
irfftn = _n_d("irfftn")


_SWAP_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def hfft(a, n=None, axis=-1, norm=None, out=None):
    """``numpy.fft.hfft``: the real spectrum of a Hermitian signal, ``irfft(conj(a))``."""
    if not _traced(a):
        return _np.fft.hfft(a, n=n, axis=axis, norm=norm, out=out)
    return irfft(conj(a), n=n, axis=axis, norm=_SWAP_NORM[norm])


def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """``numpy.fft.ihfft``: ``conj(rfft(a))`` with the inverse normalisation."""
    if not _traced(a):
        return _np.fft.ihfft(a, n=n, axis=axis, norm=norm, out=out)
    return conj(rfft(a, n=n, axis=axis, norm=_SWAP_NORM[norm]))


def fftshift(x, axes=None):
    """``numpy.fft.fftshift``: a roll, differentiable through ``wnp.roll``."""
    if not _traced(x):
        return _np.fft.fftshift(x, axes)
    nd = _ndim(x)
    axes = tuple(range(nd)) if axes is None else ((axes,) if isinstance(axes, int) else axes)
    return wnp.roll(x, [_shape(x)[a] // 2 for a in axes], axes)


def ifftshift(x, axes=None):
    """``numpy.fft.ifftshift``: a roll, differentiable through ``wnp.roll``."""
    if not _traced(x):
        return _np.fft.ifftshift(x, axes)
    nd = _ndim(x)
    axes = tuple(range(nd)) if axes is None else ((axes,) if isinstance(axes, int) else axes)
    return wnp.roll(x, [-(_shape(x)[a] // 2) for a in axes], axes)


def fftfreq(n, d=1.0, device=None):
    """``numpy.fft.fftfreq``: ``k / (n d)``, differentiable in the spacing ``d``."""
    if not _traced(d):
        return _np.fft.fftfreq(n, d, device=device)
    return _np.fft.fftfreq(n, 1.0).astype(d.dtype) / d


def rfftfreq(n, d=1.0, device=None):
    """``numpy.fft.rfftfreq``: ``k / (n d)``, differentiable in the spacing ``d``."""
    if not _traced(d):
        return _np.fft.rfftfreq(n, d, device=device)
    return _np.fft.rfftfreq(n, 1.0).astype(d.dtype) / d


def __getattr__(name):
    attr = getattr(_np.fft, name)
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(f"numpy.fft.{name}", attr)
        globals()[name] = attr
    return attr


from . import _register_numpy_dispatch  # noqa: E402

_register_numpy_dispatch({k: v for k, v in globals().items() if k not in (
    "real", "imag", "conj", "conjugate", "angle")}, _np.fft)


def real_if_close(a, tol=100):
    """``numpy.real_if_close``: the real part when every imaginary part is within ``tol``
    machine epsilons of zero (decided on the values, as NumPy does), else ``a``."""
    if not isinstance(a, _Tracer):
        return _np.real_if_close(a, tol=tol)
    v = _np.asarray(_dispatch._value(a))
    if _np.real_if_close(v, tol=tol).dtype == v.dtype:  # real already, or not close
        return a
    return real(a)


def _export_complex(namespace):
    """Put the complex elementwise functions into ``wengert.numpy`` (called at its end)."""
    fns = {"real": real, "imag": imag, "conj": conj, "conjugate": conjugate, "angle": angle,
           "real_if_close": real_if_close}
    namespace.update(fns)
    _register_numpy_dispatch(fns, _np)  # numpy.real(t), numpy.conj(t)... come here
