"""The root finders' cache of generated pullbacks (wengert/scipy/_solving.py): a later call
reuses an earlier call's code only when everything its residual reads is the same, so each
call gets its own derivative: closed-over arrays (replaced or changed in place), floats,
globals, attributes of objects, branches, and threads running at once."""

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy import _solving, optimize

SCALE = 1.0   # a global the residual reads: changing it changes the derivative


@pytest.fixture(autouse=True)
def cold_cache():
    _solving._CACHE.clear()
    yield
    _solving._CACHE.clear()


def _matrix(n, seed):
    m = np.random.default_rng(seed).standard_normal((n, n)) / np.sqrt(n)
    return m @ m.T + np.eye(n)


def _root_grad(a, x):
    """d sum(x) / dθ for a x + 0.1 x³ = θ: J⁻ᵀ 1 with J = a + 0.3 diag(x²)."""
    return np.linalg.solve((a + np.diag(0.3 * x ** 2)).T, np.ones(x.size))


def _loss(a):
    def solve(theta):
        return optimize.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(theta.size),
                             tol=1e-12).x
    return solve


def test_cache_is_used():
    theta = np.linspace(-1.0, 1.0, 5)
    a = _matrix(5, 0)
    for _ in range(3):
        wg.grad(lambda t: wnp.sum(_loss(a)(t)))(theta)
    assert len(_solving._CACHE) == 1


def test_closed_over_arrays_each_their_own_gradient():
    theta = np.linspace(-1.0, 1.0, 6)
    a = _matrix(6, 1)
    b = _matrix(6, 2)
    for m in (a, b, a):   # the same code, another closed-over matrix
        g = wg.grad(lambda t: wnp.sum(_loss(m)(t)))(theta)
        x = _loss(m)(theta)
        np.testing.assert_allclose(g, _root_grad(m, x), rtol=1e-9, atol=1e-12)
    c = a.copy()
    f = _loss(c)   # the same function object, its array changed in place between calls
    for scale in (1.0, 3.0):
        c[...] = scale * a
        g = wg.grad(lambda t: wnp.sum(f(t)))(theta)
        np.testing.assert_allclose(g, _root_grad(c, f(theta)), rtol=1e-9, atol=1e-12)


def _cubic(theta, c):
    return optimize.brentq(lambda x: c * x ** 3 + SCALE * x - theta, -10.0, 10.0, xtol=1e-14)


def test_large_closed_over_array_changed_in_place():
    # keyed by a digest of its bytes, not a copy: a change of one entry is seen
    n = 100   # 80 kB, above the digest threshold
    a = _matrix(n, 3)
    theta = np.linspace(-1.0, 1.0, n)
    f = _loss(a)
    for bump in (0.0, 0.5):
        a[0, 0] += bump
        g = wg.grad(lambda t: wnp.sum(f(t)))(theta)
        np.testing.assert_allclose(g, _root_grad(a, f(theta)), rtol=1e-8, atol=1e-12)


def test_closed_over_float_and_global():
    global SCALE
    try:
        for c, scale in ((1.0, 1.0), (2.0, 1.0), (2.0, 4.0), (1.0, 1.0)):
            SCALE = scale
            x = _cubic(2.0, c)
            got = wg.grad(_cubic)(2.0, c)
            assert got == pytest.approx(1.0 / (3 * c * x ** 2 + SCALE), rel=1e-10)
    finally:
        SCALE = 1.0
    assert len(_solving._CACHE) == 3


def test_attribute_of_an_object():
    class Box:
        k = 1.0
    box = Box()

    def solve(theta):
        return optimize.brentq(lambda x: x ** 3 + box.k * x - theta, -10.0, 10.0,
                               xtol=1e-14)
    for k in (1.0, 5.0, 1.0):
        box.k = k
        x = solve(2.0)
        assert wg.grad(solve)(2.0) == pytest.approx(1.0 / (3 * x ** 2 + k), rel=1e-10)


def test_traced_values_by_position():
    # the same code and as many traced values, wired to other places of the residual
    def solve(theta, phi, wiring):
        p, q, r = (theta, phi, theta) if wiring else (theta, theta, phi)
        return optimize.brentq(lambda x: x ** 3 + p * x + q * x ** 2 - r, -10.0, 10.0,
                               xtol=1e-14)
    for wiring in (False, True, False, True):
        g = wg.grad(solve, argnums=(0, 1))(2.0, 3.0, wiring)
        x = solve(2.0, 3.0, wiring)
        p, q, r = (2.0, 3.0, 2.0) if wiring else (2.0, 2.0, 3.0)
        fx = 3 * x ** 2 + p + 2 * q * x
        dp, dq, dr = -x / fx, -x ** 2 / fx, 1 / fx
        want = (dp + dr, dq) if wiring else (dp + dq, dr)
        np.testing.assert_allclose(g, want, rtol=1e-10)


def test_a_branch_on_the_solution_is_taken_again():
    def solve(theta):
        def f(x):
            return x ** 3 - theta if x > 0 else 2 * x - theta
        return optimize.brentq(f, -10.0, 10.0, xtol=1e-14)
    for theta, want in ((8.0, 1 / 12), (-4.0, 0.5), (8.0, 1 / 12), (-4.0, 0.5)):
        assert wg.grad(solve)(theta) == pytest.approx(want, rel=1e-10)


def test_threads_each_their_own_gradient():
    n, workers = 5, 8
    mats = [_matrix(n, 10 + i % 2) for i in range(workers)]   # two keys, four threads each
    thetas = [np.linspace(-1.0, 1.0, n) * (1 + 0.1 * i) for i in range(workers)]
    from in_threads import in_threads
    results = in_threads(lambda i: [wg.grad(lambda t: wnp.sum(_loss(mats[i])(t)))(thetas[i])
                                    for _ in range(5)], workers)
    for i in range(workers):
        want = _root_grad(mats[i], _loss(mats[i])(thetas[i]))
        for g in results[i]:
            np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-12)


def test_nested_and_forward_still_right():
    # second derivatives and forward mode do not use the cache: they agree with it
    def solve(theta):
        return optimize.brentq(lambda x: x ** 3 + x - theta, -10.0, 10.0, xtol=1e-14)
    x = solve(2.0)
    d1 = 1 / (3 * x ** 2 + 1)
    d2 = -6 * x * d1 ** 3
    assert wg.grad(solve)(2.0) == pytest.approx(d1, rel=1e-10)
    assert wg.grad(wg.grad(solve))(2.0) == pytest.approx(d2, rel=1e-7)
    assert wg.jvp(solve, (2.0,), (1.0,))[1] == pytest.approx(d1, rel=1e-10)


def test_a_nonsymmetric_jacobian_cached_and_not():
    # the generated pullback solves with Jᵀ (J's columns, stacked): a symmetric J would not
    # tell J from Jᵀ, so a matrix that is not, first traced then from the cache
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 5)) + 5.0 * np.eye(5)
    w = rng.standard_normal(5)
    theta = rng.standard_normal(5)

    def loss(t):
        return wnp.sum(w * optimize.root(lambda x: a @ x + 0.1 * x ** 3 - t, np.zeros(5),
                                         tol=1e-13).x)
    x = optimize.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(5), tol=1e-13).x
    want = np.linalg.solve((a + np.diag(0.3 * x ** 2)).T, w)
    for _ in range(2):
        np.testing.assert_allclose(wg.grad(loss)(theta), want, rtol=1e-10, atol=1e-13)
    assert len(_solving._CACHE) == 1
