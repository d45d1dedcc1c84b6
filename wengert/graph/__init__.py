"""Static graphs: trace a function into a Wengert list, differentiate it as a graph,
simplify it, generate Python source from it, compile it, draw it.

One more engine over the one rule registry: ``GraphTrace`` records primitives,
and derivative graphs come from running the same rules on graph tracers.
"""
from .compile import compile
from .dot import to_dot
from .graph import Graph, GuardFailure, Node
from .trace import GraphTrace, GraphTracer, trace

__all__ = ["trace", "Graph", "Node", "GraphTrace", "GraphTracer", "GuardFailure", "compile",
           "to_dot"]
