"""``autograd.numpy.numpy_wrapper``: what user code reaches for in it."""
import numpy as _np

from .... import numpy as wnp
from ....core import plain
from ..core import primitive

__all__ = ["wrap_namespace", "unbox_if_possible", "numpy_version", "array", "wrap_if_boxes_inside"]

numpy_version = _np.__version__
array = wnp.array


def unbox_if_possible(x):
    return plain(x)


def wrap_if_boxes_inside(raw_array, slow_op_name=None):
    return raw_array


def wrap_namespace(old, new):
    """Copy the functions of namespace ``old`` into ``new`` as primitives (autograd's way of
    wrapping a module); types and constants are copied as they are."""
    for name, obj in old.items():
        if callable(obj) and not isinstance(obj, type) and not name.startswith("_"):
            new[name] = primitive(obj)
        elif not name.startswith("__"):
            new[name] = obj
