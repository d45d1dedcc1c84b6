"""The tracer protocol that every engine shares: a trace, its tracers, their liveness.

A :class:`Trace` is one active differentiation (a forward perturbation, a tape, a graph);
its :class:`Tracer` values stand in for arrays while a function runs, and every operation
on one reaches a primitive (``wengert.core``), whose record says how to differentiate it.
NumPy's protocols (Python operators, ndarray methods, NEP 13/18) are those of the engines'
tracers, ``wengert._dispatch.ArrayTracer`` on the namespace floor, which lead to primitives;
a conversion to a plain number or array, which would drop a derivative, is refused here with
what to write instead.
"""
from __future__ import annotations

import dis
import functools
import itertools
import operator
import sys

import numpy as np

from .arrays import check_library, ndim_of, shape_of

__all__ = ["Tracer", "Trace", "EscapedTracerError", "SolverWarning", "DEAD_LEVEL", "new_level",
           "check_live", "check_differentiable", "leaf_dtype", "plain", "holds_tracer", "lift",
           "plain_store_errors"]


_levels = itertools.count(1)


def new_level():
    """A fresh nesting level: later (inner) transforms get higher levels."""
    return next(_levels)


class EscapedTracerError(RuntimeError):
    """A tracer was used after the transform that made it had finished.

    It escaped the function (a global, a list, a closure): its derivative belongs to a
    computation that is over, so any answer computed from it would be wrong."""


class SolverWarning(RuntimeWarning):
    """SciPy reported failure; the derivative was taken at the point it returned anyway."""


# users meet both as wengert.core's (their public home: docs/api.md), and so they are named
EscapedTracerError.__module__ = SolverWarning.__module__ = "wengert.core"


# The level of a finished trace: above every live one, so ``Primitive.__call__`` sends any
# operation that touches one of its tracers to its ``process``, which raises. A dead
# tracer is therefore never taken for an outer transform's constant, and the dispatch
# loop pays nothing for the check.
DEAD_LEVEL = sys.maxsize


class Trace:
    """One active differentiation: a forward perturbation, a tape, a graph."""

    level = 0
    # whether a tracer's value underneath holds a batch of values, one per example (wg.vmap),
    # rather than one: then no single plain value (an index, a branch) can be read off it
    batched = False
    # once the transform that ran it has returned: (transform name, function, live level)
    finished_by = None
    tracer_name = "traced value"

    def process(self, prim, args, params):  # pragma: no cover - interface
        raise NotImplementedError

    # -- liveness --------------------------------------------------------------------------
    def finish(self, transform, fn=None):
        """The transform ``transform`` (e.g. ``"wg.grad"``) of ``fn`` has returned: from now
        on this trace's tracers are dead and using one raises ``EscapedTracerError``."""
        if self.finished_by is None:
            self.finished_by = (transform, fn, self.level)
            self.level = DEAD_LEVEL

    def revive(self):
        """Undo ``finish`` (a ``vjp`` pullback sweeping its tape again); returns the
        transform and function to pass back to ``finish``."""
        by = self.finished_by
        if by is None:
            return None
        self.level = by[2]
        self.finished_by = None
        return by[:2]

    def escaped(self, what=None):
        """The ``EscapedTracerError`` to raise for a use (``what``) of a dead tracer."""
        transform, fn = (self.finished_by or ("a transform", None))[:2]
        made_by = transform if fn is None else f"{transform}({_function_name(fn)})"
        use = f" ({what})" if what else ""
        return EscapedTracerError(
            f"this {self.tracer_name} was made by {made_by}, which has finished: it escaped "
            f"the function (e.g. stored in a global, a list or a closure) and was used "
            f"afterwards{use}, where its derivative would be wrong. Return it from the "
            f"function instead (wg.grad(f, has_aux=True) returns values besides the "
            f"gradient), or keep its plain value, x.value.")


def _function_name(fn):
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def check_live(x, what):
    """Raise ``EscapedTracerError`` if ``x`` or a tracer under it is dead; ``what`` says
    where it was met, or a function giving that. For boundaries, not every operation."""
    while isinstance(x, Tracer):
        tr = x._trace
        if tr.finished_by is not None:
            raise tr.escaped(what() if callable(what) else what)
        x = x.value


class Tracer:
    """A value being watched by a trace.  Operators dispatch to primitives."""

    __slots__ = ("__weakref__",)  # weak references: wengert.numpy tracks views for x[i] = v
    __array_priority__ = 1000  # make ndarray's binary operators defer to us

    # -- what engines provide -------------------------------------------------
    # .value : the primal; ._trace : the Trace that owns this tracer

    # -- array-like attributes ------------------------------------------------
    @property
    def shape(self):
        return shape_of(self.value)

    @property
    def ndim(self):
        return ndim_of(self.value)

    @property
    def size(self):
        return int(np.size(self.value))

    @property
    def dtype(self):
        v = self.value
        return v.dtype if hasattr(v, "dtype") else np.result_type(v)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d traced value")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d traced value")
        for i in range(self.shape[0]):
            yield self[i]

    def __bool__(self):
        return bool(self.value)

    # -- conversions to Python numbers ------------------------------------------------
    # A float value would lose its derivative: refused, with what to write instead. A
    # boolean or integer value has none to lose (a mask, a count): converted, as NumPy
    # converts it, through ``_converted``, where a graph being traced records a guard.
    def __float__(self):
        return self._number(float, sys._getframe(1))

    def __complex__(self):
        return self._number(complex, sys._getframe(1))

    def _number(self, how, frame):
        """``float()``/``complex()`` of this value, converted in ``frame``."""
        if _integral(self):
            return self._converted(how)
        if self._reads_numbers() and not _stores(frame):  # a[i] = v: refused in every engine
            return self._read_number(how)
        raise _conversion_error(frame, _FLOAT_MESSAGE, "a plain number", self)

    def __int__(self):
        if _integral(self):
            return self._converted(int)
        raise _conversion_error(sys._getframe(1), "int() of a traced value drops its "
                                "derivative; use wnp.floor(x) or x.value if the integer "
                                "really is not differentiated.")

    def __index__(self):
        if _integral(self):
            return self._converted(operator.index)
        raise _conversion_error(sys._getframe(1), "a traced value cannot be used as an index "
                                "or size; use x.value if the integer really is not "
                                "differentiated.")

    def item(self, *args):
        """The Python number inside (``x.item()``, as NumPy's): an explicit request for it,
        like ``x.value``, so its derivative is not followed."""
        return self._converted(_item, *args)

    def _reads_numbers(self):
        """Whether ``float()`` of this float value may give the example's number: only a
        value no derivative reaches, inside ``wg.compile``'s trace (graph/trace.py)."""
        return False

    def _converted(self, how, *args):
        """``how(value, *args)``: a Python number read off this tracer's value."""
        v = self.value
        if isinstance(v, Tracer):
            return v._converted(how, *args)
        return how(v, *args)

    def __hash__(self):
        return id(self)

    def __array__(self, dtype=None, copy=None):
        # a mask, counts, or integers asked for (np.asarray(x, dtype=int), as x.astype(int)):
        # no derivative to lose, NumPy's array of them (guarded under tracing)
        if _integral(self) or (dtype is not None and np.dtype(dtype).kind in "biu"):
            return self._converted(_as_array, dtype, copy)
        raise _conversion_error(sys._getframe(1), _ARRAY_MESSAGE, "a plain NumPy array",
                                self)

    # -- what a conversion error says about the NumPy or SciPy function that converted, if one
    # -- did: the engines' tracers (wengert._dispatch.ArrayTracer, with NumPy's protocols) say
    @staticmethod
    def _conversion_message(frame, generic, into):
        return generic


def _integral(x):
    """Whether a tracer's value is boolean or integer: no derivative to lose."""
    return x.dtype.kind in "biu"


def _item(v, *args):
    return np.asarray(v).item(*args)


def _as_array(v, dtype, copy):
    return np.array(v, dtype=dtype, copy=copy)


def _stores(frame):
    """Whether ``frame`` is executing ``a[i] = v`` (NumPy converting ``v`` to store it)."""
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] == _STORE_SUBSCR


def _conversion_error(frame, generic, into=None, tracer=None):
    """The ``TypeError`` for a traced value converted to a plain one in ``frame``: ``a[i] = x``
    into a plain array, a SciPy function (``into`` names what it wanted: the ``tracer``'s class
    words it), or ``generic``."""
    if _stores(frame):
        err = TypeError(_STORE_MESSAGE)
        err.stored = True  # NumPy wraps it in its own ValueError: see plain_store_errors
        return err
    if into is None:
        return TypeError(generic)
    return TypeError(type(tracer)._conversion_message(frame, generic, into))


_STORE_SUBSCR = dis.opmap["STORE_SUBSCR"]
_STORE_MESSAGE = (
    "a[i] = v put a traced value v into a plain NumPy array a, which can hold only plain "
    "numbers: v's derivative would be lost. Make the array traced, and the assignment works "
    "and is differentiated: a = wnp.zeros(n, like=v), or a = wnp.zeros_like(x) for a traced "
    "x (np.zeros_like(x) and np.copy(x) of a traced x are traced too); or build the array "
    "from traced values with wnp.stack([...]).")


def plain(x):
    """The primal under every trace (a tracer's ``.value``, until it is not a tracer)."""
    while isinstance(x, Tracer):
        x = x.value
    return x


def holds_tracer(seq):
    """Whether a (nested) list or tuple holds a traced value."""
    for x in seq:
        if isinstance(x, Tracer) or (type(x) in (list, tuple) and holds_tracer(x)):
            return True
    return False


def lift(x):
    """``x``; a (nested) list or tuple holding traced values becomes the traced array NumPy
    would make of it (``wnp.asarray``), so ``wnp.f([x, 2 * x])`` is differentiated where
    NumPy's conversion would call ``__array__`` and drop the derivative."""
    if (type(x) is list or type(x) is tuple) and holds_tracer(x):
        return _stacked(x)
    return x


def _stacked(seq):
    """The traced array of a list holding traced values: its entries (plain lists as NumPy's
    arrays) stacked by ``np.stack``, whose NEP 18 hook on a tracer is wengert.numpy's stack,
    as every NumPy function on a tracer is; nothing here names a primitive."""
    parts = [(_stacked(o) if holds_tracer(o) else np.array(o)) if type(o) in (list, tuple)
             else o if isinstance(o, Tracer) else np.asarray(o) for o in seq]
    return np.stack(parts)


def plain_store_errors(fn):
    """``fn`` (a transform's entry), raising wengert's ``TypeError`` for ``a[i] = x`` into a
    plain array where NumPy raises "setting an array element with a sequence" (it catches
    the conversion's error and keeps it only as the cause, since a tracer is indexable)."""
    @functools.wraps(fn)
    def entry(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as e:
            cause = e.__cause__
            if getattr(cause, "stored", False):
                raise TypeError(str(cause)).with_traceback(e.__traceback__) from None
            raise
    return entry


_FLOAT_MESSAGE = (
    "float() or a math.* function was called on a traced value, which would drop "
    "its derivative. Use wengert.numpy instead (e.g. wnp.sin(x) for math.sin(x)), "
    "or x.value for the plain number without its derivative. If it was stored into a "
    "plain NumPy array (a[i] = x), build the array from traced values with "
    "wnp.stack([...]) or wnp.array([...]), or assign into a traced array instead "
    "(e.g. a = wnp.zeros(n, like=x); a[i] = x).")
_ARRAY_MESSAGE = (
    "a traced value was converted to a plain NumPy array, which would drop its "
    "derivative. Call the wengert.numpy function (wnp.*) or use x.value. To fill an "
    "array with traced values use wnp.stack([...]) / wnp.array([...]), or assign "
    "into a traced array (a = wnp.zeros(n, like=x); a[i] = x). A NumPy function given a "
    "list holding traced values (np.array([x, y]), np.sin([x, y])) converts the list itself: "
    "NumPy dispatches on its arguments, not on what a list holds, so call wengert.numpy's "
    "(wnp.array([x, y]), wnp.sin([x, y]), wnp.r_[x, y]), which stack it.")


# -- input checks ------------------------------------------------------------------------------
def leaf_dtype(x):
    """The dtype of ``x``'s plain value (``None`` for what has none)."""
    while isinstance(x, Tracer):
        x = x.value
    if isinstance(x, (bool, np.bool_)):
        return np.dtype(bool)
    if isinstance(x, int):
        return np.dtype(int)
    if isinstance(x, float):
        return np.dtype(float)
    if isinstance(x, complex):
        return np.dtype(complex)
    return getattr(x, "dtype", None)


def check_differentiable(x, what):
    """Raise ``TypeError`` unless ``x`` is a float or complex (array); ``what`` names it.

    ``what`` may be a function giving the name, so it costs nothing unless needed.
    """
    if type(x) is float or (type(x) is np.ndarray and x.dtype.kind == "f"):
        return  # the common cases, quickly
    if isinstance(x, Tracer):  # nested transforms: an outer tracer, which must be live
        check_live(x, lambda: f"passed to {what() if callable(what) else what}")
    check_library(x, what)  # an array wengert cannot keep in its own library
    dt = leaf_dtype(x)
    if dt is None or dt.kind not in "fc":
        if callable(what):
            what = what()
        kind = "bool" if dt == np.dtype(bool) else (
            "integer" if dt is not None and np.issubdtype(dt, np.integer) else type(x).__name__)
        raise TypeError(
            f"{what} is of {kind} type ({x!r:.60}); only floats and float or complex arrays "
            f"can be differentiated. Pass a float (e.g. 2.0 instead of 2) or cast with "
            f"np.asarray(x, dtype=float).")
