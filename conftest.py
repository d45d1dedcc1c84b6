"""For every test and doctest: wg.compile's fused kernels (Numba) cost a compilation per new
kernel, so the suite runs the NumPy programs; tests/test_fuse.py, the differential test and
docs/graph.md ask for fusion by name (``fuse=True``).  The kernels' disk cache goes to a
temporary directory of the session, never the user's own cache."""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("WENGERT_FUSE", "0")
if "WENGERT_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="wengert-test-cache-")
    os.environ["WENGERT_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, True)
