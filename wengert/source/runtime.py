"""The few helpers generated programs call besides the primitives themselves.

All are written with wengert operations, so a generated derivative can be
differentiated again by any engine.
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import numpy as wnp
from .. import transforms
from ..arrays import dtype_of, real_for_real as _real_for_real, sum_to, zeros_like_value
from ..core import Tracer, ndim_of, shape_of
from ..tree import flatten, unflatten

__all__ = ["pullback", "pushforward", "vjp_call", "jvp_call", "unbroadcast", "broadcast_like",
           "add_at", "add_tree", "tangent_at", "shaped_tangents", "fit", "seed", "item"]


def seed(out):
    """The cotangent ``1`` of a scalar output (a gradient needs one)."""
    transforms.check_output(out, "wg.source.grad")  # None, a string: not a zero gradient
    if isinstance(out, (list, tuple, dict)) or ndim_of(out) != 0:
        raise ValueError(
            f"grad needs a function with a scalar output, but it returned shape "
            f"{shape_of(out) if not isinstance(out, (list, tuple, dict)) else type(out).__name__}"
            ". Use wg.jacobian or wg.vjp for non-scalar outputs, or reduce it (e.g. wnp.sum).")
    return 1.0


def _nz(c):
    return 0.0 if c is None else c


def _zero_for(g, ans):
    """Is ``g`` the plain ``0.0`` an adjoint starts from, standing for a whole array ``ans``?

    (An adjoint that received nothing on the path the program took is still that scalar.)
    """
    return type(g) is float and g == 0.0 and not isinstance(ans, (list, tuple, dict)) and \
        ndim_of(ans) != 0


def _cotangent_for(g, ans):
    """``g`` with the shape of the output ``ans``.  An adjoint that is still zero on the path
    the program took can be smaller than its value (``0.0``, or ``b * 0.0`` for a small
    ``b``): it stands for the whole array, as broadcasting says."""
    if isinstance(ans, (list, tuple, dict)) or isinstance(g, (list, tuple, dict)):
        return g
    if shape_of(g) != shape_of(ans):
        return broadcast_like(g, ans)
    return g


def pullback(prim, args, needs, params):
    """``(ans, pullback)`` from the primitive's reverse rule; zeros come back as ``0.0``."""
    ans, pb = prim.pullback_of(tuple(args), params, tuple(needs))

    def pullback_(g):
        if _zero_for(g, ans):
            return tuple(0.0 for _ in args)
        return tuple(_nz(c) for c in pb(_cotangent_for(g, ans)))
    return ans, pullback_


def pushforward(prim, args, tangents, params):
    """``(ans, tangent)`` from the primitive's forward rule (``None`` tangents are zero)."""
    ans, t = prim.pushforward(tuple(args), tuple(tangents), params)
    return ans, _nz(t)


def _kind_of_leaf(v):
    """'r' a real leaf with a derivative, 'c' a complex one, None neither (integers,
    booleans, strings)."""
    if type(v) is complex:
        return "c"
    dt = transforms._leaf_dtype(v)
    if dt is None:
        return None
    if np.issubdtype(dt, np.floating):
        return "r"
    return "c" if np.issubdtype(dt, np.complexfloating) else None


def _leaves(args, which):
    """Every argument flattened (lists of arrays, dicts: one leaf each), and the positions
    ``(argument, leaf, kind)`` of the differentiable leaves of the arguments ``which``
    picks.  (The engines take real inputs: a complex leaf enters as its real and imaginary
    parts.)"""
    flat = [flatten(a) for a in args]
    pos = []
    for i, (leaves, _) in enumerate(flat):
        if which(i):
            for j, v in enumerate(leaves):
                k = _kind_of_leaf(v)
                if k is not None:
                    pos.append((i, j, k))
    return flat, pos


def _inputs(flat, pos, values=None):
    """The real inputs for the leaves at ``pos``: a complex one gives two."""
    out = []
    for (i, j, k), v in zip(pos, values if values is not None else
                            [flat[i][0][j] for i, j, _ in pos]):
        out += [v] if k == "r" else [_real_part(v), _imag_part(v)]
    return out


def _real_part(v):
    return wnp.real(v)


def _imag_part(v):
    return wnp.imag(v)


def _call_with(fn, flat, pos, kwargs):
    """``fn`` of the leaves at ``pos`` (the other leaves as they are)."""
    def partial(*xs):
        leaves = [list(ls) for ls, _ in flat]
        it = iter(xs)
        for i, j, k in pos:
            x = next(it)
            leaves[i][j] = x if k == "r" else x + 1j * next(it)
        return fn(*[unflatten(d, ls) for (_, d), ls in zip(flat, leaves)], **kwargs)
    return partial


def _zeros_as(flat):
    """A zero cotangent for each argument, in its structure (a list gets a list of zeros)."""
    return tuple(unflatten(d, [0.0] * len(ls)) for ls, d in flat)


def vjp_call(fn, args, active, kwargs):
    """Reverse mode through a function without a rule or source: the tape engine.  Each
    argument's cotangent has its structure: a list of arrays gets a list of cotangents."""
    flat, pos = _leaves(args, lambda i: active[i])
    if not pos:
        return fn(*args, **kwargs), lambda g: _zeros_as(flat)
    ans, pb = transforms.vjp(_call_with(fn, flat, pos, kwargs), *_inputs(flat, pos))

    def pullback_(g):
        if _zero_for(g, ans):
            return _zeros_as(flat)
        cts = iter(pb(_cotangent_for(g, ans)))
        out = [[0.0] * len(ls) for ls, _ in flat]
        for i, j, k in pos:
            # a complex leaf z = a + ib: its cotangent is ga - i gb (df = Re(ct dz))
            out[i][j] = next(cts) if k == "r" else next(cts) - 1j * next(cts)
        return tuple(unflatten(d, ls) for (_, d), ls in zip(flat, out))
    return ans, pullback_


def jvp_call(fn, args, tangents, kwargs):
    """Forward mode through a function without a rule or source: dual numbers."""
    flat, pos = _leaves(args, lambda i: tangents[i] is not None)
    if not pos:
        return fn(*args, **kwargs), 0.0
    tflat = [flatten(t)[0] if t is not None else None for t in tangents]
    ts = []
    for i, j, _ in pos:
        t = tflat[i][j] if len(tflat[i]) == len(flat[i][0]) else tflat[i][0]  # 0.0 for a list
        ts.append(broadcast_like(t, flat[i][0][j]))
    return transforms.jvp(_call_with(fn, flat, pos, kwargs), tuple(_inputs(flat, pos)),
                          tuple(_inputs(flat, pos, ts)))


def unbroadcast(g, like):
    """Sum the cotangent ``g`` of a broadcast result back to the shape of ``like``; a real
    ``like`` gets the real part of a complex ``g`` (JAX's convention, as the tape's rules)."""
    g = _real_for_real(g, like)
    xs = shape_of(like)
    gs = shape_of(g)
    if gs == xs:
        return g
    full = np.broadcast_shapes(gs, xs)
    if full == xs:
        # (a smaller cotangent is a zero that still stands for the whole result: it
        # broadcasts wherever it is added; nothing in it is to be summed)
        return g
    if len(gs) < len(full):
        g = wnp.broadcast_to(g, full)
    return sum_to(g, xs)


def broadcast_like(t, like):
    """A tangent with the shape of the value it belongs to (zeros may arrive as ``0.0``)."""
    xs = shape_of(like)
    if shape_of(t) == xs:
        return t
    return wnp.broadcast_to(t, xs)


def tangent_at(t, x, idx):
    """The tangent of ``x[idx]``: ``t[idx]``, once a zero tangent (``0.0``, or a zero
    smaller than ``x``) has ``x``'s shape."""
    if isinstance(t, (list, tuple, dict)):
        return t[idx]
    if shape_of(t) != shape_of(x):
        if not isinstance(t, Tracer) and not np.any(t):
            return 0.0
        t = broadcast_like(t, x)
    return t[idx]


def shaped_tangents(primals, tangents):
    """Tangents with the shapes of their arrays (a caller may pass ``0.0`` for one)."""
    out = []
    for p, t in zip(primals, tangents):
        if isinstance(p, (np.ndarray, Tracer)) and not isinstance(t, (list, tuple, dict)) \
                and shape_of(t) != shape_of(p) and ndim_of(t) <= ndim_of(p):
            t = broadcast_like(t, p)
        out.append(t)
    return tuple(out)


_OWNED = weakref.WeakValueDictionary()  # id -> adjoint arrays add_at made (safe to update)


_CONTAINERS = (list, tuple, dict)


def add_tree(a, b):
    """``a + b`` for cotangents that may be containers (of a pytree argument's parts): leaf
    by leaf, a plain ``0.0`` standing for a zero of any structure. Containers come back new,
    so an adjoint placed in another is never updated through it later."""
    if not isinstance(a, _CONTAINERS) and not isinstance(b, _CONTAINERS):
        return a + b
    if not isinstance(a, _CONTAINERS) and type(a) is float and a == 0.0:
        return add_tree(_zeros_like_tree(b), b)
    if not isinstance(b, _CONTAINERS) and type(b) is float and b == 0.0:
        return add_tree(a, _zeros_like_tree(a))
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: add_tree(a.get(k, 0.0), b.get(k, 0.0)) for k in {**a, **b}}
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [add_tree(u, v) for u, v in zip(a, b)]
    raise TypeError(f"cannot add cotangents of structures {type(a).__name__} and "
                    f"{type(b).__name__}")


def _zeros_like_tree(t):
    if isinstance(t, dict):
        return {k: 0.0 for k in t}
    return [0.0] * len(t) if isinstance(t, (list, tuple)) else 0.0


def add_at(gx, x, idx, g):
    """``gx`` plus the cotangent ``g`` of ``x[idx]`` placed at ``idx`` (``g`` may itself be
    a container's: nested pytrees)."""
    if isinstance(x, (list, tuple)):
        # the list of adjoints belongs to the generated program: updated in place
        out = gx if isinstance(gx, list) else [0.0] * len(x)
        out[idx] = add_tree(out[idx], g)
        return out
    if isinstance(x, dict):
        out = gx if isinstance(gx, dict) else {k: 0.0 for k in x}
        out[idx] = add_tree(out[idx], g)
        return out
    xs = shape_of(x)
    if type(x) is np.ndarray and not isinstance(g, Tracer) and not isinstance(gx, Tracer):
        # plain arrays: scatter in place into an array this program owns
        out = _OWNED.get(id(gx))
        if out is not gx:
            out = np.zeros(xs, dtype=x.dtype if np.issubdtype(x.dtype, np.floating) else float)
            out += gx
            _OWNED[id(out)] = out
        np.add.at(out, idx, g)   # (x[[0, 0]]: both cotangents land on x[0])
        return out
    key = idx if isinstance(idx, tuple) else (idx,)
    if all(isinstance(k, (int, np.integer)) for k in key) and len(key) <= len(xs) and \
            ndim_of(g) == len(xs) - len(key):
        # an element (or a block of trailing axes): scatter with a mask, no index rule needed
        mask = np.zeros(xs, dtype=bool)
        mask[key] = True
        return gx + wnp.where(mask, g, 0.0)
    part, pb = transforms.vjp(lambda a: a[idx], x)
    return gx + pb(_cotangent_for(g, part))[0]


def item(a, *args):
    """``a.item(*args)``: one element (a flat index, an index tuple, or the only one); a
    Python scalar for a plain array, a 0-d traced value for a traced one."""
    if not isinstance(a, Tracer):
        return a.item(*args)
    if not args:
        if a.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return wnp.reshape(a, ())
    index = args[0] if len(args) == 1 else tuple(args)
    if isinstance(index, tuple):
        return a[index]
    return wnp.reshape(a, (-1,))[index]


def _spread_zeros(g, x):
    """``g`` with each plain ``0.0`` that stands for a whole part of ``x`` (a tuple, a dict)
    spread over that part's leaves, so that ``g`` and ``x`` have as many leaves."""
    if isinstance(x, dict) and isinstance(g, dict):
        return {k: _spread_zeros(g.get(k, 0.0), v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) and isinstance(g, (list, tuple)) and len(g) == len(x):
        return [_spread_zeros(a, v) for a, v in zip(g, x)]
    if isinstance(x, (list, tuple, dict)) and not isinstance(g, (list, tuple, dict)):
        return [0.0] * len(flatten(x)[0])
    return g


def fit(g, x):
    """The derivative with respect to ``x``: its shape, dtype and structure."""
    tx = type(x)
    if tx is float:
        if type(g) is float:
            return g
        if isinstance(g, Tracer):
            return g if ndim_of(g) == 0 else unbroadcast(g, x)
        if isinstance(g, np.generic) or (isinstance(g, np.ndarray) and g.ndim == 0):
            return g
        return float(g) if ndim_of(g) == 0 else float(np.sum(g))
    if tx is list or tx is tuple:
        if type(g) is list and len(g) == len(x):
            out = [a if type(a) is float and type(v) is float else fit(a, v)
                   for a, v in zip(g, x)]
            return out if tx is list else tuple(out)
    if tx is list or tx is tuple or tx is dict or isinstance(x, (list, tuple, dict)):
        xl, d = flatten(x)
        if not isinstance(g, (list, tuple, dict)):
            return unflatten(d, [zeros_like_value(v) for v in xl])
        gl, _ = flatten(_spread_zeros(g, x))
        return unflatten(d, [fit(a, v) for a, v in zip(gl, xl)])
    if type(g) is list and isinstance(x, (np.ndarray, Tracer)):
        # the adjoint of a vector, accumulated element by element
        if any(isinstance(e, Tracer) for e in g):
            g = wnp.stack([e if isinstance(e, Tracer) else np.asarray(e, dtype_of(x))
                           for e in g])
        else:
            g = np.array(g, dtype=dtype_of(x))
    if isinstance(g, Tracer):
        if shape_of(g) != shape_of(x):
            g = broadcast_like(g, x) if ndim_of(g) < ndim_of(x) else unbroadcast(g, x)
        return g
    if isinstance(x, Tracer):
        return g if shape_of(g) == shape_of(x) else broadcast_like(g, x)
    xs = shape_of(x)
    if shape_of(g) != xs:
        g = np.broadcast_to(g, xs).copy() if ndim_of(g) < len(xs) else unbroadcast(g, x)
    dt = dtype_of(x)
    if isinstance(g, (np.ndarray, np.generic)) and g.dtype != dt and np.issubdtype(dt, np.floating):
        g = g.astype(dt)
    elif isinstance(g, float) and isinstance(x, (np.ndarray, np.generic)):
        g = np.asarray(g, dt) if xs == () else np.full(xs, g, dt)
    return g
