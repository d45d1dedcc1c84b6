"""Numba's per-function cache, pinned to wengert's private directory and checked before use.

Numba's cache is an index (``*.nbi``: a pickle of the source stamp and, per signature, a data
file name) and data files (``*.nbc``: pickles of machine code and its environment); loading
either unpickles it, which can run any code.  Three changes make it safe to use:

* **one place**: the cache lives in the ``__pycache__`` of the kernel's own private
  directory, and nowhere else -- not ``NUMBA_CACHE_DIR``, not ``~/.cache/numba`` (Numba's
  fallbacks when a directory cannot be written), whatever the environment says;
* **checked bytes**: every file is read once with :func:`.disk_trust.read_private` (private,
  regular, bounded) and the bytes in hand are what is unpickled;
* **bound to its key**: after saving, a sidecar (``<index>.sum``, JSON, never a pickle) is
  written with the module's key (the SHA-256 of its text and versions) and the SHA-256 of the
  index and of each data file.  Nothing is unpickled unless the sidecar names this module's
  key and the bytes match their digests; otherwise the entry is a miss, compiled and
  overwritten.  So another kernel's machine code under this kernel's name (same bytecode,
  another ufunc) is never loaded.

The source stamp Numba compares is that key too: the source file is never read by Numba.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
import pickle
import sys
import threading
import types
import uuid

from .disk_trust import Untrusted, open_private_for_write, private_dir, read_private, \
    warn_untrusted

__all__ = ["checked_cache", "compile_registered", "registered"]

INDEX_LIMIT = 1 << 20      # an index: a few signatures' keys
DATA_LIMIT = 256 << 20     # machine code and LLVM IR of one kernel module's overload
SIDECAR_LIMIT = 1 << 16

# Numba finds a function's environment by importing its module by name, when it compiles
# (to save it) and when it loads, and keeps that module's globals for as long as the
# compiled code is registered in its target context -- which lasts until the dispatcher
# dies.  Handing it the kernels' own module would make a cycle through Numba's registry
# (the module holds the dispatcher) that is never freed; so Numba gets a stub of the same
# name, with no kernels in it (nopython code resolves its globals when it compiles, from
# the function's own), and only while it compiles or loads: no entry in ``sys.modules``
# outlives that (kernel_cache.py frees the kernels with their programs).
_LOADING = threading.RLock()
_COUNTS = {}


@contextlib.contextmanager
def registered(module):
    """A stub of ``module`` importable by its name for the duration (nested uses count)."""
    name = module.__name__
    stub = module.__dict__.get("__wengert_stub__")
    if stub is None:
        stub = module.__wengert_stub__ = types.ModuleType(name)
        stub.__file__ = getattr(module, "__file__", None)
    with _LOADING:
        _COUNTS[name] = _COUNTS.get(name, 0) + 1
        sys.modules[name] = stub
    try:
        yield
    finally:
        with _LOADING:
            _COUNTS[name] -= 1
            if not _COUNTS[name]:
                del _COUNTS[name]
                if sys.modules.get(name) is stub:
                    del sys.modules[name]


def compile_registered(disp, module):
    """``disp`` compiling (and loading from its cache) with ``module`` importable, and
    dropping, once compiled, the typed annotation Numba keeps for ``inspect_types``: it
    holds the Python function, whose globals (the module) hold the dispatcher, and Numba's
    finalizer of the dispatcher holds the annotation -- a cycle from a global registry,
    which would keep every kernel ever compiled."""
    compile_ = disp.compile

    def compile(sig):
        with registered(module):
            out = compile_(sig)
        overloads = disp.overloads
        for k, cres in list(overloads.items()):
            if getattr(cres, "type_annotation", None) is not None:
                overloads[k] = cres._replace(type_annotation=None)
        return out
    disp.compile = compile
    return disp


def _sha(b):
    return hashlib.sha256(b).hexdigest()


@functools.cache
def checked_cache():
    """The class ``CheckedCache(py_func, key, module)``: a Numba function cache in
    ``dirname(py_func's file)/__pycache__`` whose entries must match ``key``."""
    from numba.core.caching import (CompileResultCacheImpl, FunctionCache, IndexDataCacheFile,
                                    _CacheLocator)

    class Locator(_CacheLocator):
        def __init__(self, py_func, py_file, key):
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(os.path.dirname(py_file), "__pycache__")
            self._key = key

        def ensure_cache_path(self):  # private, or no cache (never a fallback elsewhere)
            try:
                private_dir(self._cache_path)
            except Untrusted as e:
                raise OSError(str(e)) from None

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return self._key

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            return None  # only CheckedCache makes one, with the key

    class Impl(CompileResultCacheImpl):
        def __init__(self, py_func, key):  # Numba's own, less its choice of locators
            self._lineno = py_func.__code__.co_firstlineno
            path = py_func.__code__.co_filename
            self._locator = Locator(py_func, path, key)
            modname = os.path.splitext(os.path.basename(path))[0]
            self._filename_base = self.get_filename_base(
                f"{modname}.{py_func.__qualname__}", getattr(sys, "abiflags", ""))

    class CheckedFile(IndexDataCacheFile):
        def __init__(self, cache_path, filename_base, key):
            super().__init__(cache_path, filename_base, key)
            self._key = key
            self._sum_path = self._index_path + ".sum"
            self._digests = {}  # data file name -> SHA-256, from the sidecar

        def _sidecar(self):
            raw = read_private(self._sum_path, SIDECAR_LIMIT)
            if raw is None:
                return None
            try:
                side = json.loads(raw.decode())
            except ValueError:
                return None
            if not (isinstance(side, dict) and side.get("key") == self._key
                    and isinstance(side.get("index"), str)
                    and isinstance(side.get("data"), dict)):
                return None
            return side

        def _load_index(self):
            self._digests = {}
            raw = read_private(self._index_path, INDEX_LIMIT)
            if raw is None:
                return {}
            side = self._sidecar()
            if side is None or side["index"] != _sha(raw):
                return {}  # not ours, or not for this key: a miss, overwritten on saving
            f = io.BytesIO(raw)
            if pickle.load(f) != self._version:
                return {}
            stamp, overloads = pickle.loads(f.read())
            if stamp != self._source_stamp or not isinstance(overloads, dict):
                return {}
            self._digests = {k: v for k, v in side["data"].items()
                             if k in set(overloads.values()) and isinstance(v, str)}
            return overloads

        def _load_data(self, name):
            want = self._digests.get(name)
            raw = read_private(self._data_path(name), DATA_LIMIT)
            if raw is None or want is None or _sha(raw) != want:
                raise OSError(f"{name}: not the data this index was saved with")
            return pickle.loads(raw)

        def save(self, key, data):
            overloads = self._load_index()
            digests = dict(self._digests)
            name = overloads.get(key)
            if name is None:
                taken = set(overloads.values())
                name = next(n for n in map(self._data_name, range(1, 1 << 20))
                            if n not in taken)
                overloads[key] = name
            digests[name] = self._write(self._data_path(name), self._dump(data))
            index = pickle.dumps(self._version, protocol=-1) + \
                self._dump((self._source_stamp, overloads))
            side = {"key": self._key, "index": self._write(self._index_path, index),
                    "data": {n: digests[n] for n in set(overloads.values()) if n in digests}}
            self._write(self._sum_path, json.dumps(side, sort_keys=True).encode())

        def _write(self, path, data):
            """``data`` to ``path`` through a new private file renamed over it (a planted
            link or FIFO at ``path`` is replaced, never written through); its digest."""
            tmp = f"{path}.tmp.{uuid.uuid4().hex[:16]}"
            try:
                with open_private_for_write(tmp) as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            return _sha(data)

        def _save_index(self, overloads):  # only through save(), which writes the sidecar
            raise NotImplementedError

    class CheckedCache(FunctionCache):
        """Load failures (damaged, foreign or untrusted entries) are misses; save failures
        (a full or read-only disk) leave the function unsaved."""
        _impl_class = Impl

        def __init__(self, py_func, key, module):
            self._name = repr(py_func)
            self._py_func = py_func
            self._impl = Impl(py_func, key)
            self._cache_path = self._impl.locator.get_cache_path()
            self._cache_file = CheckedFile(self._cache_path, self._impl.filename_base, key)
            self._module = module
            self._root = os.path.dirname(os.path.dirname(self._cache_path))  # the cache dir
            self.enable()

        def load_overload(self, sig, target_context):
            with registered(self._module):
                try:
                    return super().load_overload(sig, target_context)
                except Untrusted as e:
                    warn_untrusted(self._root, e, stacklevel=6)
                    return None
                except Exception:
                    return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Untrusted as e:
                warn_untrusted(self._root, e, stacklevel=6)
            except Exception:
                pass

        def flush(self):
            pass

    return CheckedCache
