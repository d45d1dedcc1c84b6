"""Complex numbers end to end (API.md §9, docs/complex.md).

The reference for a real ``f`` of complex ``z`` is the same ``f`` of two real arrays,
``F(x, y) = f(x + i y)``, differentiated by wengert on reals: ``grad f = ∂F/∂x + i ∂F/∂y``
(steepest ascent), and the Hessian-vector product is the real Hessian of ``F`` applied to
``(Re v, Im v)``, put back together the same way.
"""
import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

RNG = np.random.default_rng(21)
Z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
A = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
V = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)

# real-valued functions of complex z (not holomorphic)
REAL_FUNCTIONS = {
    "abs2": lambda z: wnp.sum(wnp.abs(z) ** 2),
    "abs_sin": lambda z: wnp.sum(wnp.abs(wnp.sin(z))),
    "angle": lambda z: wnp.sum(wnp.angle(z) * wnp.real(z)),
    "re_im": lambda z: wnp.sum(wnp.real(z) ** 2 * wnp.imag(z)),
    "quadratic": lambda z: wnp.real(wnp.vdot(z, A @ z)),
    "norm": lambda z: wnp.linalg.norm(wnp.exp(z)),
    "logdet": lambda z: wnp.linalg.slogdet(A + wnp.diag(z))[1],
    "fft_power": lambda z: wnp.sum(wnp.abs(wnp.fft.fft(z * z)) ** 2),
    "solve": lambda z: wnp.sum(wnp.abs(wnp.linalg.solve(A + wnp.diag(z), z))),
    "var": lambda z: wnp.var(wnp.log(z)),
}

# holomorphic functions and their derivatives in closed form
HOLOMORPHIC = {
    "exp": (wnp.exp, np.exp),
    "sin": (wnp.sin, np.cos),
    "log": (wnp.log, lambda z: 1 / z),
    "power": (lambda z: z ** 2.5, lambda z: 2.5 * z ** 1.5),
    "zpowz": (lambda z: z ** z, lambda z: z ** z * (np.log(z) + 1)),
    "sqrt": (wnp.sqrt, lambda z: 0.5 / np.sqrt(z)),
    "tan": (wnp.tan, lambda z: 1 / np.cos(z) ** 2),
    "arccosh": (wnp.arccosh, lambda z: 1 / (np.sqrt(z - 1) * np.sqrt(z + 1))),
    "reciprocal": (wnp.reciprocal, lambda z: -1 / z ** 2),
}


def split_reference(f):
    """``F(x, y) = f(x + i y)`` on real arrays."""
    return lambda x, y: f(x + 1j * y)


# -- the convention ----------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(REAL_FUNCTIONS))
def test_grad_is_steepest_ascent(name):
    f = REAL_FUNCTIONS[name]
    gx, gy = wg.grad(split_reference(f), argnums=(0, 1))(Z.real, Z.imag)
    g = wg.grad(f)(Z)
    assert g.dtype == Z.dtype
    np.testing.assert_allclose(g, gx + 1j * gy, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(REAL_FUNCTIONS))
def test_vjp_is_the_transpose(name):
    """pullback(1) of a real f is ∂f/∂x - i ∂f/∂y: the conjugate of grad."""
    f = REAL_FUNCTIONS[name]
    out, pb = wg.vjp(f, Z)
    np.testing.assert_allclose(pb(1.0)[0], np.conj(wg.grad(f)(Z)), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("name", sorted(REAL_FUNCTIONS))
def test_check_grad_complex_inputs(name):
    wg.check_grad(REAL_FUNCTIONS[name], Z, order=2)


def test_gradient_descent_converges():
    a = np.array([3.0 - 1.0j, -0.5 + 2.0j])
    z = np.zeros(2, complex)
    loss = lambda z: wnp.sum(wnp.abs(z - a) ** 2)  # noqa: E731
    for _ in range(200):
        z = z - 0.1 * wg.grad(loss)(z)
    np.testing.assert_allclose(z, a, atol=1e-12)
    assert loss(z) < 1e-20


def test_complex_scalar_keeps_its_type():
    g = wg.grad(lambda z: wnp.abs(z) ** 2)(1.0 + 2.0j)
    assert type(g) is complex and g == 2.0 + 4.0j
    v, g = wg.value_and_grad(lambda z: wnp.abs(z) ** 2)(1.0 + 2.0j)
    assert v == pytest.approx(5.0) and type(g) is complex
    assert wg.grad(wnp.exp, holomorphic=True)(1j) == pytest.approx(np.exp(1j))


def test_complex64_kept():
    z = Z.astype(np.complex64)
    g = wg.grad(lambda z: wnp.sum(wnp.abs(z) ** 2))(z)
    assert g.dtype == np.complex64
    np.testing.assert_allclose(g, 2 * z, rtol=1e-6)


# -- holomorphic derivatives ---------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(HOLOMORPHIC))
def test_holomorphic_derivatives(name):
    f, df = HOLOMORPHIC[name]
    want = df(Z)
    g = wg.grad(lambda z: wnp.sum(f(z)), holomorphic=True)(Z)
    np.testing.assert_allclose(g, want, rtol=1e-10)
    np.testing.assert_allclose(wg.vjp(f, Z)[1](np.ones(3, complex))[0], want, rtol=1e-10)
    np.testing.assert_allclose(wg.jvp(f, (Z,), (np.ones(3, complex),))[1], want, rtol=1e-10)
    for mode in ("forward", "reverse"):
        J = wg.jacobian(f, mode=mode, holomorphic=True)(Z)
        np.testing.assert_allclose(J, np.diag(want), rtol=1e-10, atol=1e-14)
    wg.check_grad(f, Z, order=2)
    z0 = complex(Z[0])
    assert wg.derivative(lambda z: f(z))(z0) == pytest.approx(complex(df(z0)), rel=1e-10)


def test_holomorphic_linear_algebra_and_fft():
    B = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    b = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    for mode in ("forward", "reverse"):
        J = wg.jacobian(lambda z: A @ z, mode=mode, holomorphic=True)(Z)
        np.testing.assert_allclose(J, A, rtol=1e-13)
        # x = solve(A + diag(z), b): dx/dz_j = -M⁻¹ e_j x_j
        M = A + np.diag(Z)
        x = np.linalg.solve(M, b)
        J = wg.jacobian(lambda z: wnp.linalg.solve(A + wnp.diag(z), b), mode=mode,
                        holomorphic=True)(Z)
        np.testing.assert_allclose(J, -np.linalg.inv(M) * x, rtol=1e-10)
        J = wg.jacobian(wnp.fft.fft, mode=mode, holomorphic=True)(Z)
        np.testing.assert_allclose(J, np.fft.fft(np.eye(3), axis=0), atol=1e-13)
        J = wg.jacobian(wnp.fft.ifft, mode=mode, holomorphic=True)(Z)
        np.testing.assert_allclose(J, np.fft.ifft(np.eye(3), axis=0), atol=1e-13)
        # d(B @ Z) / dB: the holomorphic Jacobian of a matrix product in its matrix
        J = wg.jacobian(lambda m: m @ Z, mode=mode, holomorphic=True)(B)
        np.testing.assert_allclose(J, np.einsum("ij,k->ijk", np.eye(3), Z), atol=1e-14)
    d = wg.grad(lambda z: wnp.linalg.det(A + wnp.diag(z)), holomorphic=True)(Z)
    M = A + np.diag(Z)
    np.testing.assert_allclose(d, np.linalg.det(M) * np.diag(np.linalg.inv(M)), rtol=1e-10)
    for f in (lambda z: wnp.linalg.inv(A + wnp.diag(z)), lambda z: wnp.fft.fft2(wnp.outer(z, z)),
              lambda z: wnp.vdot(z, A @ z), lambda z: wnp.linalg.slogdet(A + wnp.diag(z))[0]):
        wg.check_grad(f, Z, order=2)


def test_holomorphic_hessian():
    H = wg.hessian(lambda z: wnp.sum(wnp.exp(z) * z), holomorphic=True)(Z)
    np.testing.assert_allclose(H, np.diag(np.exp(Z) * (Z + 2)), rtol=1e-12)


def test_taylor_of_holomorphic_function():
    c = wg.taylor(wnp.exp, Z, V, 3)
    for k, ck in enumerate(c):
        np.testing.assert_allclose(ck, np.exp(Z) * V ** k / math.factorial(k), rtol=1e-12)


def test_taylor_of_real_function_of_complex_input():
    """t ↦ |z + t v|²: Taylor mode through conj and abs, a real polynomial in t."""
    c = wg.taylor(lambda z: wnp.sum(wnp.abs(z) ** 2), Z, V, 3)
    want = [np.sum(np.abs(Z) ** 2), 2 * np.sum((np.conj(Z) * V).real), np.sum(np.abs(V) ** 2), 0.0]
    np.testing.assert_allclose(np.real(c), want, atol=1e-12)


# -- engines ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["abs2", "quadratic", "norm", "fft_power", "angle"])
def test_hvp_matches_real_hessian(name):
    f = REAL_FUNCTIONS[name]
    F = split_reference(f)
    H = wg.hessian(lambda xy: F(xy[:3], xy[3:]))(np.concatenate([Z.real, Z.imag]))
    hv = H @ np.concatenate([V.real, V.imag])
    np.testing.assert_allclose(wg.hvp(f, Z, V), hv[:3] + 1j * hv[3:], rtol=1e-9, atol=1e-12)


def test_dual_and_tape_directly():
    t = wg.Tape()
    z = t.var(Z)
    out = wnp.sum(wnp.abs(wnp.exp(z)) ** 2)
    adj = out.grad().wrt(z)  # the tape's own cotangent: the transpose convention
    np.testing.assert_allclose(np.conj(adj), 2 * np.abs(np.exp(Z)) ** 2, rtol=1e-12)
    d = wnp.exp(wg.Dual(Z, V))
    np.testing.assert_allclose(d.tangent, np.exp(Z) * V, rtol=1e-12)


def test_graph_and_compile():
    f = REAL_FUNCTIONS["quadratic"]
    g = wg.compile(wg.grad(f))
    np.testing.assert_allclose(g(Z), wg.grad(f)(Z), rtol=1e-12)
    Z2 = Z[::-1].copy()
    np.testing.assert_allclose(g(Z2), wg.grad(f)(Z2), rtol=1e-12)


def test_real_input_complex_output_jacobian():
    x = RNG.standard_normal(3)
    want = A * 1j * np.exp(1j * x)
    for mode in ("forward", "reverse"):
        J = wg.jacobian(lambda x: A @ wnp.exp(1j * x), mode=mode)(x)
        assert J.dtype.kind == "c"
        np.testing.assert_allclose(J, want, rtol=1e-12, atol=1e-14)


# -- what is refused, and says why ----------------------------------------------------------------
def test_complex_output_needs_holomorphic():
    with pytest.raises(TypeError, match="holomorphic=True"):
        wg.grad(lambda z: wnp.sum(wnp.exp(z)))(Z)
    with pytest.raises(TypeError, match="complex inputs"):
        wg.grad(lambda x: wnp.sum(wnp.exp(x)), holomorphic=True)(Z.real)
    with pytest.raises(TypeError, match="holomorphic=True"):
        wg.jacobian(wnp.abs)(Z)
    with pytest.raises(TypeError, match="wg.hvp"):
        wg.hessian(REAL_FUNCTIONS["abs2"])(Z)


def test_rules_for_real_matrices_refuse_complex():
    M = A @ A.conj().T + 3 * np.eye(3)
    for f in (lambda m: wnp.linalg.qr(m)[1], wnp.linalg.cholesky):
        with pytest.raises(NotImplementedError, match="real matrices"):
            wg.vjp(f, M)[1](np.ones_like(f(M)))


def test_source_mode_refuses_complex(tmp_path, monkeypatch):
    """Generated programs have no conjugates: a complex input is refused, not mis-signed."""
    (tmp_path / "cx_source_mod.py").write_text(
        "import wengert.numpy as wnp\n\ndef f(z):\n    return wnp.sum(wnp.abs(z) ** 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import cx_source_mod
    with pytest.raises(NotImplementedError, match="complex"):
        wg.source.grad(cx_source_mod.f)(Z)
    with pytest.raises(NotImplementedError, match="complex"):
        wg.source.jvp(cx_source_mod.f)((Z,), (V,))
    np.testing.assert_allclose(wg.source.grad(cx_source_mod.f)(Z.real), 2 * Z.real)


def test_reverse_jacobian_of_several_inputs_and_outputs():
    """A complex output among real ones, of two real inputs: the second sweep's imaginary
    parts land in the right blocks."""
    x, y = RNG.standard_normal(2), RNG.standard_normal(3)
    f = lambda x, y: (wnp.sum(x) * y, wnp.exp(1j * x) * wnp.sum(y))  # noqa: E731
    for mode in ("forward", "reverse"):
        (j1x, j1y), (j2x, j2y) = wg.jacobian(f, argnums=(0, 1), mode=mode)(x, y)
        np.testing.assert_allclose(j1x, np.outer(y, np.ones(2)))
        np.testing.assert_allclose(j1y, np.sum(x) * np.eye(3))
        np.testing.assert_allclose(j2x, np.diag(1j * np.exp(1j * x)) * np.sum(y))
        np.testing.assert_allclose(j2y, np.outer(np.exp(1j * x), np.ones(3)))


def test_sparse_derivatives_refuse_complex():
    with pytest.raises(NotImplementedError, match="real values"):
        wg.sparse_jacobian(wnp.exp)(Z)
    with pytest.raises(NotImplementedError, match="real values"):  # was: the real part only
        wg.sparse_jacobian(lambda x: wnp.exp(1j * x))(Z.real)
    with pytest.raises(NotImplementedError, match="real values"):
        wg.sparse_hessian(REAL_FUNCTIONS["abs2"])(Z)


# every family's rules on complex values, to second order, against finite differences in the
# real and imaginary parts (check_grad: jvp, vjp through the transpose, grad's convention)
RULES = {
    "exp": wnp.exp, "log": wnp.log, "sin": wnp.sin, "cos": wnp.cos, "tan": wnp.tan,
    "sinh": wnp.sinh, "cosh": wnp.cosh, "tanh": wnp.tanh, "arcsin": wnp.arcsin,
    "arccos": wnp.arccos, "arctan": wnp.arctan, "arcsinh": wnp.arcsinh, "arccosh": wnp.arccosh,
    "arctanh": wnp.arctanh, "sqrt": wnp.sqrt, "square": wnp.square, "reciprocal": wnp.reciprocal,
    "log1p": wnp.log1p, "expm1": wnp.expm1, "exp2": wnp.exp2, "log10": wnp.log10,
    "power": lambda z: z ** 2.5, "zpowz": lambda z: z ** z, "real_pow_z": lambda z: 2.0 ** z,
    "divide": lambda z: z / (z + 3), "real_times": lambda z: wnp.real(z) * z,
    "abs": wnp.abs, "angle": wnp.angle, "conj": lambda z: wnp.conj(z) * z,
    "imag": lambda z: wnp.imag(z) ** 2, "where": lambda z: wnp.where(wnp.real(z) > 0, z, 2 * z),
    "sum": wnp.sum, "prod": wnp.prod, "mean": wnp.mean, "cumsum": wnp.cumsum,
    "cumprod": wnp.cumprod, "var": wnp.var, "std": wnp.std, "max_abs": lambda z: wnp.max(wnp.abs(z)),
    "dot": lambda z: wnp.dot(z, A @ z), "vdot": lambda z: wnp.vdot(z, A @ z),
    "outer": lambda z: wnp.outer(z, z), "einsum": lambda z: wnp.einsum("ij,j->i", A, z),
    "kron": lambda z: wnp.kron(z, z), "trace": lambda z: wnp.trace(wnp.outer(z, z)),
    "norm": wnp.linalg.norm, "norm1": lambda z: wnp.linalg.norm(z, 1),
    "norm3": lambda z: wnp.linalg.norm(z, 3), "fro": lambda z: wnp.linalg.norm(wnp.outer(z, z)),
    "inv": lambda z: wnp.linalg.inv(A + wnp.diag(z)), "det": lambda z: wnp.linalg.det(A + wnp.diag(z)),
    "pinv": lambda z: wnp.linalg.pinv(A + wnp.diag(z)),
    "matrix_power": lambda z: wnp.linalg.matrix_power(A + wnp.diag(z), 3),
    "eigvals": lambda z: wnp.linalg.eigvals(A + wnp.diag(z)),
    "fft": wnp.fft.fft, "ifft": wnp.fft.ifft, "irfft": wnp.fft.irfft, "hfft": wnp.fft.hfft,
    "rfft": lambda z: wnp.fft.rfft(wnp.real(z) * wnp.imag(z)),
    "convolve": lambda z: wnp.convolve(z, A[0] * z), "polyval": lambda z: wnp.polyval(z, z),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_rules_on_complex_values(name):
    wg.check_grad(RULES[name], Z, order=2)


def test_jvp_refuses_a_complex_tangent_of_a_real_primal():
    with pytest.raises(TypeError, match="complex tangent for a real primal"):
        wg.jvp(wnp.exp, (Z.real,), (V,))
    np.testing.assert_allclose(wg.jvp(wnp.exp, (Z,), (Z.real,))[1], np.exp(Z) * Z.real)


def test_jacfwd_jacrev_take_holomorphic():
    for jac in (wg.jacfwd, wg.jacrev):
        np.testing.assert_allclose(jac(wnp.sin, holomorphic=True)(Z), np.diag(np.cos(Z)),
                                   rtol=1e-12, atol=1e-15)
        with pytest.raises(TypeError, match="holomorphic=True"):
            jac(wnp.sin)(Z)


# -- eigh, eigvalsh, svd and svdvals of complex matrices --------------------------------------------
def _gauge_free_svd(k):
    """What the SVD determines (its vectors only up to a phase shared by u_k and v_k): |u|, s, |vh|
    and the rank-one part u_k vh_k."""
    def f(m):
        u, s, vh = wnp.linalg.svd(m, full_matrices=False)
        return wnp.abs(u), s, wnp.abs(vh), u[..., :, k:k + 1] * vh[..., k:k + 1, :]
    return f


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 4)])
def test_complex_svd(shape):
    rng = np.random.default_rng(3)
    m = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    wg.check_grad(_gauge_free_svd(0), m, order=2)
    wg.check_grad(_gauge_free_svd(1), m, order=2)
    wg.check_grad(lambda m: wnp.linalg.svd(m, compute_uv=False), m, order=2)
    # closed form: the steepest ascent of the nuclear norm is the polar factor U V^H
    u, _, vh = np.linalg.svd(m, full_matrices=False)
    np.testing.assert_allclose(wg.grad(lambda m: wnp.sum(wnp.linalg.svd(m, compute_uv=False)))(m),
                               u @ vh, atol=1e-12)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_complex_eigh_reads_one_triangle(uplo):
    rng = np.random.default_rng(4)
    m = rng.standard_normal((2, 4, 4)) + 1j * rng.standard_normal((2, 4, 4))  # not Hermitian
    projector = lambda m: (lambda w, v: v[..., :, :1] * wnp.conj(v[..., :, :1]).swapaxes(-1, -2))(  # noqa
        *wnp.linalg.eigh(m, uplo))
    for f in (lambda m: wnp.linalg.eigvalsh(m, uplo), lambda m: wnp.linalg.eigh(m, uplo)[0],
              lambda m: wnp.abs(wnp.linalg.eigh(m, uplo)[1]), projector):
        wg.check_grad(f, m, order=2)
    # closed form: d w_k = Re(v_k^H dH v_k) for the Hermitian H read from the triangle
    def hermitian(x):  # what LAPACK reads: one triangle, the real part of the diagonal
        off = np.tril(x, -1) if uplo == "L" else np.triu(x, 1)
        return off + off.conj().T + np.diag(x.diagonal().real)
    w, v = np.linalg.eigh(hermitian(m[0]))
    dm = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
    dh = hermitian(dm)
    jv = wg.jvp(lambda m: wnp.linalg.eigvalsh(m, uplo), (m[0],), (dm,))[1]
    np.testing.assert_allclose(jv, np.einsum("ik,ij,jk->k", v.conj(), dh, v).real, atol=1e-12)
    np.testing.assert_allclose(wg.jvp(lambda m: wnp.linalg.eigvalsh(m, uplo), (m[0],),
                                      (dm,))[0], w, atol=1e-12)
