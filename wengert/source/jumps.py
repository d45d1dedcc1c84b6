"""Early exits removed: ``return`` and ``continue`` anywhere, ``break`` only at the end of
a branch.

The rest of a block moves into the branches that fall through, so every path ends at
the end; ``break`` (and ``raise``) stay, as the last statement of a branch.  A ``return``
inside a loop sets a flag and breaks out; the code after the loop runs only if the flag
is unset.  The pass rewrites syntax trees (``ast`` statements) before they are lowered.
"""
from __future__ import annotations

import ast
import copy

__all__ = ["Exit", "ExitRemover"]


class Exit(ast.stmt):
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
    if isinstance(last, (ast.Break, Exit, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _ends(last.body) and _ends(last.orelse)
    return False


def _may_exit(s):
    """Can a path through ``s`` jump out of the enclosing block (not counting inner loops)?"""
    if isinstance(s, (ast.Break, Exit, ast.Raise)):
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


class ExitRemover:
    """Removes the jumps of one function body, whose returns assign ``outputs``."""

    def __init__(self, outputs, out_is_tuple, names, error):
        self.outputs, self.out_is_tuple = outputs, out_is_tuple
        self.names, self.error = names, error   # fresh names; error(what, node) raises
        self._flag = None                       # the name of the "returned" flag, once needed

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
                    out.append(Exit(s.lineno))
                return out
            if isinstance(s, ast.Continue):
                out.append(Exit(s.lineno, kind="continue"))
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
                                         Exit(s.lineno)],
                                   orelse=[], lineno=s.lineno)
                    body = [after] + rest
                    i = 0
                    continue
                i += 1
                continue
            out.append(s)
            i += 1
        return out

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
