"""Numba functions from wengert's generated source, kept in a disk cache across processes.

Numba's own cache needs a function defined in a file: it stores the machine code beside that
file (``__pycache__/*.nbi`` index, ``*.nbc`` data).  Generated kernels live in memory, so
each module of them is written once to ``<cache dir>/<version tag>/k<hash>.py`` -- the hash
(SHA-256, hexadecimal) of the module's text and of the Python, NumPy, Numba and wengert
versions -- and its functions get Numba's cache, pinned and checked (numba_cache.py): a
second process running the same program loads the machine code instead of compiling
(Numba keys its index by the argument types and the CPU).

Only text wengert generated is written and run, and only what the user alone could have
written is read: the cache directory, its version directory and ``__pycache__`` must be
private -- not links, owned by the user, writable by no group or others (disk_trust.py;
wengert makes them with mode 0700) -- else one :class:`CacheWarning` and everything compiles
in memory; every file is read without following links or blocking, checked to be a private
regular file, and read up to a bound.  The file name is the hash of the text (hexadecimal
digits, so nothing can steer the path); the module is compiled from the text in hand (the
file gives Numba a name; it is never read back as code); an existing file is used only
when it holds exactly that text; and a file is created by a hard link from a temporary one,
so that it appears complete or not at all.  Numba's index and data are unpickled only when
a sidecar digest binds them to this module's key.  Where the directory cannot be written, or
the cache is switched off, the functions compile in memory as before, without a word (and
Numba writes nowhere else).

The directory: ``WENGERT_CACHE_DIR`` when set (empty: no disk cache), else
``$XDG_CACHE_HOME/wengert`` or ``~/.cache/wengert`` (``%LOCALAPPDATA%\\wengert`` on
Windows); ``WENGERT_DISK_CACHE=0`` switches the disk cache off as well.  Within one process
a module is compiled once while a program uses it, and the last :data:`KEEP` used are kept
after that; older ones are freed with the programs that used them (:data:`_MODULES`).
"""
from __future__ import annotations

import collections
import hashlib
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import types
import weakref

import numpy

from .._version import __version__
from .disk_trust import CacheWarning, Untrusted, private_dir, read_private, refused, \
    warn_untrusted
from .numba_cache import checked_cache, compile_registered

__all__ = ["njit_module", "cache_dir", "clear_cache", "copy_call", "CacheWarning"]

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
    try:
        private_dir(d, create=False)
    except (Untrusted, OSError) as e:  # not ours to empty
        warn_untrusted(d, e)
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


def _digest(text):
    """The module's key: SHA-256 of its text and of the versions it depends on."""
    return hashlib.sha256(f"{_tag()}{chr(0)}{text}".encode()).hexdigest()


def _file_name(text):
    """``k<hash>.py``: hexadecimal digits only, whatever the text (no path can be steered)."""
    return f"k{_digest(text)[:40]}.py"


def _write(directory, name, text):
    """``directory/name`` holding ``text``, created atomically (never rewritten once there);
    False where the directory cannot be written.  An existing file is read as
    :func:`.disk_trust.read_private` reads (raises ``Untrusted`` for a link, a FIFO, a file
    of another user's...); one of ours with other text is replaced."""
    path = os.path.join(directory, name)
    data = text.encode()
    limit = len(data)
    try:
        if read_private(path, limit) == data:
            return True
    except Untrusted as e:
        if "larger" not in str(e):  # ours and too long: damaged, replaced below
            raise
    except OSError:
        return False
    try:
        os.makedirs(os.path.join(directory, "__pycache__"), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".py", dir=directory)  # 0600
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
        try:
            same = read_private(path, limit) == data
        except Untrusted:
            same = False
        if not same:  # a damaged file from elsewhere (or a link in its place): ours instead
            os.replace(tmp, path)
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
    which only gives Numba its name -- not registered in ``sys.modules`` (Numba's cache
    registers it while it loads: numba_cache.py)."""
    mod = types.ModuleType(modname)
    mod.__file__ = path
    exec(compile(text, path, "exec"), mod.__dict__)
    return mod


def _private_tag_dir(root):
    """``root/<version tag>``, made private (0700) where missing; None (after one warning)
    where ``root``, the tag directory or its ``__pycache__`` could be another user's, or
    where they cannot be made (silently: a read-only disk)."""
    directory = os.path.join(root, _tag())
    if refused(root):
        return None
    try:
        private_dir(root)
        private_dir(directory)
        private_dir(os.path.join(directory, "__pycache__"))
    except Untrusted as e:
        warn_untrusted(root, e, stacklevel=5)
        return None
    except OSError:
        return None
    return directory


# Modules compiled in this process, by text: each is the compiled functions' globals, so it
# lives while a program holds one of its kernels (``_LIVE``, weak) and, for the last
# ``KEEP`` used, also while none does (``_RECENT``) -- a loop compiling the same function
# anew compiles its kernels once; a loop compiling new closures holds KEEP modules, not all.
KEEP = 64
_LIVE = weakref.WeakValueDictionary()
_RECENT = collections.OrderedDict()
_TABLE_LOCK = threading.Lock()


class _Modules:
    """``_MODULES``: module text -> ``{name: dispatcher}`` of the modules alive."""

    def get(self, text):
        with _TABLE_LOCK:
            mod = _LIVE.get(text)
            if mod is None:
                return None
            _RECENT[text] = mod
            _RECENT.move_to_end(text)
            while len(_RECENT) > KEEP:
                _RECENT.popitem(last=False)
            return mod.__wengert_kernels__

    def put(self, text, mod):
        mod.__wengert_module__ = mod  # the functions' globals keep their module alive
        with _TABLE_LOCK:
            _LIVE[text] = mod
        self.get(text)

    def __len__(self):
        return len(_LIVE)

    def values(self):
        return [m.__wengert_kernels__ for m in list(_LIVE.values())]


_MODULES = _Modules()


def njit_module(functions, aliases=None, extern=None, key=""):
    """``{name: Numba dispatcher}`` for the generated ``functions`` (``(name, source)``
    pairs, each source defining that function), compiled together: each sees the others
    (and ``aliases``: alias -> name) as its globals, and ``math``, ``np``, ``float32``,
    ``float64`` and the ``_copy<n>`` helpers they call (:func:`copy_call`).  ``extern``: further
    globals, Numba functions from elsewhere, which ``key`` (a line of text) names: the
    cache keys on it, not on their code; None: what they stand for cannot be named, so the
    module is not cached on disk.  Compiled lazily by Numba on first call; from the disk
    cache where it has them, and where that cache is private (disk_trust.py)."""
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
    mod = digest = None
    d = cache_dir()
    if d is not None and (key is not None or not extern):
        directory = _private_tag_dir(d)
        name = _file_name(text)
        try:
            if directory is not None and _write(directory, name, text):
                mod = _load(os.path.join(directory, name), f"_wengert_kernels_{name[1:-3]}",
                            text)
                digest = _digest(text)
        except Untrusted as e:
            warn_untrusted(d, e, stacklevel=4)
            mod = None
        except OSError:
            mod = None
    cache = mod is not None
    if mod is None:  # in memory: no file for Numba's cache
        mod = types.ModuleType(f"_wengert_kernels_m{_digest(text)[:40]}")
        exec(compile(text, "<wengert kernels>", "exec"), mod.__dict__)
    mod.__dict__.update(extern)
    out = {}
    for name, _ in functions:
        py = getattr(mod, name)
        disp = numba.njit(**_OPTIONS)(py)  # cache=False: Numba's own locators never run
        if cache:
            try:
                disp._cache = checked_cache()(py, digest, mod)  # as enable_caching sets it
            except Exception:  # this Numba's cache internals differ: in memory
                pass
        compile_registered(disp, mod)  # freed with the programs using it (numba_cache.py)
        setattr(mod, name, disp)  # what the other functions call
        out[name] = disp
    for a, t in aliases.items():
        setattr(mod, a, out[t])
        out[a] = out[t]
    mod.__wengert_kernels__ = out
    _MODULES.put(text, mod)
    return out
