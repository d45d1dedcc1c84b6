"""Shared timing helpers: medians of repeated runs, and optional peers.

Imported before NumPy by every benchmark: BLAS runs on one thread, as PyTorch is
told to, so the ratios compare the libraries rather than thread scheduling on a
shared two-core machine.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import importlib  # noqa: E402
import statistics
import time

import numpy as _np  # noqa: E402

# glibc's malloc raises its mmap and trim thresholds the first time a large block is
# freed. Before that, each array over 128 kB gets fresh pages from the kernel, and here
# that costs about 100 µs per 320 kB. A program that has held one large array is past
# that point, and so is one that has imported PyTorch. Without this, wengert's
# 200x200 Jacobian measured 5x slower when PyTorch was not installed. Every benchmark
# therefore starts from that steady state, whichever peers are installed.
_np.ones(1 << 20).sum()  # 8 MB: under the 32 MB cap on that adjustment


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
