"""What the command line and the explorer show of an expression besides its value.

``gradient`` differentiates a parsed expression (:mod:`wengert.expr`) by one
reverse sweep; ``programs`` asks the source transformer for its forward and
reverse derivative programs.  ``wengert diff`` prints both and the explorer
draws them, so they live here, below both.
"""
from __future__ import annotations

import numpy as np

from .source import programs_from_source
from .transforms import value_and_grad

__all__ = ["gradient", "programs"]


def programs(expr, name="f"):
    """``(forward_text, reverse_text)`` from :mod:`wengert.source`, of the expression's
    straight-line source: one line per node of its graph, named as ``expr.names()``
    names them (a shared subexpression is computed once, as the graph shows it)."""
    return programs_from_source(expr.straight_line_source(name), name)


def gradient(expr, env):
    """``(value, {name: partial})`` by one reverse sweep (``wg.value_and_grad``)."""
    names = expr.variables
    args = tuple(env[n] for n in names)
    if not names:
        return expr.evaluate({}), {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value, g = value_and_grad(expr, argnums=tuple(range(len(names))))(*args)
    return value, dict(zip(names, g))
