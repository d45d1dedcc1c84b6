"""The examples run, at small size, and do what they claim."""
import importlib.util
import pathlib

import numpy as np
import pytest

import wengert as wg

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def logreg():
    return _load("logistic_regression")


@pytest.fixture(scope="module")
def mlp():
    return _load("mlp")


@pytest.fixture(scope="module")
def gp():
    return _load("gaussian_process")


@pytest.fixture(scope="module")
def sparse_opt():
    return _load("sparse_optimization")


@pytest.fixture(scope="module")
def brusselator():
    return _load("reaction_diffusion")


def test_logistic_regression_trust_ncg_converges(logreg):
    X, y, _ = logreg.make_data(n=120, d=3, seed=1)
    res = logreg.fit(X, y)
    assert res.success, res.message
    assert np.linalg.norm(wg.grad(logreg.loss)(res.x, X, y)) < 1e-6
    assert res.nhev > 0  # Hessian-vector products from wg.hvp were used
    # hvp agrees with the Hessian
    H = wg.hessian(lambda w: logreg.loss(w, X, y))(res.x)
    p = np.arange(3.0)
    np.testing.assert_allclose(wg.hvp(lambda w: logreg.loss(w, X, y), res.x, p), H @ p,
                               rtol=1e-10)
    wg.check_grad(lambda w: logreg.loss(w, X, y), res.x + 0.1, order=2)


def test_mlp_loss_decreases(mlp):
    X, y = mlp.two_moons(n=60, seed=2)
    params, history = mlp.train(X, y, steps=150, lr=0.5)
    assert history[-1] < 0.5 * history[0]
    assert all(np.isfinite(history))
    assert mlp.accuracy(params, X, y) > 0.85
    wg.check_grad(lambda W1: mlp.loss(dict(params, W1=W1), X, y), params["W1"])


def test_gaussian_process_gradient_matches_finite_differences(gp):
    x, y = gp.make_data(n=12, seed=3)
    theta = np.array([0.2, -0.1, -1.2])
    g = wg.grad(gp.log_likelihood)(theta, x, y)
    fd = gp.finite_difference_gradient(lambda t: gp.log_likelihood(t, x, y), theta)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g, gp.closed_form_gradient(theta, x, y), rtol=1e-8)
    gf = wg.jacobian(lambda t: gp.log_likelihood(t, x, y), mode="forward")(theta)
    np.testing.assert_allclose(gf, g, rtol=1e-10)
    wg.check_grad(lambda t: gp.log_likelihood(t, x, y), theta, order=2)


def test_gaussian_process_fit_improves_likelihood(gp):
    x, y = gp.make_data(n=15, seed=4)
    res = gp.fit(x, y)
    assert res.success
    assert -res.fun > gp.log_likelihood(np.array([0.0, 0.0, -1.0]), x, y)


@pytest.mark.parametrize("compiled", [True, False])
def test_trust_constr_with_sparse_hessians_converges(sparse_opt, compiled):
    n = 40
    res = sparse_opt.solve(n, compiled=compiled)
    assert res.status in (1, 2), res.message
    c = sparse_opt.constraints(res.x)
    assert np.abs(c).max() < 1e-8
    assert res.optimality < 1e-6
    assert res.nhev > 0  # the Hessians came from wg.sparse_hessian
    # the same solution for any n: the objective's minimum under the constraints
    np.testing.assert_allclose(res.fun, 6.2324586324, rtol=1e-8)
    # the sparse matrices it used are the dense derivatives
    x, v = res.x, np.linspace(-1.0, 1.0, n - 2)
    np.testing.assert_allclose(wg.sparse_hessian(sparse_opt.objective)(x).toarray(),
                               wg.hessian(sparse_opt.objective)(x), rtol=1e-12)
    np.testing.assert_allclose(wg.sparse_jacobian(sparse_opt.constraints)(x).toarray(),
                               wg.jacobian(sparse_opt.constraints)(x), rtol=1e-12)
    h = wg.sparse_hessian(sparse_opt.weighted_constraints)(x, v)
    np.testing.assert_allclose(h.toarray(), wg.hessian(sparse_opt.weighted_constraints)(x, v),
                               rtol=1e-12, atol=1e-12)
    assert wg.sparse_hessian(sparse_opt.objective).plan(x).num_colors == 3


def test_bdf_with_a_sparse_jacobian(brusselator):
    n = 60
    sol = brusselator.integrate(n, t_end=2.0)
    assert sol.success and sol.njev > 0
    ref = brusselator.integrate(n, t_end=2.0, jac="fd")
    np.testing.assert_allclose(sol.y[:, -1], ref.y[:, -1], rtol=1e-4, atol=1e-6)
    tight = brusselator.integrate(n, t_end=2.0, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sol.y[:, -1], tight.y[:, -1], rtol=1e-4, atol=1e-5)
    y = sol.y[:, -1]
    J = wg.sparse_jacobian(brusselator.rhs, argnums=1)
    dense = wg.jacobian(brusselator.rhs, argnums=1)(2.0, y)
    np.testing.assert_allclose(J(2.0, y).toarray(), dense, rtol=1e-12)
    plan = J.plan(2.0, y)
    # the lower bound: the widest row (a point's 3 neighbours of its species and the other
    # species at that point) -- the old colouring used 5
    assert plan.num_colors == (plan.sparsity.toarray() != 0).sum(axis=1).max() == 4
    assert plan.mode == "forward"
    # exactly the pattern: each u and v sees its neighbours of its species and the other
    # species at its own point
    np.testing.assert_array_equal(plan.sparsity.toarray(), dense != 0)


def test_distributed_lbfgs_fits_lazy_data_on_a_cluster():
    pytest.importorskip("dask.distributed", reason="Dask is an optional dependency: .[dask]")
    ex = _load("distributed_lbfgs")
    # the full-size data is lazy and bigger than the workers' memory together
    X_big, _, _ = ex.make_data()
    assert X_big.nbytes > 2 * ex._bytes("300MiB")
    # in-process workers: main sets no memory limit (it would apply to this whole test
    # process, whose size after the other tests would pause them: a hang)
    res, X, y, w_true, _ = ex.main(n=20_000, chunk_rows=2_500, processes=False, verbose=False)
    assert res.success, res.message
    Xn, yn = X.compute(scheduler="threads"), y.compute(scheduler="threads")
    # the same fit on NumPy data: the same weights, a zero gradient
    assert np.linalg.norm(wg.grad(ex.loss)(res.x, Xn, yn)) < 1e-7
    ref = ex.fit(Xn, yn)
    np.testing.assert_allclose(res.x, ref.x, rtol=1e-5, atol=1e-6)
    assert np.corrcoef(res.x, w_true)[0, 1] > 0.95
