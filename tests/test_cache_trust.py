"""The kernel cache trusts nothing on disk that the user does not own alone (API.md §15,
issue 28 part 2): each case below is planted -- a directory of another user (CI runs as root:
the planted files belong to uid 65534), world-writable directories, group-writable files,
symbolic links, a FIFO, a link to /dev/zero, a Numba index whose pickle would run code,
another kernel's machine code under this kernel's name, a read-only cache -- and the next
compile must warn once (``CacheWarning``, a ``RuntimeWarning``) and compile in memory, or
treat the entry as a miss, and never run, hang on or read what was planted.

Evidence that a kernel compiled in memory is Numba's ``stats.cache_path`` (None without a
cache); evidence that a pickle never ran is the marker file its payload would create.
"""
import os
import pickle
import resource
import shutil
import stat
import subprocess
import sys
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import disk_trust, kernel_cache

numba = pytest.importorskip("numba", reason="the kernel cache holds Numba kernels")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OTHER = 65534  # nobody
ROOT_ONLY = pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                               reason="planting another user's files needs root (as in CI)")
POSIX = pytest.mark.skipif(not hasattr(os, "getuid"), reason="owners and modes are POSIX's")
X = np.linspace(-1.0, 2.0, 7)


def sin_prog(x):
    return wnp.sin(x) * 2 + x


def cos_prog(x):
    return wnp.cos(x) * 2 + x


def run(prog, cache, fresh):
    """``wg.compile(prog)(X)`` with the cache at ``cache`` and this process's tables empty;
    the result and the Numba dispatchers it compiled."""
    import collections
    import weakref
    from wengert.graph import fuse
    fresh.setattr(kernel_cache, "_LIVE", weakref.WeakValueDictionary())
    fresh.setattr(kernel_cache, "_RECENT", collections.OrderedDict())
    fresh.setattr(fuse, "_KERNELS", weakref.WeakValueDictionary())
    fresh.setenv("WENGERT_CACHE_DIR", str(cache))
    cf = wg.compile(prog, fuse=True)
    got = cf(X)
    assert cf.fuse_failures == []
    kernels = [d for funcs in kernel_cache._MODULES.values() for d in set(funcs.values())]
    assert kernels
    return got, kernels, cf


def files(directory):
    return sorted(os.path.relpath(os.path.join(d, f), directory)
                  for d, _, fs in os.walk(directory) for f in fs)


def kernel_files(cache):
    """The planted-on paths: the kernel module, Numba's index and data, our sidecar."""
    out = {}
    for rel in files(cache):
        for suffix in (".py", ".nbi", ".nbc", ".nbi.sum"):
            if rel.endswith(suffix) and "/k" in "/" + rel:
                out.setdefault(suffix, []).append(os.path.join(cache, rel))
    return out


def in_memory(kernels):
    return all(d.stats.cache_path is None for d in kernels)


def hits(kernels):
    return sum(sum(d.stats.cache_hits.values()) for d in kernels)


def warned(record):
    return [w for w in record if issubclass(w.category, RuntimeWarning)
            and "kernel cache is not used" in str(w.message)]


def assert_refused(cache, fresh, before=None):
    """The compile warns once, compiles in memory, gives sin's values, writes nothing."""
    before = files(cache) if before is None else before
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got, kernels, _ = run(sin_prog, cache, fresh)
        again, later, _ = run(sin_prog, cache, fresh)  # a second compile: no second warning
    for g in (got, again):
        np.testing.assert_allclose(g, np.sin(X) * 2 + X, rtol=1e-14)
    assert len(warned(record)) == 1, [str(w.message) for w in record]
    assert issubclass(warned(record)[0].category, wg.compile.CacheWarning)
    assert hits(kernels) == 0  # nothing loaded (a planted file is seen when Numba loads)
    assert in_memory(later)  # and from then on, the directory is not used
    assert files(cache) == before


def filled(tmp_path, fresh, name="cache"):
    """A private cache holding sin_prog's kernel, index and machine code."""
    cache = tmp_path / name
    got, kernels, _ = run(sin_prog, cache, fresh)
    assert not in_memory(kernels)
    kf = kernel_files(cache)
    assert kf[".py"] and kf[".nbi"] and kf[".nbc"], files(cache)
    return cache, kf


# -- directories ---------------------------------------------------------------------------
@ROOT_ONLY
def test_a_directory_of_another_user_is_not_used(tmp_path, fresh):
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o755)
    os.chown(cache, OTHER, OTHER)
    assert_refused(cache, fresh)


@ROOT_ONLY
def test_a_filled_cache_of_another_user_is_not_loaded(tmp_path, fresh):
    cache, kf = filled(tmp_path, fresh)
    for d, dirs, fs in os.walk(cache):
        for p in [d] + [os.path.join(d, f) for f in fs]:
            os.chown(p, OTHER, OTHER)
    assert_refused(cache, fresh)


@POSIX
@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o775])
def test_a_directory_others_can_write_is_not_used(tmp_path, fresh, mode):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, mode)
    assert_refused(cache, fresh)


@POSIX
def test_a_version_directory_others_can_write_is_not_used(tmp_path, fresh):
    cache, kf = filled(tmp_path, fresh)
    os.chmod(os.path.dirname(kf[".py"][0]), 0o777)
    assert_refused(cache, fresh)


@POSIX
def test_a_symlinked_cache_directory_is_not_used(tmp_path, fresh):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert_refused(link, fresh)
    assert files(real) == []


@ROOT_ONLY
def test_a_link_above_the_cache_made_by_another_user_is_not_followed(tmp_path, fresh):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    os.chown(link, OTHER, OTHER, follow_symlinks=False)
    assert_refused(link / "cache", fresh, before=[])
    assert files(real) == []


# -- files ----------------------------------------------------------------------------------
@POSIX
@pytest.mark.parametrize("which", [".py", ".nbi", ".nbc"])
def test_a_group_writable_file_is_not_used(tmp_path, fresh, which):
    cache, kf = filled(tmp_path, fresh)
    os.chmod(kf[which][0], 0o664)
    assert_refused(cache, fresh)


@ROOT_ONLY
@pytest.mark.parametrize("which", [".py", ".nbi", ".nbc"])
def test_a_file_of_another_user_is_not_used(tmp_path, fresh, which):
    cache, kf = filled(tmp_path, fresh)
    os.chown(kf[which][0], OTHER, OTHER)
    assert_refused(cache, fresh)


@POSIX
@pytest.mark.parametrize("which", [".py", ".nbi"])
def test_a_symlinked_file_is_not_used(tmp_path, fresh, which):
    cache, kf = filled(tmp_path, fresh)
    path = kf[which][0]
    elsewhere = tmp_path / "elsewhere"
    shutil.copy(path, elsewhere)  # the same bytes, reached through a link
    os.unlink(path)
    os.symlink(elsewhere, path)
    assert_refused(cache, fresh)


CHILD = r"""
import json, os, resource, sys, warnings
RO = os.environ.get("TEST_READ_ONLY")
if RO:  # the directory read-only even for root (who writes through any mode)
    def hook(event, args):
        path = args[0] if args else None
        if not isinstance(path, (str, bytes, os.PathLike)):
            return
        path = os.path.abspath(os.fsdecode(path))
        if not (path == RO or path.startswith(RO + os.sep)):
            return
        if event == "open":
            mode, flags = args[1] or "", args[2] or 0
            if any(c in mode for c in "wax+") or flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
                raise PermissionError(13, "Read-only file system (test)", path)
        elif event in ("os.mkdir", "os.rename", "os.link", "os.symlink", "os.remove",
                       "os.rmdir", "os.chmod", "os.truncate"):
            raise PermissionError(13, "Read-only file system (test)", path)
    sys.addaudithook(hook)
import numpy as np
import wengert as wg, wengert.numpy as wnp
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as record:
    cf = wg.compile(lambda x: wnp.sin(x) * 2 + x, fuse=True)
    x = np.linspace(-1.0, 2.0, 7)
    got = cf(x)
print(json.dumps({"ok": bool(np.allclose(got, np.sin(x) * 2 + x, rtol=1e-14)),
                  "warnings": [str(w.message) for w in record],
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def child(cache, home=None, read_only=False, timeout=240):
    """CHILD in a new process (its memory capped at 3 GiB: a runaway read fails fast)."""
    import json
    env = dict(os.environ, PYTHONPATH=ROOT, WENGERT_CACHE_DIR=str(cache), WENGERT_FUSE="1")
    for k in ("NUMBA_CACHE_DIR", "WENGERT_DISK_CACHE", "XDG_CACHE_HOME"):
        env.pop(k, None)
    if home is not None:
        env["HOME"] = str(home)
    if read_only:
        env["TEST_READ_ONLY"] = str(cache)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=str(home or ROOT),
                       preexec_fn=limit, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def sin_module_path(cache):
    """Where sin_prog's kernel module goes (written by a first compile, then removed)."""
    kf = kernel_files(cache)
    return kf[".py"][0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_fifo_in_place_of_a_kernel_does_not_hang(tmp_path):
    cache = tmp_path / "cache"
    first = child(cache)
    assert first["ok"] and not first["warnings"]
    path = sin_module_path(cache)
    os.unlink(path)
    os.mkfifo(path, 0o600)
    got = child(cache, timeout=120)  # today: blocks in open() until killed
    assert got["ok"]
    assert any("not a regular file" in w for w in got["warnings"]), got["warnings"]
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


@POSIX
def test_a_link_to_dev_zero_is_never_read(tmp_path):
    cache = tmp_path / "cache"
    assert child(cache)["ok"]
    path = sin_module_path(cache)
    os.unlink(path)
    os.symlink("/dev/zero", path)
    got = child(cache, timeout=120)  # today: reads until memory runs out
    assert got["ok"] and got["maxrss_kib"] < (1 << 20)  # under 1 GiB
    assert any("symbolic link" in w for w in got["warnings"]), got["warnings"]


# -- what Numba would unpickle ----------------------------------------------------------------
class Payload:
    """A pickle that creates ``marker`` when loaded: code run from the cache."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_a_planted_numba_index_is_never_unpickled(tmp_path, fresh):
    cache, kf = filled(tmp_path, fresh)
    marker = tmp_path / "ran"
    with open(kf[".nbi"][0], "wb") as f:  # under the right name, the right version first
        pickle.dump(numba.__version__, f, protocol=-1)
        f.write(pickle.dumps(Payload(marker)))
    got, kernels, _ = run(sin_prog, cache, fresh)
    assert not marker.exists()  # never unpickled
    np.testing.assert_allclose(got, np.sin(X) * 2 + X, rtol=1e-14)
    # a miss, overwritten: the next process (here: forgetting this one's kernels) loads
    got, kernels, _ = run(sin_prog, cache, fresh)
    assert not marker.exists()
    assert hits(kernels) > 0


def test_planted_machine_code_is_never_unpickled(tmp_path, fresh):
    cache, kf = filled(tmp_path, fresh)
    marker = tmp_path / "ran"
    for path in kf[".nbc"]:
        with open(path, "wb") as f:
            f.write(pickle.dumps(Payload(marker)))
    got, _, _ = run(sin_prog, cache, fresh)
    assert not marker.exists()
    np.testing.assert_allclose(got, np.sin(X) * 2 + X, rtol=1e-14)


def test_another_kernels_machine_code_under_sins_name_is_a_miss(tmp_path, fresh):
    """cos's kernel has sin's bytecode (only a name differs), so Numba's key for its
    signature is the same: an index under sin's name, with sin's stamp, pointing at cos's
    machine code (and cos's sidecar beside it) must not make sin's program compute cos."""
    cache, skf = filled(tmp_path, fresh)
    run(cos_prog, cache, fresh)
    kf = kernel_files(cache)
    (cos_nbi,) = [p for p in kf[".nbi"] if p not in skf[".nbi"]]
    (sin_nbi,) = skf[".nbi"]

    def read_index(path):
        with open(path, "rb") as f:
            version = pickle.load(f)
            return version, pickle.loads(f.read())
    version, (sin_stamp, sin_over) = read_index(sin_nbi)
    _, (_, cos_over) = read_index(cos_nbi)
    assert set(cos_over) == set(sin_over)  # the same keys: Numba cannot tell them apart
    forged = {}
    for key, cos_data in cos_over.items():
        sin_data = sin_over[key]
        shutil.copy(os.path.join(os.path.dirname(cos_nbi), cos_data),
                    os.path.join(os.path.dirname(sin_nbi), sin_data))
        forged[key] = sin_data
    with open(sin_nbi, "wb") as f:
        pickle.dump(version, f, protocol=-1)
        f.write(pickle.dumps((sin_stamp, forged), protocol=-1))
    if os.path.exists(cos_nbi + ".sum"):
        shutil.copy(cos_nbi + ".sum", sin_nbi + ".sum")
    got, kernels, _ = run(sin_prog, cache, fresh)
    np.testing.assert_allclose(got, np.sin(X) * 2 + X, rtol=1e-14)  # today: cos
    again, kernels, _ = run(sin_prog, cache, fresh)  # overwritten with sin's own
    np.testing.assert_allclose(again, np.sin(X) * 2 + X, rtol=1e-14)
    assert hits(kernels) > 0


# -- read-only ------------------------------------------------------------------------------
@POSIX
def test_a_read_only_cache_writes_nothing_anywhere_else(tmp_path):
    """Loaded from where it can be, compiled in memory where not: never Numba's fallback
    to ~/.cache/numba (HOME is a temporary directory here).  Root writes through any mode,
    so the second process also refuses itself any write there (an audit hook)."""
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    first = child(cache, home=home)
    assert first["ok"]
    kf = kernel_files(cache)
    os.unlink(kf[".nbi"][0])  # nothing to load: it must compile, and cannot save
    for d, _, fs in os.walk(cache):
        os.chmod(d, 0o500)
        for f in fs:
            os.chmod(os.path.join(d, f), 0o400)
    before = files(cache)
    try:
        got = child(cache, home=home, read_only=True)
    finally:
        for d, _, _ in os.walk(cache):
            os.chmod(d, 0o700)
    assert got["ok"] and not got["warnings"]
    assert os.listdir(home) == []  # no ~/.cache/numba
    assert files(cache) == before


def test_the_warning_is_a_runtime_warning_once_per_directory(tmp_path):
    assert issubclass(wg.compile.CacheWarning, RuntimeWarning)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(3):
            disk_trust.warn_untrusted(str(tmp_path / "a"), "planted")
        disk_trust.warn_untrusted(str(tmp_path / "b"), "planted")
    assert len(record) == 2
    assert "WENGERT_CACHE_DIR" in str(record[0].message)  # says what to do


def test_reads_are_bounded(tmp_path):
    p = tmp_path / "big"
    p.write_bytes(b"x" * 1000)
    os.chmod(p, 0o600)
    assert disk_trust.read_private(str(p), 1000) == b"x" * 1000
    with pytest.raises(disk_trust.Untrusted, match="larger"):
        disk_trust.read_private(str(p), 999)
    assert disk_trust.read_private(str(tmp_path / "missing"), 10) is None
    with pytest.raises(disk_trust.Untrusted, match="not a regular file"):
        disk_trust.read_private(str(tmp_path), 10)

