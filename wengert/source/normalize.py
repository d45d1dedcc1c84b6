"""From a Python function's syntax tree to a Wengert list with structured control flow.

Every differentiable operation becomes one assignment ``v = op(args)`` whose
arguments are names or constants; nested expressions get fresh names (``a``,
``b``, ``c``...).  Expressions that cannot carry a derivative (conditions,
``range`` bounds, indices, ``len(x)``, shapes) are kept as written.

The statements are those of :mod:`.ir`.  Early ``return`` and ``continue`` are removed
first (:mod:`.jumps`); which names carry a derivative is the :class:`~.activity.Scope`'s
analysis, what a call resolves to :mod:`.resolve`'s.  Unsupported constructs raise
:class:`SourceError` (a ``NotImplementedError``) naming the construct and its line in the
user's file.
"""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import textwrap

from ..core import Primitive
from ..rules import OPERATORS
from . import methods
from .activity import Scope
from .errors import SourceError
from .ir import Break, Function, If, Keep, Loop, Op, Operand, rename_temporaries
from .jumps import Exit, ExitRemover
from .parsing import namespace_of, parse_function
from .resolve import hashable, resolve_callable

__all__ = ["Normaliser", "normalise", "parse_source"]

# names the generated code calls itself (the user's own appear in ``names.used``)
_GENERATED_BUILTINS = {"len", "range", "reversed", "min", "slice", "list", "int", "float"}
# iterators a for loop over differentiated values takes apart (as values: refused)
_ITERATORS = {reversed, enumerate, zip, iter, map, filter}
# NumPy functions that write into an argument
_IN_PLACE_FUNCTIONS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"}

# constructs refused wherever they appear in the function
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


class Normaliser(Scope):
    """Lowers one function definition to the IR (:meth:`run` returns a :class:`Function`)."""

    def __init__(self, fdef, ns, filename, offset, func=None):
        super().__init__(fdef, ns)
        self.filename, self.offset, self.func = filename, offset, func
        self.names = None
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
        body = ExitRemover(outs, out_is_tuple, self.names, self.error).remove_jumps(
            body, in_loop=False)
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

    # -- statements ----------------------------------------------------------------------------
    def block(self, body):
        out = []
        for s in body:
            self.stmt(s, out)
        return out

    def stmt(self, s, out):
        self.memo = {}  # common subexpressions, within one statement
        if isinstance(s, Exit):
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
        # reversed(x) given to zip or enumerate: its k-th element is x[len(x) - 1 - k]
        flipped = [fn is reversed] * len(seqs)
        for k, x in enumerate(seqs):
            if fn is not reversed and isinstance(x, ast.Call) and \
                    self.lookup(x.func) is reversed and len(x.args) == 1 and not x.keywords:
                seqs[k], flipped[k] = x.args[0], True
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
        body = []
        if counter:
            text = i if start is None else f"{i} + {self.passive_text(start)}"
            body.append(Op(counter, "inactive", text=text, lineno=line))
        for name, op, active, flip in zip(names, ops, live, flipped):
            at = f"len({op.name}) - 1 - {i}" if flip else i
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
        if hashable(obj) and obj in _ITERATORS:
            self.error(f"{obj.__name__}() of a differentiated value outside a for loop's header",
                       e, f"loop over it (for v in {obj.__name__}(...)) or index the values")
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


_BINOPS = {ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.Div: "__truediv__",
           ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__", ast.Pow: "__pow__",
           ast.MatMult: "__matmul__"}
