"""ndarray methods as the function calls they stand for, with NumPy's own signatures.

``x.reshape(3, 2)`` is ``reshape(x, (3, 2))``, ``x.transpose(1, 0)`` is ``transpose(x,
(1, 0))``, ``x.sum(0, keepdims=True)`` is ``sum(x, axis=0, keepdims=True)``.  Each method
is a stub below whose Python signature is the method's (as ``ndarray`` takes its
arguments: ``*shape``, positional-only axes...).  The call's syntax nodes are bound to
that signature with :mod:`inspect`, so positional and keyword arguments land where NumPy
puts them, and the stub returns the function form: the ``wengert.numpy`` name, the
positional nodes and the keyword nodes.  Arguments the user did not write stay out
(``_`` marks them), so the function's own defaults apply.

Methods whose results carry no derivative (``argmax``, ``nonzero``, ``all``...) are
``PASSIVE``: the call is kept as written.  Methods that change the array in place are
refused with a hint (``IN_PLACE``); any other method is not supported.
"""
from __future__ import annotations

import ast
import inspect

from .. import numpy as wnp
from . import runtime

__all__ = ["ATTRIBUTES", "IN_PLACE", "PASSIVE", "MethodError", "function_form", "function"]


class _NotGiven:
    def __repr__(self):
        return "_"


_ = _NotGiven()


class MethodError(Exception):
    """A method call the transformer cannot rewrite: ``what`` and a ``hint``."""

    def __init__(self, what, hint=""):
        super().__init__(what)
        self.what, self.hint = what, hint


def _call(name, *args, **kwargs):
    """The function form ``name(*args, **kwargs)``, without the arguments not given."""
    return name, [a for a in args if a is not _], {k: v for k, v in kwargs.items() if v is not _}


def _pack(nodes):
    """``*shape`` / ``*axes``: one argument is the shape itself, several make a tuple."""
    if len(nodes) == 1:
        return nodes[0]
    if not nodes:
        return None
    return ast.copy_location(ast.Tuple(elts=list(nodes), ctx=ast.Load()), nodes[0])


def _const(value, like):
    return ast.copy_location(ast.Constant(value), like)


# -- the methods: NumPy's signatures, the function forms -------------------------------------
def reshape(self, *shape, order=_, copy=_):
    if not shape:
        raise TypeError("reshape() takes exactly 1 argument (0 given)")
    return _call("reshape", self, _pack(shape), order=order, copy=copy)


def transpose(self, *axes):
    return _call("transpose", self, _pack(axes) if axes else _)


def swapaxes(self, axis1, axis2, /):
    return _call("swapaxes", self, axis1, axis2)


def squeeze(self, axis=_):
    return _call("squeeze", self, axis=axis)


def ravel(self, order=_):
    return _call("ravel", self, order=order)


def flatten(self, order=_):
    return _call("flatten", self, order=order)


def copy(self, order=_):
    return _call("copy", self, order=order)


def astype(self, dtype, order=_, casting=_, subok=_, copy=_):
    return _call("astype", self, dtype, order=order, casting=casting, subok=subok, copy=copy)


def sum(self, axis=_, dtype=_, out=_, keepdims=_, initial=_, where=_):
    return _call("sum", self, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                 initial=initial, where=where)


def prod(self, axis=_, dtype=_, out=_, keepdims=_, initial=_, where=_):
    return _call("prod", self, axis=axis, dtype=dtype, out=out, keepdims=keepdims,
                 initial=initial, where=where)


def mean(self, axis=_, dtype=_, out=_, keepdims=_, *, where=_):
    return _call("mean", self, axis=axis, dtype=dtype, out=out, keepdims=keepdims, where=where)


def std(self, axis=_, dtype=_, out=_, ddof=_, keepdims=_, *, where=_, mean=_, correction=_):
    return _call("std", self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                 where=where, mean=mean, correction=correction)


def var(self, axis=_, dtype=_, out=_, ddof=_, keepdims=_, *, where=_, mean=_, correction=_):
    return _call("var", self, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims,
                 where=where, mean=mean, correction=correction)


def max(self, axis=_, out=_, keepdims=_, initial=_, where=_):
    return _call("max", self, axis=axis, out=out, keepdims=keepdims, initial=initial,
                 where=where)


def min(self, axis=_, out=_, keepdims=_, initial=_, where=_):
    return _call("min", self, axis=axis, out=out, keepdims=keepdims, initial=initial,
                 where=where)


def cumsum(self, axis=_, dtype=_, out=_):
    return _call("cumsum", self, axis=axis, dtype=dtype, out=out)


def cumprod(self, axis=_, dtype=_, out=_):
    return _call("cumprod", self, axis=axis, dtype=dtype, out=out)


def trace(self, offset=_, axis1=_, axis2=_, dtype=_, out=_):
    return _call("trace", self, offset=offset, axis1=axis1, axis2=axis2, dtype=dtype, out=out)


def diagonal(self, offset=_, axis1=_, axis2=_):
    return _call("diagonal", self, offset=offset, axis1=axis1, axis2=axis2)


def dot(self, b, out=_):
    return _call("dot", self, b, out=out)


def clip(self, min=_, max=_, out=_):
    # NumPy's function form takes the bounds positionally (a_min, a_max); a missing one is None
    if min is _ and max is _:
        return _call("copy", self)
    none = _const(None, self)
    return _call("clip", self, none if min is _ else min, none if max is _ else max, out=out)


def round(self, decimals=_, out=_):
    return _call("round", self, decimals=decimals, out=out)


def conj(self):
    return _call("conj", self)


def conjugate(self):
    return _call("conjugate", self)


def repeat(self, repeats, axis=_):
    return _call("repeat", self, repeats, axis=axis)


def take(self, indices, axis=_, out=_, mode=_):
    return _call("take", self, indices, axis=axis, out=out, mode=mode)


def choose(self, choices, out=_, mode=_):
    return _call("choose", self, choices, out=out, mode=mode)


def compress(self, condition, axis=_, out=_):
    return _call("compress", condition, self, axis=axis, out=out)   # the condition comes first


def item(self, *args):
    return _call("item", self, *args)   # wengert.source.runtime.item


METHODS = {f.__name__: f for f in (
    reshape, transpose, swapaxes, squeeze, ravel, flatten, copy, astype, sum, prod, mean, std,
    var, max, min, cumsum, cumprod, trace, diagonal, dot, clip, round, conj, conjugate, repeat,
    take, choose, compress, item)}
SIGNATURES = {name: inspect.signature(f) for name, f in METHODS.items()}

# attributes that are functions of the array
ATTRIBUTES = {"T": "transpose", "mT": "matrix_transpose", "real": "real", "imag": "imag"}

# results that carry no derivative: the call stays as written
PASSIVE = {"argmax", "argmin", "argsort", "argpartition", "nonzero", "all", "any",
           "searchsorted", "tobytes", "__len__"}

IN_PLACE = {"sort": "y = np.sort(x)", "partition": "y = np.partition(x, kth)",
            "fill": "y = np.full_like(x, value)", "put": "y = wnp.where(mask, v, x)",
            "resize": "y = np.resize(x, shape)", "itemset": "y = wnp.where(mask, v, x)",
            "setfield": None, "setflags": None, "byteswap": None}


def function_form(name, receiver, args, keywords):
    """``receiver.name(*args, **keywords)`` (syntax nodes) as ``(function name, positional
    nodes, {keyword: node})``; raises :class:`MethodError` for a method it cannot rewrite
    and ``TypeError`` (NumPy's complaint) for arguments the method does not take."""
    if name in IN_PLACE:
        hint = IN_PLACE[name]
        raise MethodError(f"the in-place method .{name}() of a differentiated value",
                          f"compute a new value instead ({hint})" if hint else "")
    stub = METHODS.get(name)
    if stub is None:
        hint = "use the array itself" if name == "tolist" else ""
        raise MethodError(f"the method .{name}() of a differentiated value", hint)
    try:
        bound = SIGNATURES[name].bind(receiver, *args, **keywords)
        return stub(*bound.args, **bound.kwargs)
    except TypeError as e:
        raise TypeError(f"ndarray.{name}{_shown(SIGNATURES[name])}: {e}") from None


def function(name):
    """The object a function form names: a ``wengert.numpy`` function (``item``, which
    NumPy has no function for, is wengert.source's own)."""
    if name == "item":
        return runtime.item
    return getattr(wnp, name)


def _shown(sig):
    """The signature as NumPy documents it (without ``self``; ``_`` as "not given")."""
    params = list(sig.parameters.values())[1:]
    return str(sig.replace(parameters=params)).replace("=_", "=...")
