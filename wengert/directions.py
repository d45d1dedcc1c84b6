"""Several directions at once: ``vmap`` over ``jvp`` and over a pullback (JAX's jacfwd and
jacrev).

``wg.jacobian``, ``wg.hessian``, ``jvp(batched=True)``, ``wg.vjp``'s pullback given stacked
cotangents and the compressed passes of ``sparse_jacobian``/``sparse_hessian`` push (or
pull) ``k`` directions in one pass.  Each is ``wg.vmap`` over the pass for one direction:
a rule only ever sees one direction (core.py), its tangents then ``BatchTracer`` values
that ``wengert.batching`` maps through every primitive they meet.
"""
import numpy as np

from . import numpy as wnp
from .arrays import shape_of, zeros
from .batching import vmap
from .core import Tracer, check_live, leaf_dtype, new_level
from .forward import Dual, ForwardTrace
from .tree import flatten, unflatten
from ._validate import check_output

__all__ = ["push_directions", "pull_directions", "pull_stacked"]


def push_directions(run, in_leaves, seeds, transform, fn=None):
    """``run(inputs)`` with ``seeds[i]`` (``k`` tangents of ``in_leaves[i]`` on a leading
    axis) pushed forward in one pass: the output shapes, treedef and per output leaf its
    ``k`` tangents, ``(k, *out)``.  ``fn`` is the user's function, for error messages."""
    found = []

    def pushed(*ts):
        trace = ForwardTrace(new_level())
        try:
            out = run([Dual(x, t, trace) for x, t in zip(in_leaves, ts)])
            check_output(out, transform)
            out_leaves, out_def = flatten(out)
            shapes, tangents = [], []
            for o in out_leaves:
                mine = isinstance(o, Dual) and o._trace is trace
                if not mine and isinstance(o, Tracer):  # an outer tracer must be live
                    check_live(o, lambda: f"returned by the function given to {transform}")
                v = o.value if mine else o
                os_ = shape_of(v)
                t = o._tangent if mine else None
                if t is None:
                    t = zeros(os_, leaf_dtype(v) or float, like=v)
                elif shape_of(t) != os_:
                    t = wnp.broadcast_to(t, os_)
                shapes.append(os_)
                tangents.append(t)
            found[:] = (shapes, out_def)
            return tangents
        finally:
            trace.finish(transform, fn)  # its Duals are dead from now on
    tangents = vmap(pushed)(*seeds)
    return found[0], found[1], tangents


def pull_directions(tape, seeds, index, like):
    """``seeds`` (tape entry -> ``k`` cotangents on a leading axis) pulled back in one
    sweep of ``tape``: per entry ``index[i]``, its ``k`` cotangents, ``(k, *like[i].shape)``."""
    keys = list(seeds)

    def pulled(*ws):
        adj = tape.sweep(dict(zip(keys, ws)))
        return [zeros(shape_of(x), leaf_dtype(x), like=x) if adj[i] is None else adj[i]
                for x, i in zip(like, index)]
    return vmap(pulled)(*seeds.values())


def pull_stacked(pullback, out_leaves, ct_leaves, out_def, batch):
    """``pullback`` of cotangents with leading axes ``batch`` (a stack of them)."""
    k = int(np.prod(batch, dtype=np.int64))
    flat = [wnp.reshape(c, (k,) + shape_of(o)) if shape_of(c) != shape_of(o) else
            wnp.broadcast_to(c, (k,) + shape_of(o)) for o, c in zip(out_leaves, ct_leaves)]
    res = vmap(lambda *cs: pullback(unflatten(out_def, list(cs))))(*flat)
    leaves, d = flatten(res)
    return unflatten(d, [wnp.reshape(g, tuple(batch) + shape_of(g)[1:]) for g in leaves])
