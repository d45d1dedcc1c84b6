"""adjoint="discrete" with method="BDF" (wengert/scipy/_ode_bdf.py): the exact derivative of
SciPy's own BDF steps (finite differences of SciPy itself, where its steps cannot move), the
ODE's derivative to the tolerance elsewhere (forward sensitivities, the interpolating
adjoint), dense and sparse LU, the fallback factorisation, vmap, compile and the errors."""
import numpy as np
import pytest
import scipy.integrate as si

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy import _ode_bdf
from wengert.scipy.integrate import solve_ivp

# first_step = max_step with huge tolerances: every step accepted at that size; SciPy's BDF
# still climbs in order and rescales its differences, but nothing moves with the inputs
FIXED = dict(rtol=1e3, atol=1e3, first_step=0.05, max_step=0.05)
TIGHT = dict(rtol=1e-9, atol=1e-11)


def _linear(lib):
    """y' = -K y + sin(t) b: Newton solves it exactly (J is constant and exact), so SciPy's
    output is a linear function of y0 and b, and its central differences are exact."""
    K = np.array([[2.0, -0.5, 0.0], [0.3, 1.0, 0.2], [0.0, -0.4, 3.0]])
    return lambda t, y, b: -(K @ y) + lib.sin(t) * b


def _output(b, y0, te, lib=wnp, opts=FIXED):
    f = _linear(lib)
    if lib is np:
        sol = si.solve_ivp(f, (0.0, 1.0), y0, method="BDF", t_eval=te, args=(b,), **opts)
    else:
        sol = solve_ivp(f, (0.0, 1.0), y0, method="BDF", t_eval=te, args=(b,),
                        adjoint="discrete", **opts)
    w = np.arange(1.0, 1.0 + sol.y.size).reshape(sol.y.shape)
    return lib.sum(w * sol.y)


def _fd(f, x, eps=1e-6):
    out = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        out[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return out


@pytest.mark.parametrize("te", [None, np.array([0.0, 0.13, 0.5, 0.71, 1.0])])
def test_the_derivative_of_scipys_own_bdf_steps(te):
    b, y0 = np.array([1.0, -0.5, 0.25]), np.array([1.0, 2.0, -1.0])
    gb, gy = wg.grad(lambda b, y0: _output(b, y0, te), argnums=(0, 1))(b, y0)
    np.testing.assert_allclose(gb, _fd(lambda x: _output(x, y0, te, np), b), rtol=1e-8,
                               atol=1e-9)
    np.testing.assert_allclose(gy, _fd(lambda x: _output(b, x, te, np), y0), rtol=1e-8,
                               atol=1e-9)


def _rd(n, adjoint, k, opts=TIGHT, te=np.linspace(0.0, 1.0, 6)[1:]):
    x = np.linspace(0.0, 1.0, n + 2)[1:-1]
    u0 = 0.2 + 0.6 * np.exp(-20 * (x - 0.5) ** 2)
    D = 0.01 * (n + 1) ** 2

    def rhs(t, u, k):
        lap = wnp.concatenate([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2],
                               u[-2:-1] - 2 * u[-1:]])
        return D * lap + k * u * (1 - u) + 0.1 * wnp.cos(3 * t) * u

    sol = solve_ivp(rhs, (0.0, 1.0), u0, t_eval=te, method="BDF", args=(k,), adjoint=adjoint,
                    **opts)
    return wnp.sum(sol.y ** 2)


@pytest.mark.parametrize("n", [8, 40])   # LAPACK's LU, SuperLU (a sparse Jacobian)
def test_bdf_discrete_adjoint_matches_forward_sensitivities(n):
    k = 1.0 + 0.5 * np.sin(np.arange(n))
    g = wg.grad(lambda kk: _rd(n, "discrete", kk))(k)
    ref = wg.grad(lambda kk: _rd(n, "forward", kk))(k)
    np.testing.assert_allclose(g, ref, rtol=1e-6, atol=1e-7 * np.abs(ref).max())


def test_a_stalled_iteration_falls_back_to_the_steps_own_jacobian(monkeypatch):
    k = 1.0 + 0.5 * np.sin(np.arange(40))
    want = wg.grad(lambda kk: _rd(40, "discrete", kk))(k)
    calls = []
    real = _ode_bdf.lu_factor, _ode_bdf.spla.splu
    monkeypatch.setattr(_ode_bdf, "_ITERATIONS", 0)   # never iterate: factorise every step
    monkeypatch.setattr(_ode_bdf.spla, "splu", lambda A: calls.append(A.shape) or real[1](A))
    got = wg.grad(lambda kk: _rd(40, "discrete", kk))(k)
    assert calls    # the fallback ran, and gives the same cotangents
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-11 * np.abs(want).max())


def test_times_and_initial_state():
    """Output times and t0 by the continuous formulas; y0's cotangent through D's first two
    rows (y0, and h0 f(t0, y0))."""
    def f(t0, t1, y0, k):
        sol = solve_ivp(lambda t, y: -k * y * (1 + 0.1 * wnp.cos(t)), (t0, t1),
                        wnp.stack([y0, 2.0 * y0]), method="BDF", t_eval=wnp.stack([0.5, t1]),
                        adjoint="discrete", **TIGHT)
        return wnp.sum(sol.y ** 2)
    wg.check_grad(f, 0.2, 1.7, 1.5, 0.8, rtol=1e-6, atol=1e-8, modes=("reverse",))
    g = wg.grad(lambda k: solve_ivp(lambda t, y: -k * y, (2.0, 0.5), np.array([1.0]),
                                    method="BDF", adjoint="discrete", **TIGHT).y[0, -1])(0.4)
    assert abs(g - 1.5 * np.exp(0.4 * 1.5)) < 1e-6   # backwards in time (BDF at rtol 1e-9)


def test_under_vmap_and_compile():
    def f(k):
        return solve_ivp(lambda t, y: -k * y, (0.0, 1.5), np.array([2.0]), method="BDF",
                         t_eval=np.array([1.5]), adjoint="discrete", **TIGHT).y[0, -1]
    ks = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(wg.vmap(wg.grad(f))(ks), -3.0 * np.exp(-1.5 * ks), rtol=1e-7)
    cg = wg.compile(wg.grad(f))
    for k in (0.3, 0.5):
        assert abs(cg(k) + 3.0 * np.exp(-1.5 * k)) < 1e-7


def test_reverse_only_and_says_what_to_use():
    f = lambda k: solve_ivp(lambda t, y: -k * y, (0.0, 1.0), np.array([1.0]),  # noqa: E731
                            method="BDF", adjoint="discrete").y[0, -1]
    with pytest.raises(NotImplementedError, match='"forward"') as e:
        wg.derivative(f)(0.7)
    assert "checkpoint" not in str(e.value)   # not for an implicit method
    with pytest.raises(NotImplementedError, match='"forward"'):
        wg.hessian(lambda p: f(p[0]))(np.array([0.7]))
    for method in ("Radau", "LSODA"):
        with pytest.raises(ValueError, match="BDF"):
            solve_ivp(lambda t, y: -y, (0.0, 1.0), np.array([1.0]), method=method,
                      adjoint="discrete")
