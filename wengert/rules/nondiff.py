"""Values that are not differentiated, inside traced code.

``recorded(fn, ...)`` runs ``fn`` on the plain values (under graph tracing it is a node, so
a compiled graph recomputes it); ``concrete`` also hands the result back as a plain value
(an index, a permutation...), guarded under graph tracing.  Every rule module that decides
something on values (a sort order, an index, NumPy's special cases) goes through these.
"""
from ..core import plain as _plain, Tracer, primitive

__all__ = ["batched", "concrete", "concrete_or_batched", "recorded", "strip_eager"]



def strip_eager(x):
    """The value under the eager tracers (``Var``, ``Dual``): a plain value, or a tracer
    of a trace that records guards (a graph being traced), which is kept."""
    while isinstance(x, Tracer) and not hasattr(x._trace, "guard"):
        x = x.value
    return x


_NONDIFF_PRIMS = {}


def _nondiff_primitive(fn, name):
    p = _NONDIFF_PRIMS.get((fn, name))
    if p is None:
        def impl(*args, **kw):
            return fn(*args, **kw)
        impl.__name__ = impl.__qualname__ = name
        p = primitive(impl, name=name, nondiff=True)
        p = _NONDIFF_PRIMS.setdefault((fn, name), p)  # (threads racing here share one)
    return p


def recorded(fn, *args, name=None, **kw):
    """``fn`` on the values of ``args``, not differentiated.  Plain under the eager engines;
    under graph tracing it is recorded as a node, so a compiled graph recomputes it."""
    vals = [strip_eager(a) for a in args]
    if not any(isinstance(v, Tracer) for v in vals):
        return fn(*vals, **kw)
    return _nondiff_primitive(fn, name or getattr(fn, "__name__", "nondiff"))(*vals, **kw)


def batched(*xs):
    """Whether a value holds a batch, one value per example (a trace that is ``batched``:
    wg.vmap), so that no single plain value can be read off it."""
    for x in xs:
        while isinstance(x, Tracer):
            if x._trace.batched:
                return True
            x = x.value
    return False


def concrete_or_batched(fn, *args, name=None, **kw):
    """``concrete``; where an argument holds a batch (wg.vmap), each example's own result,
    traced (``recorded``): a sort order or an argmax that differs by example."""
    how = recorded if batched(*args, *kw.values()) else concrete
    return how(fn, *args, name=name, **kw)


def concrete(fn, *args, name=None, **kw):
    """``fn`` on the values of ``args`` as a plain value (an index, a permutation...).
    Under graph tracing it is recorded with a guard: inputs giving another result
    re-trace instead of reusing a stale one."""
    r = recorded(fn, *args, name=name, **kw)
    if not isinstance(r, Tracer):
        return r
    return r._trace.guard_value(r)  # the trace that kept r records guards (strip_eager)
