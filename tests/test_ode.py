"""wengert.scipy.integrate: solve_ivp and odeint differentiated, every mode and sensitivity
method, against closed forms (1e-8), central finite differences (1e-6) and, for the stiff
Robertson problem, forward sensitivities written out by hand and solved by SciPy (1e-5)."""

import numpy as np
import pytest
import scipy.integrate as si

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.integrate import odeint, solve_ivp

TOL = dict(rtol=1e-11, atol=1e-12)
ADJOINTS = ("forward", "backsolve", "interpolate")


def decay(k, y0, t1, *, method="RK45", adjoint="auto", t0=0.0, t_eval=False):
    """y' = -k y: y(t1) = y0 exp(-k (t1 - t0))."""
    sol = solve_ivp(lambda t, y: -k * y, (t0, t1), wnp.reshape(y0, (1,)), method=method,
                    adjoint=adjoint, t_eval=wnp.reshape(t1, (1,)) if t_eval else None, **TOL)
    return sol.y[0, -1]


def decay_exact(k, y0, t1, t0=0.0):
    return y0 * wnp.exp(-k * (t1 - t0))


# -- closed forms, every method and adjoint, every mode -----------------------------------------
@pytest.mark.parametrize("method,adjoint", [
    ("RK45", "forward"), ("RK45", "backsolve"), ("RK45", "interpolate"),
    ("RK45", "checkpoint"), pytest.param("RK23", "checkpoint", marks=pytest.mark.slow),
    ("RK45", "discrete"), ("DOP853", "discrete"), ("DOP853", "interpolate"),
    ("DOP853", "checkpoint"), ("Radau", "interpolate"), ("Radau", "backsolve"),
    ("BDF", "interpolate"), ("BDF", "forward"), ("BDF", "discrete"), ("LSODA", "interpolate"),
    ("LSODA", "auto")])
def test_decay_gradient_equals_closed_form(method, adjoint):
    args = (0.7, 1.3, 1.9, 0.2)
    tol = 1e-8 if method != "RK23" else 1e-6  # RK23's own steps: an order-3 scheme
    got = wg.grad(lambda k, y0, t1, t0: decay(k, y0, t1, method=method, adjoint=adjoint,
                                              t0=t0), argnums=(0, 1, 2, 3))(*args)
    want = wg.grad(decay_exact, argnums=(0, 1, 2, 3))(*args)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_decay_forward_mode_and_second_derivatives():
    d = wg.derivative(lambda k: decay(k, 1.3, 1.9))(0.7)
    assert abs(d - (-1.9 * 1.3 * np.exp(-0.7 * 1.9))) < 1e-8
    d2 = wg.derivative(lambda k: decay(k, 1.3, 1.9), order=2)(0.7)
    assert abs(d2 - 1.9 ** 2 * 1.3 * np.exp(-0.7 * 1.9)) < 1e-8
    for adjoint in ADJOINTS:  # forward over reverse through each pullback
        H = wg.hessian(lambda p: decay(p[0], p[1], p[2], adjoint=adjoint))(
            np.array([0.7, 1.3, 1.9]))
        Hx = wg.hessian(lambda p: decay_exact(p[0], p[1], p[2]))(np.array([0.7, 1.3, 1.9]))
        np.testing.assert_allclose(H, Hx, rtol=1e-8, atol=1e-8)


def oscillator(w, y0, T, method="DOP853", adjoint="auto"):
    """y'' = -w² y as a first-order system."""
    sol = solve_ivp(lambda t, y: wnp.stack([y[1], -w ** 2 * y[0]]), (0.0, T), y0,
                    method=method, adjoint=adjoint, **TOL)
    return sol.y[:, -1]


def oscillator_exact(w, y0, T):
    return wnp.stack([y0[0] * wnp.cos(w * T) + y0[1] / w * wnp.sin(w * T),
                      -y0[0] * w * wnp.sin(w * T) + y0[1] * wnp.cos(w * T)])


@pytest.mark.parametrize("adjoint", ADJOINTS + ("checkpoint", "discrete"))
def test_harmonic_oscillator_jacobians_equal_closed_form(adjoint):
    w, y0, T = 1.3, np.array([0.7, -0.4]), 2.1
    for mode in ("forward", "reverse") if adjoint != "discrete" else ("reverse",):
        got = wg.jacobian(lambda w, y0, T: oscillator(w, y0, T, adjoint=adjoint),
                          argnums=(0, 1, 2), mode=mode)(w, y0, T)
        want = wg.jacobian(oscillator_exact, argnums=(0, 1, 2))(w, y0, T)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=1e-8, atol=1e-8)


def test_oscillator_hvp_equals_closed_form():
    f = lambda p: wnp.sum(oscillator(p[0], p[1:3], p[3], adjoint="interpolate") ** 2)  # noqa
    fx = lambda p: wnp.sum(oscillator_exact(p[0], p[1:3], p[3]) ** 2)  # noqa
    p, v = np.array([1.3, 0.7, -0.4, 2.1]), np.array([0.3, -1.0, 0.5, 0.2])
    np.testing.assert_allclose(wg.hvp(f, p, v), wg.hvp(fx, p, v), rtol=1e-7, atol=1e-8)


# -- odeint -------------------------------------------------------------------------------------
def test_odeint_jacobians_in_every_input_equal_closed_form():
    t = np.array([0.0, 0.5, 1.0, 2.0])
    f = lambda y0, k, t: odeint(lambda y, s, k: -k * y, y0, t, args=(k,), rtol=1e-12,  # noqa
                                atol=1e-12)[:, 0]
    Y = 2.0 * np.exp(-0.3 * t)
    Jk = wg.jacobian(lambda k: f(np.array([2.0]), k, t))(0.3)
    np.testing.assert_allclose(Jk, -t * Y, rtol=1e-8, atol=1e-9)
    Jt = wg.jacobian(lambda t: f(np.array([2.0]), 0.3, t), mode="reverse")(t)
    want = np.diag(-0.3 * Y)
    want[1:, 0] = 0.3 * Y[1:]   # moving t0 later shifts every later value up
    want[0, 0] = 0.0            # row 0 is y0 itself
    np.testing.assert_allclose(Jt, want, rtol=1e-8, atol=1e-9)
    Jt_fwd = wg.jacobian(lambda t: f(np.array([2.0]), 0.3, t), mode="forward")(t)
    np.testing.assert_allclose(Jt_fwd, want, rtol=1e-8, atol=1e-9)
    Jy = wg.jacobian(lambda y0: f(y0, 0.3, t))(np.array([2.0]))
    np.testing.assert_allclose(Jy[:, 0], Y / 2.0, rtol=1e-8)


def test_odeint_plain_call_is_scipys():
    t = np.linspace(0, 1, 5)
    a = odeint(lambda y, t: -y, [1.0, 2.0], t)
    b = si.odeint(lambda y, t: -y, [1.0, 2.0], t)
    np.testing.assert_allclose(a, b, rtol=1e-6)
    y, info = odeint(lambda y, t: -y, [1.0], t, full_output=True)
    assert "nst" in info


# -- finite differences: closures, args, times, t_eval ----------------------------------------
def lotka(p, c, adjoint="auto", method="RK45"):
    a, b = p[0], p[1]
    te = wnp.stack([0.5 * c, c, 1.7])
    sol = solve_ivp(lambda t, y, b: wnp.stack([a * y[0] - b * y[0] * y[1],
                                               -y[1] + 0.5 * y[0] * y[1] + 0.1 * wnp.sin(t)]),
                    (0.1, 2.0), np.array([1.0, 0.5]), t_eval=te, args=(b,), method=method,
                    adjoint=adjoint, **TOL)
    return wnp.sum(sol.y ** 2) + wnp.sum(sol.t)


@pytest.mark.parametrize("adjoint", ADJOINTS + ("checkpoint", "discrete"))
def test_closure_args_and_t_eval_match_finite_differences(adjoint):
    modes = ("reverse",) if adjoint == "discrete" else ("forward", "reverse")
    wg.check_grad(lambda p, c: lotka(p, c, adjoint), np.array([1.1, 0.4]), 1.2,
                  rtol=1e-6, atol=1e-8, modes=modes)


@pytest.mark.slow
def test_second_order_finite_differences_through_every_pullback():
    for adjoint in ADJOINTS:
        wg.check_grad(lambda p: lotka(p, 1.2, adjoint), np.array([1.1, 0.4]), order=2,
                      rtol=1e-6, atol=1e-7)


def test_t_eval_none_differentiates_the_endpoints():
    def f(t0, t1, k):
        sol = solve_ivp(lambda t, y: -k * y * (1 + 0.1 * wnp.cos(t)), (t0, t1),
                        np.array([1.5]), **TOL)
        assert sol.t.shape == sol.y.shape[1:]
        return wnp.sum(sol.y[0] * 0.0) + sol.y[0, -1] + 0.1 * sol.t[-1]
    wg.check_grad(f, 0.2, 1.7, 0.8, rtol=1e-6, atol=1e-8)


def test_backwards_in_time():
    f = lambda k: solve_ivp(lambda t, y: -k * y, (2.0, 0.5), np.array([1.0]),  # noqa
                            **TOL).y[0, -1]
    assert abs(wg.grad(f)(0.4) - 1.5 * np.exp(0.4 * 1.5)) < 1e-8


def test_closed_over_values_of_several_transforms():
    """A closure over a value of an outer jvp inside a grad: each engine gets its own."""
    def inner(k, c):
        return solve_ivp(lambda t, y: -k * c * y, (0.0, 1.0), np.array([1.0]),
                         **TOL).y[0, -1]
    # d/dc of d/dk exp(-k c) = d/dc (-c exp(-kc)) = -exp(-kc) + kc exp(-kc)
    got = wg.derivative(lambda c: wg.grad(inner)(0.5, c))(0.8)
    want = (-1 + 0.4) * np.exp(-0.4)
    assert abs(got - want) < 1e-8


# -- checkpoint schedules --------------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["all", "ctz", "binomial"])
def test_checkpoint_schedules_agree(schedule):
    def f(p):
        return wnp.sum(solve_ivp(lambda t, y: wnp.stack([y[1], -p[0] * wnp.sin(y[0])]),
                                 (0.0, 3.0), p[1:], adjoint="checkpoint", schedule=schedule,
                                 snapshots=3 if schedule == "binomial" else None,
                                 rtol=1e-8, atol=1e-10).y[:, -1])
    # the derivative of the discrete solution: finite differences of the same steps agree
    wg.check_grad(f, np.array([2.0, 0.5, 0.1]), rtol=1e-6, atol=1e-7)


# -- the stiff Robertson problem ---------------------------------------------------------------
K = np.array([0.04, 3e7, 1e4])


def robertson_rhs(t, y, k):
    return wnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                      k[0] * y[0] - k[2] * y[1] * y[2] - k[1] * y[1] ** 2,
                      k[1] * y[1] ** 2])


def robertson_sensitivities(k, T):
    """dy(T)/dk by forward sensitivities written out by hand (no wengert), SciPy's Radau."""
    def rhs(t, z):
        y, S = z[:3], z[3:].reshape(3, 3)
        y1, y2, y3 = y
        f = [-k[0] * y1 + k[2] * y2 * y3, k[0] * y1 - k[2] * y2 * y3 - k[1] * y2 ** 2,
             k[1] * y2 ** 2]
        Jy = np.array([[-k[0], k[2] * y3, k[2] * y2],
                       [k[0], -k[2] * y3 - 2 * k[1] * y2, -k[2] * y2],
                       [0.0, 2 * k[1] * y2, 0.0]])
        Jk = np.array([[-y1, 0.0, y2 * y3], [y1, -y2 ** 2, -y2 * y3], [0.0, y2 ** 2, 0.0]])
        return np.concatenate([f, (Jy @ S + Jk).ravel()])
    z0 = np.concatenate([[1.0, 0.0, 0.0], np.zeros(9)])
    sol = si.solve_ivp(rhs, (0.0, T), z0, method="Radau", rtol=1e-12, atol=1e-16)
    return sol.y[3:, -1].reshape(3, 3)


@pytest.mark.parametrize("method,adjoint,mode", [
    ("BDF", "interpolate", "reverse"), ("BDF", "discrete", "reverse"),
    pytest.param("LSODA", "auto", "reverse", marks=pytest.mark.slow),
    pytest.param("Radau", "interpolate", "reverse", marks=pytest.mark.slow),
    pytest.param("Radau", "forward", "forward", marks=pytest.mark.slow)])
def test_robertson_sensitivities_match_hand_written_forward_sensitivities(method, adjoint, mode):
    """(backsolve is left out: integrating a stiff state backwards is unstable, which is why
    "auto" picks "interpolate" for stiff methods.)"""
    T = 4.0
    f = lambda k: solve_ivp(robertson_rhs, (0.0, T), np.array([1.0, 0.0, 0.0]),  # noqa
                            method=method, args=(k,), adjoint=adjoint, rtol=1e-10,
                            atol=1e-14).y[:, -1]
    J = wg.jacobian(f, mode=mode)(K)
    ref = robertson_sensitivities(K, T)
    # each sensitivity scaled by its parameter (k2 and k3 differ from k1 by 1e9); the issue
    # asks 1e-5, these reach 1e-10 (interpolate on Radau 1e-13): 1e-7 keeps that margin
    np.testing.assert_allclose(J * K, ref * K, rtol=1e-7, atol=1e-7 * np.abs(ref * K).max())


# -- vmap, compile, pickling of results ------------------------------------------------------
def test_vmap_of_values_and_gradients():
    ks = np.array([0.1, 0.2, 0.3])
    v = wg.vmap(lambda k: decay(k, 2.0, 1.5, t_eval=True))(ks)
    np.testing.assert_allclose(v, 2.0 * np.exp(-1.5 * ks), rtol=1e-9)
    g = wg.vmap(wg.grad(lambda k: decay(k, 2.0, 1.5, t_eval=True)))(ks)
    np.testing.assert_allclose(g, -3.0 * np.exp(-1.5 * ks), rtol=1e-8)
    J = wg.vmap(wg.jacobian(lambda y0: odeint(lambda y, t: -0.5 * y, y0, [0.0, 1.0],
                                              rtol=1e-12, atol=1e-12)[-1]))(np.ones((2, 3)))
    np.testing.assert_allclose(J, np.broadcast_to(np.exp(-0.5) * np.eye(3), (2, 3, 3)),
                               rtol=1e-9)
    with pytest.raises(ValueError, match="t_eval"):
        wg.vmap(lambda k: decay(k, 2.0, 1.5))(ks)


def test_compile_keeps_the_scipy_call():
    t = np.array([0.0, 1.0, 2.0])
    f = lambda k: odeint(lambda y, t: -k * y, np.array([2.0]), t, rtol=1e-12,  # noqa
                         atol=1e-12)[-1, 0]
    cf, cg = wg.compile(f), wg.compile(wg.grad(f))
    for k in (0.3, 0.5):
        assert abs(cf(k) - 2.0 * np.exp(-2 * k)) < 1e-9
        assert abs(cg(k) + 4.0 * np.exp(-2 * k)) < 1e-8
    g = wg.trace(f, 0.3)
    assert any(n.kind == "op" and n.prim.name == "ode_solve" for n in g.nodes)
    h = wg.compile(lambda k: solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0]),
                                       t_eval=np.array([0.5, 1.0]), **TOL).y[0, -1])
    assert abs(h(0.4) - np.exp(-0.4)) < 1e-9 and abs(h(0.9) - np.exp(-0.9)) < 1e-9


def test_compile_without_t_eval_is_refused():
    f = wg.compile(lambda k: solve_ivp(lambda t, y: -k * y, (0.0, 1.0),
                                       np.array([1.0])).y[0, -1])
    with pytest.raises(ValueError, match="t_eval"):
        f(0.3)


# -- SciPy's structure, failures, bad input ------------------------------------------------------
def test_result_keeps_scipys_structure():
    k = 0.5
    sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0, 2.0]), dense_output=True,
                    t_eval=np.linspace(0, 1, 4))
    ref = si.solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0, 2.0]),
                       dense_output=True, t_eval=np.linspace(0, 1, 4))
    assert sol.keys() == ref.keys()
    np.testing.assert_allclose(sol.y, ref.y)

    def f(k):
        s = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0, 2.0]), dense_output=True,
                      t_eval=np.linspace(0, 1, 4))
        assert s.y.shape == (2, 4) and s.success and s.status == 0 and s.sol is not None
        np.testing.assert_allclose(wg.core.plain(s.y), ref.y, rtol=1e-12)
        return s.y[1, -1]
    wg.grad(f)(0.5)


def test_events_time_and_state_by_the_implicit_function_theorem():
    def hit(v, h):
        ev = lambda t, y: y[0]  # noqa: E731
        ev.terminal, ev.direction = True, -1
        sol = solve_ivp(lambda t, y: wnp.stack([y[1], -9.81 + 0.0 * y[0]]), (0.0, 10.0),
                        wnp.stack([h, v]), events=ev, **TOL)
        return sol.t_events[0][0] + sol.y_events[0][0][1] + sol.t[-1] + sol.y[1, -1]

    def exact(v, h):
        te = (v + wnp.sqrt(v ** 2 + 2 * 9.81 * h)) / 9.81
        return 2 * te + 2 * (v - 9.81 * te)
    g = wg.grad(hit, argnums=(0, 1))(3.0, 2.0)
    np.testing.assert_allclose(g, wg.grad(exact, argnums=(0, 1))(3.0, 2.0), rtol=1e-8)
    with pytest.raises(NotImplementedError, match="event"):
        wg.hessian(lambda v: hit(v, 2.0))(3.0)


def test_failure_warns_and_differentiates_where_scipy_stopped():
    f = lambda k: solve_ivp(lambda t, y: k * y ** 2, (0.0, 2.0),  # noqa: E731
                            np.array([1.0])).y[0, -1]
    with pytest.warns(wg.SolverWarning, match="SciPy returned"):
        g = wg.grad(f)(1.0)
    assert np.isfinite(g)


def test_bad_input_says_what_to_do():
    rhs = lambda t, y: -y  # noqa: E731
    with pytest.raises(ValueError, match="explicit Runge-Kutta"):
        wg.grad(lambda k: solve_ivp(lambda t, y: -k * y, (0, 1), np.array([1.0]),
                                    method="Radau", adjoint="checkpoint").y[0, -1])(1.0)
    with pytest.raises(ValueError, match="adjoint="):
        solve_ivp(rhs, (0, 1), np.array([1.0]), adjoint="magic")
    with pytest.raises(ValueError, match="1-dimensional"):
        solve_ivp(rhs, (0, 1), np.ones((2, 2)))
    with pytest.raises(ValueError, match="method="):
        solve_ivp(rhs, (0, 1), np.array([1.0]), method="Euler")
    with pytest.raises(ValueError, match="wnp.where"):
        wg.grad(lambda k: solve_ivp(lambda t, y: -k * y if y[0] > 0.5 else -2 * k * y,
                                    (0.0, 2.0), np.array([1.0])).y[0, -1])(1.0)


def test_sparse_rhs_gets_a_sparse_jacobian():
    """A discretised heat equation: BDF is given wengert's sparse Jacobian."""
    n = 40

    def f(kappa):
        def rhs(t, u):
            lap = wnp.concatenate([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2],
                                   u[-2:-1] - 2 * u[-1:]])
            return kappa * lap * (n + 1) ** 2
        u0 = np.sin(np.pi * np.linspace(0, 1, n + 2)[1:-1])
        return wnp.sum(solve_ivp(rhs, (0.0, 0.05), u0, method="BDF", rtol=1e-9,
                                 atol=1e-12).y[:, -1])
    eps = 1e-6
    fd = (f(0.5 + eps) - f(0.5 - eps)) / (2 * eps)
    assert abs(wg.grad(f)(0.5) - fd) < 1e-5 * abs(fd)


# -- autograd's ode_net.py, rewritten: examples/ode_net.py ---------------------------------
def test_ode_net_example_trains():
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "ode_net.py"
    spec = importlib.util.spec_from_file_location("examples_ode_net", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    t, target = mod.make_data(n_times=10)
    params = mod.init_params(hidden=8)
    g = wg.grad(mod.loss)(params, t, target)
    # the gradient along a direction, against central differences of the loss
    rng = np.random.default_rng(3)
    d = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    eps = 1e-5
    shift = lambda s: {k: params[k] + s * d[k] for k in params}  # noqa: E731
    fd = (mod.loss(shift(eps), t, target) - mod.loss(shift(-eps), t, target)) / (2 * eps)
    assert abs(sum(np.sum(g[k] * d[k]) for k in g) - fd) < 1e-4 * abs(fd)
    _, history = mod.train(steps=15, hidden=8, n_times=10)
    assert history[-1] < 0.6 * history[0]


def test_odeint_default_tolerances_reach_the_adjoint():
    """odeint's adjoint solves at LSODA's own default tolerances (1.49e-8), not solve_ivp's
    1e-3: autograd's test_odeint (default tolerances) checks to 1e-6 against differences."""
    y0 = np.array([0.5, -0.1, 0.6])
    t = np.linspace(0.1, 0.2, 4)
    a1, a2 = np.array([1.5, -0.2, -0.2]), np.array([1.6, 0.8, -0.5])
    w = np.random.default_rng(0).standard_normal((4, 3))

    def func(y, tt, arg1, arg2):
        return -wnp.sqrt(tt) - y + arg1 - wnp.mean((y + arg2) ** 2)

    for adjoint in ("auto", "interpolate", "backsolve", "forward"):
        def loss(y0, a1, a2):
            return wnp.sum(w * odeint(func, y0, t, args=(a1, a2), adjoint=adjoint))
        wg.check_grad(loss, y0, a1, a2, modes=("reverse",), order=1, rtol=1e-6, atol=1e-7)


# -- a user's jac / Dfun steers SciPy's solve; float32 stays float32 ---------------------------
@pytest.mark.parametrize("method", ["BDF", "Radau", "LSODA"])
def test_user_jac_is_given_to_scipy_and_the_derivative_stays_wengerts(method):
    calls = []

    def loss(k):
        def jac(t, y, k):
            calls.append(t)
            return -k * wnp.eye(2)
        sol = solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), np.array([1.0, 2.0]), method=method,
                        args=(k,), jac=jac, t_eval=[1.0], **TOL)
        return wnp.sum(sol.y)
    k = 1e3 if method == "LSODA" else 0.7   # LSODA asks for a Jacobian once stiff only
    loss(k)
    assert calls, "the user's jac was not given to SciPy"
    g = wg.grad(loss)(k)
    assert abs(g - (-3.0 * np.exp(-k))) <= 1e-8 * max(1.0, abs(g)) + 1e-300


def test_a_traced_wrong_jac_only_steers_newton():
    def loss(k):   # jac closes over k (traced) and is off by 5x: the derivative is wengert's
        sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0, 2.0]), method="Radau",
                        jac=lambda t, y: -5.0 * k * wnp.eye(2), t_eval=[1.0], **TOL)
        return wnp.sum(sol.y)
    want = -3.0 * np.exp(-0.7)
    assert abs(wg.grad(loss)(0.7) - want) < 1e-8
    assert abs(wg.derivative(loss)(0.7) - want) < 1e-8


def test_odeint_dfun_is_given_to_lsoda():
    calls = []

    def Dfun(y, t, k):
        calls.append(t)
        return np.array([[-k, 0.0], [0.0, -2.0 * k]])

    def loss(k):
        ys = odeint(lambda y, t, k: wnp.stack([-k * y[0], -2.0 * k * y[1]]), np.ones(2),
                    [0.0, 1.0], args=(k,), Dfun=Dfun, **TOL)
        return wnp.sum(ys[-1])
    loss(500.0)
    assert calls, "Dfun was not given to odeint"
    assert abs(wg.grad(loss)(2.0) - (-np.exp(-2.0) - 2 * np.exp(-4.0))) < 1e-8


def test_float32_state_comes_back_float32():
    y0 = np.array([1.0, 2.0], dtype=np.float32)
    assert solve_ivp(lambda t, y: -y, (0.0, 1.0), y0).y.dtype == np.float32
    assert odeint(lambda y, t: -y, y0, [0.0, 1.0]).dtype == np.float32
    for adjoint in ADJOINTS:
        def f(y, k):
            sol = solve_ivp(lambda t, y: -k * y, (0.0, 1.0), y, t_eval=[1.0], adjoint=adjoint)
            assert sol.y.dtype == np.float32
            return wnp.sum(sol.y)
        gy = wg.grad(f)(y0, 0.5)
        assert gy.dtype == np.float32
        np.testing.assert_allclose(gy, np.exp(-0.5), rtol=1e-4)
    ys = odeint(lambda y, t: -y, wg.Tape().var(y0), [0.0, 1.0])
    assert ys.value.dtype == np.float32


# -- generated code is shared between calls, never between different programs --------------------
def test_a_second_gradient_regenerates_no_code(monkeypatch):
    from wengert.scipy import _ode_rhs
    built = []
    real = _ode_rhs.build_function
    monkeypatch.setattr(_ode_rhs, "build_function", lambda g: built.append(g.name) or real(g))

    def loss(k, c):
        sol = solve_ivp(lambda t, y: -k * y + c * wnp.sin(y), (0.0, 1.0), np.array([1.0, 0.5]),
                        t_eval=[0.5, 1.0], adjoint="interpolate", **TOL)
        return wnp.sum(sol.y ** 2)
    vg = wg.value_and_grad(loss, argnums=(0, 1))
    vg(0.7, 0.1)
    first = len(built)
    _, g = vg(0.9, 0.2)
    assert len(built) == first
    want = (loss(0.9 + 1e-6, 0.2) - loss(0.9 - 1e-6, 0.2)) / 2e-6
    assert abs(g[0] - want) < 1e-6


def test_different_constants_do_not_share_code():
    def final(c):
        return lambda k: solve_ivp(lambda t, y: -k * y + c, (0.0, 1.0), np.array([1.0]),
                                   t_eval=[1.0], adjoint="interpolate", **TOL).y[0, -1]
    for c in (0.0, 2.0, 0.0):
        k = 0.7
        want = np.exp(-k) + c / k * (1 - np.exp(-k))
        assert abs(final(c)(k) - want) < 1e-9
        dwant = -np.exp(-k) - c / k ** 2 * (1 - np.exp(-k)) + c / k * np.exp(-k)
        assert abs(wg.grad(final(c))(k) - dwant) < 1e-8


# -- a stiff problem's Hessian: "auto" takes forward sensitivities when differentiated again ------
def test_stiff_hessian_by_auto_is_stable():
    def loss(p):
        def f(t, y):
            return wnp.stack([-p[0] * y[0] + p[1] * y[1], 1000.0 * (y[0] - y[1])])
        sol = solve_ivp(f, (0.0, 2.0), np.array([1.0, 0.0]), method="BDF",
                        t_eval=[0.5, 1.0, 2.0], **TOL)
        return wnp.sum(sol.y ** 2)
    p = np.array([1.5, 0.5])
    want = wg.jacfwd(wg.jacfwd(loss))(p)     # forward over forward: no adjoint at all
    np.testing.assert_allclose(wg.hessian(loss)(p), want, rtol=1e-6)
    np.testing.assert_allclose(wg.hvp(loss, p, np.array([1.0, -1.0])), want @ [1.0, -1.0],
                               rtol=1e-6)


@pytest.mark.parametrize("method", ["RK45", "DOP853", "BDF", "Radau", "LSODA"])
def test_interpolate_through_many_output_times_equals_closed_form(method):
    """One adjoint solver carried through the cotangent's jump at each of 12 output times."""
    ts = np.linspace(0.25, 3.0, 12)

    def loss(k, y0):
        sol = solve_ivp(lambda t, y: -k * y, (0.0, 3.0), y0, t_eval=ts, method=method,
                        adjoint="interpolate", **TOL)
        return wnp.sum(wnp.cos(sol.y) * ts)

    def exact(k, y0):
        return wnp.sum(wnp.cos(wnp.reshape(y0, (-1, 1)) * wnp.exp(-k * ts)) * ts)
    args = (0.8, np.array([1.0, -0.5]))
    got = wg.grad(loss, argnums=(0, 1))(*args)
    want = wg.grad(exact, argnums=(0, 1))(*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-7)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-7)


@pytest.mark.parametrize("method", ["BDF", pytest.param("Radau", marks=pytest.mark.slow)])
def test_explicit_interpolate_hessian_on_a_stiff_method_says_what_to_use(method):
    """Differentiated again, an explicit "interpolate" on a stiff method used to switch to
    backsolve silently, which overflowed; it now says what to use, and that works."""
    def loss(p, adjoint):
        def f(t, y):
            return wnp.stack([-p[0] * y[0] + p[1] * y[1], 1000.0 * (y[0] - y[1])])
        sol = solve_ivp(f, (0.0, 2.0), np.array([1.0, 0.0]), method=method,
                        t_eval=[0.5, 1.0, 2.0], adjoint=adjoint, rtol=1e-9, atol=1e-11)
        return wnp.sum(sol.y ** 2)
    p = np.array([1.5, 0.5])
    with pytest.raises(NotImplementedError, match='adjoint="forward"'):
        wg.hessian(lambda q: loss(q, "interpolate"))(p)
    with pytest.raises(NotImplementedError, match="jacfwd"):
        wg.hvp(lambda q: loss(q, "interpolate"), p, np.array([1.0, -1.0]))
    want = wg.jacfwd(wg.jacfwd(lambda q: loss(q, "interpolate")))(p)
    np.testing.assert_allclose(wg.hessian(lambda q: loss(q, "forward"))(p), want, rtol=1e-5)
    # the first derivative by "interpolate" stays, under vmap too (its parameters' quadrature
    # on the adjoint's steps alone missed the forward's fast transient near t = 0 by 2e-5)
    g = wg.grad(lambda q: loss(q, "interpolate"))(p)
    np.testing.assert_allclose(g, wg.jacfwd(lambda q: loss(q, "interpolate"))(p), rtol=1e-7)
    gv = wg.vmap(wg.grad(lambda q: loss(q, "interpolate")))(np.stack([p, p]))
    np.testing.assert_allclose(gv, np.stack([g, g]), rtol=1e-9)


# -- adjoint="discrete": the exact derivative of SciPy's own steps ----------------------------
# Huge tolerances with first_step = max_step make every step accepted at the same size, so
# SciPy's output is a smooth function of the inputs (its error control never moves a step)
# and central differences of SciPy itself check the discrete adjoint to ~1e-9.
FIXED = dict(rtol=1e3, atol=1e3, first_step=0.3, max_step=0.3)


def _lv_problem(n=3):
    rng = np.random.default_rng(0)
    r = 0.5 + 0.5 * rng.random(n)
    A = -np.eye(n) - 0.3 * rng.random((n, n)) / n
    return np.concatenate([r, A.ravel()]), 0.5 + 0.5 * rng.random(n)


def _lv(th, y0, te, method, opts, adjoint="discrete", lib=wnp):
    """Lotka-Volterra: ``r`` through args, ``A`` closed over; ``te`` and ``y0`` inputs too."""
    n = y0.shape[0]
    A = lib.reshape(th[n:], (n, n))
    fun = lambda t, y, r: y * (r + A @ y) + 0.05 * lib.sin(t)  # noqa: E731
    if lib is np:
        sol = si.solve_ivp(fun, (0.0, 3.0), y0, method=method, t_eval=te, args=(th[:n],),
                           **opts)
    else:
        sol = solve_ivp(fun, (0.0, 3.0), y0, method=method, t_eval=te, args=(th[:n],),
                        adjoint=adjoint, **opts)
    return lib.sum(sol.y ** 2) + lib.sum(sol.y[:, -1] * lib.cos(sol.y[:, 0]))


def _fd(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    out = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        out[i] = (f((x + e).reshape(x.shape)) - f((x - e).reshape(x.shape))) / (2 * eps)
    return out.reshape(x.shape)


@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853"])
@pytest.mark.parametrize("with_t_eval", [True, False])
def test_discrete_adjoint_is_the_derivative_of_scipys_own_steps(method, with_t_eval):
    th, y0 = _lv_problem()
    te = np.array([0.45, 1.0, 1.31, 2.2, 2.9]) if with_t_eval else None
    g_th, g_y0 = wg.grad(lambda th, y0: _lv(th, y0, te, method, FIXED),
                         argnums=(0, 1))(th, y0)
    np.testing.assert_allclose(g_th, _fd(lambda x: _lv(x, y0, te, method, FIXED, lib=np), th),
                               rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(g_y0, _fd(lambda x: _lv(th, x, te, method, FIXED, lib=np), y0),
                               rtol=1e-8, atol=1e-9)
    if with_t_eval:   # moving an output time moves no step: the interpolant's slope
        g_te = wg.grad(lambda te: _lv(th, y0, te, method, FIXED))(te)
        np.testing.assert_allclose(
            g_te, _fd(lambda x: _lv(th, y0, x, method, FIXED, lib=np), te), rtol=1e-8,
            atol=1e-9)


@pytest.mark.parametrize("method", ["RK45", "DOP853"])
def test_discrete_adjoint_agrees_with_the_continuous_ones(method):
    th, y0 = _lv_problem()
    te = np.linspace(0.2, 3.0, 8)
    grads = {how: wg.grad(lambda th: _lv(th, y0, te, method, TOL, how))(th)
             for how in ("discrete", "interpolate", "checkpoint")}
    for how in ("interpolate", "checkpoint"):
        np.testing.assert_allclose(grads["discrete"], grads[how], rtol=1e-7, atol=1e-8)


def test_auto_differentiates_the_mathematics_not_the_steps():
    """API.md section 13: "auto" never differentiates SciPy's steps ("discrete" and
    "checkpoint" are asked for by name): past forward sensitivities' size it is the
    interpolating adjoint. "discrete", by name, is exact for SciPy's own steps."""
    th, y0 = _lv_problem(5)
    te = np.array([0.45, 1.0, 2.9])
    g_auto = wg.grad(lambda th: _lv(th, y0, te, "RK45", FIXED, "auto"))(th)
    g_interp = wg.grad(lambda th: _lv(th, y0, te, "RK45", FIXED, "interpolate"))(th)
    np.testing.assert_array_equal(g_auto, g_interp)
    g = wg.grad(lambda th: _lv(th, y0, te, "RK45", FIXED, "discrete"))(th)
    np.testing.assert_allclose(g, _fd(lambda x: _lv(x, y0, te, "RK45", FIXED, lib=np), th),
                               rtol=1e-8, atol=1e-9)


def test_discrete_adjoint_t_span_endpoints():
    """t0 by the continuous formula -ȳ0·f(t0); t1 as the last output's slope."""
    def f(t0, t1, k):
        sol = solve_ivp(lambda t, y: -k * y * (1 + 0.1 * wnp.cos(t)), (t0, t1),
                        np.array([1.5]), adjoint="discrete", **TOL)
        return sol.y[0, -1] + 0.1 * sol.t[-1]
    wg.check_grad(f, 0.2, 1.7, 0.8, rtol=1e-6, atol=1e-8, modes=("reverse",))
    g = wg.grad(lambda k: solve_ivp(lambda t, y: -k * y, (2.0, 0.5), np.array([1.0]),
                                    adjoint="discrete", **TOL).y[0, -1])(0.4)
    assert abs(g - 1.5 * np.exp(0.4 * 1.5)) < 1e-8   # backwards in time
    # a t_eval starting at t0: that output is y0, moving along the first step's slope f(t0, y0)
    te = np.array([0.0, 0.5, 1.0])
    g_te = wg.grad(lambda te: wnp.sum(solve_ivp(
        lambda t, y: -0.5 * y, (0.0, 1.0), np.array([1.0, 2.0]), t_eval=te, adjoint="discrete",
        **TOL).y))(te)
    np.testing.assert_allclose(g_te, -1.5 * np.exp(-0.5 * te), rtol=1e-8)
    # nothing to solve: every output is y0
    assert wg.grad(lambda k: wnp.sum(solve_ivp(lambda t, y: -k * y, (0.0, 0.0), np.array([1.0]),
                                               adjoint="discrete").y))(0.3) == 0.0


def test_discrete_adjoint_under_vmap_and_compile():
    ks = np.array([0.1, 0.2, 0.3])
    g = wg.vmap(wg.grad(lambda k: decay(k, 2.0, 1.5, t_eval=True, adjoint="discrete")))(ks)
    np.testing.assert_allclose(g, -3.0 * np.exp(-1.5 * ks), rtol=1e-8)
    cg = wg.compile(wg.grad(lambda k: decay(k, 2.0, 1.5, t_eval=True, adjoint="discrete")))
    for k in (0.3, 0.5):
        assert abs(cg(k) + 3.0 * np.exp(-1.5 * k)) < 1e-8


def test_discrete_adjoint_is_reverse_only_and_says_what_to_use():
    f = lambda k: decay(k, 1.3, 1.9, adjoint="discrete")  # noqa: E731
    with pytest.raises(NotImplementedError, match="checkpoint"):
        wg.derivative(f)(0.7)
    with pytest.raises(NotImplementedError, match="checkpoint"):
        wg.hessian(lambda p: decay(p[0], p[1], 1.9, adjoint="discrete"))(np.array([0.7, 1.3]))
    with pytest.raises(ValueError, match="explicit"):
        decay(0.7, 1.3, 1.9, method="Radau", adjoint="discrete")
    with pytest.raises(ValueError, match="explicit"):
        wg.grad(lambda k: odeint(lambda y, t: -k * y, np.array([1.0]), [0.0, 1.0],
                                 adjoint="discrete")[-1, 0])(0.5)


def test_auto_discrete_still_differentiates_again_and_forward():
    """"auto" in reverse mode, differentiated again (a Hessian) and in forward mode agree."""
    th, y0 = _lv_problem(4)
    te = np.array([0.5, 1.5])
    f = lambda th: _lv(th, y0, te, "RK45", TOL, "auto")  # noqa: E731
    g = wg.grad(f)(th)
    np.testing.assert_allclose(wg.jacobian(f, mode="forward")(th), g, rtol=1e-7, atol=1e-8)
    v = np.linspace(-1.0, 1.0, th.size)
    hv = wg.jvp(wg.grad(f), (th,), (v,))[1]
    np.testing.assert_allclose(hv, (wg.grad(f)(th + 1e-5 * v) - wg.grad(f)(th - 1e-5 * v))
                               / 2e-5, rtol=1e-4, atol=1e-6)


def test_a_shared_spec_reads_its_own_solve_not_anothers(monkeypatch):
    """A compiled program shares its solve's Spec across threads: a call that solves must use
    its own dense solution and steps even when another call replaces the cache right after
    (it read ``self._cache`` / ``self._steps`` again after solving, and could take another
    input's solution). Here every read that follows a write sees another input's entry."""
    from wengert.scipy import _ode

    def other_entry(spec, name, entry):
        (y0, ts, ps), k3 = entry[0], [np.asarray(3.0)]
        if name == "_cache":
            return ((y0, ts, k3), *_ode.Spec._scipy(spec, y0, ts, k3, True))
        return ((y0, ts, k3), [])          # no steps: another solve's

    def racy(name):
        def get(spec):
            d = spec.__dict__
            if d.pop(name + "_written", False) and d.get(name) is not None:
                return other_entry(spec, name, d[name])
            return d.get(name)

        def put(spec, value):
            spec.__dict__[name] = value
            spec.__dict__[name + "_written"] = True
        return property(get, put)
    monkeypatch.setattr(_ode.Spec, "_cache", racy("_cache"), raising=False)
    monkeypatch.setattr(_ode.Spec, "_steps", racy("_steps"), raising=False)

    def total(k, adjoint):
        return wnp.sum(solve_ivp(lambda t, y, k: -k * y, (0.0, 1.0), np.array([1.0]),
                                 args=(k,), adjoint=adjoint, t_eval=[0.5, 1.0], rtol=1e-10,
                                 atol=1e-12).y)
    want = -(0.5 * np.exp(-0.35) + np.exp(-0.7))
    for adjoint in ("interpolate", "discrete"):
        np.testing.assert_allclose(wg.grad(total)(0.7, adjoint), want, rtol=1e-7)
