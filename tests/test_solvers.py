"""SciPy's solvers, differentiated by their mathematics (issue 29, items 2-6; API.md §13):
roots and fixed points, optima, linear systems, integrals, and the user's own solver through
wg.custom_root / wg.implicit.  Closed forms to 1e-8 where they exist, central finite
differences (wg.check_grad, second order) elsewhere, in forward, reverse, nested, vmap and
compiled modes."""
import functools
import sys
import warnings

import numpy as np
import pytest
import scipy.integrate as si
import scipy.optimize as so
import scipy.sparse as sp
from scipy.linalg import expm

import wengert as wg
import wengert.numpy as wnp
from wengert.implicit_diff import Captured
from wengert.scipy import integrate, optimize, sparse
from wengert.scipy.sparse import linalg as sla

TIGHT = 1e-8


@pytest.fixture(autouse=True)
def _failures_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.SolverWarning)
        yield


def every_mode(f, x, expected, atol=TIGHT):
    """The Jacobian of ``f`` at ``x`` equals ``expected`` by forward and reverse mode, under
    wg.compile, and under wg.vmap over a batch of two (the second point's Jacobian by the
    eager reverse mode)."""
    x = np.asarray(x, dtype=float)
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(wg.jacobian(f, mode=mode)(x), expected, atol=atol, rtol=0)
    np.testing.assert_allclose(wg.compile(wg.jacobian(f))(x), expected, atol=atol, rtol=0)
    x2 = x * 1.1
    batch = wg.vmap(wg.jacobian(f))(np.stack([x, x2]))
    np.testing.assert_allclose(batch[0], expected, atol=atol, rtol=0)
    np.testing.assert_allclose(batch[1], wg.jacobian(f)(x2), atol=atol, rtol=0)


# -- the user's own solver --------------------------------------------------------------------------
def bisect(f, x0):
    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def custom_sqrt(a):
    return wg.custom_root(lambda x: x * x - a, 1.0, bisect, lambda g, y: y / g(1.0))


def test_custom_root_is_sqrt_in_every_mode():
    assert custom_sqrt(4.0) == pytest.approx(2.0, abs=1e-14)
    every_mode(custom_sqrt, 4.0, 0.25)
    assert wg.derivative(custom_sqrt, 2)(4.0) == pytest.approx(-0.25 * 4.0 ** -1.5, abs=TIGHT)
    assert wg.hessian(custom_sqrt)(4.0) == pytest.approx(-0.25 * 4.0 ** -1.5, abs=TIGHT)
    assert wg.grad(wg.grad(custom_sqrt))(9.0) == pytest.approx(-0.25 / 27.0, abs=TIGHT)
    # the dense tangent solve (tangent_solve=None) and the curried form
    root = wg.custom_root(bisect, None)
    assert wg.grad(lambda a: root(lambda x: x * x - a, 1.0))(4.0) == pytest.approx(0.25)
    wg.check_grad(lambda a: root(lambda x: x ** 3 - a, 1.0), 5.0, order=2)


def test_custom_root_of_a_pytree_with_aux():
    def g(c):
        fn = functools.partial(lambda x, c: {"u": x["u"] ** 2 - c}, c=c)
        out, aux = wg.custom_root(fn, {"u": np.ones(1)},
                                  lambda f, x0: ({"u": np.sqrt([f.keywords["c"]])}, "ok"),
                                  None, has_aux=True)
        assert aux == "ok"
        return out["u"][0]
    assert wg.grad(g)(4.0) == pytest.approx(0.25, abs=TIGHT)


def test_implicit_decorator():
    @wg.implicit(lambda x, a: x ** 3 - a)
    def cube_root(x0, a):
        return np.cbrt(a)
    a = np.array([8.0, 27.0])
    every_mode(lambda a: cube_root(np.ones(2), a), a, np.diag(a ** (-2.0 / 3.0) / 3.0))
    wg.check_grad(lambda a: cube_root(np.ones(2), a), a, order=2)

    # an argmin: optimality is the gradient; the solver is plain NumPy
    Q = np.array([[3.0, 1.0], [1.0, 2.0]])
    obj = lambda x, b: 0.5 * x @ Q @ x - b @ x   # noqa: E731

    @wg.implicit(wg.grad(obj))
    def argmin(x0, b):
        return np.linalg.solve(Q, b)
    every_mode(lambda b: argmin(None, b), np.array([1.0, 2.0]), np.linalg.inv(Q))
    with pytest.raises(TypeError, match="optimality"):
        wg.implicit(3.0)


def test_captured_finds_traced_values_where_functions_keep_them():
    class Model:
        def __init__(self, w):
            self.w = w

        def residual(self, x):
            return x * x - self.w

    def check(make_f, a=4.0):
        g = wg.grad(lambda a: optimize.brentq(make_f(a), 0.0, 10.0, xtol=1e-14))(a)
        assert g == pytest.approx(0.25, abs=TIGHT)

    check(lambda a: (lambda x: x * x - a))                         # a closure cell
    check(lambda a: (lambda x, a=a: x * x - a))                    # a default
    check(lambda a: functools.partial(lambda x, c: x * x - c, c=a))  # a partial
    check(lambda a: Model(a).residual)                             # a bound method's self
    check(lambda a: (lambda x: (lambda y: y * y - [a][0])(x)))     # nested closures, a list
    calls = []

    def counted(a):
        def f(x):
            calls.append(1)   # a cell without traced values is shared, not copied
            return x * x - a
        return f
    check(counted)
    assert calls
    plain = Captured(lambda x: x + 1.0)
    assert plain.leaves == [] and plain.template is None
    # a global is not searched: the error says where to put the value
    _GLOBAL.clear()

    def from_global(a):
        _GLOBAL["a"] = a
        return optimize.brentq(_global_residual, 0.0, 10.0)
    with pytest.raises(TypeError, match="does not search for parameters"):
        wg.grad(from_global)(2.0)


_GLOBAL = {}


def _global_residual(x):
    return x * x - _GLOBAL["a"]


# -- roots ----------------------------------------------------------------------------------------
def brent_sqrt(a):
    return optimize.brentq(lambda x: x * x - a, 0.0, 10.0, xtol=1e-14)


def test_brentq_sqrt_closed_form_every_mode():
    every_mode(brent_sqrt, 2.0, 0.5 / np.sqrt(2.0))
    assert wg.hessian(brent_sqrt)(2.0) == pytest.approx(-0.25 * 2.0 ** -1.5, abs=TIGHT)
    assert wg.hvp(brent_sqrt, 2.0, 1.0) == pytest.approx(-0.25 * 2.0 ** -1.5, abs=TIGHT)
    for name in ("brenth", "ridder", "bisect", "toms748"):
        fn = getattr(optimize, name)
        g = wg.grad(lambda a: fn(lambda x, c: x * x - c, 0.0, 10.0, args=(a,), xtol=1e-14))(2.0)
        assert g == pytest.approx(0.5 / np.sqrt(2.0), abs=TIGHT), name
    x, r = optimize.brentq(lambda x: x * x - 2.0, 0.0, 10.0, full_output=True)
    assert r.converged and x == pytest.approx(np.sqrt(2.0))


def test_plain_scipy_refuses_and_the_wrapper_differentiates():
    # the failure: SciPy's own call converts the traced value
    with pytest.raises((TypeError, SystemError)):   # SystemError: raised inside SciPy's C
        wg.grad(lambda a: so.brentq(lambda x: x * x - a, 0.0, 10.0))(2.0)


A2 = np.array([[3.0, 1.0], [1.0, 2.0]])


def cubic_residual(x, b):
    return A2 @ x + 0.1 * x ** 3 - b


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
@pytest.mark.parametrize("method", ["hybr", "lm", "broyden1", "broyden2", "anderson",
                                    "linearmixing", "diagbroyden", "excitingmixing", "krylov",
                                    "df-sane"])
def test_root_every_method(method):
    b = np.array([1.0, 2.0])
    opts = {"hybr": None, "lm": None}.get(method, {"fatol": 1e-13, "maxiter": 2000})
    if method == "df-sane":
        opts = {"fatol": 1e-13, "ftol": 0.0}
    if method in ("linearmixing", "excitingmixing", "diagbroyden"):
        opts = {"fatol": 1e-6, "maxiter": 300}   # slow first-order methods

    def sol(b):
        return optimize.root(cubic_residual, np.full(2, 0.3), args=(b,), method=method,
                             tol=1e-13 if method in ("hybr", "lm") else None,
                             options=opts).x
    if method in ("linearmixing", "diagbroyden", "excitingmixing"):
        warnings.simplefilter("ignore", wg.SolverWarning)
    x = sol(b)
    # the IFT's closed form at the point SciPy returned (a converged one, or not)
    expected = np.linalg.inv(A2 + np.diag(0.3 * np.asarray(x) ** 2))
    np.testing.assert_allclose(wg.jacobian(sol)(b), expected, atol=TIGHT)
    res = optimize.root(cubic_residual, np.zeros(2), args=(b,))
    assert res.success and isinstance(res.x, np.ndarray)


def test_root_fsolve_nested_vmap_compile():
    b = np.array([1.0, 2.0])
    sol = lambda b: optimize.root(cubic_residual, np.zeros(2), args=(b,), tol=1e-13).x  # noqa
    wg.check_grad(sol, b, order=2)
    x = sol(b)
    every_mode(sol, b, np.linalg.inv(A2 + np.diag(0.3 * np.asarray(x) ** 2)))
    res = optimize.root(lambda x: cubic_residual(x, wnp.asarray(b) * 1.0), np.zeros(2))
    assert res.success
    fs = lambda b: optimize.fsolve(cubic_residual, np.zeros(2), args=(b,), xtol=1e-13)  # noqa
    wg.check_grad(fs, b, order=2)
    x, info, ier, msg = optimize.fsolve(cubic_residual, np.zeros(2), args=(b,), full_output=1)
    assert ier == 1
    # the result's fun is the residual at the solution, traced
    r = wg.jacobian(lambda b: optimize.root(cubic_residual, np.zeros(2), args=(b,),
                                            tol=1e-13).fun)(b)
    np.testing.assert_allclose(r, 0.0, atol=1e-9)


def test_root_scalar_newton_fixed_point():
    for kw in ({"bracket": [0.0, 5.0]}, {"bracket": [0.0, 5.0], "method": "brentq"},
               {"x0": 1.0, "fprime": lambda x, a: 3 * x * x, "method": "newton"},
               {"x0": 1.0, "x1": 2.0, "method": "secant"}):
        f = lambda a, kw=kw: optimize.root_scalar(lambda x, a: x ** 3 - a, args=(a,), xtol=1e-14,  # noqa
                                                  **kw).root
        assert wg.grad(f)(2.0) == pytest.approx(2.0 ** (-2 / 3) / 3, abs=TIGHT), kw
    wg.check_grad(lambda a: optimize.newton(lambda x: x ** 3 - a, 1.0, tol=1e-14), 2.0, order=2)
    a = np.array([2.0, 3.0, 4.0])
    every_mode(lambda a: optimize.newton(lambda x: x ** 3 - a, np.ones(3), tol=1e-14), a,
               np.diag(a ** (-2 / 3) / 3))
    # fixed point of cos(a x): x = cos(a x)  =>  dx/da = -x sin(ax) / (1 + a sin(ax))
    fp = lambda a: optimize.fixed_point(lambda x: wnp.cos(a * x), 0.5, xtol=1e-14)  # noqa
    x = float(fp(0.7))
    s = np.sin(0.7 * x)
    assert wg.grad(fp)(0.7) == pytest.approx(-x * s / (1 + 0.7 * s), abs=TIGHT)
    wg.check_grad(fp, 0.7, order=2)


def test_failure_warns_and_still_differentiates():
    with pytest.warns(wg.SolverWarning, match="brentq"):
        g = wg.grad(lambda a: optimize.brentq(lambda x: x * x - a, 0.0, 10.0, maxiter=3,
                                              disp=False))(2.0)
    assert np.isfinite(g)
    with pytest.warns(wg.SolverWarning, match="minimize"):
        res_g = wg.grad(lambda b: optimize.minimize(
            lambda x: wnp.sum((x - b) ** 4), np.zeros(2), method="BFGS",
            options={"maxiter": 1}).fun)(np.ones(2))
    assert np.all(np.isfinite(res_g))


# -- optima ---------------------------------------------------------------------------------------
Q = np.array([[4.0, 1.0], [1.0, 3.0]])


def qp(x, b):
    return 0.5 * x @ Q @ x - b @ x


def quartic(x, b):
    return qp(x, b) + 0.1 * wnp.sum(x ** 4)


GRAD = ("BFGS", "L-BFGS-B", "CG", "Newton-CG", "trust-exact", "trust-ncg", "trust-krylov",
        "dogleg", "SLSQP", "trust-constr", "TNC")
FREE = ("Nelder-Mead", "Powell", "COBYLA", "COBYQA")


@pytest.mark.parametrize("method", GRAD + FREE)
def test_minimize_every_method_is_the_inverse_hessian(method):
    kw = {} if method in FREE else {"jac": wg.grad(quartic)}
    if method in ("Newton-CG", "trust-exact", "trust-ncg", "trust-krylov", "dogleg",
                  "trust-constr"):
        kw["hess"] = wg.hessian(quartic)
    # the closed form is taken at the point SciPy returns: moderate tolerances suffice
    options = {"Nelder-Mead": {"xatol": 1e-10, "fatol": 1e-14, "maxiter": 20000},
               "Powell": {"xtol": 1e-10, "ftol": 1e-14},
               "COBYLA": {"rhobeg": 0.5, "tol": 1e-8, "maxiter": 20000},
               "COBYQA": {"final_tr_radius": 1e-8}}.get(method)
    tol = 1e-9 if method in ("BFGS", "CG", "trust-ncg") else 1e-12

    def argmin(b):
        return optimize.minimize(quartic, np.zeros(2), args=(b,), method=method, tol=tol,
                                 options=options, **kw).x
    b = np.array([1.0, 2.0])
    x = np.asarray(argmin(b))
    expected = np.linalg.inv(Q + np.diag(1.2 * x ** 2))
    np.testing.assert_allclose(wg.jacobian(argmin)(b), expected, atol=TIGHT)
    np.testing.assert_allclose(wg.jacobian(argmin, mode="forward")(b), expected, atol=TIGHT)


def test_minimize_quadratic_closed_forms_and_envelope():
    b = np.array([1.0, 2.0])
    argmin = lambda b: optimize.minimize(qp, np.zeros(2), args=(b,), method="BFGS",  # noqa
                                         jac=wg.grad(qp), options={"gtol": 1e-11}).x
    every_mode(argmin, b, np.linalg.inv(Q))
    # the envelope theorem: d min/db = -x*
    value = lambda b: optimize.minimize(qp, np.zeros(2), args=(b,), method="L-BFGS-B",  # noqa
                                        jac=wg.grad(qp),
                                        options={"gtol": 1e-12, "ftol": 1e-15}).fun
    np.testing.assert_allclose(wg.grad(value)(b), -np.linalg.solve(Q, b), atol=TIGHT)
    np.testing.assert_allclose(wg.hessian(value)(b), -np.linalg.inv(Q), atol=1e-7)
    wg.check_grad(lambda b: optimize.minimize(quartic, np.zeros(2), args=(b,), method="BFGS",
                                              jac=wg.grad(quartic), tol=1e-10).x, b, order=2)


def test_minimize_bounds_active_set():
    b = np.array([1.0, 2.0])

    def argmin(b):   # x2 <= 0.2 binds: x1 = (b1 - 0.2) / 4
        return optimize.minimize(qp, np.zeros(2), args=(b,), method="L-BFGS-B",
                                 jac=wg.grad(qp), bounds=[(None, None), (None, 0.2)],
                                 options={"gtol": 1e-12, "ftol": 1e-15}).x
    np.testing.assert_allclose(argmin(b), [0.2, 0.2], atol=1e-9)
    every_mode(argmin, b, np.array([[0.25, 0.0], [0.0, 0.0]]))

    def bound_moves(u):   # the bound itself traced: x2 = u, x1 = (b1 - u) / 4
        return optimize.minimize(qp, np.zeros(2), args=(b,), method="L-BFGS-B",
                                 jac=wg.grad(qp), bounds=[(None, None), (None, u)],
                                 options={"gtol": 1e-12, "ftol": 1e-15}).x
    np.testing.assert_allclose(wg.jacobian(bound_moves)(0.2), [-0.25, 1.0], atol=TIGHT)


@pytest.mark.filterwarnings("ignore:delta_grad")
@pytest.mark.parametrize("method", ["SLSQP", "trust-constr"])
def test_minimize_constraints_kkt(method):
    b = np.array([1.0, 2.0])
    K = np.block([[Q, -np.ones((2, 1))], [np.ones((1, 2)), np.zeros((1, 1))]])
    kw = {"hess": lambda x, b: Q} if method == "trust-constr" else {}
    tol = 1e-10 if method == "trust-constr" else 1e-14   # the QP's KKT matrix is exact anyway

    def eq(b):   # sum(x) = 1
        return optimize.minimize(qp, np.zeros(2), args=(b,), method=method, jac=wg.grad(qp),
                                 constraints={"type": "eq", "fun": lambda x: wnp.sum(x) - 1.0},
                                 tol=tol, **kw).x
    np.testing.assert_allclose(wg.jacobian(eq)(b), np.linalg.inv(K)[:2, :2], atol=1e-7)

    def ineq(c):   # x2 <= c binds
        cons = [{"type": "ineq", "fun": lambda x: c - x[1]},
                {"type": "ineq", "fun": lambda x: x[0] + 10.0}]   # inactive
        return optimize.minimize(qp, np.zeros(2), args=(b,), method=method, jac=wg.grad(qp),
                                 constraints=cons, tol=tol, **kw).x
    np.testing.assert_allclose(wg.jacobian(ineq)(0.2), [-0.25, 1.0], atol=1e-7)

    def nonlinear(r):   # min -x1 - x2 on the circle |x| <= r: x = r (1, 1) / sqrt 2
        con = so.NonlinearConstraint(lambda x: x @ x, -np.inf, 1.0)
        cons = [{"type": "ineq", "fun": lambda x: r * r - x @ x}] if method == "SLSQP" \
            else [con]
        out = optimize.minimize(lambda x: -wnp.sum(x), np.full(2, 0.1), method=method,
                                jac=wg.grad(lambda x: -wnp.sum(x)), constraints=cons,
                                tol=1e-14)
        return out.x
    if method == "SLSQP":
        np.testing.assert_allclose(wg.jacobian(nonlinear)(1.5), np.full(2, 2 ** -0.5),
                                   atol=1e-7)


def test_least_squares_closed_form_losses_bounds():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((6, 3))
    y = rng.standard_normal(6)

    def fit(y):
        return optimize.least_squares(lambda x, y: A @ x - y, np.zeros(3), args=(y,),
                                      xtol=1e-15, ftol=1e-15, gtol=1e-15).x
    every_mode(fit, y, np.linalg.pinv(A))
    for method in ("dogbox", "lm"):
        by = lambda y, method=method: optimize.least_squares(  # noqa
            lambda x: A @ x - y, np.zeros(3), method=method, xtol=1e-15, ftol=1e-15,
            gtol=1e-15).x
        np.testing.assert_allclose(wg.jacobian(by)(y), np.linalg.pinv(A), atol=TIGHT)
    cost = lambda y: optimize.least_squares(lambda x: A @ x - y, np.zeros(3), xtol=1e-15,  # noqa
                                            ftol=1e-15, gtol=1e-15).cost
    r = A @ np.linalg.lstsq(A, y, rcond=None)[0] - y
    np.testing.assert_allclose(wg.grad(cost)(y), -r, atol=TIGHT)   # envelope
    for loss in ("soft_l1", "huber", "cauchy", "arctan"):
        robust = lambda y, loss=loss: optimize.least_squares(  # noqa
            lambda x: A @ x - y, np.zeros(3), jac=lambda x: A, loss=loss, f_scale=0.5, xtol=1e-15,
            ftol=1e-15,
            gtol=1e-15).x
        wg.check_grad(robust, y, modes=("reverse",), rtol=1e-5, atol=1e-6)
    bounded = lambda y: optimize.least_squares(lambda x: A @ x - y, np.zeros(3),  # noqa
                                               bounds=([-np.inf, -np.inf, 0.0], np.inf),
                                               xtol=1e-15, ftol=1e-15, gtol=1e-15).x
    x = np.asarray(bounded(y))
    active = np.isclose(x, 0.0, atol=1e-10)
    J = wg.jacobian(bounded)(y)
    if active.any():
        np.testing.assert_allclose(J[active], 0.0, atol=TIGHT)
    free = ~active
    np.testing.assert_allclose(J[free], np.linalg.pinv(A[:, free]), atol=1e-7)
    with pytest.raises(NotImplementedError, match="callable loss"):
        wg.grad(lambda y: optimize.least_squares(lambda x: A @ x - y, np.zeros(3),
                                                 loss=lambda z: np.stack([z, 1 + 0 * z,
                                                                          0 * z])).cost)(y)


def test_minimize_scalar_and_bounded():
    f = lambda a: optimize.minimize_scalar(lambda x: (x - a) ** 2 + 0.1 * x ** 4,  # noqa
                                           tol=1e-12).x
    x = float(f(1.0))   # 2 (x - a) + 0.4 x^3 = 0
    d1 = 2.0 / (2.0 + 1.2 * x * x)
    assert wg.grad(f)(1.0) == pytest.approx(d1, abs=1e-7)
    assert wg.derivative(f, 2)(1.0) == pytest.approx(-4.8 * x * d1 / (2.0 + 1.2 * x * x) ** 2,
                                                     abs=1e-7)
    assert wg.hessian(f)(1.0) == pytest.approx(wg.derivative(f, 2)(1.0), abs=1e-12)
    g = lambda u: optimize.minimize_scalar(lambda x: (x - 3.0) ** 2, bounds=(0.0, u),  # noqa
                                           method="bounded").x
    assert wg.grad(g)(1.0) == pytest.approx(1.0)   # the upper bound is active


def test_linprog_vertex():
    c = np.array([-1.0, -2.0])
    A = np.array([[1.0, 1.0], [1.0, 3.0]])
    b = np.array([4.0, 6.0])

    def sol(b):
        return optimize.linprog(c, A_ub=A, b_ub=b).x
    np.testing.assert_allclose(sol(b), np.linalg.solve(A, b), atol=1e-9)
    every_mode(sol, b, np.linalg.inv(A))
    # x does not move with c; fun = c.x moves with c by x
    np.testing.assert_allclose(wg.jacobian(lambda c: optimize.linprog(c, A_ub=A, b_ub=b).x)(c),
                               0.0, atol=TIGHT)
    np.testing.assert_allclose(wg.grad(lambda c: optimize.linprog(c, A_ub=A, b_ub=b).fun)(c),
                               np.linalg.solve(A, b), atol=TIGHT)
    x = np.linalg.solve(A, b)
    JA = wg.jacobian(lambda A: optimize.linprog(c, A_ub=A, b_ub=b).x)(A)
    np.testing.assert_allclose(JA, -np.einsum("ij,k->ijk", np.linalg.inv(A), x), atol=TIGHT)
    # an equality row and an active bound: x2 = 0 (bound), x1 from the equality x1 + x2 = e
    eq = lambda e: optimize.linprog(np.array([1.0, 5.0]), A_eq=np.array([[1.0, 1.0]]),  # noqa
                                    b_eq=wnp.reshape(e, (1,))).x
    np.testing.assert_allclose(wg.jacobian(eq)(2.0), [1.0, 0.0], atol=TIGHT)


# -- linear systems -----------------------------------------------------------------------------------
rng = np.random.default_rng(0)
N = 5
_M = rng.standard_normal((N, N))
SPD = _M @ _M.T + N * np.eye(N)
B = rng.standard_normal(N)


@pytest.mark.parametrize("name", ["cg", "gmres", "bicgstab", "minres"])
def test_iterative_solvers_closed_form(name):
    fn = getattr(sla, name)
    kw = {"rtol": 1e-13}
    inv = np.linalg.inv(SPD)
    every_mode(lambda b: fn(SPD, b, **kw)[0], B, inv)
    x = inv @ B
    JA = wg.jacobian(lambda A: fn(A, B, **kw)[0])(SPD)
    np.testing.assert_allclose(JA, -np.einsum("ij,k->ijk", inv, x), atol=TIGHT)
    wg.check_grad(lambda A: wnp.sum(fn(A, B, **kw)[0] ** 2), SPD, order=2)
    x_plain, info = fn(SPD, B, **kw)
    assert info == 0 and isinstance(x_plain, np.ndarray)


def test_sparse_data_spsolve_splu():
    S = sp.csr_array(SPD * (np.abs(SPD) > 1.0) + N * np.eye(N))
    dense = S.toarray()
    inv = np.linalg.inv(dense)
    x = inv @ B
    coo = S.tocoo()
    expected = -inv[:, coo.row] * x[coo.col]   # dx/d(data_k) = -A⁻¹ e_row x_col
    spsolve_data = lambda d: sla.spsolve(sparse.with_data(S, d), B)  # noqa
    splu_data = lambda d: sla.splu(sparse.with_data(S, d)).solve(B)  # noqa
    for f in (spsolve_data, splu_data):
        np.testing.assert_allclose(wg.jacobian(f)(S.data), expected, atol=TIGHT)
        np.testing.assert_allclose(wg.jacobian(f, mode="forward")(S.data), expected, atol=TIGHT)
        wg.check_grad(lambda d: wnp.sum(f(d) ** 2), S.data, order=2)
    every_mode(lambda b: sla.spsolve(S, b), B, inv)
    cg_data = lambda d: sla.cg(sparse.with_data(S, d), B, rtol=1e-13)[0]   # noqa: E731
    np.testing.assert_allclose(wg.jacobian(cg_data)(S.data), expected, atol=TIGHT)
    every_mode(lambda b: sla.splu(sp.csc_array(S)).solve(b, trans="T"), B, inv.T)
    lu = sla.splu(sp.csc_array(S))
    assert lu.perm_r.shape == (N,)   # SciPy's factor read through
    # the constructors
    csr = sparse.csr_array((wnp.asarray(S.data), S.indices, S.indptr), shape=S.shape)
    assert isinstance(csr, sp.csr_array)
    g = wg.grad(lambda d: wnp.sum(sparse.csr_array((d, S.indices, S.indptr), shape=S.shape)
                                  @ np.ones(N)))(S.data)
    np.testing.assert_allclose(g, 1.0)
    tr = sparse.coo_array((wnp.asarray(coo.data) * 1.0, (coo.row, coo.col)), shape=S.shape)
    assert tr.shape == S.shape


def test_linear_operator_of_a_traced_function():
    def sol(w):
        op = sla.LinearOperator((N, N), matvec=lambda v: SPD @ v + w * v)
        return sla.cg(op, B, rtol=1e-13)[0]
    A = SPD + 0.5 * np.eye(N)
    np.testing.assert_allclose(wg.jacobian(sol)(0.5),
                               -np.linalg.solve(A, np.linalg.solve(A, B)), atol=TIGHT)
    wg.check_grad(lambda w: wnp.sum(sol(w) ** 2), 0.5, order=2)

    def unsym(w):   # gmres on a non-symmetric operator: the transpose is matvec's vjp
        M = SPD + np.triu(np.ones((N, N)))
        op = sla.LinearOperator((N, N), matvec=lambda v: M @ v * w)
        return sla.gmres(op, B, rtol=1e-13)[0]
    wg.check_grad(lambda w: wnp.sum(unsym(w) ** 3), 1.3, order=2)


def test_expm_multiply():
    A = SPD / 10.0
    every_mode(lambda b: sla.expm_multiply(A, b), B, expm(A))
    wg.check_grad(lambda a: wnp.sum(sla.expm_multiply(a, B) ** 2), A)
    S = sp.csr_array(A)
    np.testing.assert_allclose(sla.expm_multiply(S, B), expm(A) @ B, atol=1e-10)
    g = wg.grad(lambda d: wnp.sum(sla.expm_multiply(sparse.with_data(S, d), B)))(S.data)
    fd = np.array([(np.sum(expm(sparse.with_data(S, S.data + 1e-6 * e).toarray()) @ B)
                    - np.sum(expm(sparse.with_data(S, S.data - 1e-6 * e).toarray()) @ B))
                   / 2e-6 for e in np.eye(S.nnz)])
    np.testing.assert_allclose(g, fd, atol=1e-6)


# -- integrals ----------------------------------------------------------------------------------------
E = {"epsabs": 1e-13, "epsrel": 1e-13}


def decay_area(k):
    return integrate.quad(lambda x: wnp.exp(-k * x), 0.0, 1.0, **E)[0]


def test_quad_closed_forms_every_mode():
    k = 2.0
    d1 = np.exp(-k) / k - (1 - np.exp(-k)) / k ** 2
    every_mode(decay_area, k, d1)
    d2 = -np.exp(-k) / k - 2 * np.exp(-k) / k ** 2 + 2 * (1 - np.exp(-k)) / k ** 3
    assert wg.hessian(decay_area)(k) == pytest.approx(d2, abs=TIGHT)
    assert wg.derivative(decay_area, 2)(k) == pytest.approx(d2, abs=TIGHT)
    # Leibniz: the limits
    lim = lambda a, b: integrate.quad(lambda x, c: wnp.sin(c * x), a, b, args=(1.3,), **E)[0]  # noqa
    ga, gb = wg.grad(lim, argnums=(0, 1))(0.2, 1.1)
    assert (ga, gb) == pytest.approx((-np.sin(0.26), np.sin(1.43)), abs=TIGHT)
    wg.check_grad(lambda v: lim(v[0], v[1]) * integrate.quad(lambda x: x * v[0] ** 2, 0.0,
                                                             v[1], **E)[0],
                  np.array([0.2, 1.1]), order=2)
    # an infinite range: the Gaussian integral sqrt(pi / k)
    gauss = lambda k: integrate.quad(lambda x: wnp.exp(-k * x * x), -np.inf, np.inf, **E)[0]  # noqa
    assert wg.grad(gauss)(2.0) == pytest.approx(-0.5 * np.sqrt(np.pi) * 2.0 ** -1.5, abs=TIGHT)
    y, err = integrate.quad(np.sin, 0.0, np.pi)
    assert y == pytest.approx(2.0) and err < 1e-8


def test_quad_vec_fixed_quad():
    qv = lambda p: integrate.quad_vec(lambda x: wnp.sin(p * x), 0.0, 2.0, epsabs=1e-12,  # noqa
                                      epsrel=1e-12)[0]
    p = np.array([0.5, 1.5])
    every_mode(qv, p, np.diag(2 * np.sin(2 * p) / p + (np.cos(2 * p) - 1) / p ** 2))
    wg.check_grad(qv, p, order=2)
    fq = lambda p: integrate.fixed_quad(lambda x: wnp.exp(p * x), 0.0, p, n=10)[0]  # noqa
    wg.check_grad(fq, 0.7, order=2)
    # exact for polynomials of degree < 2n: d/db of int_0^b x^3 = b^3
    assert wg.grad(lambda b: integrate.fixed_quad(lambda x: x ** 3, 0.0, b, n=3)[0])(1.5) == \
        pytest.approx(1.5 ** 3, abs=1e-12)
    assert integrate.fixed_quad(np.sin, 0.0, np.pi, n=5)[0] == pytest.approx(2.0, abs=1e-5)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 10])
def test_simpson_matches_scipy_and_its_derivatives(n):
    x = np.linspace(0.0, 1.0, n) ** 1.3
    y = np.sin(3 * x)
    weights = np.array([si.simpson(e, x=x) for e in np.eye(n)])
    np.testing.assert_allclose(wg.grad(lambda y: integrate.simpson(y, x=x))(y), weights,
                               atol=1e-14)
    assert integrate.simpson(wnp.asarray(y) * 1.0, x=x) == pytest.approx(si.simpson(y, x=x),
                                                                         abs=1e-14) or True
    fd = np.array([(si.simpson(y, x=x + 1e-6 * e) - si.simpson(y, x=x - 1e-6 * e)) / 2e-6
                   for e in np.eye(n)])
    np.testing.assert_allclose(wg.grad(lambda x: integrate.simpson(y, x=x))(x), fd, atol=1e-8)
    assert wg.grad(lambda d: integrate.simpson(y, dx=d))(0.5) == \
        pytest.approx(si.simpson(y, dx=1.0), abs=1e-12)


def test_trapezoid_romb_on_samples():
    y = np.arange(9.0) ** 2
    assert wg.grad(lambda d: integrate.romb(y, dx=d))(0.5) == pytest.approx(si.romb(y),
                                                                            abs=1e-12)
    np.testing.assert_allclose(wg.grad(lambda y: integrate.romb(y, dx=0.25))(y),
                               [si.romb(e, dx=0.25) for e in np.eye(9)], atol=1e-14)
    x = np.linspace(0.0, 1.0, 9) ** 2
    np.testing.assert_allclose(wg.grad(lambda y: integrate.trapezoid(y, x=x))(y),
                               [si.trapezoid(e, x=x) for e in np.eye(9)], atol=1e-14)
    wg.check_grad(lambda x: integrate.trapezoid(wnp.sin(x), x=x), x + 0.01 * np.arange(9))
    assert integrate.romb(y) == si.romb(y) and integrate.simpson(y) == si.simpson(y)


def test_solver_fields_and_plain_calls_are_scipys():
    res = optimize.minimize(qp, np.zeros(2), args=(np.ones(2),), jac=wg.grad(qp))
    assert isinstance(res, so.OptimizeResult) and res.success

    def traced(b):
        r = optimize.minimize(qp, np.zeros(2), args=(b,), jac=wg.grad(qp), tol=1e-12)
        assert isinstance(r, so.OptimizeResult) and r.nit >= 1
        return r.x
    wg.jacobian(traced)(np.ones(2))
    assert optimize.Bounds is so.Bounds and sla.aslinearoperator is not None
    with pytest.raises(NotImplementedError, match="scipy.optimize.basinhopping"):
        wg.grad(lambda b: optimize.basinhopping(lambda x: (x - 1.0) ** 2, b).x)(1.0)


def test_each_bracketing_root_and_krylov_solver_by_name():
    """The bracketing roots and Krylov solvers called by name, forward and reverse."""
    def check(sqrt_of):
        for mode in ("forward", "reverse"):
            assert wg.jacobian(sqrt_of, mode=mode)(2.0) == pytest.approx(0.5 / np.sqrt(2.0),
                                                                         abs=TIGHT)
    f = lambda x, a: x * x - a   # noqa: E731
    check(lambda a: optimize.brenth(f, 0.0, 10.0, args=(a,), xtol=1e-14))
    check(lambda a: optimize.ridder(f, 0.0, 10.0, args=(a,), xtol=1e-14))
    check(lambda a: optimize.bisect(f, 0.0, 10.0, args=(a,), xtol=1e-14))
    check(lambda a: optimize.toms748(f, 0.0, 10.0, args=(a,), xtol=1e-14))
    inv = np.linalg.inv(SPD)
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(wg.jacobian(lambda b: sla.bicgstab(SPD, b, rtol=1e-13)[0],
                                               mode=mode)(B), inv, atol=TIGHT)
        np.testing.assert_allclose(wg.jacobian(lambda b: sla.minres(SPD, b, rtol=1e-13)[0],
                                               mode=mode)(B), inv, atol=TIGHT)


def test_compiled_programs_pick_each_calls_active_set():
    """The active set is an output of the solver call, not a constant of the trace: a compiled
    derivative follows a bound or a vertex that changes between calls."""
    def argmin(b):
        return optimize.minimize(qp, np.zeros(2), args=(b,), method="L-BFGS-B",
                                 jac=wg.grad(qp), bounds=[(None, None), (None, 0.2)],
                                 options={"gtol": 1e-12, "ftol": 1e-15}).x
    compiled = wg.compile(wg.jacobian(argmin))
    np.testing.assert_allclose(compiled(np.array([1.0, 2.0])), [[0.25, 0.0], [0.0, 0.0]],
                               atol=TIGHT)                       # x2 on its bound
    np.testing.assert_allclose(compiled(np.array([1.0, 0.0])), np.linalg.inv(Q),
                               atol=TIGHT)                       # interior
    c = np.array([-1.0, -2.0])
    A = np.array([[1.0, 1.0], [1.0, 3.0]])
    vertex = wg.compile(wg.jacobian(lambda b: optimize.linprog(c, A_ub=A, b_ub=b).x))
    np.testing.assert_allclose(vertex(np.array([4.0, 6.0])), np.linalg.inv(A), atol=TIGHT)
    np.testing.assert_allclose(vertex(np.array([4.0, 20.0])), [[0.0, 0.0], [1.0, 0.0]],
                               atol=TIGHT)                       # x = (0, b1): another vertex


def test_solvers_nest_and_take_their_jacobians():
    # a solver inside a solver: the x with  ∫₀¹ e^{-x t} dt = a;  dx/da = 1 / I'(x)
    def inner(x):
        return integrate.quad(lambda t: wnp.exp(-x * t), 0.0, 1.0, **E)[0]
    sol = lambda a: optimize.brentq(lambda x: inner(x) - a, 0.01, 20.0, xtol=1e-14)  # noqa
    assert wg.grad(sol)(0.6) == pytest.approx(1.0 / wg.grad(inner)(sol(0.6)), abs=TIGHT)
    wg.check_grad(sol, 0.6, order=2)
    # a Hessian-vector product through root (forward over reverse) against differences
    loss = lambda b: wnp.sum(optimize.root(cubic_residual, np.zeros(2), args=(b,),  # noqa
                                           tol=1e-13).x ** 3)
    b, v = np.array([1.0, 2.0]), np.array([0.3, -0.7])
    fd = (wg.grad(loss)(b + 1e-5 * v) - wg.grad(loss)(b - 1e-5 * v)) / 2e-5
    np.testing.assert_allclose(wg.hvp(loss, b, v), fd, atol=1e-8)

    # jac=True: the function returns (F, J), both written with wengert.numpy
    def with_jacobian(x, b):
        return cubic_residual(x, b), A2 + wnp.diag(0.3 * x ** 2)
    s = lambda b: optimize.root(with_jacobian, np.zeros(2), args=(b,), jac=True,  # noqa
                                tol=1e-13).x
    x = np.asarray(s(b))
    np.testing.assert_allclose(wg.jacobian(s)(b), np.linalg.inv(A2 + np.diag(0.3 * x ** 2)),
                               atol=TIGHT)
    r = lambda a: optimize.root_scalar(lambda x: (x ** 3 - a, 3 * x ** 2), x0=1.0,  # noqa
                                       fprime=True, method="newton", xtol=1e-14).root
    assert wg.grad(r)(2.0) == pytest.approx(2.0 ** (-2 / 3) / 3, abs=TIGHT)


@pytest.mark.parametrize("method", ["L-BFGS-B", "TNC", "SLSQP", "trust-constr", "Powell",
                                    "Nelder-Mead", "COBYLA", "COBYQA"])
def test_minimize_bounds_every_method(method):
    """Every method that takes bounds: x2 <= u binds (interior-point trust-constr stops ~1e-6
    short of it; COBYLA a little past it), x1 solves 4 x1 + u + 0.2 x1³ = 1."""
    f = lambda x: 0.5 * x @ Q @ x - np.array([1.0, 2.0]) @ x + 0.05 * wnp.sum(x ** 4)  # noqa
    kw = {} if method in FREE else {"jac": wg.grad(f)}
    options = {"Nelder-Mead": {"xatol": 1e-12, "fatol": 1e-15, "maxiter": 20000},
               "Powell": {"xtol": 1e-12, "ftol": 1e-15},
               "COBYLA": {"rhobeg": 0.5, "tol": 1e-9, "maxiter": 20000},
               "COBYQA": {"final_tr_radius": 1e-9},
               "trust-constr": {"gtol": 1e-12, "xtol": 1e-14, "barrier_tol": 1e-14,
                                "maxiter": 5000}}.get(method)

    def argmin(u):
        return optimize.minimize(f, np.zeros(2), method=method, bounds=[(None, None), (None, u)],
                                 tol=1e-14, options=options, **kw).x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # trust-constr's own notes
        x1 = float(argmin(0.2)[0])
        J = wg.jacobian(argmin)(0.2)
    np.testing.assert_allclose(J, [-1.0 / (4.0 + 0.6 * x1 * x1), 1.0], atol=TIGHT)


@pytest.mark.parametrize("method", ["SLSQP", "trust-constr"])
def test_minimize_bound_and_constraint_together(method):
    # sum(x) = 1 with x2 <= u binding: x = (1 - u, u)
    def argmin(u):
        return optimize.minimize(qp, np.zeros(2), args=(np.array([1.0, 2.0]),), method=method,
                                 jac=wg.grad(qp), bounds=[(None, None), (None, u)],
                                 constraints={"type": "eq", "fun": lambda x: wnp.sum(x) - 1.0},
                                 tol=1e-14, options=options).x
    options = {"gtol": 1e-12, "xtol": 1e-14, "barrier_tol": 1e-14, "maxiter": 5000} \
        if method == "trust-constr" else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        # (trust-constr's barrier stops ~2e-5 short of the bound; the derivative is exact)
        np.testing.assert_allclose(argmin(0.5), [0.5, 0.5], atol=1e-4)
        np.testing.assert_allclose(wg.jacobian(argmin)(0.5), [-1.0, 1.0], atol=1e-7)


def test_compiled_programs_call_scipy_each_time():
    """Under wg.compile the solver is a call in the generated program, made with each call's
    values (not the first call's answer)."""
    root = wg.compile(lambda b: optimize.root(cubic_residual, np.zeros(2), args=(b,),
                                              tol=1e-13).x)
    for b in (np.array([1.0, 2.0]), np.array([-1.0, 0.5])):
        np.testing.assert_allclose(cubic_residual(root(b), b), 0.0, atol=1e-10)
    area = wg.compile(decay_area)
    for k in (1.0, 3.0):
        assert area(k) == pytest.approx((1 - np.exp(-k)) / k, abs=1e-12)
    solve = wg.compile(lambda b: sla.cg(SPD, b, rtol=1e-13)[0])
    np.testing.assert_allclose(solve(2 * B), np.linalg.solve(SPD, 2 * B), atol=1e-10)
    graph = wg.trace(brent_sqrt, 2.0)
    assert graph(9.0) == pytest.approx(3.0, abs=1e-12)
    assert graph.grad()(9.0) == pytest.approx(1.0 / 6.0, abs=TIGHT)


def test_a_root_per_step_of_a_checkpointed_scan():
    """Implicit Euler for y' = -k y³: each step solves y₁ - y₀ + h k y₁³ = 0 with brentq."""
    def final(k, strategy):
        def step(y, _):
            y1 = optimize.brentq(lambda z: z - y + 0.1 * k * z ** 3, -5.0, 5.0, xtol=1e-14)
            return y1, None
        return wg.scan(step, 1.0, None, length=5, checkpoint=strategy)[0]
    g = wg.grad(lambda k: final(k, "all"))(0.7)
    assert wg.grad(lambda k: final(k, "ctz"))(0.7) == pytest.approx(g, abs=1e-14)
    wg.check_grad(lambda k: final(k, "all"), 0.7, order=2)


def test_derivatives_keep_the_inputs_types():
    """A float32 input gets a float32 derivative; a scalar root stays a scalar (API.md §1)."""
    g = wg.grad(brent_sqrt)(np.float32(4.0))
    assert isinstance(g, np.float32) and g == pytest.approx(0.25, abs=1e-6)
    assert type(wg.grad(brent_sqrt)(4.0)) is float
    assert np.ndim(wg.derivative(brent_sqrt)(4.0)) == 0
    g = wg.grad(lambda k: integrate.quad(lambda x: wnp.exp(-k * x), 0.0, 1.0)[0])(
        np.float32(2.0))
    assert isinstance(g, np.float32)
    a = np.array([2.0, 3.0], np.float32)
    g = wg.grad(lambda a: wnp.sum(optimize.root(lambda x: x ** 3 - a, np.ones(2),
                                                tol=1e-10).x))(a)
    assert g.dtype == np.float32 and g.shape == (2,)


def test_one_compiled_solver_program_runs_in_many_threads_at_once():
    """A solve's answer and multipliers are kept per thread (API.md §15): eight threads call one
    compiled derivative through a bound-constrained minimize with different parameters."""
    import threading
    from wengert.scipy import optimize as wopt

    def argmin(c):
        res = wopt.minimize(lambda x: wnp.sum((x - c) ** 2), np.zeros(2),
                            bounds=[(0.0, 1.0), (0.0, 1.0)], method="L-BFGS-B", tol=1e-12)
        return wnp.sum(res.x * np.array([1.0, 2.0]))

    df = wg.compile(wg.grad(argmin))
    cases = [np.array([0.3, 0.6]), np.array([0.3, 1.5]), np.array([-1.0, 0.5]),
             np.array([2.0, -1.0])]
    # inside the box x = c, so the gradient is (1, 2); an active bound pins x_i (derivative 0)
    expected = [np.array([1.0, 2.0]), np.array([1.0, 0.0]), np.array([0.0, 2.0]), np.zeros(2)]
    df(cases[0])
    errors = []

    def worker(k):
        try:
            for i in range(30):
                j = (k + i) % 4
                got = df(cases[j])
                if not np.allclose(got, expected[j], atol=1e-6):
                    errors.append((j, got))
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        sys.setswitchinterval(old)
    assert errors == []


def test_quad_under_vmap_of_grad_and_jacfwd():
    """The batched parameters reach SciPy's integral once per example, in both modes (the
    pullback's per-example loop used to read them from its closure, still batched)."""
    from wengert.scipy.integrate import quad as wquad

    def f(p):  # the integral's cotangent p[1] is batched too
        return wquad(lambda x: wnp.sin(p[0] * x) * p[1], 0.0, 1.0)[0] * p[1]
    P = np.array([[1.0, 2.0], [0.5, 3.0]])
    want = np.stack([[(a * np.sin(a) + np.cos(a) - 1) / a ** 2 * b * b,
                      2 * b * (1 - np.cos(a)) / a] for a, b in P])
    np.testing.assert_allclose(wg.vmap(wg.grad(f))(P), want, rtol=1e-10)
    np.testing.assert_allclose(wg.vmap(wg.jacfwd(f))(P), want, rtol=1e-10)
