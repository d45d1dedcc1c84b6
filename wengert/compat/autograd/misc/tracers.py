"""``autograd.misc.tracers``: ``const_graph``, which in autograd records a function's graph
once and replays it; here the function itself (wengert's eager engines need no replay, and
``wg.compile`` is the way to trace once)."""
import functools

__all__ = ["const_graph"]


def const_graph(fun, *args, **kwargs):
    partial = functools.partial(fun, *args, **kwargs)
    return functools.wraps(fun)(lambda *a, **kw: partial(*a, **kw))
