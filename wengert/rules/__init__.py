"""The primitives: value, frule and rrule declared together, one place each.

Importing this package registers every built-in rule.  ``OPERATORS`` maps
Python's operator methods to primitives; the namespace floor (``wengert._dispatch``)
installs them on the tracers.
"""
from . import arithmetic, elementwise, shape  # noqa: F401
from .arithmetic import (absolute, add, divide, floor_divide, multiply, negative, positive,
                         power, remainder, subtract)
from .indexing import getitem as _getitem, inplace as _inplace_update, setitem as _setitem
from .products import matmul as _products_matmul

__all__ = ["OPERATORS", "absolute", "add", "divide", "floor_divide", "multiply", "negative",
           "positive", "power", "remainder", "subtract"]


def _r(f):
    def reflected(self, other):
        return f(other, self)
    reflected._reflects = f
    return reflected


def _inplace(f):
    # x += v: a traced array is updated in place, as a NumPy array (rules/indexing.py)
    def method(self, other):
        return _inplace_update(f, self, other)
    return method


OPERATORS = {
    "__add__": add, "__radd__": _r(add),
    "__sub__": subtract, "__rsub__": _r(subtract),
    "__mul__": multiply, "__rmul__": _r(multiply),
    "__truediv__": divide, "__rtruediv__": _r(divide),
    "__floordiv__": floor_divide, "__rfloordiv__": _r(floor_divide),
    "__mod__": remainder, "__rmod__": _r(remainder),
    "__pow__": power, "__rpow__": _r(power),
    "__matmul__": _products_matmul, "__rmatmul__": _r(_products_matmul),
    "__neg__": negative, "__pos__": positive, "__abs__": absolute,
    "__getitem__": _getitem, "__setitem__": _setitem,
    "__iadd__": _inplace(add), "__isub__": _inplace(subtract), "__imul__": _inplace(multiply),
    "__itruediv__": _inplace(divide), "__ifloordiv__": _inplace(floor_divide),
    "__imod__": _inplace(remainder), "__ipow__": _inplace(power),
    "__imatmul__": _inplace(_products_matmul),
}
