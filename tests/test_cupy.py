"""The transform matrix on CuPy (API.md §10): runs where CuPy and a GPU are present.

Elsewhere these tests skip, and tests/test_foreign_arrays.py runs the same matrix on a
NEP-18 test double that follows CuPy's rules (no NumPy operands, no conversion to NumPy)."""
import numpy as np
import pytest

import wengert as wg

import array_matrix as M

cp = pytest.importorskip("cupy", reason="CuPy is not installed (the .[cupy] extra, needs CUDA)")
try:
    _GPUS = cp.cuda.runtime.getDeviceCount()
except Exception:  # no driver, no device
    _GPUS = 0
pytestmark = pytest.mark.skipif(_GPUS == 0, reason="CuPy is installed but no GPU is present")

CASES = [c for c in M.CASES if not c.startswith("mixed")]  # CuPy refuses NumPy operands


def _on_device(x):
    return isinstance(x, cp.ndarray)


@pytest.mark.parametrize("case", CASES)
def test_cupy_matrix(case):
    M.run_case(case, cp.asarray, cp.asnumpy, _on_device)


def test_cupy_values_never_leave_the_device():
    """A transfer to the host would be an explicit cp.asnumpy; none happens inside."""
    x = cp.asarray(M.V)
    with cp.cuda.Device(x.device.id):
        g = wg.grad(M.f)(x)
        H = wg.hessian(M.f)(x)
    assert _on_device(g) and _on_device(H) and g.device == x.device
    np.testing.assert_allclose(cp.asnumpy(H), wg.hessian(M.f)(M.V), rtol=1e-12)
