"""What a called object is to the transformer: a primitive, a user function (transformed
too), an opaque callable (differentiated by the engines), or passive (no derivative).

``math`` functions and NumPy ufuncs map to their ``wengert.numpy`` counterparts, NumPy
functions to theirs through the dispatch table, ``abs`` / ``pow`` / ``max`` / ``min`` to
``absolute`` / ``power`` / ``maximum`` / ``minimum``.
"""
from __future__ import annotations

import types

import numpy as np

from .. import _dispatch
from .. import numpy as wnp
from ..core import Primitive

__all__ = ["resolve_callable", "hashable"]

_PASSIVE_CALLS = {len, range, int, bool, isinstance, type, print, str, repr,
                  hasattr, getattr, id, np.shape, np.ndim, np.size}
_BUILTIN_MAP = {abs: "absolute", pow: "power", max: "maximum", min: "minimum"}
# math functions with a derivative outside wengert.numpy, and those without one
_MATH_SPECIAL = {"erf": "erf", "erfc": "erfc", "gamma": "gamma", "lgamma": "gammaln"}
_MATH_NONDIFF = {"comb", "factorial", "gcd", "isclose", "isfinite", "isinf", "isnan", "isqrt",
                 "lcm", "perm", "ulp"}


def resolve_callable(obj):
    """What a called object is to the transformer: ('prim', p) / ('call', f) / ('opaque', f) /
    ('passive', None)."""
    if isinstance(obj, Primitive):
        return "prim", obj
    if obj in _PASSIVE_CALLS if hashable(obj) else False:
        return "passive", None
    if getattr(obj, "_nondiff", False) or getattr(obj, "_static_result", False):
        return "passive", None  # argmax, comparisons, shape: values with no derivative
    if hashable(obj) and obj in _BUILTIN_MAP:
        return resolve_callable(getattr(wnp, _BUILTIN_MAP[obj]))
    mod = getattr(obj, "__module__", None) or ""
    if isinstance(obj, types.BuiltinFunctionType) and obj.__module__ == "math" or \
            (mod == "math" and callable(obj)):
        name = {"fabs": "fabs", "pow": "power", "atan": "arctan", "asin": "arcsin",
                "acos": "arccos", "atan2": "arctan2", "asinh": "arcsinh", "acosh": "arccosh",
                "atanh": "arctanh"}.get(obj.__name__, obj.__name__)
        fn = wnp.__dict__.get(name) or getattr(wnp, name, None)
        if fn is not None and not getattr(fn, "_passthrough", False):
            return resolve_callable(fn)
        if name in _MATH_SPECIAL:
            # loaded on first use, as the dispatch does: wengert.scipy.special imports
            # scipy.special (0.3 s, as long as wengert itself), which the command line, which
            # shows source programs, otherwise never loads
            from ..scipy import special
            return resolve_callable(getattr(special, _MATH_SPECIAL[name]))
        if name in _MATH_NONDIFF:
            return "passive", None
        return None, None   # math.fsum, math.dist: no rule (not a silent zero)
    if isinstance(obj, np.ufunc):
        fn = getattr(wnp, obj.__name__, None)
        if fn is not None and not getattr(fn, "_passthrough", False):
            return resolve_callable(fn)
        return "opaque", obj
    if hashable(obj) and obj in _dispatch.HANDLED:
        return resolve_callable(_dispatch.HANDLED[obj])
    if isinstance(obj, types.FunctionType):
        if mod.split(".")[0] in ("wengert", "numpy", "scipy"):
            return "opaque", obj
        return "call", obj
    if callable(obj):
        return "opaque", obj
    return None, None


def hashable(obj):
    try:
        hash(obj)
        return True
    except TypeError:
        return False
