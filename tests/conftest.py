"""Tests marked ``slow`` run only when asked: ``-m slow`` (or WENGERT_SLOW=1)."""
import os

import pytest


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or "") or os.environ.get("WENGERT_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow (or WENGERT_SLOW=1)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fresh(monkeypatch):
    """This process's kernels forgotten, so that the next compile reads (or writes) the disk
    cache anew: for the kernel-cache tests (test_kernel_cache.py, test_cache_trust.py)."""
    import collections
    import weakref
    from wengert.graph import fuse, kernel_cache
    monkeypatch.setattr(kernel_cache, "_LIVE", weakref.WeakValueDictionary())
    monkeypatch.setattr(kernel_cache, "_RECENT", collections.OrderedDict())
    monkeypatch.setattr(fuse, "_KERNELS", weakref.WeakValueDictionary())
    monkeypatch.delenv("WENGERT_DISK_CACHE", raising=False)
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)  # wengert pins Numba's directory
    return monkeypatch


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command): one worker per core, at most eight. Each
    worker imports NumPy, SciPy and Numba and compiles its own kernels; past eight the
    memory grows faster than the suite shortens."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(8, cores or 1))
