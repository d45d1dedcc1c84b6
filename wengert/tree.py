"""Pytrees: nested tuples, lists, dicts and namedtuples of leaves, flattened and rebuilt."""

import numpy as np

__all__ = ["flatten", "unflatten", "tree_map"]


class TreeDef:
    __slots__ = ("kind", "meta", "children")

    def __init__(self, kind, meta, children):
        self.kind, self.meta, self.children = kind, meta, children

    def __eq__(self, other):
        if self is other:
            return True  # LEAF == LEAF, the common case
        return (isinstance(other, TreeDef) and self.kind == other.kind
                and self.meta == other.meta and self.children == other.children)

    def __repr__(self):
        return f"TreeDef({self.kind}, {self.meta!r}, {self.children!r})"

    @property
    def num_leaves(self):
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)


LEAF = TreeDef("leaf", None, ())
NONE = TreeDef("none", None, ())


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


_CONTAINERS = (tuple, list, dict)


def flatten(tree):
    """``(leaves, treedef)``.  Recursive in the nesting depth only, not in the number of leaves."""
    if tree is not None and not isinstance(tree, _CONTAINERS):
        return [tree], LEAF  # a single leaf (array, float, tracer): the common case, quickly
    leaves = []
    defs = _flatten(tree, leaves)
    return leaves, defs


def _flatten(x, leaves):
    t = type(x)
    if t is list or t is tuple:  # exactly these (not namedtuples): the common containers
        kids = []
        for c in x:
            tc = type(c)
            if tc is np.ndarray or tc is float:  # a leaf, without a call
                leaves.append(c)
                kids.append(LEAF)
            else:
                kids.append(_flatten(c, leaves))
        return TreeDef("list" if t is list else "tuple", None, tuple(kids))
    if x is None:
        return NONE
    if _is_namedtuple(x):
        return TreeDef("namedtuple", type(x), tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, tuple):
        return TreeDef("tuple", None, tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, list):
        return TreeDef("list", None, tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, dict):
        keys = tuple(x.keys())
        return TreeDef("dict", keys, tuple(_flatten(x[k], leaves) for k in keys))
    leaves.append(x)
    return LEAF


def unflatten(treedef, leaves):
    if treedef is LEAF:
        (x,) = leaves
        return x
    it = iter(leaves)
    out = _build(treedef, it)
    return out


def _build(d, it):
    k = d.kind
    if k == "leaf":
        return next(it)
    if k == "none":
        return None
    kids = [next(it) if c is LEAF else _build(c, it) for c in d.children]
    if k == "tuple":
        return tuple(kids)
    if k == "list":
        return kids
    if k == "namedtuple":
        return d.meta(*kids)
    return dict(zip(d.meta, kids))


def tree_map(fn, tree, *rest):
    leaves, d = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(d, [fn(x, *ys) for x, *ys in zip(leaves, *others)])
