"""Shared timing helpers: medians of repeated runs, and optional peers.

Imported before NumPy by every benchmark: BLAS runs on one thread, as PyTorch is
told to, so the ratios compare the libraries rather than thread scheduling on a
shared two-core machine.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import importlib  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

# Allocator state: every benchmark imports wengert before it times anything, and
# `import wengert` settles glibc's malloc (wengert/_allocator.py). So the hand-written
# NumPy code and the peers are timed in that state too, whichever peers are installed.


def median_time(fn, *args, repeat=7, min_time=0.05):
    """Median seconds per call over ``repeat`` batches of at least ``min_time`` each."""
    fn(*args)  # warm up (and trace, for compiled functions)
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        dt = time.perf_counter() - t0
        if dt >= min_time or n >= 1 << 20:
            break
        n *= 2
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def _batch(fn, args, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn(*args)
    return (time.perf_counter() - t0) / n


def _calls_for(fn, args, min_time):
    n = 1
    while _batch(fn, args, n) * n < min_time and n < 1 << 20:
        n *= 2
    return n


def paired_time(fn, base, *args, rounds=9, min_time=0.03):
    """``(t_fn, t_base, ratio)``: medians over rounds that time ``base`` then ``fn``.

    Measuring the two in alternation means a slow spell on a shared machine
    slows both. The ratio is the median of the per-round ratios, not the ratio of
    the medians, so a ratio holds steady when the absolute times drift between runs.
    """
    fn(*args)
    base(*args)
    n_fn, n_base = _calls_for(fn, args, min_time), _calls_for(base, args, min_time)
    t_fn, t_base, ratios = [], [], []
    for _ in range(rounds):
        b = _batch(base, args, n_base)
        f = _batch(fn, args, n_fn)
        t_fn.append(f)
        t_base.append(b)
        ratios.append(f / b)
    return statistics.median(t_fn), statistics.median(t_base), statistics.median(ratios)


def optional(name):
    """The module, or None when the peer is not installed."""
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def row(label, *cells, width=34):
    print(f"{label:<{width}}" + "".join(f"{c:>14}" for c in cells))


def fmt(x, unit=""):
    if x is None:
        return "—"
    return f"{x:.2f}{unit}" if x < 100 else f"{x:.0f}{unit}"
