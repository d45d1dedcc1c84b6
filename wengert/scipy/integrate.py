"""``wengert.scipy.integrate``: SciPy's ODE solvers, differentiable (docs/solvers-ode.md)."""
from ._ode_ivp import odeint, solve_ivp

__all__ = ["odeint", "solve_ivp"]
