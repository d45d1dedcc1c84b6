"""Fused code generation: runs of elementwise primitives become one Numba loop kernel.

Where Numba is installed (``pip install "wengert[fast]"``), ``wg.compile`` groups the
graph's elementwise nodes -- primitives whose record names a NumPy ``ufunc`` with a
homogeneous float loop (``dd->d``), element reads ``x[i, j]`` (lowering role
``gather_at_index``) and sums of element writes (``scatter_into_zeros``) -- into kernels: one loop nest over the
group's shape, one scalar statement per node, the ufunc itself called on scalars.  An
all-scalar program (a Python loop over ``x[i]``, the Babylonian iteration) becomes one
compiled scalar function.  Everything else (matmul, reductions, reshapes...) stays a
NumPy call, so BLAS does the products.

Which nodes fuse, in which kernels, in what order, which temporaries are overwritten and
which buffers are kept is decided by passes (passes.py); the emitter writes the program and
the kernels' bodies from those decisions (lower.py, lower_numpy.py, lower_numba.py).  Here:
Numba itself (imported on first use), the compiled kernels (one per source while in use,
kept on disk by kernel_cache.py) and the assembled function.

Grouping (passes.plan): a node's *stage* is the latest stage of its arguments, one later past a
non-fused node or a fused node of another shape; the fused nodes of one stage and shape
form a kernel, run before that stage's NumPy calls.  So every kernel's inputs exist when
it runs, whatever the order of the original nodes.

A kernel whose one result is read only by a gather by flat positions (``gather_flat``,
through ``flat_view`` reshapes: a compressed sparse Jacobian pass's last step) loops over
those positions instead and writes the gathered elements straight into the gather's result.

Results equal the NumPy program's except for rounding inside transcendental functions:
Numba calls the C library's ``tanh``, ``exp``... where NumPy may use its own SIMD
versions, so those may differ in the last place (1 ulp); ``+ - * /``, ``sqrt`` and the
casts are the same IEEE operations.  Division by zero gives NumPy's ``inf``/``nan``
(without NumPy's warning).
"""
from __future__ import annotations

import os
import threading
import warnings
import weakref

from . import budget
from .codegen import Generated, Reusing, build_function, compile_generated, preamble, \
    program_text, returned, start, with_pool, write_steps
from .kernel_cache import njit_module
from .lower_numpy import NumPy
from ..rules.lowering import lowering
from .passes import SIMD_SIZE, accumulations, buffers, dtype_of as _dtype, in_place, plan, \
    schedule, users

__all__ = ["build_fused", "numba_or_none", "fuse_default", "lowering", "UnfusedWarning",
           "warn_unfused", "SIMD_SIZE"]

# kernel source -> Numba dispatcher, while a program holds it (kernel_cache keeps the
# recently used alive): one compilation per source and types, none kept for dead programs
_KERNELS = weakref.WeakValueDictionary()
_NUMBA = []


def numba_or_none():
    """The numba module, or None when it is not installed (imported on first use only)."""
    if not _NUMBA:
        try:
            import numba
            from numba.np.ufunc_db import get_ufuncs
            _NUMBA.append((numba, frozenset(get_ufuncs())))
        except Exception:  # not installed, or broken against this NumPy
            _NUMBA.append(None)
    return _NUMBA[0]


class UnfusedWarning(RuntimeWarning):
    """A compiled program runs part of its work unfused: a primitive in it has no Numba
    lowering (``python -m wengert.coverage --compile`` lists which do)."""


_WARNED = set()  # primitives already warned about in this process
_WARN_LOCK = threading.Lock()


def warn_unfused(names, what):
    """One ``UnfusedWarning`` naming the primitives of ``names`` not warned about yet."""
    with _WARN_LOCK:
        new = sorted(set(names) - _WARNED)
        _WARNED.update(new)
    if new:
        warnings.warn(
            f"wg.compile: {what} runs unfused: no Numba lowering for {', '.join(new)} "
            "(the results are the same, only slower). `python -m wengert.coverage --compile` "
            "lists the primitives that have one; an elementwise primitive gets one from a "
            "`Lowering(scalar=...)` form in its declaration (rules/lowering.py).",
            UnfusedWarning, stacklevel=4)


def fuse_default():
    """Fuse unless ``WENGERT_FUSE=0`` or Numba is missing."""
    return os.environ.get("WENGERT_FUSE", "1") != "0" and numba_or_none() is not None


def build_fused(g, reuse_buffers=False):
    """A function for ``g`` with fused kernels and in-place temporaries, or None (no Numba);
    ``reuse_buffers``: its NumPy calls' temporaries kept between calls (pool.py).  The passes
    decide (scatter fusion, kernels, their schedule, in-place updates, buffers), the emitter
    writes each program once (lower.py); here the kernels are compiled and the function
    assembled."""
    nb = numba_or_none()
    if nb is None:
        return None
    numba, supported = nb
    em, live, names, params, unpack_lines, name = preamble(g)
    fused, chain_end, _ = accumulations(g, live)
    kernels = plan(g, live, fused, supported)
    key, stage, groups, backed_off = budget.fit(g, live, fused, *kernels)  # compile budget
    kernels = (key, stage, groups)
    missing = {n.prim.name for i, n in enumerate(g.nodes) if live[i] and n.kind == "op"
               and n.prim.ufunc is not None and _dtype(n.value) is not None
               and lowering(n.prim, supported) == "none"}
    if missing:
        warn_unfused(missing, "elementwise work of this program")
    uses = users(g, live)
    steps = schedule(g, live, fused, kernels, uses)
    inplace = in_place(g, live, steps, fused, uses)
    # Python floats raise where NumPy gives inf or nan: then NumPy's program (``exact``)
    exact = em.bind(build_function(g), f"{g.name}_exact") \
        if any(s[0] == "python" for s in steps) else None

    out = buffers(g, live, steps, fused, inplace, uses) if reuse_buffers else {}
    d = NumPy(False, out, uses, _kernel)
    w = start(g, Reusing(g, em, d, fused, chain_end, inplace, twin=bool(out)), names, live)
    write_steps(w, d, steps, fused)
    ret = returned(g, w, em)
    sig = ", ".join(params)
    gen = Generated(program_text(name, sig, unpack_lines, w.lines, ret, exact), em.ns, name)
    with_pool(gen, g, out, w.lines, em, names, sig, unpack_lines, ret, exact)
    fn = compile_generated(gen, "wengert fused graph")
    fn.kernel_sources = d.kernel_sources
    fn.folded_gathers = sum(1 for s in steps if s[0] == "kernel" and s[3] is not None)
    fn.backed_off = backed_off
    return fn


def _kernel(src):
    """The compiled kernel of this source: compiled once while in use, and kept on disk
    (kernel_cache); threads that raced here each compiled one: every caller gets the first
    one kept."""
    kern = _KERNELS.get(src)
    if kern is None:
        kern = _KERNELS.setdefault(src, njit_module([("kernel", src)])["kernel"])
    return kern
