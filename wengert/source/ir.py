"""The IR the code generators read: a Wengert list with structured control flow.

* ``Op``      -- ``target = fn(args)`` for a primitive, a user function, a copy...
* ``If``      -- ``if test: body else: orelse`` (the test is kept as text)
* ``Loop``    -- ``for`` / ``while`` with its header kept as text; ``break`` inside
* ``Keep``    -- a statement with no derivative (``print(...)``, an inactive assignment)

Arguments are :class:`Operand` s: a name, or a constant / inactive expression kept as
text.  :func:`rename_temporaries` gives the normaliser's temporaries their letters.
"""
from __future__ import annotations

import re

__all__ = ["Operand", "Op", "If", "Loop", "Keep", "Break", "Function", "rename_temporaries"]


class Operand:
    """A name (``is_name``) or a constant / inactive expression (``text``, ``value``)."""

    __slots__ = ("name", "text", "value", "has_value")

    def __init__(self, name=None, text=None, value=None, has_value=False):
        self.name, self.text, self.value, self.has_value = name, text, value, has_value

    @property
    def is_name(self):
        return self.name is not None

    def src(self):
        return self.name if self.name is not None else self.text

    def __repr__(self):
        return f"Operand({self.src()})"


class Op:
    """``target = ...``.

    kind: ``prim`` (``fn`` a Primitive), ``call`` (a user function, transformed too),
    ``opaque`` (any other differentiable callable: differentiated by the engines),
    ``copy`` (``target = args[0]``), ``sub`` (``target = args[0][index]``),
    ``pack`` (``target = [args...]``, a list or tuple as ``text`` says, passed to a function),
    ``inactive`` (``target = text``: no derivative flows through it).
    """

    __slots__ = ("target", "kind", "fn", "args", "params", "index", "text", "lineno", "fname",
                 "called")

    def __init__(self, target, kind, fn=None, args=(), params=None, index=None, text=None,
                 lineno=None, fname=None, called=False):
        self.target, self.kind, self.fn, self.args = target, kind, fn, list(args)
        self.params = params or {}
        self.index, self.text, self.lineno, self.fname = index, text, lineno, fname
        self.called = called  # written as a call (np.subtract(x, y)), not an operator

    def __repr__(self):
        return f"Op({self.target} = {self.kind} {self.fname or ''} {self.args})"


class If:
    __slots__ = ("test", "body", "orelse", "lineno")

    def __init__(self, test, body, orelse, lineno=None):
        self.test, self.body, self.orelse, self.lineno = test, body, orelse, lineno


class Loop:
    """``header`` is ``for i in range(n)`` or ``while t > 0``; ``target``/``range_args``
    are set for loops over ``range`` (the reverse sweep can then run ``reversed(range(...))``)."""

    __slots__ = ("header", "body", "is_while", "target", "range_args", "lineno", "names")

    def __init__(self, header, body, is_while, target=None, range_args=None, lineno=None,
                 names=None):
        self.header, self.body, self.is_while = header, body, is_while
        self.target, self.range_args, self.lineno = target, range_args, lineno
        self.names = tuple(names) if names is not None else ((target,) if target else ())


class Keep:
    __slots__ = ("text", "lineno", "targets")

    def __init__(self, text, lineno=None, targets=()):
        self.text, self.lineno, self.targets = text, lineno, tuple(targets)


class Break:
    __slots__ = ("lineno",)

    def __init__(self, lineno=None):
        self.lineno = lineno


class Function:
    """A normalised function: parameters, body (IR), the output names, the names used."""

    def __init__(self, name, params, defaults, body, outputs, out_is_tuple, names, namespace,
                 filename, first_line, func=None):
        self.name, self.params, self.defaults = name, params, defaults
        self.body, self.outputs, self.out_is_tuple = body, outputs, out_is_tuple
        self.names = names            # every identifier the generated code must not reuse
        self.namespace = namespace    # name -> object the generated code refers to
        self.filename, self.first_line, self.func = filename, first_line, func


_TMP = re.compile(r"_tmp\d+_")


def rename_temporaries(ir, names):
    """Give the temporaries the letters a, b, c... in the order the program defines them."""
    mapping = {}

    def new(m):
        t = m.group(0)
        if t not in mapping:
            mapping[t] = names.letter()
        return mapping[t]

    def text(t):
        return _TMP.sub(new, t) if t and "_tmp" in t else t

    def walk(body):
        for s in body:
            if isinstance(s, Op):
                for a in s.args:
                    if a.name:
                        a.name = text(a.name)
                    a.text = text(a.text)
                for v in s.params.values():
                    if isinstance(v, Operand) and v.name:
                        v.name = text(v.name)
                s.target = text(s.target)
                s.text = text(s.text)
                s.index = text(s.index)
            elif isinstance(s, If):
                s.test = text(s.test)
                walk(s.body)
                walk(s.orelse)
            elif isinstance(s, Loop):
                s.header = text(s.header)
                s.target = text(s.target)
                s.names = tuple(text(n) for n in s.names)
                if s.range_args:
                    s.range_args = [text(a) for a in s.range_args]
                walk(s.body)
            elif isinstance(s, Keep):
                s.text = text(s.text)
    walk(ir)
    return mapping
