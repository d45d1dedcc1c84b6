"""Pytrees: nested tuples, lists, dicts, namedtuples, dataclasses and registered types of
leaves, flattened and rebuilt.

Every transform takes and returns pytrees: a gradient has its argument's structure.

>>> import dataclasses, numpy as np, wengert as wg, wengert.numpy as wnp
>>> @dataclasses.dataclass
... class Params:
...     w: np.ndarray
...     b: float
>>> g = wg.grad(lambda p: wnp.sum(p.w ** 2) + p.b)(Params(np.array([1.0, 2.0]), 0.5))
>>> g
Params(w=array([2., 4.]), b=1.0)
>>> wg.tree.flatten(g)[0]
[array([2., 4.]), 1.0]

A dataclass is taken apart by its fields (frozen or not; a field declared with
``dataclasses.field(metadata={"static": True})`` is kept with the structure instead, as a
name or a setting that is not differentiated). Any other type is added with ``register``.
"""
import dataclasses

import numpy as np

__all__ = ["flatten", "unflatten", "tree_map", "map", "leaves", "structure", "register", "ravel"]

# type -> (flatten, unflatten) for types added by ``register``
_REGISTRY = {}
# type -> whether its instances are taken apart (registered, or a dataclass): asked once a type
_IS_NODE = {np.ndarray: False, float: False, int: False, np.float64: False}


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


def register(cls, flatten, unflatten):
    """Make instances of ``cls`` pytrees (JAX's ``register_pytree_node``):
    ``flatten(obj) -> (children, aux)`` gives the children (pytrees themselves) and what
    else rebuilding takes, ``unflatten(aux, children) -> obj`` rebuilds. ``aux`` is compared
    with ``==`` when two structures are matched, so keep it to plain hashable values.

    >>> import numpy as np, wengert as wg, wengert.numpy as wnp
    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> wg.tree.register(Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))
    >>> g = wg.grad(lambda p: p.a * p.b)(Pair(2.0, 3.0))
    >>> type(g).__name__, g.a, g.b
    ('Pair', 3.0, 2.0)
    """
    if not isinstance(cls, type):
        raise TypeError(f"wg.tree.register needs a class, got {cls!r}")
    if not (callable(flatten) and callable(unflatten)):
        raise TypeError("wg.tree.register(cls, flatten, unflatten): flatten and unflatten must "
                        "be functions, flatten(obj) -> (children, aux) and "
                        "unflatten(aux, children) -> obj")
    if cls in (tuple, list, dict, type(None)) or _is_namedtuple_type(cls):
        raise ValueError(f"{cls.__name__} is a pytree already and cannot be registered again")
    _REGISTRY[cls] = (flatten, unflatten)
    _IS_NODE[cls] = True


def _is_namedtuple_type(t):
    return issubclass(t, tuple) and hasattr(t, "_fields")


def _is_node(t):
    """Whether instances of type ``t`` (not a container) are taken apart."""
    node = _IS_NODE.get(t)
    if node is None:
        node = _IS_NODE[t] = t in _REGISTRY or dataclasses.is_dataclass(t)
    return node


def flatten(tree):
    """``(leaves, treedef)``.  Recursive in the nesting depth only, not in the number of leaves."""
    t = type(tree)
    if t is float or t is np.ndarray or _IS_NODE.get(t) is False:
        return [tree], LEAF  # a single leaf: the common case, quickly
    if tree is not None and not isinstance(tree, _CONTAINERS) and not _is_node(t):
        return [tree], LEAF  # a single leaf (array, number, tracer)
    leaves = []
    defs = _flatten(tree, leaves)
    return leaves, defs


def _flatten(x, leaves):
    t = type(x)
    if t is np.ndarray or t is float:
        leaves.append(x)
        return LEAF
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
    if t in _REGISTRY:
        children, aux = _REGISTRY[t][0](x)
        return TreeDef("custom", (t, aux), tuple(_flatten(c, leaves) for c in children))
    if _is_node(t):  # a dataclass instance
        names, static = _fields(t)
        meta = (t, names, tuple((n, getattr(x, n)) for n in static))
        return TreeDef("dataclass", meta, tuple(_flatten(getattr(x, n), leaves) for n in names))
    leaves.append(x)
    return LEAF


def _fields(t):
    """The names of a dataclass's children and of its static fields."""
    names, static = [], []
    for f in dataclasses.fields(t):
        (static if f.metadata.get("static", False) else names).append(f.name)
    return tuple(names), tuple(static)


def unflatten(treedef, leaves):
    """The pytree of structure ``treedef`` (from ``flatten``) holding ``leaves``, in order."""
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
    return node(d, [next(it) if c is LEAF else _build(c, it) for c in d.children])


def children(x, treedef):
    """The children of the node ``x`` whose structure is ``treedef`` (not a leaf)."""
    k = treedef.kind
    if k == "dict":
        return [x[key] for key in treedef.meta]
    if k == "custom":
        return list(_REGISTRY[treedef.meta[0]][0](x)[0])
    if k == "dataclass":
        return [getattr(x, n) for n in treedef.meta[1]]
    return list(x)


def node(d, kids):
    """The node of structure ``d`` (not a leaf) made of its children ``kids``, each built."""
    k = d.kind
    if k == "tuple":
        return tuple(kids)
    if k == "list":
        return kids
    if k == "namedtuple":
        return d.meta(*kids)
    if k == "dict":
        return dict(zip(d.meta, kids))
    if k == "custom":
        cls, aux = d.meta
        return _REGISTRY[cls][1](aux, kids)
    return _new_dataclass(d.meta, kids)


def _new_dataclass(meta, kids):
    """The dataclass with these fields, set as they were (no ``__init__`` or
    ``__post_init__``, which may not expect a tracer or a gradient; frozen ones too)."""
    cls, names, static = meta
    obj = object.__new__(cls)
    for n, v in zip(names, kids):
        object.__setattr__(obj, n, v)
    for n, v in static:
        object.__setattr__(obj, n, v)
    return obj


def tree_map(fn, tree, *rest):
    """``fn`` applied leaf by leaf (with the matching leaves of ``rest``), same structure."""
    leaves, d = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(d, [fn(x, *ys) for x, *ys in zip(leaves, *others)])


map = tree_map  # as ``jax.tree.map``


def leaves(tree):
    """The leaves of ``tree``, in order."""
    return flatten(tree)[0]


def structure(tree):
    """The ``TreeDef`` of ``tree`` (``unflatten(structure(t), leaves(t))`` rebuilds it)."""
    return flatten(tree)[1]


def ravel(tree):
    """``(vector, unravel)``: the leaves of ``tree`` in one 1-D array (of their common dtype), and
    the function that rebuilds ``tree`` from such a vector, each leaf with its shape, dtype and
    type (as ``jax.flatten_util.ravel_pytree``). Both are differentiable: they run on NumPy's
    functions, which traced values dispatch (NEP 18). Leaves come in the tree's own order, a
    dict's by insertion: ``autograd.misc.flatten`` sorts a dict's keys instead, and gives every
    leaf back as an array (``wengert.compat.autograd.misc.flatten`` does as autograd).

    >>> import numpy as np, wengert as wg
    >>> vec, unravel = wg.tree.ravel({"w": np.ones((2, 2)), "b": 0.5})
    >>> vec
    array([1. , 1. , 1. , 1. , 0.5])
    >>> unravel(2 * vec)
    {'w': array([[2., 2.],
           [2., 2.]]), 'b': 1.0}
    """
    tree_leaves, d = flatten(tree)
    if not tree_leaves:
        return np.zeros(0), lambda vec: unflatten(d, [])
    parts = [np.ravel(x) for x in tree_leaves]
    shapes = [np.shape(x) for x in tree_leaves]
    types = [type(x) if type(x) in (float, complex, int) else None for x in tree_leaves]
    dtypes = [np.result_type(x) for x in tree_leaves]
    ends = np.cumsum([int(np.prod(s, dtype=int)) for s in shapes])
    vec = np.concatenate(parts) if len(parts) > 1 else parts[0]

    def unravel(vec):
        if np.shape(vec) != (int(ends[-1]),):
            raise ValueError(f"unravel needs a vector of shape ({int(ends[-1])},), got "
                             f"{np.shape(vec)}")
        out = []
        for lo, hi, shape, t, dt in zip([0, *ends[:-1]], ends, shapes, types, dtypes):
            part = np.reshape(vec[int(lo):int(hi)], shape)
            if np.iscomplexobj(part) and np.dtype(dt).kind != "c":
                part = np.real(part)  # a real leaf of a complex vector: its real part
            if t is not None and isinstance(part, np.ndarray):
                part = t(part[()])  # a Python number stays one (a traced one stays traced)
            elif isinstance(part, np.ndarray) and part.dtype != dt:
                part = part.astype(dt)
            out.append(part)
        return unflatten(d, out)
    return vec, unravel
