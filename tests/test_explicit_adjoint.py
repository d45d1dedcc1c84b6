"""The explicit methods' interpolating adjoint (wengert/scipy/_ode_explicit.py): stepped on
plain NumPy without stopping at every output time (an output's cotangent inside a step is
carried by a step of its own, a row of the same vjp), its dense rows equal SciPy's dense
output, and its gradients equal closed forms, forward sensitivities and a tightly solved
reference within the forward solve's own accuracy."""
import numpy as np
import pytest
import scipy.integrate as si

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy import _ode, _ode_explicit
from wengert.scipy._ode_explicit import dense_rows, rows_per_step
from wengert.scipy._ode_rhs import Rhs, trace_rhs
from wengert.scipy.integrate import solve_ivp


def _lv(n=9, outputs=20, rtol=1e-6, atol=1e-8, method="RK45", t1=5.0):
    rng = np.random.default_rng(0)
    r = 0.5 + 0.5 * rng.random(n)
    A = -np.eye(n) - 0.3 * rng.random((n, n)) / n
    theta = np.concatenate([r, A.ravel()])
    y0 = 0.5 + 0.5 * rng.random(n)
    te = np.linspace(0.0, t1, outputs + 1)[1:]

    def loss(th, adjoint="interpolate", rtol=rtol, atol=atol, t_eval=te):
        r, A = th[:n], wnp.reshape(th[n:], (n, n))
        sol = solve_ivp(lambda t, y: y * (r + A @ y), (0.0, t1), y0, t_eval=t_eval,
                        method=method, adjoint=adjoint, rtol=rtol, atol=atol)
        return wnp.sum(sol.y ** 2)
    return loss, theta


def _count_graph_calls(monkeypatch):
    """Calls of generated code (right-hand side, vjps) made while pulling back."""
    calls = [0]
    inside = [False]
    plain = Rhs.plain

    def counted(self, *a):
        calls[0] += inside[0]
        return plain(self, *a)
    pull = _ode._pull_interpolate

    def pulled(*a):
        inside[0] = True
        try:
            return pull(*a)
        finally:
            inside[0] = False
    monkeypatch.setattr(Rhs, "plain", counted)
    monkeypatch.setattr(_ode, "_pull_interpolate", pulled)
    return calls


def test_adjoint_does_not_stop_at_every_output(monkeypatch):
    """20 outputs over a solve of ~12 steps: the old adjoint (a SciPy solver stopping at each
    output time, its vjp called per stage with the parameters' cotangent carried as more
    states) made ~160 calls of generated code in the pullback; carried as rows it is about
    7 per step of about the forward's steps."""
    loss, theta = _lv()
    calls = _count_graph_calls(monkeypatch)
    wg.grad(loss)(theta)
    assert 0 < calls[0] <= 120, calls[0]


@pytest.mark.parametrize("size", [10, 100])
@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853"])
def test_gradient_within_the_forward_solves_accuracy(size, method):
    """Against a gradient solved to 1e-12: within 5x what the discrete adjoint (exact for the
    computed solution) is off, or 5x rtol: the forward's own error bounds both (RK23's
    discrete adjoint is 3-8e-6 off at rtol 1e-6, RK45's 1-2e-6, DOP853's 1e-8)."""
    n = max(2, int(round((np.sqrt(1 + 4 * size) - 1) / 2)))
    loss, theta = _lv(n, method=method)
    ref = wg.grad(lambda th: loss(th, "discrete", rtol=1e-12, atol=1e-14))(theta)
    got = wg.grad(loss)(theta)
    disc = wg.grad(lambda th: loss(th, "discrete"))(theta)
    scale = np.abs(ref).max()
    off_disc = np.abs(disc - ref).max() / scale
    assert np.abs(got - ref).max() / scale < max(5 * off_disc, 5e-6)


@pytest.mark.parametrize("outputs", [1, 3, 200])
def test_many_or_few_outputs_per_step(outputs):
    """200 outputs over ~12 steps (more than R - 1 inside a step: steps cut at an output),
    one output (no rows besides the state's), with t_eval starting at t0; tight tolerances,
    against forward sensitivities."""
    loss, theta = _lv(3, outputs=outputs, rtol=1e-10, atol=1e-12)
    te = np.linspace(0.0, 5.0, outputs + 1)[1:]
    te = np.concatenate([[0.0], te])   # one at t0 too
    got = wg.grad(lambda th: loss(th, t_eval=te))(theta)
    want = wg.grad(lambda th: loss(th, "forward", t_eval=te))(theta)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * np.abs(want).max())


def test_backwards_in_time_and_y0_t_cotangents():
    """A solve from 3 back to 0: y0's, the times' and the parameters' cotangents against
    forward sensitivities (every argument traced)."""
    def loss(k, y0, ts, adjoint):
        sol = solve_ivp(lambda t, y: -k * y + 0.3 * wnp.sin(t) * y[::-1], (3.0, 0.0), y0,
                        t_eval=ts, adjoint=adjoint, rtol=1e-10, atol=1e-12)
        return wnp.sum(wnp.cos(sol.y) * wnp.reshape(ts, (1, -1)))
    args = (np.array([0.8, 0.3]), np.array([1.0, -0.5]), np.linspace(2.5, 0.0, 9))
    got = wg.grad(lambda *a: loss(*a, "interpolate"), argnums=(0, 1, 2))(*args)
    want = wg.grad(lambda *a: loss(*a, "forward"), argnums=(0, 1, 2))(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853"])
@pytest.mark.parametrize("backwards", [False, True])
def test_dense_rows_are_scipys_dense_output(method, backwards):
    span = (2.0, 0.0) if backwards else (0.0, 2.0)
    sol = si.solve_ivp(lambda t, y: [y[1], -np.sin(y[0])], span, [1.0, 0.0], method=method,
                       dense_output=True, rtol=1e-6).sol
    at = dense_rows(sol)
    ts = np.sort(np.asarray(sol.ts))
    T = np.linspace(ts[0], ts[-1], 57)
    np.testing.assert_allclose(at(T), sol(T).T, rtol=1e-13, atol=1e-14)
    # within one forward step, and across one boundary (the span's shortcuts)
    mid = 0.5 * (ts[1] + ts[2])
    for lo, hi in ((ts[1], mid), (mid, 0.5 * (ts[2] + ts[3])), (ts[1], ts[2])):
        T = np.linspace(lo, hi, 7)[::-1] if backwards else np.linspace(lo, hi, 7)
        np.testing.assert_allclose(at(T, (lo, hi)), sol(T).T, rtol=1e-13, atol=1e-14)


def test_rows_per_step_counts_outputs_inside_forward_steps():
    fs = [0.0, 1.0, 2.0, 3.0]
    assert rows_per_step(fs, [3.0, 2.0, 1.0]) == 1            # on the steps: none inside
    assert rows_per_step(fs, [2.5, 2.0, 1.5, 1.2, 1.1]) == 4   # three inside [1, 2]
    assert rows_per_step(fs[::-1], [0.5]) == 2                 # a backwards solve's steps
    assert rows_per_step(fs, np.linspace(0.01, 0.99, 30)) == 4  # at most 4


def test_hoisted_graph_computes_the_same():
    n = 4
    rng = np.random.default_rng(1)
    W, b = rng.random((n, n)), rng.random(n)
    f = trace_rhs(lambda t, y, a, W, b: a * wnp.tanh(wnp.transpose(W) @ y + b) + W.T @ a,
                  [0.0, np.ones(n), np.ones(n), W, b], "f", flat=False)
    pre, body = f.hoisted(3)
    held = pre.plain(W, b)
    y, a = rng.random(n), rng.random(n)
    np.testing.assert_array_equal(body.plain(0.3, y, a, W, b, *held), f.plain(0.3, y, a, W, b))
    g = trace_rhs(lambda t, y, a, W: a * (W @ y), [0.0, np.ones(n), np.ones(n), W], "g",
                  flat=False)
    assert g.hoisted(3) is None   # nothing reads the parameters alone


def test_live_rows_plain_and_traced_agree():
    g = np.zeros((6, 2))
    g[[1, 4, 5], 0] = 1.0
    assert _ode._live_rows(g, 6) == [5, 4, 1]
    assert _ode._live_rows(list(g), 6) == [5, 4, 1]


def test_failed_adjoint_step_warns_and_adds_what_it_missed(monkeypatch):
    """A step that cannot be taken (here every step fails) warns, and the outputs it did not
    reach still add their cotangents (no silent drop)."""
    monkeypatch.setattr(_ode_explicit.Stepper, "_step", lambda self, *a: False)
    loss, theta = _lv(2, outputs=4)
    with pytest.warns(wg.SolverWarning, match="adjoint"):
        wg.grad(loss)(theta)
