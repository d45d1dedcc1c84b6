"""Removable singularities: a number where the derivative is a number, in every engine.

Each case is a function with a point where a rule's formula would divide by zero or form
``0 * inf`` (``x ** 0.0`` at 0, ``sinc`` at 0, ``std`` of one element...).  Its derivatives
there are checked against closed forms in every engine: ``Dual``, ``Tape``, ``grad``,
``jvp``, ``derivative`` of every order, ``grad`` of ``grad``, ``hessian``, Taylor mode,
graphs (``trace(...).grad()``, ``Graph.hessian``), ``compile`` and source mode; then
``check_grad`` away from the point.  The functions are defined at the top level so that
``wg.source`` can read them.
"""
import math
import warnings

import mpmath
import numpy as np
import pytest
import scipy.special as sp

import wengert as wg
import wengert.numpy as wnp

PI = math.pi


def pow0(x):
    return x ** 0.0


def pow0_int(x):
    return x ** 0


def np_pow0(x):
    return np.power(x, 0.0)


def pow1(x):
    return x ** 1.0


def pow2(x):
    return x ** 2.0


def pow2_int(x):
    return x ** 2


def pow3(x):
    return x ** 3.0


def pow_half(x):
    return x ** 0.5


def pow_three_halves(x):
    return x ** 1.5


def float_pow0(x):
    return np.float_power(x, 0.0)


def float_pow2(x):
    return np.float_power(x, 2.0)


def sinc(x):
    return np.sinc(x)


def exprel(x):
    return sp.exprel(x)


def spence(x):
    return sp.spence(x)


def boxcox_in_lmbda(lm):
    return sp.boxcox(2.0, lm)


def ber(x):
    return sp.ber(x)


def bei(x):
    return sp.bei(x)


def hypot_diagonal(x):
    return np.hypot(x, 2.0 * x)  # sqrt(5) |x|: a kink, like abs


def norm_diagonal(x):
    return np.linalg.norm(wnp.stack([x, 2.0 * x]))


def std_of_one(x):
    return np.std(wnp.stack([x]))


def power_xy(x, y):
    return x ** y


def pow_self(x):
    return x ** x


INF = math.inf
L2 = math.log(2.0)
# (function, point, [f'(x), f''(x), f'''(x), f''''(x)]), from closed forms
CASES = [
    (pow0, 0.0, [0.0, 0.0, 0.0, 0.0]),
    (pow0_int, 0.0, [0.0, 0.0, 0.0, 0.0]),
    (np_pow0, 0.0, [0.0, 0.0, 0.0, 0.0]),
    (float_pow0, 0.0, [0.0, 0.0, 0.0, 0.0]),
    (pow1, 0.0, [1.0, 0.0, 0.0, 0.0]),
    (pow2, 0.0, [0.0, 2.0, 0.0, 0.0]),
    (pow2_int, 0.0, [0.0, 2.0, 0.0, 0.0]),
    (float_pow2, 0.0, [0.0, 2.0, 0.0, 0.0]),
    (pow3, 0.0, [0.0, 0.0, 6.0, 0.0]),
    (pow_half, 0.0, [INF, -INF, INF, -INF]),  # infinite, as in JAX: not a removable one
    (pow_three_halves, 0.0, [0.0, INF, -INF, INF]),
    (sinc, 0.0, [0.0, -PI ** 2 / 3, 0.0, PI ** 4 / 5]),
    (exprel, 0.0, [1 / 2, 1 / 3, 1 / 4, 1 / 5]),
    (spence, 1.0, [-1.0, 1 / 2, -2 / 3, 3 / 2]),  # spence' = log(z) / (1 - z)
    # ber = 1 - x^4/64 + ..., bei = x^2/4 - x^6/2304 + ...: ber'' = -ber'/x - bei at 0
    (ber, 0.0, [0.0, 0.0, 0.0, -3 / 8]),
    (bei, 0.0, [0.0, 0.5, 0.0, 0.0]),
    (boxcox_in_lmbda, 0.0, [L2 ** 2 / 2, L2 ** 3 / 3, L2 ** 4 / 4, L2 ** 5 / 5]),
    (hypot_diagonal, 0.0, [0.0, 0.0, 0.0, 0.0]),  # the subgradient abs has at 0
    (norm_diagonal, 0.0, [0.0, 0.0, 0.0, 0.0]),
    (std_of_one, 1.5, [0.0, 0.0, 0.0, 0.0]),  # identically 0
    (std_of_one, 0.0, [0.0, 0.0, 0.0, 0.0]),
]
IDS = [f"{f.__name__}@{x}" for f, x, _ in CASES]


def _quiet(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def _same(got, want, what):
    got = float(np.asarray(got).reshape(()))
    if math.isinf(want):
        assert got == want, f"{what}: {got}, expected {want}"
    else:
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), f"{what}: {got}, expected {want}"


def _first_derivatives(f, x):
    """f'(x) in every engine that gives a first derivative."""
    def by_tape():
        t = wg.Tape()
        v = t.var(x)
        return f(v).grad().wrt(v)
    out = {
        "Dual": lambda: f(wg.Dual(x, 1.0)).tangent,
        "Tape": by_tape,
        "grad": lambda: wg.grad(f)(x),
        "jvp": lambda: wg.jvp(f, (x,), (1.0,))[1],
        "derivative": lambda: wg.derivative(f)(x),
        "taylor": lambda: wg.taylor(f, x, 1.0, 1)[1],
        "graph": lambda: wg.trace(f, x).grad()(x),
        "graph jvp": lambda: wg.trace(f, x).jvp()(x, 1.0)[1],
        "compile": lambda: wg.compile(wg.grad(f))(x),
        "compile jvp": lambda: wg.compile(lambda x: wg.jvp(f, (x,), (1.0,))[1])(x),
    }
    return {name: _quiet(fn) for name, fn in out.items()}


@pytest.mark.parametrize("f, x, want", CASES, ids=IDS)
def test_first_derivative_in_every_engine(f, x, want):
    for engine, got in _first_derivatives(f, x).items():
        _same(got, want[0], f"{engine} of {f.__name__} at {x}")


@pytest.mark.parametrize("f, x, want", CASES, ids=IDS)
def test_higher_derivatives_in_every_engine(f, x, want):
    name = f"{f.__name__} at {x}"
    for n in (2, 3, 4):
        _same(_quiet(wg.derivative(f, order=n), x), want[n - 1], f"derivative order {n}, {name}")
    coefs = _quiet(wg.taylor, f, x, 1.0, 4)
    for n in (1, 2, 3, 4):
        _same(coefs[n] * math.factorial(n), want[n - 1], f"taylor order {n}, {name}")
    _same(_quiet(wg.grad(wg.grad(f)), x), want[1], f"grad of grad, {name}")
    _same(_quiet(wg.grad(wg.grad(wg.grad(f))), x), want[2], f"grad of grad of grad, {name}")
    _same(_quiet(wg.derivative(wg.grad(f)), x), want[1], f"derivative of grad, {name}")
    h = _quiet(wg.hessian(lambda v: f(v[0])), np.array([x]))
    _same(h, want[1], f"hessian, {name}")
    _same(_quiet(wg.compile(wg.grad(wg.grad(f))), x), want[1], f"compiled grad of grad, {name}")
    g = _quiet(lambda: wg.trace(f, x).grad())
    _same(_quiet(g.grad(), x), want[1], f"Graph.grad().grad(), {name}")
    _same(_quiet(lambda: wg.trace(g.grad(), x).grad()(x)), want[2],
          f"graph third derivative, {name}")


SOURCE_CASES = [(f, x, want) for f, x, want in CASES
                if math.isfinite(want[0]) and f not in (norm_diagonal, std_of_one)]


@pytest.mark.parametrize("f, x, want", SOURCE_CASES,
                         ids=[f"{f.__name__}@{x}" for f, x, _ in SOURCE_CASES])
def test_source_mode(f, x, want):
    _same(_quiet(wg.source.grad(f), x), want[0], f"source.grad of {f.__name__} at {x}")
    _same(_quiet(wg.source.jvp(f), (x,), (1.0,))[1], want[0],
          f"source.jvp of {f.__name__} at {x}")


def std_of(x):
    return np.std(x)


def test_std_of_one_element_arrays():
    x = np.array([1.5])
    assert _quiet(wg.source.grad(std_of), x) == pytest.approx([0.0])
    assert _quiet(wg.grad(std_of), x) == pytest.approx([0.0])
    assert _quiet(wg.jvp, std_of, (x,), (np.ones(1),))[1] == 0.0
    # slices of one element (an axis of length 1, or one included entry), beside others
    a = np.array([[1.5, 2.0], [1.0, 3.0]])
    g = _quiet(wg.grad(lambda a: np.sum(np.std(a, axis=0, keepdims=True)[:, :1])), a[:1])
    np.testing.assert_array_equal(g, [[0.0, 0.0]])
    g = _quiet(wg.grad(lambda a: np.sum(np.nanstd(a, axis=1))), np.array([[1.5, np.nan],
                                                                             [1.0, 3.0]]))
    np.testing.assert_allclose(g, [[0.0, 0.0], [-0.5, 0.5]])
    mask = np.array([[True, False], [True, True]])
    for engine in (wg.grad, lambda f: wg.compile(wg.grad(f))):
        g = _quiet(engine(lambda a: np.sum(np.std(a, axis=1, where=mask))), a)
        np.testing.assert_allclose(g, [[0.0, 0.0], [-0.5, 0.5]])
    h = _quiet(wg.hessian(lambda a: np.sum(np.std(a, axis=1, where=mask))), a)
    assert np.all(np.isfinite(h))
    # no number to give: ddof=1 of one element is nan, as its value; two equal entries
    # are a kink (|t| / 2), nan as in JAX
    assert math.isnan(_quiet(wg.grad(lambda x: np.std(x, ddof=1)), x)[0])
    mask3 = np.array([[True, False, True], [True, True, True]])
    for f in (lambda a: np.std(a, axis=1), lambda a: np.nanstd(a, axis=1),
              lambda a: np.std(a, axis=1, where=mask3)):
        wg.check_grad(f, np.array([[1.5, 2.0, 0.3], [1.0, 3.0, -1.0]]), order=2)


def test_power_with_array_exponents():
    y = np.array([0.0, 1.0, 2.0, 3.0, 0.5])
    x = np.zeros(5)
    for engine in (wg.jacobian, lambda f: wg.jacobian(f, mode="forward"),
                   lambda f: wg.compile(wg.jacobian(f))):
        j = _quiet(engine(lambda x: x ** y), x)
        np.testing.assert_array_equal(np.diag(j), [0.0, 1.0, 0.0, 0.0, INF])
    h = _quiet(wg.hessian(lambda x: np.sum(x[:4] ** y[:4])), x[:4])
    np.testing.assert_array_equal(h, np.diag([0.0, 0.0, 2.0, 0.0]))
    for yy in (y, y[:, None]):  # broadcast against x
        wg.check_grad(lambda x: np.power(x, yy), np.array([0.7, 1.3, 0.2, 2.0, 0.9]),
                      order=2)


def test_power_with_a_traced_exponent():
    # the exponent an argument: a plain number to grad, traced under compile and source
    for y, want in ((0.0, 0.0), (1.0, 1.0), (2.0, 0.0), (3.0, 0.0)):
        for engine in (wg.grad, lambda f: wg.compile(wg.grad(f)), wg.source.grad):
            _same(_quiet(engine(power_xy), 0.0, y), want, f"d/dx x**{y} at 0")
        _same(_quiet(wg.compile(wg.derivative(power_xy, 2)), 0.0, y),
              2.0 if y == 2.0 else 0.0, f"compiled d2/dx2 x**{y} at 0")
    # in y: x^y log x, 0 where x == 0 and 0 ** y is constant in y; at (0, 0), where 0 ** y
    # jumps from 1 to 0, -inf (the limit from either side), which x ** x at 0 shows
    gx, gy = _quiet(wg.grad(power_xy, (0, 1)), 0.0, 2.0)
    assert (gx, gy) == (0.0, 0.0)
    gx, gy = _quiet(wg.grad(power_xy, (0, 1)), 0.0, 0.0)
    assert (gx, gy) == (0.0, -INF)
    for engine in (wg.grad, wg.derivative, lambda f: wg.compile(wg.grad(f))):
        assert _quiet(engine(pow_self), 0.0) == -INF
    h = _quiet(wg.hessian(lambda v: v[0] ** v[1]), np.array([2.0, 0.0]))
    np.testing.assert_allclose(h, [[0.0, 0.5], [0.5, L2 ** 2]])
    for x, y in ((0.7, 1.3), (2.0, 0.0), (0.5, 3.0)):
        wg.check_grad(power_xy, x, y, order=2)
    wg.check_grad(pow_self, 0.6, order=2)
    wg.check_grad(lambda x, y: np.float_power(x, y), np.array([0.7, 1.2]),
                  np.array([0.0, 2.5]), order=2)


def _mp_derivatives(f, x, n=3):
    mpmath.mp.dps = 40
    return [float(mpmath.diff(f, x, k)) for k in range(1, n + 1)]


def test_series_branches_agree_with_mpmath_near_and_far():
    # near the point (the series) and away from it (the formula), to the third order
    cases = [(sinc, lambda x: mpmath.sinc(PI * x), [1e-9, 0.2, -0.3, 0.5, 2.3]),
             (exprel, lambda x: mpmath.expm1(x) / x, [1e-9, 0.3, -0.9, 1.0, 2.5]),
             (spence, lambda z: mpmath.polylog(2, 1 - z), [1.0 + 1e-9, 0.9, 1.2, 0.5, 2.0]),
             (ber, lambda x: mpmath.ber(0, x), [1e-9, 0.3, -0.5, 0.99, 1.5, -2.5]),
             (bei, lambda x: mpmath.bei(0, x), [1e-9, 0.3, -0.5, 0.99, 1.5, -2.5])]
    for f, ref, points in cases:
        for x in points:
            want = _mp_derivatives(ref, x)
            got = [wg.derivative(f, n)(x) for n in (1, 2, 3)]
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{f.__name__} at {x}")
        xs = np.array([p for p in points if abs(p) > 0.1])
        wg.check_grad(f, xs, order=2)
        wg.check_grad(f, points[1], order=2)


@pytest.mark.parametrize("lm", [0.0, 0.3, -0.2])
def test_boxcox_slopes_in_lmbda(lm):
    for x in (2.0, 0.5, 1.0):
        got = [wg.derivative(lambda l: sp.boxcox(x, l), n)(lm) for n in (1, 2, 3)]
        ref = _mp_derivatives(lambda l: (mpmath.power(x, l) - 1) / l if l else mpmath.log(x),
                              lm if lm else mpmath.mpf("1e-30"))
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
    for y in (2.0, 0.5, -0.7):
        for shift, f in ((0.0, sp.inv_boxcox), (1.0, sp.inv_boxcox1p)):
            got = [wg.derivative(lambda l: f(y, l), n)(lm) for n in (1, 2, 3)]
            ref = _mp_derivatives(
                lambda l: (mpmath.power(1 + l * y, 1 / l) if l else mpmath.exp(y)) - shift,
                lm if lm else mpmath.mpf("1e-30"))
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12)
    wg.check_grad(sp.boxcox, np.array([0.5, 2.0]), np.array([lm, 0.4]), order=2)
    wg.check_grad(sp.inv_boxcox, np.array([0.5, 2.0]), np.array([lm, 0.4]), order=2)
    wg.check_grad(sp.inv_boxcox1p, np.array([0.5, 2.0]), np.array([lm, 0.4]), order=2)


def test_xlogy_keeps_its_mixed_derivative_at_x_zero():
    # d2 xlogy / dx dy = 1 / y, also at x == 0; only at (0, 0) is the y-slope guarded
    for engine in (wg.hessian, lambda f: wg.compile(wg.hessian(f))):
        h = _quiet(engine(lambda v: sp.xlogy(v[0], v[1])), np.array([0.0, 2.0]))
        np.testing.assert_allclose(h, [[0.0, 0.5], [0.5, 0.0]])
        h = _quiet(engine(lambda v: sp.xlog1py(v[0], v[1])), np.array([0.0, 1.0]))
        np.testing.assert_allclose(h, [[0.0, 0.5], [0.5, 0.0]])
    assert _quiet(wg.grad(sp.xlogy, (0, 1)), 0.0, 0.0) == (-INF, 0.0)
    assert _quiet(wg.grad(sp.xlog1py, (0, 1)), 0.0, -1.0) == (-INF, 0.0)
    for f in (sp.xlogy, sp.xlog1py):
        wg.check_grad(f, np.array([0.0, 0.7, 2.0]), np.array([2.0, 0.4, 1.5]), order=2)


def test_hypot_and_norm_at_zero():
    for engine in (wg.grad, lambda f, a: wg.compile(wg.grad(f, a))):
        assert _quiet(engine(np.hypot, (0, 1)), 0.0, 0.0) == (0.0, 0.0)
    np.testing.assert_array_equal(_quiet(wg.hessian(lambda v: np.hypot(v[0], v[1])),
                                         np.zeros(2)), np.zeros((2, 2)))
    # a one-element norm is abs: derivative 0 and second derivative 0 at 0, as abs has
    for f in (np.linalg.norm, lambda v: np.abs(v[0])):
        np.testing.assert_array_equal(_quiet(wg.grad(f), np.zeros(1)), [0.0])
        np.testing.assert_array_equal(_quiet(wg.hessian(f), np.zeros(1)), [[0.0]])
    np.testing.assert_array_equal(_quiet(wg.hessian(np.linalg.norm), np.zeros(3)),
                                  np.zeros((3, 3)))
    # a zero row beside a nonzero one: only the zero one is guarded
    a = np.array([[0.0, 0.0], [3.0, 4.0]])
    h = _quiet(wg.hessian(lambda a: np.sum(np.linalg.norm(a, axis=1))), a).reshape(4, 4)
    np.testing.assert_allclose(h[2:, 2:], [[0.128, -0.096], [-0.096, 0.072]])
    np.testing.assert_array_equal(h[:2], 0.0)
    wg.check_grad(np.hypot, np.array([3.0, 0.3]), np.array([-4.0, 1.0]), order=2)
    wg.check_grad(lambda a: np.linalg.norm(a, axis=1), np.array([[0.3, -1.2], [2.0, 0.5]]),
                  order=2)


def sqrt_where(x):
    return np.where(x > 0, np.sqrt(x), 0.0)


def sqrt_double_where(x):
    return np.where(x > 0, np.sqrt(np.where(x > 0, x, 1.0)), 0.0)


def sum_sqrt_double_where(x):
    return np.sum(sqrt_double_where(x))


def test_where_selects_derivatives_as_jax_does():
    # forward mode selects the tangent: the unselected branch's inf never reaches it
    for x in (-1.0, 0.0):
        assert _quiet(wg.jvp, sqrt_where, (x,), (1.0,))[1] == 0.0
        assert _quiet(wg.derivative(sqrt_where), x) == 0.0
    # the double where keeps the unselected branch finite: 0 in every engine
    x = np.array([-1.0, 0.0, 4.0])
    for engine in (wg.grad, lambda f: wg.compile(wg.grad(f)), wg.source.grad,
                   lambda f: wg.trace(f, x).grad()):
        g = _quiet(engine(sum_sqrt_double_where), x)
        np.testing.assert_array_equal(g, [0.0, 0.0, 0.25])
    for x in (-1.0, 0.0):
        for engine in (wg.grad, wg.source.grad, lambda f: wg.compile(wg.grad(f))):
            assert _quiet(engine(sqrt_double_where), x) == 0.0


def test_incomplete_gamma_and_beta_at_the_ends_and_powm1():
    # the integrands x^(a-1) e^-x and x^(a-1) (1-x)^(b-1) at x = 0 (and 1) with exponent 0
    # are 1, not 0 * -inf: gammainc(1, x) = 1 - e^-x, betainc(1, 2, x) = 1 - (1 - x)^2
    cases = [(lambda x: sp.gammainc(1.0, x), 0.0, [1.0, -1.0, 1.0]),
             (lambda x: sp.gammaincc(1.0, x), 0.0, [-1.0, 1.0, -1.0]),
             (lambda x: sp.betainc(1.0, 2.0, x), 0.0, [2.0, -2.0, 0.0]),
             (lambda x: sp.betainc(2.0, 1.0, x), 1.0, [2.0, 2.0, 0.0]),
             (lambda x: sp.powm1(x, 0.0), 0.0, [0.0, 0.0, 0.0]),
             (lambda x: sp.powm1(x, 2.0), 0.0, [0.0, 2.0, 0.0])]
    for f, x, want in cases:
        for n in (1, 2, 3):
            _same(_quiet(wg.derivative(f, n), x), want[n - 1], f"order {n} at {x}")
        _same(_quiet(wg.grad(f), x), want[0], f"grad at {x}")
        _same(_quiet(wg.compile(wg.grad(wg.grad(f))), x), want[1], f"compiled at {x}")
    assert _quiet(wg.grad(sp.powm1, (0, 1)), 0.0, 0.0) == (0.0, -INF)  # as x ** y
    wg.check_grad(sp.powm1, np.array([0.3, 1.5]), np.array([0.0, 2.5]), order=2)
    wg.check_grad(lambda x: sp.gammainc(1.0, x), np.array([0.3, 1.5]), order=2)
    wg.check_grad(lambda x: sp.betainc(2.0, 1.0, x), np.array([0.3, 0.8]), order=2)


def test_series_branch_of_a_complex_intermediate_is_chosen_by_modulus():
    # 0.1 + 5j has a small real part but a modulus far outside the series' radius
    f = lambda x: np.sum(np.real(np.sinc(x * (0.1 + 5.0j))))  # noqa: E731
    x = np.array([0.3, 0.02, 1.0])
    wg.check_grad(f, x, order=2)
    z = x * (0.1 + 5.0j)
    want = np.real((np.cos(PI * z) - np.sinc(z)) / z * (0.1 + 5.0j))
    np.testing.assert_allclose(wg.grad(f)(x), want, rtol=1e-9)


@pytest.mark.parametrize("update", [
    lambda t, x: t.__isub__(x),
    lambda t, x: t.__setitem__(0, 5.0),
])
def test_taylor_refuses_in_place_updates_by_name(update):
    """A jet is a node of a lazy series: rebound in place it became its own argument and
    the series never finished (memory grew without bound). Refused, with what to write."""
    x = np.array([0.3, -0.2, 0.5])

    def f(x):
        t = x * 2.0
        update(t, x)
        return np.sum(t)
    with pytest.raises(NotImplementedError, match="Taylor mode.*x = x \\+ v"):
        wg.taylor(f, x, np.ones(3), 2)
    wg.grad(f)(x)  # the other engines take it
