"""NumPy's in-place functions on traced arrays: put, place, putmask, copyto, fill_diagonal,
put_along_axis.

Each case is written as unmodified NumPy code (``xp.put(d, ...)`` with ``xp = np``: a traced
argument dispatches to wengert) and checked against NumPy on plain copies to the bit, then
differentiated in both modes, against finite differences, and through compiled graphs.
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert import coverage

rng = np.random.default_rng(11)
F64, F32 = np.float64, np.float32


def R(*shape):
    return np.asarray(rng.uniform(-1.0, 1.0, size=shape))


MASK = np.array([[True, False, True, False],
                 [False, False, True, True],
                 [True, False, False, False]])  # five entries: values are cycled past three

# (id, destination shape, values shape, call(xp, destination, values))
CASES = [
    ("put", (3, 4), (3,), lambda xp, d, v: xp.put(d, [0, 5, 11], v)),
    ("put_cycled_repeated_negative", (3, 4), (3,),
     lambda xp, d, v: xp.put(d, [1, 7, 1, -2, 3], v)),
    ("put_wrap_2d_ind", (2, 3), (2, 2),
     lambda xp, d, v: xp.put(d, [[7, -8], [2, 13]], v, mode="wrap")),
    ("put_clip", (2, 3), (3,), lambda xp, d, v: xp.put(d, [10, -3, 1], v, mode="clip")),
    ("put_unused_values", (5,), (4,), lambda xp, d, v: xp.put(d, [4, 0], v)),
    ("put_scalar", (2, 3), (), lambda xp, d, v: xp.put(d, 4, v)),
    ("place", (3, 4), (3,), lambda xp, d, v: xp.place(d, MASK, v)),
    ("place_2d_values", (3, 4), (2, 3), lambda xp, d, v: xp.place(d, MASK, v)),
    ("putmask", (3, 4), (3, 4), lambda xp, d, v: xp.putmask(d, MASK, v)),
    ("putmask_cycled", (3, 4), (5,), lambda xp, d, v: xp.putmask(d, MASK, v)),
    ("copyto", (3, 4), (4,), lambda xp, d, v: xp.copyto(d, v)),
    ("copyto_where", (3, 4), (3, 1), lambda xp, d, v: xp.copyto(d, v, where=MASK)),
    ("copyto_scalar_where_row", (3, 4), (), lambda xp, d, v: xp.copyto(d, v, where=MASK[0])),
    ("fill_diagonal", (3, 3), (), lambda xp, d, v: xp.fill_diagonal(d, v)),
    ("fill_diagonal_tall", (7, 3), (2,), lambda xp, d, v: xp.fill_diagonal(d, v)),
    ("fill_diagonal_tall_wrap", (7, 3), (2,), lambda xp, d, v: xp.fill_diagonal(d, v, wrap=True)),
    ("fill_diagonal_wide", (2, 5), (3,), lambda xp, d, v: xp.fill_diagonal(d, v)),
    ("fill_diagonal_3d", (3, 3, 3), (2, 2), lambda xp, d, v: xp.fill_diagonal(d, v)),
    ("put_along_axis", (3, 4), (3, 1),
     lambda xp, d, v: xp.put_along_axis(d, np.array([[1], [3], [0]]), v, axis=1)),
    ("put_along_axis_broadcast_repeated", (3, 4), (1, 2),
     lambda xp, d, v: xp.put_along_axis(d, np.array([[0, 2], [1, 1], [3, 0]]), v, axis=1)),
    ("put_along_axis_axis0", (3, 4), (),
     lambda xp, d, v: xp.put_along_axis(d, np.array([[2, 0, 1, 2], [0, 0, 1, 1]]), v, axis=0)),
    ("put_along_axis_none", (3, 4), (3,),
     lambda xp, d, v: xp.put_along_axis(d, np.array([5, 0, 5]), v, axis=None)),
]
IDS = [c[0] for c in CASES]
DTYPES = [(F64, F64), (F32, F32), (F32, F64), (F64, F32)]  # (destination, values)


def _run(call, xp, d, v):
    """The NumPy way: ``call`` updates ``d`` in place and returns None."""
    assert call(xp, d, v) is None
    return d


def _numpy(call, d, v):
    """NumPy's result on plain copies, or the exception it raises."""
    try:
        return _run(call, np, d.copy(), v.copy()), None
    except Exception as e:  # noqa: BLE001 -- the exception itself is what is compared
        return None, e


def _same(got, want):
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    np.testing.assert_array_equal(got, want)


def _tape(d, v, both):
    t = wg.Tape()
    return t.var(d), (t.var(v) if both else v)


def _dual(d, v, both):
    return wg.Dual(d, np.ones_like(d)), (wg.Dual(v, np.ones_like(v)) if both else v)


@pytest.mark.parametrize("ddt,vdt", DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name,dshape,vshape,call", CASES, ids=IDS)
def test_values_are_numpys_to_the_bit(name, dshape, vshape, call, ddt, vdt):
    d, v = R(*dshape).astype(ddt), R(*vshape).astype(vdt)
    want, err = _numpy(call, d, v)
    for make in (_tape, _dual):
        for both in (False, True):
            for xp in (np, wnp):
                dt, vt = make(d, v, both)
                if err is not None:  # e.g. place and putmask cast only by the 'safe' rule
                    with pytest.raises(type(err)):
                        _run(call, xp, dt, vt)
                    continue
                _same(_run(call, xp, dt, vt).value, want)
                if make is _dual:  # the update is linear: the tangents are updated alike
                    tv = np.ones_like(v) if both else np.zeros_like(v)
                    expected = _run(call, np, np.ones_like(d), tv)
                    _same(dt.tangent, expected)
    assert err is not None or not np.array_equal(want, d)  # the case does write something


@pytest.mark.parametrize("name,dshape,vshape,call", CASES, ids=IDS)
def test_plain_values_call_numpy(name, dshape, vshape, call):
    d, v = R(*dshape), R(*vshape)
    want, _ = _numpy(call, d, v)
    got = d.copy()
    _same(_run(call, wnp, got, v), want)
    assert type(got) is np.ndarray


def _linear(call):
    def f(x, v):
        y = wnp.array(x, like=v)  # a copy, traced even when only v is (the error's advice)
        call(np, y, v)
        return y
    return f


def _nonlinear(call):
    def f(x, v):
        y = wnp.array(x * x, like=v)
        call(np, y, wnp.sin(v))
        return y * x
    return f


@pytest.mark.parametrize("name,dshape,vshape,call", CASES, ids=IDS)
def test_check_grad(name, dshape, vshape, call):
    x, v = R(*dshape), R(*vshape)
    wg.check_grad(_linear(call), x, v, order=2, modes=("forward", "reverse"))
    wg.check_grad(_nonlinear(call), x, v, order=2, modes=("forward", "reverse"))


def _fd_jacobian(f, args, i, h=1e-6):
    """Central differences on plain NumPy, one entry of ``args[i]`` at a time."""
    def at(k, step):
        a = list(args)
        a[i] = args[i].copy()
        a[i].flat[k] += step
        return np.asarray(f(*a))
    cols = [(at(k, h) - at(k, -h)) / (2 * h) for k in range(args[i].size)]
    return np.moveaxis(np.asarray(cols), 0, -1).reshape(cols[0].shape + args[i].shape)


@pytest.mark.parametrize("name,dshape,vshape,call", CASES, ids=IDS)
def test_batched_jacobians(name, dshape, vshape, call):
    x, v = R(*dshape), R(*vshape)
    for f in (_linear(call), _nonlinear(call)):
        for i in (0, 1):
            jf = wg.jacobian(f, argnums=i, mode="forward")(x, v)
            jr = wg.jacobian(f, argnums=i, mode="reverse")(x, v)
            assert jf.shape == jr.shape == dshape + (x, v)[i].shape
            np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-14)
            np.testing.assert_allclose(jf, _fd_jacobian(f, [x, v], i), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name,dshape,vshape,call", CASES, ids=IDS)
def test_graph_engine_agrees(name, dshape, vshape, call):
    u = R(*dshape)
    f = _nonlinear(call)
    const = R(*vshape)
    scalar = lambda x, v: wnp.sum(f(x, v) * u)  # noqa: E731
    g = wg.compile(wg.grad(scalar, (0, 1)))
    gc = wg.compile(wg.grad(lambda x: scalar(x, const)))  # plain values, baked in
    fc = wg.compile(_linear(call))
    for _ in range(2):
        x, v = R(*dshape), R(*vshape)
        for got, want in zip(g(x, v), wg.grad(scalar, (0, 1))(x, v)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(gc(x), wg.grad(lambda x: scalar(x, const))(x), rtol=1e-12)
        _same(fc(x, v), _linear(call)(x, v))


# -- derivatives, worked by hand ------------------------------------------------------------------
def test_overwritten_entries_lose_the_old_value_and_take_the_last_write():
    w = np.arange(1.0, 13.0).reshape(3, 4)

    def f(x, v):
        y = x * 1.0
        np.put(y, [1, 5, 1], v)   # position 1: v[0], then v[2] (the last write wins)
        np.putmask(y, MASK, 2.0 * x)
        return wnp.sum(y * w)
    x, v = R(3, 4), R(3)
    gx, gv = wg.grad(f, (0, 1))(x, v)
    kept = ~MASK & ~np.isin(np.arange(12), [1, 5]).reshape(3, 4)
    np.testing.assert_array_equal(gx, np.where(kept, w, 0.0) + np.where(MASK, 2.0 * w, 0.0))
    np.testing.assert_array_equal(gv, [0.0, w.flat[5], w.flat[1]])


def test_cycled_values_add_up_their_cotangents():
    def f(x, v):
        y = wnp.array(x, like=v)
        np.place(y, MASK, v)  # flat 0, 2, 6, 7, 8 take v[0], v[1], v[0], v[1], v[0]
        # then the diagonal (flat 0, 5, 10) is overwritten: v[0] stays at 6, 8; v[1] at 2, 7
        np.fill_diagonal(y, v[0] * v[1])
        return y
    x, v = R(3, 4), R(2)
    jv = wg.jacobian(f, argnums=1)(x, v)
    y = f(x, v)
    assert y[0, 0] == y[1, 1] == y[2, 2] == v[0] * v[1]
    np.testing.assert_array_equal(jv.sum(axis=(0, 1)), [2.0 + 3 * v[1], 2.0 + 3 * v[0]])


def test_lists_of_traced_values_are_stacked():
    def f(v):
        y = wnp.zeros((2, 3), like=v)
        np.fill_diagonal(y, [v[0], 2.0 * v[1]])
        np.put(y, [2, 5], [v[1] ** 2, 1.5])
        return y
    v = np.array([1.5, -2.0])
    _same(f(wg.Tape().var(v)).value, np.array([[1.5, 0.0, 4.0], [0.0, -4.0, 1.5]]))
    for mode in ("forward", "reverse"):
        np.testing.assert_array_equal(wg.jacobian(f, mode=mode)(v),
                                      [[[1, 0], [0, 0], [0, -4]], [[0, 0], [0, 2], [0, 0]]])


def test_aliases_see_the_update_and_the_caller_array_is_untouched():
    def f(x):
        z = x            # an alias, as in NumPy
        np.copyto(x, 3.0 * x[0], where=MASK)
        return z
    x = R(3, 4)
    keep = x.copy()
    for mode in ("forward", "reverse"):
        j = wg.jacobian(f, mode=mode)(x)
        np.testing.assert_array_equal(x, keep)
        np.testing.assert_array_equal(j[~MASK], np.eye(12).reshape(3, 4, 3, 4)[~MASK])
        np.testing.assert_array_equal(j[MASK][:, 0], 3.0 * np.eye(4)[np.nonzero(MASK)[1]])
        np.testing.assert_array_equal(j[MASK][:, 1:], np.zeros((5, 2, 4)))


def test_masks_computed_in_a_compiled_graph_are_guarded():
    def relu2(x):
        y = x * 1.0
        np.putmask(y, y < 0, 0.0)
        np.copyto(y, 2.0 * y, where=y > 0.5)
        return wnp.sum(y * y)
    g = wg.compile(wg.grad(relu2))
    for x in (np.array([0.3, -1.2, 2.0, 0.7]), np.array([-3.0, 1.0, 0.2, -0.1])):
        np.testing.assert_array_equal(g(x), wg.grad(relu2)(x))
    np.testing.assert_array_equal(g(np.array([-3.0, 1.0, 0.2, -0.1])), [0.0, 8.0, 0.4, 0.0])


def test_they_have_rules():
    rows = {(r.module, r.name): r for r in coverage.coverage_rows()}
    for name in ("put", "place", "putmask", "copyto", "fill_diagonal", "put_along_axis"):
        assert rows[("numpy", name)].kind != "no rule"


# -- errors ----------------------------------------------------------------------------------------
WRITES = [  # call(xp, destination, values) for each function
    lambda xp, d, v: xp.put(d, [0, 5], v),
    lambda xp, d, v: xp.place(d, MASK, v),
    lambda xp, d, v: xp.putmask(d, MASK, v),
    lambda xp, d, v: xp.copyto(d, v),
    lambda xp, d, v: xp.fill_diagonal(d, v),
    lambda xp, d, v: xp.put_along_axis(d, np.array([[1], [0], [2]]), v, axis=1),
]


@pytest.mark.parametrize("call", WRITES)
def test_plain_destination_with_traced_values_raises(call):
    d = R(3, 4)
    keep = d.copy()
    for v in (wg.Tape().var(R(4)[:1]), wg.Dual(R(1), np.ones(1))):
        with pytest.raises(TypeError, match=r"plain NumPy array.*destination traced.*"
                                            r"wnp\.index_update"):
            _run(call, wnp, d, v)
        with pytest.raises(TypeError):  # np.fill_diagonal dispatches on its array only
            _run(call, np, d, v)
    with pytest.raises(TypeError, match="destination"):
        wg.grad(lambda v: (_run(call, wnp, d, v), wnp.sum(v))[1])(R(1))
    np.testing.assert_array_equal(d, keep)


INDEXED = [  # call(xp, destination, values, index) for the functions with an index or mask
    lambda xp, d, v, i: xp.put(d, i, v),
    lambda xp, d, v, i: xp.place(d, i, v),
    lambda xp, d, v, i: xp.putmask(d, i, v),
    lambda xp, d, v, i: xp.copyto(d, v, where=i),
    lambda xp, d, v, i: xp.put_along_axis(d, i, v, axis=1),
]


@pytest.mark.parametrize("call", INDEXED)
def test_traced_indices_raise(call):
    v = R(1)
    for make in (lambda a: wg.Tape().var(a), lambda a: wg.Dual(a, np.ones_like(a))):
        i = make(np.ones((3, 4)))
        for d in (R(3, 4), wg.Tape().var(R(3, 4))):
            for xp in (np, wnp):
                with pytest.raises(TypeError, match="cannot be used inside an index"):
                    call(xp, d, v, i)


NUMPY_ERRORS = [  # bad input: the exception NumPy raises, on plain and traced arrays alike
    ((3, 4), (1,), lambda xp, d, v: xp.put(d, [12], v)),
    ((3, 4), (1,), lambda xp, d, v: xp.put(d, [-13], v)),
    ((3, 4), (1,), lambda xp, d, v: xp.put(d, [0], v, mode="bogus")),
    ((3, 4), (1,), lambda xp, d, v: xp.put(d, np.array([0.0]), v)),
    ((3, 4), (0,), lambda xp, d, v: xp.place(d, MASK, v)),
    ((3, 4), (2,), lambda xp, d, v: xp.place(d, MASK[:2], v)),
    ((3, 4), (2,), lambda xp, d, v: xp.putmask(d, MASK[:, :2], v)),
    ((3, 4), (3,), lambda xp, d, v: xp.copyto(d, v)),
    ((3, 4), (4,), lambda xp, d, v: xp.copyto(d, v, where=MASK[:2])),
    ((3, 4), (4,), lambda xp, d, v: xp.copyto(d, v, casting="bogus")),
    ((4,), (1,), lambda xp, d, v: xp.fill_diagonal(d, v)),
    ((2, 3, 2), (1,), lambda xp, d, v: xp.fill_diagonal(d, v)),
    ((3, 4), (1,), lambda xp, d, v: xp.put_along_axis(d, np.zeros((1, 2), int), v, None)),
    ((3, 4), (1,), lambda xp, d, v: xp.put_along_axis(d, np.zeros((3, 1)), v, 1)),
    ((3, 4), (1,), lambda xp, d, v: xp.put_along_axis(d, np.zeros((3, 1), int), v, 2)),
    ((3, 4), (2,), lambda xp, d, v: xp.put_along_axis(d, np.zeros((3, 3), int), v, 1)),
]


@pytest.mark.parametrize("dshape,vshape,call", NUMPY_ERRORS)
def test_bad_input_raises_numpys_exception(dshape, vshape, call):
    d, v = R(*dshape), R(*vshape)
    _, err = _numpy(call, d, v)
    assert err is not None
    for both in (False, True):
        dt, vt = _tape(d, v, both)
        with pytest.raises(type(err)):
            _run(call, np, dt, vt)
        _same(dt.value, d)  # nothing was written


def test_copyto_casting_rules_are_numpys():
    d, v = R(3, 4).astype(F32), R(4)
    for casting in ("no", "equiv", "safe"):
        with pytest.raises(TypeError):
            np.copyto(d.copy(), v, casting=casting)
        with pytest.raises(TypeError, match="according to the rule"):
            np.copyto(wg.Tape().var(d), wg.Tape().var(v), casting=casting)
    t = wg.Tape().var(d)
    np.copyto(t, 1.5, casting="safe")  # a Python float is cast as NumPy casts it
    _same(t.value, np.full((3, 4), 1.5, F32))


def test_writing_through_views_raises():
    def through_transpose(x):
        x = x * 1.0
        np.fill_diagonal(x.T, 0.0)
        return x

    def through_row(x):
        x = x * 1.0
        np.put(x[0], [1], 0.0)
        return x

    def into_diagonal(x):  # NumPy's diagonal is read-only too
        x = x * 1.0
        np.copyto(wnp.diagonal(x), 0.0)
        return x

    def stale(x):
        x = x * 1.0
        y = x[0:2]
        np.putmask(x, MASK, 0.0)
        return y
    x = R(3, 4)
    with pytest.raises(ValueError):
        np.copyto(np.diagonal(x.copy()), 0.0)
    for f, match in [(through_transpose, "writing through a view"),
                     (through_row, "writing through a view"), (into_diagonal, "read-only"),
                     (stale, "view")]:
        for transform in (wg.grad, wg.jacobian):
            with pytest.raises(ValueError, match=match):
                transform(lambda x: wnp.sum(f(x)))(x)
