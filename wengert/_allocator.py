"""Put glibc's malloc where it settles once a program has freed one large array.

glibc gives blocks over 128 kB their own mmap until the first such block is freed. That
free raises the mmap threshold to the block's size and the trim threshold to twice it.
Until then, each array of a few hundred kB gets fresh pages from the kernel on every call,
and the pages go back when the array is freed. A 200 × 200 Jacobian's tangents are arrays
of that size. In a fresh interpreter wengert's forward-mode 200 × 200 Jacobian took 670 µs,
against 160 µs once one 8 MB array had come and gone (reverse mode: 1120 against 230 µs).

Most programs reach that state by themselves: they load data, or import PyTorch. This
module gets a fresh interpreter there at import, for one 8 MB allocation that is never
touched, so it costs an mmap and a munmap. With other allocators it changes nothing.
"""
import numpy as np

__all__ = ["settle"]


def settle():
    """Allocate and free one untouched 8 MB array (see the module docstring)."""
    np.empty(1 << 20)
