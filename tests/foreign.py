"""A NEP 13/18 test double: an array library that is not NumPy, runnable without a GPU.

``Foreign`` wraps a NumPy array and answers NumPy's protocols the way CuPy and Dask do
(``__array_ufunc__``, ``__array_function__``, ndarray-like methods returning its own type,
0-d results of reductions stay ``Foreign``), records every NumPy function called on it, and
raises :class:`Converted` on any conversion to NumPy or to a Python number (``__array__``,
``float``, ``int``, ``bool``, ``.item()``, ``.tolist()``): the conversions CuPy refuses
(device-to-host) and Dask would pay with a ``.compute()``. A result that is a NumPy array
where a ``Foreign`` was expected shows a value that left its library.
"""
import numbers

import numpy as np


class Converted(AssertionError):
    """Something converted a foreign array to NumPy or to a Python number."""


CALLS = []  # names of the NumPy functions and ufuncs called on Foreign values
STRICT = {"on": False}  # True: refuse NumPy arrays as operands, as CuPy does (no implicit transfer)


def _unwrap(x):
    if type(x) is Foreign:
        return x._a
    if type(x) in (list, tuple):
        return type(x)(_unwrap(v) for v in x)
    if type(x) is dict:
        return {k: _unwrap(v) for k, v in x.items()}
    return x


def _wrap(x):
    if type(x) is np.ndarray or isinstance(x, np.generic) and x.dtype.kind in "biufc":
        return Foreign(x)
    if type(x) in (list, tuple):
        return type(x)(_wrap(v) for v in x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # np.linalg's results (SVDResult...)
        return type(x)(*(_wrap(v) for v in x))
    return x


def _known(x):
    """Types Foreign handles itself; anything else (a tracer) gets NotImplemented."""
    if type(x) in (list, tuple):
        return all(_known(v) for v in x)
    if STRICT["on"] and type(x) is np.ndarray:
        raise Converted(f"a NumPy array {x.shape} met a Foreign one (CuPy refuses the mix)")
    return isinstance(x, (Foreign, np.ndarray, np.generic, numbers.Number, str, slice,
                          type(None), type(Ellipsis), np.dtype, type))


class Foreign(np.lib.mixins.NDArrayOperatorsMixin):
    __slots__ = ("_a",)
    __array_priority__ = 20

    def __init__(self, a):
        self._a = np.asarray(a) if type(a) is not np.ndarray else a

    # -- what NumPy's protocols see -------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not all(_known(v) for v in inputs) or not all(_known(v) for v in kwargs.values()):
            return NotImplemented
        CALLS.append(ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}")
        out = getattr(ufunc, method)(*_unwrap(inputs), **_unwrap(kwargs))
        return _wrap(out)

    def __array_function__(self, func, types, args, kwargs):
        if not all(issubclass(t, (Foreign, np.ndarray)) for t in types):
            return NotImplemented
        CALLS.append(func.__name__)
        return _wrap(func(*_unwrap(args), **_unwrap(kwargs)))

    # -- conversions: all refused ---------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise Converted("np.asarray (__array__) on a Foreign array")

    def __float__(self):
        raise Converted("float() on a Foreign array")

    def __int__(self):
        raise Converted("int() on a Foreign array")

    def __complex__(self):
        raise Converted("complex() on a Foreign array")

    def __bool__(self):
        raise Converted("bool() on a Foreign array")

    def __index__(self):
        raise Converted("index() on a Foreign array")

    def item(self, *args):
        raise Converted(".item() on a Foreign array")

    def tolist(self):
        raise Converted(".tolist() on a Foreign array")

    # -- ndarray-like attributes ----------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    T = property(lambda self: Foreign(self._a.T))
    mT = property(lambda self: Foreign(np.swapaxes(self._a, -1, -2)))
    real = property(lambda self: Foreign(self._a.real))
    imag = property(lambda self: Foreign(self._a.imag))

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (Foreign(r) for r in self._a)

    def __getitem__(self, idx):
        return _wrap(self._a[_unwrap(idx)])

    def __setitem__(self, idx, v):
        self._a[_unwrap(idx)] = _unwrap(v)

    def __getattr__(self, name):  # ndarray's methods: reshape, sum, astype, conj, ...
        if name.startswith("_") or not callable(getattr(np.ndarray, name, None)):
            raise AttributeError(name)

        def method(*args, **kwargs):
            CALLS.append(f".{name}")
            return _wrap(getattr(self._a, name)(*_unwrap(args), **_unwrap(kwargs)))
        return method

    def __repr__(self):
        return f"Foreign({self._a!r})"

    def __hash__(self):
        return id(self)


def to_numpy(x):
    """The test's own look underneath (the library's ``.get()``/``.compute()``)."""
    return x._a if type(x) is Foreign else x
