"""ode: s classical Runge–Kutta steps of y0' = x0, y_i' = x_i·y_{i-1}, and the gradient of y_{n-1}."""
import wengert as wg
import wengert.numpy as wnp

from ._common import array, maybe_compile, to_list


def rhs(x, y):
    return wnp.concatenate([x[:1], x[1:] * y[:-1]])


def ode(x, s):
    h = 2.0 / s
    y = wnp.zeros_like(x)
    for _ in range(s):
        k1 = rhs(x, y)
        k2 = rhs(x, y + h * k1 / 2)
        k3 = rhs(x, y + h * k2 / 2)
        k4 = rhs(x, y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def last(x, s):
    return ode(x, s)[-1]


def functions(options):
    prep = lambda raw: (array(raw["x"]), int(raw["s"]))
    return {"primal": (prep, maybe_compile(options, ode), to_list),
            "gradient": (prep, maybe_compile(options, wg.grad(last)), to_list)}
