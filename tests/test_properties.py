"""Property tests: random expressions built from the primitives.

Forward mode, reverse mode and central finite differences must agree, and the
two engines must agree with each other to round-off.
"""
import numpy as np
from hypothesis import given, settings, strategies as st

import wengert as wg
import wengert.numpy as wnp

# unary building blocks that stay finite and smooth everywhere
UNARY = {
    "sin": wnp.sin, "cos": wnp.cos, "tanh": wnp.tanh, "arctan": wnp.arctan,
    "softlog": lambda a: wnp.log1p(a * a), "root": lambda a: wnp.sqrt(1.0 + a * a),
    "bump": lambda a: wnp.exp(-a * a), "sq": wnp.square, "neg": lambda a: -a,
    "asinh": wnp.arcsinh, "hyp": lambda a: wnp.hypot(a, 1.0), "cbrt1": lambda a: wnp.cbrt(2.0 + wnp.tanh(a)),
}
BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / (1.5 + wnp.sin(b)), "pow": lambda a, b: (1.0 + a * a) ** wnp.tanh(b),
    "lse": wnp.logaddexp, "atan2": lambda a, b: wnp.arctan2(a, 2.0 + wnp.cos(b)),
}

leaf = st.one_of(st.sampled_from(["x", "y", "z"]),
                 st.floats(-2, 2, allow_nan=False).map(lambda c: round(c, 3)))
expr = st.recursive(
    leaf,
    lambda kids: st.one_of(
        st.tuples(st.sampled_from(sorted(UNARY)), kids),
        st.tuples(st.sampled_from(sorted(BINARY)), kids, kids)),
    max_leaves=12)


def build(e):
    def ev(node, env):
        if isinstance(node, str):
            return env[node]
        if isinstance(node, float):
            return node
        if len(node) == 2:
            return UNARY[node[0]](ev(node[1], env))
        return BINARY[node[0]](ev(node[1], env), ev(node[2], env))

    def f(x, y, z):
        return ev(e, {"x": x, "y": y, "z": z}) + 0.0 * x
    return f


point = st.tuples(*[st.floats(-1.5, 1.5, allow_nan=False)] * 3)


@settings(max_examples=150, deadline=None)
@given(expr, point)
def test_forward_reverse_finite_differences_agree(e, p):
    f = build(e)
    wg.check_grad(f, *map(float, p), rtol=1e-4, atol=1e-5)


@settings(max_examples=100, deadline=None)
@given(expr, point)
def test_engines_agree_to_roundoff(e, p):
    f = build(e)
    p = tuple(map(float, p))
    rev = wg.grad(f, argnums=(0, 1, 2))(*p)
    fwd = wg.jacobian(f, argnums=(0, 1, 2), mode="forward")(*p)
    np.testing.assert_allclose(np.array(fwd, float), np.array(rev, float), rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(expr, point)
def test_second_order_agrees(e, p):
    f = build(e)
    p = tuple(map(float, p))
    wg.check_grad(f, *p, order=2, rtol=1e-4, atol=1e-5)
    x = np.array(p)
    H = wg.hessian(lambda v: f(v[0], v[1], v[2]))(x) if hasattr(wnp, "_getitem") else None
    if H is not None:
        np.testing.assert_allclose(H, H.T, rtol=1e-8, atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(expr, st.lists(st.floats(-1.5, 1.5, allow_nan=False), min_size=4, max_size=4))
def test_elementwise_on_arrays_matches_scalars(e, xs):
    f = build(e)
    x = np.array(xs)
    y, z = np.cos(x), np.sin(x)
    g = wg.grad(lambda a: wnp.sum(f(a, y, z)))(x)
    want = [wg.grad(f)(float(a), float(b), float(c)) for a, b, c in zip(x, y, z)]
    np.testing.assert_allclose(g, want, rtol=1e-10, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(expr, point, st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 3))
def test_taylor_mode_matches_nested_derivatives(e, p, d):
    """One pass of truncated Taylor arithmetic equals k-fold nested forward mode / k!."""
    import math
    f = build(e)
    x, v = np.array(p, float), np.array(d, float)

    def along(t):
        return f(x[0] + t * v[0], x[1] + t * v[1], x[2] + t * v[2])

    cs = wg.taylor(lambda xs: f(*xs), tuple(map(float, x)), tuple(map(float, v)), 4)
    for k in range(5):
        want = wg.derivative(along, k)(0.0) / math.factorial(k)
        np.testing.assert_allclose(float(cs[k]), float(want), rtol=1e-8, atol=1e-10)
