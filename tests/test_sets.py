"""Set operations on traced values (wengert/rules/sets.py).

Values are NumPy's to the bit (signed zeros and NaN payloads included), with NumPy's dtype;
each output value is gathered from one input entry (its first occurrence), so derivatives are
0/1 Jacobians, checked in closed form; check_grad (order 2, both modes) at points without
accidental ties; forward Jacobian == reverse Jacobian everywhere, ties included.
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.core import Tracer

rng = np.random.default_rng(3)
NAN, NNAN = np.nan, -np.nan  # two bit patterns NumPy treats as the same NaN

PAIRS = [  # (ar1, ar2): duplicates, NaNs, signed zeros, empty, 2-D, ties between inputs
    ([3.0, 1.0, 3.0, 2.0, 1.5], [2.0, 2.0, 7.0, 1.0]),
    ([NAN, 1.0, NAN, 2.0], [NAN, 2.0, 4.0]),
    ([NNAN, 1.0, NAN, NNAN], [NAN, 2.0]),
    ([0.0, -0.0, 1.0, -0.0], [-0.0, 2.0]),
    ([-0.0, 1.0], [0.0]),
    ([], [1.0, 1.0]),
    ([], []),
    ([2.0], []),
    (np.round(rng.uniform(-2, 2, (3, 4))), np.round(rng.uniform(-2, 2, (2, 3)))),
    (rng.integers(0, 5, 9).astype(float), rng.integers(2, 7, 6).astype(float)),
    (rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 4)),
    # large: NumPy's hash-based unique (unique_values comes out unsorted) and its SIMD sorts
    (np.where(rng.random(3000) < 0.05, NAN, rng.integers(-300, 300, 3000) * 0.5),
     np.where(rng.random(1000) < 0.1, -0.0, rng.integers(-200, 400, 1000) * 0.5)),
]
DTYPES = [(np.float64, np.float64), (np.float32, np.float32), (np.float32, np.float64)]
TWO = [  # (name, keyword arguments)
    ("union1d", {}),
    ("intersect1d", {}), ("intersect1d", {"assume_unique": True}),
    ("intersect1d", {"return_indices": True}),
    ("intersect1d", {"assume_unique": True, "return_indices": True}),
    ("setdiff1d", {}), ("setdiff1d", {"assume_unique": True}),
    ("setxor1d", {}), ("setxor1d", {"assume_unique": True}),
]
UNIQUE = ["unique_values", "unique_counts", "unique_inverse", "unique_all"]


def _plain(r):
    while isinstance(r, Tracer):
        r = r.value
    return r


def _canonical_nans(a):
    a = np.array(a, copy=True)
    for part in (a.real, a.imag) if a.dtype.kind == "c" else (a,) if a.dtype.kind == "f" else ():
        part[np.isnan(part)] = np.nan
    return a


def assert_same(got, want):
    """``got`` is ``want``: the same types, shapes, dtypes and bits, signed zeros included.
    A NaN's payload is the input entry's (NumPy's sort itself turns -nan into nan)."""
    if isinstance(want, tuple):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    g = _plain(got)
    assert isinstance(g, np.ndarray), type(g)
    assert g.dtype == want.dtype and g.shape == want.shape, (g, want)
    assert _canonical_nans(g).tobytes() == _canonical_nans(want).tobytes(), (g, want)


def _tracings(v):
    """``v`` as a reverse, a forward and a second-order tracer."""
    return [wg.Tape().var(v), wg.Dual(v, np.ones_like(v)),
            wg.Tape().var(wg.Dual(v, np.ones_like(v)))]


def test_values_are_numpys_bit_for_bit():
    for name, kw in TWO:
        for a, b in PAIRS:
            for d1, d2 in DTYPES:
                a_, b_ = np.asarray(a, d1), np.asarray(b, d2)
                want = getattr(np, name)(a_, b_, **kw)
                for ta in _tracings(a_):
                    # NumPy dispatches on the traced argument, wherever it is
                    assert_same(getattr(np, name)(ta, b_, **kw), want)
                    assert_same(getattr(wnp, name)(ta, wg.Dual(b_, np.ones_like(b_))
                                                   if isinstance(ta, wg.Dual) else b_, **kw),
                                want)
                for tb in _tracings(b_):
                    assert_same(getattr(np, name)(a_, tb, **kw), want)
                # plain arguments: NumPy's own result
                assert_same(getattr(wnp, name)(a_, b_, **kw), want)
                assert_same(getattr(wnp, name)(list(a_.ravel()), b_, **kw), getattr(np, name)(
                    list(a_.ravel()), b_, **kw))
    for name in UNIQUE:
        for a, b in PAIRS:
            for x in (a, b):
                for dt in (np.float64, np.float32):
                    x_ = np.asarray(x, dt)
                    want = getattr(np, name)(x_)
                    for t in _tracings(x_):
                        got = getattr(np, name)(t)
                        assert_same(got, want)
                        if name != "unique_values":  # counts, indices: plain integers
                            assert isinstance(got.values, Tracer)
                            assert not any(isinstance(f, Tracer) for f in got[1:])
                    assert_same(getattr(wnp, name)(x_), want)
    for a, b in PAIRS:
        for x in (a, b):
            for dt in (np.float64, np.float32, np.float16):
                x_ = np.asarray(x, dt)
                want = np.sort_complex(x_)
                assert want.dtype == np.complex128  # NumPy's: also for float32
                for t in _tracings(x_):
                    assert_same(np.sort_complex(t), want)
                assert_same(wnp.sort_complex(x_), want)


def test_scalars_and_mixed_dtypes_promote_as_numpy():
    # a Python scalar is weak in union1d (NumPy's concatenate) but not in intersect1d
    for name, kw in TWO:
        for a in (np.float32([2.0, 1.0]), np.float32(2.0)):
            for b in (2.0, np.float64(1.0), [2.0, 5.0], np.int64(2), np.array([3, 2])):
                want = getattr(np, name)(a, b, **kw)
                assert_same(getattr(np, name)(wg.Tape().var(np.asarray(a)), b, **kw), want)
                want = getattr(np, name)(b, a, **kw)
                assert_same(getattr(np, name)(b, wg.Tape().var(np.asarray(a)), **kw), want)


def test_complex_values_are_numpys():
    # complex values are intermediates (a traced input is real): NaN or signed-zero parts
    r = np.random.default_rng(1)
    parts = [NAN, 0.0, -0.0, 1.0, 2.0, NNAN, np.inf]
    for _ in range(120):
        n1, n2 = r.integers(0, 7, 2)
        a, b = (np.array([complex(*r.choice(parts, 2)) for _ in range(n)]) for n in (n1, n2))
        for dt in (np.complex128, np.complex64):
            a_, b_ = a.astype(dt), b.astype(dt)
            for name, kw in TWO:
                want = getattr(np, name)(a_, b_, **kw)
                assert_same(getattr(np, name)(wg.Dual(a_, np.ones_like(a_)), b_, **kw), want)
                assert_same(getattr(np, name)(a_, wg.Dual(b_, np.ones_like(b_)), **kw), want)
            for name in UNIQUE + ["sort_complex"]:
                assert_same(getattr(np, name)(wg.Dual(a_, np.ones_like(a_))),
                            getattr(np, name)(a_))
    # derivatives through complex set operations: each part from its first occurrence

    def f(re, im):
        z = re[[0, 1, 0, 2]] + 1j * im[[0, 1, 0, 2]]
        return wnp.concatenate([wnp.abs(np.intersect1d(z, z[[2, 3]] * 1.0)) ** 2,
                                wnp.real(np.union1d(z, 0.5j)) ** 3])
    wg.check_grad(f, np.array([0.3, -0.4, 0.8]), np.array([0.1, 0.2, -0.6]), order=2,
                  modes=("forward", "reverse"))


def test_lists_holding_traced_values():
    a = wg.Tape().var(np.array([2.0, 1.0]))
    got = wnp.union1d([a[0], 3.0, a[1]], [1.0])
    assert_same(got, np.union1d([2.0, 3.0, 1.0], [1.0]))
    assert_same(wnp.sort_complex([a[0], a[1]]), np.sort_complex([2.0, 1.0]))


def _one_hot(rows, n):
    """A Jacobian with a 1 at (i, rows[i]); a row of ``None`` is all zeros."""
    J = np.zeros((len(rows), n))
    for i, j in enumerate(rows):
        if j is not None:
            J[i, j] = 1.0
    return J


def _jacobians(f, args, argnum, rtol=0.0):
    fwd = wg.jacobian(f, argnum, mode="forward")(*args)
    rev = wg.jacobian(f, argnum, mode="reverse")(*args)
    np.testing.assert_allclose(fwd, rev, rtol=rtol, atol=0)
    return fwd


@pytest.mark.parametrize("name, kw, a, b, rows_a, rows_b", [
    # a repeated value goes to its first occurrence; union: in ar1 first, then ar2
    ("union1d", {}, [3.0, 1.0, 3.0, 2.0], [2.0, 5.0, 1.0], [1, 3, 0, None], [None] * 3 + [1]),
    # a common value: to ar1 (its first occurrence), never to ar2
    ("intersect1d", {}, [3.0, 1.0, 3.0, 2.0], [2.0, 3.0, 3.0, 7.0], [3, 0], [None, None]),
    ("intersect1d", {"assume_unique": True}, [3.0, 1.0, 2.0], [2.0, 3.0], [2, 0], [None, None]),
    ("setdiff1d", {}, [3.0, 1.0, 3.0, 2.0, 1.0], [2.0], [1, 0], [None, None]),
    ("setdiff1d", {"assume_unique": True}, [3.0, 1.0, 2.0], [2.0], [0, 1], [None, None]),
    # setxor: from whichever input holds the value
    ("setxor1d", {}, [3.0, 1.0, 3.0, 2.0], [2.0, 5.0, 5.0, 4.0], [1, 0, None, None],
     [None, None, 3, 1]),
    # a NaN in both inputs: NumPy keeps one from each
    ("setxor1d", {}, [NAN, 1.0, NAN], [NAN, 2.0], [1, None, 0, None], [None, 1, None, 0]),
    ("union1d", {}, [NAN, 1.0, NAN], [NAN, 2.0], [1, None, 0], [None, 1, None]),
])
def test_ties_go_to_the_first_occurrence(name, kw, a, b, rows_a, rows_b):
    a, b = np.array(a), np.array(b)
    for order in ("ab", "ba"):  # the same rows whichever input is traced first
        def f(x, y):
            return getattr(np, name)(x, y, **kw)
        want = getattr(np, name)(a, b, **kw)
        assert_same(f(wg.Tape().var(a), b), want)
        if order == "ab":
            Ja, Jb = _jacobians(f, (a, b), 0), _jacobians(f, (a, b), 1)
        else:
            Jb, Ja = (_jacobians(lambda y, x: f(x, y), (b, a), k) for k in (0, 1))
        np.testing.assert_array_equal(Ja, _one_hot(rows_a, a.size))
        np.testing.assert_array_equal(Jb, _one_hot(rows_b, b.size))
    if name == "intersect1d":  # with return_indices, the values are a[ar1_indices]
        _, i1, _ = np.intersect1d(a, b, return_indices=True, **kw)
        J = _jacobians(lambda x: np.intersect1d(x, b, return_indices=True, **kw)[0], (a,), 0)
        np.testing.assert_array_equal(J, _one_hot(list(i1), a.size))


def _expected_rows(values, x):
    """Independently: each non-NaN value from its first occurrence; the k-th NaN output from
    the k-th NaN of x (NumPy's array-API functions keep NaNs apart); None: not in x."""
    x = x.ravel()
    nans = iter(np.flatnonzero(np.isnan(x)))
    at = [next(nans, None) if np.isnan(v) else next(iter(np.flatnonzero(x == v)), None)
          for v in values]
    return [None if i is None else int(i) for i in at]


def test_unique_functions_differentiate_first_occurrences():
    x = np.array([[3.0, 1.0, 3.0], [NAN, 2.0, 1.0], [NAN, 0.5, 2.0]])
    for name in UNIQUE:
        def f(x):
            r = getattr(np, name)(x)
            return r if name == "unique_values" else r.values
        want = f(x)
        J = _jacobians(f, (x,), 0).reshape(want.size, x.size)
        np.testing.assert_array_equal(J, _one_hot(_expected_rows(want, x), x.size))
    ua = np.unique_all(x)
    J = _jacobians(lambda x: np.unique_all(x).values, (x,), 0).reshape(ua.values.size, -1)
    np.testing.assert_array_equal(J, _one_hot(list(ua.indices), x.size))  # as NumPy's indices
    # gradients: the first occurrence of each value, every NaN
    g = wg.grad(lambda x: wnp.sum(np.unique_values(x)))(x)
    np.testing.assert_array_equal(g, [[1, 1, 0], [1, 1, 0], [1, 1, 0]])
    assert wg.grad(lambda x: wnp.sum(np.unique_counts(x).values))(x.astype(np.float32)).dtype \
        == np.float32


def test_signed_zeros_keep_numpys_sign_and_the_first_zeros_derivative():
    # NumPy's SIMD sort may write +0.0 as -0.0 (and its unstable sort may keep ar2's -0.0 for
    # ar1's +0.0): the values are NumPy's, the derivatives the first zero's (sort: in order)
    b = PAIRS[-1][1]
    assert np.any(np.signbit(np.sort_complex(b).real) != np.signbit(b[np.argsort(b,
                                                                               kind="stable")]))
    J = _jacobians(lambda x: wnp.real(np.sort_complex(x)), (b,), 0)
    np.testing.assert_array_equal(J, _one_hot(np.argsort(b, kind="stable"), b.size))
    for f in (np.unique_values, lambda x: np.unique_counts(x).values, lambda x: np.union1d(x, b)):
        want = f(b[:300])
        J = _jacobians(f, (b[:300],), 0)
        np.testing.assert_array_equal(J, _one_hot(_expected_rows(want, b[:300]), 300))
    r = np.random.default_rng(0)
    fixed = 0
    for n1 in range(1, 30, 4):
        for n2 in (1, 5, 20):
            a = np.concatenate([np.where(r.random(n1) < 0.5, 0.0, -0.0),
                                r.integers(0, 40, n1).astype(float)])
            b = np.concatenate([np.where(r.random(n2) < 0.5, 0.0, -0.0),
                                r.integers(0, 40, n2).astype(float)])
            for kw in ({}, {"return_indices": True}):
                want = np.intersect1d(a, b, **kw)
                w = want[0] if kw else want
                got = np.intersect1d(wg.Dual(a, np.ones_like(a)), b, **kw)
                assert_same(got, want)
                first = np.flatnonzero(a == 0)[0]
                fixed += np.signbit(w[0]) != np.signbit(a[first])
                J = _jacobians(lambda x: np.intersect1d(x, b, **kw)[0] if kw
                               else np.intersect1d(x, b), (a,), 0)
                np.testing.assert_array_equal(
                    J, _one_hot(_expected_rows(w, a), a.size))
                H = wg.hessian(lambda x: wnp.sum(np.intersect1d(x, b) ** 3))(a)
                np.testing.assert_array_equal(H, np.diag(6 * a * J.sum(0)))
    assert fixed  # the sign correction was exercised (under this NumPy)


def test_sort_complex_derivative_is_the_sort_permutation():
    x = np.array([2.0, 0.5, 2.0, -1.0, np.inf, -0.0, 0.0])
    perm = [3, 5, 6, 1, 0, 2, 4]  # equal values keep their order
    for dt in (np.float64, np.float32):
        J = _jacobians(lambda x: wnp.real(np.sort_complex(x)), (x.astype(dt),), 0)
        np.testing.assert_array_equal(J, _one_hot(perm, x.size))
        Ji = _jacobians(lambda x: wnp.imag(np.sort_complex(x)), (x.astype(dt),), 0)
        np.testing.assert_array_equal(Ji, 0)
        g = wg.grad(lambda x: wnp.sum(wnp.real(np.sort_complex(x)) * np.arange(7.0)))(
            x.astype(dt))
        assert g.dtype == dt  # a real cotangent, in the input's dtype
        np.testing.assert_array_equal(g, np.argsort(perm))
    # 2-D: along the last axis; complex input: by real part, then imaginary part
    m = np.array([[1.0, -2.0, 1.0], [0.5, 0.5, -3.0]])
    J = _jacobians(lambda m: wnp.real(np.sort_complex(m)), (m,), 0)
    np.testing.assert_array_equal(J.reshape(6, 6), _one_hot([1, 0, 2, 5, 3, 4], 6))

    def fz(re, im):
        return np.sort_complex(re[[0, 1, 0, 1]] + 1j * im)
    re, im = np.array([1.0, -1.0]), np.array([0.3, -0.2, -0.5, 0.4])
    assert_same(fz(wg.Tape().var(re), im), np.sort_complex(re[[0, 1, 0, 1]] + 1j * im))
    Jim = _jacobians(lambda im: wnp.imag(fz(re, im)), (im,), 0)
    np.testing.assert_array_equal(Jim, _one_hot([1, 3, 2, 0], 4))


# -- finite differences, order 2, both modes: ties only through traced copies ---------------------
def R(*shape):
    return rng.uniform(-1.0, 1.0, shape)


GRAD_CASES = [
    ("union1d", lambda a, b: wnp.sin(np.union1d(a, b)) * np.union1d(a, b) ** 2, (R(5), R(2, 3))),
    ("union1d_shared", lambda a: np.union1d(a, wnp.ravel(a)[[3, 0]]) ** 3, (R(2, 3),)),
    ("intersect1d", lambda a, c: np.intersect1d(a, wnp.concatenate([a[[4, 1, 1]], c])) ** 3,
     (R(6), R(3))),
    ("intersect1d_indices", lambda a, c: np.intersect1d(
        wnp.concatenate([c, a]), a[[0, 2]], return_indices=True)[0] ** 3, (R(4), R(2))),
    ("intersect1d_assume_unique", lambda a: wnp.exp(np.intersect1d(
        a, a[[2, 0]], assume_unique=True)), (R(5),)),
    ("setdiff1d", lambda a, b: np.setdiff1d(a, wnp.concatenate([wnp.ravel(a)[[1, 3]], b])) ** 3,
     (R(2, 3), R(2))),
    ("setdiff1d_assume_unique", lambda a: wnp.sin(np.setdiff1d(a, a[[0]], assume_unique=True)),
     (R(4),)),
    ("setxor1d", lambda a, c: np.setxor1d(a, wnp.concatenate([a[[0, 2]], c])) ** 3,
     (R(5), R(3))),
    ("setxor1d_assume_unique", lambda a, c: wnp.cos(np.setxor1d(
        a, wnp.concatenate([a[[1]], c]), assume_unique=True)), (R(4), R(2))),
    ("unique_values", lambda a: np.unique_values(wnp.concatenate([a, a[[1, 3]]])) ** 3,
     (R(5),)),
    ("unique_counts", lambda a: np.unique_counts(a[[0, 1, 0, 2]]).values ** 3
     * np.unique_counts(a[[0, 1, 0, 2]]).counts, (R(3),)),
    ("unique_inverse", lambda a: np.unique_inverse(a[[2, 0, 2]]).values[
        np.unique_inverse(a[[2, 0, 2]]).inverse_indices] ** 3, (R(3),)),
    ("unique_all", lambda a: wnp.sin(np.unique_all(a).values) * a.ravel()[
        np.unique_all(a).indices], (R(2, 3),)),
    ("sort_complex", lambda a: wnp.real(np.sort_complex(a)) ** 3, (R(3, 4),)),
    ("sort_complex_complex", lambda re, im: wnp.abs(np.sort_complex(
        re[[0, 1, 0]] + 1j * im)) ** 3, (R(2), R(3))),
]


@pytest.mark.parametrize("name, f, args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_check_grad_order_2(name, f, args):
    for dt in (np.float64, np.float32):
        xs = tuple(np.asarray(a, dt) for a in args)
        wg.check_grad(f, *xs, order=2, modes=("forward", "reverse"))
        g = wg.grad(lambda *a: wnp.sum(f(*a)), tuple(range(len(xs))))(*xs)
        assert all(gi.dtype == dt for gi in g)  # float32 in, float32 gradients out
        for k in range(len(xs)):
            # sort_complex of float32 is complex128 (NumPy's): the forward Jacobian is then
            # float64 and the reverse one float32, as the input
            _jacobians(f, xs, k, rtol=0.0 if dt == np.float64 else 1e-6)


def test_compiled_graphs_retrace_when_the_set_changes():
    b = np.array([0.5, 2.0])
    fns = [lambda x: np.union1d(x, b) * 2.0, lambda x: np.setxor1d(x, b) * 2.0,
           lambda x: np.intersect1d(x, b) * 2.0, lambda x: np.setdiff1d(x, b) * 2.0,
           lambda x: np.unique_values(x) * 2.0, lambda x: np.unique_counts(x).values * 2.0,
           lambda x: wnp.real(np.sort_complex(x)) * 2.0]
    for f in fns:
        cf = wg.compile(f)
        cg = wg.compile(wg.grad(lambda x: wnp.sum(f(x) ** 2)))
        for v in ([1.0, 2.0, 1.0], [3.0, 3.0, 3.0], [0.5, NAN, 2.0], [1.0, 2.0, 1.0]):
            v = np.array(v)
            with np.errstate(invalid="ignore"):
                assert_same(cf(v), _plain(f(v)))
                np.testing.assert_array_equal(cg(v), wg.grad(lambda x: wnp.sum(f(x) ** 2))(v))
