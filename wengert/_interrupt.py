"""Ctrl+C during a compiled kernel, given back as ``KeyboardInterrupt``.

Python's SIGINT handler runs at the next check for signals; when that check happens inside
Numba's dispatcher while a kernel returns its result, CPython reports the call as
``SystemError: CPUDispatcher(...) returned a result with an exception set``, the
``KeyboardInterrupt`` kept as its cause. A program that catches ``KeyboardInterrupt`` (a
server, a notebook, a training loop with a "stop and save" branch) would miss it.
"""
import functools

__all__ = ["interrupt_of", "reraise_interrupts"]


def interrupt_of(err):
    """The ``KeyboardInterrupt`` a ``SystemError`` stands for, or ``None``."""
    seen, e = set(), err
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return KeyboardInterrupt() if "KeyboardInterrupt" in str(err) else None


def reraise_interrupts(fn):
    """``fn``, raising ``KeyboardInterrupt`` where a kernel's interrupt came as SystemError."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemError as e:
            interrupt = interrupt_of(e)
            if interrupt is None:
                raise
            raise interrupt.with_traceback(e.__traceback__) from None
    return call
