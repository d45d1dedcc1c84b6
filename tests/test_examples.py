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
