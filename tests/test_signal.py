"""wengert.scipy.signal: convolve and correlate equal SciPy's on traced values in every mode and
shape order, and their derivatives equal central differences (both modes, second order)."""
import numpy as np
import pytest
import scipy.signal as ss

import wengert as wg
from wengert.scipy import signal

R = np.random.default_rng(11)
SHAPES = [((4,), (2,)), ((2,), (5,)), ((5, 4), (3, 2)), ((6, 7), (4, 1)), ((2, 3), (4, 5)),
          ((3, 3, 2), (2, 2, 2))]


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize("s1, s2", SHAPES)
def test_against_scipy(name, mode, s1, s2):
    a, b = R.standard_normal(s1), R.standard_normal(s2)
    f = lambda x, y: getattr(signal, name)(x, y, mode=mode)  # noqa: E731
    ref = getattr(ss, name)(a, b, mode=mode)
    for i in (0, 1):  # traced in either argument
        out = wg.vjp(lambda t: f(t, b) if i == 0 else f(a, t), (a, b)[i])[0]
        assert out.shape == ref.shape
        np.testing.assert_allclose(out, ref, atol=1e-12)
    wg.check_grad(f, a, b, order=2)


def test_complex_and_closed_form():
    a = R.standard_normal(5) + 1j * R.standard_normal(5)
    k = R.standard_normal(3) + 1j * R.standard_normal(3)
    for name in ("convolve", "correlate"):
        np.testing.assert_allclose(wg.jvp(lambda x: getattr(signal, name)(x, k), (a,), (a,))[0],
                                   getattr(ss, name)(a, k), atol=1e-12)
        wg.check_grad(lambda x, y: getattr(signal, name)(x, y, mode="same"), a, k, order=2)
    # linear in the kernel: the Jacobian of a valid convolution holds a's reversed windows
    x = R.standard_normal(6)
    jac = wg.jacobian(lambda k: signal.convolve(x, k, mode="valid"))(np.zeros(3))
    np.testing.assert_array_equal(jac, np.array([x[i:i + 3][::-1] for i in range(4)]))


def test_bad_input_as_scipy():
    with pytest.raises(ValueError, match="same dimensionality"):
        wg.grad(lambda x: signal.convolve(x, np.ones((2, 2))).sum())(np.ones(3))
    with pytest.raises(ValueError, match="at least as large"):
        wg.grad(lambda x: signal.convolve(x, np.ones((1, 4)), mode="valid").sum())(np.ones((3, 2)))
    with pytest.raises(ValueError, match="acceptable mode"):
        wg.grad(lambda x: signal.convolve(x, np.ones(2), mode="nope").sum())(np.ones(3))
    assert callable(signal.fftconvolve)  # SciPy's other names, for plain values
