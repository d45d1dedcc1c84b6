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
