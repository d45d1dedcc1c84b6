"""What a graph is made of: a Wengert list of nodes, one primitive per node.

A ``Node`` is an input, a constant, one primitive applied to earlier nodes
(``op``), or the ``j``-th result of a primitive with several results (``proj``).
Every node keeps the value it had when the graph was traced: shapes, dtypes and
Python types are fixed by the example arguments, and the simplifier and the code
generator read them.  A graph's ``guards`` list the boolean nodes the traced
program branched on, with the branch it took; evaluating along another branch
raises ``GuardFailure``.

This module is the bottom of ``wengert.graph``: the tracer builds nodes, the passes
(simplify, codegen, dot) read them, and :mod:`wengert.graph.graph` holds the
``Graph`` that users see.
"""
from __future__ import annotations

__all__ = ["Node", "GuardFailure", "SpecialisedNumber"]


class GuardFailure(Exception):
    """The inputs take another branch than the one the graph was traced along."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index


class SpecialisedNumber(TypeError):
    """A graph evaluated on traced values reached a float that ``wg.compile`` read as a Python
    number (``float(x)``, ``math.log(x)``) while tracing: the traced value would lose its
    derivative there, so the graph cannot stand in for the function."""


class Node:
    __slots__ = ("kind", "prim", "args", "params", "value")

    def __init__(self, kind, prim=None, args=(), params=None, value=None):
        self.kind = kind          # "input" | "const" | "op" | "proj"
        self.prim = prim          # the Primitive of an "op" node
        self.args = args          # indices of the argument nodes
        self.params = params or {}  # static keyword parameters ("index" for proj)
        self.value = value        # the value at trace time

    def __repr__(self):
        if self.kind == "op":
            return f"Node(op {self.prim.name}{self.args})"
        if self.kind == "proj":
            return f"Node(proj {self.args[0]}[{self.params['index']}])"
        return f"Node({self.kind})"
