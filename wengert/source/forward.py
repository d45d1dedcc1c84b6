"""Forward mode: the seeds' Program B, each statement followed by its differential
``dx = ...``, read off the primitive's ``partials`` or ``frule`` run on symbols."""
from __future__ import annotations

from . import runtime
from .codegen import BaseGen, index_value
from .ir import Break, If, Keep, Loop, Op
from .symbolic import Sym, SymTrace, Unknowable, render_const

__all__ = ["ForwardGen"]


class ForwardGen(BaseGen):
    """Program B: each statement followed by its differential."""

    def __init__(self, fn, scalar_params, transform):
        super().__init__(fn, [p for p, k in zip(fn.params, scalar_params) if k != "i"],
                         scalar_params)
        self.transform = transform  # f -> name of its generated jvp (for user calls)

    def block(self, body, ind):
        lines = []
        for s in body:
            if isinstance(s, Op):
                for line in self.op(s):
                    lines.append(ind + line)
            elif isinstance(s, Keep):
                lines.append(ind + s.text)
            elif isinstance(s, Break):
                lines.append(ind + "break")
            elif isinstance(s, If):
                lines.append(f"{ind}if {s.test}:")
                lines += self.block(s.body, ind + "    ") or [ind + "    pass"]
                if s.orelse:
                    lines.append(f"{ind}else:")
                    lines += self.block(s.orelse, ind + "    ")
            elif isinstance(s, Loop):
                lines.append(f"{ind}{s.header}:")
                lines += self.block(s.body, ind + "    ") or [ind + "    pass"]
        return lines

    def tangent(self, operand):
        return self.dname(operand.name) if self.is_active(operand) else None

    def op(self, op):
        v = op.target
        if v not in self.active:
            return [self.primal_line(op)]
        dv = self.dname(v)
        if op.kind == "inactive":
            return [self.primal_line(op), f"{dv} = 0.0"]
        if op.kind == "copy":
            t = self.tangent(op.args[0])
            return [self.primal_line(op), f"{dv} = {t if t else '0.0'}"]
        if op.kind == "pack":   # the tangent of a list is the list of tangents
            ts = [self.tangent(a) or "0.0" for a in op.args]
            return [self.primal_line(op), f"{dv} = " + (
                f"[{', '.join(ts)}]" if op.text == "list" else self.tuple_text(ts))]
        if op.kind == "sub":
            base = op.args[0].name
            t = self.tangent(op.args[0])
            if not t:
                return [self.primal_line(op), f"{dv} = 0.0"]
            if base in self.fn.params and self.counts.get(base) == 1:
                # a parameter's tangent has its shape (the caller's, broadcast on entry)
                return [self.primal_line(op), f"{dv} = {t}[{op.index}]"]
            # any other tangent may still be the zero 0.0 on the path the program took
            self.namespace["tangent_at"] = runtime.tangent_at
            return [self.primal_line(op),
                    f"{dv} = tangent_at({t}, {base}, {index_value(op.index)})"]
        if op.kind == "prim":
            try:
                text = self.symbolic(op)
                line = self.primal_line(op)
                if text is None:
                    return [line, f"{dv} = 0.0"]
                if any(self.needs_unbroadcast(op, i) for i in range(len(op.args))
                       if self.is_active(op.args[i])):
                    self.namespace["broadcast_like"] = runtime.broadcast_like
                    text = f"broadcast_like({text}, {v})"
                return [line, f"{dv} = {text}"]
            except Exception:
                pass
            name = self.prim_ref(op.fn)
            self.namespace["pushforward"] = runtime.pushforward
            ts = [self.tangent(a) or "None" for a in op.args]
            return [f"{v}, {dv} = pushforward({name}, {self.tuple_text(a.src() for a in op.args)}"
                    f", {self.tuple_text(ts)}, {self.params_text(op)})"]
        if op.kind == "call":
            name = self.transform(op.fn)
            ts = [self.tangent(a) or "0.0" for a in op.args]
            return [f"{v}, {dv} = {name}({self.tuple_text(a.src() for a in op.args)}, "
                    f"{self.tuple_text(ts)})"]
        if op.kind == "opaque":
            self.namespace[op.fname] = op.fn
            self.namespace["jvp_call"] = runtime.jvp_call
            ts = [self.tangent(a) or "None" for a in op.args]
            kw = "{" + ", ".join(f"{k!r}: {o.src() if not isinstance(o, str) else o}"
                                 for k, o in op.params.items()) + "}"
            return [f"{v}, {dv} = jvp_call({op.fname}, {self.tuple_text(a.src() for a in op.args)}"
                    f", {self.tuple_text(ts)}, {kw})"]
        raise AssertionError(op.kind)

    def symbolic(self, op):
        """The tangent text of a primitive, from its rules; None if it is zero."""
        trace = SymTrace(self.local_names)
        args, params = self.sym_args(trace, op)
        ans = trace.sym(op.target)
        trace.remember(op.fn, args, params, ans)
        prim = op.fn
        tangents = [trace.sym(self.dname(a.name), lin=True) if self.is_active(a) else None
                    for a in op.args]
        if prim.fast_partials is not None:
            ps = prim.fast_partials.fn(ans, *args, **params)
            terms = []
            for p, t in zip(ps, tangents):
                if p is None or t is None:
                    continue
                terms.append(p * t)
            out = None
            for t in terms:
                out = t if out is None else out + t
        else:
            if not prim.has_frule:
                raise Unknowable("no frule")
            if not prim.symbolic_zeros and any(t is None for t in tangents):
                raise Unknowable("zeros needed")
            _, out = prim.jvp_rule(args, tangents, **params)
        if out is None:
            return None
        self.namespace.update(trace.used)
        if not isinstance(out, Sym):
            return render_const(out)[0]
        return out.text

    def generate(self, name):
        body = self.block(self.fn.body, "    ")
        ps = self.fn.params
        dps = [self.dname(p) for p in ps]
        outs = self.fn.outputs
        douts = []
        for o in outs:
            douts.append(self.dname(o) if o in self.active else "0.0")
        head = [f"def {name}(primals, tangents):",
                f"    {', '.join(ps)}{',' if len(ps) == 1 else ''} = primals",
                f"    {', '.join(dps)}{',' if len(dps) == 1 else ''} = tangents"]
        if self.fn.out_is_tuple:
            ret = f"    return ({', '.join(outs)},), ({', '.join(douts)},)"
        else:
            ret = f"    return {outs[0]}, {douts[0]}"
        return "\n".join(head + body + [ret]) + "\n", body
