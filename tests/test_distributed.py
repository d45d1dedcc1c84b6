"""Derivatives computed by a real dask.distributed cluster (API.md §10): two worker
processes, the distributed scheduler (not the synchronous one), results equal NumPy's."""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

import array_matrix as M

da = pytest.importorskip("dask.array", reason="Dask is an optional dependency: .[dask]")
distributed = pytest.importorskip("distributed", reason="dask.distributed: .[dask] extra")

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning",
                                        "ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def client():
    """One LocalCluster for the module: worker processes are slow to start."""
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=":0", memory_limit="1GiB") as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        yield c


def _data(n=4000, d=6, chunk=500, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y, da.from_array(X, chunks=(chunk, d)), da.from_array(y, chunks=chunk)


def _no_local_compute(*args, **kwargs):
    raise AssertionError("computed by a local scheduler, not the cluster")


def _on_cluster(client, *xs):
    """Compute with the cluster's scheduler (any local compute raises meanwhile)."""
    import dask
    with dask.config.set(scheduler=_no_local_compute):
        return client.compute(list(xs), sync=True)


def test_logistic_gradient_and_hvp_on_the_cluster(client):
    X, y, dX, dy = _data()
    w = np.linspace(-0.5, 0.5, X.shape[1])
    v = np.cos(np.arange(X.shape[1]))
    g = wg.grad(M.loss)(w, dX, dy)
    hv = wg.hvp(lambda p: M.loss(p, dX, dy), w, v)
    val, g2 = wg.value_and_grad(M.loss)(w, dX, dy)
    assert all(isinstance(r, da.Array) for r in (g, hv, val, g2))
    got = _on_cluster(client, g, hv, val, g2)
    np.testing.assert_allclose(got[0], wg.grad(M.loss)(w, X, y), rtol=1e-12)
    np.testing.assert_allclose(got[1], wg.hvp(lambda p: M.loss(p, X, y), w, v), rtol=1e-12)
    np.testing.assert_allclose(got[2], M.loss(w, X, y), rtol=1e-12)
    np.testing.assert_allclose(got[3], got[0], rtol=1e-12)
    # the reference itself, by hand: mean over rows of -y x sigmoid(-y x.w) + 0.1 w
    s = 1.0 / (1.0 + np.exp(y * (X @ w)))
    np.testing.assert_allclose(got[0], -(X * (y * s)[:, None]).mean(0) + 0.1 * w, rtol=1e-12)


def test_gradient_with_respect_to_chunked_data_keeps_its_chunks(client):
    X, y, dX, dy = _data(n=1200, chunk=300)
    w = np.full(X.shape[1], 0.2)
    gX = wg.grad(M.loss, argnums=1)(w, dX, dy)
    assert gX.chunks == dX.chunks
    (got,) = _on_cluster(client, gX)
    np.testing.assert_allclose(got, wg.grad(M.loss, argnums=1)(w, X, y), rtol=1e-12)


@pytest.mark.parametrize("schedule", ["all", "ctz", "binomial", "invert"])
def test_checkpointed_scan_with_a_dask_state(client, schedule):
    c0 = np.linspace(0.1, 1.0, 600)
    dc0 = da.from_array(c0, chunks=150)
    kw = {"snapshots": 2} if schedule == "binomial" else {}
    g = wg.grad(lambda c: M.scan_loss(c, schedule, **kw))(dc0)
    assert isinstance(g, da.Array) and g.chunks == dc0.chunks
    (got,) = _on_cluster(client, g)
    np.testing.assert_allclose(got, wg.grad(lambda c: M.scan_loss(c, schedule, **kw))(c0),
                               rtol=1e-12)


def test_jacobian_and_hessian_on_the_cluster(client):
    x = np.linspace(-1, 1, 8)
    dx = da.from_array(x, chunks=3)
    J = wg.jacobian(M.g, mode="reverse")(dx)
    H = wg.hessian(M.f)(dx)
    got = _on_cluster(client, J, H)
    np.testing.assert_allclose(got[0], wg.jacobian(M.g)(x), rtol=1e-12)
    np.testing.assert_allclose(got[1], wg.hessian(M.f)(x), rtol=1e-12)


def test_scan_over_time_with_a_wnp_step(client):
    """A Dask state advanced by a step written with wnp, reverse mode with 'ctz'."""
    c0 = da.from_array(np.linspace(0.0, 1.0, 300), chunks=100)

    def loss(c):
        c, _ = wg.scan(lambda c, t: (wnp.tanh(c + 0.1 * t), None), c, np.arange(5.0),
                       checkpoint="ctz")
        return wnp.sum(c * c)
    (got,) = _on_cluster(client, wg.grad(loss)(c0))
    np.testing.assert_allclose(got, wg.grad(loss)(np.linspace(0.0, 1.0, 300)), rtol=1e-12)


def test_transformed_closures_and_compiled_functions_run_on_workers(client):
    """Issue 28 §5: what transforms return travels to the workers (Dask pickles functions
    with cloudpickle), before and after a first call, and gives the same values there."""
    w = np.array([1.5, -0.5, 2.0])

    def model(x):
        return wnp.sum(wnp.tanh(w * x) ** 2)

    x = np.array([0.3, -1.2, 0.7])
    fns = [wg.grad(model), wg.hessian(model), wg.vmap(wg.grad(model)),
           wg.compile(wg.grad(model)), wg.compile(model)]
    args = [x, x, np.stack([x, 2.0 * x]), x, x]
    want = [f(a) for f, a in zip(fns, args)]  # called first: compiled ones hold programs
    futures = [client.submit(f, a, pure=False) for f, a in zip(fns, args)]
    for got, ref in zip(client.gather(futures), want):
        np.testing.assert_allclose(got, ref, rtol=1e-13)
