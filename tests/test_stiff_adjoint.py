"""The stiff interpolating adjoint's shortcuts (wengert/scipy/_ode_steps.py): Radau's LU
through LAPACK directly, ``c I - J`` on ``J``'s structure, dense output read directly, the
forward solution remembered per time, the compiled sparse Jacobian; each gives what SciPy's
own path gives, and the gradients they make agree with forward sensitivities, in threads too."""
import threading

import numpy as np
import pytest
import scipy.integrate as si
import scipy.sparse as sp
from scipy.linalg import lu_factor, lu_solve

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy._ode_steps import _Identity, direct_lu, fast_dense, recent
from wengert.scipy.integrate import solve_ivp


def _rd(n):
    x = np.linspace(0.0, 1.0, n + 2)[1:-1]
    u0 = 0.2 + 0.6 * np.exp(-20 * (x - 0.5) ** 2)
    D = 0.01 * (n + 1) ** 2

    def rhs(t, u, k):
        lap = wnp.concatenate([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2],
                               u[-2:-1] - 2 * u[-1:]])
        return D * lap + k * u * (1 - u)

    def loss(k, adjoint):
        sol = solve_ivp(rhs, (0.0, 1.0), u0, t_eval=np.linspace(0.0, 1.0, 6)[1:],
                        method="BDF", args=(k,), adjoint=adjoint, rtol=1e-8, atol=1e-10)
        return wnp.sum(sol.y ** 2)
    return loss, 1.0 + 0.5 * np.sin(3 * x)


@pytest.mark.parametrize("n", [8, 40])   # a dense adjoint Jacobian, a sparse one
def test_interpolating_adjoint_matches_forward_sensitivities(n):
    loss, k = _rd(n)
    g = wg.grad(lambda kk: loss(kk, "interpolate"))(k)
    ref = wg.grad(lambda kk: loss(kk, "forward"))(k)
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-7 * np.abs(ref).max())


def test_threads_each_their_own_gradient():
    loss, k = _rd(40)
    ks = [k * (1 + 0.2 * i) for i in range(4)]
    want = [wg.grad(lambda kk: loss(kk, "interpolate"))(kk) for kk in ks]
    got, errors = [None] * 4, []
    start = threading.Barrier(4)

    def work(i):
        try:
            start.wait()
            got[i] = wg.grad(lambda kk: loss(kk, "interpolate"))(ks[i])
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)


def test_shifted_identity_is_scipys_subtraction():
    n = 30
    J = sp.csc_matrix(sp.random(n, n, density=0.1, random_state=1) + sp.eye(n))
    J.sum_duplicates()
    no_diag = sp.csc_matrix(sp.random(n, n, density=0.1, random_state=2))
    eye = sp.eye(n, format="csc")
    I = _Identity(n)
    for M in (J, no_diag, J):
        for c in (2.5, np.float64(3.0) / np.float64(-0.7), 2.0 + 1.5j,
                  np.complex128(1 + 2j) / np.float64(0.3)):
            got, want = c * I - M, c * eye - M
            assert got.dtype == want.dtype
            assert abs(got - want).max() == 0


def test_direct_lu_is_lu_factor_and_lu_solve():
    rng = np.random.default_rng(0)
    solver = si.Radau(lambda t, y: -y, 0.0, np.ones(6), 1.0, jac=lambda t, y: -np.eye(6))
    direct_lu(solver)
    for dtype in (float, complex):
        A = rng.standard_normal((6, 6)).astype(dtype) + 4 * np.eye(6)
        if dtype is complex:
            A = A + 1j * rng.standard_normal((6, 6))
        b = rng.standard_normal(6).astype(dtype)
        np.testing.assert_allclose(solver.solve_lu(solver.lu(A.copy()), b.copy()),
                                   lu_solve(lu_factor(A), b), rtol=1e-13)
    with pytest.raises(ValueError, match="NaN"):
        solver.lu(np.full((6, 6), np.nan))


@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_fast_dense_is_scipys_dense_output(method):
    sol = si.solve_ivp(lambda t, y: [y[1], -y[0] - 0.1 * y[1]], (0.0, 5.0), [1.0, 0.0],
                       method=method, dense_output=True, rtol=1e-8)
    at = fast_dense(sol.sol)
    for t in np.linspace(0.0, 5.0, 37):
        np.testing.assert_allclose(at(t), sol.sol(t), rtol=1e-12, atol=1e-14)


def test_recent_remembers_each_time_its_own_value():
    calls = []

    def fn(t):
        calls.append(t)
        return np.array([t, 2 * t])
    at = recent(fn, size=3)
    for t in (0.1, 0.2, 0.1, 0.3, 0.2, 0.4, 0.1):
        np.testing.assert_array_equal(at(t), [t, 2 * t])
    assert calls == [0.1, 0.2, 0.3, 0.4, 0.1]   # 0.1 evicted by 0.4 (three kept)
