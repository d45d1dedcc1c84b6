"""Reverse mode: a forward sweep, then the adjoint statements ``gx += ...`` in reverse
order, read off the primitive's ``partials`` or ``rrule`` pullback run on symbols.

Values the reverse sweep needs and that may be overwritten later (anything
assigned twice or inside a loop) are pushed on ``stack`` right after they are
computed and popped just before the adjoint statements that read them.  Branches
push which way they went (unless the test can simply be evaluated again) and loops
push their iteration count (unless they run over a ``range`` that can be reversed).
"""
from __future__ import annotations

import ast as _ast
import re

from . import runtime
from .codegen import BaseGen, index_value, names_in
from .errors import SourceError
from .ir import Break, If, Keep, Loop, Op
from .symbolic import ADD, ATOM, Sym, SymTrace, Unknowable, render_const

__all__ = ["ReverseGen"]


class ReverseGen(BaseGen):
    """A forward sweep, then the adjoint statements in reverse order."""

    def __init__(self, fn, active_inputs, scalar_params, transform, split=False):
        super().__init__(fn, active_inputs, scalar_params)
        self.transform = transform  # f -> name of its generated vjp (for user calls)
        self.split = split
        self.stack = None
        self.restored = set()       # loop targets the reverse loop sets again
        self.accumulated = set()    # adjoint names that receive contributions
        self.ct = None
        self.pb_unstable = set()
        self.list_adjoints = {}     # adjoint lists of list arguments: gx -> x
        self._containers = None     # see containers()

    def check_lists(self):
        """A list argument used whole would get a list as adjoint, which ``+=`` would
        concatenate: refuse it (arrays work)."""
        for p, kind in zip(self.fn.params, self.scalar_params):
            if kind == "l" and p in self.active and p not in self.lists:
                raise SourceError(f"the list argument {p!r} used as a whole (not only indexed)",
                                  self.fn.first_line, self.fn.filename,
                                  "pass a NumPy array instead of a list")

    def stack_name(self):
        if self.stack is None:
            self.stack = self.fresh("stack")
        return self.stack

    def g(self, v):
        return self.gname(v)

    def containers(self):
        """Names that may hold a pytree (a dict, or a tuple of arrays): the arguments of
        kind 't', what is read out of them, and copies either way. Their adjoints are
        pytrees too, added leaf by leaf (``runtime.add_tree``)."""
        if self._containers is None:
            ops = [s for s, _ in self.walk(self.fn.body) if isinstance(s, Op)]
            names = {p for p, k in zip(self.fn.params, self.scalar_params) if k == "t"}
            grown = bool(names)
            while grown:
                more = {s.target for s in ops if s.kind in ("sub", "copy") and s.args and
                        s.args[0].is_name and s.args[0].name in names}
                more |= {s.args[0].name for s in ops if s.kind == "copy" and s.args and
                         s.args[0].is_name and s.target in names}
                grown = not more <= names
                names |= more
            self._containers = names
        return self._containers

    # -- one assignment -----------------------------------------------------------------------
    def acc(self, target_var, contribution):
        """``gx += c`` (``gx -= c`` for a negation; ``gx = gx + c`` for arrays)."""
        gv = self.g(target_var)
        self.accumulated.add(gv)
        if target_var in self.packs:
            # a list passed to one call: its adjoint (a list) is that call's contribution
            return f"{gv} = {contribution.text if isinstance(contribution, Sym) else contribution}"
        if target_var in self.containers():  # a pytree's adjoint: added leaf by leaf
            self.namespace["add_tree"] = runtime.add_tree
            return (f"{gv} = add_tree({gv}, "
                    f"{contribution.text if isinstance(contribution, Sym) else contribution})")
        if isinstance(contribution, Sym):
            neg = contribution.neg
            c, prec = (neg.text, neg.prec) if neg is not None else (contribution.text,
                                                                    contribution.prec)
            op = "-" if neg is not None else "+"
        else:
            c, prec, op = contribution, ATOM, "+"
        if target_var in self.arrays:
            if prec <= ADD:
                c = f"({c})"
            return f"{gv} = {gv} {op} {c}"
        return f"{gv} {op}= {c}"

    def op(self, op):
        """(forward lines, reverse lines) for one assignment."""
        v = op.target
        fwd = [self.primal_line(op)]
        if v not in self.active or id(op) not in self.live:
            return fwd, []
        gv = self.g(v)
        rev = []
        actives = [i for i, a in enumerate(op.args) if self.is_active(a)]
        if op.kind == "inactive":
            pass
        elif op.kind == "copy":
            if actives:
                rev.append(self.acc(op.args[0].name, Sym(gv, None)))
        elif op.kind == "pack":   # the adjoint of a list is a list: element i goes to args[i]
            for i in actives:
                rev.append(self.acc(op.args[i].name, f"{gv}[{i}]"))
        elif op.kind == "sub":
            if actives:
                base = op.args[0].name
                gb = self.g(base)
                if base in self.lists:
                    self.list_adjoints[gb] = base
                    rev.append(f"{gb}[{op.index}] += {gv}")
                else:
                    self.namespace["add_at"] = runtime.add_at
                    self.accumulated.add(gb)
                    rev.append(f"{gb} = add_at({gb}, {base}, {index_value(op.index)}, {gv})")
        elif op.kind == "prim":
            try:
                rev = self.symbolic(op, actives)
            except Exception:
                name = self.prim_ref(op.fn)
                self.namespace["pullback"] = runtime.pullback
                pb = self.pullback_name(v)
                needs = self.tuple_text("True" if i in actives else "False"
                                        for i in range(len(op.args)))
                fwd = [f"{v}, {pb} = pullback({name}, "
                       f"{self.tuple_text(a.src() for a in op.args)}, {needs}, "
                       f"{self.params_text(op)})"]
                rev = self.spread(pb, gv, op, actives)
        elif op.kind in ("call", "opaque"):
            pb = self.pullback_name(v)
            args = self.tuple_text(a.src() for a in op.args)
            if op.kind == "call":
                name = self.transform(op.fn)
                fwd = [f"{v}, {pb} = {name}({', '.join(a.src() for a in op.args)})"]
            else:
                self.namespace[op.fname] = op.fn
                self.namespace["vjp_call"] = runtime.vjp_call
                act = self.tuple_text("True" if i in actives else "False"
                                      for i in range(len(op.args)))
                kw = "{" + ", ".join(f"{k!r}: {o.src() if not isinstance(o, str) else o}"
                                     for k, o in op.params.items()) + "}"
                fwd = [f"{v}, {pb} = vjp_call({op.fname}, {args}, {act}, {kw})"]
            rev = self.spread(pb, gv, op, actives)
        if v in self.unstable and rev:
            rev.append(f"{gv} = 0.0")
        elif v in self.unstable and v in self.active:
            rev.append(f"{gv} = 0.0")
        return fwd, rev

    def live_adjoints(self):
        """The assignments whose adjoint may be nonzero when the reverse sweep reaches them.

        The others (a value never used on the way to the output, or used only where no
        derivative flows) get no adjoint statements: their adjoint would be the scalar
        ``0.0``, which a pullback expecting an array cotangent rejects, and work anyway.
        The analysis runs the reverse sweep on sets of names whose adjoint may be nonzero
        (branches: the union; loops: until nothing changes).
        """
        live = set()

        def block(body, nz):
            for s in reversed(body):
                if isinstance(s, Op):
                    if s.target in nz and s.target in self.active:
                        live.add(id(s))
                        nz |= {a.name for a in s.args if self.is_active(a)}
                    if s.target in self.unstable:
                        nz.discard(s.target)  # the reset after its adjoint statements
                elif isinstance(s, If):
                    nz = block(s.body, set(nz)) | block(s.orelse, set(nz))
                elif isinstance(s, Loop):
                    head = set(nz)
                    while True:
                        grown = head | block(s.body, set(head))
                        if grown == head:
                            break
                        head = grown
                    nz = head
            return nz

        block(self.fn.body, {self.fn.outputs[0]})
        return live

    def pullback_name(self, v):
        pb = self.fresh(f"{v}_pullback")
        if v in self.unstable:
            self.pb_unstable.add(pb)
        return pb

    def spread(self, pb, gv, op, actives):
        if not actives:
            return []
        if len(actives) == 1:
            i = actives[0]
            return [self.acc(op.args[i].name, f"{pb}({gv})[{i}]")]
        if self.ct is None:
            self.ct = self.fresh("ct")
        lines = [f"{self.ct} = {pb}({gv})"]
        for i in actives:
            lines.append(self.acc(op.args[i].name, f"{self.ct}[{i}]"))
        return lines

    def symbolic(self, op, actives):
        trace = SymTrace(self.local_names)
        args, params = self.sym_args(trace, op)
        ans = trace.sym(op.target)
        trace.remember(op.fn, args, params, ans)
        g = trace.sym(self.g(op.target), lin=True)
        prim = op.fn
        n = len(op.args)
        if prim.fast_partials is not None:
            ps = prim.fast_partials.fn(ans, *args, **params)
            cts = [None if (p is None or i not in actives) else p * g
                   for i, p in enumerate(ps)]
        else:
            if not prim.has_rrule:
                raise Unknowable("no rrule")
            _, pb = prim.vjp_rule(*args, needs=tuple(i in actives for i in range(n)), **params)
            cts = pb(g)
            if not isinstance(cts, (tuple, list)):
                cts = (cts,)
        if len(cts) != n:
            raise Unknowable("pullback arity")
        self.namespace.update(trace.used)
        lines = []
        for i in actives:
            c = cts[i]
            if c is None:
                continue
            if not isinstance(c, Sym):
                c = Sym(render_const(c)[0], trace)
            if self.needs_unbroadcast(op, i):
                self.namespace["unbroadcast"] = runtime.unbroadcast
                neg = c.neg
                inner = neg if neg is not None else c
                wrapped = Sym(f"unbroadcast({inner.text}, {op.args[i].name})", trace)
                c = Sym(f"-{wrapped.text}", trace, 14, neg=wrapped) if neg is not None else wrapped
            lines.append(self.acc(op.args[i].name, c))
        return lines

    # -- blocks -------------------------------------------------------------------------------
    def block(self, body, ind, btail=()):
        """(forward lines, reverse lines) of a block; the reverse lines are already reversed.

        ``btail``: statements the forward sweep runs just before a ``break`` (the branch
        flags of the enclosing ifs, which must be the last things pushed).
        """
        fwd, rev_parts = [], []
        for s in body:
            f, r = self.stmt(s, ind, btail)
            fwd += f
            rev_parts.append(r)
        rev = []
        for r in reversed(rev_parts):
            rev += r
        return fwd, rev

    def stmt(self, s, ind, btail=()):
        inner = ind + "    "
        if isinstance(s, Op):
            fwd, rev = self.op(s)
            need = set()
            for line in rev:
                need |= names_in(line)
            need = sorted(n for n in need if (n in self.unstable and n not in self.restored
                                              and n not in self.gnames.values() and n != self.ct
                                              and n in self.counts) or n in self.pb_unstable)
            if need:
                st = self.stack_name()
                one = need[0] if len(need) == 1 else None
                fwd.append(f"{st}.append({one if one else '(' + ', '.join(need) + ')'})")
                rev = [f"{', '.join(need)} = {st}.pop()"] + rev
            return [ind + x for x in fwd], [ind + x for x in rev]
        if isinstance(s, Keep):
            return [ind + s.text], []
        if isinstance(s, Break):
            return [ind + x for x in btail] + [ind + "break"], []
        if isinstance(s, If):
            raises = [_raises(s.body), _raises(s.orelse)]
            if any(raises) and not all(raises):
                # a completed run went the other way: nothing to record
                bf, br = self.block(s.body, inner, btail)
                of, orv = self.block(s.orelse, inner, btail)
                fwd = [f"{ind}if {s.test}:"] + (bf or [inner + "pass"])
                if of:
                    fwd += [f"{ind}else:"] + of
                return fwd, [x[4:] for x in (orv if raises[0] else br)]
            stable = all(n not in self.unstable for n in names_in(s.test))
            st = None if stable else self.stack_name()
            push_t = () if stable else (f"{st}.append(True)",)
            push_f = () if stable else (f"{st}.append(False)",)
            bf, br = self.block(s.body, inner, tuple(push_t) + tuple(btail))
            of, orv = self.block(s.orelse, inner, tuple(push_f) + tuple(btail))
            if (not br and not orv) or stable:
                if not br and not orv and not stable:
                    # nothing to reverse: run it again without the flags
                    bf, _ = self.block(s.body, inner, btail)
                    of, _ = self.block(s.orelse, inner, btail)
                fwd = [f"{ind}if {s.test}:"] + (bf or [inner + "pass"])
                if of:
                    fwd += [f"{ind}else:"] + of
                if not br and not orv:
                    return fwd, []
                test = s.test
            else:
                fwd = [f"{ind}if {s.test}:"] + _ending(bf, inner + push_t[0], s.body)
                fwd += [f"{ind}else:"] + _ending(of, inner + push_f[0], s.orelse)
                test = f"{st}.pop()"
            if br:
                rev = [f"{ind}if {test}:"] + br
                if orv:
                    rev += [f"{ind}else:"] + orv
            else:
                rev = [f"{ind}if not ({test}):" if stable else f"{ind}if not {test}:"] + orv
            return fwd, rev
        if isinstance(s, Loop):
            reversible = (not s.is_while and s.target is not None and s.range_args is not None
                          and self.counts.get(s.target, 0) == 1
                          and all(n not in self.unstable for a in s.range_args
                                  for n in names_in(a))
                          and not _has_break(s.body))
            if reversible and not self.split:
                # the reverse loop sets the loop variable again: nothing to push for it.
                # (In a pullback closure that assignment would make it local to the
                # pullback, so there it is pushed like any other value.)
                self.restored.add(s.target)
            bf, br = self.block(s.body, inner)
            br = self.iteration_locals(s.body, br, inner)
            if not br:
                return [f"{ind}{s.header}:"] + (bf or [inner + "pass"]), []
            if reversible:
                uses_target = not self.split and any(s.target in names_in(x) for x in br)
                head = (f"for {s.target} in reversed(range({', '.join(s.range_args)}))"
                        if uses_target else f"for {s.target} in range({', '.join(s.range_args)})")
                return [f"{ind}{s.header}:"] + bf, [f"{ind}{head}:"] + br
            st = self.stack_name()
            cnt = self.fresh("count")
            fwd = [f"{ind}{cnt} = 0", f"{ind}{s.header}:", f"{inner}{cnt} += 1"] + bf + \
                  [f"{ind}{st}.append({cnt})"]
            rev = [f"{ind}for _ in range({st}.pop()):"] + br
            return fwd, rev
        raise AssertionError(type(s))

    def iteration_locals(self, body, rev, ind):
        """Inside a loop, a value defined and used only in one iteration starts its adjoint
        with ``gv = ...`` (its first contribution) instead of ``gv += ...`` and a reset."""
        defined = {}
        used_in_text = set()
        for s, depth in self.walk(self.fn.body):
            if isinstance(s, If):
                used_in_text |= names_in(s.test)
            elif isinstance(s, Loop):
                used_in_text |= names_in(s.header)
            elif isinstance(s, Keep):
                used_in_text |= names_in(s.text)
            elif isinstance(s, Op):
                for t in (s.text, s.index):
                    if t:
                        used_in_text |= names_in(t)
        direct = [s for s in body if isinstance(s, Op)]
        pos = {id(s): k for k, s in enumerate(body)}
        for s in direct:
            defined.setdefault(s.target, []).append(s)
        local = set()
        for v, defs in defined.items():
            if len(defs) != 1 or self.counts.get(v) != 1 or v in self.fn.params or \
                    v in self.fn.outputs or v in used_in_text or v not in self.active:
                continue
            k = pos[id(defs[0])]
            ok = True
            for s, _ in self.walk(self.fn.body):
                if not isinstance(s, Op) or s is defs[0]:
                    continue
                names = {a.name for a in s.args if a.is_name} | {
                    o.name for o in s.params.values() if not isinstance(o, str) and o.is_name}
                if v in names and (id(s) not in pos or pos[id(s)] <= k):
                    ok = False
                    break
            if ok:
                local.add(v)
        if not local:
            return rev
        out = list(rev)
        for v in local:
            g = self.gnames.get(v)
            if g is None:
                continue
            pat = re.compile(rf"\b{g}\b")
            first = None
            for k, line in enumerate(out):
                if pat.search(line):
                    first = k
                    break
            if first is None:
                continue
            line = out[first]
            m = re.match(rf"^{ind}{g} ([+-])= (.*)$", line) or \
                re.match(rf"^{ind}{g} = {g} ([+-]) (.*)$", line)
            if not m:
                continue
            sign, e = m.groups()
            later = any(re.match(rf"^\s*{g} [+-]= ", x) for x in out[first + 1:])
            if sign == "+" and later and not _fresh_value(e):
                continue  # gv = gs, then gv += ... would change gs's object too
            if sign == "-":
                e = f"-({e})" if not re.fullmatch(r"[\w.]+", e) else f"-{e}"
            out[first] = f"{ind}{g} = {e}"
            # the reset after the definition is no longer needed
            for k in range(len(out) - 1, first, -1):
                if out[k] == f"{ind}{g} = 0.0":
                    del out[k]
                    break
        return out

    def generate(self, name, argnums, out_tuple):
        if self.fn.out_is_tuple:
            raise SourceError("reverse mode of a function returning a tuple",
                              self.fn.first_line, self.fn.filename,
                              "wg.source.grad needs a scalar output")
        self.check_lists()
        self.live = self.live_adjoints()
        fwd, rev = self.block(self.fn.body, "    ")
        out = self.fn.outputs[0]
        ps = self.fn.params
        wrt = ps if self.split else [ps[i] for i in argnums]
        # (a parameter assigned again has its adjoint reset: the reset is read by the return)
        rev = _peephole(rev, {self.g(p) for p in wrt if p in self.active})
        gout = self.g(out) if out in self.active else None
        # (in a pullback every parameter gets an entry; integers get 0.0)
        read = set()
        for line in rev:
            read |= names_in(line)
        read &= set(self.gnames.values())
        init = sorted((self.accumulated | read | {self.g(p) for p in wrt if p in self.active})
                      - {gout} - set(self.list_adjoints))
        init_lines = [f"    {' = '.join(init)} = 0.0"] if init else []
        init_lines += [f"    {g} = [0.0] * len({x})" for g, x in sorted(self.list_adjoints.items())]
        grads = [self.g(p) if p in self.active else "0.0" for p in wrt]
        st = [f"    {self.stack} = []"] if self.stack else []
        sig = ", ".join(f"{p}={self.fn.defaults[p]}" if p in self.fn.defaults else p for p in ps)
        if not self.split:
            lines = [f"def {name}({sig}):"] + st + fwd + init_lines
            if gout:
                if out in self.arrays:  # may not be a scalar: checked when the program runs
                    self.namespace["seed"] = runtime.seed
                    lines.append(f"    {gout} = seed({out})")
                else:
                    lines.append(f"    {gout} = 1.0")
            else:  # a constant output: still a number (None or a string is refused)
                self.namespace["seed"] = runtime.seed
                lines.append(f"    seed({out})")
            lines += rev
            if out_tuple:
                lines.append(f"    return {self.tuple_text(grads)}")
            else:
                lines.append(f"    return {grads[0]}")
            return "\n".join(lines) + "\n", (fwd, init_lines, gout, rev)
        # split: the forward sweep returns its value and a pullback closing over it
        gparam = gout or self.fresh("g" + out)
        lines = [f"def {name}({sig}):"] + st + fwd
        lines.append(f"    def pullback({gparam}):")
        lines += ["    " + x for x in init_lines]
        lines += ["    " + x for x in rev]
        lines.append(f"        return {self.tuple_text(grads)}")
        lines.append(f"    return {out}, pullback")
        return "\n".join(lines) + "\n", None


_RESET = re.compile(r"^(\s*)(\w+) = 0\.0$")


def _peephole(lines, returned=()):
    """``gt = 0.0`` then ``gt += c`` is ``gt = c``; resets never read again (nor
    ``returned``) are dropped."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _RESET.match(line)
        if m and i + 1 < len(lines):
            ind, g = m.groups()
            nxt = lines[i + 1]
            m2 = re.match(rf"^{ind}{g} ([+-])= (.*)$", nxt)
            if m2 and m2.group(1) == "+" and not _fresh_value(m2.group(2)):
                # gt = gc would share gc's object, and a later gt += ... (in place for a
                # 0-d array) would change gc too: keep the reset
                m2 = None
            m2 = m2 or re.match(rf"^{ind}{g} = {g} ([+-]) (.*)$", nxt)
            if m2:
                sign, e = m2.groups()
                if sign == "-":
                    e = f"-{e}" if re.fullmatch(r"[\w.]+(\(.*\))?", e) and not \
                        e.startswith("(") else f"-({e})"
                out.append(f"{ind}{g} = {e}")
                i += 2
                continue
        out.append(line)
        i += 1
    # a reset at the outermost level that nothing reads afterwards
    if out:
        base = min(len(x) - len(x.lstrip()) for x in out)
        keep = []
        for k, line in enumerate(out):
            m = _RESET.match(line)
            if m and len(m.group(1)) == base:
                g = m.group(2)
                if g not in returned and \
                        not any(re.search(rf"\b{g}\b", later) for later in out[k + 1:]):
                    continue
            keep.append(line)
        out = keep
    return out


def _fresh_value(text):
    """Does the expression build a new value (an operator at the top)?"""
    try:
        node = _ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (_ast.BinOp, _ast.UnaryOp))


def _has_break(body):
    for s in body:
        if isinstance(s, Break):
            return True
        if isinstance(s, If) and (_has_break(s.body) or _has_break(s.orelse)):
            return True
    return False


def _raises(body):
    """Does every path through the block end in a raise?"""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, Keep):
        return last.text.startswith("raise")
    if isinstance(last, If):
        return _raises(last.body) and _raises(last.orelse)
    return False


def _ending(lines, push, body):
    """Append the flag push to a branch, unless the branch ends in a break (which has it)
    or a raise."""
    if body and (isinstance(body[-1], Break) or (isinstance(body[-1], Keep) and
                                                 body[-1].text.startswith("raise"))):
        return lines
    return lines + [push]
