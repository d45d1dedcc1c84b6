"""The root finders' fast paths (wengert/scipy/_solving.py, wengert/implicit_diff.py): a call
on plain values is SciPy's own call and nothing else, and a gradient finds every traced value
wherever the residual keeps it, so no fast path ever takes a traced value for a constant.
Derivatives against closed forms (the cube root of x³ + x = θ: dx/dθ = 1 / (3x² + 1)) in
forward, reverse and nested modes."""
import dataclasses
import functools
import warnings

import numpy as np
import pytest
import scipy.optimize as so

import wengert as wg
import wengert.numpy as wnp
from wengert.implicit_diff import Captured
from wengert.scipy import _solving, optimize


@pytest.fixture(autouse=True)
def _failures_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.SolverWarning)
        yield


def _cubic_root(theta):
    """The real root of x³ + x = θ, by Cardano's formula."""
    s = np.sqrt(theta ** 2 / 4.0 + 1.0 / 27.0)
    return np.cbrt(theta / 2.0 + s) + np.cbrt(theta / 2.0 - s)


def _dx(theta):
    x = _cubic_root(theta)
    return 1.0 / (3.0 * x ** 2 + 1.0)


def _d2x(theta):
    x = _cubic_root(theta)
    return -6.0 * x * _dx(theta) ** 3   # d/dθ (3x² + 1)⁻¹


# -- a plain call is SciPy's call ------------------------------------------------------------------
def _no_implicit_solve(monkeypatch):
    def refuse(problem):
        raise AssertionError("a plain call reached the implicit_solve primitive")
    monkeypatch.setattr(_solving, "solve_implicit", refuse)


def test_plain_calls_are_scipys_alone(monkeypatch):
    _no_implicit_solve(monkeypatch)
    f = lambda x, c: x ** 3 + x - c   # noqa: E731
    for name in ("brentq", "brenth", "ridder", "bisect", "toms748"):
        ours = getattr(optimize, name)(f, -10.0, 10.0, args=(2.0,), xtol=1e-14)
        theirs = getattr(so, name)(f, -10.0, 10.0, args=(2.0,), xtol=1e-14)
        assert ours == theirs and type(ours) is type(theirs), name
        x, r = getattr(optimize, name)(f, -10.0, 10.0, args=(2.0,), full_output=True)
        assert r.converged and x == pytest.approx(_cubic_root(2.0), abs=1e-10)
    assert optimize.newton(f, 1.0, args=(2.0,)) == so.newton(f, 1.0, args=(2.0,))
    rs = optimize.root_scalar(f, args=(2.0,), bracket=(-10.0, 10.0))
    assert isinstance(rs, so.RootResults) and rs.root == so.root_scalar(
        f, args=(2.0,), bracket=(-10.0, 10.0)).root
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    g = lambda x, b: a @ x + 0.1 * x ** 3 - b   # noqa: E731
    r = optimize.root(g, np.zeros(2), args=(np.ones(2),))
    assert isinstance(r, so.OptimizeResult)
    np.testing.assert_array_equal(r.x, so.root(g, np.zeros(2), args=(np.ones(2),)).x)
    np.testing.assert_array_equal(optimize.fsolve(g, np.zeros(2), args=(np.ones(2),)),
                                  so.fsolve(g, np.zeros(2), args=(np.ones(2),)))
    assert optimize.fixed_point(np.cos, 1.0) == so.fixed_point(np.cos, 1.0)


def test_plain_call_still_warns_on_failure(monkeypatch):
    _no_implicit_solve(monkeypatch)
    with pytest.warns(wg.SolverWarning, match="root"):
        optimize.root(lambda x: x * x + 1.0, np.ones(1), method="hybr")


# -- every place a traced value may hide -----------------------------------------------------------
class _Model:
    def __init__(self, theta):
        self.theta = theta

    def residual(self, x):
        return x ** 3 + x - self.theta


@dataclasses.dataclass
class _Params:
    theta: object


def _placements():
    """Ways to hand θ to brentq's residual: each must give θ's derivative."""
    def cell(t):
        return optimize.brentq(lambda x: x ** 3 + x - t, -10.0, 10.0, xtol=1e-14)

    def default(t):
        return optimize.brentq(lambda x, t=t: x ** 3 + x - t, -10.0, 10.0, xtol=1e-14)

    def kwdefault(t):
        def f(x, *, c=t):
            return x ** 3 + x - c
        return optimize.brentq(f, -10.0, 10.0, xtol=1e-14)

    def arg(t):
        return optimize.brentq(lambda x, c: x ** 3 + x - c, -10.0, 10.0, args=(t,),
                               xtol=1e-14)

    def nested_args(t):   # tuples and lists inside args, several levels down
        return optimize.brentq(lambda x, c: x ** 3 + x - c[1][0][2], -10.0, 10.0,
                               args=((1.0, [(0.0, 5.0, t)]),), xtol=1e-14)

    def dict_arg(t):
        return optimize.brentq(lambda x, c: x ** 3 + x - c["t"], -10.0, 10.0,
                               args=({"t": t, "s": 1.0},), xtol=1e-14)

    def dataclass_arg(t):
        return optimize.brentq(lambda x, p: x ** 3 + x - p.theta, -10.0, 10.0,
                               args=(_Params(t),), xtol=1e-14)

    def partial(t):
        return optimize.brentq(functools.partial(lambda x, c: x ** 3 + x - c, c=t),
                               -10.0, 10.0, xtol=1e-14)

    def method(t):
        return optimize.brentq(_Model(t).residual, -10.0, 10.0, xtol=1e-14)

    def list_cell(t):   # a closed-over list holding the traced value, beside plain ones
        box = [1.0, np.ones(2), t]
        return optimize.brentq(lambda x: x ** 3 + x - box[2], -10.0, 10.0, xtol=1e-14)

    def inner_function(t):   # a function closed over by the residual, closing over θ
        inner = lambda x: x ** 3 - t   # noqa: E731
        return optimize.brentq(lambda x: inner(x) + x, -10.0, 10.0, xtol=1e-14)

    def newton(t):
        return optimize.newton(lambda x: x ** 3 + x - t, 1.0, tol=1e-14)

    def root_scalar(t):
        return optimize.root_scalar(lambda x: x ** 3 + x - t, bracket=(-10.0, 10.0),
                                    xtol=1e-14).root

    def root(t):
        return optimize.root(lambda x: x ** 3 + x - t, np.ones(1), tol=1e-12).x[0]

    return [cell, default, kwdefault, arg, nested_args, dict_arg, dataclass_arg, partial,
            method, list_cell, inner_function, newton, root_scalar, root]


@pytest.mark.parametrize("solve", _placements(), ids=lambda f: f.__name__)
def test_a_traced_value_is_found_wherever_it_hides(solve):
    theta = 2.0
    assert solve(theta) == pytest.approx(_cubic_root(theta), abs=1e-12)   # plain
    assert wg.grad(solve)(theta) == pytest.approx(_dx(theta), abs=1e-9)
    assert wg.jacobian(solve, mode="forward")(theta) == pytest.approx(_dx(theta), abs=1e-9)
    assert wg.hessian(solve)(theta) == pytest.approx(_d2x(theta), abs=1e-8)
    # forward over reverse, and again after a plain call (no state carried between calls)
    solve(3.0)
    assert wg.jacobian(wg.grad(solve), mode="forward")(theta) == pytest.approx(
        _d2x(theta), abs=1e-8)


def test_a_closure_that_also_holds_plain_values_and_functions():
    # plain values beside the traced one in the same containers: each kept, θ found
    def solve(t):
        coeffs = (1.0, np.float64(1.0), 3, None, "cubic", np.cos)
        return optimize.brentq(lambda x: coeffs[0] * x ** 3 + coeffs[1] * x - t,
                               -10.0, 10.0, xtol=1e-14)
    assert wg.grad(solve)(2.0) == pytest.approx(_dx(2.0), abs=1e-9)


def test_captured_of_plain_pytrees_is_empty_and_rebuilds_the_same_object():
    f = lambda x: x + 1.0   # noqa: E731
    obj = (f, (-10.0, 10.0), (), [np.ones(2), None, 3, "s", (1.0, [2.0])])
    c = Captured(obj)
    assert c.leaves == [] and c.template is None and c.build([]) is obj


def test_captured_rebuilds_containers_around_new_values():
    t = wg.grad(lambda v: v)   # any function; the leaves come from a live trace below

    def check(v):
        obj = (1.0, [2.0, (v, 3.0)], {"k": v})
        c = Captured(obj)
        assert c.leaves == [v]
        rebuilt = c.build([5.0])
        assert rebuilt == (1.0, [2.0, (5.0, 3.0)], {"k": 5.0})
        assert type(rebuilt[1]) is list and type(rebuilt[1][1]) is tuple
        return v
    wg.grad(check)(1.0)
    assert t(1.0) == 1.0


# -- one unknown: a 0-d solution, one dual number for F_x ------------------------------------------
def _slow_cubic(theta):
    """The same root through wg.custom_root: a 1-D unknown, no cache, the general rules."""
    return wg.custom_root(lambda x: x ** 3 + x - theta, 1.0,
                          lambda f, x0: so.brentq(f, -10.0, 10.0, xtol=1e-14), None)


_SCALAR_SOLVERS = {
    "brentq": lambda t: optimize.brentq(lambda x: x ** 3 + x - t, -10.0, 10.0, xtol=1e-14),
    "newton": lambda t: optimize.newton(lambda x, c: x ** 3 + x - c, 1.0, args=(t,),
                                        tol=1e-14),
    "root_scalar": lambda t: optimize.root_scalar(lambda x: x ** 3 + x - t, x0=1.0,
                                                  fprime=lambda x: 3 * x ** 2 + 1,
                                                  method="newton", xtol=1e-14).root,
    "fixed_point": lambda t: optimize.fixed_point(   # Newton's map: fixed at the root
        lambda x: x - (x ** 3 + x - t) / (3 * x ** 2 + 1), 1.0, xtol=1e-14),
}


@pytest.mark.parametrize("name", sorted(_SCALAR_SOLVERS))
def test_one_unknown_equals_the_general_path_and_the_closed_form(name):
    fast = _SCALAR_SOLVERS[name]
    thetas = np.array([2.0, 0.5, 3.0])
    for f in (fast, _slow_cubic):
        y = f(2.0)
        assert np.ndim(y) == 0 and y == pytest.approx(_cubic_root(2.0), abs=1e-12)
    modes = {
        "reverse": lambda f: wg.grad(f)(2.0),
        "forward": lambda f: wg.jacobian(f, mode="forward")(2.0),
        "hessian": lambda f: wg.hessian(f)(2.0),
        "forward over reverse": lambda f: wg.jacobian(wg.grad(f), mode="forward")(2.0),
        "vmap of grad": lambda f: wg.vmap(wg.grad(f))(thetas),
        "compiled grad": lambda f: wg.compile(wg.grad(f))(2.0),
        # a batch of cotangents through the root (the Jacobian of a vector of it, in one sweep)
        "reverse jacobian": lambda f: wg.jacobian(lambda t: wnp.stack([f(t), 2.0 * f(t) ** 2]),
                                                  mode="reverse")(2.0),
    }
    closed = {"reverse": _dx(2.0), "forward": _dx(2.0), "hessian": _d2x(2.0),
              "forward over reverse": _d2x(2.0), "vmap of grad": _dx(thetas),
              "compiled grad": _dx(2.0),
              "reverse jacobian": [_dx(2.0), 4.0 * _cubic_root(2.0) * _dx(2.0)]}
    for mode, run in modes.items():
        got, slow = np.asarray(run(fast)), np.asarray(run(_slow_cubic))
        np.testing.assert_allclose(got, slow, rtol=1e-9, atol=1e-10, err_msg=mode)
        np.testing.assert_allclose(got, closed[mode], rtol=1e-8, atol=1e-10, err_msg=mode)
    # the first derivative's cached code, a second time (its cache entry): the same answer
    assert wg.grad(fast)(3.0) == pytest.approx(_dx(3.0), abs=1e-10)
    assert wg.grad(fast)(3.0) == pytest.approx(_dx(3.0), abs=1e-10)


# -- the derivative code's cache -------------------------------------------------------------------
def test_a_warm_start_reuses_the_derivative_code():
    # the residual does not read the starting point: a new x0 (the last solution, as a
    # continuation does) keeps the cache entry, and each gradient is its own
    _solving._CACHE.clear()
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    x0 = np.zeros(2)
    for theta in (np.array([1.0, 2.0]), np.array([0.5, -1.0]), np.array([2.0, 0.3])):
        def solve(t, x0=x0):
            return optimize.root(lambda x: a @ x + 0.1 * x ** 3 - t, x0, tol=1e-12).x
        g = wg.grad(lambda t: wnp.sum(solve(t)))(theta)
        x = solve(theta)
        np.testing.assert_allclose(g, np.linalg.solve((a + np.diag(0.3 * x ** 2)).T,
                                                      np.ones(2)), rtol=1e-9, atol=1e-12)
        x0 = x   # the next call starts from here
    assert len(_solving._CACHE) == 1
    # a scalar root from another bracket and start: the same entry as well
    _solving._CACHE.clear()
    for lo, t in ((-10.0, 2.0), (-5.0, 3.0), (0.0, 0.5)):
        g = wg.grad(lambda t: optimize.brentq(lambda x: x ** 3 + x - t, lo, 10.0,
                                              xtol=1e-14))(t)
        assert g == pytest.approx(_dx(t), abs=1e-10)
    assert len(_solving._CACHE) == 1
    # but what the residual reads is still in the key: another matrix, another entry
    b = 2.0 * a
    wg.grad(lambda t: wnp.sum(optimize.root(lambda x: b @ x - t, np.zeros(2)).x))(np.ones(2))
    wg.grad(lambda t: wnp.sum(optimize.root(lambda x: a @ x - t, np.zeros(2)).x))(np.ones(2))
    assert len(_solving._CACHE) == 3


# -- a first reverse derivative: recorded straight onto the tape ----------------------------------
def _primitive_refused(monkeypatch):
    """Make the implicit_solve primitive's reverse rule raise: a first ``wg.grad`` through a
    solver must not need it, every other transform still must."""
    from wengert import implicit_diff

    def refuse(*args, **kwargs):
        raise AssertionError("the implicit_solve primitive was bound")
    monkeypatch.setattr(implicit_diff.implicit_solve, "_rrule", refuse)


def test_a_first_gradient_records_one_node_without_the_primitive(monkeypatch):
    _primitive_refused(monkeypatch)
    for name, solve in sorted(_SCALAR_SOLVERS.items()):
        for theta in (2.0, 3.0):   # the cache's first (traced) and second (cached) call
            assert wg.grad(solve)(theta) == pytest.approx(_dx(theta), abs=1e-9), name
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    theta = np.array([1.0, 2.0])

    def loss(t):
        return wnp.sum(optimize.root(lambda x: a @ x + 0.1 * x ** 3 - t, np.zeros(2),
                                     tol=1e-12).x)
    x = optimize.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(2), tol=1e-12).x
    want = np.linalg.solve((a + np.diag(0.3 * x ** 2)).T, np.ones(2))
    np.testing.assert_allclose(wg.grad(loss)(theta), want, rtol=1e-9)
    # wg.vjp's pullback, called twice (the tape node's pullback is not single-use)
    _, pb = wg.vjp(lambda t: optimize.root(lambda x: a @ x + 0.1 * x ** 3 - t, np.zeros(2),
                                           tol=1e-12).x, theta)
    for _ in range(2):
        np.testing.assert_allclose(pb(np.ones(2))[0], want, rtol=1e-9)
    # a nested derivative takes the primitive (refused here): the fast path is first order only
    with pytest.raises(AssertionError, match="primitive was bound"):
        wg.hessian(_SCALAR_SOLVERS["brentq"])(2.0)


def test_a_traced_cotangent_through_the_recorded_node():
    # forward over a wg.vjp pullback: the cotangent is traced, the recorded node's pullback
    # takes the general rule (J⁻ᵀ of a traced cotangent: linear in it)
    theta = 2.0
    _, pb = wg.vjp(_SCALAR_SOLVERS["brentq"], theta)
    ct, dct = wg.jvp(lambda c: pb(c)[0], (1.0,), (1.0,))
    assert ct == pytest.approx(_dx(theta), abs=1e-10)
    assert dct == pytest.approx(_dx(theta), abs=1e-10)


def test_root_fun_under_a_first_gradient_is_scipys_with_zero_derivative():
    # F(x(θ), θ) = 0 along the implicit solution: .fun's derivative is zero in every mode
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    theta = np.array([1.0, 2.0])

    def res(t):
        return optimize.root(lambda x: a @ x + 0.1 * x ** 3 - t, np.zeros(2), tol=1e-12)
    plain = so.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(2), tol=1e-12)
    seen = []

    def loss(t):
        r = res(t)
        seen.append(np.asarray(wg.tracing.plain(r.fun)))
        return wnp.sum(r.fun) + wnp.sum(r.x)
    g = wg.grad(loss)(theta)
    np.testing.assert_array_equal(seen[0], plain.fun)
    want = np.linalg.solve((a + np.diag(0.3 * plain.x ** 2)).T, np.ones(2))
    np.testing.assert_allclose(g, want, rtol=1e-9)
    np.testing.assert_allclose(wg.jacobian(lambda t: res(t).fun, mode="forward")(theta),
                               np.zeros((2, 2)), atol=1e-12)
    np.testing.assert_allclose(wg.grad(lambda t: wnp.sum(res(t).fun))(theta), 0.0, atol=0)


def test_a_compiled_solver_in_threads_keeps_each_threads_result():
    # a compiled program holds one problem object for every call: its SciPy result (read
    # for the fields not differentiated) stays per thread; a plain or taped call's problem,
    # used by that call alone, keeps it in a plain slot
    from in_threads import in_threads

    @wg.compile
    def grad_and_root(t):
        return wg.value_and_grad(_SCALAR_SOLVERS["brentq"])(t)
    thetas = [0.5 + 0.25 * i for i in range(8)]
    grad_and_root(thetas[0])
    out = in_threads(lambda i: [grad_and_root(thetas[i]) for _ in range(20)], len(thetas))
    for t, rows in zip(thetas, out):
        for v, g in rows:
            assert v == pytest.approx(_cubic_root(t), abs=1e-12)
            assert g == pytest.approx(_dx(t), abs=1e-9)
