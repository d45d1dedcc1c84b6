"""Numba functions from wengert's generated source, kept in a disk cache across processes.

Numba's own cache (``cache=True``) needs a function defined in a file: it stores the machine
code beside that file (``__pycache__/*.nbi`` index, ``*.nbc`` data) and checks the file's
modification time and size on loading.  Generated kernels live in memory, so each module of
them is written once to ``<cache dir>/<version tag>/k<hash>.py`` -- the hash (SHA-256,
hexadecimal) of the module's text and of the Python, NumPy, Numba and wengert versions --
and its functions are jitted with ``cache=True``: a second process running the same program
loads the machine code instead of compiling (Numba keys its index by the argument types and
the CPU).

Only text wengert generated is written and run: the file name is the hash of the text
(hexadecimal digits, so nothing can steer the path); the module is compiled from the text in
hand (the file gives Numba a name and a time stamp; it is never read back as code); an
existing file is used only when it holds exactly that text; and a file is created by a hard
link from a temporary one, so that it appears complete or not at all and is never rewritten
(a rewrite would change its time stamp and void Numba's index).  Two processes writing the
same kernel therefore race harmlessly.  Where the directory cannot be written, or the cache
is switched off, the functions are compiled in memory as before, without a word.

The directory: ``WENGERT_CACHE_DIR`` when set (empty: no disk cache), else
``$XDG_CACHE_HOME/wengert`` or ``~/.cache/wengert`` (``%LOCALAPPDATA%\\wengert`` on
Windows); ``WENGERT_DISK_CACHE=0`` switches the disk cache off as well.  Within one
process every distinct module is compiled once (:data:`_MODULES`).
"""
from __future__ import annotations

import functools
import hashlib
import os
import platform
import re
import shutil
import sys
import tempfile
import types

import numpy

from .._version import __version__

__all__ = ["njit_module", "cache_dir", "clear_cache", "copy_call"]

_MODULES = {}  # module text -> {name: dispatcher}: one compilation per process
_OPTIONS = {"error_model": "numpy"}


def cache_dir():
    """The kernel cache's directory (a string), or None when the disk cache is off."""
    if os.environ.get("WENGERT_DISK_CACHE", "1").strip() == "0":
        return None
    d = os.environ.get("WENGERT_CACHE_DIR")
    if d is not None:
        return os.path.abspath(os.path.expanduser(d)) if d.strip() else None
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return os.path.join(os.environ["LOCALAPPDATA"], "wengert")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "wengert")


_TAG = re.compile(r"py\d+-np[\w.]+-numba[\w.]+-wengert[\w.]+-\w+")


def _tag():
    """The versions a cached kernel depends on, as a directory name."""
    import numba
    parts = (f"py{sys.version_info[0]}{sys.version_info[1]}", f"np{numpy.__version__}",
             f"numba{numba.__version__}", f"wengert{__version__}",
             platform.python_implementation().lower())
    return "-".join("".join(c if c.isalnum() or c in "._" else "_" for c in p) for p in parts)


def clear_cache():
    """Delete the disk cache's kernels (every version's); returns the number of files removed.
    Functions already compiled in this process keep working."""
    d = cache_dir()
    if d is None or not os.path.isdir(d):
        return 0
    removed = 0
    for entry in os.listdir(d):
        path = os.path.join(d, entry)
        # only what this module writes: the version directories (named as _tag names them)
        if not os.path.isdir(path) or os.path.islink(path) or not _TAG.fullmatch(entry):
            continue
        removed += sum(len(files) for _, _, files in os.walk(path))
        shutil.rmtree(path, ignore_errors=True)
    return removed


# Helpers a generated function may call by name (added to its module when it does):
# ``_copy<n>(d, s)`` copies the n-dimensional array ``s`` into ``d`` (an array or any view
# of one, of the same shape: the traced shapes, fixed when the source is written) element
# by element.  Array copies go through them rather than ``d[...] = s``: Numba's slice
# assignment compiles its broadcasting check, whose error message (shapes formatted by
# Numba's string machinery) took 1.8 s of a compiled scan's 3.7 s cold compile.  Loops over
# indices, not a flat view, and no raise: a view per call or a shape test that may raise
# cost 5-15% of the 2,000-step chain's time (its calls are then not inlined); the loops
# stop at the smaller extent, so no shape can make them read or write out of bounds.
_HELPER = re.compile(r"\b_copy([1-9]\d?)\(")


def _copy_source(nd):
    loops = [f"i{k}" for k in range(nd)]
    body = [f"def _copy{nd}(d, s):"]
    for k, i in enumerate(loops):  # never out of bounds (the shapes agree by construction)
        body.append("    " * (k + 1) + f"for {i} in range(min(d.shape[{k}], s.shape[{k}])):")
    body.append("    " * (nd + 1) + f"d[{', '.join(loops)}] = s[{', '.join(loops)}]")
    return "\n".join(body) + "\n"


def copy_call(nd, target, src):
    """The statement copying the ``nd``-dimensional array ``src`` into ``target``."""
    return f"_copy{nd}({target}, {src})"


def _module_text(functions, aliases):
    lines = ["# generated by wengert (wengert.graph.kernel_cache): do not edit",
             "import math", "import numpy as np", "from numpy import float32, float64", ""]
    for name, src in functions:
        if not name.isidentifier():
            raise ValueError(f"not a function name: {name!r}")
        lines += [src.rstrip("\n"), ""]
    lines += [f"{a} = {t}" for a, t in aliases.items()]
    return "\n".join(lines) + "\n"


def _file_name(text):
    """``k<hash>.py``: hexadecimal digits only, whatever the text (no path can be steered)."""
    return f"k{hashlib.sha256(f'{_tag()}{chr(0)}{text}'.encode()).hexdigest()[:40]}.py"


def _write(directory, name, text):
    """``directory/name`` holding ``text``, created atomically (never rewritten once there);
    False where the directory cannot be written."""
    path = os.path.join(directory, name)
    data = text.encode()
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return True
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        os.makedirs(os.path.join(directory, "__pycache__"), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".py", dir=directory)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.link(tmp, path)  # fails where another process made it first: theirs is kept
        except FileExistsError:
            pass
        except OSError:  # no hard links here: replace (a race then costs a recompilation)
            os.replace(tmp, path)
            return True
        with open(path, "rb") as f:
            if f.read() != data:  # a damaged file from elsewhere: ours instead
                os.replace(tmp, path)
                return True
        return True
    except OSError:
        return False
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _load(path, modname, text):
    """A module of ``text`` -- compiled from the text in hand, not read back from the file,
    which only gives Numba its name and time stamp -- registered under ``modname``."""
    mod = types.ModuleType(modname)
    mod.__file__ = path
    sys.modules[modname] = mod  # Numba's cached environments find their module by name
    try:
        exec(compile(text, path, "exec"), mod.__dict__)
    except BaseException:
        sys.modules.pop(modname, None)
        raise
    return mod


@functools.cache
def _safe_cache():
    """Numba's function cache, made harmless when its files are not: an entry that fails to
    load (a damaged or foreign index) is a miss -- the index is removed, so the new
    compilation writes a good one -- and a failure to save (a full disk) leaves the
    compiled function unsaved rather than failing the call."""
    from numba.core.caching import FunctionCache

    class SafeCache(FunctionCache):
        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception:
                try:
                    os.unlink(self._cache_file._index_path)
                except Exception:
                    pass
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception:
                pass
    return SafeCache


def njit_module(functions, aliases=None, extern=None, key=""):
    """``{name: Numba dispatcher}`` for the generated ``functions`` (``(name, source)``
    pairs, each source defining that function), compiled together: each sees the others
    (and ``aliases``: alias -> name) as its globals, and ``math``, ``np``, ``float32``,
    ``float64`` and the ``_copy<n>`` helpers they call (:func:`copy_call`).  ``extern``: further
    globals, Numba functions from elsewhere, which ``key`` (a line of text) names: the
    cache keys on it, not on their code; None: what they stand for cannot be named, so the
    module is not cached on disk.  Compiled lazily by Numba on first call; from the disk
    cache where it has them."""
    aliases, extern = dict(aliases or {}), dict(extern or {})
    nds = sorted({int(m) for _, f in functions for m in _HELPER.findall(f)})
    functions = [(f"_copy{nd}", _copy_source(nd)) for nd in nds] + list(functions)
    text = _module_text(functions, aliases)
    if extern:
        text = f"# {' '.join(sorted(extern))}: {key}\n" + text
    done = _MODULES.get(text)
    if done is not None:
        return done
    import numba
    mod = None
    d = cache_dir()
    if d is not None and (key is not None or not extern):
        directory, name = os.path.join(d, _tag()), _file_name(text)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            if _write(directory, name, text):
                mod = _load(os.path.join(directory, name), f"_wengert_kernels_{name[1:-3]}",
                            text)
        except OSError:
            mod = None
    cache = mod is not None
    if mod is None:  # in memory: no file for Numba's cache
        mod = types.ModuleType("_wengert_kernels")
        exec(compile(text, "<wengert kernels>", "exec"), mod.__dict__)
    mod.__dict__.update(extern)
    out = {}
    for name, _ in functions:
        py = getattr(mod, name)
        disp = numba.njit(**_OPTIONS)(py)
        if cache:
            try:
                disp._cache = _safe_cache()(py)  # what Dispatcher.enable_caching sets
            except Exception:  # Numba found no cache locator for the file: in memory
                pass
        setattr(mod, name, disp)  # what the other functions call
        out[name] = disp
    for a, t in aliases.items():
        setattr(mod, a, out[t])
        out[a] = out[t]
    # threads that raced here made a module each: every caller gets the first one kept
    return _MODULES.setdefault(text, out)
