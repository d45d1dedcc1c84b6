"""Python's arithmetic operators as primitives: + - * / // % ** and unary - and abs; also
``np.float_power``, whose slopes are power's, and ``np.divmod`` (// and %)."""
import operator

import numpy as np

from .. import core
from ..arrays import is_foreign
from ..core import Tracer, primitive
from . import patterns
from .complex import _is_complex, conj, real
from .elementwise import elementwise, log, sign, where
from .lowering import Lowering

__all__ = ["abs_jvp", "abs_pullback_factor", "absolute", "absolute_jvp", "absolute_vjp", "add",
           "add_partials", "divide", "divide_partials", "divmod", "float_power", "floor_divide",
           "floor_divide_partials", "multiply", "multiply_partials", "negative",
           "negative_partials", "positive", "positive_partials", "power", "power_exponent_slope",
           "power_jvp", "power_slope", "power_vjp", "remainder", "remainder_partials", "subtract",
           "subtract_partials"]


def _scalar_safe(op, np_op):
    """Python's operator on floats (fast), NumPy's semantics where Python raises."""
    def impl(x, y):
        try:
            r = op(x, y)
        except (ZeroDivisionError, OverflowError):
            return np_op(x, y)
        if type(r) is complex:  # (-8.0) ** (1/3): NumPy gives nan, not complex
            return np_op(x, y)
        return r
    impl.__name__ = np_op.__name__
    return impl


# Python's operators compute them (``ufunc``: NumPy's keywords, dtype=, still apply). The
# Taylor engine maps linear ones coefficient by coefficient and takes bilinear ones' Cauchy
# product; sparsity: elementwise, each with the argument pairs that meet at second order
# (x / y is linear in x; % is piecewise linear, // not differentiated at all)
_EW = patterns.ELEMENTWISE


def _op(op):
    """Computes Python's ``op`` on floats: code writers write it as ``op`` (rules/lowering.py)."""
    return Lowering(operator=op)


add = primitive(operator.add, name="add", broadcasting=True, ufunc=np.add, linear=True,
                sparsity=_EW, lowering=_op(operator.add))
subtract = primitive(operator.sub, name="subtract", broadcasting=True, ufunc=np.subtract,
                     linear=True, sparsity=_EW, lowering=_op(operator.sub))
multiply = primitive(operator.mul, name="multiply", broadcasting=True, ufunc=np.multiply,
                     bilinear=True, sparsity=_EW, lowering=_op(operator.mul))
divide = primitive(_scalar_safe(operator.truediv, np.divide), name="divide", broadcasting=True,
                   ufunc=np.divide, sparsity=patterns.Elementwise(hessian=((0, 1), (1, 1))),
                   lowering=_op(operator.truediv))
floor_divide = primitive(_scalar_safe(operator.floordiv, np.floor_divide), name="floor_divide",
                         broadcasting=True, ufunc=np.floor_divide, sparsity=_EW,
                         nondiff=True,  # piecewise constant: its partials are zero
                         lowering=_op(operator.floordiv))
remainder = primitive(_scalar_safe(operator.mod, np.remainder), name="remainder", broadcasting=True,
                      ufunc=np.remainder, linear="piecewise", sparsity=_EW,
                      lowering=_op(operator.mod))
power = primitive(_scalar_safe(operator.pow, np.power), name="power", broadcasting=True,
                  ufunc=np.power, sparsity=_EW, lowering=_op(operator.pow))
negative = primitive(operator.neg, name="negative", ufunc=np.negative, linear=True, sparsity=_EW,
                     lowering=_op(operator.neg))
positive = primitive(operator.pos, name="positive", ufunc=np.positive, linear=True, sparsity=_EW,
                     identity_when=True,  # graph simplification may drop it
                     lowering=_op(operator.pos))
absolute = primitive(abs, name="absolute", ufunc=np.absolute, sparsity=_EW, lowering=_op(abs))


def _own(prim):
    """``prim`` as its own rules call it: on plain values its impl, so that a rule's result
    has the type the engines give (Python's operator on floats), where a direct call of the
    primitive gives NumPy's (``wnp.power(1.5, 2.0)`` is an ``np.float64``, as NumPy's)."""
    impl = prim.impl

    def call(*args):
        for a in args:
            if isinstance(a, core.Tracer):
                return prim(*args)
        return impl(*args)
    return call


_power, _absolute = _own(power), _own(absolute)


def _sum_tangents(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


_ONE_ONE = (core.ONE, core.ONE)


@add.partials
def add_partials(ans, x, y):
    return _ONE_ONE


_ONE_MINUS_ONE = (core.ONE, core.MINUS_ONE)


@subtract.partials
def subtract_partials(ans, x, y):
    return _ONE_MINUS_ONE  # exact: the tangent is dx - dy, the cotangents g and -g


@multiply.partials
def multiply_partials(ans, x, y):
    return y, x


@divide.partials(needs=True)
def divide_partials(ans, x, y, needs=(True, True)):
    return (1.0 / y if needs[0] else None), (-ans / y if needs[1] else None)


@floor_divide.partials
def floor_divide_partials(ans, x, y):
    return None, None


@remainder.partials(needs=True)
def remainder_partials(ans, x, y, needs=(True, True)):
    return 1.0, (-floor_divide(x, y) if needs[1] else None)


def divmod(x1, x2):
    """``np.divmod``: ``floor_divide`` and ``remainder`` (the same values as NumPy's loop)."""
    if not isinstance(x1, Tracer) and not isinstance(x2, Tracer):
        return np.divmod(x1, x2)
    return floor_divide(x1, x2), remainder(x1, x2)


@power.frule(symbolic_zeros=True)
def power_jvp(primals, tangents):
    x, y = primals
    dx, dy = tangents
    ans = _power(x, y)
    t = None
    if dx is not None:
        slope = power_slope(_power, x, y)
        t = None if slope is None else dx * slope
    if dy is not None:
        t = _sum_tangents(t, dy * power_exponent_slope(ans, x, y))
    return ans, t


@power.rrule(needs=True)
def power_vjp(x, y, needs):
    ans = _power(x, y)

    def pullback(g):
        gx = None
        if needs[0]:
            slope = power_slope(_power, x, y)
            gx = None if slope is None else g * slope
        gy = g * power_exponent_slope(ans, x, y) if needs[1] else None
        return gx, gy
    return ans, pullback


def power_slope(pow_fn, x, y):
    """``d(x ** y)/dx = y x^(y-1)``, exactly 0 where ``y == 0``: never ``0 * inf`` at x = 0.

    It is written with ``pow_fn`` itself, so its own derivatives pass through this guard
    again: every derivative of ``x ** 2.0`` at 0 is a number (``2x``, ``2``, then 0), in
    every engine, Taylor's included.  ``None`` (no derivative) for a constant ``y == 0``.
    A traced ``y`` (an argument under ``wg.compile`` or ``wg.source``) is guarded only where
    ``x == 0`` too: elsewhere the slope's derivative in ``y``, ``x^(y-1) (1 + y log x)``,
    is not zero even at ``y == 0``.  Where guarded, ``x`` is replaced by 1: the slope is
    ``0 * 1 = 0`` and its derivatives are finite (``x ** y`` itself jumps at (0, 0)).
    """
    ty = type(y)
    if ty is float or ty is int:
        return None if y == 0 else y * pow_fn(x, y - 1)
    if isinstance(y, Tracer):
        bad = (y == 0) & (x == 0)  # plain booleans, or a recorded node in a graph
    else:
        bad = np.equal(y, 0)
        if is_foreign(bad):  # a CuPy or Dask exponent: its zeros are not read, but masked
            return y * pow_fn(where(bad, 1.0, x), y - 1)
        if np.all(bad):
            return None
    if not isinstance(bad, Tracer) and not np.any(bad):
        return y * pow_fn(x, y - 1)
    return y * pow_fn(where(bad, 1.0, x), y - 1)


def power_exponent_slope(ans, x, y):
    """``d(x ** y)/dy = x^y log x``, with ``log x`` read as 0 where ``x == 0`` and ``y != 0``:
    ``0 ** y`` is constant in ``y`` there.  At ``(0, 0)``, where ``0 ** y`` jumps from 1 to 0,
    it is ``-inf``, the limit from either side (and the slope of ``x ** x`` at 0)."""
    if (type(x) is float or type(x) is int) and x != 0:
        return ans * log(x)
    return ans * log(where((x == 0) & (y != 0), 1.0, x))


def _float_power_partials(ans, x, y, needs=(True, True)):
    # as power's, in float_power's float64
    return ((power_slope(float_power, x, y) if needs[0] else None),
            (power_exponent_slope(ans, x, y) if needs[1] else None))


float_power = elementwise(np.float_power, _float_power_partials, domain=(0.2, 2.0), needs=True)


@negative.partials
def negative_partials(ans, x):
    return _MINUS_ONE  # exact: the tangent is -dx, the cotangent -g


_MINUS_ONE = (core.MINUS_ONE,)


@positive.partials
def positive_partials(ans, x):
    return (1.0,)


@absolute.frule(symbolic_zeros=True)
def absolute_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return _absolute(x), None if dx is None else abs_jvp(x, dx)


@absolute.rrule
def absolute_vjp(x):
    return _absolute(x), lambda g: (g * abs_pullback_factor(x),)  # 0 at x == 0, as PyTorch


def _unit_conj(z):
    """``conj(z) / |z|`` (0 at 0), differentiable: unlike ``sign``, it is not constant."""
    r = absolute(z)
    zero = r == 0
    return where(zero, 0.0, conj(z) / where(zero, 1.0, r))


def abs_jvp(x, dx):
    """The tangent of ``|x|``; real for complex ``x`` (``Re(conj(x) dx) / |x|``)."""
    return real(_unit_conj(x) * dx) if _is_complex(x) else dx * sign(x)


def abs_pullback_factor(x):
    """``g * factor`` is the cotangent of ``x`` for the cotangent ``g`` of ``|x|``."""
    return _unit_conj(x) if _is_complex(x) else sign(x)


