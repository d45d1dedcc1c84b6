"""The stiff interpolating adjoint's shortcuts (wengert/scipy/_ode_steps.py): Radau's LU
through LAPACK directly, ``c I - J`` on ``J``'s structure, dense output read directly, the
forward solution remembered per time, the compiled sparse Jacobian; each gives what SciPy's
own path gives, and the gradients they make agree with forward sensitivities, in threads too."""

import numpy as np
import pytest
import scipy.integrate as si
import scipy.sparse as sp
from scipy.linalg import lu_factor, lu_solve

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy import _ode
from in_threads import in_threads  # noqa: I001
from wengert.scipy._ode_steps import (_Identity, cuts, direct_lu, fast_dense, forward_grid, land,
                                      recent, stage_quadrature)
from wengert.scipy.integrate import solve_ivp


def _rd(n, outputs=5, rtol=1e-8, atol=1e-10):
    x = np.linspace(0.0, 1.0, n + 2)[1:-1]
    u0 = 0.2 + 0.6 * np.exp(-20 * (x - 0.5) ** 2)
    D = 0.01 * (n + 1) ** 2

    def rhs(t, u, k):
        lap = wnp.concatenate([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2],
                               u[-2:-1] - 2 * u[-1:]])
        return D * lap + k * u * (1 - u)

    def loss(k, adjoint):
        sol = solve_ivp(rhs, (0.0, 1.0), u0, t_eval=np.linspace(0.0, 1.0, outputs + 1)[1:],
                        method="BDF", args=(k,), adjoint=adjoint, rtol=rtol, atol=atol)
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
    got = in_threads(lambda i: wg.grad(lambda kk: loss(kk, "interpolate"))(ks[i]), 4)
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


def _counted(monkeypatch):
    """Count the adjoint's Radau steps (and its factorisations) and the vjps it asks for."""
    seen = {"steps": 0, "lu": 0, "vjp_y": 0}
    step, call = si.Radau._step_impl, _ode._VjpInto.__call__

    def counted_step(self):
        lu = self.nlu
        out = step(self)
        seen["steps"] += 1
        seen["lu"] += self.nlu - lu
        return out

    def counted_call(self, *args):
        seen["vjp_y"] += self.params is False
        return call(self, *args)
    monkeypatch.setattr(si.Radau, "_step_impl", counted_step)
    monkeypatch.setattr(_ode._VjpInto, "__call__", counted_call)
    return seen


@pytest.mark.parametrize("n", [8, 40])
def test_adjoint_steps_land_on_the_output_times(n, monkeypatch):
    """20 evenly spaced output times, each a stop of the adjoint. Its Radau steps used to
    take a proposal short of the stop and then a sliver of a step on a Newton matrix made for
    the longer one (n = 40: 61 steps, 108 LU factorisations); landing on the stops takes 28
    and 50.  Below 32 states the adjoint reads J_y at its stage times instead of a vjp at each
    stage of each Newton iteration (n = 8: 207 vjps, now none)."""
    loss, k = _rd(n, outputs=20, rtol=1e-6, atol=1e-8)
    ref = wg.grad(lambda kk: loss(kk, "forward"))(k) if n == 8 else \
        wg.grad(lambda kk: loss(kk, "discrete"))(k)
    seen = _counted(monkeypatch)
    g = wg.grad(lambda kk: loss(kk, "interpolate"))(k)
    np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    if n == 8:
        assert seen["vjp_y"] == 0
        assert seen["steps"] <= 25
    else:
        assert seen["steps"] <= 40, seen
        assert seen["lu"] <= 70, seen


def test_land_stretches_a_near_proposal_and_evens_out_a_short_one():
    solver = si.Radau(lambda t, y: -y, 1.0, np.ones(2), 0.5)
    solver.LU_real = solver.LU_complex = "factorised"
    for proposal, want, refactor in [(0.45, 0.5, True), (0.6, 0.6, False), (0.5, 0.5, False),
                                     (0.3, 0.25, True), (0.12, 0.1, True)]:
        solver.h_abs = proposal
        solver.LU_real = solver.LU_complex = "factorised"
        land(solver)
        assert solver.h_abs == pytest.approx(want, rel=1e-15)
        assert (solver.LU_real is None) == refactor
        assert (solver.LU_complex is None) == refactor


def test_cuts_keep_each_piece_within_the_forward_steps_rule():
    # BDF's start: steps doubling from 1e-6, then 0.1 apart
    fs = np.concatenate([[0.0], 1e-6 * 2.0 ** np.arange(17), np.arange(0.2, 1.01, 0.1)])
    forward = forward_grid(fs)
    assert cuts(1.0, 0.9, forward) == [] and cuts(0.9, 1.0, forward) == []
    for t0, t1 in [(0.35, 0.0), (0.0, 0.35)]:
        out = cuts(t0, t1, forward)
        pieces = np.array([t0, *out, t1])
        assert np.all(np.diff(pieces) * np.sign(t1 - t0) > 0)
        assert set(out) <= set(fs)
        assert len(out) < 17 // 2   # not one piece per starting step
        grid, local = forward
        for a, b in zip(pieces[:-1], pieces[1:]):
            lo, hi = min(a, b), max(a, b)
            inside = (grid > lo) & (grid < hi)
            assert np.all(local[inside] * 32.0 >= hi - lo)


def test_stage_quadrature_is_exact_for_quartics():
    """Radau IIA's stages are an order-5 rule; the pieces cut at a fast forward transient
    are Gauss-Legendre (order 6): both integrate t^4 exactly, either way in time."""
    def pq(t, y, a):
        return np.array([t ** 4, 1.0])
    for t0, t1 in [(1.0, 0.3), (0.3, 1.0)]:
        solver = si.Radau(lambda t, y: -y, t0, np.ones(1), t1, first_step=abs(t1 - t0),
                          rtol=1e3, atol=1e3)
        solver.step()
        assert solver.t == pytest.approx(t1, abs=1e-15)
        t1 = solver.t
        want = np.array([(t0 ** 5 - t1 ** 5) / 5, t0 - t1])
        smooth = forward_grid([0.0, 0.5, 1.0])
        fast = forward_grid(np.concatenate([np.linspace(0.3, 0.31, 40), [1.0]]))
        assert cuts(t0, t1, fast)
        for forward in (smooth, fast):
            got = stage_quadrature(pq, lambda t: None, solver, forward)
            np.testing.assert_allclose(got, want, rtol=1e-13)
