"""Arrays beyond NumPy (API.md §10): every transform on a NEP-18 test double (the code path
CuPy takes, runnable without a GPU) and on Dask arrays (threaded scheduler), equal to NumPy
on the same data; Dask results stay lazy with the input's chunks; arrays without NEP 18 are
refused by name."""
import re
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

import array_matrix as M
import foreign as F

STRICT_CASES = [c for c in M.CASES if not c.startswith("mixed")]


def _is_foreign(x):
    return type(x) is F.Foreign


@pytest.mark.parametrize("case", STRICT_CASES)
def test_double_strict(case, monkeypatch):
    """As CuPy: no NumPy operand ever meets a foreign one, nothing is converted."""
    monkeypatch.setitem(F.STRICT, "on", True)
    del F.CALLS[:]
    M.run_case(case, F.Foreign, F.to_numpy, _is_foreign)
    assert F.CALLS  # the values went through the double's own protocols


@pytest.mark.parametrize("case", list(M.CASES))
def test_double_mixed_with_numpy(case):
    """NumPy weights, foreign data: the results are foreign, never converted."""
    M.run_case(case, F.Foreign, F.to_numpy, _is_foreign)


def test_double_refuses_conversions():
    """The test double can fail: it catches what a careless engine would do."""
    x = F.Foreign(np.ones(3))
    for convert in (np.asarray, lambda a: float(a[0]), lambda a: a.item(), bool):
        with pytest.raises(F.Converted):
            convert(x)
    with pytest.raises(F.Converted):  # an adjoint made by NumPy, met by a foreign one
        F.STRICT["on"] = True
        try:
            np.zeros(3) + x
        finally:
            F.STRICT["on"] = False


def _branchy(x):
    return wnp.sum(x ** 2) if wnp.sum(x) > 0 else -wnp.sum(x)  # bool(): the user asks


def test_user_asking_for_a_number_gets_it():
    """Where the user's own code asks for a number, the library is asked (the double
    refuses, as CuPy would refuse a host copy elsewhere; Dask computes)."""
    with pytest.raises(F.Converted, match="bool"):
        wg.grad(_branchy)(F.Foreign(np.ones(3)))


# -- Dask, threaded scheduler ------------------------------------------------------------------
try:
    import dask
    import dask.array as da
except ImportError:  # an optional dependency: pip install -e ".[dask]"
    dask = da = None
needs_dask = pytest.mark.skipif(da is None, reason="Dask is not installed (.[dask] extra)")


def _dwrap(a):
    return da.from_array(a, chunks=(5,) + a.shape[1:])


def _dnum(x):
    return x.compute(scheduler="threads") if isinstance(x, da.Array) else x


@pytest.mark.parametrize("case", list(M.CASES))
@needs_dask
def test_dask_threaded(case):
    with dask.config.set(scheduler="threads"):
        M.run_case(case, _dwrap, _dnum, lambda x: isinstance(x, da.Array))


def _no_compute(*args, **kwargs):
    raise AssertionError("something computed a Dask array while building a derivative")


@needs_dask
def test_dask_gradient_is_lazy_with_the_inputs_chunks():
    x = da.from_array(M.V, chunks=4)
    u = da.from_array(M.U, chunks=4)
    X, y = da.from_array(M.X, chunks=(5, 3)), da.from_array(M.Y, chunks=5)
    with dask.config.set(scheduler=_no_compute):
        g = wg.grad(M.f)(x)
        val, dg = wg.value_and_grad(M.f)(x)
        out, t = wg.jvp(M.g, (x,), (u,))
        hv = wg.hvp(M.f, x, u)
        gd = wg.grad(M.loss, argnums=1)(M.W, X, y)
        gw = wg.grad(M.loss)(M.W, X, y)
        hw = wg.hvp(lambda w: M.loss(w, X, y), M.W, M.W)
        with pytest.raises(AssertionError, match="computed"):
            g.compute()  # the scheduler does raise
    for r in (g, dg, t, hv):
        assert isinstance(r, da.Array) and r.chunks == x.chunks
    assert isinstance(gd, da.Array) and gd.chunks == X.chunks
    assert isinstance(gw, da.Array) and isinstance(hw, da.Array)
    np.testing.assert_allclose(_dnum(g), wg.grad(M.f)(M.V), rtol=1e-12)
    np.testing.assert_allclose(_dnum(gw), wg.grad(M.loss)(M.W, M.X, M.Y), rtol=1e-12)


@needs_dask
def test_dask_gradient_of_a_larger_chunked_sum_keeps_its_graph_blockwise():
    """Each chunk of the gradient depends on its chunk of the input only."""
    x = da.random.default_rng(0).normal(size=(40, 3), chunks=(10, 3))
    g = wg.grad(lambda x: wnp.sum(wnp.tanh(x) ** 2))(x)
    assert g.chunks == x.chunks
    np.testing.assert_allclose(_dnum(g), wg.grad(lambda x: wnp.sum(wnp.tanh(x) ** 2))(_dnum(x)),
                               rtol=1e-12)


def _layer_names(a):
    return {k[0] if isinstance(k, tuple) else k for k in dict(a.__dask_graph__())}


@needs_dask
def test_dask_sum_cotangent_is_broadcast_in_the_operands_chunks():
    """A full sum's cotangent is broadcast in the operand's chunks: not as one chunk the
    length of the data, then split by a rechunk (bench_dask.py's memory)."""
    X, y = da.from_array(M.X, chunks=(5, 3)), da.from_array(M.Y, chunks=5)
    x = da.from_array(M.V, chunks=4)
    from wengert.scipy.special import logsumexp
    reductions = (lambda x: wnp.mean(wnp.sin(x)), lambda x: wnp.max(x),
                  lambda x: wnp.linalg.norm(x), lambda x: logsumexp(x))
    for g in [wg.grad(M.loss)(M.W, X, y), wg.grad(M.loss, argnums=1)(M.W, X, y)] + [
            wg.grad(r)(x) for r in reductions]:
        assert not any("rechunk" in n for n in _layer_names(g)), sorted(_layer_names(g))
    for r in reductions + (lambda x: wnp.prod(x),):  # (prod's cumprods rechunk: its own)
        np.testing.assert_allclose(_dnum(wg.grad(r)(x)), wg.grad(r)(M.V), rtol=1e-12)
    np.testing.assert_allclose(_dnum(wg.grad(M.loss)(M.W, X, y)),
                               wg.grad(M.loss)(M.W, M.X, M.Y), rtol=1e-12)


@needs_dask
def test_broadcast_view_takes_a_dask_layout_for_new_and_stretched_axes_only():
    from wengert.arrays import broadcast_view
    a = da.from_array(np.arange(6.0).reshape(6, 1), chunks=(4, 1))
    b = broadcast_view(a, (2, 6, 3), chunks=((1, 1), (3, 3), (2, 1)))
    assert b.chunks == ((1, 1), (4, 2), (2, 1))  # the kept axis keeps a's chunks (Dask's rule)
    np.testing.assert_array_equal(_dnum(b), np.broadcast_to(np.arange(6.0).reshape(6, 1),
                                                            (2, 6, 3)))
    assert broadcast_view(a, (6, 3), chunks=((6,), (1, 1))).chunks == ((4, 2), (3,))  # another
    assert type(broadcast_view(np.ones(2), (3, 2), chunks=((1, 2), (2,)))) is np.ndarray


@needs_dask
def test_dask_branch_on_a_value_computes_it_as_the_user_asked():
    with dask.config.set(scheduler="threads"):
        g = wg.grad(_branchy)(_dwrap(M.V + 1))
    np.testing.assert_allclose(_dnum(g), 2 * (M.V + 1), rtol=1e-12)


@needs_dask
def test_dask_compile_keys_on_shape_not_value():
    f = wg.compile(M.f)
    a, b = _dwrap(M.V), _dwrap(M.U)
    np.testing.assert_allclose(_dnum(f(a)), M.f(M.V), rtol=1e-12)
    np.testing.assert_allclose(_dnum(f(b)), M.f(M.U), rtol=1e-12)
    assert f.num_traces == 1


# -- arrays of libraries without NumPy's protocols ---------------------------------------------
def test_array_api_only_arrays_are_refused_by_name():
    xp = pytest.importorskip("array_api_strict", reason="array-api-strict is optional")
    x = xp.asarray([1.0, 2.0])
    with pytest.raises(TypeError, match=r"an array of array_api_strict .*NEP 13/18.*CuPy, Dask"):
        wg.grad(lambda x: wnp.sum(x * x))(x)


def test_other_array_like_is_refused_by_name():
    class Tensorish:  # shape and dtype, no NEP 18: a library wengert cannot carry
        shape, dtype = (2,), np.dtype(float)
    Tensorish.__module__ = "mylib.tensors"
    with pytest.raises(TypeError, match=r"an array of mylib \(mylib\.tensors\.Tensorish\)"):
        wg.jvp(lambda x: x, (Tensorish(),), (Tensorish(),))


@needs_dask
def test_wnp_reshape_of_a_dask_array_passes_no_order():
    """Dask's reshape takes no ``order=``: wnp.reshape passes it only when asked."""
    x = da.from_array(np.arange(12.0), chunks=6)
    r = wnp.reshape(x, (2, 6))
    assert isinstance(r, da.Array)
    np.testing.assert_array_equal(_dnum(r), np.arange(12.0).reshape(2, 6))
    np.testing.assert_array_equal(wnp.reshape(np.arange(6.0), (2, 3), order="F"),
                                  np.arange(6.0).reshape(2, 3, order="F"))


def test_zeros_and_seeds_are_made_by_the_inputs_library():
    from wengert.arrays import asarray, ones, zeros, zeros_like_value
    x = F.Foreign(np.ones((2, 3), np.float32))
    for made in (zeros((4,), np.float64, like=x), ones((), np.float32, like=x),
                 asarray(np.eye(2), like=x), zeros_like_value(x)):
        assert type(made) is F.Foreign
    assert zeros_like_value(x).dtype == np.float32 and zeros_like_value(x).shape == (2, 3)
    assert type(zeros((2,), like=np.ones(2))) is np.ndarray and zeros_like_value(1.0) == 0.0


# -- every array function of test_arrays.TABLE on the double -------------------------------------
import test_arrays as TA  # noqa: E402  (the table of array functions, with their arguments)

# Functions whose derivative needs the values themselves to pick positions (a sort, a search,
# a histogram, nan positions, a boolean mask's count). Two kinds (API.md §10: never a silent
# host copy or .compute()):
# IN_LIBRARY: the positions are found by the array's own library (np.argsort dispatched to it,
# NaNs masked and counted with its own ops, exponents masked with its where), so the values
# never leave it. Of these, LAZY_ON_DASK stay lazy on Dask too; DASK_LACKS would need
# np.argsort, np.argpartition or np.linalg.pinv, which Dask lacks (its fallback computes):
# refused there by name.
IN_LIBRARY = {
    "sort", "partition", "median", "median_axes_keep", "quantile", "percentile_keep",
    "nanmean", "nanvar", "nanstd", "nanstd_ddof", "logspace", "geomspace", "polyfit",
    "polyfit_weighted_cov", "linalg.svdvals", "nanquantile", "nanpercentile_keep", "nanmedian",
    "nanmedian_all", "interp", "interp_left_right", "interp_period",
}
LAZY_ON_DASK = {"nanmean", "nanvar", "nanstd", "nanstd_ddof", "logspace", "geomspace",
                "linalg.svdvals", "interp", "interp_left_right", "interp_period"}
DASK_LACKS = {"sort": "wnp.sort", "partition": "wnp.partition", "median": "wnp.median",
                 "median_axes_keep": "wnp.median", "quantile": "wnp.quantile",
                 "percentile_keep": "wnp.percentile", "nanquantile": "wnp.nanquantile",
                 "nanpercentile_keep": "wnp.nanpercentile", "nanmedian": "wnp.nanmedian",
                 "nanmedian_all": "wnp.nanmedian",
                 # lstsq's derivatives need np.linalg.pinv, which Dask lacks
                 "polyfit": "wnp.linalg.lstsq (and wnp.polyfit)",
                 "polyfit_weighted_cov": "wnp.linalg.lstsq (and wnp.polyfit)"}
# ON_HOST: the output's shape or positions are read off the values on the host (unique values,
# a mask's count, histogram bins, where the zeros end, q's order statistics): refused with a
# TypeError naming the function and the library (arrays.host_values), on every library; the
# user converts where they choose.
ON_HOST = {
    "setitem_mask": "x[i] or x[i] = v by an index array", "quantile_in_q": "wnp.quantile",
    "percentile_in_q": "wnp.percentile", "piecewise": "wnp.piecewise",
    "piecewise_args": "wnp.piecewise", "trim_zeros": "wnp.trim_zeros",
    "trim_zeros_axis": "wnp.trim_zeros", "unique": "wnp.unique", "unique_axis": "wnp.unique",
    "histogram_weights": "wnp.histogram", "histogram_edges": "wnp.histogram",
    "histogram_density": "wnp.histogram", "histogram_range": "wnp.histogram",
    "histogram_bins_array": "wnp.histogram", "histogram_bin_edges": "wnp.histogram_bin_edges",
    "nanquantile_in_q": "wnp.nanquantile",
}
_BY_NAME = {t[0]: t for t in TA.TABLE}


def test_the_lists_name_table_functions():
    """The lists can fail: every name is a TABLE entry, and none is in both."""
    for name in IN_LIBRARY | set(ON_HOST):
        assert name in _BY_NAME, name
    assert not IN_LIBRARY & set(ON_HOST)
    assert LAZY_ON_DASK | set(DASK_LACKS) <= IN_LIBRARY


def _sum_of_squares(f):
    def loss(*args):
        out = f(*args)
        parts = out if isinstance(out, (tuple, list)) else [out]
        return sum(wnp.sum(wnp.real(p) ** 2) for p in parts)
    return loss


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name,f,args,order", [t for t in TA.TABLE if t[0] not in ON_HOST],
                         ids=[i for i in TA.IDS if i not in ON_HOST])
def test_every_array_function_on_the_double(name, f, args, order):
    """The gradient of each TABLE function on foreign arrays: foreign, equal to NumPy's."""
    loss = _sum_of_squares(f)
    nums = tuple(range(len(args)))
    ref = wg.grad(loss, argnums=nums)(*args)
    got = wg.grad(loss, argnums=nums)(*[F.Foreign(a) if isinstance(a, np.ndarray) else a
                                        for a in args])
    for a, r, g in zip(args, ref, got):
        if isinstance(a, np.ndarray):
            assert type(g) is F.Foreign, type(g)
        np.testing.assert_allclose(F.to_numpy(g), r, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(IN_LIBRARY - {"polyfit_weighted_cov"}))
def test_in_library_positions_under_cupys_rules(name, monkeypatch):
    """As CuPy: what wengert makes to find the positions (an arange, q's weights) is made in
    the values' library, never a NumPy operand beside them. (polyfit_weighted_cov's x is a
    NumPy constant of the user's: a mix CuPy refuses in the user's own code.)"""
    monkeypatch.setitem(F.STRICT, "on", True)
    _, f, args, _ = _BY_NAME[name]
    loss = _sum_of_squares(f)
    nums = tuple(range(len(args)))
    got = wg.grad(loss, argnums=nums)(*_foreign_args(args, F.Foreign))
    for a, r, g in zip(args, wg.grad(loss, argnums=nums)(*args), got):
        assert type(g) is F.Foreign
        np.testing.assert_allclose(F.to_numpy(g), r, rtol=1e-10, atol=1e-12)


def test_nan_statistics_of_an_all_nan_slice_in_the_library():
    """A CuPy count is not read: no warning, but the all-NaN slice is NaN, as NumPy's."""
    x = np.array([[np.nan, 1.0, 2.0], [np.nan, np.nan, 5.0], [np.nan, 3.0, 4.0]])
    for f in (lambda x: wnp.nanmedian(x, axis=0), lambda x: wnp.nanquantile(x, 0.3, axis=0)):
        with pytest.warns(RuntimeWarning, match="All-NaN"):
            ref = f(x)
        with pytest.warns(RuntimeWarning, match="All-NaN"):
            ref_t = wg.jvp(f, (x,), (np.ones_like(x),))[1]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            val, got = wg.jvp(f, (F.Foreign(x),), (F.Foreign(np.ones_like(x)),))
        np.testing.assert_array_equal(F.to_numpy(val), ref)
        np.testing.assert_array_equal(F.to_numpy(got), ref_t)
        assert np.isnan(ref[0]) and not np.isnan(ref[1:]).any()


@pytest.mark.parametrize("f", [lambda a: wnp.geomspace(a, 8.0, 4),
                               lambda a: wnp.geomspace(3.0, a, 4),
                               lambda a: wnp.logspace(a, 2.0, 4),
                               lambda a: wnp.linspace(a, 2.0, 4)])
def test_grids_with_one_plain_end_under_cupys_rules(f, monkeypatch):
    """A plain end beside a CuPy one is moved into its library; the ends put back by
    index_update stay there (np.asarray of a CuPy end would be a host copy)."""
    monkeypatch.setitem(F.STRICT, "on", True)
    a, u = np.array([2.0, 1.0]), np.array([1.0, -0.5])
    v, t = wg.jvp(f, (F.Foreign(a),), (F.Foreign(u),))
    v0, t0 = wg.jvp(f, (a,), (u,))
    assert type(v) is F.Foreign and type(t) is F.Foreign
    np.testing.assert_allclose(F.to_numpy(v), v0, rtol=1e-14)
    np.testing.assert_allclose(F.to_numpy(t), t0, rtol=1e-14)


def _foreign_args(args, wrap):
    return [wrap(a) if isinstance(a, np.ndarray) else a for a in args]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(ON_HOST))
def test_positions_read_on_the_host_are_refused_by_name(name):
    """No conversion (the double raises Converted on any): a TypeError naming the function,
    the library and what to do."""
    _, f, args, _ = _BY_NAME[name]
    loss = _sum_of_squares(f)
    msg = re.escape(ON_HOST[name]) + r" needs the values .* an array of foreign " \
        r"\(foreign\.Foreign\).*np\.asarray"
    with pytest.raises(TypeError, match=msg):
        wg.grad(loss, argnums=tuple(range(len(args))))(*_foreign_args(args, F.Foreign))


def test_sort_of_the_double_has_second_derivatives_in_its_library():
    """The in-library sort goes through take_dynamic/put_dynamic: hessian and jvp too."""
    x = np.array([0.3, -1.2, 2.0, 0.7, -0.1])

    def f(x):
        return wnp.sum(wnp.sort(x) ** 3 * np.arange(1.0, 6.0)) + wnp.median(x) ** 2
    h = wg.hessian(f)(F.Foreign(x))
    assert type(h) is F.Foreign
    np.testing.assert_allclose(F.to_numpy(h), wg.hessian(f)(x), rtol=1e-12)
    _, t = wg.jvp(lambda x: wnp.sort(x), (F.Foreign(x),), (F.Foreign(np.arange(5.0)),))
    np.testing.assert_array_equal(F.to_numpy(t), np.arange(5.0)[np.argsort(x)])
    wg.check_grad(f, x, order=2)


@pytest.mark.parametrize("nb,ishape,rest,dt", [(0, (6,), (), float), (1, (2, 3), (2,), float),
                                               (0, (4,), (3,), complex)])
def test_put_dynamic_in_the_library_adds_repeated_positions(nb, ishape, rest, dt):
    """The bincount route (no np.add.at in Dask) against NumPy's np.add.at route."""
    from wengert.rules.take import put_dynamic
    rng = np.random.default_rng(1)
    i = rng.integers(-4, 4, size=ishape)  # repeats, and negative positions as NumPy takes them
    g = rng.normal(size=(2,) * nb + ishape + rest).astype(dt)
    if dt is complex:
        g = g + 1j * rng.normal(size=g.shape)
    got = put_dynamic(F.Foreign(g), F.Foreign(i), 4, nb)
    assert type(got) is F.Foreign
    np.testing.assert_allclose(F.to_numpy(got), put_dynamic(g, i, 4, nb), rtol=1e-14)


@needs_dask
def test_dask_implements_follows_dasks_own_lookup():
    from wengert.arrays import _dask_has
    assert not _dask_has(np.argsort) and not _dask_has(np.argpartition)
    assert _dask_has(np.nanmean) and _dask_has(np.linalg.svd) and _dask_has(np.bincount)


def _dask_case(args, name):
    # tall-and-skinny for Dask's svd (chunked along the rows only)
    chunks = (lambda a: (2,) + a.shape[1:]) if name == "linalg.svdvals" else (lambda a: 2)
    return _foreign_args(args, lambda a: da.from_array(a, chunks=chunks(a)))


@needs_dask
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(LAZY_ON_DASK))
def test_positions_in_the_library_stay_lazy_on_dask(name):
    _, f, args, _ = _BY_NAME[name]
    loss = _sum_of_squares(f)
    nums = tuple(range(len(args)))
    with dask.config.set(scheduler=_no_compute):
        got = wg.grad(loss, argnums=nums)(*_dask_case(args, name))
    ref = wg.grad(loss, argnums=nums)(*args)
    for a, r, g in zip(args, ref, got):
        if isinstance(a, np.ndarray):
            assert isinstance(g, da.Array), type(g)
        np.testing.assert_allclose(_dnum(g), r, rtol=1e-10, atol=1e-12)


@needs_dask
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", sorted(ON_HOST) + sorted(DASK_LACKS))
def test_positions_dask_cannot_find_are_refused_without_computing(name):
    """Refused by name, with .compute() as the way out; the scheduler raises on any compute,
    and Dask's FutureWarning for a function it lacks (before its own .compute()) is an error."""
    _, f, args, _ = _BY_NAME[name]
    loss = _sum_of_squares(f)
    what = ON_HOST.get(name) or DASK_LACKS[name]
    with dask.config.set(scheduler=_no_compute), warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        msg = re.escape(what) + r" needs the values .* an array of dask .*call \.compute\(\)"
        with pytest.raises(TypeError, match=msg):
            wg.grad(loss, argnums=tuple(range(len(args))))(*_dask_case(args, name))


def test_repeated_positions_add_up_on_dask_chunks():
    """x[idx] with repeats, and take with a Dask index, on a Dask array of several chunks:
    the gradient adds in Dask (a weighted bincount whose positions take the weights'
    chunks), lazily, and equals NumPy's."""
    da = pytest.importorskip("dask.array", reason="Dask is optional")
    xn = np.arange(6.0)
    idx = np.array([0, 0, 3, 5, 5, 5])
    ind = np.array([1, 1, 4])
    for chunks in (2, (1, 5)):
        x = da.from_array(xn, chunks=chunks)
        for f in (lambda x: wnp.sum(x[idx] ** 2),
                  lambda x: wnp.sum(wnp.take(x, da.from_array(ind, chunks=1)) ** 2)):
            g = wg.grad(f)(x)
            assert isinstance(g, da.Array)
            np.testing.assert_allclose(g.compute(), wg.grad(f)(xn), rtol=1e-15)
        X = da.from_array(np.arange(12.0).reshape(3, 4), chunks=(2, 2))
        h = lambda x: wnp.sum(x[:, [1, 1, 3]] ** 2)
        np.testing.assert_allclose(wg.grad(h)(X).compute(), wg.grad(h)(X.compute()),
                                   rtol=1e-15)
