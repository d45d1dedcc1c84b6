"""``wengert.numpy``: NumPy's namespace, differentiable.

On plain values every function returns what NumPy returns.  Names with rules are
primitives (or compositions of them); other NumPy names pass straight through
when no traced value is involved, and raise ``NotImplementedError`` naming the
function when one is.
"""
import functools as _functools

import numpy as _np

from .. import _dispatch
from ..core import Tracer as _Tracer
from ..rules.arithmetic import (absolute, add, divide, floor_divide, multiply, negative,  # noqa: F401
                                positive, power, remainder, subtract)
from ..rules.elementwise import *  # noqa: F401,F403
from ..rules.elementwise import REGISTRY as _ELEMENTWISE, round_ as round  # noqa: F401
from ..rules.shape import broadcast_to, reshape, sum_ as sum, transpose  # noqa: F401

abs = absolute
true_divide = divide
mod = remainder
pow = power


def _has_tracer(args):
    for a in args:
        if isinstance(a, _Tracer):
            return True
        if isinstance(a, (list, tuple)) and _has_tracer(a):
            return True
    return False


def _passthrough(name, fn):
    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _has_tracer(args) or _has_tracer(kwargs.values()):
            raise NotImplementedError(
                f"numpy.{name} has no wengert rule for traced values. Declare one with "
                "@wg.primitive and @f.rrule / @f.frule (see docs/rules.md).")
        return fn(*args, **kwargs)
    wrapper._passthrough = True
    return wrapper


def __getattr__(name):
    try:
        attr = getattr(_np, name)
    except AttributeError:
        raise AttributeError(f"module 'wengert.numpy' has no attribute {name!r}") from None
    if callable(attr) and not isinstance(attr, type):
        attr = _passthrough(name, attr)
    globals()[name] = attr
    return attr


def _register_numpy_dispatch(namespace, np_module):
    """Route NEP-18 calls of ``np_module.f`` on tracers to ``namespace[f]``."""
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not callable(fn) or getattr(fn, "_passthrough", False):
            continue
        np_fn = getattr(np_module, name, None)
        if np_fn is not None and callable(np_fn):
            _dispatch.HANDLED[np_fn] = fn


_register_numpy_dispatch(globals(), _np)
