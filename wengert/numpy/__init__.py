"""``wengert.numpy``: NumPy's namespace, differentiable.

On plain values every function returns what NumPy returns.  Names with rules are
primitives (or compositions of them); other NumPy names pass straight through
when no traced value is involved, and raise ``NotImplementedError`` naming the
function when one is.
"""
import functools as _functools
import sys as _sys

import numpy as _np

from .. import _dispatch
from ..core import Tracer as _Tracer, lift as _lift
from ..rules.arithmetic import (absolute, add, divide, divmod, float_power,  # noqa: F401
                                floor_divide, multiply, negative, positive, power, remainder,
                                subtract)
from ..rules.elementwise import *  # noqa: F401,F403
from ..rules.elementwise import REGISTRY as _ELEMENTWISE, round_ as round  # noqa: F401
from ..rules._series import sinc  # noqa: F401
from ..rules.shape import broadcast_to  # noqa: F401
from ..rules.indexing import (compress, extract, getitem as _getitem, index_update,  # noqa: F401
                              partition, select, setitem as _setitem, sort, take,
                              take_along_axis)
from ..rules.inplace_functions import (copyto, fill_diagonal, place, put,  # noqa: F401
                                       put_along_axis, putmask)
from ..rules.conversion import *  # noqa: F401,F403
from ..rules.reshaping import *  # noqa: F401,F403
from ..rules.joining import *  # noqa: F401,F403
from ..rules.index_tricks import c_, r_  # noqa: F401
from ..rules.creation import *  # noqa: F401,F403
from ..rules.rearranging import *  # noqa: F401,F403
from ..rules.diagonals import *  # noqa: F401,F403
from ..rules.calculus import *  # noqa: F401,F403
from ..rules.grids import *  # noqa: F401,F403
from ..rules.reductions import *  # noqa: F401,F403
from ..rules.statistics import *  # noqa: F401,F403
from ..rules.products import *  # noqa: F401,F403
from ..rules.convolution import *  # noqa: F401,F403
from ..rules.polynomials import *  # noqa: F401,F403
from ..rules.functional import *  # noqa: F401,F403
from ..rules.counting import *  # noqa: F401,F403
from ..rules.sets import *  # noqa: F401,F403
from ..rules import (elementwise as _elementwise, indexing as _indexing, reshaping as _reshaping,
                     reductions as _red)
from ..rules.shape import reshape as _reshape_prim, transpose as _transpose_prim

abs = absolute
round_ = around = round
true_divide = divide
mod = remainder
pow = power
# NumPy 2's array-API names for the same functions
acos, acosh, asin, asinh = arccos, arccosh, arcsin, arcsinh  # noqa: F405
atan, atan2, atanh = arctan, arctan2, arctanh  # noqa: F405
concat = concatenate  # noqa: F405


def _has_tracer(args):
    for a in args:
        if isinstance(a, _Tracer):
            return True
        if isinstance(a, (list, tuple)) and _has_tracer(a):
            return True
    return False


def _passthrough(name, fn):
    """``fn`` for plain values; for traced ones, an error naming ``name`` (e.g. "numpy.interp")."""
    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _has_tracer(args) or _has_tracer(kwargs.values()):
            if _dispatch.only_integers(args, kwargs):  # wnp.arange(n): n has no derivative
                return fn(*_dispatch.integer_values(args), **_dispatch.integer_values(kwargs))
            raise NotImplementedError(
                f"{name} has no wengert rule for traced values. Declare one with "
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
        attr = _passthrough(f"numpy.{name}", attr)
    globals()[name] = attr
    return attr


def transpose(a, axes=None):
    """``np.transpose``; on a traced array the result is a view (tracked for ``x[i] = v``)."""
    a = _lift(a)
    if not isinstance(a, _Tracer):
        return _np.transpose(a, axes)
    perm = tuple(range(a.ndim))[::-1] if axes is None else tuple(int(i) % a.ndim for i in axes)
    return _reshaping._view(_transpose_prim(a, perm), a, _indexing.transpose_writer(perm))


permute_dims = transpose


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """``np.reshape``; on a traced array the result is a view (tracked for ``x[i] = v``)."""
    if shape is None:
        shape = newshape
    a = _lift(a)
    if not isinstance(a, _Tracer):
        kw = {} if copy is None else {"copy": copy}
        if order != "C":  # only when asked: some libraries' reshape (Dask's) takes no order=
            kw["order"] = order
        return _np.reshape(a, shape, **kw)
    if order not in ("C", "A"):
        raise NotImplementedError("wnp.reshape with order='F' on traced values")
    shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
    out = _reshape_prim(a, shape)
    return out if copy else _reshaping._view(out, a, _indexing.reshape_writer)


def where(condition, x=None, y=None):
    """``np.where(c, x, y)`` (x and y differentiated, never NaN from the unselected branch);
    ``np.where(c)`` is ``nonzero`` (plain)."""
    if x is None and y is None:
        return _red.nonzero(condition)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return _elementwise.where(_indexing.strip_eager(condition), x, y)


def clip(a, a_min=None, a_max=None, out=None, **kwargs):
    if "min" in kwargs:
        a_min = kwargs.pop("min")
    if "max" in kwargs:
        a_max = kwargs.pop("max")
    a = _lift(a)
    if not isinstance(a, _Tracer) and not isinstance(a_min, _Tracer) \
            and not isinstance(a_max, _Tracer):
        return _np.clip(a, a_min, a_max, out=out, **kwargs)
    if out is not None:
        raise NotImplementedError("wnp.clip with out= is not supported on traced values")
    return _elementwise.clip(a, a_min, a_max)


def _stand_in(a):
    """``a``'s shape, on a stand-in: shapes are static in every engine, graph tracing too."""
    if isinstance(a, _Tracer):
        return _np.broadcast_to(_np.float64(0.0), a.shape)  # a view: no data is copied
    return _red._strip(a)


def shape(a):
    return _np.shape(_stand_in(a))


def ndim(a):
    return _np.ndim(_stand_in(a))


def size(a, axis=None):
    return _np.size(_stand_in(a), axis)


def result_type(*arrays_and_dtypes):
    return _np.result_type(*(_red._strip(a) for a in arrays_and_dtypes))


for _f in (shape, ndim, size, result_type):  # facts about the arrays: static, not recorded
    _f._static_result = True
del _f


# not differentiable: comparisons, predicates, integer-valued results -> plain values
# (under graph tracing predicates are recorded; index-like results are guarded)
_INDEX_LIKE = {"digitize", "lexsort", "argpartition",
               "nanargmax", "nanargmin", "unravel_index", "ravel_multi_index"}
for _name in ("greater", "greater_equal", "less", "less_equal", "equal", "not_equal",
              "logical_and", "logical_or", "logical_not", "logical_xor", "isnan", "isinf",
              # of booleans (a NumPy bool & a traced comparison) and integers
              "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "bitwise_not",
              "bitwise_invert",
              "isfinite", "isposinf", "isneginf", "signbit", "isclose", "allclose",
              "array_equal", "array_equiv", "iscomplexobj", "isrealobj", "iscomplex", "isreal",
              "digitize", "lexsort", "argpartition",
              "nanargmax", "nanargmin", "unravel_index", "ravel_multi_index", "isin",
              "sometrue", "alltrue"):
    if hasattr(_np, _name):
        globals()[_name] = _red._nondiff(getattr(_np, _name), guard=_name in _INDEX_LIKE)
del _name


def _register_numpy_dispatch(namespace, np_module):
    """Route NEP-18 calls of ``np_module.f`` on tracers to ``namespace[f]``."""
    for name, fn in list(namespace.items()):
        if name.startswith("_") or not callable(fn) or getattr(fn, "_passthrough", False):
            continue
        np_fn = getattr(np_module, name, None)
        if np_fn is not None and callable(np_fn):
            _dispatch.HANDLED[np_fn] = fn


import importlib as _importlib  # noqa: E402

# the submodules, not NumPy's (``from . import linalg`` would find numpy.linalg via __getattr__)
fft = _importlib.import_module(__name__ + ".fft")
linalg = _importlib.import_module(__name__ + ".linalg")
random = _importlib.import_module(__name__ + ".random")
matrix_transpose = linalg.matrix_transpose  # NumPy 2 has it in both namespaces

_register_numpy_dispatch(globals(), _np)
fft._export_complex(globals())  # complex support (linalg/fft helper)
_dispatch.install(_sys.modules[__name__])  # tracers' operators, methods and NEP 13/18 hooks

# what ``from wengert.numpy import *`` gives: the names defined above (NumPy's, and the few
# documented extras), never a module they were made with (NumPy's passes through __getattr__)
__all__ = sorted(_n for _n, _v in globals().items() if not _n.startswith("_") and (
    _n in ("fft", "linalg", "random") or not isinstance(_v, type(_sys))))
