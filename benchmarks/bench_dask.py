"""The gradient of a logistic loss over a Dask array on a LocalCluster: memory and time.

* Data: 2·10⁷ × 10 float64 rows (1.6 GB) and their ±1 labels, as a user with data bigger
  than memory has them: on disk, one ``.npy`` file per 64 MiB chunk (Dask's npy stack,
  written once to a temporary directory, removed at the end), read by ``np.load`` into one
  array per chunk (no temporaries), never held whole. ``wg.value_and_grad(loss)(w, X, y)``
  with NumPy ``w`` is computed by a 2-worker ``LocalCluster`` (processes, one thread each),
  restarted after the files are written.
* Scheduler: ``distributed.scheduler.worker-saturation`` 1.0 (printed), the setting Dask
  recommends when memory matters: a worker is given a new chunk to read only when it has
  nothing else to run. Dask's default, 1.1, rounds up to 2 tasks per one-thread worker: a
  worker then reads chunk k+1 while chunk k waits for pieces computed by the other worker
  (its labels), and 3.6-4.6 chunks pile up, by hand as with wengert (against 2.5, at times
  3.5, with 1.0). ``--worker-saturation 1.1`` measures that. The 3.5: when a graph
  arrives, the scheduler can start on an idle worker a load far down ``dask.order``'s
  priorities (seen: chunk 22 of 24 loaded at once, chunk 23 queued); that chunk of ``X``
  then waits for its labels, loaded near the end, for the whole computation.
* Memory: resident set size (psutil RSS) of each worker process and of this client
  process, sampled every 20 ms during the timed computations, minus the same process's RSS
  read once before them (the idle level: a worker warmed up by one computation of each,
  holding no data), in 64 MiB chunks; the highest of 3 runs. Everything the process has
  resident counts: chunks, temporaries, received data, malloc's free lists. The nanny and
  scheduler processes are not counted (they hold no data).
* Time (median of 3) against the same value and gradient written by hand in Dask (same
  data, same cluster; the two take turns), and, on data that fits (fewer rows, held in memory), against wengert on NumPy
  and a hand-written NumPy gradient.

    python benchmarks/bench_dask.py            # 1.6 GB
    python benchmarks/bench_dask.py --quick    # 160 MB
    python benchmarks/bench_dask.py --worker-saturation 1.1   # Dask's default
"""
import _util  # noqa: F401  (first: sets BLAS to one thread)

import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402

D = 10
CHUNK_BYTES = 64 * 2 ** 20
L2 = 1e-3


def loss(w, X, y):
    return wnp.mean(wnp.logaddexp(0.0, -y * (X @ w))) + 0.5 * L2 * wnp.sum(w * w)


def by_hand(w, X, y):
    """The same value and gradient written by hand (Dask or NumPy: the same code)."""
    m = -y * (X @ w)
    value = np.mean(np.logaddexp(0.0, m)) + 0.5 * L2 * (w @ w)
    s = 1.0 / (1.0 + np.exp(-m))
    grad = -((y * s) @ X) / X.shape[0] + L2 * w
    return value, grad


def lazy_data(n, seed=0):
    import dask.array as da
    rows = CHUNK_BYTES // (8 * D)
    rs = da.random.RandomState(seed)
    X = rs.standard_normal((n, D), chunks=(rows, D))
    y = da.where(rs.uniform(size=n, chunks=rows) < 0.5, 1.0, -1.0)
    return X, y


def write_chunks(n, where, seed=0):
    """Generate the data once and write it as one .npy file per chunk (on the cluster)."""
    import dask.array as da
    X, y = lazy_data(n, seed)
    da.to_npy_stack(os.path.join(where, "X"), X, axis=0)
    da.to_npy_stack(os.path.join(where, "y"), y, axis=0)


def data_on_disk(where):
    """The data as a user with more than memory has it: each chunk read from its file."""
    import dask.array as da
    return tuple(da.from_npy_stack(os.path.join(where, name), mmap_mode=None)
                 for name in ("X", "y"))


class PeakRSS:
    """Peak resident memory of some processes above ``base`` (their level at the start)."""

    def __init__(self, pids, base=None):
        import psutil
        self.procs = [psutil.Process(p) for p in pids]
        self.base = list(base) if base is not None else [p.memory_info().rss
                                                         for p in self.procs]
        self.peak = list(self.base)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            for i, p in enumerate(self.procs):
                self.peak[i] = max(self.peak[i], p.memory_info().rss)
            time.sleep(0.02)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def above_base(self):
        return [pk - b for pk, b in zip(self.peak, self.base)]


def settle(client, timeout=30.0):
    """Wait until the scheduler has forgotten the last computation: the next graph shares
    keys with it (``-y``) made by other tasks, which Dask warns may deadlock."""
    def left(dask_scheduler):  # results no client holds (persisted data is held)
        return sum(not ts.who_wants and not ts.dependents
                   for ts in dask_scheduler.tasks.values())
    end = time.perf_counter() + timeout
    while client.run_on_scheduler(left) and time.perf_counter() < end:
        time.sleep(0.02)


def line(label, t, ref, ref_name):
    print(f"  {label:<28}{t * 1e3:>10.1f} ms   {t / ref:5.2f}x {ref_name}")


def timed(fn, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(quick=False, saturation=1.0):
    import dask
    from dask.distributed import Client, LocalCluster
    n = 2_000_000 if quick else 20_000_000
    n_fit = 200_000 if quick else 2_000_000
    repeat = 3
    w = np.linspace(-0.5, 0.5, D)
    dask.config.set({"distributed.scheduler.worker-saturation": saturation})
    where = tempfile.mkdtemp(prefix="bench_dask_")
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None, memory_limit="4GiB") as cluster, \
                Client(cluster) as client:
            write_chunks(n, where)
            client.restart()  # fresh workers: nothing of the writing stays resident
            return _measure(client, w, n, n_fit, repeat, where)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _measure(client, w, n, n_fit, repeat, where):
    import dask
    X, y = data_on_disk(where)
    print(f"data: {n:,} x {D} float64 = {X.nbytes / 1e9:.2f} GB (+ labels), in "
          f"{X.numblocks[0]} chunks of {CHUNK_BYTES / 2 ** 20:.0f} MiB, one .npy file each")
    print("cluster: 2 worker processes x 1 thread, distributed.scheduler.worker-saturation = "
          f"{dask.config.get('distributed.scheduler.worker-saturation')}, "
          f"MALLOC_TRIM_THRESHOLD_ = "
          f"{client.run(lambda: os.environ.get('MALLOC_TRIM_THRESHOLD_')).popitem()[1]}")
    pids = list(client.run(os.getpid).values())
    # the graphs are built lazily: time that too
    t0 = time.perf_counter()
    v, g = wg.value_and_grad(loss)(w, X, y)
    t_build = time.perf_counter() - t0
    hv, hg = by_hand(w, X, y)
    ntask = len(dict(g.__dask_graph__())), len(dict(hg.__dask_graph__()))
    client.compute([v, g, hv, hg], sync=True)  # warm the workers (imports)
    settle(client)

    # wengert and by hand take turns, each peak above the idle level read once here
    procs = pids + [os.getpid()]
    idle = PeakRSS(procs).base
    runs = {"wengert": [v, g], "by hand": [hv, hg]}
    times = {name: [] for name in runs}
    peaks = {name: [0] * len(procs) for name in runs}
    results = {}
    for _ in range(repeat):
        for name, outs in runs.items():
            with PeakRSS(procs, idle) as mem:
                t0 = time.perf_counter()
                results[name] = client.compute(outs, sync=True)
                times[name].append(time.perf_counter() - t0)
            settle(client)
            peaks[name] = [max(a, b) for a, b in zip(peaks[name], mem.above_base())]
    (val, grad), (hval, hgrad) = results["wengert"], results["by hand"]
    t_wg, t_hand = statistics.median(times["wengert"]), statistics.median(times["by hand"])
    worker_peak, client_peak = peaks["wengert"][:-1], peaks["wengert"][-1]
    rel = np.max(np.abs(grad - hgrad) / np.abs(hgrad))
    print(f"wengert value_and_grad: graph built in {t_build * 1e3:.1f} ms ({ntask[0]} "
          f"tasks; by hand {ntask[1]}), |grad - by hand| / |by hand| = {rel:.1e}")
    print(f"\npeak memory above idle (workers idle at "
          f"{', '.join(f'{b / 1e6:.0f}' for b in idle[:-1])} MB; MB, and in 64 MiB chunks; "
          f"the highest of {repeat} runs each, taking turns):")
    for name in ("wengert", "by hand"):
        pk = peaks[name]
        print(f"  {name:8s} workers: " + ", ".join(
            f"{b / 1e6:.0f} MB ({b / CHUNK_BYTES:.1f} chunks)" for b in pk[:-1])
            + f"; client: {pk[-1] / 1e6:.0f} MB ({pk[-1] / CHUNK_BYTES:.1f} chunks)")
    print(f"\ntime per value and gradient over {X.nbytes / 1e9:.2f} GB on the cluster "
          f"(median of {repeat}):")
    line("wengert on Dask", t_wg, t_hand, "by hand")
    line("by hand in Dask", t_hand, t_hand, "by hand")

    # data that fits: held in memory, by the workers (Dask) and here (NumPy)
    dX, dy = client.persist(list(lazy_data(n_fit, seed=1)))
    Xf, yf = client.compute([dX, dy], sync=True)
    vg = wg.value_and_grad(loss)
    t_np, _ = timed(lambda: vg(w, Xf, yf), 5)
    t_np_hand, _ = timed(lambda: by_hand(w, Xf, yf), 5)
    t_dk, _ = timed(lambda: client.compute(list(vg(w, dX, dy)), sync=True), 5)
    settle(client)
    t_dk_hand, _ = timed(lambda: client.compute(list(by_hand(w, dX, dy)), sync=True), 5)
    print(f"\ndata that fits: {n_fit:,} x {D} ({Xf.nbytes / 1e6:.0f} MB) in memory "
          f"(median of 5):")
    line("wengert on NumPy", t_np, t_np_hand, "NumPy by hand")
    line("NumPy by hand", t_np_hand, t_np_hand, "NumPy by hand")
    line("wengert on Dask (cluster)", t_dk, t_dk_hand, "by hand in Dask")
    line("by hand in Dask (cluster)", t_dk_hand, t_np_hand, "NumPy by hand")
    return dict(t_wg=t_wg, t_hand=t_hand, worker_peak=worker_peak, client_peak=client_peak,
                hand_worker_peak=peaks["by hand"][:-1])


if __name__ == "__main__":
    sat = 1.0
    if "--worker-saturation" in sys.argv:
        sat = float(sys.argv[sys.argv.index("--worker-saturation") + 1])
    main(quick="--quick" in sys.argv, saturation=sat)
