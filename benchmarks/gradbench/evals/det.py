"""det: the determinant by expansion by minors (along the first row, recursively), and its gradient.

The minors are shared: the determinant of the rows ``k..ℓ-1`` restricted to a set of
columns is computed once per column set, level by level, so the work is ℓ·2^ℓ products
instead of ℓ!; each level is one gather-multiply-sum over all minors of that size.
"""
import functools

import numpy as np

import wengert as wg
import wengert.numpy as wnp

from ._common import array, maybe_compile, to_float, to_list


@functools.cache
def _levels(ell):
    """For each minor size s ≥ 2: (row, columns, child minors, signs) as index arrays."""
    position = {}
    for s in range(1, ell + 1):
        masks = [m for m in range(1 << ell) if bin(m).count("1") == s]
        position.update({m: i for i, m in enumerate(masks)})
    levels = []
    for s in range(2, ell + 1):
        masks = [m for m in range(1 << ell) if bin(m).count("1") == s]
        cols = np.array([[c for c in range(ell) if m >> c & 1] for m in masks])
        child = np.array([[position[m ^ (1 << c)] for c in row] for m, row in zip(masks, cols)])
        sign = np.where(np.arange(s) % 2 == 0, 1.0, -1.0)
        levels.append((ell - s, cols, child, sign))
    first = np.array([c for m in range(1 << ell) if bin(m).count("1") == 1
                      for c in range(ell) if m >> c & 1])
    return first, levels


def det_by_minors(a, ell):
    A = wnp.reshape(a, (ell, ell))
    first, levels = _levels(ell)
    minors = A[ell - 1][first]               # 1 × 1 minors of the last row
    for row, cols, child, sign in levels:
        minors = wnp.sum(sign * A[row][cols] * minors[child], axis=1)
    return minors[0]


def functions(options):
    prep = lambda raw: (array(raw["A"]), int(raw["ell"]))
    return {"primal": (prep, maybe_compile(options, det_by_minors), to_float),
            "gradient": (prep, maybe_compile(options, wg.grad(det_by_minors)), to_list)}
