"""numpy.fft rules and complex intermediates: real-valued losses against finite
differences in both modes, padding/truncation, axes, norms, float32, batched Jacobians."""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.numpy import fft as wfft


def _x(*shape, seed=0):
    return np.random.default_rng(seed + 99).standard_normal(shape)


def _parts(y):
    """A complex output as real numbers: (real part, imaginary part)."""
    return wnp.real(y), wnp.imag(y)


def _spectrum(a, b):
    """A complex half spectrum built from two real arrays."""
    return a + 1j * b


CASES = {
    "fft": (lambda x: _parts(wfft.fft(x)), (_x(5),)),
    "fft_n_pad": (lambda x: _parts(wfft.fft(x, n=7, axis=0)), (_x(5, 2),)),
    "fft_n_trunc_ortho": (lambda x: _parts(wfft.fft(x, n=3, norm="ortho")), (_x(2, 5),)),
    "fft_complex_in": (lambda a, b: _parts(wfft.fft(_spectrum(a, b), norm="forward")),
                       (_x(4), _x(4, seed=1))),
    "ifft": (lambda x: _parts(wfft.ifft(x, axis=-2)), (_x(4, 3),)),
    "ifft_complex_n": (lambda a, b: _parts(wfft.ifft(_spectrum(a, b), n=6)),
                       (_x(2, 4), _x(2, 4, seed=1))),
    "rfft": (lambda x: _parts(wfft.rfft(x)), (_x(6),)),
    "rfft_odd_n": (lambda x: _parts(wfft.rfft(x, n=5, axis=0, norm="ortho")), (_x(7, 2),)),
    "irfft": (lambda a, b: wfft.irfft(_spectrum(a, b)), (_x(4), _x(4, seed=1))),
    "irfft_odd_n": (lambda a, b: wfft.irfft(_spectrum(a, b), n=7, norm="ortho"),
                    (_x(2, 4), _x(2, 4, seed=1))),
    "irfft_trunc_axis": (lambda a, b: wfft.irfft(_spectrum(a, b), n=4, axis=0, norm="forward"),
                         (_x(5, 2), _x(5, 2, seed=1))),
    "irfft_real_in": (lambda x: wfft.irfft(x), (_x(5),)),
    "fft2": (lambda x: _parts(wfft.fft2(x)), (_x(3, 4),)),
    "ifft2_s": (lambda x: _parts(wfft.ifft2(x, s=(4, 2))), (_x(2, 3, 3),)),
    "fftn_axes": (lambda x: _parts(wfft.fftn(x, axes=(0, 2))), (_x(3, 2, 4),)),
    "ifftn": (lambda a, b: _parts(wfft.ifftn(_spectrum(a, b))), (_x(2, 3), _x(2, 3, seed=1))),
    "rfftn": (lambda x: _parts(wfft.rfftn(x)), (_x(3, 4),)),
    "rfftn_s_axes": (lambda x: _parts(wfft.rfftn(x, s=(5, 3), axes=(2, 0))), (_x(2, 2, 4),)),
    "rfft2": (lambda x: _parts(wfft.rfft2(x, norm="ortho")), (_x(3, 5),)),
    "irfftn": (lambda a, b: wfft.irfftn(_spectrum(a, b)), (_x(3, 3), _x(3, 3, seed=1))),
    "irfftn_s": (lambda a, b: wfft.irfftn(_spectrum(a, b), s=(4, 5), axes=(1, 0)),
                 (_x(3, 2), _x(3, 2, seed=1))),
    "irfft2": (lambda a, b: wfft.irfft2(_spectrum(a, b), norm="forward"),
               (_x(2, 3, 3), _x(2, 3, 3, seed=1))),
    "power_spectrum": (lambda x: wnp.abs(wfft.fft(x)) ** 2, (_x(6),)),
    "magnitude": (lambda x: wnp.abs(wfft.rfft(x * x)), (_x(6),)),
    "angle": (lambda x: wnp.angle(wfft.fft(x)[1:]), (_x(5),)),
    "angle_deg": (lambda x: wnp.angle(wfft.fft(x)[1:], deg=True), (_x(5),)),
    "conj": (lambda x: _parts(wnp.conj(wfft.fft(x)) * wfft.fft(x * x)), (_x(4),)),
    "filter_roundtrip": (lambda x: wfft.irfft(wfft.rfft(x) * np.array([1.0, 0.5, 0.25, 0.0], x.dtype),
                                              n=6), (_x(6),)),
    "complex_constant": (lambda x: wnp.real(x * (2.0 - 1.0j)) + wnp.imag(x * 1j) ** 2, (_x(3),)),
    "hfft": (lambda a, b: wfft.hfft(_spectrum(a, b), n=6, norm="ortho"),
             (_x(4), _x(4, seed=1))),
    "ihfft": (lambda x: _parts(wfft.ihfft(x, axis=0)), (_x(5, 2),)),
    "real_imag_attributes": (lambda x: (wfft.fft(x).real, wfft.fft(x * x).imag), (_x(4),)),
    "fftfreq": (lambda d: (wfft.fftfreq(5, d), wfft.rfftfreq(6, d)), (np.array(0.7),)),
    "shift": (lambda x: wfft.fftshift(x * x), (_x(5),)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grad(name):
    fn, args = CASES[name]
    wg.check_grad(fn, *args, order=2, modes=("forward", "reverse"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_float32(name):
    fn, args = CASES[name]
    args = tuple(a.astype(np.float32) for a in args)
    wg.check_grad(fn, *args, order=1)
    out = wg.jvp(fn, args, args)[0]  # the traced path (plain fftfreq is NumPy's, float64)
    for leaf in wg.tree.flatten(out)[0]:
        assert leaf.dtype == np.float32, name
    gs = wg.grad(lambda *xs: sum(wnp.sum(o) for o in wg.tree.flatten(fn(*xs))[0]),
                 argnums=tuple(range(len(args))))(*args)
    for g in gs:
        assert g.dtype == np.float32


@pytest.mark.parametrize("name", sorted(CASES))
def test_jacobian_forward_equals_reverse(name):
    fn, args = CASES[name]
    nums = tuple(range(len(args)))
    jf = wg.jacobian(fn, argnums=nums, mode="forward")(*args)
    jr = wg.jacobian(fn, argnums=nums, mode="reverse")(*args)
    for a, b in zip(wg.tree.flatten(jf)[0], wg.tree.flatten(jr)[0]):
        assert a.dtype.kind == "f" and b.dtype.kind == "f"
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_parseval_gradient():
    x = _x(8)
    g = wg.grad(lambda x: wnp.sum(wnp.abs(wfft.fft(x)) ** 2))(x)
    np.testing.assert_allclose(g, 2 * 8 * x)
    g2 = wg.grad(lambda x: wnp.sum(wnp.abs(wfft.fft(x, norm="ortho")) ** 2))(x)
    np.testing.assert_allclose(g2, 2 * x)


def test_roundtrip_is_identity():
    x = _x(3, 6)
    jac = wg.jacobian(lambda x: wfft.irfft(wfft.rfft(x), n=6), mode="reverse")(x)
    np.testing.assert_allclose(jac.reshape(18, 18), np.eye(18), atol=1e-12)
    jac = wg.jacobian(lambda x: wnp.real(wfft.ifftn(wfft.fftn(x))), mode="forward")(x)
    np.testing.assert_allclose(jac.reshape(18, 18), np.eye(18), atol=1e-12)


def test_complex_gradient_convention():
    # grad of a real loss through a complex intermediate, with respect to the real inputs
    a, b = 0.3, -1.2
    ga, gb = wg.grad(lambda a, b: wnp.abs(a + 1j * b) ** 2, argnums=(0, 1))(a, b)
    assert np.isclose(ga, 2 * a) and np.isclose(gb, 2 * b)
    assert isinstance(ga, float)


def test_values_and_numpy_dispatch():
    x = _x(4, 6)
    for name in ("fft", "ifft", "rfft", "fft2", "rfftn", "ifftn", "hfft", "ihfft"):
        got = wg.jvp(lambda x: getattr(wfft, name)(x), (x,), (x,))[0]
        np.testing.assert_array_equal(got, getattr(np.fft, name)(x))
    g_np = wg.grad(lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2))(x)
    g_w = wg.grad(lambda x: wnp.sum(wnp.abs(wfft.rfft(x)) ** 2))(x)
    np.testing.assert_allclose(g_np, g_w)
    g = wg.grad(lambda x: np.sum(np.real(np.conj(np.fft.fft(x)) * 2.0)))(x)
    np.testing.assert_allclose(g, wg.grad(lambda x: wnp.sum(wnp.real(wfft.fft(x)) * 2.0))(x))
    assert wfft.fftfreq(4).tolist() == np.fft.fftfreq(4).tolist()
