"""The fused kernels' disk cache (wengert/graph/kernel_cache.py): a kernel compiled in one
process is loaded, not compiled, in the next; results are the same bits with and without
the cache; an unwritable directory and the switches fall back to compiling in memory;
concurrent writers leave one whole file.  Every test uses its own temporary directory
(``tmp_path``), never the user's cache.

Evidence that a process loaded rather than compiled is Numba's own count per dispatcher
(``stats.cache_hits`` / ``cache_misses``) and its index files, not a timing.
"""
import json
import os
import re
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint.compiled import plans_of
from wengert.graph import kernel_cache

pytest.importorskip("numba", reason="the kernel cache holds Numba kernels (the 'fast' extra)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a fused elementwise kernel and a fused scan loop (a module of several functions calling
# one another), their results as exact bits, and Numba's counts of loads and compilations
SCRIPT = r"""
import json
import numpy as np
import wengert as wg, wengert.numpy as wnp
from wengert.checkpoint.compiled import plans_of
from wengert.graph import kernel_cache

def f(x):
    for _ in range(3):
        x = wnp.tanh(x) * 0.9 + 0.1
    return wnp.sum(x * x)

X0 = np.linspace(-1.0, 1.0, 5)

def loss(W):
    def step(x, _):
        return x + 0.01 * wnp.tanh(W @ x), None
    x, _ = wg.scan(step, X0, length=23, checkpoint="ctz")
    return wnp.sum(x * x)

x = np.linspace(0.1, 1.0, 10)
W = np.arange(25.0).reshape(5, 5) / 40.0
cf, cl = wg.compile(wg.grad(f), fuse=True), wg.compile(wg.grad(loss), fuse=True)
a, b = cf(x), cl(W)
(p,) = plans_of(cl.graph(W))
hits = misses = 0
for funcs in kernel_cache._MODULES.values():
    for d in set(funcs.values()):
        hits += sum(d.stats.cache_hits.values())
        misses += sum(d.stats.cache_misses.values())
print(json.dumps({"bits": [float(v).hex() for v in np.concatenate([a.ravel(), b.ravel()])],
                  "hits": hits, "misses": misses, "modules": len(kernel_cache._MODULES),
                  "scan_fused": p.fused() is not None and not p.fuse_failures,
                  "kernel_fuse_failures": len(cf.fuse_failures)}))
"""


def run_script(cache, **env):
    e = dict(os.environ, WENGERT_FUSE="1", PYTHONPATH=ROOT)
    e.pop("NUMBA_CACHE_DIR", None)  # Numba would put its index there instead
    e.pop("WENGERT_DISK_CACHE", None)
    if cache is None:
        e.pop("WENGERT_CACHE_DIR", None)
    else:
        e["WENGERT_CACHE_DIR"] = str(cache)
    e.update(env)
    return subprocess.Popen([sys.executable, "-c", SCRIPT], env=e, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def result(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def files(directory, pattern):
    return sorted(p for _, _, fs in os.walk(directory) for p in fs if re.fullmatch(pattern, p))


def test_second_process_loads_the_kernels_from_disk(tmp_path):
    cache = tmp_path / "cache"
    first = result(run_script(cache))
    assert first["scan_fused"] and first["kernel_fuse_failures"] == 0
    assert first["modules"] >= 2 and first["misses"] > 0 and first["hits"] == 0
    # one module per kernel, named by its hash; Numba's index and machine code beside it
    modules = files(cache, r"k[0-9a-f]{40}\.py")
    assert len(modules) == first["modules"]
    assert files(cache, r"k[0-9a-f]{40}\..+\.nbi") and files(cache, r"k[0-9a-f]{40}\..+\.nbc")
    second = result(run_script(cache))
    assert second["misses"] == 0 and second["hits"] >= first["modules"]  # nothing compiled
    assert second["bits"] == first["bits"]
    assert files(cache, r"k[0-9a-f]{40}\.py") == modules  # nothing rewritten or added
    # in memory (the cache off): the same bits, nothing loaded, no directory made
    off = tmp_path / "off"
    plain = result(run_script(off, WENGERT_DISK_CACHE="0"))
    assert plain["bits"] == first["bits"] and plain["hits"] == 0 and plain["misses"] > 0
    assert not off.exists()


def test_a_damaged_numba_index_is_a_miss_and_rewritten(tmp_path):
    cache = tmp_path / "cache"
    first = result(run_script(cache))
    for dirpath, _, fs in os.walk(cache):
        for f in fs:
            if f.endswith(".nbi"):
                with open(os.path.join(dirpath, f), "w") as h:
                    h.write("garbage")
    second = result(run_script(cache))  # compiles again (not NumPy's program), same bits
    assert second["kernel_fuse_failures"] == 0 and second["scan_fused"]
    assert second["misses"] > 0 and second["bits"] == first["bits"]
    third = result(run_script(cache))  # the index written anew: loaded again
    assert third["misses"] == 0 and third["bits"] == first["bits"]


def test_two_processes_writing_the_same_kernels_at_once(tmp_path):
    cache = tmp_path / "cache"
    procs = [run_script(cache) for _ in range(2)]
    a, b = (result(p) for p in procs)
    assert a["bits"] == b["bits"]
    assert not files(cache, r"\.tmp-.*")  # no temporary file left behind
    third = result(run_script(cache))
    assert third["misses"] == 0 and third["bits"] == a["bits"]


def test_concurrent_writes_of_one_file_leave_it_whole(tmp_path):
    text = "def kernel(a0):\n    return (a0 + 1.0,)\n" * 2000
    ok = []
    threads = [threading.Thread(target=lambda: ok.append(kernel_cache._write(
        str(tmp_path), "k" + "0" * 40 + ".py", text))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ok == [True] * 8
    assert (tmp_path / ("k" + "0" * 40 + ".py")).read_text() == text
    assert sorted(os.listdir(tmp_path)) == ["__pycache__", "k" + "0" * 40 + ".py"]


def test_an_existing_file_is_kept_and_a_damaged_one_replaced(tmp_path):
    name, text = "k" + "1" * 40 + ".py", "x = 1\n"
    assert kernel_cache._write(str(tmp_path), name, text)
    path = tmp_path / name
    os.utime(path, (1, 1))  # Numba's index checks this stamp: an equal file keeps it
    assert kernel_cache._write(str(tmp_path), name, text)
    assert os.stat(path).st_mtime == 1
    path.write_text("x = 2  # not what wengert wrote\n")
    assert kernel_cache._write(str(tmp_path), name, text)
    assert path.read_text() == text


def chain(x):
    for _ in range(3):
        x = wnp.tanh(x) * 0.7 + 0.3
    return wnp.sum(x)


def compiled_kernels():
    return [d for funcs in kernel_cache._MODULES.values() for d in funcs.values()]


def test_unwritable_directory_falls_back_silently(tmp_path, fresh):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    fresh.setenv("WENGERT_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot exist
    x = np.linspace(0.1, 1.0, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cf = wg.compile(wg.grad(chain), fuse=True)
        got = cf(x)
    assert cf.fuse_failures == [] and compiled_kernels()
    assert all(d.stats.cache_path is None for d in compiled_kernels())  # in memory
    np.testing.assert_allclose(got, wg.grad(chain)(x), rtol=1e-14)
    assert os.listdir(tmp_path) == ["a-file"]


@pytest.mark.parametrize("switch", [{"WENGERT_DISK_CACHE": "0"}, {"WENGERT_CACHE_DIR": ""}])
def test_switching_the_cache_off(tmp_path, fresh, switch):
    fresh.setenv("WENGERT_CACHE_DIR", str(tmp_path / "cache"))
    for k, v in switch.items():
        fresh.setenv(k, v)
    assert wg.compile.cache_dir() is None
    x = np.linspace(0.1, 1.0, 10)
    cf = wg.compile(wg.grad(chain), fuse=True)
    cf(x)
    assert cf.fuse_failures == [] and compiled_kernels()
    assert all(d.stats.cache_path is None for d in compiled_kernels())
    assert not (tmp_path / "cache").exists()


def test_cache_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("WENGERT_DISK_CACHE", raising=False)
    monkeypatch.setenv("WENGERT_CACHE_DIR", str(tmp_path / "mine"))
    assert wg.compile.cache_dir() == str(tmp_path / "mine")
    monkeypatch.delenv("WENGERT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform != "win32":
        assert wg.compile.cache_dir() == str(tmp_path / "xdg" / "wengert")


def test_clear_cache_removes_only_the_kernels(tmp_path, fresh):
    cache = tmp_path / "cache"
    fresh.setenv("WENGERT_CACHE_DIR", str(cache))
    x = np.linspace(0.1, 1.0, 10)
    cf = wg.compile(wg.grad(chain), fuse=True)
    want = cf(x)
    assert files(cache, r"k[0-9a-f]{40}\.py") and files(cache, r".*\.nbi")
    (cache / "notes.txt").write_text("not wengert's")
    (cache / "other").mkdir()
    (cache / "py3-other").mkdir()
    (cache / "other" / "data.bin").write_bytes(b"1")
    assert wg.compile.clear_cache() >= 3  # a module, its index and its machine code
    assert files(cache, r"k.*") == []
    assert sorted(os.listdir(cache)) == ["notes.txt", "other", "py3-other"]
    np.testing.assert_array_equal(cf(x), want)  # compiled functions keep working
    assert wg.compile.clear_cache() == 0


def test_names_cannot_leave_the_directory():
    with pytest.raises(ValueError, match="not a function name"):
        kernel_cache.njit_module([("../../evil", "def f():\n    return 1\n")])
    # a module's file name is its hash: hexadecimal digits whatever the text holds
    text = kernel_cache._module_text([("kernel", "def kernel():\n    return '../..'\n")], {})
    assert "../.." in text and "/" not in kernel_cache._file_name(text)


def test_fused_scan_loop_copies_arrays_as_the_python_loop_does():
    """The loop's array copies (``_copy``, not slice assignment): carry, slots, ys and
    the xs' cotangents equal the unfused program's."""
    X0 = np.linspace(-1.0, 1.0, 4)
    W = np.arange(16.0).reshape(4, 4) / 30.0
    xs = np.linspace(0.0, 1.0, 36).reshape(9, 4)

    def loss(W, xs):
        def step(x, xi):
            y = wnp.tanh(W @ x + xi)
            return x + 0.1 * y, y * y
        x, ys = wg.scan(step, X0, xs, checkpoint="binomial")
        return wnp.sum(x * x) + wnp.sum(ys)
    fused = wg.compile(wg.grad(loss, argnums=(0, 1)), fuse=True)
    got = fused(W, xs)
    (p,) = plans_of(fused.graph(W, xs))
    assert p.fused() is not None and p.fuse_failures == []
    want = wg.compile(wg.grad(loss, argnums=(0, 1)), fuse=False)(W, xs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("index", [(slice(1, None),), (slice(None, None, 2),),
                                   (slice(None), slice(1, 3)), (Ellipsis, 0)])
def test_fused_scan_with_slices_assigns_through_the_helper(index):
    """A step reading ``x[index]``: its VJP scatters into zeros at ``index`` -- an array
    region through the copy helper (any view, shapes checked), a scalar one as before."""
    X0 = np.linspace(-1.0, 1.0, 12).reshape(3, 4) if len(index) == 2 else \
        np.linspace(-1.0, 1.0, 6)
    W = np.linspace(0.1, 0.4, X0.shape[-1] ** 2).reshape(X0.shape[-1], X0.shape[-1])

    def loss(W):
        def step(x, _):
            return wnp.tanh(x @ W) + 0.1 * wnp.sum(x[index] * x[index]), None
        x, _ = wg.scan(step, X0, length=7, checkpoint="ctz")
        return wnp.sum(x * x)
    fused = wg.compile(wg.grad(loss), fuse=True)
    got = fused(W)
    (p,) = plans_of(fused.graph(W))
    assert p.fused() is not None and p.fuse_failures == []
    want = wg.compile(wg.grad(loss), fuse=False)(W)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, wg.grad(loss)(W), rtol=1e-12, atol=1e-15)


def test_the_copy_helpers_copy_into_views_and_stay_in_bounds():
    src = "def f(d, s, v, t):\n    _copy1(d, s)\n    _copy2(v[::2, 1:], t)\n    return v\n"
    f = kernel_cache.njit_module([("f", src)])["f"]
    d, t = np.zeros(4), np.arange(6.0).reshape(2, 3)
    v = f(d, np.arange(4.0), np.zeros((3, 4)), t)
    np.testing.assert_array_equal(d, np.arange(4.0))
    want = np.zeros((3, 4))
    want[::2, 1:] = t
    np.testing.assert_array_equal(v, want)
    d = np.full(4, 7.0)  # shapes that disagree (never so in generated code): in bounds
    f(d, np.arange(3.0), np.zeros((3, 4)), t)
    np.testing.assert_array_equal(d, [0.0, 1.0, 2.0, 7.0])
