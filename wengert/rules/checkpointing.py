"""The primitives checkpointed loops are built from: take one slice along an axis, put
it back, stack slices; and a whole loop as one node of a compiled program.

``wg.scan`` reads its ``xs`` one step at a time and stacks its ``ys`` with them.
Each takes the axis to work on (under ``wg.vmap`` it moves past the batch axis).

Under ``wg.compile`` a scan is one ``scan_loop`` node; its reverse rule records
``scan_forward`` (the schedule's forward phase, whose last result holds the snapshots)
and ``scan_reverse`` (the rest of the schedule).  What they run is their ``plan``
parameter's business (wengert.checkpoint.compiled: the compiled step, its VJP, the
schedule); every rule here hands over to it.
"""
import numpy as np

from ..core import primitive, shape_of
from ..arrays import dtype_of
from . import patterns

__all__ = ["checkpoint_take", "checkpoint_put", "checkpoint_stack", "scan_loop", "scan_forward",
           "scan_reverse"]


# linear, moving elements along ``axis``: wg.vmap moves the axis past the batch axis
@primitive(name="checkpoint_take", linear=True, sparsity=patterns.MOVES, batch="axis")
def checkpoint_take(x, index=0, axis=0):
    return np.take(x, index, axis=axis)


@primitive(name="checkpoint_put", linear=True, sparsity=patterns.MOVES, batch="axis")
def checkpoint_put(g, index=0, axis=0, n=1):
    g = np.asarray(g)
    out = np.zeros(g.shape[:axis] + (n,) + g.shape[axis:], g.dtype)
    out[(slice(None),) * axis + (index,)] = g
    return out


@primitive(name="checkpoint_stack", linear=True, sparsity=patterns.MOVES, batch="axis")
def checkpoint_stack(*xs, axis=0):
    return np.stack(xs, axis=axis)


@checkpoint_take.frule(symbolic_zeros=True)
def _take_jvp(primals, tangents, index=0, axis=0):
    (x,), (dx,) = primals, tangents
    ans = checkpoint_take(x, index=index, axis=axis)
    if dx is None:
        return ans, None
    return ans, checkpoint_take(dx, index=index, axis=axis)


@checkpoint_take.rrule
def _take_vjp(x, index=0, axis=0):
    ans = checkpoint_take(x, index=index, axis=axis)
    n = shape_of(x)[axis]

    def pullback(g):
        return (checkpoint_put(g, index=index, axis=axis, n=n),)
    return ans, pullback


@checkpoint_put.frule(symbolic_zeros=True)
def _put_jvp(primals, tangents, index=0, axis=0, n=1):
    (g,), (dg,) = primals, tangents
    ans = checkpoint_put(g, index=index, axis=axis, n=n)
    if dg is None:
        return ans, None
    return ans, checkpoint_put(dg, index=index, axis=axis, n=n)


@checkpoint_put.rrule
def _put_vjp(g, index=0, axis=0, n=1):
    ans = checkpoint_put(g, index=index, axis=axis, n=n)

    def pullback(h):
        return (checkpoint_take(h, index=index, axis=axis),)
    return ans, pullback


@checkpoint_stack.frule(symbolic_zeros=True)
def _stack_jvp(primals, tangents, axis=0):
    ans = checkpoint_stack(*primals, axis=axis)
    live = [(p, t) for p, t in zip(primals, tangents) if t is not None]
    if not live:
        return ans, None
    t0 = live[0][1]
    ts = [t if t is not None else np.zeros(shape_of(p), dtype_of(t0))
          for p, t in zip(primals, tangents)]
    return ans, checkpoint_stack(*ts, axis=axis)


@checkpoint_stack.rrule
def _stack_vjp(*xs, axis=0):
    ans = checkpoint_stack(*xs, axis=axis)

    def pullback(g):
        return tuple(checkpoint_take(g, index=k, axis=axis) for k in range(len(xs)))
    return ans, pullback



# -- a whole loop as one node (wg.scan under wg.compile) ---------------------------------------
@primitive(name="scan_loop", multiple_results=True)
def scan_loop(*args, plan):
    """The loop's final carry leaves, then its stacked ys: args are init, xs, captured."""
    return plan.run(args)


@primitive(name="scan_forward", multiple_results=True)
def scan_forward(*args, plan):
    """``scan_loop``'s results and, last, the snapshots the reverse phase starts from."""
    return plan.forward(args)


@primitive(name="scan_reverse", multiple_results=True)
def scan_reverse(*args, plan):
    """Cotangents of ``scan_loop``'s float arguments: args are the snapshots, then
    ``scan_loop``'s arguments, then the cotangents of its results (``None`` = zero)."""
    return plan.reverse(args)


for _p in (scan_loop, scan_forward, scan_reverse):
    _p.rrule(lambda *args, plan, needs, _p=_p: plan.rrule(_p, args, needs), needs=True)
    _p.frule(lambda primals, tangents, plan, _p=_p: plan.frule(_p, primals, tangents),
             symbolic_zeros=True)
    _p.batching(lambda args, batched, plan, _p=_p: plan.batch(_p, args, batched))
