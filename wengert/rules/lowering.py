"""How compiled code runs a primitive: read off its record, for wengert.graph.fuse (which
nodes a fused kernel computes) and ``python -m wengert.coverage --compile`` (the table)."""
import numpy as np

__all__ = ["LOWERINGS", "lowering"]

LOWERINGS = ("ufunc", "scalar form", "whole-array form", "NumPy call", "none")


def lowering(prim, supported):
    """How compiled code runs ``prim`` (``supported``: the ufuncs Numba compiles):
    ``"ufunc"`` (NumPy's, inside a fused kernel), ``"scalar form"`` (its record's
    ``numba_scalar``: a SciPy function inside a kernel), ``"whole-array form"`` (its record's
    ``numba_form``: inside a compiled scan's Numba step), ``"NumPy call"`` (not elementwise:
    a call between kernels, BLAS for products), or ``"none"``: an elementwise primitive with
    no lowering, which leaves its node unfused (``wg.UnfusedWarning``)."""
    if getattr(prim, "numba_scalar", None) is not None:
        return "scalar form"
    u = prim.ufunc
    if u is not None and u in supported and getattr(np, u.__name__, None) is u:
        return "ufunc"
    if getattr(prim, "numba_form", None) is not None:
        return "whole-array form"
    return "none" if u is not None else "NumPy call"
