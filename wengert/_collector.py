"""CPython's cyclic collector held off while a tape is recorded and swept.

A tape holds a few garbage-collected objects per recorded operation (its pullback's
closure, cells and tuples), all alive until the sweep.  While it grows, every full
collection walks all of them, and full collections come each time the survivors grow by a
quarter: an eager LSTM gradient (80,000 nodes) spent 0.8 s of 2.4 s in them, and a scan
that keeps its steps' tapes more.  Reference counting frees everything a tape made once
the sweep ends, so the collector has nothing to find there; cycles the user's code makes
wait until the outermost paused region (in any thread) ends.
"""
import gc
import threading

__all__ = ["paused"]

_LOCK = threading.Lock()
_STATE = {"depth": 0, "was": False}  # regions open now; whether the collector was on


class _Paused:
    """A context manager (a class: it runs on every ``wg.grad`` call)."""

    __slots__ = ()

    def __enter__(self):
        with _LOCK:
            if _STATE["depth"] == 0:
                _STATE["was"] = gc.isenabled()
                gc.disable()
            _STATE["depth"] += 1

    def __exit__(self, *exc):
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0 and _STATE["was"]:
                gc.enable()


_PAUSED = _Paused()


def paused():
    """``with paused():`` the cyclic collector is off (nests, and across threads)."""
    return _PAUSED
