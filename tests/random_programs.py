"""Random NumPy programs for the differential test: one description, two readings.

A program is a small syntax tree (statements over expressions whose shapes are
known when they are built).  ``Program.source()`` prints it as the text of a
Python module over ``numpy`` (what every engine, source mode included, runs);
``Program.run(args)`` interprets the same tree on plain NumPy and measures, on
the way, how far the inputs are from every kink (``abs`` at 0, ties of
``maximum``/``max``, the conditions of ``where`` and ``if``, poles and the edge
of ``log``'s domain).  The test keeps only points whose distance is
comfortable, so a disagreement between engines means a bug, not a kink.

Choices come from a ``Chooser``: ``RandomChooser(seed)`` for the long run (a
seed reproduces a program), ``HypothesisChooser(data)`` for hypothesis, which
shrinks a failing program towards the first option of every choice: the
options below are listed simplest first.
"""
from __future__ import annotations

import math
import random

import numpy as np

# -- choices ----------------------------------------------------------------------------------


class RandomChooser:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def index(self, weights):
        return self.r.choices(range(len(weights)), weights)[0]

    def int(self, lo, hi):
        return self.r.randint(lo, hi)

    def seed(self):
        return self.r.getrandbits(32)


class HypothesisChooser:
    def __init__(self, data):
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def index(self, weights):
        k = self.data.draw(self.st.integers(0, sum(weights) - 1))
        for i, w in enumerate(weights):
            if k < w:
                return i
            k -= w
        raise AssertionError

    def int(self, lo, hi):
        return self.data.draw(self.st.integers(lo, hi))

    def seed(self):
        return self.data.draw(self.st.integers(0, 2**32 - 1))


def pick(ch, options):
    """One of ``options``, a list of ``(weight, value)``; shrinks towards the first."""
    return options[ch.index([w for w, _ in options])][1]


def choice(ch, seq):
    return seq[ch.int(0, len(seq) - 1)]


# -- what a run measures ----------------------------------------------------------------------
class Monitor:
    """The smallest distance to a kink and the largest magnitude seen in one run."""

    def __init__(self):
        self.margin = math.inf
        self.magnitude = 0.0

    def kink(self, distance):
        d = float(np.min(distance)) if np.size(distance) else math.inf
        self.margin = min(self.margin, d)

    def value(self, v):
        if np.size(v):
            m = float(np.max(np.abs(v)))
            if not math.isfinite(m):
                raise FloatingPointError("not finite")
            self.magnitude = max(self.magnitude, m)
        return v


def top_gap(v, axis):
    """The gap between the largest and second largest entry along ``axis`` (an int, a
    tuple or None): max's kink."""
    v = np.asarray(v, float)
    if axis is None:
        v = v.reshape(-1)
        axis = 0
    if isinstance(axis, tuple):
        k = len(axis)
        v = np.moveaxis(v, axis, range(-k, 0))
        v = v.reshape(v.shape[:v.ndim - k] + (-1,))
        axis = -1
    if v.shape[axis] < 2:
        return math.inf
    s = np.sort(v, axis=axis)
    return np.take(s, -1, axis=axis) - np.take(s, -2, axis=axis)


# -- expressions ------------------------------------------------------------------------------
class Expr:
    shape: tuple = ()
    atomic = True    # prints without parentheses as the object of .attr or [...]
    root = None      # the variable this value is a view of, if any
    traced = False   # depends on the inputs (a plain array takes no traced writes)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)

    def wrap(self):
        return self.src() if self.atomic else f"({self.src()})"


class Name(Expr):
    def __init__(self, name, shape, traced):
        self.name, self.shape, self.root, self.traced = name, shape, name, traced

    def src(self):
        return self.name

    def ev(self, env, mon):
        return env[self.name]


class Const(Expr):
    def __init__(self, value):
        self.value = value
        self.shape = ()

    def src(self):
        return repr(self.value)

    def ev(self, env, mon):
        return self.value

    @property
    def atomic(self):  # (-1.5) ** 2, not -1.5 ** 2
        return self.value >= 0


class ArrayConst(Expr):
    def __init__(self, value):
        self.value = np.asarray(value, float)
        self.shape = self.value.shape

    def src(self):
        return f"np.array({self.value.tolist()!r})"

    def ev(self, env, mon):
        return self.value.copy()


class Op(Expr):
    """``fmt`` formatted with the arguments' text; ``fn`` computes it on their values.

    ``kink(*values)`` gives the distances to this operation's kinks; ``view`` says the
    result shares memory with the first argument (basic indexing, reshapes).
    """

    def __init__(self, fmt, args, fn, shape, kink=None, view=False, atomic=False):
        fmt = fmt.replace("{W}", "{%d}" % len(args))   # {W}: the first argument, wrapped
        self.fmt, self.args, self.fn, self.shape = fmt, args, fn, tuple(shape)
        self.kinkf, self.atomic = kink, atomic
        self.root = args[0].root if view else None
        self.traced = any(a.traced for a in args)

    def src(self):
        return self.fmt.format(*[a.src() for a in self.args], self.args[0].wrap())

    def ev(self, env, mon):
        vals = [a.ev(env, mon) for a in self.args]
        if self.kinkf is not None:
            mon.kink(self.kinkf(*vals))
        out = self.fn(*vals)
        if np.shape(out) != self.shape:
            raise AssertionError(f"generator: {self.src()} has shape {np.shape(out)}, "
                                 f"expected {self.shape}")
        return mon.value(out)


def call(fmt, args, fn, shape, **kw):
    """An operation printed as a call or subscript: atomic."""
    return Op(fmt, args, fn, shape, atomic=True, **kw)


def infix(sym, a, b, fn):
    return Op("({0} %s {1})" % sym, [a, b], fn, np.broadcast_shapes(a.shape, b.shape))


def broadcasts_into(small, big):
    try:
        return np.broadcast_shapes(small, big) == tuple(big)
    except ValueError:
        return False


def compatible(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


# -- statements -------------------------------------------------------------------------------
class Return(Exception):
    def __init__(self, value):
        self.value = value


class Assign:
    def __init__(self, name, expr):
        self.name, self.expr = name, expr

    def lines(self, ind):
        return [f"{ind}{self.name} = {self.expr.src()}"]

    def run(self, env, mon):
        env[self.name] = self.expr.ev(env, mon)


class AugAssign:
    def __init__(self, name, op, expr):
        self.name, self.op, self.expr = name, op, expr

    def lines(self, ind):
        return [f"{ind}{self.name} {self.op}= {self.expr.src()}"]

    def run(self, env, mon):
        v = self.expr.ev(env, mon)
        t = env[self.name]
        if isinstance(t, np.ndarray) and t.ndim:  # in place, as Python does on arrays
            {"+": np.add, "-": np.subtract, "*": np.multiply}[self.op](t, v, out=t)
        else:
            env[self.name] = {"+": t + v, "-": t - v, "*": t * v}[self.op]
        mon.value(env[self.name])


class SetItem:
    def __init__(self, name, index_src, index, expr):
        self.name, self.index_src, self.index, self.expr = name, index_src, index, expr

    def lines(self, ind):
        return [f"{ind}{self.name}[{self.index_src}] = {self.expr.src()}"]

    def run(self, env, mon):
        env[self.name][self.index] = self.expr.ev(env, mon)


class If:
    def __init__(self, cond, op, thresh, then, orelse):
        self.cond, self.op, self.thresh, self.then, self.orelse = cond, op, thresh, then, orelse

    def lines(self, ind):
        out = [f"{ind}if {self.cond.src()} {self.op} {self.thresh!r}:"]
        for s in self.then:
            out += s.lines(ind + "    ")
        if self.orelse:
            out.append(f"{ind}else:")
            for s in self.orelse:
                out += s.lines(ind + "    ")
        return out

    def run(self, env, mon):
        c = self.cond.ev(env, mon)
        mon.kink(abs(c - self.thresh))
        taken = c > self.thresh if self.op == ">" else c < self.thresh
        for s in (self.then if taken else self.orelse):
            s.run(env, mon)


class ReturnStmt:
    def __init__(self, expr):
        self.expr = expr

    def lines(self, ind):
        return [f"{ind}return {self.expr.src()}"]

    def run(self, env, mon):
        raise Return(self.expr.ev(env, mon))


class ForRange:
    def __init__(self, var, n, body):
        self.var, self.n, self.body = var, n, body

    def lines(self, ind):
        out = [f"{ind}for {self.var} in range({self.n}):"]
        for s in self.body:
            out += s.lines(ind + "    ")
        return out

    def run(self, env, mon):
        for i in range(self.n):
            env[self.var] = i
            for s in self.body:
                s.run(env, mon)


class ForRows:
    def __init__(self, var, over, body):
        self.var, self.over, self.body = var, over, body

    def lines(self, ind):
        out = [f"{ind}for {self.var} in {self.over.wrap()}:"]
        for s in self.body:
            out += s.lines(ind + "    ")
        return out

    def run(self, env, mon):
        for row in self.over.ev(env, mon):
            env[self.var] = row
            for s in self.body:
                s.run(env, mon)


# -- programs ---------------------------------------------------------------------------------
class Program:
    def __init__(self, params, shapes, body, ret):
        self.params, self.shapes, self.body, self.ret = params, shapes, body, ret

    def source(self, name="f"):
        lines = ["import numpy as np", "", "", f"def {name}({', '.join(self.params)}):"]
        for s in self.body:
            lines += s.lines("    ")
        lines.append(f"    return {self.ret.src()}")
        return "\n".join(lines) + "\n"

    def run(self, args):
        """``(value, monitor)`` on plain NumPy."""
        env = dict(zip(self.params, [a.copy() if isinstance(a, np.ndarray) else a
                                     for a in args]))
        mon = Monitor()
        with np.errstate(all="raise"):
            try:
                for s in self.body:
                    s.run(env, mon)
                out = self.ret.ev(env, mon)
            except Return as r:
                out = r.value
        return out, mon

    def inputs(self, rng):
        """Random arguments: Python floats for scalars, arrays otherwise, in [-1.5, 1.5]."""
        out = []
        for s in self.shapes:
            v = rng.uniform(-1.5, 1.5, s)
            out.append(float(v) if s == () else v)
        return tuple(out)


INPUT_SHAPES = [(3,), (), (2, 3), (4,), (3, 2), (6,), (2, 2)]
MARGIN = 0.02          # closest a kink may be, in the kink's own units
MAX_MAGNITUDE = 1e4    # larger intermediates make the comparisons ill-conditioned


class Builder:
    """Builds one random program from the choices of ``ch``."""

    def __init__(self, ch):
        self.ch = ch
        self.vars = {}        # name -> shape, what expressions may read
        self.fresh = set()    # temporaries that own their memory (may be written in place)
        self.traced = set()   # variables that depend on the inputs
        self.loop_ints = {}   # loop variable -> its bound
        self.ntemp = 0
        self.nloop = 0

    # -- expressions
    def name(self, n):
        return Name(n, self.vars[n], n in self.traced)

    def leaf(self):
        ch = self.ch
        names = sorted(self.vars)
        if names and pick(ch, [(5, True), (1, False)]):
            n = choice(ch, names)
            return self.name(n)
        return Const(choice(ch, [0.5, 2.0, -1.5, 0.25, 3.0, -0.75, 0.0, 1.0]))

    def expr(self, depth):
        ch = self.ch
        if depth <= 0:
            return self.leaf()
        kinds = [(3, "leaf"), (6, "unary"), (7, "binary"), (2, "power"), (1, "where"),
                 (3, "index"), (2, "reshape"), (3, "reduce"), (2, "dot"), (1, "gate")]
        k = pick(ch, kinds)
        if k == "leaf":
            return self.leaf()
        e = self.expr(depth - 1)
        if k == "index" and e.ndim:
            return self.index(e)
        if k == "reshape" and e.ndim and e.size > 1:
            return self.reshape(e)
        if k == "reduce" and e.ndim:
            return self.reduce(e)
        if k == "dot" and 1 <= e.ndim <= 2:
            return self.dot(e, depth)
        if k == "where":
            return self.where(e, depth)
        if k == "gate":
            return self.gate(e, depth)
        if k == "power":
            return self.power(e, depth)
        if k == "binary":
            return self.binary(e, depth)
        return self.unary(e, depth)

    def positive(self, e):
        """An expression of ``e`` that is positive, away from 0 (for log, sqrt, powers)."""
        forms = [
            ("(1.0 + {0} * {0})", lambda v: 1.0 + v * v),
            ("np.exp({0})", np.exp),
            ("(2.0 + np.tanh({0}))", lambda v: 2.0 + np.tanh(v)),
            ("(1.5 + np.cos({0}))", lambda v: 1.5 + np.cos(v)),
            ("np.abs({0})", np.abs),
        ]
        i = self.ch.int(0, len(forms) - 1)
        fmt, fn = forms[i]
        kink = (lambda v: np.abs(v) * 4) if i == 4 else None  # |v| small: abs's kink, a pole
        return Op(fmt, [e], fn, e.shape, kink=kink, atomic=i in (1, 4))

    def unary(self, e, depth):
        ch = self.ch
        forms = ["sin", "cos", "tanh", "exp", "neg", "square", "abs", "absbuiltin", "log",
                 "sqrt", "log1p"]
        f = choice(ch, forms)
        s = e.shape
        if f in ("sin", "cos", "tanh", "exp", "square"):
            return call(f"np.{f}({{0}})", [e], getattr(np, f), s)
        if f == "neg":
            return Op("(-{0})", [e], np.negative, s)
        if f == "abs":
            return call("np.abs({0})", [e], np.abs, s, kink=np.abs)
        if f == "absbuiltin":
            return call("abs({0})", [e], abs, s, kink=np.abs)
        if f == "log":
            p = self.positive(e)
            return call("np.log({0})", [p], np.log, s)
        if f == "sqrt":
            p = self.positive(e)
            return call("np.sqrt({0})", [p], np.sqrt, s)
        return call("np.log1p({0} * {0})", [e], lambda v: np.log1p(v * v), s)

    def partner(self, shape, depth):
        """An expression whose shape broadcasts with ``shape``."""
        b = self.expr(depth - 1)
        if compatible(b.shape, shape):
            return b
        return self.fit(b, shape)

    def fit(self, b, shape):
        """``b`` made to broadcast into ``shape``: reshaped, reduced along an axis, or to
        a scalar."""
        ch = self.ch
        if broadcasts_into(b.shape, shape):
            return b
        if b.size == math.prod(shape) and b.ndim and pick(ch, [(1, True), (1, False)]):
            return self.reshape_to(b, shape)
        if b.ndim >= 1:
            for axis in range(b.ndim):
                kept = b.shape[:axis] + (1,) + b.shape[axis + 1:]
                if broadcasts_into(kept, shape) and pick(ch, [(1, True), (1, False)]):
                    return self.reduce_axis(b, axis, True)
        return self.to_scalar(b)

    def to_scalar(self, e):
        if e.ndim == 0:
            return e
        ch = self.ch
        k = pick(ch, [(4, "sum"), (2, "mean"), (1, "max"), (1, "first"), (1, "prod"),
                      (1, "dot")])
        if k == "first":
            idx = (0,) * e.ndim
            return call("{W}[%s]" % ", ".join("0" * e.ndim), [e], lambda v: v[idx], (),
                        view=True)
        if k == "dot" and e.ndim == 1:
            return call("np.dot({0}, {0})", [e], lambda v: np.dot(v, v), ())
        if k == "prod" and e.size <= 6:
            return call("np.prod({0})", [e], np.prod, ())
        if k == "max":
            return call("np.max({0})", [e], np.max, (), kink=lambda v: top_gap(v, None))
        if k == "mean":
            return call("{W}.mean()", [e], np.mean, ())
        return call("np.sum({0})", [e], np.sum, ())

    def binary(self, a, depth):
        ch = self.ch
        b = self.partner(a.shape, depth)
        if pick(ch, [(1, False), (1, True)]):
            a, b = b, a
        op = choice(ch, ["+", "*", "-", "/", "maximum", "np.add", "np.multiply", "np.subtract"])
        if op == "/":
            if pick(ch, [(1, True), (1, False)]):
                p = self.positive(b)
                return infix("/", a, p, np.divide)
            return Op("({0} / {1})", [a, b], np.divide, np.broadcast_shapes(a.shape, b.shape),
                      kink=lambda u, v: np.abs(v) * 0.2)
        if op == "maximum":
            return call("np.maximum({0}, {1})", [a, b], np.maximum,
                        np.broadcast_shapes(a.shape, b.shape), kink=lambda u, v: np.abs(u - v))
        if op.startswith("np."):
            return call(op + "({0}, {1})", [a, b], getattr(np, op[3:]),
                        np.broadcast_shapes(a.shape, b.shape))
        return infix(op, a, b, {"+": np.add, "*": np.multiply, "-": np.subtract}[op])

    def power(self, a, depth):
        ch = self.ch
        k = pick(ch, [(3, "int"), (2, "float"), (2, "traced"), (1, "rpow")])
        if k == "int":
            n = choice(ch, [2, 3, 1, 4])
            if pick(ch, [(1, True), (1, False)]):
                return Op("({W} ** %d)" % n, [a], lambda v: v ** n, a.shape)
            return call("np.power({0}, %r)" % float(n), [a], lambda v: np.power(v, float(n)),
                        a.shape)
        if k == "float":
            y = choice(ch, [0.5, 1.5, -1.0, 2.5, -0.5])
            p = self.positive(a)
            return Op("({0} ** %r)" % y, [p], lambda v: v ** y, a.shape)
        if k == "rpow":
            return Op("(2.0 ** {0})", [a], lambda v: 2.0 ** v, a.shape)
        b = self.partner(a.shape, depth)
        p = self.positive(a)
        shape = np.broadcast_shapes(a.shape, b.shape)
        if pick(ch, [(1, True), (1, False)]):
            return Op("({0} ** {1})", [p, b], np.power, shape)
        return call("np.power({0}, {1})", [p, b], np.power, shape)

    def where(self, a, depth):
        ch = self.ch
        c = self.fit(self.expr(depth - 1), a.shape)
        b = self.fit(self.expr(depth - 1), a.shape)
        t = choice(ch, [0.0, 0.5, -0.3])
        op = choice(ch, [">", "<"])
        cmp = np.greater if op == ">" else np.less
        if pick(ch, [(3, False), (1, True)]):  # two conditions: (c > t) & (d < 0.5)
            d = self.fit(self.expr(depth - 1), a.shape)
            how = choice(ch, ["&", "|", "np.logical_and", "np.logical_or"])
            join = {"&": np.logical_and, "|": np.logical_or}.get(how) or getattr(np, how[3:])
            left, right = "({0} %s %r)" % (op, t), "({3} < 0.5)"
            text = f"{how}({left}, {right})" if how.startswith("np.") else \
                f"({left} {how} {right})"
            return call("np.where(%s, {1}, {2})" % text, [c, a, b, d],
                        lambda cv, av, bv, dv: np.where(join(cmp(cv, t), dv < 0.5), av, bv),
                        a.shape, kink=lambda cv, av, bv, dv: np.minimum(
                            np.min(np.abs(cv - t)), np.min(np.abs(dv - 0.5))))
        return call("np.where({0} %s %r, {1}, {2})" % (op, t), [c, a, b],
                    lambda cv, av, bv: np.where(cmp(cv, t), av, bv), a.shape,
                    kink=lambda cv, av, bv: np.abs(cv - t))

    def gate(self, a, depth):
        """A number that a comparison decides, as Python code writes it: ``int(c > t)``,
        ``float(...)``, or the length of an array."""
        ch = self.ch
        arrays = [n for n in sorted(self.vars) if self.vars[n]]
        if arrays and pick(ch, [(3, False), (1, True)]):
            n = choice(ch, arrays)
            k = self.vars[n][0]
            return Op("({0} * len({1}))", [a, self.name(n)], lambda av, bv: av * k, a.shape)
        c = self.to_scalar(self.expr(depth - 1))
        t = choice(ch, [0.0, 0.5])
        conv = choice(ch, ["int", "float"])
        return Op("({0} * (%s({1} > %r) + 1))" % (conv, t), [a, c],
                  lambda av, cv: av * ((1 if cv > t else 0) + 1), a.shape,
                  kink=lambda av, cv: abs(cv - t))

    def index(self, e):
        ch = self.ch
        s = e.shape
        n = s[0]
        k = pick(ch, [(3, "int"), (3, "slice"), (2, "list"), (1, "array"), (1, "none"),
                      (2, "axis1"), (1, "mask"), (1, "reverse"), (1, "tail"), (1, "ellipsis")])
        rest = s[1:]
        if k == "int":
            i = ch.int(-n, n - 1)
            loops = [v for v, bound in self.loop_ints.items() if bound <= n]
            if loops and pick(ch, [(1, False), (1, True)]):
                v = choice(ch, loops)
                return call("{W}[{1}]", [e, _LoopVar(v)], lambda a, j: a[j], rest, view=True)
            return call("{W}[%d]" % i, [e], lambda a: a[i], rest, view=True)
        if k == "slice":
            lo = ch.int(0, n - 1)
            hi = ch.int(lo + 1, n)
            step = choice(ch, [1, 2])
            sl = slice(lo, hi, step)
            text = f"{lo}:{hi}" + (f":{step}" if step != 1 else "")
            m = len(range(*sl.indices(n)))
            return call("{W}[%s]" % text, [e], lambda a: a[sl], (m,) + rest, view=True)
        if k == "reverse":
            step = choice(ch, [-1, -2])
            m = len(range(n)[::step])
            return call("{W}[::%d]" % step, [e], lambda a: a[::step], (m,) + rest, view=True)
        if k == "tail":
            j = ch.int(1, n)
            return call("{W}[-%d:]" % j, [e], lambda a: a[-j:], (j,) + rest, view=True)
        if k == "ellipsis":
            j = ch.int(-s[-1], s[-1] - 1)
            return call("{W}[..., %d]" % j, [e], lambda a: a[..., j], s[:-1], view=True)
        if k == "list":
            idx = [ch.int(0, n - 1) for _ in range(ch.int(1, 4))]
            return call("{W}[%r]" % idx, [e], lambda a: a[idx], (len(idx),) + rest)
        if k == "array":
            idx = np.array([ch.int(-n, n - 1) for _ in range(ch.int(1, 4))])
            return call("{W}[np.array(%r)]" % idx.tolist(), [e], lambda a: a[idx],
                        (len(idx),) + rest)
        if k == "none":
            return call("{W}[None]", [e], lambda a: a[None], (1,) + s, view=True)
        if k == "mask":
            mask = [bool(ch.int(0, 1)) for _ in range(n)]
            mask[ch.int(0, n - 1)] = True   # never empty
            m = sum(mask)
            return call("{W}[np.array(%r)]" % mask, [e], lambda a: a[np.array(mask)],
                        (m,) + rest)
        # along the second axis, or a pair of indices
        if e.ndim < 2:
            return call("{W}[%d]" % (n - 1), [e], lambda a: a[n - 1], rest, view=True)
        m = s[1]
        j = ch.int(0, m - 1)
        form = choice(ch, ["col", "pair", "cols", "slice"])
        if form == "col":
            return call("{W}[:, %d]" % j, [e], lambda a: a[:, j], (n,) + s[2:], view=True)
        if form == "pair":
            i = ch.int(0, n - 1)
            return call("{W}[%d, %d]" % (i, j), [e], lambda a: a[i, j], s[2:], view=True)
        if form == "cols":
            idx = [ch.int(0, m - 1) for _ in range(ch.int(1, 3))]
            return call("{W}[:, %r]" % idx, [e], lambda a: a[:, idx], (n, len(idx)) + s[2:])
        return call("{W}[:, %d:]" % j, [e], lambda a: a[:, j:], (n, m - j) + s[2:], view=True)

    def shapes_of_size(self, n):
        out = [(n,)]
        for a in range(2, n):
            if n % a == 0:
                out.append((a, n // a))
        out += [(1, n), (n, 1)]
        if n == 6:
            out.append((1, 2, 3))
        return out

    def reshape(self, e):
        ch = self.ch
        k = pick(ch, [(4, "reshape"), (1, "ravel"), (1, "T")])
        if k == "T" and e.ndim == 2:
            if pick(ch, [(1, True), (1, False)]):
                return call("{W}.T", [e], lambda a: a.T, e.shape[::-1], view=True)
            return call("np.transpose({0})", [e], np.transpose, e.shape[::-1], view=True)
        if k == "ravel":
            form = choice(ch, ["np.ravel({0})", "{W}.ravel()", "{W}.flatten()",
                               "{W}.reshape(-1)"])
            return call(form, [e], np.ravel, (e.size,), view=form != "{W}.flatten()")
        return self.reshape_to(e, choice(ch, self.shapes_of_size(e.size)))

    def reshape_to(self, e, shape):
        ch = self.ch
        shape = tuple(shape)
        tup = "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"
        pos = ", ".join(map(str, shape))
        if not shape:
            pos = "()"
        if len(shape) > 1 and pick(ch, [(1, False), (1, True)]):
            pos = ", ".join(map(str, shape[:-1])) + ", -1"   # the last one inferred
        form = choice(ch, [f"np.reshape({{0}}, {tup})", f"{{W}}.reshape({pos})",
                           f"{{W}}.reshape({tup})"])
        return call(form, [e], lambda a: np.reshape(a, shape), shape, view=True)

    def reduce_axis(self, e, axis, keepdims):
        """``axis``: an int, or a tuple of them (sorted, non-negative)."""
        ch = self.ch
        fn = choice(ch, ["sum", "mean", "max", "prod", "min"])
        if fn == "prod" and e.size > 6:
            fn = "sum"
        axes = axis if isinstance(axis, tuple) else (axis,)
        written = tuple(a if pick(ch, [(1, True), (1, False)]) else a - e.ndim for a in axes)
        ax = written if isinstance(axis, tuple) else written[0]
        shape = [1 if i in axes else d for i, d in enumerate(e.shape) if keepdims or i not in axes]
        kw = f"axis={ax}" + (", keepdims=True" if keepdims else "")
        if pick(ch, [(1, True), (1, False)]):
            fmt = f"np.{fn}({{0}}, {kw})"
        else:
            fmt = f"{{W}}.{fn}({kw})"
        kink = {"max": lambda v: top_gap(v, axis),
                "min": lambda v: top_gap(-v, axis)}.get(fn)
        return call(fmt, [e], lambda v: getattr(np, fn)(v, axis=axis, keepdims=keepdims),
                    tuple(shape), kink=kink)

    def reduce(self, e):
        ch = self.ch
        if e.ndim >= 1 and pick(ch, [(1, False), (1, True)]):
            keep = pick(ch, [(1, False), (1, True)])
            if e.ndim >= 2 and pick(ch, [(2, False), (1, True)]):
                axes = sorted({ch.int(0, e.ndim - 1), ch.int(0, e.ndim - 1)})
                return self.reduce_axis(e, tuple(axes), keep)
            return self.reduce_axis(e, ch.int(0, e.ndim - 1), keep)
        return self.to_scalar(e)

    def exact(self, shape, depth):
        """An expression of exactly ``shape`` (for the other operand of a product)."""
        ch = self.ch
        same = [n for n in sorted(self.vars) if self.vars[n] == shape]
        if same and pick(ch, [(1, True), (1, False)]):
            return self.name(choice(ch, same))
        b = self.expr(depth - 1)
        if b.shape == shape:
            return b
        if b.size == math.prod(shape) and b.ndim:
            return self.reshape_to(b, shape)
        c = np.round(np.random.default_rng(ch.seed()).uniform(-1, 1, shape), 2)
        b = self.fit(b, shape)
        return Op("({0} * {1})", [ArrayConst(c), b], np.multiply, shape)

    def dot(self, a, depth):
        ch = self.ch
        n = a.shape[-1]
        k = choice(ch, [None, 1, 2, 3])
        bshape = (n,) if k is None else (n, k)
        b = self.exact(bshape, depth)
        shape = a.shape[:-1] + bshape[1:]
        form = choice(ch, ["np.dot({0}, {1})", "({0} @ {1})", "np.matmul({0}, {1})"])
        if form.startswith("("):
            return Op(form, [a, b], np.matmul, shape)
        return call(form, [a, b], np.dot, shape)

    # -- statements
    def new_temp(self):
        self.ntemp += 1
        return f"t{self.ntemp - 1}"

    def bind(self, name, e):
        """Record ``name = e``: its shape, and whether it owns its memory."""
        self.vars[name] = e.shape
        (self.traced.add if e.traced else self.traced.discard)(name)
        if e.root is None and e.ndim:
            self.fresh.add(name)
        else:
            self.fresh.discard(name)
        self.forget_views(e)

    def forget_views(self, e):
        if e.root is not None:
            self.fresh.discard(e.root)   # a view of it may live on: no writes to it

    def statement(self, depth, nested=0, may_return=False):
        ch = self.ch
        kinds = [(6, "assign"), (2, "aug"), (1, "setitem"), (2, "if"), (1, "for"),
                 (1, "rows"), (1, "return")]
        k = pick(ch, kinds)
        # in place only on traced arrays: a plain NumPy buffer cannot hold a traced value
        fresh = sorted(n for n in self.fresh if n in self.vars and n in self.traced)
        if k == "aug" and fresh:
            t = choice(ch, fresh)
            e = self.fit(self.expr(depth), self.vars[t])
            self.forget_views(e)
            return [AugAssign(t, choice(ch, ["+", "-", "*"]), e)]
        if k == "setitem" and fresh:
            t = choice(ch, fresh)
            s = self.vars[t]
            if pick(ch, [(1, True), (1, False)]):
                i = ch.int(-s[0], s[0] - 1)
                isrc, idx, sub = str(i), i, s[1:]
            else:
                lo = ch.int(0, s[0] - 1)
                isrc, idx, sub = f"{lo}:", slice(lo, None), (s[0] - lo,) + s[1:]
            e = self.fit(self.expr(depth), sub)
            self.forget_views(e)
            return [SetItem(t, isrc, idx, e)]
        if k == "if" and nested < 2:
            return [self.if_statement(depth, nested)]
        if k == "for" and nested < 2:
            return self.for_range(depth)
        if k == "rows" and nested < 2:
            return self.for_rows(depth)
        if k == "return" and may_return:
            return [ReturnStmt(self.to_scalar(self.expr(depth)))]
        e = self.expr(depth)
        t = self.new_temp()
        self.bind(t, e)
        return [Assign(t, e)]

    def cond(self, depth):
        e = self.to_scalar(self.expr(depth))
        return e, choice(self.ch, [">", "<"]), choice(self.ch, [0.0, 0.5, -0.25])

    def if_statement(self, depth, nested):
        """``if c > t:`` assigning one variable (new, or of its old shape) on every path that
        goes on; what else a branch makes stays inside it."""
        ch = self.ch
        c, op, t = self.cond(depth)
        existing = sorted(self.vars)
        target = choice(ch, existing) if existing and pick(ch, [(1, False), (1, True)]) \
            else self.new_temp()
        shape = self.vars.get(target)
        vars0, fresh0, traced0 = dict(self.vars), set(self.fresh), set(self.traced)
        then, shape1 = self.branch(depth, nested, target, shape, True)
        then_returns = isinstance(then[-1], ReturnStmt)
        fresh1, traced1 = set(self.fresh), set(self.traced)
        self.vars, self.fresh, self.traced = dict(vars0), set(fresh0), set(traced0)
        if (target not in vars0) or pick(ch, [(1, False), (1, True)]):
            orelse, shape2 = self.branch(depth, nested, target, shape or shape1, False)
            fresh2, traced2 = set(self.fresh), set(self.traced)
        else:
            orelse, shape2, fresh2, traced2 = [], shape, fresh0, traced0
        self.vars = vars0
        self.vars[target] = shape2
        if then_returns:
            self.fresh, self.traced = fresh2, traced2
        else:
            self.fresh, self.traced = fresh1 & fresh2, traced1 & traced2
        return If(c, op, t, then, orelse)

    def branch(self, depth, nested, target, shape, may_return):
        """A branch's statements, ending with ``target = ...`` (of ``shape`` if given) or a
        return; the shape the target has after it."""
        ch = self.ch
        out = []
        if pick(ch, [(2, False), (1, True)]):
            out += self.statement(depth - 1, nested + 1, may_return)
            if isinstance(out[-1], ReturnStmt):
                return out, shape
        e = self.exact(shape, depth) if shape is not None else self.expr(depth)
        self.bind(target, e)
        return out + [Assign(target, e)], e.shape

    def for_range(self, depth):
        ch = self.ch
        n = ch.int(1, 3)
        v = f"i{self.nloop}"
        self.nloop += 1
        pre, acc = self.accumulator(depth)
        self.loop_ints[v] = n
        body = self.loop_body(acc, depth)
        del self.loop_ints[v]
        return pre + [ForRange(v, n, body)]

    def for_rows(self, depth):
        ch = self.ch
        arrays = [n for n in sorted(self.vars) if len(self.vars[n]) >= 1 and self.vars[n][0] <= 4]
        if not arrays:
            return self.for_range(depth)
        over = choice(ch, arrays)
        v = f"r{self.nloop}"
        self.nloop += 1
        pre, acc = self.accumulator(depth)
        self.vars[v] = self.vars[over][1:]
        if over in self.traced:
            self.traced.add(v)
        body = self.loop_body(acc, depth)
        del self.vars[v]
        self.traced.discard(v)
        return pre + [ForRows(v, self.name(over), body)]

    def accumulator(self, depth):
        acc = self.new_temp()
        e = self.expr(depth - 1)
        self.bind(acc, e)
        return [Assign(acc, e)], acc

    def loop_body(self, acc, depth):
        ch = self.ch
        shape = self.vars[acc]
        e = self.fit(self.expr(depth - 1), shape)
        c = choice(ch, [0.5, 0.9, -0.75])
        if acc in self.fresh and acc in self.traced and pick(ch, [(1, True), (1, False)]):
            self.forget_views(e)
            return [AugAssign(acc, "+", e)]
        upd = Op("({0} * %r + {1})" % c, [self.name(acc), e],
                 lambda a, b: a * c + b, np.broadcast_shapes(shape, e.shape))
        self.bind(acc, upd)
        return [Assign(acc, upd)]

    def program(self):
        ch = self.ch
        nargs = pick(ch, [(3, 1), (2, 2)])
        params = ["x", "y"][:nargs]
        shapes = [choice(ch, INPUT_SHAPES) for _ in params]
        for p, s in zip(params, shapes):
            self.vars[p] = s
            self.traced.add(p)
        body = []
        for _ in range(ch.int(0, 4)):
            body += self.statement(ch.int(1, 3))
        ret = self.to_scalar(self.expr(ch.int(1, 3)))
        return Program(params, shapes, body, ret)


class _LoopVar(Expr):
    """The integer of an enclosing ``for i in range(n)``, used as an index."""

    def __init__(self, name):
        self.name = name

    def src(self):
        return self.name

    def ev(self, env, mon):
        return env[self.name]


def generate(ch):
    return Builder(ch).program()


if __name__ == "__main__":  # python tests/random_programs.py SEED: the program of a seed
    import sys
    print(generate(RandomChooser(int(sys.argv[1]))).source(), end="")
