"""CPython's full collections held off while a tape is recorded and swept.

A tape holds a few garbage-collected objects per recorded operation (its pullback's
closure, cells and tuples), all alive until the sweep.  While it grows, every full
collection walks all of them, and one comes each time the survivors grow by a quarter: an
eager LSTM gradient whose scan keeps its steps' tapes (80,000 nodes, 290,000 objects) ran
4 to 5 of them, 0.35 s each.  Inside a paused region the oldest generation's threshold is
out of reach, so only young collections run: they still free the cycles a step or the
user's code leaves behind (a recomputed step's sub-tape under "ctz" is one), so memory-
bounded schedules stay bounded.  The thresholds come back when the outermost region (in
any thread) ends.
"""
import gc
import threading

__all__ = ["paused"]

_LOCK = threading.Lock()
_STATE = {"depth": 0, "was": None}  # regions open now; the thresholds found at the first
_OUT_OF_REACH = 1 << 30  # full collections after this many young ones: none in a region


class _Paused:
    """A context manager (a class: it runs on every ``wg.grad`` call)."""

    __slots__ = ()

    def __enter__(self):
        with _LOCK:
            if _STATE["depth"] == 0:
                was = _STATE["was"] = gc.get_threshold()
                gc.set_threshold(was[0], was[1], _OUT_OF_REACH)
            _STATE["depth"] += 1

    def __exit__(self, *exc):
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                gc.set_threshold(*_STATE["was"])


_PAUSED = _Paused()


def paused():
    """``with paused():`` no full collection (nests, and across threads)."""
    return _PAUSED
