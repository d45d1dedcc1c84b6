"""Sparse Jacobians and Hessians (issue 20): detected patterns, colourings, compressed passes.

Every sparse result is compared with the dense one (``wg.jacobian``, ``wg.hessian``): equal
at every stored entry and zero elsewhere. Patterns are compared with the dense Jacobian's
nonzeros: a superset always, exactly them for elementwise, stencil and indexing programs.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings, strategies as st

import wengert as wg
import wengert.numpy as wnp
from wengert import coloring, sparsity

RNG = np.random.default_rng(0)
A4 = RNG.standard_normal((4, 4))


def dense_jacobian(f, x):
    j = np.asarray(wg.jacobian(f)(x))
    return j.reshape(-1, np.size(x))


def nonzeros(m, tol=0.0):
    return np.abs(np.asarray(m)) > tol


def check_jacobian(f, x, exact=False):
    """The pattern covers the dense Jacobian (is it, if ``exact``); every mode, eager and
    compiled, gives the dense Jacobian."""
    dense = dense_jacobian(f, x)
    pattern = wg.jacobian_sparsity(f, x)
    assert isinstance(pattern, sp.csr_array) and pattern.dtype == bool
    p = pattern.toarray()
    assert not (nonzeros(dense) & ~p).any(), "the pattern misses a nonzero"
    if exact:
        np.testing.assert_array_equal(p, nonzeros(dense))
    for mode in ("auto", "forward", "reverse"):
        jac = wg.sparse_jacobian(f, mode=mode)(x)
        assert isinstance(jac, sp.csr_array) and jac.shape == dense.shape
        np.testing.assert_allclose(jac.toarray(), dense, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(wg.compile(wg.sparse_jacobian(f))(x).toarray(), dense,
                               rtol=1e-12, atol=1e-12)
    return pattern


def check_hessian(f, x, exact=False):
    dense = np.asarray(wg.hessian(f)(x))
    pattern = wg.hessian_sparsity(f, x).toarray()
    assert not (nonzeros(dense, 1e-13) & ~pattern).any(), "the Hessian pattern misses one"
    if exact:
        np.testing.assert_array_equal(pattern, nonzeros(dense))
    h = wg.sparse_hessian(f)(x)
    assert isinstance(h, sp.csr_array)
    np.testing.assert_allclose(h.toarray(), dense, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wg.compile(wg.sparse_hessian(f))(x).toarray(), dense,
                               rtol=1e-10, atol=1e-12)


def tridiagonal_residual(x):  # the benchmark's W4 residual
    pad = wnp.concatenate([wnp.zeros(1), x, wnp.zeros(1)])
    return pad[:-2] - 2.0 * x + pad[2:] + x * x


def pentadiagonal(x):
    pad = wnp.concatenate([wnp.zeros(2), x, wnp.zeros(2)])
    return pad[:-4] + pad[1:-3] ** 2 + pad[3:-1] * x + wnp.sin(pad[4:]) - 4.0 * x


def arrowhead(x):  # y0 = sum x^2, y_i = sin x_i
    return wnp.concatenate([wnp.sum(x * x)[None], wnp.sin(x[1:])])


def _setitem(x):
    y = wnp.zeros_like(x)
    y[1:] = x[:-1] * 2.0
    y[0] = x[3]
    return y


# -- patterns -------------------------------------------------------------------------------------
EXACT = {
    "tridiagonal": tridiagonal_residual,
    "pentadiagonal": pentadiagonal,
    "elementwise": lambda x: wnp.exp(x) ** 2 / (1.0 + x * x) + wnp.arctan2(x, 2.0),
    "broadcast": lambda x: wnp.reshape(x, (3, 4)) * wnp.reshape(x, (3, 4))[:, :1],
    "fancy": lambda x: x[np.array([3, 0, 3, 7])] * x[[1, 2, 2, 5]],
    "setitem": _setitem,
    "flip_roll": lambda x: wnp.roll(wnp.flip(x), 2) * x,
    "pad": lambda x: wnp.pad(x, 2) ** 2,
    "diff": lambda x: wnp.diff(wnp.tanh(x), 2),
    "stencil_2d": lambda x: (lambda u: u[1:-1, 1:-1] * 4 - u[:-2, 1:-1] - u[2:, 1:-1]
                             - u[1:-1, :-2] - u[1:-1, 2:])(wnp.reshape(x, (3, 4))),
    "convolve": lambda x: wnp.convolve(wnp.sin(x), np.array([1.0, -2.0, 1.0]), mode="same"),
    "correlate": lambda x: wnp.correlate(x[:5], x[5:], mode="same"),
    "sum_axis": lambda x: wnp.sum(wnp.reshape(x, (3, 4)) ** 2, axis=1),
    "cumsum": lambda x: wnp.cumsum(x[:5] ** 3),
    "matvec": lambda x: A4 @ x[:4],
    "blocks": lambda x: wnp.reshape(x, (3, 2, 2)) @ wnp.reshape(x, (3, 2, 2)),
    "einsum": lambda x: wnp.einsum("ij,jk->ik", wnp.reshape(x, (3, 4)), wnp.reshape(x[:8], (4, 2))),
    "inv": lambda x: wnp.linalg.inv(wnp.reshape(x[:8], (2, 2, 2)) + 3 * np.eye(2)),
    "det": lambda x: wnp.linalg.det(wnp.reshape(x[:8], (2, 2, 2)) + 3 * np.eye(2)),
    "solve": lambda x: wnp.linalg.solve(wnp.reshape(x[:8], (2, 2, 2)) + 3 * np.eye(2),
                                        wnp.reshape(x[8:], (2, 2))),
    "trace_diagonal": lambda x: wnp.diagonal(wnp.reshape(x, (3, 4))) + wnp.trace(
        wnp.reshape(x, (3, 4))),
    "tile_repeat": lambda x: wnp.tile(x[:3], 2) + wnp.repeat(x[3:6], 2),
    "outer": lambda x: wnp.outer(x[:3], x[3:6]).ravel(),
    "cross": lambda x: wnp.cross(x[:3], x[3:6]),
    "logsumexp": lambda x: wg.scipy.special.logsumexp(wnp.reshape(x, (3, 4)), axis=1),
    "norm": lambda x: wnp.linalg.norm(wnp.reshape(x, (3, 4)), axis=1),
    "sort": lambda x: wnp.sort(x) * 2.0,
}
# value-dependent derivatives (a maximum, a clip) and coarse declarations: a superset
SUPERSET = {
    "max_axis": lambda x: wnp.max(wnp.reshape(x, (3, 4)), axis=0),
    "maximum": lambda x: wnp.maximum(x[:6], x[6:]),
    "clip_abs": lambda x: wnp.clip(wnp.abs(x), 0.2, 0.8),
    "triu": lambda x: wnp.triu(wnp.reshape(x, (3, 4))).ravel(),
    "fft": lambda x: wnp.real(wnp.fft.fft(wnp.reshape(x, (3, 4)), axis=1)),
    "where": lambda x: wnp.where(x > 0.3, x ** 2, wnp.sin(x)),
    "solve_triangular": lambda x: wg.scipy.linalg.solve_triangular(
        wnp.reshape(x[:4], (2, 2)) + 3 * np.eye(2), wnp.reshape(x[4:], (2, 4)),
        lower=True).ravel(),
    "mean_var": lambda x: wnp.stack([wnp.mean(x), wnp.var(x[:3])]),
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_pattern_is_exact(name):
    check_jacobian(EXACT[name], RNG.standard_normal(12), exact=True)


@pytest.mark.parametrize("name", sorted(SUPERSET))
def test_pattern_covers(name):
    check_jacobian(SUPERSET[name], RNG.standard_normal(12))


@pytest.mark.parametrize("name", sorted(EXACT) + sorted(SUPERSET))
def test_sparse_hessian_of_every_program(name):
    f = {**EXACT, **SUPERSET}[name]
    x = 0.5 * RNG.standard_normal(12)
    check_hessian(lambda x: wnp.sum(f(x) ** 3), x)
    weights = np.arange(1.0, 1.0 + np.size(f(x))).reshape(np.shape(f(x)))
    check_hessian(lambda x: wnp.sum(f(x) * weights), x)


def test_hessian_pattern_exact_for_stencils_and_products():
    x = RNG.standard_normal(10)

    def least_squares(x):  # r @ r: the pattern of JᵀJ, not a dense block
        pad = wnp.concatenate([wnp.zeros(1), x, wnp.zeros(1)])
        r = pad[:-2] - 2 * x + pad[2:] + x ** 2
        return r @ r
    check_hessian(least_squares, x, exact=True)
    check_hessian(lambda x: wnp.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2), x,
                  exact=True)
    check_hessian(lambda x: wnp.sum(wnp.sin(x)[::3]) + x[0] * x[9], x, exact=True)
    # a value the output does not use adds nothing; nor do elements of a used one it drops
    check_hessian(lambda x: wnp.sum(wnp.exp(x)[:3]) + 0 * wnp.sum(x) + wnp.sum(wnp.exp(x) ** 0)
                  * 0.0, x)
    assert wg.hessian_sparsity(lambda x: wnp.sum(wnp.exp(x)[:3]), x).nnz == 3


def test_pattern_of_a_dense_function_and_undeclared_primitives():
    x = RNG.standard_normal(5)
    p = wg.jacobian_sparsity(lambda x: wnp.sum(x) * x, x)
    assert p.nnz == 25
    p = wg.jacobian_sparsity(lambda x: wnp.linalg.lstsq(np.eye(5)[:, :3] + 1, x, rcond=None)[0], x)
    assert p.nnz == 15  # lstsq declares nothing: dense, never missing an entry
    check_jacobian(lambda x: wnp.linalg.lstsq(np.eye(5)[:, :3] + 1, x, rcond=None)[0], x)


def test_dense_fallback_refuses_a_huge_pattern(monkeypatch):
    monkeypatch.setattr(sparsity, "MAX_ENTRIES", 100)
    with pytest.raises(ValueError, match="lstsq.*dense"):
        wg.jacobian_sparsity(lambda x: wnp.linalg.lstsq(np.ones((300, 2)), x, rcond=None)[0],
                             np.ones(300))


# -- property tests: random sparse programs -------------------------------------------------------
NONLINEAR = [wnp.sin, wnp.tanh, lambda u: u * u, lambda u: wnp.exp(0.3 * u), lambda u: u]


@st.composite
def stencils(draw):
    n = draw(st.integers(4, 25))
    r = draw(st.integers(1, 3))
    offsets = draw(st.lists(st.integers(-r, r), min_size=1, max_size=4, unique=True))
    coefs = draw(st.lists(st.floats(0.5, 2.0), min_size=len(offsets), max_size=len(offsets)))
    phis = draw(st.lists(st.integers(0, len(NONLINEAR) - 1), min_size=len(offsets),
                         max_size=len(offsets)))

    def f(x):
        pad = wnp.concatenate([wnp.zeros(r), x, wnp.zeros(r)])
        y = 0.1 * x
        for k, c, p in zip(offsets, coefs, phis):
            y = y + c * NONLINEAR[p](pad[r + k:r + k + n])
        return y
    return f, n


@st.composite
def block_diagonal(draw):
    nb, bs = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    w = np.random.default_rng(draw(st.integers(0, 99))).standard_normal((bs, bs))

    def f(x):
        X = wnp.reshape(x, (nb, bs))
        return wnp.reshape(wnp.tanh(X @ w) * X + X * wnp.sum(X ** 2, axis=1, keepdims=True),
                           (-1,))
    return f, nb * bs


@st.composite
def random_indexing(draw):
    n = draw(st.integers(2, 20))
    m = draw(st.integers(1, 20))
    i = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)))
    j = np.array(draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)))
    perm = np.random.default_rng(draw(st.integers(0, 99))).permutation(n)

    def f(x):
        y = x[i] * wnp.sin(x[j])
        z = wnp.zeros_like(x)
        z[perm] = x * 2.0
        return wnp.concatenate([y, z[::2]])
    return f, n


@st.composite
def arrowheads(draw):
    n = draw(st.integers(2, 30))
    return arrowhead, n


PROGRAMS = st.one_of(stencils(), block_diagonal(), random_indexing(), arrowheads())


@settings(max_examples=60, deadline=None)
@given(PROGRAMS, st.integers(0, 2 ** 31 - 1))
def test_random_sparse_programs(program, seed):
    f, n = program
    x = np.random.default_rng(seed).uniform(0.3, 1.5, n)
    check_jacobian(f, x)
    # exact too: the programs' structural nonzeros are nonzero at generic points
    np.testing.assert_array_equal(wg.jacobian_sparsity(f, x).toarray(),
                                  nonzeros(dense_jacobian(f, x)))
    check_hessian(lambda x: wnp.sum(wnp.sin(f(x))), x)


# -- colourings -----------------------------------------------------------------------------------
def band(n, b):
    return sp.diags_array([np.ones(n - abs(k)) for k in range(-b, b + 1)],
                          offsets=list(range(-b, b + 1)), format="csr")


def test_colour_counts():
    n = 1000
    x = RNG.standard_normal(n)
    tri = wg.jacobian_sparsity(tridiagonal_residual, x)
    penta = wg.jacobian_sparsity(pentadiagonal, x)
    arrow = wg.jacobian_sparsity(arrowhead, x)
    counts = {
        "tridiagonal columns": wg.color(tri, "column").max() + 1,
        "pentadiagonal columns": wg.color(penta, "column").max() + 1,
        "arrowhead columns": wg.color(arrow, "column").max() + 1,
        "arrowhead rows": wg.color(arrow, "row").max() + 1,
        "tridiagonal Hessian (star)": wg.color(band(n, 1), "star").max() + 1,
        "pentadiagonal Hessian (star)": wg.color(band(n, 2), "star").max() + 1,
        "arrowhead Hessian (star)": wg.color(arrow + arrow.T, "star").max() + 1,
    }
    plan = wg.sparse_jacobian(arrowhead).plan(x)
    print(f"\ncolours at n = {n}:")
    for k, v in counts.items():
        print(f"  {k:30s} {v}")
    print(f"  arrowhead, mode='auto'         {plan.mode} ({plan.num_colors} colours)")
    assert counts["tridiagonal columns"] == 3
    assert counts["pentadiagonal columns"] == 5
    assert counts["arrowhead columns"] == n
    assert counts["arrowhead rows"] == 2
    assert counts["tridiagonal Hessian (star)"] == 3
    assert counts["pentadiagonal Hessian (star)"] == 5
    assert counts["arrowhead Hessian (star)"] == 2
    assert plan.mode == "reverse" and plan.num_colors == 2
    assert wg.sparse_jacobian(tridiagonal_residual).plan(x).mode == "forward"
    np.testing.assert_allclose(wg.sparse_jacobian(arrowhead)(x).toarray(),
                               dense_jacobian(arrowhead, x), rtol=1e-12)


def test_colourings_of_a_million_banded_columns_are_fast_and_optimal():
    import time
    n = 10 ** 6
    t = time.perf_counter()
    assert coloring.column_coloring(band(n, 1)).max() + 1 == 3
    assert coloring.row_coloring(band(n, 2)).max() + 1 == 5
    assert coloring.star_coloring(band(n, 1)).max() + 1 == 3
    assert time.perf_counter() - t < 30  # a few seconds on a busy machine


@pytest.mark.parametrize("rounds", [coloring.BAND_ROUNDS, 0])  # 0: the greedy orders
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.floats(0.01, 0.4), st.booleans(),
       st.integers(0, 2 ** 31 - 1))
def test_colourings_are_valid(rounds, m, n, density, hub, seed):
    rng = np.random.default_rng(seed)
    a = sp.random_array((m, n), density=density, rng=rng, format="lil")
    s = sp.random_array((n, n), density=density, rng=rng, format="lil")
    if hub:
        a[0, :] = 1
        s[0, :] = 1
    s = (s + s.T).tocsr()
    old = coloring.BAND_ROUNDS
    coloring.BAND_ROUNDS = rounds
    try:
        c, r, star = coloring.column_coloring(a), coloring.row_coloring(a), \
            coloring.star_coloring(s)
    finally:
        coloring.BAND_ROUNDS = old
    assert coloring.is_column_coloring(a, c) and coloring.is_column_coloring(a.T, r)
    assert coloring.is_star_coloring(s, star)
    # the star colouring recovers a symmetric matrix of that pattern from H S
    h = (s.multiply(rng.standard_normal((n, n))) + 0).tocsr()
    h = sp.csr_array(h + h.T + sp.eye_array(n))
    pattern = coloring.as_pattern(h)
    seed_matrix = np.zeros((n, star.max() + 1))
    seed_matrix[np.arange(n), star] = 1
    b = (h @ seed_matrix).T.ravel()
    values = b[coloring.star_sources(pattern, star)]
    rebuilt = sp.csr_array((values, pattern.indices, pattern.indptr), shape=(n, n))
    np.testing.assert_allclose(rebuilt.toarray(), h.toarray(), atol=1e-12)


def test_a_wrong_colouring_is_caught():
    assert not coloring.is_column_coloring(band(5, 1), np.zeros(5, int))
    assert not coloring.is_star_coloring(band(6, 1), np.array([0, 1, 0, 1, 0, 1]))
    with pytest.raises(ValueError, match="not a star colouring"):
        coloring.star_sources(band(6, 1), np.array([0, 1, 0, 1, 0, 1]))


def test_color_api():
    p = band(6, 1)
    for mode in ("column", "row", "star"):
        c = wg.color(p, mode)
        assert c.dtype.kind == "i" and c.shape == (6,)
    np.testing.assert_array_equal(wg.color(p.toarray()), wg.color(p))
    with pytest.raises(ValueError, match="mode"):
        wg.color(p, "diagonal")
    with pytest.raises(ValueError, match="square"):
        wg.color(np.ones((2, 3)), "star")


# -- the transforms ---------------------------------------------------------------------------------
def test_pytrees_in_and_out():
    def f(p, scale):
        return {"a": p["u"][1:] * p["v"][:-1] * scale, "b": (wnp.sin(p["u"]), p["v"][0])}
    p = {"u": RNG.standard_normal(4), "v": RNG.standard_normal(4)}
    jac = wg.sparse_jacobian(f)(p, 2.0)
    assert jac.shape == (3 + 4 + 1, 8)
    dense = wg.jacobian(f)(p, 2.0)
    blocks = [np.hstack([np.reshape(dense["a"][k], (3, 4)) for k in ("u", "v")]),
              np.hstack([np.reshape(dense["b"][0][k], (4, 4)) for k in ("u", "v")]),
              np.hstack([np.reshape(dense["b"][1][k], (1, 4)) for k in ("u", "v")])]
    np.testing.assert_allclose(jac.toarray(), np.vstack(blocks), rtol=1e-12)
    jac2 = wg.sparse_jacobian(f, argnums=(0, 1))(p, 2.0)
    assert jac2.shape == (8, 9)
    np.testing.assert_allclose(jac2.toarray()[:, :8], jac.toarray())
    np.testing.assert_allclose(jac2.toarray()[:3, 8], p["u"][1:] * p["v"][:-1])


def test_hessian_of_pytree_and_float32():
    def f(p):
        return wnp.sum(p[0] ** 2 * p[1]) + wnp.sum(wnp.sin(p[1]))
    p = (RNG.standard_normal(3), RNG.standard_normal(3))
    h = wg.sparse_hessian(f)(p)
    dense = wg.hessian(f)(p)
    full = np.block([[dense[0][0], dense[0][1]], [dense[1][0], dense[1][1]]])
    np.testing.assert_allclose(h.toarray(), full, rtol=1e-12)
    x32 = RNG.standard_normal(6).astype(np.float32)
    j = wg.sparse_jacobian(tridiagonal_residual)(x32)
    assert j.dtype == np.float32
    np.testing.assert_allclose(j.toarray(), dense_jacobian(tridiagonal_residual, x32),
                               rtol=1e-6)


def test_plans_are_cached_per_signature(monkeypatch):
    calls = []
    detect = wg.sparse._detect

    def counting(*a, **k):
        calls.append(1)
        return detect(*a, **k)
    monkeypatch.setattr(wg.sparse, "_detect", counting)
    sj = wg.sparse_jacobian(tridiagonal_residual)
    cj = wg.compile(sj)
    for _ in range(3):
        x = RNG.standard_normal(7)
        np.testing.assert_allclose(sj(x).toarray(), dense_jacobian(tridiagonal_residual, x))
        np.testing.assert_allclose(cj(x).toarray(), dense_jacobian(tridiagonal_residual, x))
    assert len(calls) == 1  # one detection for the signature, shared by eager and compiled
    sj(RNG.standard_normal(9))
    cj(RNG.standard_normal(9))
    assert len(calls) == 2
    (compiled, _), = [v for v in cj._passes.values() if v[1].sparsity.shape == (7, 7)]
    assert compiled.num_traces == 1


def test_given_sparsity_and_its_checks():
    x = RNG.standard_normal(6)
    pattern = band(6, 1).toarray() != 0
    j = wg.sparse_jacobian(tridiagonal_residual, sparsity=pattern)(x)
    np.testing.assert_allclose(j.toarray(), dense_jacobian(tridiagonal_residual, x))
    with pytest.raises(ValueError, match=r"shape \(6, 6\).*\(7, 7\)"):
        wg.sparse_jacobian(tridiagonal_residual, sparsity=pattern)(np.ones(7))
    h = wg.sparse_hessian(lambda x: wnp.sum(tridiagonal_residual(x) ** 2),
                          sparsity=band(6, 2))(x)
    np.testing.assert_allclose(
        h.toarray(), wg.hessian(lambda x: wnp.sum(tridiagonal_residual(x) ** 2))(x), rtol=1e-12)


def test_errors_say_what_to_do():
    x = RNG.standard_normal(4)
    with pytest.raises(ValueError, match="mode"):
        wg.sparse_jacobian(tridiagonal_residual, mode="sideways")
    with pytest.raises(ValueError, match="scalar"):
        wg.sparse_hessian(tridiagonal_residual)(x)
    with pytest.raises(TypeError, match="integer"):
        wg.sparse_jacobian(tridiagonal_residual)(np.arange(4))
    with pytest.raises(TypeError, match=r"wg.compile\(wg.sparse_jacobian\(f\)\)"):
        wg.grad(lambda x: wg.sparse_jacobian(tridiagonal_residual)(x).sum())(x)
    with pytest.raises(TypeError, match="compile it as a whole"):
        wg.compile(lambda x: wg.sparse_jacobian(tridiagonal_residual)(x))(x)


def test_functions_of_one_output_and_constant_outputs():
    x = RNG.standard_normal(5)
    j = wg.sparse_jacobian(lambda x: wnp.sum(x ** 2))(x)
    assert j.shape == (1, 5)
    np.testing.assert_allclose(j.toarray()[0], 2 * x)
    j = wg.sparse_jacobian(lambda x: np.ones(3))(x)
    assert j.shape == (3, 5) and j.nnz == 0
    h = wg.sparse_hessian(lambda x: wnp.sum(3.0 * x))(x)
    assert h.shape == (5, 5) and h.nnz == 0


# -- the declarations, read from the registry ------------------------------------------------------
def _elementwise_registry():
    from wengert.rules.elementwise import REGISTRY
    from wengert.rules.special_base import SPECIAL
    import wengert.scipy.special  # noqa: F401 (registers every scipy.special family)
    prims = {}
    for name, p in list(REGISTRY.items()) + list(SPECIAL.items()):
        if isinstance(p, wg.Primitive) and p.sparsity is not None and p.nargs:
            prims[f"{name}/{p.name}"] = p
    return prims


ELEMENTWISE_PRIMS = _elementwise_registry()


@pytest.mark.parametrize("name", sorted(ELEMENTWISE_PRIMS))
def test_each_declared_pattern_covers_its_jacobian(name):
    """Every declared primitive of the elementwise tables, in each argument, on broadcast
    shapes ((3, 1) against (1, 4)): the declared pattern holds every nonzero."""
    import warnings
    p = ELEMENTWISE_PRIMS[name]
    lo, hi = p.domain or (-2.0, 2.0)
    rng = np.random.default_rng(1)
    shapes = ([(3, 1), (1, 4)] + [(3, 4)] * p.nargs)[:p.nargs] if p.nargs > 1 else [(5,)]
    args = [rng.uniform(lo, hi, s) for s in shapes]
    for attempt in (args, args[:1] + [np.rint(a).astype(int) for a in args[1:]],
                    args[:1] + [2] * (p.nargs - 1)):  # integer exponents, dimensions
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p(*attempt)
        except (TypeError, ValueError):
            continue
        args = attempt
        break
    checked = 0
    for i in range(p.nargs):
        def f(z, i=i):
            a = list(args)
            a[i] = z
            out = p(*a)
            return wnp.stack([o for o in out]) if p.multiple_results else out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # poles, truncated orders: numbers, not patterns
            try:
                dense = dense_jacobian(f, args[i])
            except (NotImplementedError, TypeError, ValueError):
                continue  # no derivative in this argument (an order, an integer)
            pattern = wg.jacobian_sparsity(f, args[i]).toarray()
        # (an infinite slope makes the dense Jacobian's other columns inf * 0 = nan there)
        assert not (nonzeros(np.where(np.isfinite(dense), dense, 0.0)) & ~pattern).any(), \
            (name, i)
        checked += 1
    if not getattr(p, "nondiff", False):
        assert checked, f"{name}: no argument could be checked"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_fused_passes_equal_the_numpy_programs(dtype):
    """Under fusion the compressed pass's last kernel computes the stored entries straight
    from its gather positions (wengert/graph/fuse.py): bitwise the unfused program's, in
    forward and reverse mode and for a Hessian."""
    pytest.importorskip("numba", reason="fused kernels need numba (the 'fast' extra)")
    x = np.random.default_rng(5).standard_normal(40).astype(dtype)

    def hess_f(x):
        return wnp.sum((x[1:] - x[:-1] ** 2) ** 2) + wnp.sum(wnp.sin(x) * x)

    def stencil_2d(x):  # a broadcast against the colours' rows
        u = wnp.reshape(x, (5, 8))
        return (u[1:-1, 1:-1] * 4.0 - u[:-2, 1:-1] * u[2:, 1:-1] - u[1:-1, :-2]
                + u[1:-1, 2:] ** 2).ravel()
    cases = [wg.sparse_jacobian(tridiagonal_residual, mode="forward"),
             wg.sparse_jacobian(tridiagonal_residual, mode="reverse"),
             wg.sparse_jacobian(pentadiagonal), wg.sparse_jacobian(stencil_2d),
             wg.sparse_hessian(hess_f)]
    folded = []
    for s in cases:
        fused, plain = wg.compile(s, fuse=True), wg.compile(s, fuse=False)
        a, b = fused(x), plain(x)
        assert a.dtype == b.dtype == s(x).dtype
        np.testing.assert_array_equal(a.indptr, b.indptr)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.data, b.data)
        (run, _), = fused._passes.values()
        assert not run.fuse_failures
        folded.append(sum(fn.folded_gathers for entries in run.cache.values()
                          for _, fn, _ in entries))
    assert folded[:2] == [1, 1]  # the tridiagonal passes end in one folded gather


def test_assembly_keeps_the_pass_result():
    """The csr_array holds the compressed pass's result itself (no copy), int32 indices."""
    x = np.random.default_rng(6).standard_normal(30)
    plan = wg.sparse_jacobian(tridiagonal_residual).plan(x)
    data = np.random.default_rng(7).standard_normal(plan.indices.size)
    J = plan.assemble(data)
    assert J.data is data or np.shares_memory(J.data, data)
    assert J.indices.dtype == J.indptr.dtype == np.int32
