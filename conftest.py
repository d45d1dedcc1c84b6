"""For every test and doctest: wg.compile's fused kernels (Numba) cost a compilation per new
kernel, so the suite runs the NumPy programs; tests/test_fuse.py, the differential test and
docs/graph.md ask for fusion by name (``fuse=True``)."""
import os

os.environ.setdefault("WENGERT_FUSE", "0")
