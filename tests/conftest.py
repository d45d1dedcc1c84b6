"""Tests marked ``slow`` run only when asked: ``-m slow`` (or WENGERT_SLOW=1)."""
import os

import pytest

# wg.compile's fused kernels (Numba) cost a compilation per new kernel: the suite runs the
# NumPy programs, and tests/test_fuse.py and the differential test ask for fusion by name
os.environ.setdefault("WENGERT_FUSE", "0")


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or "") or os.environ.get("WENGERT_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow (or WENGERT_SLOW=1)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
