"""Progress bars for long work: ``progress=True`` on ``wg.scan``, ``wg.jacobian``, ...

A bar is tqdm's, written to stderr; tqdm is an optional dependency (the ``progress``
extra), loaded only when a bar is asked for. ``progress=False`` (the default) costs a
method call that does nothing.
"""
from __future__ import annotations

import sys

__all__ = ["check", "bar", "OFF"]

INSTALL = 'progress=True needs tqdm: pip install "wengert[progress]" (or pip install tqdm)'


class _Off:
    """The bar when none was asked for."""

    def update(self, n=1):
        pass

    def set_postfix_str(self, s="", refresh=True):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


OFF = _Off()


def _tqdm():
    try:
        from tqdm import tqdm  # optional dependency (the "progress" extra), loaded lazily
    except ImportError:
        raise ImportError(INSTALL) from None
    return tqdm


def check(progress, where):
    """``progress`` as a bool; asking for bars without tqdm fails here, before any work."""
    if progress is None or progress is False:
        return False
    if progress is True:
        _tqdm()
        return True
    raise TypeError(f"{where}: progress must be True or False, got {progress!r}")


def bar(progress, total, desc, unit="step"):
    """A tqdm bar on stderr (``total=None`` when the count is not known), or ``OFF``."""
    if not progress:
        return OFF
    return _tqdm()(total=total, desc=desc, unit=unit, file=sys.stderr, leave=True,
                   dynamic_ncols=True, mininterval=0.1)
