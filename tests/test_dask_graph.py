"""The shape of the task graph a Dask gradient makes: what each chunk of the data keeps alive.

A reverse-mode gradient reads each chunk of ``X`` twice, in the forward (``X @ w``) and in
the backward (``g @ X``). Streaming over data bigger than memory needs both reads of a chunk
to come before the next chunk is made, in the order Dask's schedulers follow
(``dask.order``): a backward that waited for the loss's value, or for every forward,
would keep every chunk in memory. wengert's graph must keep no more alive than the same
computation written by hand in Dask (benchmarks/bench_dask.py measures the memory).
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

da = pytest.importorskip("dask.array", reason="Dask is an optional dependency: .[dask]")

N_CHUNKS, ROWS, D = 6, 1000, 5


def _loss(w, X, y):
    return wnp.mean(wnp.logaddexp(0.0, -y * (X @ w))) + 0.5e-3 * wnp.sum(w * w)


def _by_hand(w, X, y):
    m = -y * (X @ w)
    value = np.mean(np.logaddexp(0.0, m)) + 0.5e-3 * (w @ w)
    s = 1.0 / (1.0 + np.exp(-m))
    return value, -((y * s) @ X) / X.shape[0] + 1e-3 * w


def _data(n_chunks=N_CHUNKS):
    rng = da.random.default_rng(0)
    X = rng.standard_normal((n_chunks * ROWS, D), chunks=(ROWS, D))
    y = da.where(rng.uniform(size=n_chunks * ROWS, chunks=ROWS) < 0.5, 1.0, -1.0)
    return X, y


def _graph(outs):
    """The optimized graph the schedulers run, and each key's dependents."""
    import dask
    from dask.core import get_deps
    if hasattr(dask.base, "collections_to_expr"):
        dsk = dict(dask.base.collections_to_expr(outs, optimize_graph=True).__dask_graph__())
    else:  # Dask before array expressions
        dsk = dict(dask.base.collections_to_dsk(outs, optimize_graph=True))
    return dsk, get_deps(dsk)[1]


def _chunk_lifetimes(outs, X):
    """For each chunk of X: its dependents, and whether they all run before the next
    chunk of X is made (in dask.order's priorities)."""
    from dask.order import order
    dsk, dependents = _graph(outs)
    keys = [(X.name, i, 0) for i in range(N_CHUNKS)]
    assert all(k in dsk for k in keys), "the chunks of X are no longer tasks of their own"
    prio = order(dsk)
    prio = {k: getattr(p, "priority", p) for k, p in prio.items()}
    made = sorted(prio[k] for k in keys)
    out = []
    for k in keys:
        last = max(prio[d] for d in dependents[k])
        later = [m for m in made if m > prio[k]]
        out.append((len(dependents[k]), not later or last < later[0]))
    return out


@pytest.mark.parametrize("transform", ["value_and_grad", "grad"])
def test_each_chunk_is_read_by_forward_and_backward_before_the_next_is_made(transform):
    X, y = _data()
    w = np.linspace(-0.5, 0.5, D)
    res = getattr(wg, transform)(_loss)(w, X, y)
    outs = list(res) if isinstance(res, tuple) else [res]
    mine = _chunk_lifetimes(outs, X)
    hv, hg = _by_hand(w, X, y)
    hand = _chunk_lifetimes([hv, hg] if transform == "value_and_grad" else [hg], X)
    assert all(hand_ok for _, hand_ok in hand)  # the reference does stream
    assert [ok for _, ok in mine] == [True] * N_CHUNKS, \
        "a chunk of X stays in memory while the next one is made"
    assert [n for n, _ in mine] == [n for n, _ in hand]  # read as often as by hand
    np.testing.assert_allclose(outs[-1].compute(), hg.compute(), rtol=1e-12)


def test_a_backward_that_waits_for_the_forwards_is_caught():
    """The check can fail: a gradient whose backward reads the loss's value (a sum over
    every chunk) keeps every chunk of X until all the forwards are done."""
    X, y = _data()
    w = np.linspace(-0.5, 0.5, D)

    def waits(w, X, y):
        value, _ = _by_hand(w, X, y)
        m = -y * (X @ w)
        return -((y * value / (1.0 + np.exp(m))) @ X)

    g = waits(w, X, y)
    assert not all(ok for _, ok in _chunk_lifetimes([g], X))


def test_no_more_tasks_per_chunk_than_by_hand():
    """A mean's cotangent is broadcast over the chunks: as ``dask.array.broadcast_to``
    that was a task per chunk of its own, hanging off the scalar, which the distributed
    scheduler hands out like a data load, to any worker; the chunk's backward then waited
    for it (at times a third chunk in memory per worker in benchmarks/bench_dask.py, and
    1.2-1.5x the time by hand). As a blockwise map it is fused into the elementwise tasks that read it."""
    w = np.linspace(-0.5, 0.5, D)

    def per_chunk(f):
        sizes = []
        for n in (N_CHUNKS, 2 * N_CHUNKS):
            X, y = _data(n)
            sizes.append(len(_graph(list(f(w, X, y)))[0]))
        return (sizes[1] - sizes[0]) / N_CHUNKS

    mine, hand = per_chunk(wg.value_and_grad(_loss)), per_chunk(_by_hand)
    assert mine <= hand, f"{mine} tasks per chunk, by hand {hand}"


@pytest.mark.parametrize("shape, chunks, to, to_chunks", [
    ((), (), (10,), ((3, 3, 4),)),                                    # a scalar's cotangent
    ((4,), ((2, 2),), (4,), ((2, 2),)),                               # nothing to do
    ((3,), ((3,),), (5, 3), ((2, 3), (3,))),                          # new leading axes
    ((4, 1), ((2, 2), (1,)), (4, 6), ((2, 2), (3, 3))),               # a stretched axis
    ((1, 4), ((1,), (2, 2)), (2, 5, 4), ((1, 1), (2, 3), (2, 2))),    # both
    ((2, 1, 1), ((1, 1), (1,), (1,)), (3, 2, 4, 5), ((1, 2), (1, 1), (2, 2), (5,))),
])
def test_broadcast_of_a_dask_array_in_the_chunks_asked_for(shape, chunks, to, to_chunks):
    from wengert.arrays import broadcast_view
    v = np.arange(float(np.prod(shape))).reshape(shape)
    x = da.from_array(v, chunks=chunks) if shape else da.from_array(v)
    out = broadcast_view(x, to, to_chunks)
    assert isinstance(out, da.Array) and out.chunks == to_chunks
    assert type(out._meta) is np.ndarray and out._meta.ndim == len(to)
    np.testing.assert_array_equal(out.compute(), np.broadcast_to(v, to))


_RUN_WITHOUT_WENGERT = """
import json, pickle, sys
class NoWengert:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "wengert":
            raise ImportError("this worker has no wengert")
sys.meta_path.insert(0, NoWengert())
from dask.local import get_sync
dsk, keys = pickle.loads(sys.stdin.buffer.read())
print(json.dumps(get_sync(dsk, keys).tolist()))
"""


def test_a_worker_needs_no_wengert():
    """The tasks call NumPy and Dask only (a broadcast's block function travels by value):
    a cluster's workers need not have wengert installed."""
    import json
    import subprocess
    import sys
    cloudpickle = pytest.importorskip("cloudpickle", reason="Dask's own dependency")
    X, y = _data(3)
    w = np.linspace(-0.5, 0.5, D)
    g = wg.grad(_loss)(w, X, y)
    dsk, _ = _graph([g])
    key = g.__dask_keys__()[0]
    out = subprocess.run([sys.executable, "-c", _RUN_WITHOUT_WENGERT], capture_output=True,
                         input=cloudpickle.dumps((dsk, key)), timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    np.testing.assert_allclose(json.loads(out.stdout), _by_hand(w, X, y)[1].compute(), rtol=1e-12)
