"""The gradient-descent solver GradBench's particle and saddle evals prescribe (cpp/gradbench/gd.hpp's
rules: stop when the gradient or the step is under 1e-5, double the rate after 10 accepted
steps, halve it after a rejected one).  Written with ``wnp`` so that it runs on traced
values too: an outer derivative differentiates through the inner solver's iterations.
"""
import wengert.numpy as wnp


def argmin(objective, gradient, x):
    fx, gx = objective(x), gradient(x)
    accepted, eta = 0, 1e-5
    while True:
        if wnp.sqrt(wnp.sum(gx * gx)) <= 1e-5:
            return x
        if accepted == 10:
            eta, accepted = eta * 2, 0
            continue
        x_new = x - eta * gx
        if wnp.sqrt(wnp.sum((x - x_new) ** 2)) <= 1e-5:
            return x
        f_new = objective(x_new)
        if f_new < fx:
            x, fx, gx = x_new, f_new, gradient(x_new)
            accepted += 1
        else:
            eta, accepted = eta / 2, 0


def argmax(objective, gradient, x):
    return argmin(lambda v: -objective(v), lambda v: -gradient(v), x)
