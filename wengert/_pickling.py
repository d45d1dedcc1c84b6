"""Transformed functions that travel to other processes (pickle, cloudpickle).

A function a transform returns is a closure over the user's function: pickle would save it
by the name ``functools.wraps`` gave it, find the user's function under that name, and
refuse ("not the same object"). ``Transformed`` keeps the closure together with its recipe
(the transform, the user's function, the options) and pickles as the recipe, so it travels
whenever the user's function does: by reference for one defined at a module's top level
(plain pickle), by value for a lambda or a closure (cloudpickle). The receiver applies the
transform again; nothing computed for the sender's arguments goes along.
"""
import functools
import sys
import types

__all__ = ["Transformed", "travels", "importable"]


class Transformed:
    """A function returned by a transform; calls go to ``fn``, pickling to the recipe."""

    def __init__(self, fn, transform, args, kwargs):
        functools.update_wrapper(self, fn)
        self.__wrapped__ = args[0] if args else fn  # the user's function
        self._fn = fn
        self._recipe = (transform, args, kwargs)

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __get__(self, obj, objtype=None):  # a class attribute binds like a function
        return self if obj is None else types.MethodType(self, obj)

    def __reduce__(self):
        return _apply, self._recipe

    def __repr__(self):
        return f"<{self._recipe[0].__name__} of {getattr(self, '__qualname__', self._fn)!s}>"


def _apply(transform, args, kwargs):
    return transform(*args, **kwargs)


def travels(fn, transform, *args, **kwargs):
    """``fn``, made by ``transform(*args, **kwargs)``, as a function that pickles."""
    return Transformed(fn, transform, args, kwargs)


def importable(obj):
    """Is ``obj`` found under its own module and qualified name (so pickle saves it by
    reference)?"""
    obj_ = sys.modules.get(getattr(obj, "__module__", None) or "")
    for part in str(getattr(obj, "__qualname__", "<")).split("."):
        obj_ = getattr(obj_, part, None)
    return obj_ is obj
