"""Buffer reuse across calls: the settings of the ``out=`` pass (passes.buffers).

A generated program allocates one array per NumPy call.  Where a call is a ufunc (``tanh``,
``matmul``, or a Python operator on arrays, which NumPy runs as the ufunc) or a fused kernel
(given its result arrays) and its result provably never leaves the call, ``wg.compile`` keeps
a buffer for it per program (so per input signature and branch) and writes into it with
``out=`` on every call; calls whose lifetimes do not overlap share one.  Which calls, and
which share, is a pass over the graph before any text is written (:func:`passes.buffers
<wengert.graph.passes.buffers>`); the emitter (lower.py) then writes the pooled program once,
each such call with its ``out=``.

Re-entrancy: each program's pool has a lock taken without waiting (codegen.py writes the
entry).  A call that finds it taken -- another thread's call in flight, or a recursive call
from inside the program (a callback calling the compiled function) -- runs the unpooled
program, so no two calls in flight ever share a buffer.  The pooled program gives the
unpooled program's bits: the same ufunc loops write the same values, into a buffer laid out
as the traced result was (C order); a call whose array arguments are laid out otherwise than
the traced ones (a transposed input: other layouts downstream, so other summation orders)
runs the unpooled program too.
"""
from __future__ import annotations

import os

__all__ = ["reuse_default", "POOL_MIN_SIZE", "POOL_MAX_BYTES"]

POOL_MIN_SIZE = 1024       # smaller arrays are allocated: NumPy's allocator caches them anyway
POOL_MAX_BYTES = 1 << 28   # the most one program keeps between calls (256 MiB)


def reuse_default():
    """Reuse buffers unless ``WENGERT_REUSE_BUFFERS=0``."""
    return os.environ.get("WENGERT_REUSE_BUFFERS", "1") != "0"
