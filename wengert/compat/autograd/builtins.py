"""autograd's ``builtins``: containers that may hold traced values, and ``isinstance``/``type``
that look through them. wengert's tuples, lists and dicts hold traced values as they are, so
the containers are Python's own."""
import builtins as _py

from ...core import plain

__all__ = ["tuple", "list", "dict", "isinstance", "type", "SequenceBox", "DictBox"]

tuple = _py.tuple
list = _py.list
dict = _py.dict


def isinstance(x, t):
    """``isinstance`` of the primal: a traced array is an ``np.ndarray``."""
    return _py.isinstance(plain(x), t)


def type(x):
    """``type`` of the primal."""
    return _py.type(plain(x))


class SequenceBox:
    """autograd's box for a traced tuple or list: wengert's are plain containers."""


class DictBox:
    """autograd's box for a traced dict: wengert's are plain containers."""
