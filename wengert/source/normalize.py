"""From a Python function's syntax tree to a Wengert list with structured control flow.

Every differentiable operation becomes one assignment ``v = op(args)`` whose
arguments are names or constants; nested expressions get fresh names (``a``,
``b``, ``c``...).  Expressions that cannot carry a derivative (conditions,
``range`` bounds, indices, ``len(x)``, shapes) are kept as written.

The statements (the IR the code generator reads):

* ``Op``      -- ``target = fn(args)`` for a primitive, a user function, a copy...
* ``If``      -- ``if test: body else: orelse`` (the test is kept as text)
* ``Loop``    -- ``for`` / ``while`` with its header kept as text; ``break`` inside
* ``Keep``    -- a statement with no derivative (``print(...)``, an inactive assignment)

Early ``return`` and ``continue`` are removed first by moving the rest of the block
into the branches that fall through, so every path ends at the end; ``break`` (and
``raise``) stay, as the last statement of a branch.  A ``return`` inside a loop sets a
flag and breaks out; the code after the loop runs only if the flag is unset.
Unsupported constructs raise :class:`SourceError` (a ``NotImplementedError``) naming
the construct and its line in the user's file.
"""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import re
import textwrap
import types

import numpy as np

from ..core import Primitive
from . import methods

__all__ = ["SourceError", "Op", "If", "Loop", "Keep", "Break", "Function", "parse_function",
           "parse_source"]


class SourceError(NotImplementedError):
    """A construct the source transformer does not handle, with its file and line."""

    def __init__(self, what, lineno=None, filename=None, hint=""):
        self.what, self.lineno, self.filename = what, lineno, filename
        where = ""
        if lineno is not None:
            where = f" at line {lineno}" + (f" of {filename}" if filename else "")
        msg = f"wengert.source cannot differentiate {what}{where}"
        if hint:
            msg += f": {hint}"
        super().__init__(msg)


# -- the IR ---------------------------------------------------------------------------------
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


# -- what calls resolve to -------------------------------------------------------------------
_PASSIVE_CALLS = {len, range, int, bool, isinstance, type, print, str, repr,
                  hasattr, getattr, id, np.shape, np.ndim, np.size}
_PASSIVE_ATTRS = {"shape", "ndim", "size", "dtype", "nbytes", "itemsize", "strides"}
_BUILTIN_MAP = {abs: "absolute", pow: "power", max: "maximum", min: "minimum"}
# math functions with a derivative outside wengert.numpy, and those without one
_MATH_SPECIAL = {"erf": "erf", "erfc": "erfc", "gamma": "gamma", "lgamma": "gammaln"}
_MATH_NONDIFF = {"comb", "factorial", "gcd", "isclose", "isfinite", "isinf", "isnan", "isqrt",
                 "lcm", "perm", "ulp"}
# builtins the generated code calls (the user's own appear in ``names.used``)
_GENERATED_BUILTINS = {"len", "range", "reversed", "min", "slice", "list", "int", "float"}
# NumPy functions that write into an argument
_IN_PLACE_FUNCTIONS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"}


def _wnp():
    from .. import numpy as wnp
    return wnp


def resolve_callable(obj):
    """What a called object is to the transformer: ('prim', p) / ('call', f) / ('opaque', f) /
    ('passive', None)."""
    wnp = _wnp()
    if isinstance(obj, Primitive):
        return "prim", obj
    if obj in _PASSIVE_CALLS if _hashable(obj) else False:
        return "passive", None
    if getattr(obj, "_nondiff", False) or getattr(obj, "_static_result", False):
        return "passive", None  # argmax, comparisons, shape: values with no derivative
    if _hashable(obj) and obj in _BUILTIN_MAP:
        return resolve_callable(getattr(wnp, _BUILTIN_MAP[obj]))
    mod = getattr(obj, "__module__", None) or ""
    if isinstance(obj, types.BuiltinFunctionType) and obj.__module__ == "math" or \
            (mod == "math" and callable(obj)):
        name = {"fabs": "fabs", "pow": "power", "atan": "arctan", "asin": "arcsin",
                "acos": "arccos", "atan2": "arctan2", "asinh": "arcsinh", "acosh": "arccosh",
                "atanh": "arctanh"}.get(obj.__name__, obj.__name__)
        fn = wnp.__dict__.get(name) or getattr(wnp, name, None)
        if fn is not None and not getattr(fn, "_passthrough", False):
            return resolve_callable(fn)
        if name in _MATH_SPECIAL:
            from ..scipy import special
            return resolve_callable(getattr(special, _MATH_SPECIAL[name]))
        if name in _MATH_NONDIFF:
            return "passive", None
        return None, None   # math.fsum, math.dist: no rule (not a silent zero)
    if isinstance(obj, np.ufunc):
        fn = getattr(wnp, obj.__name__, None)
        if fn is not None and not getattr(fn, "_passthrough", False):
            return resolve_callable(fn)
        return "opaque", obj
    from .. import _dispatch
    if _hashable(obj) and obj in _dispatch.HANDLED:
        return resolve_callable(_dispatch.HANDLED[obj])
    if isinstance(obj, types.FunctionType):
        if mod.split(".")[0] in ("wengert", "numpy", "scipy"):
            return "opaque", obj
        return "call", obj
    if callable(obj):
        return "opaque", obj
    return None, None


def _hashable(obj):
    try:
        hash(obj)
        return True
    except TypeError:
        return False


# -- parsing -----------------------------------------------------------------------------------
_UNSUPPORTED = {
    ast.Try: "a try statement", ast.With: "a with statement", ast.AsyncWith: "async with",
    ast.AsyncFor: "async for", ast.Global: "a global statement",
    ast.Nonlocal: "a nonlocal statement", ast.ClassDef: "a class definition",
    ast.FunctionDef: "a nested function definition",
    ast.AsyncFunctionDef: "a nested async function", ast.Lambda: "a lambda",
    ast.Yield: "yield (a generator)", ast.YieldFrom: "yield from (a generator)",
    ast.Await: "await", ast.Delete: "a del statement",
    ast.Import: "an import inside the function", ast.ImportFrom: "an import inside the function",
    ast.Starred: "starred arguments (*args)", ast.GeneratorExp: "a generator expression",
    ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension", ast.NamedExpr: "an assignment expression (:=)",
    ast.Match: "a match statement", ast.Assert: None, ast.TryStar: "a try statement",
}


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


def parse_source(src, func_name, namespace=None, filename="<source>"):
    """Normalise ``func_name`` from source text (names resolve in ``namespace``)."""
    tree = ast.parse(textwrap.dedent(src))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == func_name:
            ns = dict(vars(builtins))
            ns.update(namespace or {})
            return Normaliser(node, ns, filename, 0).run()
    raise ValueError(f"no function named {func_name!r} in the source")


def normalise(f):
    fdef, filename, offset = parse_function(f)
    fn = Normaliser(fdef, namespace_of(f), filename, offset, func=f).run()
    return fn


class _Names:
    """Fresh names a, b, c, ..., z, a1, b1, ... avoiding every name already used."""

    def __init__(self, used):
        self.used = set(used)
        self.k = 0
        self.j = 0

    def fresh(self, prefer=None):
        if prefer and prefer not in self.used:
            self.used.add(prefer)
            return prefer
        self.k += 1
        return f"_tmp{self.k}_"

    def letter(self):
        while True:
            i, r = divmod(self.j, 26)
            self.j += 1
            name = chr(ord("a") + r) + (str(i) if i else "")
            if name not in self.used and name not in _RESERVED:
                self.used.add(name)
                return name


_RESERVED = {"d", "g", "l", "o"}


class Normaliser:
    def __init__(self, fdef, ns, filename, offset, func=None):
        self.fdef, self.ns, self.filename, self.offset, self.func = fdef, ns, filename, offset, func
        self.names = None
        self.params = []
        self.namespace = {}   # free names referenced -> objects
        self.memo = {}

    # -- errors ------------------------------------------------------------------------
    def error(self, what, node, hint=""):
        line = getattr(node, "lineno", None)
        raise SourceError(what, None if line is None else line + self.offset, self.filename, hint)

    def line(self, node):
        return getattr(node, "lineno", 0) + self.offset

    # -- entry -----------------------------------------------------------------------------
    def run(self):
        fdef = self.fdef
        a = fdef.args
        if a.vararg or a.kwarg:
            self.error("a function with *args or **kwargs", fdef)
        if a.kwonlyargs or a.posonlyargs:
            self.error("keyword-only or positional-only parameters", fdef)
        self.params = [p.arg for p in a.args]
        defaults = {}
        for p, d in zip(a.args[len(a.args) - len(a.defaults):], a.defaults):
            defaults[p.arg] = ast.unparse(d)
            self.local = set()
            self.collect_free(d)
        self.check(fdef)
        used = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} | set(self.params)
        used.add(fdef.name)
        self.local = self.assigned_names(fdef.body) | set(self.params)
        self.names = _Names(used)
        self.active = self.activity()
        body = copy.deepcopy(fdef.body)
        # the output: a returned name if every return returns the same local name
        rets = [n for n in ast.walk(fdef) if isinstance(n, ast.Return)]
        if not rets:
            self.error("a function without a return statement", fdef)
        out_is_tuple = False
        if all(isinstance(r.value, ast.Tuple) for r in rets) and \
                len({len(r.value.elts) for r in rets}) == 1:
            out_is_tuple = True
            k = len(rets[0].value.elts)
            outs = [self.names.fresh("z" if k == 1 else f"z{i + 1}") for i in range(k)]
        else:
            if any(isinstance(r.value, ast.Tuple) for r in rets):
                self.error("returns of different tuple lengths", rets[0])
            ids = {r.value.id if isinstance(r.value, ast.Name) else None for r in rets}
            (only,) = ids if len(ids) == 1 else (None,)
            if only is not None and only in self.local:
                outs = [only]
            else:
                outs = [self.names.fresh("z")]
        self.outputs = outs
        self.out_is_tuple = out_is_tuple
        body = self.remove_jumps(body, in_loop=False)
        ir = self.block(body)
        mapping = rename_temporaries(ir, self.names)
        outs = [mapping.get(o, o) for o in outs]
        return Function(fdef.name, self.params, defaults, ir, outs, out_is_tuple,
                        self.names.used, self.namespace, self.filename, self.offset + 1,
                        self.func)

    def check(self, fdef):
        for node in ast.walk(fdef):
            if node is fdef:
                continue
            what = _UNSUPPORTED.get(type(node), "")
            if what:
                self.error(what, node)
            if isinstance(node, (ast.For, ast.While)) and node.orelse:
                self.error("a loop with an else clause", node)
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    for sub in ast.walk(t):
                        if isinstance(sub, (ast.Subscript, ast.Attribute)):
                            self.error("assignment into an element or attribute "
                                       f"({ast.unparse(t)} = ...)", node,
                                       "compute a new value instead (e.g. with wnp.where)")
            if isinstance(node, ast.AugAssign) and not isinstance(node.target, ast.Name):
                self.error(f"augmented assignment into {ast.unparse(node.target)}", node)
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else None
                if name in ("exec", "eval", "globals", "locals", "vars") and name not in \
                        self.params:
                    self.error(f"a call to {name}()", node)
                if any(k.arg is None for k in node.keywords):
                    self.error("keyword unpacking (**kwargs) in a call", node)

    @staticmethod
    def assigned_names(body):
        out = set()
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    out.add(node.id)
        return out

    # -- activity: which names can carry a derivative -----------------------------------------
    def activity(self):
        active = set(self.params)
        assigns = []
        for node in ast.walk(self.fdef):
            if isinstance(node, ast.Assign):
                assigns.append((node.targets, node.value))
            elif isinstance(node, ast.AugAssign):
                assigns.append(([node.target], node))
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                assigns.append(([node.target], node.value))
            elif isinstance(node, ast.For):
                target = node.target
                if isinstance(node.iter, ast.Call) and self.lookup(node.iter.func) is \
                        enumerate and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                    target = target.elts[1]   # the counter is an integer
                assigns.append(([target], node.iter))
        changed = True
        while changed:
            changed = False
            for targets, value in assigns:
                if self.is_active(value, active):
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name) and n.id not in active:
                                active.add(n.id)
                                changed = True
        return active

    def is_active(self, e, active=None):
        active = self.active if active is None else active
        if isinstance(e, ast.AugAssign):
            return self.is_active(e.value, active) or self.is_active(e.target, active)
        if isinstance(e, ast.Name):
            return e.id in active and e.id in self.local
        if isinstance(e, ast.BoolOp):   # x or 1.0 is x (or 1.0): a value, not a truth
            return any(self.is_active(v, active) for v in e.values)
        if isinstance(e, (ast.Constant, ast.Compare)):
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return False
        if isinstance(e, ast.Attribute):
            if e.attr in _PASSIVE_ATTRS:
                return False
            return self.is_active(e.value, active)
        if isinstance(e, ast.Subscript):
            return self.is_active(e.value, active)
        if isinstance(e, ast.Call):
            obj = self.lookup(e.func)
            if obj is getattr and e.args and not (
                    len(e.args) > 1 and isinstance(e.args[1], ast.Constant)
                    and e.args[1].value in _PASSIVE_ATTRS):
                return self.is_active(e.args[0], active)   # getattr(x, "T") is x.T
            kind = resolve_callable(obj)[0] if obj is not None else None
            if kind == "passive":
                return False
            parts = list(e.args) + [k.value for k in e.keywords]
            if isinstance(e.func, ast.Attribute) and obj is None:
                if e.func.attr in methods.PASSIVE:  # x.argmax(): an integer, no derivative
                    return False
                parts.append(e.func.value)  # a method call on a value
            return any(self.is_active(p, active) for p in parts)
        return any(self.is_active(c, active) for c in ast.iter_child_nodes(e)
                   if isinstance(c, ast.expr))

    def lookup(self, node):
        """The object a (dotted) name refers to, if it is not a local variable."""
        if isinstance(node, ast.Name):
            if node.id in self.local:
                return None
            return self.ns.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.lookup(node.value)
            if base is None or not isinstance(base, types.ModuleType) and \
                    not isinstance(base, type):
                return None
            return getattr(base, node.attr, None)
        return None

    # -- early exits: move the rest of a block into the branches that fall through -------------
    def remove_jumps(self, body, in_loop):
        """Rewrite so ``return``/``continue`` never appear and ``break`` only ends a branch."""
        out = []
        i = 0
        while i < len(body):
            s = body[i]
            rest = body[i + 1:]
            if isinstance(s, ast.Return):
                out.extend(self.assign_return(s))
                if in_loop:
                    out.append(self._flag_set(s))
                    out.append(ast.Break(lineno=s.lineno))
                else:
                    out.append(_Exit(s.lineno))
                return out
            if isinstance(s, ast.Continue):
                out.append(_Exit(s.lineno, kind="continue"))
                return out
            if isinstance(s, (ast.Break, ast.Raise)):
                out.append(s)
                return out
            if isinstance(s, ast.If):
                s.body = self.remove_jumps(s.body, in_loop)
                s.orelse = self.remove_jumps(s.orelse, in_loop)
                if _may_exit(s) and rest:
                    rest = self.remove_jumps(rest, in_loop)
                    _sink(s, rest)
                    out.append(s)
                    return out
                out.append(s)
                i += 1
                continue
            if isinstance(s, (ast.For, ast.While)):
                has_ret = any(isinstance(n, ast.Return) for n in ast.walk(s))
                if has_ret:
                    flag = self.ret_flag()
                    out.append(ast.Assign(targets=[ast.Name(flag, ast.Store())],
                                          value=ast.Constant(False), lineno=s.lineno))
                s.body = self.remove_jumps(s.body, in_loop=True)
                out.append(s)
                if has_ret:
                    after = ast.If(test=ast.Name(flag, ast.Load()),
                                   body=[ast.Break(lineno=s.lineno) if in_loop else
                                         _Exit(s.lineno)],
                                   orelse=[], lineno=s.lineno)
                    body = [after] + rest
                    i = 0
                    continue
                i += 1
                continue
            out.append(s)
            i += 1
        return out

    _flag = None

    def ret_flag(self):
        if self._flag is None:
            self._flag = self.names.fresh("returned")
        return self._flag

    def _flag_set(self, node):
        return ast.Assign(targets=[ast.Name(self.ret_flag(), ast.Store())],
                          value=ast.Constant(True), lineno=node.lineno)

    def assign_return(self, r):
        if r.value is None:
            self.error("a return without a value", r)
        if self.out_is_tuple:
            if not isinstance(r.value, ast.Tuple) or len(r.value.elts) != len(self.outputs):
                self.error("returns of different shapes", r)
            # evaluate all, then assign (the outputs never alias inputs)
            return [ast.Assign(targets=[ast.Name(o, ast.Store())], value=v, lineno=r.lineno)
                    for o, v in zip(self.outputs, r.value.elts)]
        (o,) = self.outputs
        if isinstance(r.value, ast.Name) and r.value.id == o:
            return []
        return [ast.Assign(targets=[ast.Name(o, ast.Store())], value=r.value, lineno=r.lineno)]

    # -- statements ----------------------------------------------------------------------------
    def block(self, body):
        out = []
        for s in body:
            self.stmt(s, out)
        return out

    def stmt(self, s, out):
        self.memo = {}  # common subexpressions, within one statement
        if isinstance(s, _Exit):
            return  # the end of the path: nothing follows it any more
        if isinstance(s, ast.Assign):
            if len(s.targets) != 1:
                self.error("chained assignment (a = b = ...)", s)
            self.assign(s.targets[0], s.value, s, out)
        elif isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.assign(s.target, s.value, s, out)
        elif isinstance(s, ast.AugAssign):
            value = ast.BinOp(left=ast.Name(s.target.id, ast.Load()), op=s.op, right=s.value,
                              lineno=s.lineno)
            self.assign(s.target, value, s, out)
        elif isinstance(s, ast.If):
            test = self.passive_text(s.test)
            out.append(If(test, self.block(s.body), self.block(s.orelse), self.line(s)))
        elif isinstance(s, ast.While):
            out.append(Loop(f"while {self.passive_text(s.test)}", self.block(s.body), True,
                            lineno=self.line(s)))
        elif isinstance(s, ast.For):
            self.for_loop(s, out)
        elif isinstance(s, ast.Break):
            out.append(Break(self.line(s)))
        elif isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):
                return  # a docstring
            if isinstance(s.value, ast.Call):
                self.check_discarded_call(s.value)
            out.append(Keep(self.passive_text(s.value), self.line(s)))
        elif isinstance(s, ast.Pass):
            return
        elif isinstance(s, (ast.Assert, ast.Raise)):
            out.append(Keep(self.passive_text_stmt(s), self.line(s)))
        else:
            self.error(f"a {type(s).__name__} statement", s)

    def check_discarded_call(self, e):
        """A call whose result is dropped is there for what it changes: refuse one that may
        store or change a differentiated value in place (``y.sort()``, ``out.append(x)``,
        ``np.copyto(a, x)``), whose derivative the program would silently lose."""
        func = e.func
        obj = self.lookup(func)
        values = list(e.args) + [k.value for k in e.keywords]
        if obj is None and isinstance(func, ast.Attribute):   # a method
            name = func.attr
            if not (self.is_active(func.value) or any(self.is_active(v) for v in values)):
                return
            if (name in methods.METHODS or name in methods.PASSIVE) and \
                    not any(k.arg == "out" for k in e.keywords):
                return   # a new value, dropped
            if name in methods.IN_PLACE:
                hint = methods.IN_PLACE[name]
                self.error(f"the in-place method .{name}() of a differentiated value", e,
                           f"compute a new value instead ({hint})" if hint else "")
            self.error(f"the call {ast.unparse(func)}(...) with a differentiated value, which "
                       "may store it or change it in place", e,
                       "wengert.source does not follow values into lists, dicts or buffers; "
                       "wg.grad does")
        if not any(self.is_active(v) for v in values):
            return
        kind = resolve_callable(obj)[0] if obj is not None else None
        name = getattr(obj, "__name__", "")
        if kind == "call":
            try:   # a user function that appends to its argument is refused on its own
                normalise(obj)
            except SourceError as err:
                self.error(f"the call {ast.unparse(func)}(...) with a differentiated value, "
                           "whose result is not used", e, str(err))
            return
        if kind in ("passive", "prim") and not any(k.arg == "out" for k in e.keywords):
            return
        if kind == "opaque" and (getattr(obj, "__module__", None) or "").startswith(
                "wengert") and name not in _IN_PLACE_FUNCTIONS and \
                not any(k.arg == "out" for k in e.keywords):
            return
        self.error(f"the call {ast.unparse(func)}(...) with a differentiated value, which may "
                   "store it or change it in place", e,
                   "wengert.source does not follow values into lists, dicts or buffers; "
                   "wg.grad does")

    def for_loop(self, s, out):
        it = s.iter
        if isinstance(s.target, ast.Name) and not self.is_active(it):
            obj = self.lookup(it.func) if isinstance(it, ast.Call) else None
            if obj is range and not it.keywords:
                args = [self.passive_text(a) for a in it.args]
                out.append(Loop(f"for {s.target.id} in range({', '.join(args)})",
                                self.block(s.body), False, target=s.target.id,
                                range_args=args, lineno=self.line(s)))
                return
            out.append(Loop(f"for {s.target.id} in {self.passive_text(it)}", self.block(s.body),
                            False, lineno=self.line(s), names=[s.target.id]))
            return
        if isinstance(it, ast.Call) and self.is_active(it) and \
                self.lookup(it.func) in (enumerate, zip, reversed):
            self.indexed_loop(s, out)
            return
        if not isinstance(s.target, ast.Name):
            if self.is_active(it):
                self.error("a for loop unpacking the elements of a differentiated value", s)
            names = [n.id for n in ast.walk(s.target) if isinstance(n, ast.Name)]
            out.append(Loop(f"for {ast.unparse(s.target)} in {self.passive_text(it)}",
                            self.block(s.body), False, lineno=self.line(s), names=names))
            return
        # for v in <active array>: for i in range(len(arr)): v = arr[i]
        pre = []
        seq = self.operand(it, pre)
        out.extend(pre)
        if not seq.is_name or seq.name == s.target.id or \
                seq.name in self.assigned_names(s.body):
            # (Python iterates over the sequence as it was when the loop began)
            tmp = self.names.fresh()
            out.append(Op(tmp, "copy", args=[seq], lineno=self.line(s)))
            seq = Operand(name=tmp)
        i = self.names.fresh("i")
        body = [Op(s.target.id, "sub", args=[seq], index=i, lineno=self.line(s))]
        body += self.block(s.body)
        out.append(Loop(f"for {i} in range(len({seq.name}))", body, False, target=i,
                        range_args=[f"len({seq.name})"], lineno=self.line(s)))

    def indexed_loop(self, s, out):
        """``for i, v in enumerate(x)``, ``for a, b in zip(x, y)``, ``for v in reversed(x)``
        over differentiated sequences: a loop over an index, each element taken by it."""
        it, line = s.iter, self.line(s)
        fn = self.lookup(it.func)
        kw = {k.arg: k.value for k in it.keywords}
        names = [s.target] if fn is reversed else \
            (s.target.elts if isinstance(s.target, ast.Tuple) else None)
        seqs = list(it.args)
        counter = start = None
        if fn is enumerate:
            if names is not None and len(names) == 2 and isinstance(names[0], ast.Name):
                counter, names = names[0].id, names[1:]
            start = kw.pop("start", it.args[1] if len(it.args) > 1 else None)
            seqs = it.args[:1]
        kw.pop("strict", None)
        if names is None or kw or not seqs or len(names) != len(seqs) or \
                not all(isinstance(n, ast.Name) for n in names) or \
                (fn is not zip and len(seqs) != 1) or \
                any(self.is_active(x) for x in ([start] if start is not None else [])):
            self.error("a for loop unpacking the elements of a differentiated value", s)
        assigned = self.assigned_names(s.body) | {n.id for n in names} | \
            ({counter} if counter else set())
        ops, live = [], []
        for x in seqs:
            live.append(self.is_active(x))
            if live[-1]:
                op = self.operand(x, out, line)
                if op.name in assigned:   # the sequence as it was when the loop began
                    tmp = self.names.fresh()
                    out.append(Op(tmp, "copy", args=[op], lineno=line))
                    op = Operand(name=tmp)
            else:   # a plain sequence, taken by index too
                op = Operand(name=self.names.fresh())
                out.append(Op(op.name, "inactive", text=f"list({self.passive_text(x)})",
                              lineno=line))
            ops.append(op)
        i = self.names.fresh("i")
        n = f"len({ops[0].name})" if len(ops) == 1 else \
            f"min({', '.join(f'len({o.name})' for o in ops)})"
        at = f"{n} - 1 - {i}" if fn is reversed else i
        body = []
        if counter:
            text = i if start is None else f"{i} + {self.passive_text(start)}"
            body.append(Op(counter, "inactive", text=text, lineno=line))
        for name, op, active in zip(names, ops, live):
            if active:
                body.append(Op(name.id, "sub", args=[op], index=at, lineno=line))
            else:
                body.append(Op(name.id, "inactive", text=f"{op.name}[{at}]", lineno=line))
        body += self.block(s.body)
        out.append(Loop(f"for {i} in range({n})", body, False, target=i, range_args=[n],
                        lineno=line))

    def assign(self, target, value, node, out):
        line = self.line(node)
        if isinstance(target, ast.Name):
            name = target.id
            if not self.is_active(value):
                out.append(Op(name, "inactive", text=self.passive_text(value), lineno=line))
                return
            if isinstance(value, ast.IfExp):
                test = self.passive_text(value.test)
                b, o = [], []
                saved = dict(self.memo)
                self.assign(target, value.body, node, b)
                self.memo = dict(saved)
                self.assign(target, value.orelse, node, o)
                self.memo = saved
                out.append(If(test, b, o, line))
                return
            self.expr(value, out, target=name, line=line)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            names = []
            for t in target.elts:
                if not isinstance(t, ast.Name):
                    self.error("nested unpacking", node)
                names.append(t.id)
            if isinstance(value, (ast.Tuple, ast.List)):
                if len(value.elts) != len(names):
                    self.error("unpacking of a different length", node)
                ops = []
                for v in value.elts:
                    ops.append(self.operand(v, out, line=line))
                # names on both sides (a, b = b, a): copy through fresh names first
                for k, op in enumerate(ops):
                    if op.is_name and op.name in names:
                        tmp = self.names.fresh()
                        out.append(Op(tmp, "copy", args=[op], lineno=line))
                        ops[k] = Operand(name=tmp)
                for n, op in zip(names, ops):
                    if op.is_name:
                        out.append(Op(n, "copy", args=[op], lineno=line))
                    else:
                        out.append(Op(n, "inactive", text=op.text, lineno=line))
                return
            if not self.is_active(value):
                out.append(Keep(f"{', '.join(names)} = {self.passive_text(value)}", line, names))
                return
            seq = self.operand(value, out, line=line)
            if not seq.is_name:
                tmp = self.names.fresh()
                out.append(Op(tmp, "inactive", text=seq.text, lineno=line))
                seq = Operand(name=tmp)
            elif seq.name in names:   # x, y = x: every element comes from the old x
                tmp = self.names.fresh()
                out.append(Op(tmp, "copy", args=[seq], lineno=line))
                seq = Operand(name=tmp)
            for k, n in enumerate(names):
                out.append(Op(n, "sub", args=[seq], index=str(k), lineno=line))
            return
        self.error(f"assignment to {ast.unparse(target)}", node)

    # -- expressions ---------------------------------------------------------------------------
    def operand(self, e, out, line=None):
        """Normalise ``e`` to a name or an inactive text, emitting ops into ``out``."""
        if isinstance(e, ast.Name) and e.id in self.local:
            return Operand(name=e.id)
        if not self.is_active(e):
            if isinstance(e, ast.Constant):
                return Operand(text=repr(e.value), value=e.value, has_value=True)
            if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and \
                    isinstance(e.operand, ast.Constant):
                return Operand(text=ast.unparse(e), value=-e.operand.value, has_value=True)
            return Operand(text=self.passive_text(e))
        key = None
        if isinstance(e, (ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute)):
            key = ast.dump(e)
            if key in self.memo:
                return Operand(name=self.memo[key])
        tmp = self.names.fresh()
        self.expr(e, out, target=tmp, line=line or self.line(e))
        if key is not None:
            self.memo[key] = tmp
        return Operand(name=tmp)

    def expr(self, e, out, target, line):
        """Emit ops computing active expression ``e`` into ``target``."""
        line = self.line(e) if hasattr(e, "lineno") else line
        if isinstance(e, ast.Name):
            if e.id != target:  # x = x does nothing
                out.append(Op(target, "copy", args=[Operand(name=e.id)], lineno=line))
            return
        if isinstance(e, ast.BinOp):
            dunder = _BINOPS.get(type(e.op))
            if dunder is None:
                self.error(f"the operator {type(e.op).__name__}", e)
            args = [self.operand(e.left, out, line), self.operand(e.right, out, line)]
            self.emit_operator(dunder, args, target, out, line, e)
            return
        if isinstance(e, ast.UnaryOp):
            if isinstance(e.op, ast.USub):
                dunder = "__neg__"
            elif isinstance(e.op, ast.UAdd):
                dunder = "__pos__"
            else:
                self.error(f"the operator {type(e.op).__name__} on a differentiated value", e)
            args = [self.operand(e.operand, out, line)]
            self.emit_operator(dunder, args, target, out, line, e)
            return
        if isinstance(e, ast.Call):
            self.call(e, out, target, line)
            return
        if isinstance(e, ast.Subscript):
            base = self.operand(e.value, out, line)
            self.collect_free(e.slice)
            # as written between the brackets: a tuple of slices unparsed alone, "(:2, :2)",
            # is not Python
            idx = ast.unparse(ast.Subscript(ast.Name("_", ast.Load()), e.slice, ast.Load()))[2:-1]
            if self.is_active(e.slice):
                self.error("an index computed from a differentiated value", e)
            self.emit_sub(target, base, idx, out, line)
            return
        if isinstance(e, ast.Attribute):
            if e.attr in methods.ATTRIBUTES:   # x.T is transpose(x)
                base = self.operand(e.value, out, line)
                fn = methods.function(methods.ATTRIBUTES[e.attr])
                self.emit_fn(fn, [base], {}, target, out, line, e)
                return
            self.error(f"the attribute .{e.attr} of a differentiated value", e)
        if isinstance(e, ast.IfExp):
            test = self.passive_text(e.test)
            b, o = [], []
            saved = dict(self.memo)
            self.expr(e.body, b, target, line)
            self.memo = dict(saved)
            self.expr(e.orelse, o, target, line)
            self.memo = saved
            out.append(If(test, b, o, line))
            return
        if isinstance(e, ast.BoolOp):
            # a or b is a if a else b, and a and b is b if a else a (a evaluated once)
            first = self.operand(e.values[0], out, line)
            rest = e.values[1] if len(e.values) == 2 else \
                ast.copy_location(ast.BoolOp(op=e.op, values=e.values[1:]), e)
            keep = [Op(target, "copy", args=[first], lineno=line) if first.is_name else
                    Op(target, "inactive", text=first.text, lineno=line)]
            other = []
            saved = dict(self.memo)
            if self.is_active(rest):
                self.expr(rest, other, target, line)
            else:
                other.append(Op(target, "inactive", text=self.passive_text(rest), lineno=line))
            self.memo = saved
            if isinstance(e.op, ast.Or):
                out.append(If(first.src(), keep, other, line))
            else:
                out.append(If(first.src(), other, keep, line))
            return
        if isinstance(e, (ast.Tuple, ast.List)):
            self.error("a tuple or list built from differentiated values", e,
                       "pass the list straight to the function that takes it "
                       "(np.stack([a, b])), or unpack it")
        self.error(f"the expression {ast.unparse(e)!r}", e)

    def pack(self, e, out, line):
        """``[a, b, 1.0]`` (nested too) as one value, for a function given a list: its
        adjoint is a list, whose elements go back to ``a`` and ``b``."""
        elts = [self.pack(x, out, line) if isinstance(x, (ast.List, ast.Tuple)) and
                self.is_active(x) else self.operand(x, out, line) for x in e.elts]
        tmp = self.names.fresh()
        out.append(Op(tmp, "pack", args=elts, text="list" if isinstance(e, ast.List) else "tuple",
                      lineno=line))
        return Operand(name=tmp)

    def emit_sub(self, target, base, idx, out, line):
        """``target = base[idx]``; ``x = x[1:]`` goes through a fresh name, so the reverse
        sweep still has the whole ``x`` and an adjoint of its own for it."""
        if base.is_name and base.name == target:
            tmp = self.names.fresh()
            out.append(Op(tmp, "sub", args=[base], index=idx, lineno=line))
            out.append(Op(target, "copy", args=[Operand(name=tmp)], lineno=line))
        else:
            out.append(Op(target, "sub", args=[base], index=idx, lineno=line))

    def emit_operator(self, dunder, args, target, out, line, node):
        from ..rules import OPERATORS
        fn = OPERATORS[dunder]
        if isinstance(fn, Primitive):
            self.emit_prim(fn, args, {}, target, out, line)
        else:
            self.emit_fn(fn, args, {}, target, out, line, node, opname=dunder)

    def emit_prim(self, prim, args, params, target, out, line, called=False):
        # a target among its own arguments (t = t * t) goes through a fresh name, so the
        # reverse sweep still sees the old value
        if any(a.is_name and a.name == target for a in args):
            tmp = self.names.fresh()
            out.append(Op(tmp, "prim", fn=prim, args=args, params=params, lineno=line,
                          called=called))
            out.append(Op(target, "copy", args=[Operand(name=tmp)], lineno=line))
        else:
            out.append(Op(target, "prim", fn=prim, args=args, params=params, lineno=line,
                          called=called))

    def emit_fn(self, fn, args, params, target, out, line, node, opname=None, kind=None):
        kind = kind or resolve_callable(fn)[0]
        if kind == "prim":
            self.emit_prim(fn, args, params, target, out, line, called=True)
            return
        if kind not in ("call", "opaque"):
            self.error(f"a call to {getattr(fn, '__name__', fn)!s}", node)
        name = self.ref(fn, opname)
        op = Op(target, kind, fn=fn, args=args, params=params, lineno=line, fname=name)
        if any(a.is_name and a.name == target for a in args):
            tmp = self.names.fresh()
            op.target = tmp
            out.append(op)
            out.append(Op(target, "copy", args=[Operand(name=tmp)], lineno=line))
        else:
            out.append(op)

    def ref(self, fn, opname=None):
        """A global name in the generated code for the object ``fn``."""
        base = opname.strip("_") if opname else getattr(fn, "__name__", "fn")
        if not isinstance(base, str):
            base = "obj"
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "fn"
        for name, obj in self.namespace.items():
            if obj is fn:
                return name
        name = base
        k = 1
        if self.ns.get(base) is fn and base not in self.local:
            self.namespace[base] = fn
            return base
        while name in self.names.used or name in _GENERATED_BUILTINS or \
                (name in self.namespace and self.namespace[name] is not fn):
            # (never a builtin the generated code calls itself: range(min(len(x), ...)))
            k += 1
            name = f"{base}{k}"
        self.names.used.add(name)
        self.namespace[name] = fn
        return name

    def call(self, e, out, target, line):
        func = e.func
        obj = self.lookup(func)
        args_nodes = list(e.args)
        keywords = {k.arg: k.value for k in e.keywords}
        if obj is None and isinstance(func, ast.Attribute):
            # a method of a value: x.reshape(3, 2) is wnp.reshape(x, (3, 2)), bound with
            # NumPy's signature of the method
            try:
                name, args_nodes, keywords = methods.function_form(
                    func.attr, func.value, args_nodes, keywords)
            except methods.MethodError as err:
                self.error(err.what, e, err.hint)
            except TypeError as err:   # arguments NumPy's method would refuse too
                raise TypeError(f"{err} (line {self.line(e)} of {self.filename})") from None
            obj = methods.function(name)
        if obj is None:
            self.error(f"a call to {ast.unparse(func)} (not a known function)", e)
        if (obj is max or obj is min) and (len(args_nodes) != 2 or keywords):
            kind, fn = "opaque", obj   # max(x) of one sequence: not np.maximum
        else:
            kind, fn = resolve_callable(obj)
        if kind is None or kind == "passive":
            self.error(f"a call to {ast.unparse(func)}", e)
        if kind == "opaque":   # np.stack([a, b]): the list is built first, then passed
            args = [self.pack(a, out, line) if isinstance(a, (ast.List, ast.Tuple)) and
                    self.is_active(a) else self.operand(a, out, line) for a in args_nodes]
        else:
            args = [self.operand(a, out, line) for a in args_nodes]
        params = {}
        for kname, value in keywords.items():
            if kind == "opaque" and self.is_active(value):
                self.error(f"the keyword argument {kname}= computed from a differentiated value "
                           f"(in a call to {ast.unparse(func)})", e, "pass it positionally")
            if kind == "prim":
                if self.is_active(value):
                    self.error(f"the keyword argument {kname}= computed from a differentiated "
                               "value", e)
                params[kname] = self.passive_text(value)
            else:
                params[kname] = self.operand(value, out, line)
        if kind == "call":
            args, params = self.bind(fn, args, params, e)
        self.emit_fn(fn, args, params, target, out, line, e, kind=kind)

    def bind(self, fn, args, params, node):
        """Keyword arguments of a user function become positional."""
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return args, params
        names = list(sig.parameters)
        out = list(args)
        for pname in names[len(args):]:
            if pname in params:
                out.append(params.pop(pname))
            else:
                p = sig.parameters[pname]
                if p.default is inspect.Parameter.empty:
                    self.error(f"a call to {fn.__name__} without argument {pname!r}", node)
                d = p.default
                if isinstance(d, (int, float, bool)) or d is None:
                    out.append(Operand(text=repr(d), value=d, has_value=True))
                else:
                    out.append(Operand(text=self.ref(d, f"{fn.__name__}_{pname}")))
        if params:
            self.error(f"a call to {fn.__name__} with keyword arguments it does not take "
                       f"in order ({', '.join(params)})", node)
        return out, {}

    # -- inactive text -------------------------------------------------------------------------
    def passive_text(self, e):
        self.collect_free(e)
        return ast.unparse(e)

    def passive_text_stmt(self, s):
        self.collect_free(s)
        return ast.unparse(s)

    def collect_free(self, e):
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and n.id not in self.local and n.id in self.ns and \
                    not hasattr(builtins, n.id):
                self.namespace.setdefault(n.id, self.ns[n.id])


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


class _Exit(ast.stmt):
    """The end of a path (a return or continue that was removed)."""
    _fields = ()

    def __init__(self, lineno=None, kind="return"):
        super().__init__()
        self.lineno, self.kind = lineno, kind


def _ends(stmts):
    """Does every path through ``stmts`` end in a jump (break / exit)?"""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, (ast.Break, _Exit, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _ends(last.body) and _ends(last.orelse)
    return False


def _may_exit(s):
    """Can a path through ``s`` jump out of the enclosing block (not counting inner loops)?"""
    if isinstance(s, (ast.Break, _Exit, ast.Raise)):
        return True
    if isinstance(s, ast.If):
        return any(_may_exit(c) for c in s.body + s.orelse)
    return False


def _sink(s, rest):
    """Append ``rest`` to every path of the if-statement ``s`` that falls through."""
    for branch in ("body", "orelse"):
        stmts = getattr(s, branch)
        if _ends(stmts):
            continue
        if stmts and isinstance(stmts[-1], ast.If) and _may_exit(stmts[-1]):
            _sink(stmts[-1], rest)
        else:
            stmts.extend(copy.deepcopy(rest))


_BINOPS = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.Div: "__truediv__",
           ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__", ast.Pow: "__pow__",
           ast.MatMult: "__matmul__"}
