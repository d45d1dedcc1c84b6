"""np.roots, np.poly and np.polydiv on traced values: NumPy's values to the bit, derivatives
against finite differences and closed forms, in every engine."""
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

DTYPES = (np.float64, np.float32)


def _plain(x):
    while hasattr(x, "value") and not isinstance(x, np.ndarray):
        x = x.value
    return x


def same(got, want):
    """Same type, shape and bits (signed zeros included)."""
    got = _plain(got)
    assert type(got) is type(want) or isinstance(want, np.ndarray), (type(got), type(want))
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    np.testing.assert_array_equal(got, want)
    assert got.tobytes() == want.tobytes(), (got, want)


def traced(x, engine):
    x = np.asarray(x)
    return wg.Tape().var(x) if engine == "tape" else wg.Dual(x, np.ones_like(x))


POLYS = [[1, -6, 11, -6], [2, 0, 1], [1, 0, 1], [0.5, 1.5, -2, 3, 0.25, 7], [1, -2, 1],
         [0, 0, 1, -3, 2, 0], [1, 2, 0, 0, 0], [1, 0, 0], [3, 0], [0, 3], [4.0], [0, 0],
         [1, -3, 3, -1], [2, -2, -4, 8, -4], [1e-3, 1, -1e3, 7]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("engine", ["tape", "dual"])
def test_roots_are_numpys_to_the_bit(dtype, engine):
    for p in POLYS:
        p = np.array(p, dtype)
        want = np.roots(p)
        same(np.roots(traced(p, engine)), want)  # dispatched from NumPy
        same(wnp.roots(traced(p, engine)), want)
    t = wg.Tape()
    same(wnp.roots([t.var(1.0), t.var(-3.0), t.var(2.0)]), np.roots([1.0, -3.0, 2.0]))


def test_roots_compiled_values_and_guards():
    """What NumPy decides on values (zeros stripped, a real spectrum) is guarded."""
    f = wg.compile(lambda p: wnp.roots(p))
    for p in ([1., -3, 2], [1., 0, 1], [0., 1, -3], [1., -3, 0], [1., 2, 3], [1., -2, 1],
              [1., -3, 2]):
        p = np.array(p)
        same(f(p), np.roots(p))


@pytest.mark.parametrize("dtype", DTYPES)
def test_poly_is_numpys_to_the_bit(dtype):
    seqs = [[1, 2, 3], [0.5], [-1.5, 2.25, 0.0, 7.0], [[1, 2], [3, 4]], [[0, -1], [1, 0.2]],
            [[1, 2, 0.3], [0.4, -1, 0.5], [0.1, 0.2, 3]], np.eye(3), [[1, 1], [0, 1]]]
    for z in seqs:
        z = np.array(z, dtype)
        for engine in ("tape", "dual"):
            same(np.poly(traced(z, engine)), np.poly(z))
    same(wnp.poly(wg.Tape().var(np.zeros(0))), np.poly(np.zeros(0)))  # 1.0, a float
    # conjugate pairs give real coefficients, as NumPy's
    p = np.array([1.0, -1.0, 2.5, 0.7, -0.3])
    same(wnp.poly(wnp.roots(wg.Tape().var(p))), np.poly(np.roots(p)))


POLYDIV = [([1, 2, 3, 4], [2, 1]), ([1, 2], [1, 2, 3]), ([3, 1, 4, 1, 5], [1, -1, 0.5]),
           ([1, -3, 2], [1, -1]), ([2.0], [4.0]), ([1, 3, 3, 1], [1, 1]),
           ([0.1, 0.2, 0.3, 0.4, 0.5], [0.7, 0.3]), ([5], [1, 2])]


@pytest.mark.parametrize("dtype", DTYPES)
def test_polydiv_is_numpys_to_the_bit(dtype):
    for u, v in POLYDIV + [(np.polymul([1.5, -2, 0.25], [1, 3]), [1, 3])]:
        u, v = np.array(u, dtype), np.array(v, dtype)
        want = np.polydiv(u, v)
        for engine in ("tape", "dual"):
            for args in ((traced(u, engine), v), (u, traced(v, engine)),
                         (traced(u, engine), traced(v, engine))):
                q, r = np.polydiv(*args)
                same(q, want[0])
                same(r, want[1])
    # mixed precision: the common type
    u, v = np.array([1.0, 2.0, 3.0], np.float32), np.array([3.0, 1.0])
    for q, w in zip(wnp.polydiv(wg.Tape().var(u), v), np.polydiv(u, v)):
        same(q, w)


def test_polydiv_remainder_trimming_is_guarded_when_compiled():
    v = np.array([2.0, -1.0, 0.5])
    exact = np.polymul(v, [1.0, 1.0, 1.0])  # remainder 0: trimmed to one entry
    other = np.array([1.0, 2.0, -3.0, 0.5, 4.0])
    f = wg.compile(lambda u, v: wnp.polydiv(u, v))
    for u in (other, exact, other):
        for got, want in zip(f(u, v), np.polydiv(u, v)):
            same(got, want)


# -- derivatives ------------------------------------------------------------------------------
REAL_ROOTS = np.array([2.0, -3.0, -11.0, 6.0, 0.5])    # 4 distinct real roots
COMPLEX_ROOTS = np.array([1.0, -1.0, 2.5, 0.7, -0.3])  # a conjugate pair and 2 real ones
TRAILING = np.array([1.0, -3.0, 2.0, 0.0])             # roots 2, 1 and a simple one at 0


def _parts(z):
    return wnp.concatenate([wnp.real(z), wnp.imag(z)])


def closed_form(p):
    """dr/dp_k = -r**(n-k) / p'(r) at the simple roots r of p."""
    r = np.roots(p)
    n = len(p) - 1
    powers = r[:, None] ** (n - np.arange(n + 1))[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):  # (inf at a repeated root)
        return -powers / np.polyval(np.polyder(p), r)[:, None]


def central_jacobian(f, args, i, h=1e-6):
    x = np.asarray(args[i], float)
    cols = []
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = h
        hi = list(args)
        lo = list(args)
        hi[i], lo[i] = x + e, x - e
        cols.append((np.asarray(f(*hi)) - np.asarray(f(*lo))) / (2 * h))
    return np.stack(cols, axis=-1).reshape(np.shape(f(*args)) + x.shape)


def test_roots_check_grad_second_order():
    wg.check_grad(lambda p: wnp.real(wnp.roots(p)), REAL_ROOTS, order=2,
                  modes=("forward", "reverse"))
    wg.check_grad(lambda p: _parts(wnp.roots(p)), COMPLEX_ROOTS, order=2,
                  modes=("forward", "reverse"))
    wg.check_grad(lambda p: wnp.real(wnp.roots(p)), TRAILING, order=2,
                  modes=("forward", "reverse"))


@pytest.mark.parametrize("p", [REAL_ROOTS, COMPLEX_ROOTS, TRAILING],
                         ids=["real", "complex", "trailing-zero"])
def test_roots_jacobian_is_the_closed_form(p):
    f = lambda p: _parts(wnp.roots(p))  # noqa: E731
    jf = wg.jacobian(f, mode="forward")(p)
    jr = wg.jacobian(f, mode="reverse")(p)
    np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
    want = closed_form(p)
    np.testing.assert_allclose(jf, np.concatenate([want.real, want.imag]), rtol=1e-9,
                               atol=1e-12)
    fd = central_jacobian(lambda p: np.concatenate([np.roots(p).real, np.roots(p).imag]),
                          (p,), 0)
    np.testing.assert_allclose(jf, fd, rtol=1e-6, atol=1e-7)


def test_roots_float32_derivatives_keep_the_dtype():
    p = COMPLEX_ROOTS.astype(np.float32)
    g = wg.grad(lambda p: wnp.sum(wnp.real(wnp.roots(p))))(p)
    assert g.dtype == np.float32
    # sum of the roots is -p1/p0
    np.testing.assert_allclose(g, [p[1] / p[0] ** 2, -1 / p[0], 0, 0, 0], atol=1e-6)


def _jacobians_agree(f, args, argnums, rtol_fd=1e-6):
    for i in argnums:
        jf = wg.jacobian(f, argnums=i, mode="forward")(*args)
        jr = wg.jacobian(f, argnums=i, mode="reverse")(*args)
        np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(jf, central_jacobian(f, args, i), rtol=rtol_fd, atol=1e-7)


def test_poly_derivatives():
    z = np.array([0.5, -1.2, 2.0, 0.3])
    wg.check_grad(lambda z: wnp.poly(z), z, order=2, modes=("forward", "reverse"))
    _jacobians_agree(lambda z: wnp.poly(z), (z,), (0,))
    a = np.array([[1.0, 2.0, 0.3], [0.4, -1.0, 0.5], [0.1, 0.2, 3.0]])
    for m in (a, np.array([[0.0, -1.0], [1.0, 0.2]])):  # real and complex spectra
        wg.check_grad(lambda m: wnp.poly(m), m, order=2, modes=("forward", "reverse"))
        _jacobians_agree(lambda m: wnp.poly(m), (m,), (0,))
    # poly(roots(p)) is p / p[0]
    p = COMPLEX_ROOTS * 2.0
    np.testing.assert_allclose(wg.jacobian(lambda p: wnp.poly(wnp.roots(p)))(p),
                               wg.jacobian(lambda p: p / p[0])(p), atol=1e-12)


def test_poly_of_a_matrix_with_repeated_eigenvalues():
    """The coefficients are smooth there: a Jordan block, the identity.  (Through the
    eigenvalue rule, d det / d a[1, 0] of the Jordan block came out 0, not -1.)"""
    jordan = np.array([[1.0, 1.0], [0.0, 1.0]])
    j = wg.jacobian(lambda m: wnp.poly(m), mode="reverse")(jordan)
    np.testing.assert_allclose(j[2], [[1.0, 0.0], [-1.0, 1.0]])  # d det: the cofactors
    for m in (jordan, np.eye(3)):
        wg.check_grad(lambda m: wnp.poly(m), m, order=2, modes=("forward", "reverse"))


def test_polydiv_derivatives():
    u, v = np.array([1.0, 2.0, -3.0, 0.5, 4.0]), np.array([2.0, -1.0, 0.5])

    def both(u, v):
        return wnp.concatenate(wnp.polydiv(u, v))
    wg.check_grad(both, u, v, order=2, modes=("forward", "reverse"))
    _jacobians_agree(both, (u, v), (0, 1))
    # the quotient of x**2 - 3x + c by x - 1 is x - 2 whatever c; the remainder is c - 2
    g = wg.grad(lambda c: wnp.polydiv(wnp.stack([1.0, -3.0, c]), np.array([1.0, -1.0]))[1][0])
    assert g(2.5) == 1.0


@pytest.mark.parametrize("name", ["roots", "poly", "polydiv"])
def test_compiled_gradients_agree_with_eager(name):
    if name == "roots":
        f, args, argnums = (lambda p: wnp.roots(p)), (COMPLEX_ROOTS,), 0
        u = np.array([0.3, -1.2, 0.7, 2.0])
    elif name == "poly":
        f, args, argnums = (lambda z: wnp.poly(z)), (np.array([[1.0, 2.0], [-3.0, 0.5]]),), 0
        u = np.array([0.3, -1.2, 0.7])
    else:
        f = lambda u, v: wnp.concatenate(wnp.polydiv(u, v))  # noqa: E731
        args, argnums = (np.array([1.0, 2.0, -3.0, 0.5]), np.array([2.0, -1.0])), (0, 1)
        u = np.array([0.3, -1.2, 0.7, 2.0])

    def loss(*xs):
        return wnp.sum(wnp.real(f(*xs)) * u)
    eager = wg.grad(loss, argnums)(*args)
    compiled = wg.compile(wg.grad(loss, argnums))
    for _ in range(2):
        got = compiled(*args)
        for g, e in zip(got if isinstance(argnums, tuple) else (got,),
                        eager if isinstance(argnums, tuple) else (eager,)):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)
            assert np.all(np.isfinite(g)) and np.any(g != 0)


def test_compiled_roots_gradient_retraces_on_a_trailing_zero():
    u = np.array([0.3, -1.2, 0.7])

    def loss(p):
        return wnp.sum(wnp.real(wnp.roots(p)) * u)
    compiled = wg.compile(wg.grad(loss))
    for p in ([1.0, -6.0, 11.0, -6.0], [1.0, -3.0, 2.0, 0.0], [1.0, -6.0, 11.0, -6.0]):
        p = np.array(p)
        np.testing.assert_allclose(compiled(p), wg.grad(loss)(p), rtol=1e-12)
    np.testing.assert_allclose(compiled(TRAILING), u @ closed_form(TRAILING).real, rtol=1e-12)


# -- repeated roots: no derivative, and no wrong finite number when it is seen -------------------
def test_exactly_repeated_roots_have_nan_derivatives():
    f = lambda p: wnp.real(wnp.roots(p))  # noqa: E731
    double = np.array([1.0, -2.0, 1.0])
    assert np.roots(double).tolist() == [1.0, 1.0]  # exactly equal, as computed
    for mode in ("forward", "reverse"):
        assert np.isnan(wg.jacobian(f, mode=mode)(double)).all()
    # several trailing zeros: a multiple root at 0; the simple roots keep their derivatives
    p = np.array([1.0, -3.0, 2.0, 0.0, 0.0])
    for mode in ("forward", "reverse"):
        j = wg.jacobian(f, mode=mode)(p)
        assert np.isnan(j[2:]).all()
        np.testing.assert_allclose(j[:2], closed_form(p)[:2].real, rtol=1e-12)
    # an output that does not use the repeated roots is not poisoned in reverse mode
    g = wg.grad(lambda p: wnp.real(wnp.roots(p))[0])(p)
    np.testing.assert_allclose(g, closed_form(p)[0].real, rtol=1e-12)


# -- bad input: what NumPy raises ---------------------------------------------------------------
def _raises_like_numpy(f, *args):
    with pytest.raises(Exception) as want:
        f(*[_plain(a) for a in args])
    with pytest.raises(want.type):
        f(*args)


def test_bad_input_raises_what_numpy_raises():
    t = wg.Tape()
    with pytest.raises(ValueError, match="Input must be a rank-1 array."):
        np.roots(t.var(np.ones((2, 2))))
    _raises_like_numpy(np.roots, t.var(np.ones((2, 2))))
    _raises_like_numpy(wnp.roots, t.var(3.0))                 # 0-d: TypeError
    _raises_like_numpy(wnp.poly, t.var(3.0))
    _raises_like_numpy(np.poly, t.var(np.ones((2, 3))))       # not square
    _raises_like_numpy(np.poly, t.var(np.ones((2, 2, 2))))
    _raises_like_numpy(np.polydiv, t.var(np.zeros(0)), np.ones(2))   # IndexError
    _raises_like_numpy(np.polydiv, np.ones(3), t.var(np.zeros(0)))


def test_polydiv_by_a_zero_leading_coefficient_is_numpys_inf_and_nan():
    u, v = np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.polydiv(u, v)
    with pytest.warns(RuntimeWarning) as caught:
        got = wnp.polydiv(u, wg.Tape().var(v))
    assert any("divide by zero" in str(w.message) for w in caught)
    for g, w in zip(got, want):
        assert g.value.dtype == w.dtype
        np.testing.assert_array_equal(g.value, w)
