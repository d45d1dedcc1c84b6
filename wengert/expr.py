"""A safe parser for arithmetic expressions typed by people: ``x*y + sin(x)``.

The text is parsed with :func:`ast.parse` and then walked against a whitelist;
it is never passed to ``eval`` or ``exec``.  What is accepted:

* numbers (``2``, ``0.5``, ``1e-3``; all become floats), and the constant ``pi``;
* variable names (identifiers; not a function name, no double underscores);
* ``+ - * / ** // %`` and unary ``-`` / ``+``;
* calls of the functions in :data:`FUNCTIONS` with positional arguments only: every
  elementwise function of one or two real numbers in :mod:`wengert.numpy`, read off
  the namespace (a function given a rule there is callable here with nothing more
  to edit), under its own name or any other name NumPy gives it (:data:`ALIASES`).

Everything else (attribute access, subscripts, strings, lambdas, keywords,
comparisons, ...) raises :class:`ExprError` naming the construct and its column.
Inputs are bounded before parsing (length, bracket depth, characters), so
hostile text fails fast.

>>> e = parse("x*y + sin(x)")
>>> e.variables
('x', 'y')
>>> e.evaluate({"x": 0.5, "y": 4.2})
2.579425538604203
>>> print(e.python_source())
def f(x, y):
    return x * y + sin(x)
>>> parse("x.__class__")
Traceback (most recent call last):
...
wengert.expr.ExprError: attribute access ('.__class__') is not allowed (column 2)
"""
from __future__ import annotations

import ast
import itertools
import math
import operator
import warnings

import numpy as np

from . import numpy as wnp
from .core import Primitive
from .rules.lowering import OPERATOR_FORMS

__all__ = ["ExprError", "Expr", "parse", "FUNCTIONS", "MAX_LENGTH", "MAX_BRACKET_DEPTH",
           "MAX_DEPTH"]

MAX_LENGTH = 10_000       # characters
MAX_BRACKET_DEPTH = 100   # nesting of ( [ {, counted before parsing
MAX_DEPTH = 200           # nesting of the syntax tree (operators and calls)


class ExprError(ValueError):
    """A rejected expression: the message is one line, naming what and where."""


def _real_elementwise(p):
    """Is primitive ``p`` a function of one or two real numbers, elementwise?  A NumPy
    ufunc taking floats, or a function declared with a real sampling domain (``round``)."""
    nargs = p.nargs
    if p.multiple_results or nargs not in (1, 2):
        return False
    u = p.ufunc
    if u is not None:
        return u.nout == 1 and u.nin == nargs and "d" * nargs + "->d" in u.types
    return p.domain is not None


def _read_namespace():
    """``FUNCTIONS`` and ``ALIASES`` from wengert.numpy: one entry per primitive, under
    the primitive's own name; the other names the namespace binds it to are aliases."""
    names = {}
    for name, obj in sorted(vars(wnp).items()):
        if not name.startswith("_") and isinstance(obj, Primitive) and _real_elementwise(obj):
            names.setdefault(id(obj), (obj, []))[1].append(name)
    functions, aliases = {}, {}
    for p, bound in names.values():
        own = p.name if p.name in bound else bound[0]
        functions[own] = (own, p.nargs)
        aliases.update((b, own) for b in bound if b != own)
    # the language's own spellings, where the namespace has the function
    for alias, name in (("ln", "log"), ("max", "maximum"), ("min", "minimum")):
        if name in functions:
            aliases[alias] = name
    return functions, aliases


# name -> (wengert.numpy name, number of arguments); other spelling -> name
FUNCTIONS, ALIASES = _read_namespace()
CONSTANTS = {"pi": math.pi}

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos"}
_PY_OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
           "div": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
           "pow": operator.pow, "neg": operator.neg, "pos": operator.pos}
_NUMPY_SEMANTICS = {"div": "divide", "floordiv": "floor_divide", "mod": "remainder",
                    "pow": "power"}
# how each is written: read off the one operator table (rules/lowering.py)
SYMBOLS = {name: OPERATOR_FORMS[op].symbol for name, op in _PY_OPS.items()}


def _symbol_of(op):
    """How an operator of the syntax tree (``ast.MatMult``...) is written, for a message."""
    form = OPERATOR_FORMS.get(getattr(operator, _AST_OPERATOR.get(type(op).__name__, ""), None))
    return form.symbol if form is not None and form.symbol else "?"


_AST_OPERATOR = {"MatMult": "matmul", "BitAnd": "and_", "BitOr": "or_", "BitXor": "xor",
                 "LShift": "lshift", "RShift": "rshift", "Invert": "invert"}
_PREC = {"add": 1, "sub": 1, "mul": 2, "div": 2, "floordiv": 2, "mod": 2, "neg": 3, "pos": 3,
         "pow": 4}
# operations that may give an infinity (or a nan) from finite arguments without
# overflowing (1/0, log(0), x % 0)
_POLES = {"div", "floordiv", "mod", "reciprocal", "log", "log2", "log10", "log1p", "arctanh",
          "pow", "power", "divide", "floor_divide", "remainder", "fmod", "float_power"}

_CONSTRUCTS = {
    ast.Attribute: "attribute access", ast.Subscript: "subscript", ast.Lambda: "lambda",
    ast.ListComp: "list comprehension", ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension", ast.GeneratorExp: "generator expression",
    ast.Starred: "starred argument", ast.List: "list", ast.Tuple: "tuple", ast.Dict: "dict",
    ast.Set: "set", ast.Compare: "comparison", ast.BoolOp: "boolean operator",
    ast.IfExp: "conditional expression", ast.NamedExpr: "assignment expression (:=)",
    ast.JoinedStr: "f-string", ast.FormattedValue: "f-string", ast.Await: "await",
    ast.Yield: "yield", ast.YieldFrom: "yield", ast.Slice: "slice",
}


def _where(node, offset=0):
    col = getattr(node, "col_offset", None)
    return "" if col is None else f" (column {col + 1 + offset})"


class Node:
    """One node of the expression DAG: an input, a constant or an operation."""

    __slots__ = ("id", "kind", "op", "args", "value", "name", "col")

    def __init__(self, id, kind, op=None, args=(), value=None, name=None, col=0):
        self.id, self.kind, self.op, self.args = id, kind, op, tuple(args)
        self.value, self.name, self.col = value, name, col

    @property
    def label(self):
        if self.kind == "input":
            return self.name
        if self.kind == "const":
            return self.name or _fmt_const(self.value)
        return SYMBOLS.get(self.op, self.op)

    def __repr__(self):
        return f"Node({self.id}, {self.kind}, {self.label!r}, args={self.args})"


def _fmt_const(v):
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


def _check_text(text):
    if not isinstance(text, str):
        raise ExprError(f"an expression must be text, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise ExprError(f"expression too long ({len(text)} characters; the limit is "
                        f"{MAX_LENGTH})")
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
            if depth > MAX_BRACKET_DEPTH:
                raise ExprError(f"brackets nested too deeply (more than {MAX_BRACKET_DEPTH}) "
                                f"(column {i + 1})")
        elif ch in ")]}":
            depth -= 1
        elif not (" " <= ch <= "~" or ch in "\t\n\r"):
            what = repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
            raise ExprError(f"unsupported character {what} (column {i + 1}); expressions "
                            "use ASCII letters, digits, operators and brackets")


def parse(text):
    """Parse and validate ``text``; returns an :class:`Expr` or raises :class:`ExprError`."""
    _check_text(text)
    stripped = text.strip()
    offset = len(text) - len(text.lstrip())
    if not stripped:
        raise ExprError("empty expression")
    try:
        with warnings.catch_warnings():  # "invalid decimal literal" and friends: refused below
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = ast.parse(stripped, mode="eval")
    except SyntaxError as e:
        msg = (e.msg or "invalid syntax").splitlines()[0][:120]
        col = f" (column {e.offset + offset})" if e.offset else ""
        raise ExprError(f"syntax error: {msg}{col}") from None
    except (RecursionError, MemoryError):
        raise ExprError(f"expression nested too deeply (the limit is {MAX_DEPTH})") from None
    except ValueError as e:  # e.g. NUL bytes, over-long integer literals
        raise ExprError(f"invalid expression: {str(e).splitlines()[0]}") from None
    return Expr(text, _Builder(offset).build(tree.body))


class _Builder:
    """Walks the syntax tree iteratively against the whitelist, hash-consing nodes."""

    def __init__(self, offset):
        self.offset = offset
        self.nodes = []
        self.memo = {}
        self.variables = []

    def _add(self, key, **kw):
        node_id = self.memo.get(key)
        if node_id is None:
            node_id = len(self.nodes)
            self.nodes.append(Node(node_id, **kw))
            self.memo[key] = node_id
        return node_id

    def fail(self, what, node):
        raise ExprError(f"{what} is not allowed{_where(node, self.offset)}")

    def _attribute(self, node):
        col = node.end_col_offset - len(node.attr) + self.offset  # the '.', 1-based
        raise ExprError(f"attribute access ('.{node.attr}') is not allowed (column {col})")

    def children(self, node, depth):
        """Validate ``node`` itself; return its sub-expressions (in order)."""
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nested too deeply (the limit is {MAX_DEPTH})"
                            f"{_where(node, self.offset)}")
        t = type(node)
        if t is ast.Constant:
            v = node.value
            if isinstance(v, bool) or v is None or v is Ellipsis:
                self.fail(f"the constant {v!r}", node)
            if isinstance(v, complex):
                self.fail(f"the complex number {v!r}", node)
            if isinstance(v, (str, bytes)):
                self.fail("a string", node)
            if not isinstance(v, (int, float)):
                self.fail(f"the constant of type {type(v).__name__}", node)
            return ()
        if t is ast.Name:
            name = node.id
            if "__" in name:
                self.fail(f"the name {name!r} (double underscores)", node)
            if not name.isascii():
                self.fail(f"the non-ASCII name {name!r}", node)
            if name in FUNCTIONS or name in ALIASES:
                raise ExprError(f"'{name}' is a function; call it as {name}(...)"
                                f"{_where(node, self.offset)}")
            return ()
        if t is ast.BinOp:
            if type(node.op) not in _BINOPS:
                sym = _symbol_of(node.op)
                self.fail(f"the operator '{sym}'", node)
            return (node.left, node.right)
        if t is ast.UnaryOp:
            if type(node.op) not in _UNARY:
                sym = "not" if type(node.op) is ast.Not else _symbol_of(node.op)
                self.fail(f"the operator '{sym}'", node)
            return (node.operand,)
        if t is ast.Call:
            f = node.func
            if type(f) is not ast.Name:
                if type(f) is ast.Attribute:
                    self._attribute(f)
                self.fail("calling anything but a function name", node)
            name = ALIASES.get(f.id, f.id)
            if name not in FUNCTIONS:
                raise ExprError(f"unknown function '{f.id}'{_where(node, self.offset)}; "
                                f"known: {', '.join(sorted(FUNCTIONS))}")
            if node.keywords:
                self.fail(f"a keyword argument in {f.id}()", node.keywords[0].value)
            for a in node.args:
                if type(a) is ast.Starred:
                    self.fail("a starred argument", a)
            n = FUNCTIONS[name][1]
            if len(node.args) != n:
                raise ExprError(f"{f.id}() takes {n} argument{'s' if n > 1 else ''}, got "
                                f"{len(node.args)}{_where(node, self.offset)}")
            return tuple(node.args)
        if t is ast.Attribute:
            self._attribute(node)
        what = _CONSTRUCTS.get(t, f"the construct '{t.__name__}'")
        self.fail(what, node)

    def make(self, node, kids):
        col = getattr(node, "col_offset", 0) + self.offset
        t = type(node)
        if t is ast.Constant:
            try:
                v = float(node.value)
            except OverflowError:
                raise ExprError(f"number too large{_where(node, self.offset)}") from None
            if not math.isfinite(v):
                raise ExprError(f"number out of range{_where(node, self.offset)}")
            return self._add(("const", v), kind="const", value=v, col=col)
        if t is ast.Name:
            if node.id in CONSTANTS:
                return self._add(("const", CONSTANTS[node.id]), kind="const",
                                 value=CONSTANTS[node.id], name=node.id, col=col)
            if node.id not in self.variables:
                self.variables.append(node.id)
            return self._add(("input", node.id), kind="input", name=node.id, col=col)
        if t is ast.BinOp:
            op = _BINOPS[type(node.op)]
        elif t is ast.UnaryOp:
            op = _UNARY[type(node.op)]
        else:
            op = ALIASES.get(node.func.id, node.func.id)
        return self._add(("op", op) + tuple(kids), kind="op", op=op, args=kids, col=col)

    def build(self, root):
        # iterative post-order walk: no recursion, whatever the input
        stack = [(root, 0, None)]
        results = {}
        while stack:
            node, depth, kids = stack.pop()
            if kids is None:
                kids = self.children(node, depth)
                stack.append((node, depth, kids))
                for k in reversed(kids):
                    stack.append((k, depth + 1, None))
            else:
                results[id(node)] = self.make(node, [results[id(k)] for k in kids])
        return self.nodes, results[id(root)], tuple(self.variables)


def _plain(v):
    while hasattr(v, "_trace"):
        v = v.value
    return v


class Expr:
    """A validated expression: a DAG of nodes (shared subexpressions once)."""

    def __init__(self, text, built):
        self.text = text
        self.nodes, self.root, self.variables = built

    def __repr__(self):
        return f"Expr({self.text!r})"

    @staticmethod
    def _function(op):
        if op in _NUMPY_SEMANTICS:  # 1/0 is inf, not ZeroDivisionError, as for arrays
            return getattr(wnp, _NUMPY_SEMANTICS[op])
        if op in _PY_OPS:
            return _PY_OPS[op]
        return getattr(wnp, FUNCTIONS[op][0])

    def evaluate_all(self, env):
        """Every node's value, in evaluation order (a list indexed by node id)."""
        missing = [v for v in self.variables if v not in env]
        if missing:
            raise ExprError(f"no value given for {', '.join(missing)}")
        vals = []
        with np.errstate(over="raise", invalid="ignore", divide="ignore"):
            for n in self.nodes:
                if n.kind == "input":
                    vals.append(env[n.name])
                elif n.kind == "const":
                    vals.append(n.value)
                else:
                    args = [vals[a] for a in n.args]
                    try:
                        v = self._function(n.op)(*args)
                    except (OverflowError, FloatingPointError):
                        raise ExprError(f"overflow in {n.label} (column {n.col + 1})") from None
                    if n.op not in _POLES and _overflowed(v, args):
                        raise ExprError(f"overflow in {n.label} (column {n.col + 1})")
                    vals.append(v)
        return vals

    def evaluate(self, env):
        """The value at ``env`` (a mapping of variable names to floats, Duals, Vars...)."""
        v = self.evaluate_all(env)[self.root]
        if type(v) is np.float64:  # a plain float in, a plain float out
            return float(v)
        return v

    def __call__(self, *args):
        if len(args) != len(self.variables):
            raise TypeError(f"expected {len(self.variables)} argument(s) "
                            f"({', '.join(self.variables)}), got {len(args)}")
        return self.evaluate(dict(zip(self.variables, args)))

    # -- text -----------------------------------------------------------------------
    def to_text(self, node_id=None):
        """The expression as Python text with bare function names (minimal brackets)."""
        texts = []
        for n in self.nodes[:(self.root if node_id is None else node_id) + 1]:
            if n.kind == "input":
                texts.append((n.name, 5))
            elif n.kind == "const":
                texts.append((n.name or repr(n.value), 5))
            elif n.op in ("neg", "pos"):
                t, p = texts[n.args[0]]
                texts.append((SYMBOLS[n.op] + (f"({t})" if p <= 3 else t), 3))
            elif n.op in _PREC:
                p = _PREC[n.op]
                (lt, lp), (rt, rp) = texts[n.args[0]], texts[n.args[1]]
                if lp < p or (n.op == "pow" and lp <= p):
                    lt = f"({lt})"
                if rp < p or (rp == p and n.op != "pow"):
                    rt = f"({rt})"
                texts.append((f"{lt} {SYMBOLS[n.op]} {rt}", p))
            else:
                texts.append((f"{n.op}({', '.join(texts[a][0] for a in n.args)})", 5))
        return texts[-1 if node_id is None else node_id][0]

    def python_source(self, name="f"):
        """``def f(x, y):\\n    return ...``: the expression as a Python function."""
        if not name.isidentifier() or "__" in name:
            raise ValueError(f"not a function name: {name!r}")
        return f"def {name}({', '.join(self.variables)}):\n    return {self.to_text()}\n"

    def names(self, func="f"):
        """A name per node (a dict by node id), in the seeds' style: inputs by their own
        names, constants by their text, intermediates ``a``, ``b``, ``c``, ... in
        evaluation order, the result ``z``.  Skipped: names in use, the function's name
        ``func``, and ``d``, ``g`` (they prefix tangents and adjoints), ``l``, ``o``
        (read as 1, 0).  The explorer, ``wengert diff`` and the derivative programs all
        use these names, so a step, a graph node and a program line name the same thing.
        """
        used = (set(self.variables) | {n.op for n in self.nodes if n.kind == "op"}
                | set(CONSTANTS) | {func, "d", "g", "l", "o"})
        letters = (chr(ord("a") + r) + (str(i) if i else "") for i in itertools.count()
                   for r in range(26))

        def letter():
            for name in letters:
                if name not in used:
                    used.add(name)
                    return name
        names = {}
        for n in self.nodes:
            if n.kind == "input":
                names[n.id] = n.name
            elif n.kind == "const":
                names[n.id] = n.label
            elif n.id != self.root:
                names[n.id] = letter()
        root = self.nodes[self.root]
        if root.kind == "op":
            names[root.id] = "z" if "z" not in used else letter()
        return names

    def straight_line_source(self, name="f"):
        """The expression as a Python function with one assignment per operation, named
        by :meth:`names`: the graph itself (a shared subexpression computed once), which
        the source transformer turns into derivative programs line by line.

        >>> print(parse("sin(x*y) * (x*y)").straight_line_source())
        def f(x, y):
            a = x * y
            b = sin(a)
            z = b * a
            return z
        """
        if not name.isidentifier() or "__" in name:
            raise ValueError(f"not a function name: {name!r}")
        names = self.names(name)

        def text(i):
            n = self.nodes[i]
            return repr(n.value) if n.kind == "const" and n.name is None else names[i]
        lines = [f"def {name}({', '.join(self.variables)}):"]
        for n in self.nodes:
            if n.kind != "op":
                continue
            a = [text(i) for i in n.args]
            if n.op in ("neg", "pos"):
                rhs = SYMBOLS[n.op] + a[0]
            elif n.op in SYMBOLS:
                rhs = f"{a[0]} {SYMBOLS[n.op]} {a[1]}"
            else:
                rhs = f"{n.op}({', '.join(a)})"
            lines.append(f"    {names[n.id]} = {rhs}")
        lines.append(f"    return {text(self.root)}")
        return "\n".join(lines) + "\n"

    def graph(self):
        """The DAG as plain data: ``{"nodes": [...], "edges": [...], "root": id}``.

        Nodes are in evaluation order; each edge goes from an argument to the
        node using it, ``index`` being the argument's position.
        """
        nodes = []
        edges = []
        for n in self.nodes:
            nodes.append({"id": n.id, "kind": n.kind, "op": n.op, "label": n.label,
                          "name": n.name, "args": list(n.args), "column": n.col + 1})
            for i, a in enumerate(n.args):
                edges.append({"id": len(edges), "source": a, "target": n.id, "index": i})
        return {"nodes": nodes, "edges": edges, "root": self.root}


def _overflowed(v, args):
    v = _plain(v)
    try:
        if np.all(np.isfinite(v)):
            return False
    except TypeError:
        return False
    return all(np.all(np.isfinite(_plain(a))) for a in args)
