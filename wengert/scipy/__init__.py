"""``wengert.scipy``: differentiable parts of SciPy (``special``, ``linalg``, ``stats``, ``signal``;
and SciPy's solvers, ``optimize``, ``sparse.linalg``, ``integrate``).

The solvers load on first use: they stand on the transforms (their rules call ``wg.jvp`` and
``wg.vjp`` of the user's functions), a floor above this package's, so importing them here
would make a circle.
"""
import importlib as _importlib

from . import linalg, signal, special, stats  # noqa: F401

_SOLVERS = ("optimize", "sparse", "integrate")


def __getattr__(name):
    if name in _SOLVERS:
        return _importlib.import_module(f"wengert.scipy.{name}")
    raise AttributeError(f"module 'wengert.scipy' has no attribute {name!r}")
