"""``wengert.scipy.integrate``: SciPy's integrals, differentiable in their limits and
parameters (``_quadrature``), and its ODE solvers (``_ode_ivp``; docs/solvers-ode.md).  On the floor built on transforms (6), with what it re-exports.
SciPy's other names pass through for plain values.

>>> import numpy as np, wengert as wg, wengert.numpy as wnp
>>> from wengert.scipy import integrate
>>> area = lambda k: integrate.quad(lambda x: wnp.exp(-k * x), 0.0, 1.0, epsabs=1e-13)[0]
>>> k = 2.0   # d/dk of (1 - e^-k) / k
>>> bool(np.isclose(wg.grad(area)(k), np.exp(-k) / k - (1 - np.exp(-k)) / k ** 2))
True
"""
import scipy.integrate as _si

from ..numpy import _passthrough
from ._ode_ivp import odeint, solve_ivp
from ._quadrature import fixed_quad, quad, quad_vec, romb, simpson, trapezoid

__all__ = ["quad", "quad_vec", "fixed_quad", "trapezoid", "simpson", "romb", "odeint", "solve_ivp"]


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    fn = getattr(_si, name)
    return _passthrough(f"scipy.integrate.{name}", fn) if callable(fn) and \
        not isinstance(fn, type) else fn
