"""What the kernel cache may trust on disk: directories and files the user owns alone.

Code is loaded from the cache (Numba's index and machine code are pickles), so a file that
someone else could have written is someone else's code.  A directory or file is *private*
when it is not a symbolic link, is owned by the current user, and is writable neither by
its group nor by others; a directory in which only its owner can create, rename or delete
entries holds only what its owner put there.  Everything the cache reads is read with
:func:`read_private`: the path is opened without following links and without blocking (a
FIFO in place of a file must not hang the process), checked with ``fstat`` on the open
descriptor (a regular file, private), and read up to a bound (a link to ``/dev/zero`` or a
huge file must not exhaust memory).  Anything else raises :class:`Untrusted`; the caller
warns once per directory (:func:`warn_untrusted`) and compiles in memory.

Where the operating system has no owners and modes (Windows), only links and special files
are refused.
"""
from __future__ import annotations

import errno
import os
import stat
import threading
import warnings

__all__ = ["CacheWarning", "Untrusted", "private_dir", "read_private", "warn_untrusted",
           "open_private_for_write", "refused"]

_POSIX = hasattr(os, "getuid")
_WARNED = set()  # directories warned about: once per process each
_LOCK = threading.Lock()


class CacheWarning(RuntimeWarning):
    """The kernel disk cache was not used: its directory or a file in it could have been
    written by another user (or is a link, or a special file); kernels compile in memory."""


class Untrusted(Exception):
    """A path the cache will not use; the message says why and what to do."""


def _check(st, path, what):
    if _POSIX:
        if st.st_uid != os.getuid():
            raise Untrusted(f"{what} {path} is owned by uid {st.st_uid}, not by you "
                            f"(uid {os.getuid()})")
        if st.st_mode & 0o022:
            raise Untrusted(f"{what} {path} is writable by its group or by others "
                            f"(mode {stat.S_IMODE(st.st_mode):04o})")


def _ancestors_ok(path):
    """No component above ``path`` is a link another user made (root's and one's own are
    the system's and the user's layout: /tmp -> /private/tmp, a home on another disk)."""
    parts = []
    head = os.path.dirname(path)
    while True:
        parts.append(head)
        up = os.path.dirname(head)
        if up == head:
            break
        head = up
    for p in parts:
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode) and _POSIX and st.st_uid not in (0, os.getuid()):
            raise Untrusted(f"{p} (above the cache directory) is a symbolic link owned by "
                            f"uid {st.st_uid}")


def private_dir(path, create=True):
    """Make ``path`` (mode 0700, with missing parents) unless it exists, then check that it
    is a private directory; raises :class:`Untrusted`, or ``OSError`` where it cannot be
    made (a read-only disk: no cache, and nothing to warn about)."""
    _ancestors_ok(path)
    if create:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except FileExistsError:  # a file, or a link to nowhere: lstat says which
            pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"the cache directory {path} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"the cache directory {path} is not a directory")
    _check(st, path, "the cache directory")
    return path


def read_private(path, limit):
    """The bytes of the private regular file ``path`` (at most ``limit`` of them), or None
    where there is no such file; raises :class:`Untrusted` for anything else."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not hasattr(os, "O_NOFOLLOW"):  # no such flag (Windows): look before opening
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise Untrusted(f"{path} is a symbolic link")
        except FileNotFoundError:
            return None
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link
            raise Untrusted(f"{path} is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"{path} is not a regular file (a FIFO, a device or a directory)")
        _check(st, path, "the cache file")
        if st.st_size > limit:
            raise Untrusted(f"{path} is larger ({st.st_size} bytes) than any cache file "
                            f"wengert writes ({limit})")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:
            raise Untrusted(f"{path} grew past {limit} bytes while being read")
        return data
    finally:
        os.close(fd)


def open_private_for_write(path):
    """A new file ``path`` (mode 0600, whatever the umask; never through a link), open for
    writing in binary."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    return os.fdopen(os.open(path, flags, 0o600), "wb")


def refused(directory):
    """Whether ``directory`` was found untrusted in this process (then it stays unused)."""
    return directory in _WARNED


def warn_untrusted(directory, err, stacklevel=3):
    """One :class:`CacheWarning` per process and cache directory, which is not used again
    in this process (:func:`refused`)."""
    with _LOCK:
        if directory in _WARNED:
            return
        _WARNED.add(directory)
    warnings.warn(f"wengert's kernel cache is not used: {err}. Kernels compile in memory "
                  "instead. Point WENGERT_CACHE_DIR at a directory only you can write "
                  "(wengert creates it with mode 0700), or set WENGERT_DISK_CACHE=0.",
                  CacheWarning, stacklevel=stacklevel)
