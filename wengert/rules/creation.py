"""Creation: ``array`` and ``asarray`` (a nested list holding traced values is stacked), the
other ``as*array`` conversions, and zeros, ones, full, empty and their ``*_like`` forms.

With ``like=`` a traced array, a created array is a traced constant (zero derivative) that
accepts ``a[i] = v`` with a traced ``v``.  Each public function returns exactly what NumPy
returns when no argument is traced.
"""
import numpy as np

from ..core import Tracer, ndim_of, primitive, shape_of
from . import patterns
from .conversion import _astype, _copy, _dtype, _plain, _traced, astype, copy
from .joining import stack
from .nondiff import concrete
from .shape import broadcast_to, reshape

__all__ = ["array", "asarray", "asanyarray", "ascontiguousarray", "asfortranarray", "require",
           "asarray_chkfinite", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
           "full_like", "empty_like"]


def _stack_nested(obj, dtype):
    if isinstance(obj, (list, tuple)):
        if not _traced(*obj):
            return np.array(obj, dtype=dtype)
        return stack([_stack_nested(o, dtype) for o in obj])
    if isinstance(obj, Tracer):
        return obj if dtype is None else astype(obj, dtype, copy=False)
    return np.asarray(obj, dtype=dtype)


def array(object, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, like=None):
    """``np.array``; a (nested) list holding traced values is stacked."""
    if like is not None and isinstance(like, Tracer) and not _traced(object):
        return _like_traced(np.array(object, dtype=dtype, copy=copy, order=order,
                                     ndmin=ndmin), like)
    if not _traced(object):
        return np.array(object, dtype=dtype, copy=copy, order=order, subok=subok, ndmin=ndmin)
    if isinstance(object, Tracer):
        out = _copy(object) if copy else object
        if dtype is not None and np.dtype(dtype) != _dtype(out):
            out = _astype(out, np.dtype(dtype))
    else:
        out = _stack_nested(object, dtype)
    if ndmin > ndim_of(out):
        out = reshape(out, (1,) * (ndmin - ndim_of(out)) + shape_of(out))
    return out


def asarray(a, dtype=None, order=None, *, like=None, **kwargs):
    if not _traced(a):
        if like is not None and isinstance(like, Tracer):
            return _like_traced(np.asarray(a, dtype=dtype), like)
        return np.asarray(a, dtype=dtype, order=order, **kwargs)
    if isinstance(a, Tracer):
        if dtype is not None and np.dtype(dtype) != _dtype(a):
            return _astype(a, np.dtype(dtype))
        return a
    return _stack_nested(a, dtype)


asanyarray = asarray


def ascontiguousarray(a, dtype=None, *, like=None):
    if not _traced(a):
        return np.ascontiguousarray(a, dtype=dtype)
    return asarray(a, dtype=dtype)


def asfortranarray(a, dtype=None, *, like=None):
    """A traced array has no memory layout of its own: ``asarray``."""
    if not _traced(a):
        return np.asfortranarray(a, dtype=dtype)
    return asarray(a, dtype=dtype)


def require(a, dtype=None, requirements=None, *, like=None):
    """Layout, alignment and ownership requirements are NumPy's business: a traced array
    meets them all; the dtype is honoured."""
    if not _traced(a):
        return np.require(a, dtype, requirements)
    if requirements:
        np.require(np.zeros(0), None, requirements)  # NumPy's error for an unknown one
    return asarray(a, dtype=dtype)


def asarray_chkfinite(a, dtype=None, order=None):
    if not _traced(a):
        return np.asarray_chkfinite(a, dtype, order)
    a = asarray(a, dtype=dtype)
    if _dtype(a).char in np.typecodes["AllFloat"] and not concrete(_all_finite, a):
        raise ValueError("array must not contain infs or NaNs")
    return a


def _all_finite(v):
    return bool(np.isfinite(v).all())


def _like_traced(value, like):
    """A plain ``value`` as a traced array of ``like``'s trace with zero derivative.

    ``a = wnp.zeros(n, like=x)`` makes an array that can take ``a[i] = traced``.
    """
    return _constant(like, value=np.asarray(value))


@primitive(name="constant_like", nargs=1, sparsity=patterns.CONSTANT)  # reads only like's trace
def _constant(like, value):
    return value.copy()  # in a graph, value is the node's: each call gets an array of its own


@_constant.frule(symbolic_zeros=True)
def _constant_jvp(primals, tangents, value):
    return value, None


@_constant.rrule
def _constant_vjp(like, value):
    return value, lambda g: (None,)


def _creator(np_fn):
    def fn(*args, like=None, **kwargs):
        if like is not None and isinstance(like, Tracer):
            return _like_traced(np_fn(*args, **kwargs), like)
        if like is None or isinstance(like, (int, float, complex, np.generic)):
            # a plain number, where NumPy wants an array: the code that makes its buffer
            # like= a traced scalar runs on plain scalars too
            return np_fn(*args, **kwargs)
        return np_fn(*args, like=like, **kwargs)
    fn.__name__ = np_fn.__name__
    fn.__doc__ = (f"``np.{np_fn.__name__}``; with ``like=`` a traced value, the result is a "
                  "traced constant that accepts ``a[i] = v`` with traced ``v`` (with ``like=`` "
                  "a plain number, a plain array).")
    return fn


zeros = _creator(np.zeros)
ones = _creator(np.ones)
empty = _creator(np.zeros)  # zeros: a traced 'empty' never exposes garbage
empty.__name__ = "empty"
_full = _creator(np.full)


def full(shape, fill_value, dtype=None, order="C", **kw):
    """``np.full``; a traced ``fill_value`` gives a traced array (its derivative: the sum)."""
    if _traced(fill_value):
        fill_value = asarray(fill_value)
        return copy(broadcast_to(astype(fill_value, dtype or _dtype(fill_value), copy=False),
                                 tuple(np.atleast_1d(shape))))
    return _full(shape, fill_value, dtype=dtype, order=order, **kw)


def _like(np_fn, a, args, kw):
    """``np_fn(a, *args, **kw)`` (zeros_like, ones_like...): a plain array for a plain ``a``;
    for a traced one a traced constant of its trace, so that ``b = np.zeros_like(x);
    b[i] = v`` works and differentiates, as with NumPy arrays."""
    if not isinstance(a, Tracer):
        return np_fn(a, *args, **kw)
    # from the traced value's own shape: under wg.vmap the value underneath holds a batch
    model = np.broadcast_to(np.zeros((), np.result_type(_plain(a))), shape_of(a))
    return _like_traced(np_fn(model, *args, **kw), a)


def zeros_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """``np.zeros_like``; for a traced ``a``, traced zeros (no derivative) that accept writes."""
    return _like(np.zeros_like, a, (), dict(dtype=dtype, order=order, subok=subok,
                                             shape=shape, **kw))


def ones_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    return _like(np.ones_like, a, (), dict(dtype=dtype, order=order, subok=subok,
                                            shape=shape, **kw))


def empty_like(a, dtype=None, order="K", subok=True, shape=None, **kw):
    """``np.empty_like``; for a traced ``a``, traced zeros: a traced 'empty' never exposes
    garbage (as ``wnp.empty(n, like=x)``)."""
    if isinstance(a, Tracer):
        return _like(np.zeros_like, a, (), dict(dtype=dtype, order=order, subok=subok,
                                                 shape=shape, **kw))
    return np.empty_like(a, dtype=dtype, order=order, subok=subok, shape=shape, **kw)


def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    if _traced(fill_value):
        s = shape_of(a) if shape is None else tuple(np.atleast_1d(shape))
        return copy(broadcast_to(astype(asarray(fill_value), dtype or _dtype(a), copy=False),
                                 s))
    return _like(np.full_like, a, (fill_value,), dict(dtype=dtype, order=order, subok=subok,
                                                       shape=shape, **kw))


# wg.vmap: the constant has the shape of its model, example by example
@_constant.batching
def _constant_batch(args, batched, value):
    """A batch of the constant: each example's own array (``a[i] = v`` writes into it)."""
    n = shape_of(args[0])[0]
    return _constant(args[0], value=np.array(np.broadcast_to(value, (n,) + np.shape(value))))
