"""Graph-based AD: derivative programs as new graphs.

A graph is a function, so its derivative graph is the trace of a transform of
it: tracing ``wg.grad(g)`` runs ``g`` node by node on tape variables whose
values are graph tracers.  The forward sweep records ``g``'s own nodes; the
reverse sweep runs each node's pullback -- the primitive's rrule, written with
wengert operations -- on graph tracers, so it is recorded too.  The result is
the seeds' augmented graph, unrolled into one straight-line program, built from
the same rules as every other engine.  Applying ``grad`` again differentiates
that program: second and higher derivatives.
"""
from __future__ import annotations

import numpy as np

from .. import transforms
from ..tree import flatten, unflatten
from .trace import trace

__all__ = ["grad_graph", "jvp_graph", "vjp_graph", "jacobian_graph", "hessian_graph"]


def _retrace(g, fn, name, args=None, names=None):
    return trace(fn, *(g.example_args if args is None else args),
                 _names=names or g.arg_names, _name=name)


def grad_graph(g, argnums=0):
    return _retrace(g, transforms.grad(g, argnums), f"grad_{g.name}")


def jacobian_graph(g, argnums=0, mode="auto"):
    return _retrace(g, transforms.jacobian(g, argnums, mode=mode), f"jacobian_{g.name}")


def hessian_graph(g, argnums=0):
    return _retrace(g, transforms.hessian(g, argnums), f"hessian_{g.name}")


def _ones_like(tree):
    leaves, d = flatten(tree)
    return unflatten(d, [1.0 if isinstance(x, float) else np.ones_like(x) for x in leaves])


def jvp_graph(g):
    """Arguments ``(*primals, *tangents)``; the result is ``(out, out_tangent)``."""
    n = len(g.example_args)

    def jvp_fn(*args):
        return transforms.jvp(g, args[:n], args[n:])
    tangents = tuple(_ones_like(a) for a in g.example_args)
    names = list(g.arg_names) + [f"d{a}" for a in g.arg_names]
    return _retrace(g, jvp_fn, f"jvp_{g.name}", g.example_args + tangents, names)


def vjp_graph(g):
    """Arguments ``(*primals, cotangent)``; the result is one cotangent per primal."""
    n = len(g.example_args)

    def vjp_fn(*args):
        return transforms.vjp(g, *args[:n])[1](args[n])
    out = g(*g.example_args)
    names = list(g.arg_names) + [f"g{g.name}"]
    return _retrace(g, vjp_fn, f"vjp_{g.name}", g.example_args + (_ones_like(out),), names)
