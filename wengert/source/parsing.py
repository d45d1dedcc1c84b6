"""From a function object to its syntax tree: its source lines (with :mod:`inspect`) and
the names it can see (globals, closure cells, builtins)."""
from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
import types

from .errors import SourceError

__all__ = ["parse_function", "namespace_of"]


def parse_function(f):
    """Parse a function object's source; returns (FunctionDef, filename, line offset)."""
    if not isinstance(f, types.FunctionType):
        raise TypeError(f"wengert.source needs a Python function, got {type(f).__name__}")
    if f.__name__ == "<lambda>":
        raise SourceError("a lambda", f.__code__.co_firstlineno, f.__code__.co_filename,
                          "define the function with def")
    try:
        lines, first = inspect.getsourcelines(f)
    except (OSError, TypeError) as e:
        raise SourceError(f"{f.__qualname__}", None, None,
                          f"its source is not available ({e})") from None
    src = textwrap.dedent("".join(lines))
    tree = ast.parse(src)
    fdef = tree.body[0]
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise SourceError("an async function", first, f.__code__.co_filename)
    if not isinstance(fdef, ast.FunctionDef):
        raise SourceError(f"{f.__qualname__}", first, f.__code__.co_filename,
                          "its source is not a def statement")
    return fdef, f.__code__.co_filename, first - 1


def namespace_of(f):
    """The names a function can see: its globals, closure cells and builtins."""
    ns = dict(vars(builtins))
    ns.update(f.__globals__)
    if f.__closure__:
        for name, cell in zip(f.__code__.co_freevars, f.__closure__):
            try:
                ns[name] = cell.cell_contents
            except ValueError:
                pass
    return ns
