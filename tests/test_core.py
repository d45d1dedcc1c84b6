"""The seeds' worked examples and the contract of API.md sections 1-3."""
import collections
import re
import math
import operator

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

from seeds import babylonian, seed_z  # tests/seeds.py: the tutorials' worked examples

X, Y = 0.5, 4.2
Z = 2.579425538604203
DZDX, DZDY = 5.077582561890373, 0.5


# -- the seeds' numbers, through every door -------------------------------------------
def test_tape_seed_example():
    t = wg.Tape()
    x, y = t.var(X), t.var(Y)
    z = x * y + wnp.sin(x)
    assert z.value == Z
    g = z.grad()
    assert g.wrt(x) == DZDX and g.wrt(y) == DZDY
    assert g.wrt(x, y) == (DZDX, DZDY)
    assert len(t) == 5  # two inputs, mul, sin, add


def test_grad_and_jvp_seed_example():
    assert wg.grad(seed_z, argnums=(0, 1))(X, Y) == (DZDX, DZDY)
    v, g = wg.value_and_grad(seed_z)(X, Y)
    assert v == Z and g == DZDX
    out, t = wg.jvp(seed_z, (X, Y), (1.0, 0.0))
    assert out == Z and t == DZDX
    assert wg.jvp(seed_z, (X, Y), (0.0, 1.0))[1] == DZDY


def test_dual_seed_example():
    d = wg.Dual(3, 0) + wg.Dual(5, 1) * wg.Dual(6, 0)
    assert (d.value, d.tangent) == (33, 6)


def test_babylonian_derivative():
    want = 1 / (2 * math.sqrt(2))
    assert abs(wg.derivative(babylonian)(2.0) - want) < 1e-12
    assert abs(babylonian(wg.Dual(2.0, 1.0)).tangent - want) < 1e-12
    assert abs(wg.grad(babylonian)(2.0) - want) < 1e-12


def test_tape_serves_several_outputs():
    t = wg.Tape()
    x, y = t.var(X), t.var(Y)
    a = x * y
    b = wnp.sin(x)
    ga, gb = a.grad(), b.grad()
    assert (ga.wrt(x), ga.wrt(y)) == (Y, X)
    assert gb.wrt(x) == math.cos(X) and gb.wrt(y) == 0.0
    assert a.grad().wrt(x) == Y  # sweeping again gives the same


def test_total_differential_of_intermediate():
    t = wg.Tape()
    x, y = t.var(X), t.var(Y)
    a = x * y
    z = a + wnp.sin(x)
    assert z.grad().wrt(a) == 1.0


def test_million_node_tape_has_no_recursion():
    t = wg.Tape()
    x = t.var(1.0)
    y = x
    for _ in range(1_000_000):
        y = y * 1.0
    assert len(t) == 1_000_001
    assert y.grad().wrt(x) == 1.0


# -- nesting ------------------------------------------------------------------------------
def test_no_perturbation_confusion():
    assert wg.derivative(lambda x: x * wg.derivative(lambda y: x + y)(1.0))(2.0) == 1.0
    assert wg.grad(lambda x: x * wg.grad(lambda y: x + y)(1.0))(2.0) == 1.0
    assert wg.derivative(lambda x: x * wg.grad(lambda y: x * y)(1.0))(2.0) == 4.0
    assert wg.grad(lambda x: x * wg.derivative(lambda y: x * y)(1.0))(3.0) == 6.0


@pytest.mark.parametrize("order,want", [(1, math.cos(0.7)), (2, -math.sin(0.7)),
                                         (3, -math.cos(0.7)), (4, math.sin(0.7))])
def test_derivative_orders(order, want):
    assert abs(wg.derivative(wnp.sin, order)(0.7) - want) < 1e-12


def test_grad_of_grad_of_grad():
    f = lambda x: x ** 4  # noqa: E731
    assert wg.grad(wg.grad(wg.grad(f)))(1.5) == pytest.approx(24 * 1.5)


def test_mixed_nesting_all_orders():
    f = lambda x: wnp.exp(2.0 * x)  # noqa: E731
    for d1 in (wg.grad, wg.derivative):
        for d2 in (wg.grad, wg.derivative):
            assert d1(d2(f))(0.3) == pytest.approx(4 * math.exp(0.6))


# -- transforms on arrays and pytrees -----------------------------------------------------
def test_pytrees_in_and_out():
    Point = collections.namedtuple("Point", "a b")

    def f(p):
        return wnp.sum(p["w"] * p["pt"].a) + p["pt"].b[0] ** 2

    p = {"w": np.array([1.0, 2.0]), "pt": Point(np.array([3.0, 4.0]), [5.0])}
    g = wg.grad(f)(p)
    assert isinstance(g["pt"], Point) and isinstance(g["pt"].b, list)
    np.testing.assert_allclose(g["w"], [3.0, 4.0])
    np.testing.assert_allclose(g["pt"].a, [1.0, 2.0])
    assert g["pt"].b[0] == 10.0
    out, t = wg.jvp(lambda p: (p[0] * 2.0, {"k": p[1]}), ((1.0, 2.0),), ((1.0, 0.5),))
    assert out == (2.0, {"k": 2.0}) and t == (2.0, {"k": 0.5})


def test_float32_dtype_kept():
    x = np.array([0.1, 0.2], dtype=np.float32)
    g = wg.grad(lambda x: wnp.sum(wnp.sin(x) * 2.0))(x)
    assert g.dtype == np.float32
    out, t = wg.jvp(lambda x: wnp.exp(x), (x,), (np.ones(2, np.float32),))
    assert out.dtype == np.float32 and t.dtype == np.float32
    J = wg.jacobian(lambda x: wnp.exp(x), mode="reverse")(x)
    assert J.dtype == np.float32


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_jacobian_modes(mode):
    A = np.arange(6.0).reshape(2, 3) / 7
    f = lambda x: wnp.sin(x) * wnp.sum(x ** 2)  # noqa: E731
    x = np.array([0.3, -0.2, 0.5])
    J = wg.jacobian(f, mode=mode)(x)
    want = np.diag(np.cos(x)) * np.sum(x ** 2) + np.outer(np.sin(x), 2 * x)
    np.testing.assert_allclose(J, want, rtol=1e-12)
    J2 = wg.jacobian(lambda a: a * 2.0, mode=mode)(A)
    assert J2.shape == (2, 3, 2, 3)
    np.testing.assert_allclose(J2.reshape(6, 6), 2 * np.eye(6))


def test_hessian_and_hvp():
    x = np.array([0.3, -0.2, 0.5])
    f = lambda x: wnp.sum(x ** 3) + wnp.sum(x) ** 2  # noqa: E731
    H = wg.hessian(f)(x)
    want = np.diag(6 * x) + 2.0
    np.testing.assert_allclose(H, want, rtol=1e-12)
    v = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(wg.hvp(f, x, v), want @ v, rtol=1e-12)


def test_hvp_leaves_have_the_types_of_x():
    # as grad gives them: a float for a float, an array of x's dtype for an array
    assert type(wg.hvp(wnp.sin, 2.0, 1.0)) is float
    f = lambda p: p[0] ** 2 * wnp.sum(p[1] ** 2)  # noqa: E731
    hv = wg.hvp(f, [2.0, np.ones(2, np.float32)], [1.0, np.ones(2, np.float32)])
    assert type(hv) is list and type(hv[0]) is float and hv[1].dtype == np.float32
    assert hv[0] == 20.0 and np.array_equal(hv[1], [16.0, 16.0])  # 2|q|² + 4pq·1, 4pq + 2p²
    # nested: the derivative of an hvp still passes through
    assert wg.derivative(lambda s: wg.hvp(lambda x: x ** 4, s, 1.0))(2.0) == 48.0


def test_vjp_pullback_reusable():
    out, pb = wg.vjp(lambda x, y: (x * y, wnp.sin(x)), X, Y)
    assert pb((1.0, 0.0)) == (Y, X)
    assert pb((0.0, 1.0)) == (math.cos(X), 0.0)


def test_taylor_through_slices_and_index_arrays():
    # a slice is unhashable before Python 3.12 and an index array always: taylor raised
    # TypeError building its sharing key for x[1:] or x[[0, 2]]
    x, v = np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 1.0])
    assert wg.taylor(lambda x: wnp.sum(x[1:] ** 2), x, v, 3) == [13.0, 6.0, 1.0, 0.0]
    assert wg.taylor(lambda x: wnp.sum(x[[0, 2]] ** 3), x, v, 3) == [28.0, 30.0, 12.0, 2.0]


def test_taylor_coefficients():
    cs = wg.taylor(wnp.exp, 0.0, 1.0, 5)
    np.testing.assert_allclose(cs, [1 / math.factorial(k) for k in range(6)], rtol=1e-12)
    cs = wg.taylor(lambda x: wnp.sin(x[0]) * x[1], np.array([0.3, 2.0]), np.array([1.0, 0.0]), 3)
    np.testing.assert_allclose(cs, [2 * math.sin(0.3), 2 * math.cos(0.3), -math.sin(0.3),
                                    -math.cos(0.3) / 3], rtol=1e-12)


def test_has_aux():
    g, aux = wg.grad(lambda x: (x * x, {"v": x + 1.0}), has_aux=True)(3.0)
    assert g == 6.0 and aux == {"v": 4.0}
    (v, aux), g = wg.value_and_grad(lambda x: (x * x, "note"), has_aux=True)(3.0)
    assert (v, aux, g) == (9.0, "note", 6.0)


def test_control_flow_in_eager_transforms():
    def f(x):
        while x < 10.0:
            x = x * 2.0
        return x if x > 12.0 else -x

    assert wg.grad(f)(3.0) == -4.0  # 3 -> 12 -> -12
    assert wg.derivative(f)(5.0) == -2.0  # 5 -> 10 -> -10

    def fact_like(x, n):
        return x if n == 0 else x * fact_like(x, n - 1)

    assert wg.grad(fact_like)(2.0, 3) == 4 * 2.0 ** 3


def test_grad_of_constant_function_is_zero():
    assert wg.grad(lambda x: 3.0)(1.0) == 0.0
    np.testing.assert_array_equal(wg.grad(lambda x: 1.0)(np.ones(3)), np.zeros(3))


def test_unmodified_numpy_ufuncs():
    assert wg.grad(lambda x: np.sin(x) * np.float64(2.0))(0.0) == 2.0
    x = np.array([0.1, 0.4])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(np.exp(x)))(x), np.exp(x))
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(x * np.array([2.0, 3.0])))(x), [2, 3])
    np.testing.assert_allclose(wg.grad(lambda x: wnp.sum(np.array([2.0, 3.0]) * x))(x), [2, 3])


# -- errors say what to do -------------------------------------------------------------------
def test_int_and_bool_arguments_rejected():
    with pytest.raises(TypeError, match=r"argument 0 \('x'\).*integer"):
        wg.grad(lambda x: x * 2.0)(2)
    with pytest.raises(TypeError, match="bool"):
        wg.derivative(lambda x: x)(True)
    with pytest.raises(TypeError, match=r"argument 1 \('y'\)"):
        wg.grad(lambda x, y: x * y, argnums=1)(1.0, np.array([1, 2]))
    with pytest.raises(TypeError, match="integer"):
        wg.Tape().var(3)


def test_non_scalar_grad_output():
    with pytest.raises(ValueError, match="scalar"):
        wg.grad(lambda x: x * 2.0)(np.ones(3))


@pytest.mark.parametrize("call", [float, math.sin, math.exp, int])
def test_float_and_math_on_traced_value(call):
    with pytest.raises(TypeError, match="wnp|value"):
        wg.grad(lambda x: call(x))(1.0)


def test_item_reads_the_number():
    """x.item() is an explicit request for the number, like x.value (and torch's .item()):
    the primal as a Python scalar, in every engine, nested too."""
    t = wg.Tape()
    assert t.var(2.5).item() == 2.5 and type(t.var(2.5).item()) is float
    v = t.var(np.array([1.0, 2.5]))
    assert v[1].item() == 2.5 and v.item(1) == 2.5 and type(v.item(0)) is float
    with pytest.raises(ValueError, match="size 1"):
        v.item()  # NumPy's error
    assert wg.Dual(np.float32(1.5), 1.0).item() == 1.5
    assert wg.grad(lambda x: x * x.item())(3.0) == 3.0  # the number: not differentiated
    assert wg.derivative(lambda x: wg.grad(lambda y: y * x.item())(1.0))(3.0) == 0.0
    assert type(t.var(np.array(2.0)).astype(np.float32).item()) is float


def test_int_of_a_boolean_or_integer_tracer():
    """A mask or a count has no derivative to lose: int(), float(), operator.index convert it
    as NumPy does (graph evaluation on tape variables meets these); a float still raises."""
    t = wg.Tape()
    b = t.var(np.array([0.5, -1.0])).astype(int)
    assert int(b[0]) == 0 and operator.index(b[1]) == -1 and float(b[1]) == -1.0
    assert np.array_equal(np.asarray(b), [0, -1]) and np.asarray(b).dtype == b.dtype
    counts = np.zeros(2)
    counts += b  # NumPy's own call: nothing to differentiate
    assert np.array_equal(counts, [0.0, -1.0])
    with pytest.raises(TypeError, match="plain NumPy array"):
        np.asarray(t.var(np.ones(2)))
    with pytest.raises(TypeError, match="drops its derivative"):
        int(t.var(2.5))
    with pytest.raises(TypeError, match="index"):
        operator.index(wg.Dual(2.0, 1.0))


ENGINES = {"grad": lambda f: wg.grad(lambda v: wnp.sum(f(v)))(1.5),
           "derivative": lambda f: wg.derivative(lambda v: wnp.sum(f(v)))(1.5),
           "jvp": lambda f: wg.jvp(f, (1.5,), (1.0,)),
           "hessian": lambda f: wg.hessian(lambda v: wnp.sum(f(v)))(1.5),
           "compile": lambda f: wg.compile(f)(1.5),
           "trace": lambda f: wg.trace(f, 1.5),
           "compile(grad)": lambda f: wg.compile(wg.grad(lambda v: wnp.sum(f(v))))(1.5)}


def _store(v):
    a = np.zeros(2)
    a[0] = v
    return a


def _augmented(v):
    x = np.zeros(2)
    x += v
    return x


@pytest.mark.parametrize("engine", ENGINES)
def test_plain_buffers_say_what_to_write(engine):
    """A traced value written into a plain NumPy array: one TypeError that says what happened
    and what to write, not NumPy's 'setting an array element with a sequence' (issue 17)."""
    with pytest.raises(TypeError, match=r"a\[i\] = v .*plain NumPy array.*wnp\.zeros\(n, "
                                        r"like=v\).*wnp\.zeros_like\(x\)") as info:
        ENGINES[engine](_store)
    assert "sequence" not in str(info.value) and info.value.__cause__ is None
    assert info.traceback[-1].name == "_store"  # the line that stored
    with pytest.raises(TypeError, match=r"x \+= v with x a plain NumPy array.*x = x \+ v.*"
                                        r"wnp\.zeros\(n, like=v\)"):
        ENGINES[engine](_augmented)


def test_traced_buffers_take_the_writes():
    """What the messages say to write works, and so does the same code on plain numbers."""
    def f(v):
        x = wnp.zeros(2, like=v)
        x += v
        x[1] *= v
        a = wnp.zeros_like(x)
        a[0] = x[1]
        return wnp.sum(x) + a[0] ** 2
    want = lambda v: v + v * v + v ** 4  # noqa: E731
    assert f(1.5) == want(1.5)
    for engine in ("grad", "derivative"):
        assert getattr(wg, engine)(f)(1.5) == 1 + 2 * 1.5 + 4 * 1.5 ** 3
    assert wg.compile(f)(1.5) == want(1.5) and wg.compile(wg.grad(f))(0.5) == 1 + 1 + 0.5
    wg.check_grad(f, 1.5, order=2)


def test_hessian_of_a_float_is_a_float():
    """As grad(grad(f)): a float for a float (jacobian too, both modes). (derivative, by
    forward mode, has the type of f's output: here NumPy's, from wnp.sin.)"""
    f = lambda x: x ** 3 * wnp.sin(x)  # noqa: E731
    want = wg.grad(wg.grad(f))(0.7)
    assert type(want) is float and wg.derivative(f, 2)(0.7) == pytest.approx(want, rel=1e-14)
    for h in (wg.hessian(f)(0.7), wg.jacobian(wg.grad(f), mode="forward")(0.7),
              wg.jacobian(wg.grad(f), mode="reverse")(0.7), wg.compile(wg.hessian(f))(0.7)):
        assert type(h) is float and h == pytest.approx(want, rel=1e-14)
    hs = wg.hessian(lambda x, y: x * x * y, argnums=(0, 1))(2.0, 3.0)
    assert hs == ((6.0, 4.0), (4.0, 0.0)) and type(hs[0][1]) is float
    h32 = wg.hessian(f)(np.ones(2, np.float32)[0])
    assert np.shape(h32) == () and np.result_type(h32) == np.float32
    assert wg.hessian(lambda x: wnp.sum(x ** 3))(np.array([1.0, 2.0])).shape == (2, 2)


def test_non_scalar_output_errors_name_the_transform():
    for name, call in (("grad", lambda f, x: wg.grad(f)(x)),
                       ("hessian", lambda f, x: wg.hessian(f)(x)),
                       ("hvp", lambda f, x: wg.hvp(f, x, x))):
        with pytest.raises(ValueError, match=f"^{name} needs a function with a scalar output"):
            call(lambda x: x * 2.0, np.ones(3))


def test_math_message_says_what_to_use():
    with pytest.raises(TypeError, match=r"wnp\.sin"):
        wg.derivative(math.sin)(1.0)


def test_missing_rule_names_primitive():
    @wg.primitive
    def mystery(x):
        return x * 3

    with pytest.raises(NotImplementedError, match=r"mystery.*@mystery\.rrule"):
        wg.grad(mystery)(1.0)
    with pytest.raises(NotImplementedError, match=r"mystery.*@mystery\.frule"):
        wg.derivative(mystery)(1.0)
    assert mystery(2.0) == 6.0


def test_numpy_function_without_rule():
    with pytest.raises(NotImplementedError, match="numpy.*has no wengert rule"):
        wg.grad(lambda x: np.sum(np.nextafter(x, x + 1.0)))(np.ones(3))



def test_ieee_semantics_not_python_exceptions():
    with np.errstate(all="ignore"):
        assert wg.derivative(lambda x: 1.0 / x)(0.0) == -np.inf
        assert wg.grad(lambda x: 1.0 / x)(0.0) == -np.inf
        assert np.isnan(wg.derivative(lambda x: x ** 0.5)(-1.0))
        assert np.isnan(wg.grad(lambda x: x ** 0.5)(-1.0))
        assert wg.grad(lambda x: x ** 3.0)(-2.0) == 12.0
        assert wg.derivative(lambda x: 10.0 ** x)(400.0) == np.inf


def test_operator_fast_paths_match_general_path(monkeypatch):
    """Dual's and Var's operator fast paths are the same rules as the general dispatch."""
    from wengert.forward import Dual
    from wengert.reverse import Var

    def f(x):
        return (x * 3.0 - 1) / (x + 2) ** 2 - 1 / x + 2 ** x % 1.5 - 7 // x + (-x) * x

    def g(x, y):  # broadcasting: (3,) against (2, 3), and NumPy scalars
        return wnp.sum((x * y - y / x + 2.0) * (np.float64(1.5) * -x)) + x[0] * np.float32(2)

    xs = (0.3, 1.7, -2.4)
    X, Y = np.array([0.3, 1.7, -2.4]), np.arange(6.0).reshape(2, 3) - 2.5

    def h(s):  # a float's tangent spread over an array
        return wnp.sum((s + X) * s + Y / s)

    fast = ([wg.derivative(h)(x) for x in xs], [wg.grad(h)(x) for x in xs])
    assert fast[0] == pytest.approx([np.sum(2 * x + X - Y / x**2) for x in xs], rel=1e-14)
    assert fast[1] == pytest.approx(fast[0], rel=1e-14)
    fast = ([wg.derivative(f)(x) for x in xs], [wg.grad(f)(x) for x in xs],
            wg.jvp(g, (X, Y), (np.ones(3), np.ones((2, 3))))[1], wg.grad(g, (0, 1))(X, Y))
    for cls in (Dual, Var):
        for name in [n for n, v in vars(cls).items() if n.startswith("__") and callable(v)
                     and getattr(v, "__name__", "") == n and n not in ("__init__", "__repr__")]:
            monkeypatch.delattr(cls, name)
    general = ([wg.derivative(f)(x) for x in xs], [wg.grad(f)(x) for x in xs],
               wg.jvp(g, (X, Y), (np.ones(3), np.ones((2, 3))))[1], wg.grad(g, (0, 1))(X, Y))
    assert fast[0] == general[0] and fast[1] == general[1]
    assert fast[2] == general[2]
    assert np.array_equal(fast[3][0], general[3][0]) and np.array_equal(fast[3][1], general[3][1])
    assert fast[1] == pytest.approx(fast[0], rel=1e-15)


def test_taylor_high_order_is_polynomial_not_exponential():
    import time
    f = lambda x: wnp.tanh(x) / (1.0 + x * x) + wnp.sqrt(x) * wnp.log(x)  # noqa: E731
    t0 = time.perf_counter()
    cs = wg.taylor(f, 0.7, 1.0, 16)
    assert time.perf_counter() - t0 < 5.0  # nested duals would need 2**16 passes
    assert len(cs) == 17
    np.testing.assert_allclose(float(cs[5]), wg.derivative(f, 5)(0.7) / 120, rtol=1e-10)


def test_taylor_on_arrays_and_pytrees():
    x = np.array([0.2, 0.5, 0.9])
    v = np.array([1.0, -1.0, 0.5])
    cs = wg.taylor(lambda x: wnp.sum(wnp.exp(x) * x), x, v, 3)
    for k, c in enumerate(cs):
        want = wg.derivative(lambda t: wnp.sum(wnp.exp(x + t * v) * (x + t * v)), k)(0.0)
        np.testing.assert_allclose(c, want / math.factorial(k), rtol=1e-12)
    cs = wg.taylor(lambda p: {"a": p[0] * p[1]}, (1.0, 2.0), (1.0, 1.0), 2)
    assert [c["a"] for c in cs] == [2.0, 3.0, 1.0]


def test_hot_paths_do_not_inspect_signatures(monkeypatch):
    """Argument names are for error messages only; looking them up cost more than f."""
    import inspect

    def refuse(*a, **k):
        raise AssertionError("inspect.signature on the hot path")
    monkeypatch.setattr(inspect, "signature", refuse)
    assert wg.derivative(babylonian)(2.0) > 0
    assert wg.grad(seed_z)(X, Y) == DZDX
    assert wg.jvp(seed_z, (X, Y), (1.0, 0.0))[1] == DZDX
    np.testing.assert_allclose(wg.grad(lambda v: wnp.sum(v * v))(np.ones(2)), [2.0, 2.0])


def test_partials_with_needs_skip_unused_ones(monkeypatch):
    """``partials(needs=True)``: a constant argument's partial is never computed."""
    asked = []

    @wg.primitive(broadcasting=True)
    def scaled(x, y):
        return x * y

    @scaled.partials(needs=True)
    def _(ans, x, y, needs=(True, True)):
        asked.append(needs)
        return (y if needs[0] else None), (x if needs[1] else None)

    x = np.array([1.0, 2.0])
    assert np.allclose(wg.grad(lambda x: wnp.sum(scaled(x, 3.0)))(x), [3.0, 3.0])
    assert asked[-1] == (True, False)
    assert np.allclose(wg.jvp(lambda y: scaled(x, y), (3.0,), (1.0,))[1], x)
    assert asked[-1] == (False, True)
    wg.check_grad(lambda x, y: scaled(x, y), x, 3.0, order=2)
    # the built-in ones that skip: a reverse sweep through x / c never forms -ans / c
    from wengert.core import Partials
    from wengert.rules.arithmetic import divide
    inner = divide.fast_partials
    monkeypatch.setattr(divide, "fast_partials", Partials(
        lambda *a, **k: asked.append(k["needs"]) or inner.fn(*a, **k), needs=inner.needs))
    wg.grad(lambda x: wnp.sum(wnp.divide(x, 3.0)))(x)
    assert asked[-1] == (True, False)
    wg.jvp(lambda y: wnp.divide(x, y), (3.0,), (1.0,))
    assert asked[-1] == (False, True)


def test_tangent_sums_never_write_into_callers_arrays():
    """Partials' tangent sums accumulate in place only into arrays they made."""
    rng = np.random.default_rng(3)
    X, Y, TX, TY = (rng.standard_normal((3, 4)) for _ in range(4))
    keep = [a.copy() for a in (X, Y, TX, TY)]
    for f in (lambda x, y: wnp.multiply(x, y), lambda x, y: wnp.arctan2(x, y),
              lambda x, y: x * y, lambda x, y: wnp.hypot(x, y) + x * x):
        out, t = wg.jvp(f, (X, Y), (TX, TY))
        _, tx = wg.jvp(lambda x: f(x, Y), (X,), (TX,))
        _, ty = wg.jvp(lambda y: f(X, y), (Y,), (TY,))
        np.testing.assert_allclose(t, tx + ty, rtol=1e-13)
        J = wg.jacobian(lambda x: f(x, x))(X)  # batched, one tangent for both arguments
        np.testing.assert_allclose(J.reshape(12, 12) @ TX.ravel(),
                                   wg.jvp(lambda x: f(x, x), (X,), (TX,))[1].ravel(), rtol=1e-12)
    for a, b in zip((X, Y, TX, TY), keep):
        assert np.array_equal(a, b)


def test_derivatives_are_writable_arrays():
    """Broadcast views inside the engines never reach users as read-only arrays."""
    x = np.ones(3)
    outs = [wg.grad(lambda x: wnp.sum(x))(x),
            wg.value_and_grad(lambda x: wnp.mean(x))(x)[1],
            wg.vjp(lambda x: wnp.sum(x), x)[1](1.0)[0],
            wg.jvp(lambda x: x + np.ones((2, 3)), (x,), (x,))[1],
            wg.jvp(lambda s: s + np.ones(3), (1.0,), (1.0,))[1],
            wg.hvp(lambda x: wnp.sum(x * x), x, x),
            wg.jacobian(lambda x: x + 1.0)(x),
            wg.jacobian(lambda x: x + 1.0, mode="reverse")(x)]
    for g in outs:
        assert g.flags.writeable
        g *= 2.0  # the usual in-place update
    np.testing.assert_array_equal(outs[0], [2.0, 2.0, 2.0])


def test_forward_shortcuts_match_general_path(monkeypatch):
    """ForwardTrace's one- and two-argument shortcuts are the rules, bit for bit."""
    from wengert.forward import ForwardTrace
    rng = np.random.default_rng(7)
    A, x, v = rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal(3)

    def f(x):
        y = wnp.logaddexp(0.5, A @ x) + wnp.arctan2(A @ x, 2.0) * wnp.hypot(x, 1.5).sum()
        z = wnp.exp(wnp.transpose(wnp.reshape(y, (2, 2)))) + wnp.broadcast_to(x[0], (2, 2))
        return wnp.multiply(z, z) + wnp.matmul(x, x) + wnp.sum(wnp.tanh(x)) + wnp.negative(z)

    fast = wg.jvp(f, (x,), (v,))
    fast_h = wg.hvp(lambda x: wnp.sum(f(x)), x, v)
    monkeypatch.setattr(ForwardTrace, "_unary", lambda *a: None)
    monkeypatch.setattr(ForwardTrace, "_binary", lambda *a: None)
    slow = wg.jvp(f, (x,), (v,))
    slow_h = wg.hvp(lambda x: wnp.sum(f(x)), x, v)
    for a, b in zip(fast + (fast_h,), slow + (slow_h,)):
        assert np.array_equal(a, b)


def test_primitive_facts_are_keywords_and_attributes():
    """The record's facts are keywords, readable as attributes afterwards, never assigned."""
    from wengert.core import Primitive
    p = Primitive(np.cbrt, broadcasting=True, linear=False, bilinear=False, domain=(0.2, 2.0),
                  ufunc=np.cbrt, nargs=1)
    assert (p.broadcasting, p.linear, p.bilinear, p.nondiff, p.domain, p.ufunc, p.nargs) == \
        (True, False, False, False, (0.2, 2.0), np.cbrt, 1)
    for fact, value in (("linear", True), ("domain", (0.5, 1.0)), ("sparsity", None),
                        ("batch", "linear"), ("nondiff", True), ("linearity", "linear"),
                        ("identity_when", True), ("made_up", 1)):
        with pytest.raises(AttributeError, match="declaration"):
            setattr(p, fact, value)
    assert not p.linear and p.domain == (0.2, 2.0) and p.sealed
    assert not hasattr(p, "__dict__")  # __slots__: no fact can hide in an instance dict
    q = wg.primitive(lambda x, y: x @ y, name="mm", bilinear=True)
    assert q.bilinear and q.name == "mm" and not q.broadcasting and q.fast_partials is None
    with pytest.raises(TypeError):
        wg.primitive(lambda x: x, linaer=True)  # a misspelt fact is an error, not ignored


def test_nondiff_declares_a_zero_derivative_in_every_engine():
    """``nondiff=True`` is the whole rule: zero in forward, reverse, Taylor and graph mode."""
    @wg.primitive(nondiff=True, broadcasting=True)
    def step(x, y):
        return np.floor(x) + np.floor(y)

    x, y = np.array([0.3, 1.7, 2.2]), np.array([1.5])
    assert step.nondiff and step.has_frule and step.has_rrule
    f = lambda x, y: wnp.sum(step(x, y) * x)  # noqa: E731
    want = np.floor(x) + np.floor(y)  # d/dx of step(x, y) * x, step constant
    np.testing.assert_array_equal(wg.grad(f)(x, y), want)
    np.testing.assert_array_equal(wg.grad(f, argnums=1)(x, y), [0.0])
    np.testing.assert_array_equal(wg.jvp(lambda y: step(x, y), (y,), (np.ones(1),))[1], 0.0)
    np.testing.assert_array_equal(wg.trace(wg.grad(f), x, y)(x, y), want)
    np.testing.assert_array_equal(wg.taylor(lambda y: wnp.sum(step(x, y)), y, np.ones(1), 2)[1:],
                                  [0.0, 0.0])
    wg.check_grad(f, x, y, order=2)
    # a keyword of the declaration, not assignable later
    p = wg.primitive(lambda x: 2.0 * x, name="twice")
    with pytest.raises(NotImplementedError):
        wg.grad(p)(1.0)
    with pytest.raises(AttributeError, match="nondiff=..."):
        p.nondiff = True
    assert p.fast_partials is None and not p.has_rrule
    q = wg.primitive(lambda x: 2.0 * x, name="twice", nondiff=True)
    assert wg.grad(q)(1.0) == 0.0 and wg.derivative(q)(1.0) == 0.0


def test_engines_fast_paths_read_the_public_hook(monkeypatch):
    """Dual's and Var's operator shortcuts read ``fast_partials``, the record's one hook."""
    from wengert.core import Partials
    from wengert.rules.arithmetic import multiply
    assert isinstance(multiply.fast_partials, Partials)
    assert multiply.fast_partials.fn(6.0, 2.0, 3.0) == (3.0, 2.0)
    seen = []
    inner = multiply.fast_partials
    monkeypatch.setattr(multiply, "fast_partials", Partials(
        lambda *a, **k: seen.append(a[1:]) or inner.fn(*a, **k), needs=inner.needs))
    # engines take their operators' shortcuts from the hook when they are installed
    import wengert._dispatch as dispatch
    from wengert.forward import Dual, _binary_fast_path as fwd, _unary_fast_path as fwd1
    from wengert.reverse import Var, _binary_fast_path as rev, _unary_fast_path as rev1
    for cls, b, u in ((Dual, fwd, fwd1), (Var, rev, rev1)):
        for name in dispatch.OPERATORS:
            if name in vars(cls):
                monkeypatch.setattr(cls, name, vars(cls)[name])  # restored afterwards
        dispatch.install_fast_paths(cls, b, u)
    assert wg.derivative(lambda x: x * 3.0)(2.0) == 3.0 and seen[-1] == (2.0, 3.0)
    assert wg.grad(lambda x: 4.0 * x)(2.0) == 4.0 and seen[-1] == (4.0, 2.0)


# -- escaped tracers: a transform's tracers die when it returns ------------------------------
def _leaky(leak):
    def leaky(x):
        leak.append(x * 2.0)  # a tracer of the running transform, kept past its end
        return wnp.sum(wnp.sin(x))
    return leaky


_X3 = np.array([0.5, 1.0, 1.5])
# transform -> (how to run it on a leaky function, the name its message gives)
_LEAKING = {
    "grad": (lambda f: wg.grad(f)(_X3), "wg.grad"),
    "value_and_grad": (lambda f: wg.value_and_grad(f)(_X3), "wg.value_and_grad"),
    "vjp": (lambda f: wg.vjp(f, _X3)[1](1.0), "wg.vjp"),
    "jvp": (lambda f: wg.jvp(f, (_X3,), (np.ones(3),)), "wg.jvp"),
    "derivative": (lambda f: wg.derivative(f)(0.5), "wg.derivative"),
    "derivative order 3": (lambda f: wg.derivative(f, order=3)(0.5), "wg.derivative"),
    "jacobian forward": (lambda f: wg.jacobian(f, mode="forward")(_X3), "wg.jacobian"),
    "jacobian reverse": (lambda f: wg.jacobian(f, mode="reverse")(_X3), "wg.jacobian"),
    "jacobian auto": (lambda f: wg.jacobian(f)(_X3), "wg.jacobian"),
    "hessian": (lambda f: wg.hessian(f)(_X3), "wg.hessian"),
    "hvp": (lambda f: wg.hvp(f, _X3, np.ones(3)), "wg.hvp"),
    "taylor": (lambda f: wg.taylor(f, _X3, np.ones(3), 3), "wg.taylor"),
}

# a use of an escaped tracer t -> what it computes; every one must raise
_USES = {
    "operator": lambda t: t * 2.0,
    "reflected operator": lambda t: 2.0 - t,
    "with itself": lambda t: t * t,
    "negation": lambda t: -t,
    "NumPy ufunc": np.sin,
    "NumPy function": np.sum,
    "wengert.numpy": wnp.exp,
    "method": lambda t: t.sum(),
    "indexing": lambda t: t[..., 0] if wnp.ndim(t) else t[()],
    "beside a live Var": lambda t: wg.grad(lambda y: wnp.sum(t * y))(1.0),
    "beside a live Var, reflected": lambda t: wg.grad(lambda y: wnp.sum(y * t))(1.0),
    "beside a live Dual": lambda t: wg.derivative(lambda y: wnp.sum(y * t))(1.0),
    "closed over by a later taylor": lambda t: wg.taylor(lambda y: wnp.sum(t) * y, 1.0, 1.0, 2),
    "argument of a later grad": lambda t: wg.grad(lambda y: wnp.sum(y))(t),
    "argument of a later jvp": lambda t: wg.jvp(lambda y: y, (t,), (t.value,)),
    "argument of a later derivative": lambda t: wg.derivative(lambda y: y)(t),
    "argument of a later jacobian": lambda t: wg.jacobian(lambda y: y)(t),
    "argument of a later taylor": lambda t: wg.taylor(lambda y: y, t, t.value, 2),
    "returned from a later jvp": lambda t: wg.jvp(lambda y: (y, t), (1.0,), (1.0,)),
    "returned from a later grad": lambda t: wg.grad(lambda y: (y, t), has_aux=True)(1.0),
    "returned from a later vjp": lambda t: wg.vjp(lambda y: (y, t), 1.0),
    "returned from a later jacobian": lambda t: wg.jacobian(lambda y: (y, t))(1.0),
    "returned from a later taylor": lambda t: wg.taylor(lambda y: (y, t), 1.0, 1.0, 2),
}


def _leaked(transform):
    run, _ = _LEAKING[transform]
    leak = []
    run(_leaky(leak))
    leak = [t for t in leak if isinstance(t, wg.core.Tracer)]  # (jacobian's plain probe run)
    assert leak
    return leak


@pytest.mark.parametrize("transform", sorted(_LEAKING))
@pytest.mark.parametrize("use", sorted(_USES))
def test_escaped_tracer_raises_naming_its_transform(transform, use):
    """Used after its transform returned, a tracer raises: never a Var or Dual as a result,
    nor a constant by the level-based dispatch (which would give a wrong derivative)."""
    name = _LEAKING[transform][1]
    for t in _leaked(transform):
        with pytest.raises(wg.EscapedTracerError,
                           match=rf"made by {re.escape(name)}\(leaky\), which has finished"):
            _USES[use](t)


@pytest.mark.parametrize("transform", sorted(_LEAKING))
def test_escaped_tracer_value_is_readable(transform):
    """``.value`` (down to the plain number) and ``repr`` of a dead tracer still work."""
    for t in _leaked(transform):
        v = t
        while isinstance(v, wg.core.Tracer):
            repr(v)
            v = v.value
        x = 0.5 if transform.startswith("derivative") else _X3
        np.testing.assert_allclose(v, 2.0 * x)


def test_escaped_tracer_message_says_what_to_do():
    leak = []
    wg.grad(_leaky(leak))(_X3)
    with pytest.raises(wg.EscapedTracerError) as info:
        leak[0] * 2.0
    msg = str(info.value)
    assert msg.startswith("this Var was made by wg.grad(leaky)")
    assert "escaped" in msg and "Return it from the function" in msg and "x.value" in msg
    assert isinstance(info.value, RuntimeError)  # as graph tracers raised before


def test_tracer_escaping_an_inner_transform_dies_while_the_outer_runs():
    leak = []

    def outer(x):
        inner = wg.grad(lambda y: (leak.append(y * x), y * x)[1])(1.0)
        return inner * leak[0]  # the inner grad has returned: its Var is dead

    with pytest.raises(wg.EscapedTracerError, match=r"wg\.grad\(<lambda>\)"):
        wg.grad(outer)(2.0)
    with pytest.raises(wg.EscapedTracerError, match=r"wg\.grad\(<lambda>\)"):
        wg.derivative(outer)(2.0)


def test_escaped_tracer_cannot_be_swept():
    leak = []
    wg.grad(_leaky(leak))(_X3)
    with pytest.raises(wg.EscapedTracerError, match=r"v\.grad\(\)"):
        leak[0].grad(np.ones(3))


def test_live_tracers_are_not_escaped():
    """Outer tracers inside inner transforms, closures over them, user tapes, reused pullbacks."""
    assert wg.grad(lambda x: wg.grad(lambda y: x * y)(1.0))(2.0) == 1.0
    assert wg.derivative(lambda x: wg.derivative(lambda y: x * y * y)(1.0))(2.0) == 2.0
    assert wg.grad(lambda x: wg.derivative(lambda y: x * wnp.sin(y))(1.0))(2.0) == np.cos(1.0)
    assert wg.grad(lambda x: wg.jvp(lambda y: x * y, (1.0,), (1.0,))[0])(3.0) == 1.0
    assert wg.derivative(lambda a: wg.taylor(lambda x: a * wnp.exp(x), 0.0, 1.0, 2)[2])(2.0) \
        == 0.5
    np.testing.assert_allclose(wg.hessian(lambda x: wnp.sum(x ** 3))(np.array([1.0, 2.0])),
                               np.diag([6.0, 12.0]))
    # a tape the user made: its Vars live as long as the user uses them
    t = wg.Tape()
    x, y = t.var(X), t.var(Y)
    z = x * y + wnp.sin(x)
    g = z.grad()
    w = z * 2.0  # after a sweep: still live
    assert (g.wrt(x), g.wrt(y)) == (DZDX, DZDY)
    assert w.grad().wrt(x) == 2 * DZDX
    # a vjp's pullback sweeps its (finished) tape again, checkpointed regions included
    W = np.arange(3.0)
    out, pb = wg.vjp(lambda W: wnp.sum(wg.checkpoint(lambda x: W * wnp.sin(x))(np.ones(3))), W)
    np.testing.assert_allclose(pb(1.0)[0], np.sin(1.0) * np.ones(3))
    np.testing.assert_allclose(pb(2.0)[0], 2 * np.sin(1.0) * np.ones(3))
    # a tracer leaked by a transform is dead, yet the results of that transform are plain
    leak = []
    gx = wg.grad(_leaky(leak))(_X3)
    np.testing.assert_allclose(gx * 2.0, 2 * np.cos(_X3))


def test_dead_tracer_is_reported_before_a_live_trace_sees_it():
    """A finished trace outranks every live one in the dispatch: a rule written for plain
    values never meets a dead tracer as if it were an outer transform's constant."""
    @wg.primitive
    def scaled(x, c):
        return x * c

    @scaled.rrule
    def _(x, c):
        c = np.asarray(c)  # plain values only, as a rule may assume
        return x * c, lambda g: (g * c, None)

    leak = []
    wg.derivative(_leaky(leak))(0.5)
    with pytest.raises(wg.EscapedTracerError, match="wg.derivative"):
        wg.grad(lambda x: scaled(x, leak[0]))(1.0)


# -- the one linearity fact, and the public rules ---------------------------------------------------
def _flip():
    @wg.primitive(linear=True, sparsity=None)
    def flip(x):
        return x[::-1].copy()

    @flip.rrule
    def _(x):
        return flip(x), lambda g: (flip(g),)
    return flip


def test_a_linear_primitive_needs_no_frule():
    """``linear=True`` gives the pushforward (itself on the tangent) in forward mode and Taylor
    mode (coefficients one by one); wg.vmap maps a batch as tangents only through a declared
    forward rule (which takes leading batch axes): the primitive itself need not."""
    flip = _flip()
    x, t = np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -2.0])
    assert flip.has_frule and flip.symbolic_zeros and flip.linearity == "linear"
    ans, dt = wg.jvp(lambda x: wnp.sin(flip(x)), (x,), (t,))
    np.testing.assert_allclose(dt, np.cos(x[::-1]) * t[::-1])
    coeffs = wg.taylor(lambda x: wnp.sum(flip(x) * flip(x)), x, t, 2)
    np.testing.assert_allclose(coeffs[2], np.sum(t * t))
    from wengert.batching import batching_kind
    assert batching_kind(flip) == "loop"
    xs = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(wg.vmap(flip)(xs), xs[:, ::-1])
    wg.check_grad(lambda x: wnp.sum(wnp.sin(flip(x)) * x), x, order=2)
    assert flip.jvp_rule((x,), (None,))[1] is None  # a zero stays a symbolic zero


def test_the_linearity_fact_is_one_of_its_kinds():
    with pytest.raises(ValueError, match="'bilinear' or 'piecewise'"):
        wg.primitive(lambda x: x, linear="affine")
    with pytest.raises(ValueError, match="declare one of them"):
        wg.primitive(lambda x, y: x * y, linear=True, bilinear=True)
    q = wg.primitive(lambda x, y: x * y, bilinear=True)
    assert (q.linearity, q.bilinear, q.linear) == ("bilinear", True, False)
    assert wg.primitive(lambda x: abs(x), linear="piecewise").linearity == "piecewise"


def test_jvp_rule_and_vjp_rule_are_the_declared_rules():
    """The public forms of the declared rules (source mode writes their text from them)."""
    from wengert.rules.indexing import set_basic
    from wengert.rules.shape import reshape
    x = np.arange(4.0)
    ans, t = reshape.jvp_rule((x,), (np.ones(4),), shape=(2, 2))
    assert ans.shape == (2, 2) and np.array_equal(t, np.ones((2, 2)))
    ans, pb = reshape.vjp_rule(x, shape=(2, 2))
    assert np.array_equal(pb(np.ones((2, 2)))[0], np.ones(4))
    # needs= reaches a rule declared to take it; a rule without symbolic zeros gets zeros
    ans, pb = set_basic.vjp_rule(x, 5.0, idx=1, needs=(False, True))
    assert pb(np.ones(4))[0] is None
    flip = _flip()
    with pytest.raises(NotImplementedError, match="no reverse rule"):
        wg.primitive(lambda x: x).vjp_rule(1.0)
    with pytest.raises(NotImplementedError, match="no forward rule"):
        wg.primitive(lambda x: x).jvp_rule((1.0,), (1.0,))
    assert np.array_equal(flip.jvp_rule((x,), (x,))[1], x[::-1])


def _uses_flip(x):
    return wnp.sum(FLIP(x) * x)


FLIP = _flip()


def test_source_mode_reads_the_public_rules():
    """wg.source writes a linear primitive's tangent from its derived rule, and its pullback
    from the declared one, through jvp_rule / vjp_rule."""
    x, t = np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -2.0])
    np.testing.assert_allclose(wg.source.grad(_uses_flip)(x), wg.grad(_uses_flip)(x))
    np.testing.assert_allclose(wg.source.jvp(_uses_flip)((x,), (t,))[1],
                               wg.jvp(_uses_flip, (x,), (t,))[1])


def test_taylor_of_a_linear_primitive_with_an_integer_constant():
    """An integer constant of a linear primitive (``s - 1``) has zero higher coefficients,
    as a float one: its value is not repeated at every order."""
    x, v = np.array([0.3, -0.2]), np.array([1.0, 0.5])
    f = lambda x: (wnp.sum(x) - 1) ** 3  # noqa: E731
    c = wg.taylor(f, x, v, 3)
    s, ds = np.sum(x), np.sum(v)
    np.testing.assert_allclose(c[1:], [3 * (s - 1) ** 2 * ds, 3 * (s - 1) * ds ** 2, ds ** 3])
