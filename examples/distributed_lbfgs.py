"""Logistic regression by L-BFGS on data bigger than memory, gradients computed by a cluster.

The data is a Dask array generated lazily, chunk by chunk (``dask.array.random``), and is
never held whole: neither by this process nor by the workers, whose memory limit is below
its size. The loss is written once, in NumPy style; ``wg.value_and_grad(loss)(w, X, y)``
with NumPy weights ``w`` and Dask data returns a lazy value and gradient whose computation
streams over the chunks, and ``scipy.optimize.minimize(method="L-BFGS-B")`` asks the
``dask.distributed`` cluster for one pass per evaluation.

    python examples/distributed_lbfgs.py            # 10 million rows x 10 (800 MB)
    python examples/distributed_lbfgs.py --small    # seconds
"""
import sys
import time

import numpy as np
import scipy.optimize

import wengert as wg
import wengert.numpy as wnp


def make_data(n=10_000_000, d=10, chunk_rows=400_000, seed=0):
    """Lazy features ``X`` (n, d) and +-1 labels ``y`` from a logistic model; ``w_true``.

    Nothing is computed here: each chunk is drawn when a computation needs it (again at
    every pass, the same numbers: the generator is seeded per chunk)."""
    import dask.array as da
    rs = da.random.RandomState(seed)
    X = rs.standard_normal((n, d), chunks=(chunk_rows, d))
    w_true = np.linspace(-1.0, 1.0, d)
    p = 1.0 / (1.0 + np.exp(-(X @ w_true)))
    y = da.where(rs.uniform(size=n, chunks=chunk_rows) < p, 1.0, -1.0)
    return X, y, w_true


def loss(w, X, y, l2=1e-3):
    """Mean logistic loss of labels ``y`` in {-1, 1}, plus ``l2/2 |w|^2``."""
    return wnp.mean(wnp.logaddexp(0.0, -y * (X @ w))) + 0.5 * l2 * wnp.sum(w * w)


def fit(X, y, client=None, tol=1e-9):
    """L-BFGS; each evaluation is one lazy value and gradient, computed by ``client``
    (the default scheduler when None), which streams over ``X``'s chunks."""
    import dask
    value_and_grad = wg.value_and_grad(loss)
    passes = []

    def fun(w):
        v, g = value_and_grad(w, X, y)  # lazy: nothing computed yet
        t = time.perf_counter()
        v, g = client.compute([v, g], sync=True) if client is not None else dask.compute(v, g)
        passes.append(time.perf_counter() - t)
        return float(v), np.asarray(g, dtype=np.float64)  # here the numbers are asked for

    res = scipy.optimize.minimize(fun, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B",
                                  options={"gtol": tol, "ftol": 1e-15})
    res.pass_seconds = passes
    return res


def main(n=10_000_000, d=10, chunk_rows=400_000, worker_memory="300MiB", processes=True,
         verbose=True):
    import dask
    from dask.distributed import Client, LocalCluster
    X, y, w_true = make_data(n, d, chunk_rows)
    budget = 2 * _bytes(worker_memory)
    # in-process workers (processes=False) would apply the limit to this whole process;
    # worker-saturation 1.0: a worker loads a new chunk only when it has nothing else to
    # run (Dask's 1.1 gives a one-thread worker two, docs/beyond-one-machine.md)
    with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                         memory_limit=worker_memory if processes else 0,
                         dashboard_address=None) as cluster, \
            Client(cluster) as client:
        res = fit(X, y, client)
    if verbose:
        print(f"data: {n:,} x {d} float64 = {X.nbytes / 1e6:,.0f} MB in chunks of "
              f"{chunk_rows * d * 8 / 1e6:.0f} MB; workers' memory: 2 x {worker_memory} = "
              f"{budget / 1e6:,.0f} MB")
        print(f"L-BFGS: {res.message}; {res.nfev} passes over the data "
              f"({np.mean(res.pass_seconds):.2f} s each on the cluster)")
        print(f"loss {res.fun:.6f}; |gradient| {np.linalg.norm(res.jac):.1e}")
        print("fitted weights:", np.round(res.x, 3))
        print("true weights:  ", np.round(w_true, 3))
    return res, X, y, w_true, budget


def _bytes(text):
    units = {"KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30}
    for u, k in units.items():
        if text.endswith(u):
            return int(float(text[:-len(u)]) * k)
    return int(text)


if __name__ == "__main__":
    if "--small" in sys.argv:
        main(n=200_000, chunk_rows=20_000, worker_memory="400MiB")
    else:
        main()
