"""Elementwise functions, each declared once by its partial derivatives.

``partials(ans, *primals)`` gives one local derivative per argument; the forward
rule (sum of partial x tangent) and the reverse rule (partial x cotangent, summed
back over broadcast axes) are derived from it in ``core``.  ``domain`` is where
the generated tests sample the function.
"""
import math

import numpy as np

from ..core import Tracer, primitive
from ..arrays import dtype_of
from . import patterns
from .nondiff import recorded as _recorded

__all__ = ["arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "around",
           "cbrt", "ceil", "clip", "copysign", "cos", "cosh", "deg2rad", "degrees", "exp", "exp2",
           "expm1", "fabs", "fix", "floor", "fmax", "fmin", "fmod", "frexp", "heaviside", "hypot",
           "i0", "ldexp", "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2", "maximum",
           "minimum", "modf", "rad2deg", "radians", "reciprocal", "rint", "sign", "sin", "sinh",
           "sqrt", "square", "tan", "tanh", "trunc", "where"]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)

from .declaring import REGISTRY, elementwise  # noqa: E402  (REGISTRY: re-exported)


# trigonometric -----------------------------------------------------------------------
sin = elementwise(np.sin, lambda ans, x: (cos(x),))
cos = elementwise(np.cos, lambda ans, x: (-sin(x),))
tan = elementwise(np.tan, lambda ans, x: (1.0 + ans * ans,), domain=(-1.2, 1.2))
arcsin = elementwise(np.arcsin, lambda ans, x: (1.0 / sqrt(1.0 - x * x),), domain=(-0.9, 0.9))
arccos = elementwise(np.arccos, lambda ans, x: (-1.0 / sqrt(1.0 - x * x),), domain=(-0.9, 0.9))
arctan = elementwise(np.arctan, lambda ans, x: (1.0 / (1.0 + x * x),))
def _arctan2_partials(ans, y, x, needs=(True, True)):
    r2 = x * x + y * y
    return (x / r2 if needs[0] else None), (-y / r2 if needs[1] else None)


arctan2 = elementwise(np.arctan2, _arctan2_partials, domain=(0.2, 2.0), needs=True)


def _hypot_partials(ans, x, y, needs=(True, True)):
    # x / ans and y / ans; 0 at (0, 0), the subgradient abs and norm take there
    zero = ans == 0
    if not isinstance(zero, Tracer) and not np.any(zero):
        return (x / ans if needs[0] else None), (y / ans if needs[1] else None)
    safe = where(zero, 1.0, ans)
    return ((where(zero, 0.0, x / safe) if needs[0] else None),
            (where(zero, 0.0, y / safe) if needs[1] else None))


hypot = elementwise(np.hypot, _hypot_partials, domain=(0.2, 2.0), needs=True)

# hyperbolic ------------------------------------------------------------------------------
sinh = elementwise(np.sinh, lambda ans, x: (cosh(x),))
cosh = elementwise(np.cosh, lambda ans, x: (sinh(x),))
tanh = elementwise(np.tanh, lambda ans, x: (1.0 - ans * ans,))
arcsinh = elementwise(np.arcsinh, lambda ans, x: (1.0 / sqrt(x * x + 1.0),))
# sqrt(x - 1) sqrt(x + 1), not sqrt(x*x - 1): the same on the reals, and the principal
# branch's derivative for complex x (sqrt(z*z - 1) flips sign where Re z < 0)
arccosh = elementwise(np.arccosh, lambda ans, x: (1.0 / (sqrt(x - 1.0) * sqrt(x + 1.0)),),
                      domain=(1.2, 3.0))
arctanh = elementwise(np.arctanh, lambda ans, x: (1.0 / (1.0 - x * x),), domain=(-0.9, 0.9))

# exponential and logarithmic ---------------------------------------------------------------------
exp = elementwise(np.exp, lambda ans, x: (ans,))
expm1 = elementwise(np.expm1, lambda ans, x: (ans + 1.0,))
exp2 = elementwise(np.exp2, lambda ans, x: (ans * _LN2,))
log = elementwise(np.log, lambda ans, x: (1.0 / x,), domain=(0.1, 4.0))
log1p = elementwise(np.log1p, lambda ans, x: (1.0 / (1.0 + x),), domain=(-0.9, 3.0))
log2 = elementwise(np.log2, lambda ans, x: (1.0 / (x * _LN2),), domain=(0.1, 4.0))
log10 = elementwise(np.log10, lambda ans, x: (1.0 / (x * _LN10),), domain=(0.1, 4.0))
def _logaddexp_partials(ans, x, y, needs=(True, True)):
    # the logistic function of x - y, which does not need ans: a derivative program
    # (hvp, say) then drops the log-sum itself, and x = +inf gives 1, not nan
    expit = _special("expit")
    return (expit(_minus(x, y)) if needs[0] else None), (expit(_minus(y, x)) if needs[1] else None)


def _minus(a, b):
    """``a - b``, skipping a constant zero (softplus is ``logaddexp(0, x)``).

    Exact for the logistic function: ``y - 0.0`` is ``y`` and ``0.0 - y`` is ``-y``, but
    for the sign of a zero, which the logistic function does not see.
    """
    if type(b) is float and b == 0.0:
        return a
    if type(a) is float and a == 0.0:
        return -b
    return a - b


_SPECIAL = {}


def _special(name):
    """A ``scipy.special`` primitive of rules/special_core.py (expit, i1), bound on first use:
    that module loads scipy.special, which takes about 0.1 s (as long as ``import wengert``
    itself), so it loads only when a rule needs it."""
    fn = _SPECIAL.get(name)
    if fn is None:
        from . import special_core  # scipy.special, loaded lazily (see the docstring)
        fn = _SPECIAL.setdefault(name, getattr(special_core, name))
    return fn


logaddexp = elementwise(np.logaddexp, _logaddexp_partials, needs=True)
logaddexp2 = elementwise(np.logaddexp2, lambda ans, x, y, needs=(True, True): (
    exp2(x - ans) if needs[0] else None, exp2(y - ans) if needs[1] else None), needs=True)

# powers and roots ------------------------------------------------------------------------------
# sqrt and cbrt at 0 give an infinite derivative (as JAX and PyTorch), never an exception.
sqrt = elementwise(np.sqrt, lambda ans, x: (0.5 / ans,), domain=(0.1, 4.0))
cbrt = elementwise(np.cbrt, lambda ans, x: (1.0 / (3.0 * ans * ans),), domain=(0.1, 4.0))
square = elementwise(np.square, lambda ans, x: (2.0 * x,))
reciprocal = elementwise(np.reciprocal, lambda ans, x: (-(ans * ans),), domain=(0.2, 3.0))
# float_power: in rules/arithmetic.py, next to power, whose slopes it shares


# ufuncs with two results -----------------------------------------------------------------------
@primitive(name="modf", multiple_results=True, linear="piecewise", batch="elementwise",
           sparsity=patterns.Elementwise(results=(0,)))
def modf(x):
    """``(fractional part, integral part)``: derivative 1 in the first, 0 in the second."""
    return np.modf(x)


@modf.frule(symbolic_zeros=True)
def modf_jvp(primals, tangents):
    return modf(*primals), (tangents[0], None)


@modf.rrule
def modf_vjp(x):
    return modf(x), lambda g: (g[0],)



def frexp(x):
    """``np.frexp``: the mantissa is ``ldexp(x, -e)``, exact, with derivative ``2^-e``; the
    exponent ``e`` is an integer, not differentiated."""
    if not isinstance(x, Tracer):
        return np.frexp(x)
    e = _recorded(lambda v: np.frexp(v)[1], x, name="frexp_exponent")
    return ldexp(x, -e), e


# piecewise: ties split the derivative evenly, as autograd and JAX do --------------------------
def _mask(cond, tie, ans):
    """1 where ``cond``, 1/2 on ties, else 0: a constant, in the result's dtype."""
    if type(cond) is np.ndarray and type(tie) is np.ndarray and type(ans) is np.ndarray:
        # one conversion, the ties (rare) written in: two passes fewer than nested wheres
        w = cond.astype(ans.dtype)
        if tie.any():
            w[tie] = 0.5
        return w
    w = np.where(cond, 1.0, np.where(tie, 0.5, 0.0))
    return w.astype(dtype_of(ans)) if hasattr(ans, "dtype") else float(w)


def _max_partials(ans, x, y, needs=(True, True)):
    wx = _mask(x > y, x == y, ans)  # comparisons of traced values give plain booleans
    # relu is maximum(0, x): the constant's partial, 1 - wx, would be a pass for nothing
    return (wx if needs[0] else None), (1.0 - wx if needs[1] else None)


def _min_partials(ans, x, y, needs=(True, True)):
    wx = _mask(x < y, x == y, ans)
    return (wx if needs[0] else None), (1.0 - wx if needs[1] else None)


# piecewise linear: first derivatives elementwise, no second derivatives (almost everywhere)
maximum = elementwise(np.maximum, _max_partials, linear="piecewise", needs=True)
minimum = elementwise(np.minimum, _min_partials, linear="piecewise", needs=True)
fmax = elementwise(np.fmax, _max_partials, linear="piecewise", needs=True)
fmin = elementwise(np.fmin, _min_partials, linear="piecewise", needs=True)


# sign-like: zero derivative almost everywhere ---------------------------------------------------
sign = elementwise(np.sign, None, nondiff=True)
floor = elementwise(np.floor, None, nondiff=True)
ceil = elementwise(np.ceil, None, nondiff=True)
trunc = elementwise(np.trunc, None, nondiff=True)
rint = elementwise(np.rint, None, nondiff=True)
fix = elementwise(np.fix, None, nondiff=True, name="fix")
# heaviside(x, h0) is h0 where x == 0: the only place it depends on h0
heaviside = elementwise(np.heaviside, lambda ans, x, h0: (None, _mask(x == 0, False, ans)))
ldexp = elementwise(np.ldexp, lambda ans, x, n: (  # x 2^n, whose derivative 2^n is exact
    np.ldexp(np.ones((), dtype_of(ans)), n), None))
fabs = elementwise(np.fabs, lambda ans, x: (sign(x),), linear="piecewise")
copysign = elementwise(np.copysign, lambda ans, x, y: (sign(x) * sign(ans), None),
                       linear="piecewise")
deg2rad = elementwise(np.deg2rad, lambda ans, x: (math.pi / 180.0,), linear=True)
rad2deg = elementwise(np.rad2deg, lambda ans, x: (180.0 / math.pi,), linear=True)
degrees = elementwise(np.degrees, lambda ans, x: (180.0 / math.pi,),  # ufuncs of their own
                      linear=True)
radians = elementwise(np.radians, lambda ans, x: (math.pi / 180.0,), linear=True)


def _fmod_partials(ans, x, y, needs=(True, True)):
    # fmod(x, y) = x - q y with q = trunc(x / y) an integer, read back exactly from the result
    return 1.0, (-rint((x - ans) / y) if needs[1] else None)


fmod = elementwise(np.fmod, _fmod_partials, needs=True, linear="piecewise")
i0 = elementwise(np.i0, lambda ans, x: (_special("i1")(x),), name="i0")  # NumPy's values


# sinc: in rules/_series.py, next to the series its rule takes near 0


@primitive(name="round", sparsity=patterns.ELEMENTWISE, domain=(-2.0, 2.0), nondiff=True,
           batch="elementwise")
def round_(x, decimals=0):
    return np.round(x, decimals)


REGISTRY["round"] = round_
around = round_


# selection ----------------------------------------------------------------------------------------------
@primitive(broadcasting=True, domain=(-2.0, 2.0), linear="piecewise",
           sparsity=patterns.ELEMENTWISE)
def where(condition, x, y):
    """``np.where`` with three arguments; the condition is not differentiated."""
    return np.where(condition, x, y)


@where.frule(symbolic_zeros=True)
def where_jvp(primals, tangents):
    c, x, y = primals
    _, dx, dy = tangents
    ans = where(c, x, y)
    if dx is None and dy is None:
        return ans, None
    return ans, where(c, 0.0 if dx is None else dx, 0.0 if dy is None else dy)


@where.rrule(needs=True)
def where_vjp(c, x, y, needs):
    # where(c, g, 0), never g * mask: a nan in the unselected branch stays out
    return where(c, x, y), lambda g: (None,
                                      where(c, g, 0.0) if needs[1] else None,
                                      where(c, 0.0, g) if needs[2] else None)



@primitive(broadcasting=True, domain=(-2.0, 2.0), linear="piecewise",
           sparsity=patterns.ELEMENTWISE)
def clip(x, a_min, a_max):
    return np.clip(x, a_min, a_max)


@clip.partials
def clip_partials(ans, x, lo, hi):
    below = x < lo if lo is not None else False
    above = x > hi if hi is not None else False
    return (_mask(np.logical_not(np.logical_or(below, above)), False, ans),
            None if lo is None else _mask(below, False, ans),
            None if hi is None else _mask(above, False, ans))


REGISTRY["clip"] = clip
REGISTRY["where"] = where

