"""How compiled code writes a primitive: its ``lowering`` fact, the one table of Python's
operators, and the kind of lowering each primitive gets (``python -m wengert.coverage
--compile``'s table).

A primitive's record holds at most one :class:`Lowering`, declared with it
(``primitive(..., lowering=Lowering(...))``); the one emitter (graph/lower.py: the NumPy
program, a fused kernel's body, a compiled scan's whole-array step), the passes (graph/passes.py:
scatter fusion, kernels, in-place updates, ``out=`` buffers), graph/simplify.py's algebra, the
engines' operator fast paths, and the symbols expr.py and source mode write read it through
``prim.lowering`` and :data:`OPERATOR_FORMS`, so a primitive's lowering lives beside its rule and
nowhere else.  A primitive without one (``None``) is written as a call of its implementation,
and fused by its ``ufunc`` where it has one.
"""
import operator
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

__all__ = ["LOWERINGS", "Lowering", "NO_LOWERING", "OPERATOR_FORMS", "Operator", "ROLES",
           "lowering", "lowering_of", "operator_symbol", "python_operator"]

LOWERINGS = ("ufunc", "scalar form", "whole-array form", "NumPy call", "none")

# the element-level roles a code writer recognises (one per primitive at most):
ROLES = ("gather_at_index",     # x[idx] at a static basic index: read inside a kernel
         "scatter_into_zeros",  # zeros(shape) with the operand written at idx: sums of them
                                # accumulate into one buffer; over a box of slices, read in
                                # place by the kernel of the result's shape
         "gather_flat",         # x's elements at flat positions: folded into x's kernel
         "flat_view",           # the operand's elements in the same C order (a reshape)
         "sum_axes",            # the operand summed over static axes (params axis, keepdims):
                                # a short last axis summed inside its operand's kernel
         "join")                # the operands joined along a static axis (param axis): along
                                # the last, read in place by the kernel of the result's shape


@dataclass(frozen=True)
class Operator:
    """One of Python's operators, as every dialect writes it: ``symbol`` (infix or prefix;
    None: written as a call), ``ufunc`` (what NumPy runs for it on an ndarray operand, so it
    takes ``out=``; None where NumPy takes shortcuts, as ``**`` does), ``in_place`` (``a op= b``
    is the same IEEE operation on a temporary), ``commutes`` (``a op b`` is ``b op a``, so
    either operand may be the one overwritten)."""
    symbol: Optional[str]
    ufunc: Optional[np.ufunc]
    arity: int
    in_place: bool = False
    commutes: bool = False


# Python's operators: the one table the code writers read (symbols, ufuncs, in-place forms)
OPERATOR_FORMS = {
    operator.add: Operator("+", np.add, 2, True, True),
    operator.sub: Operator("-", np.subtract, 2, True),
    operator.mul: Operator("*", np.multiply, 2, True, True),
    operator.truediv: Operator("/", np.divide, 2, True),
    operator.floordiv: Operator("//", np.floor_divide, 2),
    operator.mod: Operator("%", np.remainder, 2),
    operator.pow: Operator("**", None, 2),  # NumPy's __pow__ takes shortcuts (square, sqrt)
    operator.matmul: Operator("@", np.matmul, 2),
    operator.lt: Operator("<", np.less, 2),
    operator.le: Operator("<=", np.less_equal, 2),
    operator.gt: Operator(">", np.greater, 2),
    operator.ge: Operator(">=", np.greater_equal, 2),
    operator.eq: Operator("==", np.equal, 2),
    operator.ne: Operator("!=", np.not_equal, 2),
    operator.and_: Operator("&", None, 2),
    operator.or_: Operator("|", None, 2),
    operator.xor: Operator("^", None, 2),
    operator.lshift: Operator("<<", None, 2),
    operator.rshift: Operator(">>", None, 2),
    operator.neg: Operator("-", np.negative, 1),
    operator.pos: Operator("+", np.positive, 1),
    operator.invert: Operator("~", None, 1),
    abs: Operator(None, np.absolute, 1),  # a call in every dialect
}


def operator_symbol(op, nargs):
    """The symbol Python's ``op`` is written with on ``nargs`` operands, or None (a call)."""
    o = OPERATOR_FORMS.get(op)
    return o.symbol if o is not None and o.arity == nargs else None


@dataclass(frozen=True)
class Lowering:
    """How each dialect writes one primitive (every field optional).

    ``operator``: the Python operator (a key of :data:`OPERATOR_FORMS`) the implementation computes
    on floats -- the implementation itself (``operator.add``: written ``a + b``), or one that
    tries it first and falls back to NumPy where Python raises (``x / 0.0``: written infix
    inside ``try``/``except``).
    ``scalar``: the Numba scalar form, a function from the arguments' source to the source of
    a scalar expression in ``math`` and ``np`` (SciPy's functions inside a kernel; float64).
    ``array``: the Numba whole-array form, ``form(args, params, arg_values, value)`` giving the
    source of an expression, a function from a name to the statements assigning it, or None
    where these arguments have none (a compiled scan's Numba step: matmul as ``np.dot``,
    sums, reshapes); a function whose ``buffered`` attribute is true also takes the name of
    a scratch array of the result's shape that the caller keeps across calls, to write into
    instead of allocating (a small product's loop nest).
    ``role``: one of :data:`ROLES`, what element-level rewrites may do with its nodes.
    """
    operator: Optional[Callable] = None
    scalar: Optional[Callable] = None
    array: Optional[Callable] = None
    role: Optional[str] = None

    def __post_init__(self):
        if self.operator is not None and self.operator not in OPERATOR_FORMS:
            raise ValueError(f"Lowering(operator={self.operator!r}): not one of Python's "
                             "operators (wengert.rules.lowering.OPERATOR_FORMS); give a scalar= "
                             "or array= form instead")
        if self.role is not None and self.role not in ROLES:
            raise ValueError(f"Lowering(role={self.role!r}): the roles are {ROLES}")


NO_LOWERING = Lowering()


def lowering_of(prim):
    """``prim``'s lowering record (:data:`NO_LOWERING` where it declares none)."""
    return prim.lowering or NO_LOWERING


def python_operator(prim):
    """The Python operator ``prim`` computes on floats, or None."""
    lw = prim.lowering
    return None if lw is None else lw.operator


def lowering(prim, supported):
    """How compiled code runs ``prim`` (``supported``: the ufuncs Numba compiles):
    ``"ufunc"`` (NumPy's, inside a fused kernel), ``"scalar form"`` (its lowering's
    ``scalar``: a SciPy function inside a kernel), ``"whole-array form"`` (its lowering's
    ``array``: inside a compiled scan's Numba step), ``"NumPy call"`` (not elementwise:
    a call between kernels, BLAS for products), or ``"none"``: an elementwise primitive with
    no lowering, which leaves its node unfused (``wg.UnfusedWarning``)."""
    lw = lowering_of(prim)
    if lw.scalar is not None:
        return "scalar form"
    u = prim.ufunc
    if u is not None and u in supported and getattr(np, u.__name__, None) is u:
        return "ufunc"
    if lw.array is not None:
        return "whole-array form"
    return "none" if u is not None else "NumPy call"
