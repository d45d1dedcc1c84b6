"""Array bookkeeping every engine and rule shares: shapes, dtypes, zeros, broadcasting.

These helpers take any array: a plain NumPy one takes NumPy's own (fast) route, and a
traced value takes the same calls through NumPy's protocols (its methods ``.sum``,
``.reshape``, ``.real``, and NEP 18 for ``np.broadcast_to``), which lead to wengert's
primitives, so what they compute is recorded and differentiable again. That is why this
module names no primitive and imports nothing from wengert: it is the lowest floor.
"""
import sys

import numpy as np

__all__ = ["shape_of", "ndim_of", "dtype_of", "zeros_like_value", "broadcast_view", "sum_to",
           "unbroadcast", "real_for_real", "fill_tangent",
           "underneath", "is_foreign", "zeros", "ones", "asarray", "copy_of", "reshape",
           "check_library", "host_values", "implements", "chunks_of", "add_at_flat", "times"]


def shape_of(x):
    if type(x) is float:
        return ()
    return getattr(x, "shape", ())  # one lookup: a tracer's shape is a property


def ndim_of(x):
    if type(x) is float:
        return 0
    return getattr(x, "ndim", 0)


def dtype_of(x):
    if hasattr(x, "dtype"):
        return x.dtype
    return np.result_type(x)


def zeros_like_value(x):
    """A zero with ``x``'s shape and dtype (a plain value even if ``x`` is traced), in
    ``x``'s array library."""
    v = underneath(x)
    if isinstance(v, float):
        return 0.0
    return zeros(shape_of(x), dtype_of(x), like=v)


# -- arrays of other libraries (CuPy, Dask, ...): values stay in their library -------------
# An array that is not NumPy's is "foreign". It carries values when its library speaks NumPy's
# protocols (NEP 13/18: np.sin(x), np.zeros_like(x) and x.reshape(...) come back in its own
# type). What this module makes for it -- zeros for adjoints, seeds -- is made by its library
# (np.zeros_like(x, shape=...) dispatches there), never by NumPy and converted: a Dask value
# stays lazy and chunked, a CuPy value on its device.
_NUMPY_TYPES = (float, int, complex, bool, np.ndarray, np.generic)


def underneath(x):
    """The plain value under every trace (without importing the tracers: floor 0)."""
    while hasattr(x, "_trace"):
        x = x.value
    return x


def is_foreign(v):
    """``v`` (a plain value) is an array of a library other than NumPy."""
    return not isinstance(v, _NUMPY_TYPES) and v is not None and hasattr(v, "shape") \
        and hasattr(v, "dtype")


def _like(like):
    v = underneath(like) if like is not None else None
    return v if v is not None and is_foreign(v) else None


def zeros(shape, dtype=float, like=None):
    """``np.zeros(shape, dtype)`` in the array library of ``like`` (NumPy if plain)."""
    v = _like(like)
    if v is None:
        return np.zeros(shape, dtype)
    return np.zeros_like(v, shape=shape, dtype=dtype)


def ones(shape, dtype=float, like=None):
    """``np.ones(shape, dtype)`` in the array library of ``like`` (NumPy if plain)."""
    v = _like(like)
    if v is None:
        return np.ones(shape, dtype)
    return np.ones_like(v, shape=shape, dtype=dtype)


def asarray(a, like=None):
    """``a`` as an array: a foreign array as it is; NumPy data (a seed, a list) moved into
    the library of ``like`` when that is foreign (NEP 35 ``like=``), else NumPy's."""
    if is_foreign(a) or hasattr(a, "_trace"):
        return a
    v = _like(like)
    if v is None:
        return np.asarray(a)
    return np.asarray(a, like=v)


def copy_of(x):
    """A copy of ``x`` that owns its data, in its own library (``np.array(x, copy=True)``
    would convert a foreign array to NumPy)."""
    return x.copy() if is_foreign(x) else np.array(x, copy=True)


def add_at_flat(pos, weights, size):
    """Sums of ``weights`` at flat positions ``pos`` in ``size`` slots (repeats add up), in
    the weights' library: ``bincount``, whose weights are real, so complex ones are summed
    in two parts. A chunked library (Dask) counts chunk by chunk: the positions take the
    weights' chunks."""
    c = chunks_of(weights)
    if c is not None and chunks_of(pos) != c:
        pos = pos.rechunk(c)
    if dtype_of(weights).kind == "c":
        return np.bincount(pos, weights.real, size) + 1j * np.bincount(pos, weights.imag, size)
    return np.bincount(pos, weights, size)


def reshape(x, shape, order="C"):
    """``x.reshape(shape, order=order)``; ``order`` is passed only when it is not "C", as
    libraries that only know C order (Dask) take no such keyword."""
    if order == "C":
        return x.reshape(shape)
    return x.reshape(shape, order=order)


def check_library(x, what):
    """Raise ``TypeError`` for an array of a library wengert cannot carry: one without
    NumPy's dispatch protocol (NEP 18, ``__array_function__``), e.g. array-API-only arrays,
    whose ``np.sin(x)`` would convert to NumPy or fail. ``what`` names the argument."""
    v = underneath(x)
    if not is_foreign(v) or hasattr(v, "__array_function__"):
        return
    lib = (type(v).__module__ or "?").split(".")[0]
    if callable(what):
        what = what()
    raise TypeError(
        f"{what} is an array of {lib} ({type(v).__module__}.{type(v).__name__}), which does not "
        f"implement NumPy's dispatch protocols (NEP 13/18: __array_ufunc__, "
        f"__array_function__), so wengert cannot keep its values in {lib}. Supported: NumPy "
        f"arrays and floats, and arrays of libraries implementing NEP 13/18 (CuPy, Dask). "
        f"Convert it first, e.g. np.asarray(x) (or cupy.asarray / dask.array.asarray).")


def _library(v):
    return (type(v).__module__ or "?").split(".")[0]


# libraries whose arrays live in host memory: reading their values copies nothing
_IN_MEMORY = {"pandas"}
_TO_HOST = {"dask": "call .compute() on it (or persist it and compute the small part you need)",
            "cupy": "call .get() (or cupy.asnumpy) on it"}


def host_values(x, what, why="to know its output's shape"):
    """``x`` unchanged when its values are NumPy's (plain or traced); ``TypeError`` when they
    are a foreign array's. Rules whose positions or output shape come from the values (a
    mask's count, unique values, histogram bins) call this before reading them: reading a
    Dask array would ``.compute()`` it, a CuPy array would be copied to the host, both behind
    the user's back (API.md §10), so the user is told to do it where they choose."""
    v = underneath(x)
    if not is_foreign(v):
        return x
    lib = _library(v)
    if lib in _IN_MEMORY:  # already host memory: NumPy reads it as it is (a mask in lifelines)
        return x
    fix = _TO_HOST.get(lib, "convert it to NumPy first (np.asarray)")
    raise TypeError(
        f"{what} needs the values of its argument in memory ({why}), and they are an array of "
        f"{lib} ({type(v).__module__}.{type(v).__name__}): wengert does not copy them to the "
        f"host or compute them behind your back. If they fit in memory, {fix} first (and move "
        f"the result back into {lib} if you need to).")


def implements(x, func, what):
    """``x`` unchanged when its library runs ``func`` itself; else ``host_values``'s
    TypeError. Dask answers a NumPy function it lacks (np.argsort) by computing its
    arguments and calling NumPy: a rule that would dispatch there must ask first."""
    v = underneath(x)
    if is_foreign(v) and _library(v) == "dask" and not _dask_has(func):
        name = func.__module__.replace("numpy", "np", 1) + "." + func.__name__
        host_values(x, what, f"{name}, which Dask does not implement")
    return x


def _dask_has(func):
    """Dask's own lookup (dask.array.Array.__array_function__): a function of its namespace
    named as NumPy's, other than NumPy's itself."""
    module = sys.modules["dask.array"]  # loaded: a Dask array was met
    for sub in func.__module__.split(".")[1:]:
        module = getattr(module, sub, None)
        if module is None:
            return False
    f = getattr(module, func.__name__, None)
    return f is not None and f is not func


_SCALARS = (float, np.float64, np.float32)


def chunks_of(x):
    """The chunks of a chunked array (Dask) under ``x``, else None."""
    v = underneath(x)
    c = getattr(v, "chunks", None) if is_foreign(v) else None
    return c if type(c) is tuple else None


def broadcast_view(x, shape, chunks=None):
    """``np.broadcast_to(x, shape)``, read-only as NumPy's; a traced ``x`` is dispatched.

    np.broadcast_to's checks cost 2 µs; a zero-stride view of a contiguous array
    takes 0.2 µs, and the engines broadcast cotangents and tangents all the time.
    ``chunks`` (a Dask layout of ``shape``) chunks the new and stretched axes of a Dask ``x``
    as the array the result will meet: Dask would give each one chunk of its full length,
    then split it to match (a sum's cotangent over 2·10⁷ rows as one 160 MB chunk).
    """
    if chunks is not None and chunks_of(x) is not None:
        return _dask_broadcast(x, shape, chunks)
    if type(x) in _SCALARS:
        x = np.asarray(x)
    if type(x) is np.ndarray and type(shape) is tuple and x.flags.c_contiguous \
            and x.dtype.kind in "fciub":
        k = len(shape) - x.ndim
        if k >= 0:
            strides = [0] * k
            for d, n, st in zip(x.shape, shape[k:], x.strides):
                if d == n:
                    strides.append(st)
                elif d == 1:
                    strides.append(0)
                else:
                    break
            else:
                view = np.ndarray(shape, x.dtype, x, 0, strides)
                view.flags.writeable = False
                return view
    return np.broadcast_to(x, shape)


def _dask_broadcast(x, shape, chunks):
    """Dask's broadcast as a blockwise map, which Dask fuses into the elementwise tasks
    that read it (a cotangent's ``g / n * s``). ``dask.array.broadcast_to`` makes a task
    per chunk hanging off the one block of ``x``: the distributed scheduler hands such
    tasks out like data loads, to any worker, so a chunk's backward waited for a piece
    made elsewhere (benchmarks/bench_dask.py: 70 transfers per gradient against 40 by
    hand, and a third chunk per worker in memory)."""
    shape = tuple(shape)
    k = len(shape) - x.ndim
    if k < 0 or len(chunks) != len(shape) or any(sum(c) != d for c, d in zip(chunks, shape)):
        return np.broadcast_to(x, shape)  # a layout of another shape: Dask's own choice
    own = [c if old == 1 and new != 1 else bd  # kept axes keep x's chunks (Dask requires it)
           for bd, c, old, new in zip(x.chunks, chunks[k:], x.shape, shape[k:])]
    new = tuple(range(k)) + tuple(k + i for i, (old, n) in enumerate(zip(x.shape, shape[k:]))
                                  if old == 1 and n != 1)
    dask_array = sys.modules["dask.array"]  # loaded: x is a Dask array
    if len(new) > k:  # stretched axes: map_blocks inserts them, as the new ones
        x = dask_array.squeeze(x, axis=tuple(a - k for a in new[k:]))
    out = tuple(chunks[:k]) + tuple(own)

    def block(b, block_info=None):  # a closure, pickled by value: workers need no wengert
        return np.broadcast_to(np.expand_dims(b, new), block_info[None]["chunk-shape"])
    return dask_array.map_blocks(
        block, x, chunks=out, new_axis=list(new) or None, dtype=x.dtype,
        meta=np.empty_like(x._meta, shape=(0,) * len(shape)),
        name="broadcast_to-" + sys.modules["dask.base"].tokenize(x, shape, out))


def sum_to(g, xs):
    """Sum ``g`` down to shape ``xs`` (NumPy's broadcasting, undone)."""
    gs = shape_of(g)
    lead = len(gs) - len(xs)
    axes = tuple(range(lead))
    for i, d in enumerate(xs):
        if d == 1 and gs[lead + i] != 1:
            axes += (lead + i,)
    if axes:
        g = g.sum(axis=axes)  # NumPy's method; a traced value's records the sum primitive
    return g if shape_of(g) == tuple(xs) else g.reshape(xs)


# -- broadcasting: what the core does for every primitive declared ``broadcasting=True`` ---
def unbroadcast(g, x, ans):
    """Sum a cotangent of ``ans`` back to ``x``'s shape."""
    tx = type(x)
    if tx is type(g) and (tx is float or (tx is np.ndarray and x.shape == g.shape
                                          and (g.dtype.kind != "c" or x.dtype.kind == "c"))):
        return g  # the common cases, quickly
    gv = g
    while hasattr(gv, "_trace"):  # traced (forward over reverse): its dtype, underneath
        gv = gv.value
    xs = shape_of(x)  # a tracer's own shape (under wg.vmap the values underneath are batched)
    if shape_of(g) == xs and (type(gv) is float or type(gv) is not complex
                               and getattr(gv, "dtype", _FLOAT).kind != "c"):
        return g  # of the right shape, and real
    g = real_for_real(g, x)
    if shape_of(g) == xs:
        return g
    return sum_to(g, xs)


_FLOAT = np.dtype(float)


def real_for_real(g, x):
    """A real argument's cotangent is real (``x * 1j``: JAX's complex convention)."""
    if type(g) is complex:
        return g if isinstance(x, complex) or getattr(x, "dtype", _FLOAT).kind == "c" \
            else g.real
    dg = getattr(g, "dtype", None)
    if dg is None or dg.kind != "c":
        return g
    if isinstance(x, complex) or getattr(x, "dtype", _FLOAT).kind == "c":
        return g
    return g.real  # a traced value's records the real primitive


def times(t, p):
    """``t * p``: a tangent (or cotangent) times a partial. A partial of shape ``(..., 1)``
    against a batch of tangents ``(..., 3)`` is repeated along that axis first: NumPy's
    inner loop would otherwise run 3 steps with a zero stride, ~3x slower than on the
    repeated partial, an array the size of one primal, not of the batch (bundle
    adjustment's 14-direction sparse Jacobian, issue 32)."""
    if type(t) is np.ndarray and type(p) is np.ndarray and p.ndim and t.ndim >= p.ndim \
            and p.shape[-1] == 1 and 2 <= t.shape[-1] <= 8 and t.size >= 4096:
        p = np.repeat(p, t.shape[-1], axis=-1)
    return t * p


def fill_tangent(t, ans):
    """Broadcast a tangent that only some arguments fed (e.g. ``x + c``) to ``ans``'s shape."""
    if t is None:
        return t
    a_s = shape_of(ans)
    if shape_of(t) == a_s:
        return t  # the common case, quickly
    return broadcast_view(t, a_s)  # a traced one's records broadcast_to
