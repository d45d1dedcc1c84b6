"""Integer and bool values are constants everywhere (issue 30; API.md §14): a traced array of
integer or bool dtype (``astype(int)``, ``floor(...).astype``, comparisons, ``argmax``) carries
no derivative and may be used as an index, a slice bound, a shape or a ``range`` bound, in every
engine: eager reverse and forward mode, nested, graph tracing and ``wg.compile`` (a traced index
array is recorded, what decides shapes is guarded), source transformation and ``wg.vmap``.
Derivatives are checked against central differences (``wg.check_grad``) and closed forms."""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

N = 5
X = np.array([0.33, 1.87, 2.42, 4.29, 4.51])


def wrapped(x):
    """The issue's program: positions computed from the values, wrapped around."""
    return wnp.sum(x[wnp.floor(x).astype(int) % N])


def wrapped_grad(x):
    """Its gradient: each position counted as often as it is picked."""
    return np.bincount(np.floor(x).astype(int) % N, minlength=N).astype(float)


def test_issue_program_every_mode_against_differences():
    wg.check_grad(wrapped, X, order=2)
    np.testing.assert_allclose(wg.grad(wrapped)(X), wrapped_grad(X))
    out, t = wg.jvp(wrapped, (X,), (np.ones(N),))
    assert out == pytest.approx(float(np.sum(X[np.floor(X).astype(int) % N])))
    assert t == pytest.approx(float(wrapped_grad(X).sum()))
    np.testing.assert_allclose(wg.hessian(wrapped)(X), np.zeros((N, N)))


def test_fluidsim_style_bilinear_interpolation():
    """fluidsim.py's advection: floor().astype(int) positions and the fractions left over."""
    f = np.arange(16.0).reshape(4, 4) ** 1.5

    def advect(v):
        c = wnp.arange(4.0) - v
        left = wnp.floor(c).astype(int)
        w = c - left
        left = left % 4
        right = (left + 1) % 4
        return wnp.sum((1 - w) * f[left, 1] + w * f[right, 2])
    v = np.array([0.3, 1.4, -0.6, 2.2])
    wg.check_grad(advect, v, order=2)
    # closed form: d/dv of (1 - w) a + w b with w = c - floor(c), dc/dv = -1
    c = np.arange(4.0) - v
    left = np.floor(c).astype(int) % 4
    np.testing.assert_allclose(wg.grad(advect)(v), f[left, 1] - f[(left + 1) % 4, 2])


@pytest.mark.parametrize("make", [lambda x: wnp.argmax(x), lambda x: wnp.floor(x[0]).astype(int),
                                  lambda x: wnp.sum(x > 2.0), lambda x: (x[1] > 1).astype(int)])
def test_scalar_integer_as_index_bound_shape_range(make):
    def f(x):
        k = make(x)
        s = x[k] * 3.0                                  # an index
        s = s + wnp.sum(x[:k + 1]) + wnp.sum(x[k:])     # slice bounds
        s = s + wnp.sum(wnp.zeros(k + 1) + x[0])        # a shape
        s = s + wnp.sum(wnp.arange(k + 1) * x[1])       # a bound NumPy's arange takes
        for i in range(k):                              # a range bound
            s = s + x[i] ** 2
        return s
    wg.check_grad(f, X, order=2)
    k = int(np.asarray(make(X)))
    expect = np.zeros(N)
    expect[k] += 3.0
    expect[:k + 1] += 1.0
    expect[k:] += 1.0
    expect[0] += k + 1
    expect[1] += k * (k + 1) / 2
    expect[:k] += 2 * X[:k]
    for engine in (wg.grad(f), wg.compile(wg.grad(f))):
        np.testing.assert_allclose(engine(X), expect)


def test_take_and_take_along_axis_with_traced_positions():
    def f(x):
        i = wnp.argsort(x).astype(int)
        return wnp.sum(wnp.take(x, i[:2]) * wnp.take_along_axis(x, i, 0)[:2])
    wg.check_grad(f, X[::-1].copy(), order=2)


def test_float_index_still_refused():
    with pytest.raises(TypeError, match="cannot be used inside an index"):
        wg.grad(lambda x: x[x[0]])(X)
    with pytest.raises(TypeError, match="cannot be used inside an index"):
        wg.grad(lambda x: wnp.sum(x[:x[0]]))(X)


def test_compiled_index_is_recorded_not_guarded():
    """Inside wg.compile an integer array index is an input of the program (take_dynamic): new
    values give new positions without re-tracing; a mask, whose count is a shape, re-traces."""
    g = wg.trace(wrapped, X)
    assert "take_dynamic" in g.source()
    cf, cg = wg.compile(wrapped), wg.compile(wg.grad(wrapped))
    rng = np.random.default_rng(3)
    for _ in range(4):
        y = rng.uniform(0.0, 5.0, N)
        assert cf(y) == pytest.approx(float(np.sum(y[np.floor(y).astype(int) % N])))
        np.testing.assert_allclose(cg(y), wrapped_grad(y))
    masked = wg.compile(wg.grad(lambda x: wnp.sum(x[x > 2.0] ** 2)))
    for y in (X, X[::-1] - 1.0):
        np.testing.assert_allclose(masked(y), np.where(y > 2.0, 2 * y, 0.0))


def test_source_mode_takes_integer_casts_as_constants():
    def f(x):
        i = wnp.floor(x).astype(int) % 5
        return wnp.sum(x[i] * x)
    df = wg.source.grad(f)
    np.testing.assert_allclose(df(X), wg.grad(f)(X))
    i = np.floor(X).astype(int) % 5
    expect = X[i].copy()
    np.add.at(expect, i, X)
    np.testing.assert_allclose(df(X), expect)


def test_vmap_per_example_positions():
    xs = np.stack([X, X[::-1] + 0.5])
    per_example = wg.vmap(wg.grad(wrapped))(xs)
    for row, x in zip(per_example, xs):
        np.testing.assert_allclose(row, wrapped_grad(x))


@pytest.mark.parametrize("make, count", [(lambda k: wnp.eye(k), lambda k: k),
                                         (lambda k: wnp.arange(k), lambda k: k * (k - 1) / 2),
                                         (lambda k: wnp.tri(k), lambda k: k * (k + 1) / 2),
                                         (lambda k: wnp.repeat(np.arange(2.0), k), lambda k: k)])
def test_sizes_from_traced_integers(make, count):
    """wnp functions whose size argument is a traced integer (some without a rule: by value)."""
    def f(x):
        return wnp.sum(make(wnp.floor(x[0] * 2).astype(int))) * x[1]
    for x in (X, X + 1.0):
        k = int(np.floor(x[0] * 2))
        assert wg.grad(f)(x)[1] == pytest.approx(count(k))
        assert wg.jvp(f, (x,), (np.eye(N)[1],))[1] == pytest.approx(count(k))
