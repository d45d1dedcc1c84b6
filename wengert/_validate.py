"""What every transform checks of what it is given and of what the function returns:
``argnums`` of the right type, and an output made of numbers (``None`` or a string would
otherwise read as a zero derivative)."""
import inspect
import numbers
import reprlib

import numpy as np

from .core import Tracer
from .tree import flatten

__all__ = ["check_argnums", "check_callable", "check_output"]


def check_callable(f, fname):
    """A transform takes a function: say so when it is given something else (a value passed
    where the function goes: ``wg.grad(f(x))``)."""
    if not callable(f):
        raise TypeError(f"{fname} takes a function (a callable), got {type(f).__name__} "
                        f"{reprlib.repr(f)}: pass the function itself, not its value (f, "
                        f"not f(x))")
    return f


def check_argnums(argnums, fname, what="argnums"):
    """``argnums`` must be an int or a tuple/list of ints: say so, instead of the
    "'float' object is not iterable" that iterating a wrong one would raise."""
    def whole(i):
        return isinstance(i, numbers.Integral) and not isinstance(i, (bool, np.bool_))
    if whole(argnums):
        return int(argnums)
    if isinstance(argnums, (tuple, list)) and all(whole(i) for i in argnums):
        return tuple(int(i) for i in argnums)
    got = f"{type(argnums).__name__} {reprlib.repr(argnums)}"
    raise TypeError(f"{fname}: {what} must be an int or a tuple of ints (the positions of "
                    f"arguments, e.g. {what}=0 or {what}=(0, 1)), got {got}")


def _numeric(x):
    """A number, an array of numbers (any array library's) or a tracer of one."""
    return isinstance(x, (Tracer, numbers.Number)) or (
        hasattr(x, "shape") and getattr(getattr(x, "dtype", None), "kind", "?") in "biufc")


def check_output(out, transform):
    """An output that is not numbers (None, a string, a generator) has no derivative: a zero
    would hide the mistake (a forgotten ``return``), so say what came back."""
    if type(out) is float or isinstance(out, Tracer):
        return  # the common cases, quickly
    name = transform[3:] if transform.startswith("wg.") else transform
    if out is None:
        raise ValueError(f"{name}: the function returned None (a missing `return`?); return "
                         "the number or array of numbers to differentiate")
    bad = [x for x in flatten(out)[0] if not _numeric(x)][:1]
    if bad:
        what = f"{type(out).__name__} {reprlib.repr(out)}" + (
            f", which holds {type(bad[0]).__name__} {reprlib.repr(bad[0])}" if bad[0] is not out
            else "") + (" (a generator: return a value, not a `yield`, or wnp.stack a list)"
                        if inspect.isgenerator(bad[0]) else "")
        raise ValueError(f"{name}: the function returned {what}; return a number or an array "
                         "of numbers (or a tuple, list or dict of them)")
