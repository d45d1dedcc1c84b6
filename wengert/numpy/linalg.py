"""``wengert.numpy.linalg``: filled in by the linear-algebra rules."""
import numpy as _np

from . import _passthrough


def __getattr__(name):
    attr = getattr(_np.linalg, name)
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(f"linalg.{name}", attr)
    globals()[name] = attr
    return attr
