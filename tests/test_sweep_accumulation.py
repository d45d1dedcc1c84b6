"""The reverse sweep adds a cotangent into a sum it made itself, in place (reverse.py): never into
an array a rule, a seed or a user still holds."""
import numpy as np

import wengert as wg
import wengert.numpy as wnp


def test_fan_out_through_identity_pullbacks():
    # add's pullback hands the same array to both parents: the sums must not write into it
    x = np.array([1.0, 2.0, 3.0])

    def f(x):
        y = x + x
        z = y + x + y
        return wnp.sum(z * z)
    g = wg.grad(f)(x)
    np.testing.assert_allclose(g, 2 * 5 * x * 5)
    wg.check_grad(f, x)


def test_a_rules_own_array_is_not_written():
    held = np.array([1.0, -2.0, 0.5])

    @wg.primitive
    def shift(x):
        return x + 1.0

    @shift.rrule
    def _(x):
        return x + 1.0, lambda g: (held,)  # the same array for every call, on purpose

    def f(x):
        return wnp.sum(shift(x) + shift(x) + shift(x) + shift(x))
    g = wg.grad(f)(np.zeros(3))
    np.testing.assert_array_equal(g, 4 * np.array([1.0, -2.0, 0.5]))
    np.testing.assert_array_equal(held, [1.0, -2.0, 0.5])


def test_seed_is_not_written():
    x = np.array([1.0, 2.0])
    out, pullback = wg.vjp(lambda x: (x, x + x), x)
    seed = (np.array([1.0, 1.0]), np.array([3.0, 3.0]))
    (gx,) = pullback(seed)
    np.testing.assert_array_equal(gx, [7.0, 7.0])
    np.testing.assert_array_equal(seed[0], [1.0, 1.0])
    np.testing.assert_array_equal(seed[1], [3.0, 3.0])
    (gx2,) = pullback(seed)  # the tape is swept again from the same seed
    np.testing.assert_array_equal(gx2, gx)


def test_dtypes_and_broadcasting_still_promote():
    x = np.array([1.0, 2.0], dtype=np.float32)
    c = np.array([[1.0], [2.0], [3.0]])

    def f(x):
        return wnp.sum(wnp.real(x * (1 + 1j)) + x * c + x)
    g = wg.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 3 * 1 + 6 + 3, rtol=1e-6)
