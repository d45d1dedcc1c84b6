"""Functions with a removable singularity: their power series near it, a formula elsewhere.

``sin(x) / x`` is 1 at 0, but its formula gives 0/0 there and its derivative's formula,
``(x cos x - sin x) / x^2``, cancels near 0.  A branch that returns the limit at 0 as a
constant gets the first derivative right and every later one wrong: the constant's
derivative is 0.  ``power_series`` makes the series ``sum c_n x^n`` a primitive whose
partial is the same series differentiated once more, so every derivative at 0 is exact, at
any order and in every engine; ``near_zero`` uses it where ``|x| < radius``.  Each branch
gets an argument that is safe for it where the other one is used (0 for the series, the
radius for the formula): a nan in the discarded branch would survive its zero cotangent.

NumPy's ``sinc`` is declared here, after its series (it is listed in ``elementwise.REGISTRY``
with the other elementwise functions): ``near_zero`` needs ``absolute``, above elementwise.
"""
import math

import numpy as np

from ..core import Tracer, primitive
from . import patterns
from .arithmetic import absolute
from .elementwise import cos, elementwise, where

__all__ = ["power_series", "near_zero", "sinc"]

_NEGLIGIBLE = 1e-18  # a term this much smaller than the largest one, at the radius
_REAL = np.dtype(float)


def power_series(name, coef, radius):
    """A primitive ``s(x, k=0)``: the k-th derivative of ``sum_n coef(n) x^n``, summed to
    double precision for ``|x| <= radius``; its partial is ``s(x, k + 1)``."""
    tables = {}

    def coefs(k):
        cs = tables.get(k)
        if cs is None:
            cs, largest, quiet = [], 0.0, 0
            for j in range(4000):
                c = math.prod(range(j + 1, j + k + 1)) * coef(j + k)  # (j+k)!/j! c_{j+k}
                cs.append(float(c))
                size = abs(c) * radius ** j
                largest = max(largest, size)
                quiet = quiet + 1 if 0.0 < largest and size <= _NEGLIGIBLE * largest else 0
                if quiet == 8:  # 8 in a row: series with zero coefficients (even ones) too
                    break
            cs = tables[k] = tuple(cs[:-8]) or (0.0,)
        return cs

    def impl(x, k=0):
        cs = coefs(k)
        out = x * 0.0 + cs[-1]  # x's shape and dtype (a Python float stays one)
        for c in cs[-2::-1]:
            out = out * x + c
        return out

    impl.__name__ = impl.__qualname__ = name
    p = primitive(impl, name=name, domain=(-radius, radius), sparsity=patterns.ELEMENTWISE)
    p.partials(lambda ans, x, k=0: (p(x, k=k + 1),))
    return p


def near_zero(x, radius, series, far):
    """``series(x)`` where ``|x| < radius``, ``far(x)`` elsewhere.

    ``series`` sees 0 where ``far`` is used and ``far`` sees ``radius`` where ``series`` is:
    both stay finite, with finite derivatives.  Plain booleans decide without ``where``.
    """
    if type(x) is complex or getattr(x, "dtype", _REAL).kind == "c":
        small = absolute(x) < radius  # (complex numbers compare lexicographically)
    else:
        small = (x < radius) & (x > -radius)  # compares values: plain, or recorded in a graph
    if not isinstance(small, Tracer):
        if not np.any(small):
            return far(x)
        if np.all(small):
            return series(x)
    return where(small, series(where(small, x, 0.0)), far(where(small, radius, x)))


# sinc(x) = sin(u) / u with u = pi x: its series for |u| < 1, so that every derivative at 0
# is exact (sinc''(0) = -pi^2 / 3) and none cancels near 0
sin_over_x_series = power_series(
    "sin_over_x_series", lambda n: 0.0 if n % 2 else (-1.0) ** (n // 2) / math.factorial(n + 1),
    radius=1.0)
sinc = elementwise(np.sinc, lambda ans, x: (near_zero(
    x, 1.0 / math.pi, lambda xs: math.pi * sin_over_x_series(math.pi * xs, k=1),
    lambda xl: (cos(math.pi * xl) - ans) / xl),), domain=(-2.0, 2.0))
