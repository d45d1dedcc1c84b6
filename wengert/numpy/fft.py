"""``wengert.numpy.fft``: filled in by the Fourier-transform rules."""
import numpy as _np

from . import _passthrough


def __getattr__(name):
    attr = getattr(_np.fft, name)
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(f"fft.{name}", attr)
    globals()[name] = attr
    return attr
