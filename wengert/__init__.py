"""wengert: automatic differentiation for Python and NumPy.

One rule system (``wg.primitive`` with ``frule``/``rrule``) shared by every engine:
forward mode on dual numbers, reverse mode on a tape (Wengert list), static
graphs with code generation, and source-to-source transformation.

>>> import wengert as wg, wengert.numpy as wnp
>>> t = wg.Tape(); x = t.var(0.5); y = t.var(4.2)
>>> z = x * y + wnp.sin(x)
>>> g = z.grad()
>>> print(g.wrt(x), g.wrt(y))
5.077582561890373 0.5
"""
import importlib

# the floors, bottom up: each module imports only those below it
from . import _allocator
from .core import EscapedTracerError, Primitive, SolverWarning, primitive
from . import rules  # noqa: F401  (registers the built-in rules)
from . import numpy  # noqa: F401  (installs NumPy's protocols on tracers: wengert._dispatch)
from .forward import Dual
from .reverse import Grad, Tape, Var
from .transforms import (derivative, grad, hessian, hvp, jacobian, jvp, taylor,
                         value_and_grad, vjp)
from .checking import check_grad
from .custom import custom_jvp, custom_vjp, jacfwd, jacrev, stop_gradient
# imported eagerly so the function, not the module, is the package's ``checkpoint``
from .checkpoint import checkpoint, checkpoint_schedule, scan
from .batching import vmap
from . import tree  # noqa: F401  (wg.tree: pytrees, wg.tree.register)

_allocator.settle()  # glibc's steady state for arrays of a few hundred kB; see _allocator

from ._version import __version__  # noqa: E402,F401

__all__ = ["Primitive", "primitive", "EscapedTracerError", "SolverWarning", "Dual", "Tape", "Var", "Grad", "grad", "value_and_grad",
           "derivative", "jvp", "vjp", "jacobian", "hessian", "hvp", "taylor", "check_grad",
           "jacfwd", "jacrev", "stop_gradient", "custom_vjp", "custom_jvp", "vmap",
           "trace", "Graph", "compile", "to_dot", "source", "checkpoint", "scan",
           "checkpoint_schedule", "tree", "chain_order", "jacobian_sparsity", "hessian_sparsity",
           "sparse_jacobian", "sparse_hessian", "color", "custom_root", "implicit",
           "UnfusedWarning", "RetraceWarning"]

_LAZY = {
    "trace": ("wengert.graph", "trace"),
    "UnfusedWarning": ("wengert.graph.fuse", "UnfusedWarning"),
    "RetraceWarning": ("wengert.graph.compile", "RetraceWarning"),
    "Graph": ("wengert.graph", "Graph"),
    "compile": ("wengert.graph", "compile"),
    "to_dot": ("wengert.graph", "to_dot"),
    "chain_order": ("wengert.graph.chain", "chain_order"),
    # sparse derivatives load scipy.sparse, so on first use too
    "jacobian_sparsity": ("wengert.sparse", "jacobian_sparsity"),
    "hessian_sparsity": ("wengert.sparse", "hessian_sparsity"),
    "sparse_jacobian": ("wengert.sparse", "sparse_jacobian"),
    "sparse_hessian": ("wengert.sparse", "sparse_hessian"),
    "color": ("wengert.sparse", "color"),
    # implicit differentiation of solvers (floor 6: its rules call the transforms)
    "custom_root": ("wengert.implicit_diff", "custom_root"),
    "implicit": ("wengert.implicit_diff", "implicit"),
}


def __getattr__(name):
    # the graph and source layers load on first use, keeping import light
    if name in _LAZY:
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        globals()[name] = value
        return value
    if name in ("source", "scipy"):
        value = importlib.import_module(f"wengert.{name}")
        globals()[name] = value
        return value
    raise AttributeError(f"module 'wengert' has no attribute {name!r}")
