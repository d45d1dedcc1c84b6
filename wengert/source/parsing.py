"""From a function object to its syntax tree: its source lines (with :mod:`inspect`) and
the names it can see (globals, closure cells, builtins).

A lambda becomes a ``def`` named after the variable it is bound to (``sq = lambda x: ...``
gives ``def sq(x): return ...``; a lambda bound to nothing gives ``f``).  ``inspect`` gives
the lines of the statement from the lambda's first line on, which may not parse alone (a
lambda in the middle of a call that spans lines): they are tried as they are, then in
parentheses, then the whole file is read.  Of the lambdas on the lambda's line, those
whose parameters are the function's are candidates; several are told apart by compiling
each and comparing its code with the function's own (and literal defaults with its
defaults).
"""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import textwrap
import types

from .errors import SourceError

__all__ = ["parse_function", "namespace_of"]

_LAMBDA = "<lambda>"


def parse_function(f):
    """Parse a function object's source; returns (FunctionDef, filename, line offset)."""
    if not isinstance(f, types.FunctionType):
        hint = ""
        if hasattr(f, "defvjp") or hasattr(f, "defjvp"):  # wg.custom_vjp / wg.custom_jvp
            hint = (": a custom function's derivative is its rule, which wg.grad and wg.jvp "
                    "apply; a Python function that calls it transforms here, the rule used")
        raise TypeError(f"wengert.source needs a Python function, got "
                        f"{type(f).__name__}{hint}")
    if f.__code__.co_name == _LAMBDA:
        return _parse_lambda(f)
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


# -- lambdas -------------------------------------------------------------------------------------
def _parse_lambda(f):
    """A lambda's syntax tree as a one-line ``def`` (the return of its expression)."""
    code = f.__code__
    try:
        lines, first = inspect.getsourcelines(f)
    except (OSError, TypeError) as e:
        raise SourceError(f"{f.__qualname__}", None, None,
                          f"its source is not available ({e})") from None
    line = code.co_firstlineno
    found = None
    for tree, shift in _readings(f, lines, first):
        candidates = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and
                      n.lineno + shift == line and _signature(n) == _code_signature(f)]
        if candidates:
            found = tree, shift, candidates
            break
    if found is None:
        raise SourceError("a lambda", line, code.co_filename,
                          "its source was not found (define the function with def)")
    tree, shift, candidates = found
    node = _choose(f, candidates, shift)
    fdef = ast.FunctionDef(name=_bound_name(tree, node), args=node.args,
                           body=[ast.copy_location(ast.Return(value=node.body), node.body)],
                           decorator_list=[], returns=None, type_comment=None)
    if "type_params" in ast.FunctionDef._fields:
        fdef.type_params = []
    fdef = copy.deepcopy(ast.copy_location(fdef, node))
    # numbered from 1 at the lambda's line, as a def's tree is from its first line
    ast.increment_lineno(fdef, 1 - node.lineno)
    return fdef, code.co_filename, line - 1


def _readings(f, lines, first):
    """``(tree, shift)`` for each way of reading the source (absolute line = line + shift):
    the statement's lines from the lambda's on, dedented; the same in parentheses (a
    lambda continued over lines); the whole file (a lambda inside a statement begun on an
    earlier line)."""
    text = textwrap.dedent("".join(lines))
    for src, shift in ((text, first - 1), (f"(\n{text}\n)", first - 2)):
        try:
            yield ast.parse(src), shift
        except (SyntaxError, ValueError):
            pass
    try:
        whole, _ = inspect.findsource(f)
        yield ast.parse("".join(whole)), 0
    except (OSError, SyntaxError, ValueError):
        pass


def _signature(node):
    """A lambda's parameters as :func:`_code_signature` gives a function's."""
    a = node.args
    return (tuple(p.arg for p in a.posonlyargs + a.args), len(a.posonlyargs),
            tuple(p.arg for p in a.kwonlyargs), a.vararg.arg if a.vararg else None,
            a.kwarg.arg if a.kwarg else None, len(a.defaults),
            tuple(sorted(p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)))


def _code_signature(f):
    """The parameters of ``f``: positional names, how many positional-only, keyword-only
    names, ``*args`` / ``**kwargs`` names, how many defaults, the keyword-only defaults."""
    c = f.__code__
    n, k = c.co_argcount, c.co_kwonlyargcount
    rest = list(c.co_varnames[n + k:])
    vararg = rest.pop(0) if c.co_flags & inspect.CO_VARARGS else None
    kwarg = rest.pop(0) if c.co_flags & inspect.CO_VARKEYWORDS else None
    return (c.co_varnames[:n], c.co_posonlyargcount, c.co_varnames[n:n + k], vararg, kwarg,
            len(f.__defaults__ or ()), tuple(sorted(f.__kwdefaults__ or ())))


def _choose(f, candidates, shift):
    """The candidate that is ``f``: the only one, or the one whose compiled code is ``f``'s
    (and whose literal defaults are ``f``'s); lambdas written alike are the same function."""
    if len(candidates) == 1:
        return candidates[0]
    want = _code_key(f.__code__)
    same = [n for n in candidates
            if _compiled_key(n, f, shift) == want and _defaults_agree(n, f)]
    if same and all(ast.dump(n) == ast.dump(same[0]) for n in same):
        return same[0]
    raise SourceError(f"a lambda among {len(candidates)} on one line that cannot be told "
                      "apart", f.__code__.co_firstlineno, f.__code__.co_filename,
                      "define the function with def (or put the lambda on a line of its own)")


def _code_key(code):
    """What a function's code does: its bytecode, constants (nested code compared the same
    way, not by position), names and variables."""
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars


def _compiled_key(node, f, shift):
    """The code key of the lambda ``node`` compiled where ``f``'s free variables are an
    enclosing function's locals (as they are for ``f``), at ``f``'s lines."""
    lam = copy.deepcopy(node)
    ast.increment_lineno(lam, shift)
    free = f.__code__.co_freevars
    if free:
        none = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[])
        outer = ast.FunctionDef(name="outer", args=none, body=[
            ast.Assign(targets=[ast.Name(v, ast.Store()) for v in free],
                       value=ast.Constant(None)),
            ast.Return(value=lam)], decorator_list=[], returns=None, type_comment=None)
        if "type_params" in ast.FunctionDef._fields:
            outer.type_params = []
        body = [ast.copy_location(outer, lam)]
    else:
        body = [ast.copy_location(ast.Expr(value=lam), lam)]
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    try:
        code = compile(module, f.__code__.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    todo = [code]
    while todo:   # the outermost lambda's code, breadth first
        c = todo.pop(0)
        if c.co_name == _LAMBDA:
            return _code_key(c)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType)]
    return None


def _defaults_agree(node, f):
    """Do the lambda's literal defaults equal ``f``'s (others cannot be compared)?"""
    for d, v in zip(node.args.defaults, f.__defaults__ or ()):
        try:
            lit = ast.literal_eval(d)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if type(lit) is not type(v) or repr(lit) != repr(v):
            return False
    return True


def _bound_name(tree, node):
    """The variable ``node`` is assigned to (``sq = lambda x: ...``), else ``f``."""
    for n in ast.walk(tree):
        if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and n.value is node:
            target = n.targets[0] if isinstance(n, ast.Assign) else n.target
            if isinstance(target, ast.Name):
                return target.id
    return "f"
