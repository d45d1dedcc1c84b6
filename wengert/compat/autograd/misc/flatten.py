"""``autograd.misc.flatten``: nested tuples, lists and dicts of arrays as one 1-D array, and
back. Leaves come in autograd's order: a sequence's in order, a dict's by sorted key (wengert's
own ``wg.tree.ravel`` keeps a dict's insertion order). ``unflatten`` gives each leaf back as
an array of its shape (a number as a 0-d array), and both directions work on traced values."""
import numpy as np

from .... import numpy as wnp
from ....core import plain

__all__ = ["flatten", "flatten_func"]


def _leaves(value, out):
    t = type(plain(value))
    if t in (list, tuple):
        for v in value:
            _leaves(v, out)
    elif t is dict:
        for k in sorted(value):
            _leaves(value[k], out)
    else:
        out.append(value)
    return out


def _rebuild(template, parts):
    t = type(template)
    if t in (list, tuple):
        return t(_rebuild(v, parts) for v in template)
    if t is dict:
        return {k: _rebuild(template[k], parts) for k in sorted(template)}
    return next(parts)


def flatten(value):
    """``(vector, unflatten)``."""
    leaves = _leaves(value, [])
    shapes = [np.shape(plain(x)) for x in leaves]
    sizes = [int(np.prod(s, dtype=int)) for s in shapes]
    parts = [wnp.ravel(x) for x in leaves]
    vec = wnp.concatenate(parts) if parts else np.array([])
    ends = np.cumsum([0] + sizes)

    def unflatten(v):
        pieces = (wnp.reshape(v[int(lo):int(hi)], s)
                  for lo, hi, s in zip(ends[:-1], ends[1:], shapes))
        return _rebuild(value, pieces)
    return vec, unflatten


def flatten_func(func, example):
    """``(flat_func, unflatten, flat_example)``: ``func`` of a tree as a function of a vector."""
    flat_example, unflatten = flatten(example)

    def flat_func(x, *args):
        return flatten(func(unflatten(x), *args))[0]
    return flat_func, unflatten, flat_example
