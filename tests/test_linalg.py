"""numpy.linalg rules: finite differences in both modes (order 2), float32, stacked
matrices, batched Jacobians (forward == reverse), closed forms, documented conventions."""
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.numpy import linalg as wla
from wengert.scipy import linalg as wsl


def _rng(seed=0):
    return np.random.default_rng(seed + 1234)  # not check_grad's own seed (0)


def _general(*shape, seed=0):
    """Well-conditioned square (stacks of) matrices."""
    a = _rng(seed).standard_normal(shape)
    return a + 3.0 * np.eye(shape[-1])


def _spd(*shape, seed=0):
    x = _rng(seed).standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _distinct_sym(*shape, seed=0):
    """Symmetric with well-separated eigenvalues."""
    rng = _rng(seed)
    n = shape[-1]
    q, _ = np.linalg.qr(rng.standard_normal(shape))
    w = np.arange(1.0, n + 1) * 1.5 + rng.uniform(0, 0.3, shape[:-1])
    return (q * w[..., None, :]) @ np.swapaxes(q, -1, -2)


def _rect(*shape, seed=0):
    return _rng(seed).standard_normal(shape)


def _complex_pair(*shape, seed=0):
    """Real matrices with a complex-conjugate pair of eigenvalues, well separated."""
    rng = _rng(seed)
    n = shape[-1]
    q = rng.standard_normal(shape) + 2.0 * np.eye(n)
    d = np.zeros(shape)
    d[..., 0, 0], d[..., 1, 1], d[..., 0, 1], d[..., 1, 0] = 1.0, 1.0, 1.5, -1.5
    d[..., 2, 2] = -2.0
    return q @ d @ np.linalg.inv(q)


def _positive_spectrum(*shape, seed=0):
    """Non-symmetric, with eigenvalues 1, 2, 3.5: a real principal square root."""
    q = _general(*shape, seed=seed)
    return (q * np.array([1.0, 2.0, 3.5])) @ np.linalg.inv(q)


def _band(l, u, *shape, seed=0):
    """Band storage ``(..., l + u + 1, m)`` of a diagonally dominant matrix; the unused
    corners hold junk, which SciPy ignores."""
    ab = _rng(seed).standard_normal(shape[:-1] + (l + u + 1, shape[-1]))
    ab[..., u, :] += l + u + 2.0
    return ab


def _dense(ab, l, u):
    """The matrix stored in ``ab``: ``a[i, j] = ab[u + i - j, j]``."""
    m = ab.shape[-1]
    i, j = np.indices((m, m))
    inside = (u + i - j >= 0) & (u + i - j <= l + u)
    return np.where(inside, ab[np.clip(u + i - j, 0, l + u), j], 0.0)


def _parts(z):
    return wnp.real(z), wnp.imag(z)


def _sq(x):
    return x * x


# name -> (function of arrays, arguments)
CASES = {
    "solve_vec": (wla.solve, lambda: (_general(3, 3), _rect(3, seed=1))),
    "solve_mat": (wla.solve, lambda: (_general(3, 3), _rect(3, 2, seed=1))),
    "solve_stack": (wla.solve, lambda: (_general(2, 3, 3), _rect(2, 3, 2, seed=1))),
    "solve_stack_vec": (wla.solve, lambda: (_general(2, 3, 3), _rect(3, seed=1))),
    "solve_broadcast": (wla.solve, lambda: (_general(3, 3), _rect(2, 3, 2, seed=1))),
    "inv": (wla.inv, lambda: (_general(2, 3, 3),)),
    "det": (wla.det, lambda: (_general(2, 3, 3),)),
    "slogdet": (lambda a: wla.slogdet(a)[1], lambda: (_general(2, 3, 3) - 4 * np.eye(3),)),
    "cholesky": (wla.cholesky, lambda: (_spd(3, 3),)),
    "cholesky_stack": (wla.cholesky, lambda: (_spd(2, 3, 3),)),
    "cholesky_upper": (lambda a: wla.cholesky(a, upper=True), lambda: (_spd(3, 3),)),
    "eigh_values": (lambda a: wla.eigh(a)[0], lambda: (_distinct_sym(2, 3, 3),)),
    "eigh_vectors": (lambda a: _sq(wla.eigh(a)[1]), lambda: (_distinct_sym(3, 3),)),
    "eigh_projector": (lambda a: (lambda w, v: (v * np.array([1.0, -2.0, 0.5], a.dtype)) @ v.mT)(
        *wla.eigh(a)), lambda: (_distinct_sym(2, 3, 3),)),
    "eigh_upper": (lambda a: _sq(wla.eigh(a, UPLO="U")[1]), lambda: (_distinct_sym(3, 3),)),
    "eigvalsh": (wla.eigvalsh, lambda: (_distinct_sym(3, 3),)),
    "eigvals_real_spectrum": (lambda a: wnp.real(wla.eigvals(a)), lambda: (_distinct_sym(3, 3)
                                                                              + 0.1 * _rect(3, 3),)),
    "eigvals_complex_pair": (lambda a: _parts(wla.eigvals(a)), lambda: (_complex_pair(2, 3, 3),)),
    "eig_gauge_invariant": (lambda a: (lambda w, v: (_parts(w), wnp.abs(v) ** 2,
                                                     wnp.real((v * np.array([1.0, 2.0, 3.0], a.dtype))
                                                               @ wla.inv(v))))(*wla.eig(a)),
                            lambda: (_complex_pair(3, 3),)),
    "svd_values": (lambda a: wla.svd(a, compute_uv=False), lambda: (_rect(2, 4, 3),)),
    "svd_square": (lambda a: _svd_loss(a), lambda: (_rect(3, 3),)),
    "svd_tall": (lambda a: _svd_loss(a), lambda: (_rect(4, 3),)),
    "svd_wide": (lambda a: _svd_loss(a), lambda: (_rect(2, 3, 4),)),
    "qr_tall": (lambda a: wla.qr(a), lambda: (_rect(4, 3),)),
    "qr_square": (lambda a: wla.qr(a), lambda: (_rect(2, 3, 3),)),
    "qr_wide": (lambda a: wla.qr(a), lambda: (_rect(3, 4),)),
    "pinv_tall": (wla.pinv, lambda: (_rect(4, 3),)),
    "pinv_wide": (wla.pinv, lambda: (_rect(2, 3, 4),)),
    "lstsq_vec": (lambda a, b: wla.lstsq(a, b)[:2], lambda: (_rect(4, 3), _rect(4, seed=1))),
    "lstsq_mat": (lambda a, b: wla.lstsq(a, b)[0], lambda: (_rect(4, 3), _rect(4, 2, seed=1))),
    "matrix_power_3": (lambda a: wla.matrix_power(a, 3), lambda: (_rect(3, 3),)),
    "matrix_power_-2": (lambda a: wla.matrix_power(a, -2), lambda: (_general(3, 3),)),
    "multi_dot": (lambda a, b, c, d: wla.multi_dot([a, b, c, d]),
                  lambda: (_rect(3, seed=1), _rect(3, 4, seed=2), _rect(4, 2, seed=3),
                           _rect(2, seed=4))),
    "norm_2": (wla.norm, lambda: (_rect(2, 3),)),
    "norm_vec_1": (lambda x: wla.norm(x, 1), lambda: (_rect(4),)),
    "norm_vec_3": (lambda x: wla.norm(x, 3, axis=0), lambda: (_rect(4, 2),)),
    "norm_vec_inf": (lambda x: wla.norm(x, np.inf, axis=-1, keepdims=True),
                     lambda: (_rect(2, 4),)),
    "norm_vec_-inf": (lambda x: wla.norm(x, -np.inf), lambda: (_rect(4),)),
    "norm_fro": (lambda x: wla.norm(x, "fro", axis=(0, 2)), lambda: (_rect(2, 3, 4),)),
    "norm_nuc": (lambda x: wla.norm(x, "nuc"), lambda: (_rect(3, 4),)),
    "norm_mat_2": (lambda x: wla.norm(x, 2, axis=(1, 2), keepdims=True),
                   lambda: (_rect(2, 4, 3),)),
    "norm_mat_-2": (lambda x: wla.norm(x, -2), lambda: (_rect(4, 3),)),
    "norm_mat_1": (lambda x: wla.norm(x, 1), lambda: (_rect(3, 4),)),
    "norm_mat_inf": (lambda x: wla.norm(x, np.inf, axis=(2, 0)), lambda: (_rect(3, 2, 4),)),
    "cond": (wla.cond, lambda: (_general(2, 3, 3),)),
    "cond_fro": (lambda a: wla.cond(a, "fro"), lambda: (_general(3, 3),)),
    "trace_diagonal": (lambda a: (wla.trace(a), wla.diagonal(a, offset=1)),
                       lambda: (_rect(2, 3, 3),)),
    "tensorinv": (lambda a: wla.tensorinv(a, ind=2), lambda: (_general(4, 4).reshape(2, 2, 4),)),
    "tensorsolve": (wla.tensorsolve, lambda: (_general(6, 6).reshape(2, 3, 6),
                                              _rect(2, 3, seed=1))),
    "scipy_solve_triangular": (lambda a, b: (wsl.solve_triangular(a, b, lower=True),
                                             wsl.solve_triangular(a, b, trans=1,
                                                                  unit_diagonal=True)),
                               lambda: (_general(3, 3), _rect(3, 2, seed=1))),
    "scipy_solve_triangular_vec": (lambda a, b: wsl.solve_triangular(a, b, trans="T"),
                                   lambda: (_general(3, 3), _rect(3, seed=1))),
    "scipy_cho_solve_lower": (lambda a, b: wsl.cho_solve(wsl.cho_factor(a, lower=True), b),
                              lambda: (_spd(3, 3), _rect(3, 2, seed=1))),
    "scipy_cho_solve_upper": (lambda a, b: wsl.cho_solve(wsl.cho_factor(a), b),
                              lambda: (_spd(3, 3), _rect(3, seed=1))),
    "scipy_cholesky": (wsl.cholesky, lambda: (_spd(3, 3),)),
    "scipy_expm": (wsl.expm, lambda: (0.5 * _rect(3, 3),)),
    "scipy_expm_stack": (wsl.expm, lambda: (0.5 * _rect(2, 3, 3),)),
    "scipy_solve_sylvester": (wsl.solve_sylvester, lambda: (_general(3, 3), _general(2, 2, seed=1),
                                                             _rect(3, 2, seed=2))),
    "scipy_sqrtm_spd": (wsl.sqrtm, lambda: (_spd(3, 3),)),
    "scipy_sqrtm_nonsymmetric": (wsl.sqrtm, lambda: (_positive_spectrum(3, 3),)),
    "scipy_sqrtm_stack": (wsl.sqrtm, lambda: (_spd(2, 3, 3),)),
    "scipy_sqrtm_complex": (lambda x, y: _parts(wsl.sqrtm(x + 1j * y)),
                            lambda: (_spd(3, 3), 0.5 * _rect(3, 3, seed=1))),
    "scipy_solve_banded": (lambda ab, b: wsl.solve_banded((1, 2), ab, b),
                           lambda: (_band(1, 2, 5), _rect(5, 2, seed=1))),
    "scipy_solve_banded_vec": (lambda ab, b: wsl.solve_banded((2, 1), ab, b),
                               lambda: (_band(2, 1, 5), _rect(5, seed=1))),
    "scipy_solve_banded_tridiagonal": (lambda ab, b: wsl.solve_banded((1, 1), ab, b),
                                       lambda: (_band(1, 1, 4), _rect(4, seed=1))),
    "scipy_solve_banded_stack": (lambda ab, b: wsl.solve_banded((0, 2), ab, b),
                                 lambda: (_band(0, 2, 2, 4), _rect(2, 4, 3, seed=1))),
    "scipy_solve_pos": (lambda a, b: wsl.solve(a, b, assume_a="pos"),
                        lambda: (_spd(3, 3), _rect(3, seed=1))),
    "vector_norm": (lambda x: wla.vector_norm(x, axis=(0, 1), ord=4), lambda: (_rect(2, 3),)),
    "matrix_norm": (lambda x: wla.matrix_norm(x, ord=-1), lambda: (_rect(2, 3, 3),)),
}


def _svd_loss(a):
    """Gauge-invariant functions of the factors: values, squares, a weighted reconstruction."""
    u, s, vh = wla.svd(a, full_matrices=False)
    k = s.shape[-1]
    c = np.linspace(1.0, 2.0, k).astype(a.dtype)
    return s, _sq(u), _sq(vh), (u * c) @ vh


NONSMOOTH = {n for n in CASES if n.startswith("norm_") and n.split("_")[-1] in
             ("1", "inf", "-inf")} | {"matrix_norm"}


def _cast(args, dtype):
    return tuple(a.astype(dtype) for a in args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grad_float64(name):
    fn, make = CASES[name]
    args = make()
    order = 1 if name in NONSMOOTH else 2
    wg.check_grad(fn, *args, order=order, modes=("forward", "reverse"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grad_float32_keeps_dtype(name):
    fn, make = CASES[name]
    args = _cast(make(), np.float32)
    wg.check_grad(fn, *args, order=1, modes=("forward", "reverse"))
    out = fn(*args)
    for leaf in wg.tree.flatten(out)[0]:
        assert leaf.dtype == np.float32, name
    grads = wg.grad(lambda *xs: _total(fn(*xs)), argnums=tuple(range(len(args))))(*args)
    for g in grads:
        assert g.dtype == np.float32, name


def _total(out):
    leaves = wg.tree.flatten(out)[0]
    t = 0.0
    for leaf in leaves:
        t = t + wnp.sum(leaf)
    return t


@pytest.mark.parametrize("name", sorted(CASES))
def test_jacobian_forward_equals_reverse(name):
    fn, make = CASES[name]
    args = make()
    nums = tuple(range(len(args)))
    jf = wg.jacobian(fn, argnums=nums, mode="forward")(*args)
    jr = wg.jacobian(fn, argnums=nums, mode="reverse")(*args)
    lf, lr = wg.tree.flatten(jf)[0], wg.tree.flatten(jr)[0]
    assert len(lf) == len(lr)
    for a, b in zip(lf, lr):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


def test_values_match_numpy():
    a, b = _general(2, 3, 3), _rect(2, 3, 2, seed=1)

    def check(f, *xs):
        got = wg.jvp(f, xs, xs)[0]
        want = f(*xs)
        for x, y in zip(wg.tree.flatten(got)[0], wg.tree.flatten(want)[0]):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12)

    check(wla.solve, a, b)
    check(wla.inv, a)
    check(wla.slogdet, a)
    check(wla.eigh, _distinct_sym(3, 3))
    check(lambda a: wla.svd(a, full_matrices=False), _rect(4, 3))
    check(wla.qr, _rect(4, 3))
    check(wla.qr, _rect(3, 5))
    check(lambda x: wla.norm(x, "nuc"), _rect(3, 4))
    check(lambda x: wla.norm(x, 3, axis=1), _rect(3, 4))
    assert isinstance(wla.slogdet(a), type(np.linalg.slogdet(a)))


# -- closed forms ----------------------------------------------------------------------------------


def test_logdet_gradient_is_inverse_transpose():
    a = _general(4, 4) - 3.5 * np.eye(4)
    for mode_grad in (wg.grad(lambda a: wla.slogdet(a)[1]),
                      lambda a: wg.jacobian(lambda a: wla.slogdet(a)[1], mode="forward")(a)):
        np.testing.assert_allclose(mode_grad(a), np.linalg.inv(a).T, rtol=1e-10)
    np.testing.assert_allclose(wg.grad(lambda a: wnp.log(wnp.abs(wla.det(a))))(a),
                               np.linalg.inv(a).T, rtol=1e-10)


def test_trace_inv_product_gradient():
    a, b = _general(3, 3), _rect(3, 3, seed=5)
    ai = np.linalg.inv(a)
    g = wg.grad(lambda a: wnp.sum(wla.inv(a) * b.T))(a)  # tr(inv(a) b)
    np.testing.assert_allclose(g, -(ai @ b @ ai).T, rtol=1e-10)


def test_eigenvalue_gradient_is_outer_product_of_vectors():
    a = _distinct_sym(4, 4)
    w, v = np.linalg.eigh(a)
    g = wg.grad(lambda a: wla.eigvalsh(a)[-1])(a)
    want = np.outer(v[:, -1], v[:, -1])
    np.testing.assert_allclose(g, np.tril(want + want.T) - np.diag(np.diag(want)), atol=1e-10)
    # symmetric inputs built from parameters: the symmetrised gradient (as JAX, PyTorch)
    x = _rect(4, 4)
    gx = wg.grad(lambda x: wla.eigvalsh(x + x.T)[-1])(x)
    w2, v2 = np.linalg.eigh(x + x.T)
    np.testing.assert_allclose(gx, 2 * np.outer(v2[:, -1], v2[:, -1]), atol=1e-10)


def test_cholesky_reads_lower_triangle_and_logdet():
    a = _spd(3, 3)
    noisy = a + np.triu(_rect(3, 3), 1)  # numpy ignores the strict upper triangle
    np.testing.assert_allclose(wla.cholesky(noisy), np.linalg.cholesky(a))
    g = wg.grad(lambda a: wnp.sum(wla.cholesky(a)))(a)
    assert np.all(np.triu(g, 1) == 0)
    # 2 sum(log diag L) = log det A
    logdet = lambda a: 2.0 * wnp.sum(wnp.log(wnp.sum(wla.cholesky(a) * np.eye(3), axis=-1)))
    x = _rect(3, 3)
    param = lambda x: x @ x.T + 3.0 * np.eye(3)
    np.testing.assert_allclose(
        wg.grad(lambda x: logdet(param(x)))(x),
        wg.grad(lambda x: wla.slogdet(param(x))[1])(x), rtol=1e-10)


def test_svd_reconstruction_identity():
    a = _rect(4, 3)
    g = wg.jacobian(lambda a: (lambda u, s, vh: (u * s) @ vh)(*wla.svd(a, full_matrices=False)),
                    mode="reverse")(a)
    np.testing.assert_allclose(g.reshape(12, 12), np.eye(12), atol=1e-10)


def test_svd_full_matrices_and_qr_complete_need_square():
    with pytest.raises(NotImplementedError, match="full_matrices=False"):
        wg.grad(lambda a: wnp.sum(wla.svd(a)[0]))(_rect(4, 3))
    # square: full == reduced
    wg.check_grad(lambda a: wla.svd(a)[1], _rect(3, 3))


# -- documented conventions -------------------------------------------------------------------------


def test_norm_at_zero_has_zero_gradient():
    z = np.zeros(3)
    for f in (wla.norm, lambda x: wla.norm(x, 3), lambda x: wla.norm(x, 1),
              lambda x: wla.norm(wnp.reshape(x, (1, 3)), "fro")):
        np.testing.assert_array_equal(wg.grad(f)(z), np.zeros(3))
        np.testing.assert_array_equal(wg.jacobian(f, mode="forward")(z), np.zeros(3))


def test_degenerate_eigenvalues_give_inf_nan_not_an_exception():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = wg.grad(lambda a: wnp.sum(wla.eigh(a)[1] * np.arange(9.0).reshape(3, 3)))(np.eye(3))
    assert not np.all(np.isfinite(g))
    # eigenvalues alone are fine at degenerate points
    assert np.all(np.isfinite(wg.grad(lambda a: wnp.sum(wla.eigvalsh(a)))(np.eye(3))))


def test_numpy_linalg_dispatches_to_wengert():
    a, b = _general(3, 3), _rect(3, seed=1)
    g_np = wg.grad(lambda a: np.sum(np.linalg.solve(a, b)))(a)
    g_w = wg.grad(lambda a: wnp.sum(wla.solve(a, b)))(a)
    np.testing.assert_allclose(g_np, g_w)
    for f in (np.linalg.inv, np.linalg.det, lambda a: np.linalg.slogdet(a)[1],
              lambda a: np.linalg.norm(a, "nuc"), np.linalg.cholesky,
              lambda a: np.linalg.eigh(a)[0], np.linalg.pinv):
        wg.jacobian(f)(_spd(3, 3))


def test_plain_values_pass_through():
    a = _general(3, 3)
    assert wla.cond(a) == np.linalg.cond(a)
    assert wla.matrix_rank(a) == 3
    np.testing.assert_array_equal(wla.matrix_power(a, 0), np.eye(3))
    assert wla.LinAlgError is np.linalg.LinAlgError
    w, v = wla.eig(a)  # plain: NumPy's result, real when the spectrum is
    assert w.dtype == np.linalg.eig(a)[0].dtype


def test_expm_derivative_closed_form():
    # for commuting directions, d/dt expm(a + t a) = a expm(a)
    a = 0.5 * _rect(3, 3)
    np.testing.assert_allclose(wg.jvp(wsl.expm, (a,), (a,))[1], a @ wsl.expm(a), atol=1e-12)
    # d/da trace(expm(a)) = expm(a).T
    np.testing.assert_allclose(wg.grad(lambda a: wnp.trace(wsl.expm(a)))(a), wsl.expm(a).T,
                               rtol=1e-10)


def test_det_gradient_at_a_singular_matrix_is_the_cofactor_matrix():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])  # rank 2
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1))
                     for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(wg.grad(wla.det)(a), cof, atol=1e-12)
    np.testing.assert_allclose(wg.jacobian(wla.det, mode="forward")(a), cof, atol=1e-12)
    wg.check_grad(wla.det, a)


# -- scipy.linalg: solve_sylvester, sqrtm, solve_banded -------------------------------------------


def test_sylvester_sqrtm_banded_values_are_scipys():
    import scipy.linalg as sl
    a, b, q = _general(3, 3), _general(2, 2, seed=1), _rect(3, 2, seed=2)
    ab, rhs, s = _band(1, 2, 5), _rect(5, 2, seed=1), _positive_spectrum(3, 3)
    cases = [(wsl.solve_sylvester, sl.solve_sylvester, (a, b, q)),
             (wsl.sqrtm, sl.sqrtm, (s,)), (wsl.sqrtm, sl.sqrtm, (_spd(2, 3, 3),)),
             (lambda *x: wsl.solve_banded((1, 2), *x), lambda *x: sl.solve_banded((1, 2), *x),
              (ab, rhs)),
             (lambda *x: wsl.solve_banded((1, 2), *x), lambda *x: sl.solve_banded((1, 2), *x),
              (ab, rhs[:, 0]))]
    for f, ref, xs in cases:
        want = ref(*xs)
        np.testing.assert_array_equal(f(*xs), want)                 # plain: SciPy's call
        np.testing.assert_array_equal(wg.jvp(f, xs, xs)[0], want)  # traced: the same value
    from wengert import coverage
    rows = {(r.module, r.name): r for r in coverage.coverage_rows()}
    for name in ("solve_sylvester", "sqrtm", "solve_banded"):
        assert rows[("scipy.linalg", name)][2:] == ("primitive", True, True)


def test_solve_sylvester_closed_forms():
    a, q = _general(3, 3), _rect(3, 2, seed=2)
    beta = 0.7
    b = beta * np.eye(2)  # a x + beta x = q: x = (a + beta I)^-1 q
    ab = a + beta * np.eye(3)
    x = wsl.solve_sylvester(a, b, q)
    np.testing.assert_allclose(x, np.linalg.solve(ab, q), rtol=1e-12)
    # d/dbeta: a dx + dx beta = -x, so dx = -(a + beta I)^-1 x
    along = lambda t: wsl.solve_sylvester(a, t * np.eye(2), q)
    for dx in (wg.jvp(lambda b: wsl.solve_sylvester(a, b, q), (b,), (np.eye(2),))[1],
               wg.jacobian(along, mode="reverse")(beta)):
        np.testing.assert_allclose(dx, -np.linalg.solve(ab, x), rtol=1e-10)
    # with b = 0 it is a plain solve, gradients included
    w = _rect(3, 2, seed=3)
    z = np.zeros((2, 2))
    g_syl = wg.grad(lambda a, q: wnp.sum(w * wsl.solve_sylvester(a, z, q)), argnums=(0, 1))(a, q)
    g_sol = wg.grad(lambda a, q: wnp.sum(w * wla.solve(a, q)), argnums=(0, 1))(a, q)
    for u, v in zip(g_syl, g_sol):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-14)


def test_sqrtm_derivative_closed_forms():
    import scipy.linalg as sl
    a = _spd(3, 3)
    s = sl.sqrtm(a)
    si = np.linalg.inv(s)
    # commuting directions: s ds + ds s = da gives ds = 0.5 s^-1 da
    np.testing.assert_allclose(wg.jvp(wsl.sqrtm, (a,), (np.eye(3),))[1], 0.5 * si, atol=1e-12)
    np.testing.assert_allclose(wg.jvp(wsl.sqrtm, (a,), (a,))[1], 0.5 * s, atol=1e-12)
    # d/da trace(sqrtm(a)) = 0.5 s^-T, both modes
    tr = lambda a: wnp.trace(wsl.sqrtm(a))
    np.testing.assert_allclose(wg.grad(tr)(a), 0.5 * si.T, rtol=1e-10)
    np.testing.assert_allclose(wg.jacobian(tr, mode="forward")(a), 0.5 * si.T, rtol=1e-10)
    # non-symmetric, diagonalisable a = v diag(w) v^-1: ds = v (F * (v^-1 e v)) v^-1,
    # F[i, j] = 1 / (sqrt(w_i) + sqrt(w_j))
    n = _positive_spectrum(3, 3)
    e = _rect(3, 3, seed=4)
    w, v = np.linalg.eig(n)
    w, v = w.real, v.real
    vi = np.linalg.inv(v)
    want = v @ ((vi @ e @ v) / (np.sqrt(w)[:, None] + np.sqrt(w))) @ vi
    np.testing.assert_allclose(wg.jvp(wsl.sqrtm, (n,), (e,))[1], want, atol=1e-12)
    # third order along the identity: d3/dt3 trace(sqrt(a + t I)) = sum 3/8 w^-5/2
    h = lambda t: wnp.trace(wsl.sqrtm(a + t * np.eye(3)))
    np.testing.assert_allclose(wg.derivative(h, order=3)(0.0),
                               np.sum(0.375 * np.linalg.eigvalsh(a) ** -2.5), rtol=1e-9)


def test_sqrtm_of_a_real_matrix_without_a_real_root():
    import scipy.linalg as sl
    m = np.array([[-2.0, 1.0], [0.5, 3.0]])  # a negative eigenvalue
    assert np.iscomplexobj(wsl.sqrtm(m)) and np.iscomplexobj(sl.sqrtm(m))  # plain: SciPy's
    # traced too: SciPy's complex root (as autograd's), not an error
    out = wg.vjp(wsl.sqrtm, m)[0]
    assert np.iscomplexobj(out)
    np.testing.assert_allclose(out, sl.sqrtm(m), rtol=1e-12)
    # differentiated, both modes, to second order; the gradient of a real loss is real
    wg.check_grad(lambda m: _parts(wsl.sqrtm(m)), m, order=2, modes=("forward", "reverse"))
    g = wg.grad(lambda m: wnp.sum(wnp.real(wsl.sqrtm(m)) ** 2 + wnp.imag(wsl.sqrtm(m))))(m)
    assert g.dtype == np.float64
    # closed form: m = v diag(w) v^-1 with w real, one negative: ds = v (F * (v^-1 e v)) v^-1,
    # F[i, j] = 1 / (sqrt(w_i) + sqrt(w_j)), the principal (complex) square roots
    w, v = np.linalg.eig(m)
    w, v = w.real, v.real
    vi = np.linalg.inv(v)
    e = np.array([[0.3, -1.0], [0.7, 0.2]])
    r = np.sqrt(w.astype(complex))
    want = v @ ((vi @ e @ v) / (r[:, None] + r)) @ vi
    np.testing.assert_allclose(wg.jvp(wsl.sqrtm, (m,), (e,))[1], want, atol=1e-12)
    # the reverse mode's cotangent is the real part of the forward map's transpose
    gbar = np.array([[1.0 - 2.0j, 0.5j], [0.25, -1.0 + 1.0j]])
    ct = wg.vjp(wsl.sqrtm, m)[1](gbar)[0]
    assert ct.dtype == np.float64
    np.testing.assert_allclose(np.sum(ct * e), np.real(np.sum(gbar * want)), rtol=1e-12)
    # the same as the complex matrix's derivative along real directions
    wg.check_grad(lambda m: _parts(wsl.sqrtm(m + 0j)), m, order=2, modes=("forward", "reverse"))
    with pytest.raises(NotImplementedError, match="disp=False"):
        wg.grad(lambda a: wnp.sum(wsl.sqrtm(a, disp=False)))(_spd(2, 2))


def test_solve_banded_is_the_dense_solve_restricted_to_the_band():
    l, u, m = 2, 1, 6
    ab, b, w = _band(l, u, m), _rect(m, 2, seed=1), _rect(m, 2, seed=2)
    a = _dense(ab, l, u)
    np.testing.assert_allclose(wsl.solve_banded((l, u), ab, b), np.linalg.solve(a, b), rtol=1e-12)
    loss = lambda ab, b: wnp.sum(w * wsl.solve_banded((l, u), ab, b))
    g_ab, g_b = wg.grad(loss, argnums=(0, 1))(ab, b)
    g_a, g_b_dense = wg.grad(lambda a, b: wnp.sum(w * wla.solve(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(g_b, g_b_dense, rtol=1e-10)
    i, j = np.indices((m, m))
    inside = (u + i - j >= 0) & (u + i - j <= l + u)
    want = np.zeros_like(ab)
    want[(u + i - j)[inside], j[inside]] = g_a[inside]
    np.testing.assert_allclose(g_ab, want, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(wg.jacobian(lambda ab: loss(ab, b), mode="forward")(ab), want,
                               rtol=1e-10, atol=1e-14)
    # the unused corners (row i = r + j - u of a out of range): zero gradient, and junk
    # there changes nothing
    r, j = np.indices(ab.shape)
    corners = (r + j - u < 0) | (r + j - u >= m)
    assert corners.sum() == l * (l + 1) // 2 + u * (u + 1) // 2
    assert np.all(g_ab[corners] == 0)
    junk = np.where(corners, 1e3, ab)
    np.testing.assert_array_equal(wg.grad(loss)(junk, b), g_ab)
