"""What autograd users write, run on wengert through a thin adapter that maps autograd's names
(``grad(fun, argnum)``, ``elementwise_grad``, ``make_jvp``, ``hessian_vector_product``, and
``autograd.numpy as np``) onto wengert's. The cases are our own, on the themes of autograd's
test files: wrapping, NumPy functions, linear algebra, scalar operations, containers.
Each derivative is checked against central differences (``wg.check_grad``, both modes, second
order) or a closed form."""
import numpy
import pytest

import wengert as wg
import wengert.numpy as np  # autograd users write ``import autograd.numpy as np``

R = numpy.random.default_rng(21)


# -- the adapter: autograd's differential operators in wengert's terms ----------------------------
def grad(fun, argnum=0):
    return wg.grad(fun, argnums=argnum)


def value_and_grad(fun, argnum=0):
    return wg.value_and_grad(fun, argnums=argnum)


def elementwise_grad(fun, argnum=0):
    """The sum over outputs of their gradients: a VJP with ones (autograd's definition)."""
    def egrad(*args):
        out, pullback = wg.vjp(lambda a: fun(*args[:argnum], a, *args[argnum + 1:]),
                               args[argnum])
        return pullback(numpy.ones_like(numpy.asarray(out)))[0]
    return egrad


def jacobian(fun, argnum=0):
    return wg.jacobian(fun, argnums=argnum)


def hessian(fun, argnum=0):
    return wg.hessian(fun, argnums=argnum)


def hessian_vector_product(fun, argnum=0):
    assert argnum == 0
    return wg.hvp(fun)


def make_jvp(fun, argnum=0):
    assert argnum == 0
    return lambda x: lambda v: wg.jvp(fun, (x,), (v,))


def check_grads(fun, *args):
    wg.check_grad(fun, *args, order=2)


# -- wrapping: closures, nesting, functions of functions -----------------------------------------
def test_nested_grads_and_closures():
    def f(x, y):
        return np.sin(x) * y ** 2 + x * y

    assert grad(f)(0.5, 2.0) == pytest.approx(numpy.cos(0.5) * 4 + 2)
    assert grad(f, 1)(0.5, 2.0) == pytest.approx(2 * numpy.sin(0.5) * 2 + 0.5)
    d2 = grad(grad(f))(0.5, 2.0)
    assert d2 == pytest.approx(-numpy.sin(0.5) * 4)
    # a gradient taken inside a function that is differentiated itself
    outer = grad(lambda x: x * grad(lambda y: x * y ** 2)(3.0))
    assert outer(2.0) == pytest.approx(12 * 2.0)  # d/dx (x * 6x)
    check_grads(lambda x: grad(f)(x, 2.0), 0.5)


def test_value_and_grad_and_elementwise_grad():
    x = R.standard_normal(5)
    v, g = value_and_grad(lambda x: np.sum(np.tanh(x)))(x)
    assert v == pytest.approx(numpy.sum(numpy.tanh(x)))
    numpy.testing.assert_allclose(elementwise_grad(np.tanh)(x), 1 - numpy.tanh(x) ** 2)
    numpy.testing.assert_allclose(g, 1 - numpy.tanh(x) ** 2)
    numpy.testing.assert_allclose(elementwise_grad(lambda a, b: a * b, 1)(x, x), x)


def test_jvp_hvp_jacobian_hessian():
    A = R.standard_normal((3, 3))
    f = lambda x: np.sum(np.dot(A, x) ** 3)  # noqa: E731
    x, v = R.standard_normal(3), R.standard_normal(3)
    H = hessian(f)(x)
    numpy.testing.assert_allclose(H, A.T @ numpy.diag(6 * (A @ x)) @ A, rtol=1e-12)
    numpy.testing.assert_allclose(hessian_vector_product(f)(x, v), H @ v, rtol=1e-12)
    out, t = make_jvp(lambda x: np.dot(A, x) ** 2)(x)(v)
    numpy.testing.assert_allclose(t, 2 * (A @ x) * (A @ v), rtol=1e-12)
    numpy.testing.assert_allclose(jacobian(lambda x: np.dot(A, x) ** 2)(x),
                                  numpy.diag(2 * (A @ x)) @ A, rtol=1e-12)


# -- NumPy functions: the ones autograd's numpy tests exercise ----------------------------------
X = R.standard_normal((3, 4))
Y = R.standard_normal((4, 2))
NUMPY_CASES = {
    "sum axis": lambda x: np.sum(np.sum(x, axis=0) ** 2),
    "mean keepdims": lambda x: np.sum(np.mean(x, axis=1, keepdims=True) * x),
    "var std": lambda x: np.var(x) + np.std(x, axis=0).sum(),
    "prod": lambda x: np.prod(x[0]),
    "cumsum": lambda x: np.sum(np.cumsum(x, axis=1) ** 2),
    "max min": lambda x: np.max(x) - np.min(x, axis=0).sum(),
    "dot": lambda x: np.sum(np.dot(x, Y) ** 2),
    "matmul op": lambda x: np.sum((x @ Y) ** 2),
    "tensordot": lambda x: np.sum(np.tensordot(x, Y, axes=([1], [0])) ** 2),
    "einsum": lambda x: np.einsum("ij,jk->", x, Y),
    "outer": lambda x: np.sum(np.outer(x[0], x[1]) ** 2),
    "where": lambda x: np.sum(np.where(x > 0, x, x ** 2)),
    "concatenate": lambda x: np.sum(np.concatenate([x, 2 * x], axis=1) ** 2),
    "stack": lambda x: np.sum(np.stack([x[0], x[1]]) ** 3),
    "r_": lambda x: np.sum(np.r_[x[0], x[1], 1.0] ** 2),
    "c_": lambda x: np.sum(np.c_[x[0], x[1]] ** 3),
    "array of list": lambda x: np.sum(np.array([x[0, 0], 2 * x[1, 1], x[2, 2] ** 2]) ** 2),
    "append list": lambda x: np.sum(np.append(x[0], [x[1, 0], 2.0]) ** 2),
    "norm of list": lambda x: np.linalg.norm([x[0, 0], x[1, 1]]),
    "astype int": lambda x: np.sum(x * x.astype(int)),
    "transpose reshape": lambda x: np.sum(np.reshape(x.T, (2, 6))[1] ** 2),
    "indexing": lambda x: np.sum(x[1:, ::2] ** 2) + x[0, 1] * x[2, 3],
    "fancy index": lambda x: np.sum(x[[0, 2], [1, 3]] ** 2),
    "exp log": lambda x: np.sum(np.log(1 + np.exp(x))),
    "logsumexp": lambda x: np.log(np.sum(np.exp(x - np.max(x)))) + np.max(x),
    "abs sqrt": lambda x: np.sum(np.sqrt(np.abs(x) + 1.0)),
    "clip": lambda x: np.sum(np.clip(x, -0.5, 0.5) ** 2),
    "sort": lambda x: np.sum(np.sort(x, axis=1) * numpy.arange(4)),
    "triu tril diag": lambda x: np.sum(np.triu(x[:, :3]) ** 2 + np.tril(x[:, :3])) + np.sum(
        np.diag(x[:, :3])),
    "tile repeat": lambda x: np.sum(np.tile(x[0], 2) * np.repeat(x[1], 2)),
    "broadcast": lambda x: np.sum((x[:, None, :] - x[None, :, :]) ** 2),
}


@pytest.mark.parametrize("name", sorted(NUMPY_CASES))
def test_numpy_functions(name):
    check_grads(NUMPY_CASES[name], X)


# -- linear algebra --------------------------------------------------------------------------------
S = R.standard_normal((3, 3))
SPD = S @ S.T + 3 * numpy.eye(3)
LINALG_CASES = {
    "inv": lambda a: np.sum(np.linalg.inv(a) ** 2),
    "det": lambda a: np.linalg.det(a),
    "slogdet": lambda a: np.linalg.slogdet(a)[1],
    "solve": lambda a: np.sum(np.linalg.solve(a, numpy.arange(3.0)) ** 2),
    "cholesky": lambda a: np.sum(np.linalg.cholesky((a + a.T) / 2) ** 2),
    "eigh": lambda a: np.sum(np.linalg.eigh((a + a.T) / 2)[0] ** 3),
    "norm fro": lambda a: np.linalg.norm(a),
    "trace": lambda a: np.trace(np.dot(a, a)),
}


@pytest.mark.parametrize("name", sorted(LINALG_CASES))
def test_linalg(name):
    check_grads(LINALG_CASES[name], SPD)


# -- scalar operations on Python floats ------------------------------------------------------------
@pytest.mark.parametrize("f", [
    lambda x: x ** 3 - 2 * x + 1, lambda x: 1.0 / x, lambda x: abs(x) * x,
    lambda x: x % 1.3 + x // 2, lambda x: 2.0 ** x, lambda x: x ** 0.5,
    lambda x: np.sinh(x) / np.cosh(x), lambda x: np.arctan2(x, 1.5),
    lambda x: np.log10(x) + np.exp2(x), lambda x: np.hypot(x, 2.0),
], ids=["poly", "recip", "abs", "mod floordiv", "pow base", "sqrt", "sinh/cosh", "arctan2",
        "log10 exp2", "hypot"])
def test_scalar_ops(f):
    check_grads(f, 0.7)
    assert type(grad(f)(0.7)) is float


# -- containers: tuple, list and dict inputs ---------------------------------------------------
def test_tuple_list_dict_inputs():
    def loss(params, x):
        w1, b1 = params["layer"]
        w2 = params["out"][0]
        return np.sum(np.tanh(np.dot(x, w1) + b1) @ w2)

    params = {"layer": (R.standard_normal((4, 3)), R.standard_normal(3)),
              "out": [R.standard_normal(3)]}
    g = grad(loss)(params, X)
    assert isinstance(g, dict) and isinstance(g["layer"], tuple) and isinstance(g["out"], list)
    assert g["layer"][0].shape == (4, 3)
    check_grads(loss, params, X)
    # a list and a tuple of floats
    assert grad(lambda xs: xs[0] * xs[1] + xs[2])([1.0, 2.0, 3.0]) == [2.0, 1.0, 1.0]
    assert grad(lambda t: t[0] ** 2)((3.0, 4.0)) == (6.0, 0.0)


def test_sgd_on_a_dict_of_parameters_converges():
    target = R.standard_normal(3)
    params = {"w": numpy.zeros(3)}
    step = grad(lambda p: np.sum((p["w"] - target) ** 2))
    for _ in range(100):
        g = step(params)
        params = {"w": params["w"] - 0.1 * g["w"]}
    numpy.testing.assert_allclose(params["w"], target, atol=1e-8)


# -- found by running autograd's own test files through an adapter (docs/coming-from-jax.md) ----
def test_einsum_interleaved_sublists():
    a, b, c = R.standard_normal((2, 3)), R.standard_normal((3, 4)), R.standard_normal((2, 2, 3))
    f = lambda a, b: np.einsum(a, [0, 1], b, [1, 2], [0, 2])  # noqa: E731
    numpy.testing.assert_allclose(f(a, b), a @ b)
    wg.check_grad(f, a, b, order=2)
    g = lambda c, b: np.einsum(c, [Ellipsis, 0, 1], b, [1, 2], [Ellipsis, 0, 2])  # noqa: E731
    numpy.testing.assert_allclose(g(c, b), numpy.einsum("...ij,jk->...ik", c, b))
    wg.check_grad(g, c, b, order=2)
    t = lambda a: np.einsum(a, [0, 1])  # implicit output: the transpose rule of strings  # noqa
    numpy.testing.assert_allclose(wg.jacobian(t)(a).reshape(6, 6), numpy.eye(6))
    with pytest.raises(ValueError, match="int in"):
        wg.grad(lambda a: np.einsum(a, ["i"]).sum())(a)


@pytest.mark.parametrize("width", [0, 3, (3,), (3, 2), ((3, 2),), ((1, 2), (3, 4)),
                                   ((0, 0), (0, 0)), numpy.array([[1], [2]])])
def test_pad_widths_as_numpy_reads_them(width):
    a = R.standard_normal((2, 2))
    out, jac = wg.vjp(lambda a: np.pad(a, width), a)
    numpy.testing.assert_array_equal(out, numpy.pad(a, width))
    # the pullback of a zero-padding picks the original block back out
    numpy.testing.assert_array_equal(jac(numpy.pad(a, width))[0], a)
    wg.check_grad(lambda a: np.pad(a, width, "constant", constant_values=1.5), a, order=2)


def test_real_of_a_complex_scalar_has_a_complex_cotangent():
    for z in (0.4 + 0.3j, numpy.array(0.4 + 0.3j)):
        wg.check_grad(np.real, z, order=2)
        wg.check_grad(np.imag, z, order=2)
        g = wg.vjp(np.real, z)[1](1.0)[0]
        assert numpy.iscomplexobj(g) and g == 1.0
    assert wg.grad(np.real_if_close)(0.4) == 1.0
    wg.check_grad(np.real_if_close, 0.4, order=2)


def test_tree_ravel_round_trips_and_differentiates():
    x = (1.0, R.standard_normal((2, 3)), [R.standard_normal((1, 4)), {"x": 2.0, "y": 3 + 1j}])
    vec, unravel = wg.tree.ravel(x)
    assert vec.shape == (13,) and vec.dtype == complex and vec[0] == 1.0
    back = unravel(vec)
    assert type(back[0]) is float and type(back[2][1]["y"]) is complex
    numpy.testing.assert_array_equal(wg.tree.ravel(back)[0], vec)
    y = (1.0, 2.0, [3.0, {"x": 2.0, "y": 4.0}])
    assert wg.tree.ravel(y)[1](wg.tree.ravel(y)[0]) == y
    assert wg.tree.ravel(((), []))[0].shape == (0,)
    # the leaves of a traced pytree, and a pytree rebuilt from a traced vector
    assert grad(lambda a, b: np.sum(wg.tree.ravel([a, b])[0] ** 2), 1)(1.0, 2.0) == 4.0
    v, unr = wg.tree.ravel({"w": R.standard_normal((2, 2)), "b": 0.5})
    wg.check_grad(lambda v: wg.tree.ravel(wg.tree.map(lambda t: np.sin(t) * t, unr(v)))[0], v,
                  order=2)
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        unr(numpy.zeros(4))


def test_grad_of_a_bool_or_int_output_is_an_error():
    with pytest.raises(TypeError, match="bool has no derivative"):
        grad(lambda x: np.allclose(x, x * 3.0 / 3.0))(numpy.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="integer has no derivative"):
        grad(lambda x: np.argmax(x))(numpy.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="bool has no derivative"):
        value_and_grad(lambda x: x > 0.0)(1.0)
    assert grad(lambda x: 3.0)(1.0) == 0.0  # a float constant has derivative zero


def test_check_grad_reverse_only_rules_at_second_order():
    """modes=("reverse",) checks reverse over reverse: a rule with no frule is checkable."""
    wrong = {"factor": 6.0}

    @wg.primitive
    def cube(x):
        return x ** 3

    @cube.rrule
    def _(x):
        return cube(x), lambda g: (g * three_squares(x),)

    @wg.primitive
    def three_squares(x):
        return 3.0 * x ** 2

    @three_squares.rrule
    def _(x):
        return three_squares(x), lambda h: (wrong["factor"] * x * h,)

    wg.check_grad(cube, 1.5, order=2, modes=("reverse",))
    wrong["factor"] = 6.1  # a wrong second-order rule is caught by the reverse-over-reverse check
    with pytest.raises(AssertionError, match="order 1"):
        wg.check_grad(cube, 1.5, order=2, modes=("reverse",))
    with pytest.raises(NotImplementedError, match="no forward rule"):
        wg.check_grad(cube, 1.5, order=1)  # forward mode asked for: the missing frule is named


def test_check_grad_differentiates_a_pullback_in_its_cotangent_too():
    """A rule used only inside another rule's pullback, wrong in the cotangent it is given, is
    caught at order 2 (the pullback is checked as a function of the inputs and the cotangent)."""
    @wg.primitive
    def double(x):
        return 2.0 * x

    @wg.primitive
    def ident(g):
        return g

    @double.rrule
    def _(x):
        return double(x), lambda g: (2.0 * ident(g),)

    @ident.rrule
    def _(g):
        return ident(g), lambda h: (1.001 * h,)  # wrong: the identity's pullback is h

    wg.check_grad(double, 1.5, order=1, modes=("reverse",))  # first order: right
    with pytest.raises(AssertionError, match="reverse"):
        wg.check_grad(double, 1.5, order=2, modes=("reverse",))


def test_a_pandas_mask_or_positions_index_a_traced_array():
    """lifelines indexes its parameters by a pandas boolean Series (``params[~mask]``): pandas
    keeps its values in host memory, so wengert reads them as NumPy does (it refused them as
    a foreign library's array, and lifelines' regression tests failed on it)."""
    pd = pytest.importorskip("pandas")
    x = numpy.array([1.0, 2.0, 3.0])
    mask = pd.Series([True, False, True])
    numpy.testing.assert_allclose(wg.grad(lambda x: np.sum(x[~mask] ** 2))(x), [0.0, 4.0, 0.0])
    numpy.testing.assert_allclose(wg.grad(lambda x: np.sum(x[pd.Index([0, 2])] ** 3))(x),
                                  [3.0, 0.0, 27.0])
    wg.check_grad(lambda x: np.sum(np.sin(x[mask])), x)
