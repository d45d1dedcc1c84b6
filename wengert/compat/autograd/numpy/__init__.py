"""``autograd.numpy``: ``wengert.numpy`` under autograd's name (its functions dispatch on traced
values and return plain NumPy on plain ones)."""
import builtins as _py

import numpy as _np

from .... import numpy as _wnp
from ....core import Tracer as _Tracer
from ....numpy import *  # noqa: F401,F403

# wengert.numpy's own submodules came with the star: dropped, so that the imports below load
# this package's (an attribute of that name would stop ``from . import`` loading a submodule)
for _sub in ("fft", "linalg", "random"):
    globals().pop(_sub, None)
from . import fft, linalg, numpy_boxes, numpy_jvps, numpy_vjps, numpy_vspaces, numpy_wrapper, \
    random  # noqa: F401,E402
from .numpy_wrapper import numpy_version as __version__  # noqa: F401


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    attr = getattr(_wnp, name)
    globals()[name] = attr
    return attr


def where(condition, *args, **kwargs):
    """``np.where``; on Python numbers and lists alone it gives Python's (``.tolist()``), as
    autograd's does."""
    if not args and not kwargs:
        return _wnp.where(condition)
    if _py.len(args) + _py.len(kwargs) != 2:
        raise ValueError("either both or neither of x and y should be given")
    x = args[0] if args else kwargs.get("x")
    y = args[1] if _py.len(args) > 1 else kwargs.get("y")
    res = _wnp.where(condition, x, y)
    if not _py.any(_arraylike(v) for v in (condition, x, y)) and \
            _py.isinstance(res, (_np.ndarray, _np.generic)):
        return res.tolist()
    return res


def _arraylike(v):
    # (this module's any, sum, ... are NumPy's: Python's are reached through _py)
    if _py.isinstance(v, (_np.ndarray, _np.generic, _Tracer)):
        return True
    return _py.isinstance(v, (list, tuple)) and _py.any(_arraylike(u) for u in v)


def make_diagonal(D, offset=0, axis1=0, axis2=1):
    """Arrays whose diagonals (in the last two axes) are ``D``'s last axis: ``np.diagonal``'s
    complement, autograd's own function (for ``offset=0, axis1=-1, axis2=-2``, as autograd)."""
    if offset != 0 or {axis1, axis2} != {-1, -2}:
        raise NotImplementedError("make_diagonal supports offset=0, axis1=-1, axis2=-2 only")
    n = _np.shape(D)[-1]
    return _wnp.expand_dims(D, -1) * _np.eye(n)
