"""``autograd.numpy.numpy_vjps``: the helpers user rules import from it (the rules themselves
are wengert's)."""
import numpy as np

from .... import numpy as wnp
from ....core import plain

__all__ = ["unbroadcast", "unbroadcast_f", "unbroadcast_einsum", "match_complex", "broadcast",
           "balanced_eq", "replace_zero", "metadata"]


def metadata(x):
    v = plain(x)
    return np.shape(v), np.ndim(v), np.result_type(v), np.iscomplexobj(v)


def unbroadcast(x, target_meta, broadcast_idx=0):
    """``x`` summed back to the shape of a value ``target_meta`` describes (``metadata``)."""
    shape, ndim, _, iscomplex = target_meta
    while np.ndim(x) > ndim:
        x = wnp.sum(x, axis=broadcast_idx)
    for axis, size in enumerate(shape):
        if size == 1 and np.shape(x)[axis] != 1:
            x = wnp.sum(x, axis=axis, keepdims=True)
    if np.iscomplexobj(plain(x)) and not iscomplex:
        x = wnp.real(x)
    return x


def unbroadcast_f(target, f):
    """``g -> f(g)`` summed back to ``target``'s shape."""
    meta = metadata(target)
    return lambda g: unbroadcast(f(g), meta)


def unbroadcast_einsum(x, target_meta, subscript):
    if Ellipsis not in subscript:
        return x
    if subscript[0] == Ellipsis:
        return unbroadcast(x, target_meta, 0)
    if subscript[-1] == Ellipsis:
        return unbroadcast(x, target_meta, -1)
    return unbroadcast(x, target_meta, subscript.index(Ellipsis))


def broadcast(x, target_meta, broadcast_idx=0):
    shape, ndim, _, _ = target_meta
    while np.ndim(x) < ndim:
        x = wnp.expand_dims(x, broadcast_idx)
    return wnp.broadcast_to(x, shape) if np.shape(x) != tuple(shape) else x


def match_complex(target, x):
    """``x`` as real when ``target`` is real."""
    if np.iscomplexobj(plain(x)) and not np.iscomplexobj(plain(target)):
        return wnp.real(x)
    return x


def balanced_eq(x, z, y):
    return (x == z) / (1.0 + (x == y))


def replace_zero(x, val):
    return wnp.where(x, x, val)
