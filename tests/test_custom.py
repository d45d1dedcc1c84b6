"""jacfwd, jacrev, stop_gradient, custom_vjp and custom_jvp (API.md §9), in every engine.

Rules that are deliberately not the body's derivative make it observable which one an
engine used: a test passes only if the custom rule (or, where API.md says so, the body)
was taken.
"""
import inspect
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


# -- functions used by several tests (module level: wg.source reads their source) ----------------
@wg.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (wnp.clip(g, -1.0, 1.0),))


@wg.custom_vjp
def cube_as_square(x):
    """Its value is x**3; its reverse rule says 2 x, the derivative of x**2 (on purpose)."""
    return x ** 3


cube_as_square.defvjp(lambda x: (x ** 3, x), lambda x, g: (2.0 * x * g,))


@wg.custom_vjp
def sin_times(x, y):
    return wnp.sin(x) * y


def _sin_times_fwd(x, y):
    return wnp.sin(x) * y, (wnp.cos(x), wnp.sin(x), y)


def _sin_times_bwd(res, g):
    c, s, y = res
    return g * c * y, wnp.sum(g * s) if np.ndim(y) == 0 else g * s


sin_times.defvjp(_sin_times_fwd, _sin_times_bwd)


@wg.custom_jvp
def log1pexp(x):
    return wnp.log(1.0 + wnp.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return log1pexp(x), dx * (1.0 - 1.0 / (1.0 + wnp.exp(x)))


@wg.custom_jvp
def sin_twice(x):
    """Its value is sin(x); its rule says 2 dx (on purpose)."""
    return wnp.sin(x)


@sin_twice.defjvp
def _sin_twice_jvp(primals, tangents):
    return wnp.sin(primals[0]), 2.0 * tangents[0]


@wg.custom_jvp
def cube_jvp_as_square(x):
    return x ** 3


@cube_jvp_as_square.defjvp
def _cube_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    return x ** 3, 2.0 * x * dx


@wg.custom_jvp
def safe_norm(x):
    return wnp.sqrt(wnp.sum(x * x))


@safe_norm.defjvp
def _safe_norm_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    y = safe_norm(x)
    return y, wnp.sum(x * dx) / wnp.where(y == 0.0, 1.0, y)


def uses_clip(x):
    y = 5.0 * clip_gradient(x)
    return y * 2.0


def uses_cube(x):
    return cube_as_square(x) + x


def uses_sin_twice(x):
    y = sin_twice(x)
    return y * 3.0


def uses_stop(x):
    s = wg.stop_gradient(x)
    return x * s + wnp.sin(s)


X = np.array([0.3, -1.2, 2.0])


# =================================================================================================
# jacfwd, jacrev
# =================================================================================================
def f_vec(x, y):
    """a docstring kept by the wrapper"""
    return wnp.sin(x) * y[0] + x[::-1] ** 2


def test_jacfwd_jacrev_are_jacobian_with_a_mode():
    y = np.array([0.5, 1.5])
    for argnums in (0, 1, (0, 1)):
        ref = wg.jacobian(f_vec, argnums)(X, y)
        for jac in (wg.jacfwd, wg.jacrev):
            got = jac(f_vec, argnums)(X, y)
            if isinstance(argnums, tuple):
                assert isinstance(got, tuple) and len(got) == 2
                for a, b in zip(got, ref):
                    np.testing.assert_allclose(a, b, rtol=1e-14)
            else:
                np.testing.assert_allclose(got, ref, rtol=1e-14)
    # against the closed form: d/dx = diag(cos x) y0 + anti-diagonal 2 x[::-1]
    closed = np.diag(np.cos(X) * y[0]) + np.fliplr(np.diag(2 * X[::-1]))
    np.testing.assert_allclose(wg.jacfwd(f_vec)(X, y), closed, rtol=1e-14)
    np.testing.assert_allclose(wg.jacrev(f_vec)(X, y), closed, rtol=1e-14)


def test_jacfwd_jacrev_are_differentiable_again():
    y = np.array([0.5, 1.5])
    for jac in (wg.jacfwd, wg.jacrev):
        wg.check_grad(jac(f_vec), X, y, order=2)
        wg.check_grad(lambda x, y: jac(f_vec, argnums=(0, 1))(x, y)[1], X, y)
    np.testing.assert_allclose(wg.jacfwd(wg.jacrev(lambda x: wnp.sum(wnp.sin(x) * x)))(X),
                               wg.hessian(lambda x: wnp.sum(wnp.sin(x) * x))(X), rtol=1e-14)


def test_jacfwd_jacrev_wrap_the_function_and_say_what_they_are():
    for jac in (wg.jacfwd, wg.jacrev):
        j = jac(f_vec)
        assert j.__name__ == "f_vec" and j.__doc__ == f_vec.__doc__ and inspect.unwrap(j) is f_vec
        assert jac.__doc__ and "Jacobian" in jac.__doc__


def test_jacfwd_jacrev_modes_are_the_ones_named():
    # a primitive with only one rule: each mode needs its own, so the mode taken is seen
    @wg.primitive
    def only_forward(x):
        return 2.0 * x

    @only_forward.frule
    def _(primals, tangents):
        return only_forward(primals[0]), 2.0 * tangents[0]
    np.testing.assert_allclose(wg.jacfwd(only_forward)(X), 2.0 * np.eye(3))
    with pytest.raises(NotImplementedError, match="reverse rule"):
        wg.jacrev(only_forward)(X)


# =================================================================================================
# stop_gradient
# =================================================================================================
def test_stop_gradient_passes_plain_values_through():
    a = np.arange(3.0)
    assert wg.stop_gradient(a) is a
    tree = {"a": a, "b": (1.5, 2)}
    assert wg.stop_gradient(tree) is tree
    assert wg.stop_gradient(2.5) == 2.5


def test_stop_gradient_is_zero_in_the_eager_engines():
    f = lambda x: x * wg.stop_gradient(x)   # noqa: E731  d/dx = stop(x) = x, not 2 x
    assert wg.grad(f)(3.0) == 3.0
    assert wg.derivative(f)(3.0) == 3.0
    np.testing.assert_allclose(wg.jacfwd(f)(X), np.diag(X))
    np.testing.assert_allclose(wg.jacrev(f)(X), np.diag(X))
    assert wg.jvp(wg.stop_gradient, (2.0,), (1.0,))[1] == 0.0
    t = wg.Tape()
    x = t.var(2.0)
    assert t.var is not None and (x * wg.stop_gradient(x)).grad().wrt(x) == 2.0
    d = wg.Dual(2.0, 1.0) * wg.stop_gradient(wg.Dual(2.0, 1.0))
    assert d.tangent == 2.0


def test_stop_gradient_at_every_order():
    f = lambda x: x ** 2 * wg.stop_gradient(x)   # noqa: E731  value x**3; f'' = 2 x, not 6 x
    x = 1.5
    assert wg.grad(wg.grad(f))(x) == pytest.approx(2 * x)
    assert wg.derivative(f, order=2)(x) == pytest.approx(2 * x)
    assert wg.hessian(f)(x) == pytest.approx(2 * x)
    assert wg.derivative(f, order=3)(x) == 0.0
    cs = wg.taylor(f, x, 1.0, 4)   # (x + t)^2 x: coefficients x^3, 2 x^2, x, 0, 0
    np.testing.assert_allclose([float(c) for c in cs], [x ** 3, 2 * x * x, x, 0.0, 0.0])
    np.testing.assert_allclose(wg.hvp(lambda v: wnp.sum(v ** 2 * wg.stop_gradient(v)), X,
                                      np.ones(3)), 2 * X)


def test_stop_gradient_on_pytrees():
    def f(p):
        q = wg.stop_gradient(p)
        return p["w"] * q["w"] + wnp.sum(p["b"][0] * q["b"][0]) * q["b"][1]
    p = {"w": 2.0, "b": (np.array([1.0, 3.0]), 4.0)}
    g = wg.grad(f)(p)
    assert g["w"] == 2.0 and g["b"][1] == 0.0
    np.testing.assert_allclose(g["b"][0], [4.0, 12.0])


def test_stop_gradient_in_graphs_compile_and_source():
    g = wg.trace(uses_stop, 3.0)
    assert "stop_gradient" in g.source()
    dg = g.grad()
    assert dg(3.0) == pytest.approx(3.0)   # d/dx (x s + sin s) with s constant: s
    assert dg.simplify().compile()(2.0) == pytest.approx(2.0)
    assert g.jvp()(3.0, 1.0)[1] == pytest.approx(3.0)
    assert g.grad().grad()(3.0) == 0.0
    assert g.simplify().grad()(3.0) == pytest.approx(3.0)   # simplify keeps it
    assert wg.compile(wg.grad(uses_stop))(4.0) == pytest.approx(4.0)
    assert wg.source.grad(uses_stop)(3.0) == pytest.approx(3.0)
    assert wg.source.jvp(uses_stop)((3.0,), (1.0,))[1] == pytest.approx(3.0)


def test_stop_gradient_has_no_dependence_in_sparsity_detection():
    pattern = wg.jacobian_sparsity(lambda x: x[0] * wg.stop_gradient(x), X).toarray()
    expected = np.zeros((3, 3), bool)
    expected[:, 0] = True
    np.testing.assert_array_equal(pattern, expected)
    h = wg.hessian_sparsity(lambda x: wnp.sum(x * wg.stop_gradient(x) ** 2), X).toarray()
    assert not h.any()


# =================================================================================================
# custom_vjp
# =================================================================================================
def test_custom_vjp_reverse_mode_uses_bwd_forward_mode_the_body():
    f = lambda x: 5.0 * clip_gradient(x)   # noqa: E731
    assert wg.grad(f)(2.0) == 1.0           # clipped
    assert wg.derivative(f)(2.0) == 5.0     # the body's derivative
    assert wg.jvp(f, (2.0,), (1.0,))[1] == 5.0
    np.testing.assert_allclose(wg.jacrev(f)(X), np.eye(3))
    np.testing.assert_allclose(wg.jacfwd(f)(X), 5.0 * np.eye(3))
    assert wg.vjp(f, 2.0)[1](0.1) == (0.5,)   # |g| = 0.5 < 1: not clipped
    assert wg.taylor(f, 2.0, 1.0, 2)[1] == 5.0
    assert clip_gradient(2.0) == 2.0 and clip_gradient.__name__ == "clip_gradient"


def test_custom_vjp_check_grad_with_a_correct_rule():
    for x, y in ((0.7, -1.3), (X, np.array([1.0, 2.0, -0.5])), (X, 0.4)):
        wg.check_grad(sin_times, x, y, order=2)
        ref = wg.grad(lambda a, b: wnp.sum(wnp.sin(a) * b), argnums=(0, 1))(x, y)
        got = wg.grad(lambda a, b: wnp.sum(sin_times(a, b)), argnums=(0, 1))(x, y)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, rtol=1e-14)


def test_custom_vjp_second_order_goes_through_bwd():
    # bwd says 2 x g: reverse over reverse and forward over reverse differentiate that (2),
    # forward over forward the body (6 x)
    x = 1.5
    assert wg.grad(uses_cube)(x) == 2 * x + 1
    assert wg.grad(wg.grad(uses_cube))(x) == 2.0
    assert wg.hessian(uses_cube)(x) == 2.0
    np.testing.assert_allclose(wg.hvp(lambda v: wnp.sum(cube_as_square(v)), X, np.ones(3)),
                               2.0 * np.ones(3))
    assert wg.derivative(uses_cube, order=2)(x) == pytest.approx(6 * x)
    # a Jacobian of cotangents: bwd runs once per row, with that row's cotangent
    np.testing.assert_allclose(wg.jacrev(cube_as_square)(X), np.diag(2 * X))
    np.testing.assert_allclose(wg.jacfwd(cube_as_square)(X), np.diag(3 * X ** 2))


def test_custom_vjp_pytrees_in_and_out():
    @wg.custom_vjp
    def affine(params, x):
        return {"y": params["w"] * x + params["b"], "x2": x * x}

    def fwd(params, x):
        return affine(params, x), (params["w"], x)

    def bwd(res, g):
        w, x = res
        gy, gx2 = g["y"], g["x2"]
        return {"w": wnp.sum(gy * x), "b": wnp.sum(gy)}, gy * w + 2.0 * x * gx2
    affine.defvjp(fwd, bwd)

    def loss(params, x, f):
        out = f(params, x)
        return wnp.sum(out["y"] ** 2) + wnp.sum(out["x2"])

    def body(params, x):
        return {"y": params["w"] * x + params["b"], "x2": x * x}
    params = {"w": 1.5, "b": -0.5}
    got = wg.grad(loss, argnums=(0, 1))(params, X, affine)
    ref = wg.grad(loss, argnums=(0, 1))(params, X, body)
    assert got[0]["w"] == pytest.approx(ref[0]["w"]) and got[0]["b"] == pytest.approx(ref[0]["b"])
    np.testing.assert_allclose(got[1], ref[1])
    wg.check_grad(lambda p, x: loss(p, x, affine), params, X, order=2)


def test_custom_vjp_nondiff_argnums():
    @wg.custom_vjp(nondiff_argnums=(0,))
    def power(n, x):
        return x ** n

    power.defvjp(lambda n, x: (x ** n, x), lambda n, x, g: (n * x ** (n - 1) * g,))
    assert power(3, 2.0) == 8.0
    assert wg.grad(power, argnums=1)(3, 2.0) == 12.0
    wg.check_grad(lambda x: power(3, x), X, order=2)
    # JAX's spelling: partial(custom_vjp, nondiff_argnums=...) and positional
    p2 = wg.custom_vjp(lambda n, x: x ** n, (0,))
    p2.defvjp(lambda n, x: (x ** n, x), lambda n, x, g: (0.5 * g,))
    assert wg.grad(p2, argnums=1)(3, 2.0) == 0.5


def test_custom_vjp_in_graphs_compile_and_source():
    g = wg.trace(uses_clip, 2.0)
    assert g(2.0) == 20.0
    assert g.grad()(2.0) == 1.0                    # the cotangent 10 clipped to 1
    assert g.grad().simplify().compile()(2.0) == 1.0
    assert g.jvp()(2.0, 1.0)[1] == 10.0            # the body's derivative
    assert wg.compile(wg.grad(uses_clip))(3.0) == 1.0
    assert wg.compile(uses_clip)(3.0) == 30.0
    df = wg.source.grad(uses_clip)
    assert df(2.0) == 1.0 and "vjp_call(clip_gradient" in df.source
    assert wg.source.jvp(uses_clip)((2.0,), (1.0,))[1] == 10.0
    assert wg.source.grad(uses_cube)(1.5) == pytest.approx(4.0)   # bwd's 2 x, plus 1
    with pytest.raises(TypeError, match="custom function's derivative is its rule"):
        wg.source.grad(cube_as_square)
    gc = wg.trace(uses_cube, 1.5)
    assert gc.grad().grad()(1.5) == pytest.approx(2.0)   # reverse over reverse: bwd traced


def test_custom_vjp_under_checkpoint_and_scan():
    f = wg.checkpoint(lambda x: 5.0 * clip_gradient(x) + cube_as_square(x))
    assert wg.grad(f)(1.5) == pytest.approx(1.0 + 3.0)

    def step(c, x):
        return c + 5.0 * clip_gradient(x) + 0.5 * c, None   # cotangents > 1: clipped to 1
    for strategy in ("all", "ctz", "binomial"):
        kw = {"snapshots": 2} if strategy == "binomial" else {}
        g = wg.grad(lambda xs: wg.scan(step, 1.0, xs, checkpoint=strategy, **kw)[0])(X)
        np.testing.assert_array_equal(g, np.ones(3))  # the body: 5 * 1.5 ** (2, 1, 0)


def test_custom_vjp_errors_name_the_function():
    @wg.custom_vjp
    def no_rule(x):
        return x
    with pytest.raises(NotImplementedError, match="no_rule.defvjp"):
        no_rule(1.0)

    def make(bwd, fwd=None):
        @wg.custom_vjp
        def bad(x, y):
            return x * y
        bad.defvjp(fwd or (lambda x, y: (x * y, (x, y))), bwd)
        return bad
    too_few = make(lambda r, g: (g * r[1],))
    with pytest.raises(ValueError, match="'bad'.*tuple of 2 cotangent"):
        wg.grad(too_few)(1.0, 2.0)
    wrong_shape = make(lambda r, g: (wnp.sum(g * r[1]), g * r[0]))
    with pytest.raises(ValueError, match="'bad'.*shape"):
        wg.grad(lambda x, y: wnp.sum(wrong_shape(x, y)))(X, X)
    not_pair = make(lambda r, g: (g, g), fwd=lambda x, y: x * y)
    with pytest.raises(ValueError, match="'bad'.*fwd must return a pair"):
        wg.grad(not_pair)(1.0, 2.0)
    with pytest.raises(TypeError, match="defvjp"):
        make(None)
    # None is a zero cotangent
    assert wg.grad(make(lambda r, g: (None, g * r[0])), argnums=(0, 1))(1.0, 2.0) == (0.0, 1.0)


def test_custom_vjp_forward_mode_needs_a_differentiable_body():
    @wg.primitive
    def reverse_only(x):
        return 2.0 * x

    @reverse_only.rrule
    def _(x):
        return reverse_only(x), lambda g: (2.0 * g,)

    @wg.custom_vjp
    def opaque(x):
        return reverse_only(x)
    opaque.defvjp(lambda x: (opaque(x), None), lambda r, g: (2.0 * g,))
    assert wg.grad(opaque)(1.0) == 2.0
    with pytest.raises(NotImplementedError, match="custom_vjp function 'opaque'.*body.*"
                                                  "custom_jvp"):
        wg.derivative(opaque)(1.0)


def test_custom_functions_refuse_closing_over_traced_values():
    def outer(y):
        @wg.custom_vjp
        def closes(x):
            return x * y
        closes.defvjp(lambda x: (x * y, None), lambda r, g: (g,))
        return closes(y)
    with pytest.raises(ValueError, match="closed over"):
        wg.grad(outer)(2.0)

    @wg.custom_vjp(nondiff_argnums=(1,))
    def scaled(x, s):
        return x * s
    scaled.defvjp(lambda x, s: (x * s, None), lambda s, r, g: (g * s,))
    with pytest.raises(TypeError, match="nondiff_argnums"):
        wg.grad(lambda s: scaled(1.0, s))(2.0)


# =================================================================================================
# custom_jvp
# =================================================================================================
def test_custom_jvp_gives_a_finite_derivative_where_the_body_gives_nan():
    body = lambda x: wnp.log(1.0 + wnp.exp(x))   # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(wg.grad(body)(1000.0))
        assert np.isnan(wg.grad(lambda x: wnp.sqrt(wnp.sum(x * x)))(np.zeros(3))).all()
        assert wg.grad(log1pexp)(1000.0) == 1.0
        assert wg.derivative(log1pexp)(1000.0) == 1.0
        np.testing.assert_array_equal(wg.grad(safe_norm)(np.zeros(3)), np.zeros(3))
        np.testing.assert_array_equal(wg.jacfwd(safe_norm)(np.zeros(3)), np.zeros(3))
    np.testing.assert_allclose(wg.grad(safe_norm)(X), X / np.linalg.norm(X))
    wg.check_grad(log1pexp, X, order=2)
    wg.check_grad(safe_norm, X, order=2)


@wg.custom_jvp
def sin_times_jvp(x, y):
    return wnp.sin(x) * y


@sin_times_jvp.defjvp
def _sin_times_jvp_rule(primals, tangents):
    (x, y), (dx, dy) = primals, tangents
    return wnp.sin(x) * y, wnp.cos(x) * y * dx + wnp.sin(x) * dy


@wg.custom_jvp
def cube_jvp_correct(x):
    return x ** 3


@cube_jvp_correct.defjvp
def _(primals, tangents):
    return primals[0] ** 3, 3.0 * primals[0] ** 2 * tangents[0]


def test_custom_jvp_check_grad_with_correct_rules():
    for x, y in ((0.7, -1.3), (X, np.array([1.0, 2.0, -0.5])), (X, 0.4)):
        wg.check_grad(sin_times_jvp, x, y, order=2)
    wg.check_grad(cube_jvp_correct, X, order=2)
    np.testing.assert_allclose(wg.hessian(lambda v: wnp.sum(cube_jvp_correct(v)))(X),
                               np.diag(6 * X))


def test_custom_jvp_rule_is_used_in_every_mode():
    x = 0.4
    assert wg.derivative(sin_twice)(x) == 2.0
    assert wg.grad(sin_twice)(x) == 2.0          # the transpose of the rule
    np.testing.assert_allclose(wg.jacfwd(sin_twice)(X), 2.0 * np.eye(3))
    np.testing.assert_allclose(wg.jacrev(sin_twice)(X), 2.0 * np.eye(3))
    assert wg.vjp(sin_twice, x)[1](1.5) == (3.0,)
    cs = wg.taylor(sin_twice, x, 1.0, 3)         # the rule along the curve: 2 t, no more
    np.testing.assert_allclose([float(c) for c in cs], [np.sin(x), 2.0, 0.0, 0.0])
    assert wg.sparse_jacobian(sin_twice)(X).toarray() == pytest.approx(2.0 * np.eye(3))


def test_custom_jvp_rule_in_graphs_compile_and_source():
    g = wg.trace(uses_sin_twice, 0.4)
    assert g.grad()(0.4) == 6.0
    assert g.grad().simplify().compile()(0.9) == 6.0
    assert g.jvp()(0.4, 1.0)[1] == 6.0
    assert wg.compile(wg.grad(uses_sin_twice))(0.7) == 6.0
    assert wg.source.grad(uses_sin_twice)(0.4) == 6.0
    assert wg.source.jvp(uses_sin_twice)((0.4,), (1.0,))[1] == 6.0
    assert wg.grad(wg.checkpoint(uses_sin_twice))(0.4) == 6.0
    assert wg.grad(lambda xs: wg.scan(lambda c, x: (c + sin_twice(x), None), 0.0, xs)[0])(X) \
        == pytest.approx(2.0 * np.ones(3))


def test_custom_jvp_second_order_differentiates_the_rule():
    # the rule says 2 x dx for x**3: every second derivative is the rule's, 2
    x = 1.5
    assert wg.derivative(cube_jvp_as_square, order=2)(x) == 2.0
    assert wg.grad(wg.grad(cube_jvp_as_square))(x) == 2.0
    assert wg.hessian(cube_jvp_as_square)(x) == 2.0
    np.testing.assert_allclose(wg.hessian(lambda v: wnp.sum(cube_jvp_as_square(v)))(X),
                               2.0 * np.eye(3))
    assert wg.trace(cube_jvp_as_square, x).grad().grad()(x) == 2.0
    cs = wg.taylor(cube_jvp_as_square, x, 1.0, 3)  # c1 = 2 x, c2 = (2 x)'/2 = 1, c3 = 0
    np.testing.assert_allclose([float(c) for c in cs], [x ** 3, 2 * x, 1.0, 0.0])


def test_custom_jvp_batched_tangents_with_a_matrix_rule():
    a = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])

    @wg.custom_jvp
    def apply(m, x):
        return m @ x

    @apply.defjvp
    def _(primals, tangents):   # written for one direction: m @ dx, not batched
        (m, x), (dm, dx) = primals, tangents
        return m @ x, wnp.dot(dm, x) + wnp.dot(m, dx)
    np.testing.assert_allclose(wg.jacfwd(apply, argnums=1)(a, X), a)
    np.testing.assert_allclose(wg.jacrev(apply, argnums=1)(a, X), a)
    np.testing.assert_allclose(wg.jacfwd(apply, argnums=0)(a, X),
                               wg.jacobian(lambda m, x: m @ x)(a, X))
    wg.check_grad(apply, a, X, order=2)


def test_custom_jvp_defjvps_and_pytrees_and_nondiff_argnums():
    @wg.custom_jvp
    def xy(x, y):
        return x * y
    xy.defjvps(lambda dx, ans, x, y: dx * y, lambda dy, ans, x, y: 10.0 * x * dy)
    assert wg.grad(xy, argnums=(0, 1))(2.0, 3.0) == (3.0, 20.0)
    assert wg.jvp(xy, (2.0, 3.0), (1.0, 1.0))[1] == 23.0

    @wg.custom_jvp
    def norm_pair(p):
        return {"n": wnp.sqrt(p[0] ** 2 + p[1] ** 2)}

    @norm_pair.defjvp
    def _(primals, tangents):
        ((a, b),), ((da, db),) = primals, tangents
        n = wnp.sqrt(a ** 2 + b ** 2)
        return {"n": n}, {"n": (a * da + b * db) / n}
    g = wg.grad(lambda p: norm_pair(p)["n"])((3.0, 4.0))
    assert g == pytest.approx((0.6, 0.8))
    wg.check_grad(lambda a, b: norm_pair((a, b))["n"], 3.0, X, order=2)

    @wg.custom_jvp(nondiff_argnums=(0,))
    def apply_fn(fn, x):
        return fn(x)

    @apply_fn.defjvp
    def _(fn, primals, tangents):
        (x,), (dx,) = primals, tangents
        return fn(x), 7.0 * dx
    assert wg.grad(apply_fn, argnums=1)(wnp.sin, 1.0) == 7.0
    assert wg.derivative(lambda x: apply_fn(wnp.sin, x))(1.0) == 7.0


def test_custom_jvp_errors_name_the_function():
    @wg.custom_jvp
    def no_rule(x):
        return x
    with pytest.raises(NotImplementedError, match="no_rule.defjvp"):
        no_rule(1.0)

    @wg.custom_jvp
    def bad_shape(x):
        return x

    @bad_shape.defjvp
    def _(primals, tangents):
        return primals[0], wnp.sum(tangents[0])
    for transform in (wg.jacfwd, wg.jacrev):
        with pytest.raises(ValueError, match="'bad_shape'.*shape"):
            transform(bad_shape)(X)

    @wg.custom_jvp
    def not_pair(x):
        return x
    not_pair.defjvp(lambda p, t: p[0])
    with pytest.raises(ValueError, match="'not_pair'.*pair"):
        wg.derivative(not_pair)(1.0)

    @wg.custom_jvp
    def tangent_in_value(x):
        return x

    @tangent_in_value.defjvp
    def _(primals, tangents):
        return primals[0] + tangents[0], tangents[0]
    with pytest.raises(ValueError, match="'tangent_in_value'.*output depends on the tangents"):
        wg.grad(tangent_in_value)(1.0)
    with pytest.raises(TypeError, match="defjvp"):
        tangent_in_value.defjvp(3)


def test_custom_functions_sparsity_is_the_body_s():
    def f(x):
        return sin_times_jvp(x, 2.0) + clip_gradient(x[::-1]) + cube_as_square(x[0])
    expected = np.eye(3, dtype=bool) | np.fliplr(np.eye(3, dtype=bool))
    expected[:, 0] = True
    np.testing.assert_array_equal(wg.jacobian_sparsity(f, X).toarray(), expected)
    np.testing.assert_allclose(wg.sparse_jacobian(f, mode="forward")(X).toarray(), wg.jacfwd(f)(X))
    np.testing.assert_allclose(wg.sparse_jacobian(lambda x: sin_times(x, 2.0))(X).toarray(),
                               np.diag(2.0 * np.cos(X)))
    h = wg.hessian_sparsity(lambda x: wnp.sum(cube_jvp_correct(x)), X).toarray()
    np.testing.assert_array_equal(h, np.eye(3, dtype=bool))
    np.testing.assert_allclose(
        wg.sparse_hessian(lambda x: wnp.sum(cube_jvp_correct(x)))(X).toarray(), np.diag(6 * X))


def test_custom_functions_keep_plain_calls_plain():
    calls = []

    @wg.custom_vjp
    def f(x, n):
        calls.append(n)
        return x * n
    f.defvjp(lambda x, n: (f(x, n), n), lambda n, g: (g * n, None))
    assert f(2.0, 3) == 6.0 and f(x=2.0, n=3) == 6.0
    assert wg.grad(f)(2.0, 3) == 3.0
    assert wg.grad(lambda x: f(x, n=4))(2.0) == 4.0
    assert repr(f) == "<wengert custom_vjp function f>"


def test_custom_functions_on_the_engines_themselves():
    t = wg.Tape()
    x = t.var(2.0)
    y = 5.0 * clip_gradient(x) + sin_twice(x)
    assert y.grad().wrt(x) == 1.0 + 2.0
    d = 5.0 * clip_gradient(wg.Dual(2.0, 1.0)) + sin_twice(wg.Dual(2.0, 1.0))
    assert d.value == pytest.approx(10.0 + np.sin(2.0)) and d.tangent == 5.0 + 2.0
    g = wg.trace(lambda v: wnp.sum(cube_jvp_as_square(v)) + wnp.sum(cube_as_square(v)), X)
    np.testing.assert_allclose(g.hessian()(X), 4.0 * np.eye(3))   # both rules: 2 each
    np.testing.assert_allclose(g.hessian().simplify().compile()(X), 4.0 * np.eye(3))


def test_taylor_mode_over_the_custom_reverse_rules():
    # series of the gradient: bwd (2 x + 1) and the transposed rule (2 x) on truncated series
    np.testing.assert_allclose([float(c) for c in wg.taylor(wg.grad(uses_cube), 1.5, 1.0, 3)],
                               [4.0, 2.0, 0.0, 0.0])
    np.testing.assert_allclose(
        [float(c) for c in wg.taylor(wg.grad(cube_jvp_as_square), 1.5, 1.0, 3)],
        [3.0, 2.0, 0.0, 0.0])
    ref = wg.taylor(wg.grad(lambda x: wnp.logaddexp(0.0, x)), 0.3, 1.0, 4)
    np.testing.assert_allclose([float(c) for c in wg.taylor(wg.grad(log1pexp), 0.3, 1.0, 4)],
                               [float(c) for c in ref], rtol=1e-12)
