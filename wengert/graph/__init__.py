"""Static graphs: trace a function into a Wengert list, differentiate it as a graph,
simplify it, generate Python source from it, compile it, draw it; ``chain`` finds the
cheapest order of its chain of Jacobians (``wg.chain_order``).

One more engine over the one rule registry: ``GraphTrace`` records primitives,
and derivative graphs come from running the same rules on graph tracers.

The modules, each importing only those above it in this list: ``ir`` (nodes),
``trace`` (the recording engine), ``codegen``, ``simplify`` and ``dot`` (passes
over a graph), ``graph`` (``Graph``, whose methods call the passes, and
``trace``), ``fuse`` (Numba kernels for ``wg.compile``), ``compile`` (``wg.compile``), ``chain`` (``wg.chain_order``).
"""
from .compile import compile
from .graph import Graph, to_dot, trace
from .ir import GuardFailure, Node
from .trace import GraphTrace, GraphTracer

__all__ = ["trace", "Graph", "Node", "GraphTrace", "GraphTracer", "GuardFailure", "compile",
           "to_dot"]
