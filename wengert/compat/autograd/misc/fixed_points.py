"""``autograd.misc.fixed_points.fixed_point(f, a, x0, distance, tol)``: iterate ``x = f(a)(x)``
from ``x0`` until ``distance(x, x_prev) <= tol``; differentiable in ``a`` by the implicit
function theorem at the fixed point (the adjoint is itself a fixed point, of
``u = g + u df(a)/dx``), not by differentiating the iterations."""
from ..core import defvjp, primitive, vspace
from ..differential_operators import make_vjp

__all__ = ["fixed_point"]


@primitive
def fixed_point(f, a, x0, distance, tol):
    step = f(a)
    x, x_prev = step(x0), x0
    while distance(x, x_prev) > tol:
        x, x_prev = step(x), x
    return x


def _fixed_point_vjp(ans, f, a, x0, distance, tol):
    x_star = ans

    def adjoint_step(params):
        a, x_star, g = params
        pull_x = make_vjp(f(a))(x_star)[0]
        return lambda u: pull_x(u) + g

    pull_a = make_vjp(lambda a, x: f(a)(x))(a, ans)[0]

    def vjp(g):
        u = fixed_point(adjoint_step, (a, x_star, g), vspace(x0).zeros(), distance, tol)
        return pull_a(u)
    return vjp


defvjp(fixed_point, None, _fixed_point_vjp, None)
