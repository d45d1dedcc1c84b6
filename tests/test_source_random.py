"""Random NumPy programs through source mode: ``wg.source.grad`` agrees with ``wg.grad``
(and ``wg.source.jvp`` with ``wg.jvp``) to round-off, or raises the named
unsupported-construct error (``SourceError``), never anything else.

The programs are Python source text built here (never user text), written to a module
file (``wg.source`` reads a function's source with ``inspect``) and imported.  They mix
elementwise functions and broadcasting, ndarray methods in NumPy's positional and keyword
forms, indexing and slices, reductions, ``np.dot`` and ``@``, values computed and never
used, values used only in non-differentiated places (shapes, comparisons, indices), lists
given to functions, complex values in between, ``and`` / ``or``, user helpers, ``if`` /
``for`` / ``while`` (``break``, ``continue``, early ``return``, ``zip``, ``enumerate``),
integer and dict arguments, and a few constructs source mode refuses by name.  Every
program runs under plain NumPy first; programs the tape itself refuses (``math.sin`` of a
traced value) are counted, not checked.

The default run takes 300 programs chosen by hypothesis (derandomised);
``pytest -m slow tests/test_source_random.py`` takes 3,000 (``WENGERT_SOURCE_N``), and
``python tests/test_source_random.py N [FIRST_SEED]`` runs N programs from fixed seeds and
prints the count of each outcome.
"""
import importlib.util
import itertools
import os
import random
import sys
import tempfile

if __name__ == "__main__":  # run as a script: this checkout's wengert, not an installed one
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import wengert as wg  # noqa: E402
from wengert.source import SourceError  # noqa: E402

RTOL, ATOL = 1e-10, 1e-12

# module-level constants and a helper the programs may use
PRELUDE = '''\
import math
import numpy as np

A = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [-0.5, 1.0, 0.3]])
B = np.array([[0.2, 0.7], [-1.1, 0.4], [0.9, -0.3]])
C3 = np.array([0.3, -0.6, 1.2])
C23 = np.array([[1.0, -0.5, 0.25], [0.75, 2.0, -1.0]])


def helper(u, v):
    w = u * v
    return np.sin(w) + u


def helper2(u, scale=2.0):
    t = np.dot(u.ravel(), u.ravel())
    s = u.sum(axis=0) if np.ndim(u) else u
    if np.sum(u) > 0.0:
        return np.sin(u) * scale
    return u.T.T * scale


'''
CONSTS = {"A": (3, 3), "B": (3, 2), "C3": (3,), "C23": (2, 3)}

# shapes the programs' values take; every reshape goes between shapes of one size
SHAPES_OF_SIZE = {1: [(), (1,), (1, 1)], 2: [(2,), (1, 2), (2, 1)], 3: [(3,), (1, 3), (3, 1)],
                  6: [(6,), (2, 3), (3, 2)], 9: [(9,), (3, 3)], 4: [(4,), (2, 2)]}
INPUT_SHAPES = [(3,), (2, 3), (), (6,), (3, 2), (1, 3), (3, 3)]

UNARY = ["np.sin({a})", "np.cos({a})", "np.tanh({a})", "np.exp(0.3 * {a})",
         "np.log(1.0 + {a} * {a})", "np.sqrt(1.0 + {a} ** 2)", "{a} ** 2", "-{a}",
         "np.abs({a})", "np.square({a})", "{a} * 1.5", "2.0 - {a}", "{a} / 3.0",
         "np.arctan({a})", "1.0 / (1.0 + {a} * {a})", "np.maximum({a}, 0.1)",
         "np.where({a} > 0, {a}, 0.5 * {a})", "np.clip({a}, -0.5, 0.5)",
         "{a}.clip(-0.5, 0.5)", "{a}.clip(min=-0.2)", "{a}.clip(max=0.4)", "{a}.astype(float)",
         "{a}.copy()", "np.sinh(0.5 * {a})", "{a}.conj()", "np.round({a}, 1)", "+{a}",
         "{a} ** 3 - {a}", "math.pi * {a}", "np.exp(-{a} * {a})", "np.power({a}, 3)",
         "np.log1p({a} * {a})", "np.expm1(0.5 * {a})", "np.sign({a}) * {a}",
         "np.floor({a}) + {a}", "abs({a})", "pow({a}, 2)", "np.zeros_like({a}) + 2.0 * {a}",
         "np.zeros(np.shape({a})) + {a}", "{a}.real", "np.real({a}) * {a}", "{a}.round(2)",
         "np.ones_like({a}) * len(np.shape({a})) - {a}"]
SCALAR_UNARY = ["math.sin({a})", "math.exp(0.5 * {a})", "math.sqrt(1.0 + {a} * {a})",
                "({a} * 2.0 or 1.0)", "({a} > 0.2 and {a} * 3.0)", "({a} - {a} or {a} + 1.0)",
                "max({a}, 0.2)", "min({a}, -0.1)", "math.atan2({a}, 2.0)", "math.erf({a})",
                "math.fsum([{a}, 1.0])", "getattr({a}, 'real')"]
BINARY = ["{a} + {b}", "{a} * {b}", "{a} - {b}", "{a} / (1.0 + {b} * {b})",
          "np.maximum({a}, {b})", "np.minimum({a}, {b})", "np.arctan2({a}, 1.5 + {b} * {b})",
          "{a} ** 2 * {b}", "np.add({a}, {b})", "np.multiply({a}, {b})",
          "np.where({a} > {b}, {a}, {b})", "helper({a}, {b})", "helper(u={a}, v={b})",
          "np.hypot({a}, 1.0 + {b} * {b})", "np.subtract({b}, {a})",
          "helper2({a}) * {b}", "helper2({a}, scale=0.5) - {b}", "helper2({a}, {b}.mean()) + {b}"]
# statements NumPy runs and source mode may refuse, by name (SourceError)
UNSUPPORTED = ["{u} = sum([{a} * k for k in range(2)])", "{u} = {a} * 1.0\n{i}{u}[0] = 0.0",
               "{u} = (lambda q: q * 2.0)({a})", "{u} = [{a}, {a}]\n{i}{u} = np.stack({u})"]


class Gen:
    """Builds one program from ``pick(options)`` and ``integer(lo, hi)`` choices."""

    def __init__(self, pick, integer):
        self.pick, self.integer = pick, integer
        self.lines = []
        self.vars = {}          # name -> shape (of the values defined at the current point)
        self.ints = {}          # vector name -> an integer index computed from its values
        self.k = 0
        self.indent = "    "

    def new(self, prefix="v"):
        self.k += 1
        return f"{prefix}{self.k}"

    def some(self, pred=lambda s: True):
        names = [n for n, s in self.vars.items() if pred(s)]
        return self.pick(names) if names else None

    def emit(self, text):
        self.lines.append(self.indent + text)

    # -- expressions: (text, shape) ------------------------------------------------------------
    def expr(self):
        kind = self.pick(["unary", "binary", "const", "reshape", "transpose", "reduce",
                          "index", "dot", "method", "squeeze", "function", "lists", "complex"])
        return getattr(self, "e_" + kind)()

    def same_shape(self):
        """An expression with the shape of one of the values (for rebinding in a block)."""
        return self.pick([self.e_unary, self.e_binary_same])()

    def e_unary(self):
        a = self.some()
        if self.vars[a] == () and self.pick([True, False, False]):
            return self.pick(SCALAR_UNARY).format(a=a), ()
        return self.pick(UNARY).format(a=a), self.vars[a]

    def e_binary(self):
        a = self.some()
        sa = self.vars[a]
        b = self.some(lambda s: _broadcasts(s, sa))
        return self.pick(BINARY).format(a=a, b=b), np.broadcast_shapes(sa, self.vars[b])

    def e_binary_same(self):
        a = self.some()
        sa = self.vars[a]
        b = self.some(lambda s: _broadcasts(s, sa) and np.broadcast_shapes(s, sa) == sa)
        return self.pick(BINARY).format(a=a, b=b), sa

    def e_const(self):
        a = self.some()
        sa = self.vars[a]
        fits = [c for c, s in CONSTS.items() if _broadcasts(s, sa)]
        if not fits:
            return f"{a} * 0.5 + 0.25", sa
        c = self.pick(fits)
        op = self.pick(["{a} * {c}", "{c} - {a}", "{a} + {c} * {a}"])
        return op.format(a=a, c=c), np.broadcast_shapes(sa, CONSTS[c])

    def e_reshape(self):
        a = self.some(lambda s: int(np.prod(s)) in SHAPES_OF_SIZE)
        if a is None:   # (sizes like 12, after a repeat)
            return self.e_unary()
        sa = self.vars[a]
        new = self.pick(SHAPES_OF_SIZE[int(np.prod(sa))])
        forms = [f"{a}.reshape({_tup(new)})", f"np.reshape({a}, {_tup(new)})"]
        if len(new) >= 1:
            forms.append(f"{a}.reshape({', '.join(map(str, new))})")
            forms.append(f"{a}.reshape({_tup(new[:-1] + (-1,))})")
            forms.append(f"{a}.reshape({', '.join(map(str, new[:-1] + (-1,)))})")
        if len(new) == 1:
            forms += [f"{a}.reshape(-1)", f"{a}.ravel()", f"{a}.flatten()", f"np.ravel({a})"]
        if new == ():
            forms = [f"{a}.reshape(())", f"np.reshape({a}, ())"]
        return self.pick(forms), new

    def e_transpose(self):
        a = self.some(lambda s: len(s) == 2) or self.some()
        sa = self.vars[a]
        if len(sa) != 2:
            return self.pick([f"{a}.T", f"{a}.transpose()", f"np.transpose({a})"]), sa
        forms = [f"{a}.T", f"{a}.transpose()", f"{a}.transpose(1, 0)", f"{a}.transpose((1, 0))",
                 f"np.transpose({a})", f"{a}.swapaxes(0, 1)", f"np.swapaxes({a}, 1, 0)",
                 f"np.transpose({a}, (1, 0))", f"{a}.transpose(-1, 0)", f"{a}.mT",
                 f"np.moveaxis({a}, 0, 1)"]
        return self.pick(forms), sa[::-1]

    def e_reduce(self):
        a = self.some(lambda s: len(s) >= 1) or self.some()
        sa = self.vars[a]
        fn = self.pick(["sum", "mean", "max", "min", "prod", "std", "var"])
        nd = len(sa)
        if nd == 0 or self.pick([True, False]):
            if fn in ("std", "var") and int(np.prod(sa)) < 2:
                fn = "sum"
            return self.pick([f"{a}.{fn}()", f"np.{fn}({a})"]), ()
        ax = self.integer(-nd, nd - 1)
        if fn in ("std", "var") and sa[ax] < 2:
            fn = "mean"
        keep = self.pick([False, True])
        kw = ", keepdims=True" if keep else ""
        out = tuple(1 if i == ax % nd else n for i, n in enumerate(sa)) if keep else \
            tuple(n for i, n in enumerate(sa) if i != ax % nd)
        forms = [f"{a}.{fn}(axis={ax}{kw})", f"{a}.{fn}({ax}{kw})", f"np.{fn}({a}, axis={ax}{kw})",
                 f"np.{fn}({a}, {ax}{kw})"]
        # every argument positional, as NumPy's method signatures order them
        middle = {"sum": "None, None", "mean": "None, None", "prod": "None, None",
                  "std": "None, None, 0", "var": "None, None, 0", "max": "None",
                  "min": "None"}[fn]
        forms.append(f"{a}.{fn}({ax}, {middle}, {keep})")
        if not keep and fn == "sum":
            forms.append(f"{a}.cumsum({ax}).sum({ax})")
        if keep and fn in ("mean", "max", "sum"):
            return self.pick([f"{a} - {a}.{fn}(axis={ax}, keepdims=True)",
                              f"{a}.{fn}({ax}, keepdims=True) * {a}"]), sa
        return self.pick(forms), out

    def e_index(self):
        a = self.some(lambda s: len(s) >= 1 and s[0] >= 2) or self.some(lambda s: len(s) >= 1)
        if a is None:
            return self.e_unary()
        sa = self.vars[a]
        n = sa[0]
        rest = sa[1:]
        forms = [(f"{a}[0]", rest), (f"{a}[-1]", rest), (f"{a}[1:]", (n - 1,) + rest),
                 (f"{a}[::2]", ((n + 1) // 2,) + rest), (f"{a}[None]", (1,) + sa),
                 (f"{a}[[0, -1]]", (2,) + rest), (f"{a}[..., 0]", sa[:-1]),
                 (f"{a}.take([0, 0])", (2,)), (f"{a}.take([0, -1], axis=0)", (2,) + rest),
                 (f"{a}.repeat(2)", (2 * int(np.prod(sa)),)),
                 (f"{a}.repeat(2, axis=0)", (2 * n,) + rest),
                 (f"{a}[:len({a}) - 1]", (n - 1,) + rest),
                 (f"{a}[{a}.shape[0] // 2]", rest), (f"np.take({a}, 0, axis=0)", rest)]
        if len(sa) == 2:
            forms += [(f"{a}[:, 0]", (n,)), (f"{a}[0, -1]", ()), (f"{a}[:, 1:]", (n, sa[1] - 1)),
                      (f"{a}[:, None]", (n, 1, sa[1])), (f"{a}[0][-1]", ()),
                      (f"{a}[1:, ::2]", (n - 1, (sa[1] + 1) // 2))]
        if len(sa) == 1:
            forms.append((f"{a}[:, None]", (n, 1)))
            if a in self.ints:
                forms.append((f"{a}[{self.ints[a]}]", ()))
        if int(np.prod(sa)) == 1:
            forms.append((f"{a}.item()", ()))
        forms = [(t, s) for t, s in forms if 0 not in s]   # no empty arrays
        return self.pick(forms)

    def e_dot(self):
        a = self.some(lambda s: len(s) in (1, 2))
        if a is None:
            return self.e_binary()
        sa = self.vars[a]
        k = sa[-1]
        if len(sa) == 1:
            b = self.some(lambda s: len(s) == 1 and s[0] == k)
            if b is not None and self.pick([True, False]):
                return self.pick([f"np.dot({a}, {b})", f"{a} @ {b}", f"{a}.dot({b})",
                                  f"np.inner({a}, {b})"]), ()
            b = self.some(lambda s: len(s) == 1)
            if b is not None and self.pick([True, False]):
                return f"np.outer({a}, {b})", (k, self.vars[b][0])
        b = self.some(lambda s: len(s) == 2 and s[0] == k)
        if b is not None and self.pick([True, False]):
            out = sa[:-1] + self.vars[b][1:]
            forms = [f"np.dot({a}, {b})", f"{a} @ {b}", f"{a}.dot({b})", f"np.matmul({a}, {b})"]
            if len(sa) == 2:
                forms.append(f"np.einsum('ij,jk->ik', {a}, {b})")
            return self.pick(forms), out
        consts = [c for c, s in CONSTS.items() if len(s) == 2 and s[1] == sa[0]]
        if consts:
            c = self.pick(consts)
            return self.pick([f"np.dot({c}, {a})", f"{c} @ {a}"]), CONSTS[c][:1] + sa[1:]
        consts = [c for c, s in CONSTS.items() if len(s) == 2 and s[0] == sa[0]]
        if consts:
            c = self.pick(consts)
            return self.pick([f"np.dot({c}.T, {a})", f"{c}.T @ {a}"]), CONSTS[c][1:] + sa[1:]
        return f"np.dot({a}, {a}.T)" if len(sa) == 2 else f"np.dot({a}, {a})", \
            (sa[0], sa[0]) if len(sa) == 2 else ()

    def e_method(self):
        a = self.some(lambda s: len(s) >= 1) or self.some()
        sa = self.vars[a]
        if len(sa) == 0:
            return self.e_unary()
        size = int(np.prod(sa))
        forms = [(f"{a}.cumsum()", (int(np.prod(sa)),)), (f"{a}.cumsum(axis=0)", sa),
                 (f"{a}.sum(axis=None)", ()), (f"{a}.mean(dtype=float)", ()),
                 (f"{a}.cumsum(dtype=float)", (size,)), (f"{a}.transpose(None)", sa[::-1]),
                 (f"{a}.reshape({a}.shape)", sa), (f"{a}.reshape(np.shape({a}))", sa),
                 (f"{a}.reshape(len({a}), -1)", (sa[0], size // sa[0])),
                 (f"{a}.reshape([{size}])", (size,)), (f"{a}.astype('float64')", sa),
                 (f"{a}.copy(order='C')", sa), (f"{a}.take(indices=[0])", (1,)),
                 (f"{a}.repeat(repeats=2, axis=-1)", sa[:-1] + (2 * sa[-1],)),
                 (f"{a}.clip(0.0)", sa), (f"{a}.round()", sa), (f"{a}.conjugate()", sa),
                 (f"{a}.max(initial=-5.0)", ()), (f"{a}.sum(where={a} > 0)", ()),
                 (f"{a}.std(ddof=1)" if size > 1 else f"{a}.sum()", ()),
                 (f"{a}.var(0, ddof=1)" if sa[0] > 1 else f"{a}.sum(0)", sa[1:]),
                 (f"{a}.ravel(order='C')", (size,)), (f"{a}.prod(axis=-1, keepdims=True)",
                                                      sa[:-1] + (1,)),
                 (f"{a}.min(0, None, False)", sa[1:]), (f"{a}.dot(b=np.ones({sa[-1]}))", sa[:-1]),
                 (f"{a}.cumprod(0)", sa), (f"np.cumsum({a}, axis=-1)", sa),
                 (f"{a}.max(axis=0, keepdims=True)", (1,) + sa[1:]),
                 (f"{a}.sum(axis=(0,))", sa[1:]), (f"np.linalg.norm({a})", ()),
                 (f"np.tile({a}, 2)", sa[:-1] + (2 * sa[-1],))]
        if len(sa) == 1:
            forms += [(f"sum({a})", ()), (f"max({a})", ()), (f"min({a}[::-1])", ()),
                      (f"np.linspace(0.0, 1.0, len({a})) * {a}", sa),
                      (f"np.diff({a})", (sa[0] - 1,))]
        if len(sa) == 2:
            forms += [(f"{a}.sum(axis=(0, 1))", ()), (f"{a}.mean((0, 1), keepdims=True)", (1, 1)),
                      (f"np.einsum('ij->j', {a})", sa[1:])]
            if sa[0] == sa[1]:
                forms += [(f"{a}.trace()", ()), (f"{a}.diagonal()", (sa[0],)),
                          (f"np.trace({a})", ())]
        forms = [(t, s) for t, s in forms if 0 not in s]
        return self.pick(forms)

    def e_squeeze(self):
        a = self.some(lambda s: 1 in s)
        if a is None:
            a = self.some()
            sa = self.vars[a]
            return self.pick([f"{a}[None]", f"np.expand_dims({a}, 0)"]), (1,) + sa
        sa = self.vars[a]
        ax = sa.index(1)
        return self.pick([(f"{a}.squeeze()", tuple(n for n in sa if n != 1)),
                          (f"{a}.squeeze({ax})", sa[:ax] + sa[ax + 1:]),
                          (f"{a}.squeeze(axis={ax})", sa[:ax] + sa[ax + 1:]),
                          (f"np.squeeze({a})", tuple(n for n in sa if n != 1))])

    def e_complex(self):
        """Complex values in between (through functions the tape runs too)."""
        a = self.some()
        return self.pick(["np.real(np.exp(1j * {a}) * {a})", "np.abs({a} * (1.0 + 2.0j) + 0.5j)",
                          "np.imag(np.sum({a} * (2.0 - 1.0j)) * {a})",
                          "np.real(np.conj({a} * 1j) * ({a} + 1j))"]).format(a=a), self.vars[a]

    def e_lists(self):
        """Lists and tuples of values given to NumPy functions."""
        a = self.some()
        sa = self.vars[a]
        b = self.some(lambda t: t == sa)
        forms = [(f"np.stack([{a}, {b}])", (2,) + sa),
                 (f"np.stack(({a}, 2.0 * {b}, {a}))", (3,) + sa),
                 (f"np.stack([{a}, {b}], axis=-1)", sa + (2,))]
        if len(sa) >= 1:
            forms += [(f"np.concatenate([{a}, {b}])", (2 * sa[0],) + sa[1:]),
                      (f"np.concatenate(({a}, np.sin({b}), {a}), axis=0)", (3 * sa[0],) + sa[1:])]
            if sa == (3,):
                forms.append((f"np.concatenate([{a}, C3])", (6,)))
        if len(sa) == 1 and sa[0] >= 2:
            forms.append((f"np.stack([{a}[0], 1.0, {b}[1] * {a}[0]])", (3,)))
            forms.append((f"np.stack([[{a}[0], {a}[1]], [{b}[1], 0.5]])", (2, 2)))
        return self.pick(forms)

    def e_function(self):
        a = self.some()
        b = self.some()
        sa = self.vars[a]
        cond = self.pick([f"np.sum({b}) > 0.0", f"{b}.ndim == 1" if self.vars[b] else "True",
                          f"len(np.shape({b})) > 1"])
        return self.pick([(f"np.sin({a}) if {cond} else np.cos({a})", sa),
                          (f"({a} * 2.0 if {cond} else -{a})", sa),
                          (f"np.sum({a}) * np.ones(3)", (3,))])

    # -- statements ------------------------------------------------------------------------
    def stmt(self, depth=0):
        kinds = ["assign"] * 6 + ["unused", "passive", "augassign", "unpack", "rebind",
                                  "passive_temp"]
        if depth <= 1:
            kinds += ["if", "for"]
        if depth == 0:
            kinds += ["while", "rowloop", "early", "breakloop", "unsupported", "whilebreak",
                      "iterate"]
        getattr(self, "s_" + self.pick(kinds))(depth)

    def s_assign(self, depth):
        text, shape = self.expr()
        name = self.new()
        self.emit(f"{name} = {text}")
        self.vars[name] = shape

    def s_rebind(self, depth):
        """``a = f(a)``: a name assigned again (in a block: keeping its shape)."""
        if depth:
            text, shape = self.same_shape()
            a = self.some(lambda s: s == shape)
            self.emit(f"{a} = {text}")
            return
        text, shape = self.expr()
        a = self.some()
        self.emit(f"{a} = {text}")
        self.vars[a] = shape

    def s_unused(self, depth):
        text, _ = self.pick([self.e_dot, self.e_reduce, self.e_transpose, self.e_index])()
        self.emit(f"{self.new('t')} = {text}")  # never used again

    def s_passive_temp(self, depth):
        """A value computed from the inputs and used only where no derivative flows."""
        text, shape = self.pick([self.e_dot, self.e_reduce, self.e_transpose, self.e_index])()
        t = self.new("t")
        self.emit(f"{t} = {text}")
        a = self.some()
        use = self.pick([f"len(np.shape({t})) + np.size({t})", f"float(np.sum({t}) > 0.0)",
                         f"np.max({t}) > 0.3", f"np.shape({t})[-1] if np.ndim({t}) else 1",
                         f"int(np.argmax({t}))"])
        m = self.new("m")
        self.emit(f"{m} = {use}")
        v = self.new()
        self.emit(f"{v} = {a} * {m}")
        self.vars[v] = self.vars[a]

    def s_unsupported(self, depth):
        a = self.some(lambda s: len(s) == 1 and s[0] >= 2)
        if a is None:
            return self.s_assign(depth)
        u = self.new()
        text = self.pick(UNSUPPORTED)
        if "C3" in text and self.vars[a] != (3,):
            text = "{u} = np.concatenate([{a}, {a}])"
        for line in text.format(u=u, a=a, i="").split("\n"):
            self.emit(line)
        # (the result is not used again: its shape is not tracked)

    def s_passive(self, depth):
        a = self.some(lambda s: len(s) == 1)
        if a is not None and a not in self.ints and self.pick([True, False]):
            index = self.pick(["int(np.argmax({a}))", "{a}.argmin()", "np.argmax({a})"])
            self.emit(f"n_{a} = {index.format(a=a)}")  # an index from the values
            self.ints[a] = f"n_{a}"
            return
        a = self.some(lambda s: len(s) >= 1)
        if a is None:
            return self.s_assign(depth)
        b = self.some()
        m = self.new("m")
        self.emit(f"{m} = {a}.shape[0] + {a}.ndim + len({a}) * ({b}.size > 2)")
        v = self.new()
        self.emit(f"{v} = {b} * {m}")
        self.vars[v] = self.vars[b]
        flag = self.new("c")
        self.emit(f"{flag} = {a} > 0.1")   # a comparison: a mask, not differentiated
        c = self.new()
        self.emit(f"{c} = np.where({flag}, {a}, -{a})")
        self.vars[c] = self.vars[a]

    def s_augassign(self, depth):
        a = self.some()
        sa = self.vars[a]
        b = self.some(lambda s: np.broadcast_shapes(s, sa) == sa if _broadcasts(s, sa) else False)
        name = self.new()
        self.emit(f"{name} = {a} * 1.0")
        self.emit(f"{name} {self.pick(['+=', '-=', '*='])} {b}")
        self.vars[name] = sa

    def s_unpack(self, depth):
        a = self.some(lambda s: len(s) >= 1 and s[0] >= 2)
        p, q = self.new(), self.new()
        if a is not None and self.pick([True, False]):
            self.emit(f"{p}, {q} = {a}[0], {a}[-1]")
            self.vars[p] = self.vars[q] = self.vars[a][1:]
            return
        a = self.some()
        self.emit(f"{p}, {q} = np.sin({a}), {a} * 2.0")
        self.vars[p] = self.vars[q] = self.vars[a]
        if self.pick([True, False]):
            self.emit(f"{p}, {q} = {q}, {p}")

    def _block(self, n, depth):
        """n statements one level deeper; the names they define stay local to the block."""
        saved = dict(self.vars), dict(self.ints)
        self.indent += "    "
        for _ in range(n):
            self.stmt(depth + 1)
        self.indent = self.indent[:-4]
        self.vars, self.ints = saved

    def s_if(self, depth):
        a = self.some()
        target = self.new()
        text1, shape = self.e_unary()
        cond = self.pick([f"np.sum({a}) > 0.0", f"{a}.ndim == 1", f"np.max({a}) < 0.5",
                          f"{a}.size > 3"])
        self.emit(f"if {cond}:")
        self._block(self.integer(0, 2), depth)
        self.emit(f"    {target} = {text1}")
        b = self.some(lambda s: s == shape)
        if self.pick([True, False]):
            self.emit(f"elif np.min({b}) > -0.5:")
            self._block(self.integer(0, 1), depth)
            self.emit(f"    {target} = {self.pick(UNARY).format(a=b)}")
        self.emit("else:")
        self._block(self.integer(0, 1), depth)
        self.emit(f"    {target} = {self.pick(UNARY).format(a=b)}")
        self.vars[target] = shape

    def s_for(self, depth):
        a = self.some()
        acc = self.new("acc")
        self.emit(f"{acc} = {a} * 0.5")
        n = self.integer(1, 3)
        i = f"i{depth}"
        body = self.pick(["{acc} = {acc} * 0.5 + np.sin({a} * {i})",
                          "{acc} = {acc} + {a} / ({i} + 1.0)",
                          "{acc} = np.tanh({acc}) * {a}", "{acc} += {a} * {acc}"])
        self.emit(f"for {i} in range({n}):")
        self.vars[acc] = self.vars[a]
        self._block(self.integer(0, 2), depth)
        self.emit("    " + body.format(acc=acc, a=a, i=i))
        if depth == 0 and self.pick([False, False, True]):
            self.emit(f"    if np.sum({acc}) > 4.0:")
            self.emit(f"        return np.sum({acc} * {a})")

    def s_breakloop(self, depth):
        a = self.some()
        acc = self.new("acc")
        self.emit(f"{acc} = {a} + 0.5")
        self.emit(f"for j in range({self.integer(1, 4)}):")
        self.emit(f"    {acc} = {acc} * 1.5 - 0.2 * {a}")
        self.emit(f"    if np.max(np.abs({acc})) > 2.0:")
        self.emit("        break")
        self.vars[acc] = self.vars[a]

    def s_while(self, depth):
        a = self.some()
        acc = self.new("acc")
        self.emit(f"{acc} = {a} + 0.0")
        self.emit("k = 0")
        if self.pick([True, False]):
            self.emit(f"while k < {self.integer(0, 3)}:")
        else:
            self.emit(f"while np.max(np.abs({acc})) < 3.0 and k < 4:")
        self.emit(f"    {acc} = {acc} * 0.9 + np.cos({a})")
        self.emit("    k += 1")
        self.vars[acc] = self.vars[a]

    def s_rowloop(self, depth):
        a = self.some(lambda s: len(s) >= 1)
        if a is None:
            return self.s_assign(depth)
        s = self.new("s")
        if self.pick([True, False]):
            self.emit(f"{s} = 0.0")
            self.emit(f"for row in {a}:")
            self.emit(f"    {s} = {s} + np.sum(row * row)")
        else:
            self.emit(f"{s} = 0.0")
            self.emit(f"for j in range(len({a})):")
            self.emit("    if j % 2 == 0:")
            self.emit(f"        {s} = {s} + np.sum({a}[j])")
            self.emit("    else:")
            self.emit(f"        {s} = {s} - np.mean({a}[j] ** 2)")
        self.vars[s] = ()

    def s_iterate(self, depth):
        """Loops over enumerate / zip / reversed of values, and list appends (refused)."""
        a = self.some(lambda s: len(s) >= 1)
        if a is None:
            return self.s_assign(depth)
        sa = self.vars[a]
        s = self.new("s")
        b = self.some(lambda t: len(t) >= 1 and t[1:] == sa[1:]) or a
        self.emit(f"{s} = 0.0")
        form = self.pick(["enumerate", "zip", "reversed", "zip3", "append"])
        if form == "enumerate":
            self.emit(f"for j, row in enumerate({a}{self.pick(['', ', 1', ', start=2'])}):")
            self.emit(f"    {s} = {s} + np.sum(row) * j")
        elif form == "zip":
            self.emit(f"for r1, r2 in zip({a}, {b}):")
            self.emit(f"    {s} = {s} + np.sum(r1 * r2)")
        elif form == "zip3":
            self.emit(f"for r1, r2, r3 in zip({a}, {b}[::-1], [1.0, 2.0]):")
            self.emit(f"    {s} = {s} + np.sum(r1 * r2) * r3")
        elif form == "reversed":
            self.emit(f"for row in reversed({a}):")
            self.emit(f"    {s} = {s} * 0.5 + np.sum(np.sin(row))")
        else:
            lst = self.new("lst")
            self.emit(f"{lst} = []")
            self.emit(f"for row in {a}:")
            self.emit(f"    {lst}.append(row * 2.0)")
            self.emit(f"{s} = {s} + np.sum(np.stack({lst}))")
        self.vars[s] = ()

    def s_early(self, depth):
        a = self.some()
        self.emit(f"if np.sum({a}) > 1.5:")
        self.emit(f"    return np.sum({a} * {a})")

    def s_whilebreak(self, depth):
        a = self.some()
        acc = self.new("acc")
        self.emit(f"{acc} = {a} + 0.0")
        self.emit("k = 0")
        self.emit("while True:")
        self.emit("    k += 1")
        self.emit(f"    if k > {self.integer(1, 3)}:")
        self.emit("        break")
        self.emit("    if k == 2:")
        self.emit("        continue")
        self.emit(f"    {acc} = {acc} * 0.8 + np.sin({a})")
        self.vars[acc] = self.vars[a]

    def program(self, nargs):
        params = ["x", "y"][:nargs]
        for p in params:
            self.vars[p] = self.pick(INPUT_SHAPES)
        shapes = [self.vars[p] for p in params]
        extra = self.pick(["", "", "", "n", "p"])
        if extra == "n":   # an integer parameter: not differentiated
            params.append("n")
            shapes.append("int")
            acc = self.new("acc")
            a = self.some()
            self.emit(f"{acc} = {a} * 1.0")
            self.emit("for i in range(n):")
            self.emit(f"    {acc} = {acc} * 0.5 + {a} * n")
            self.vars[acc] = self.vars[a]
        elif extra == "p":  # a dict of parameters
            params.append("p")
            shapes.append(("dict", self.vars["x"]))
            v = self.new()
            use = self.pick(["p['w'] * x", "x - p['w'] ** 2"])
            self.emit(f"{v} = {use} + p['b']")
            self.vars[v] = self.vars["x"]
        for _ in range(self.integer(1, 6)):
            self.stmt()
        names = list(self.vars)
        outs = [names[-1]] + [self.some() for _ in range(self.integer(0, 2))]
        terms = [self.pick(["np.sum({a})", "{a}.sum()", "np.mean({a} * {a})",
                            "np.sum(np.sin({a}))"]).format(a=o) for o in outs]
        self.emit(f"return {' + '.join(terms)}")
        src = f"def f({', '.join(params)}):\n" + "\n".join(self.lines) + "\n"
        return src, shapes


def _broadcasts(s, t):
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


def _tup(s):
    return "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"


# -- running one program -----------------------------------------------------------------------
_DIR = tempfile.mkdtemp(prefix="wg_source_random_")
_count = itertools.count()


def load(src):
    """The function ``f`` of a generated module (a real file: wg.source reads it back)."""
    path = os.path.join(_DIR, f"prog_{os.getpid()}_{next(_count)}.py")
    with open(path, "w") as fh:
        fh.write(PRELUDE + src)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.f


def inputs(shapes, seed):
    """Values in [-1.5, 1.5]; a scalar is a 0-d array, an np.float64 or a Python float."""
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if s == "int":
            out.append(int(rng.integers(0, 3)))
            continue
        if s and isinstance(s[0], str):  # ("dict", shape of w)
            out.append({"w": rng.uniform(-1.5, 1.5, size=s[1]), "b": float(rng.uniform(-1, 1))})
            continue
        v = rng.uniform(-1.5, 1.5, size=s)
        if s == ():
            r = rng.random()
            v = v if r < 0.3 else np.float64(v) if r < 0.6 else float(v)
        out.append(v)
    return out


def prepare(src, shapes, seed):
    """The function and its arguments (checked: a valid NumPy program)."""
    f = load(src)
    args = inputs(shapes, seed)
    try:
        f(*args)
    except (AttributeError, TypeError):
        # methods of a Python float (x.sum(), x[0]): the program needs NumPy scalars
        args = [np.float64(a) if type(a) is float else a for a in args]
        try:
            f(*args)
        except (AttributeError, TypeError) as e:
            # (a value the program made is a Python float: math.sin(v).reshape(...))
            raise Invalid(str(e)) from None
    return f, args


class Invalid(Exception):
    """The generated program does not run under NumPy itself."""


def outcome(src, shapes, seed):
    """'agree' or 'unsupported' (or a program the check does not apply to); anything else
    raises."""
    try:
        f, args = prepare(src, shapes, seed)
    except Invalid:
        return "not a NumPy program"
    argnums = tuple(i for i, a in enumerate(args) if not isinstance(a, int))
    try:
        want = wg.grad(f, argnums=argnums)(*args)
    except Exception as e:
        # not a program the tape runs (math.sin(x) on a traced x, by design): the target is
        # source mode on the programs it does run
        return f"tape refuses ({type(e).__name__})"
    try:
        got = wg.source.grad(f, argnums=argnums)(*args)
    except SourceError:
        return "unsupported"
    for g, w, i in zip(got, want, argnums):
        close(g, w, args[i])
    # forward mode: the generated jvp against wg.jvp, along a random direction
    rng = np.random.default_rng(seed + 1)
    tangents = tuple(0.0 if isinstance(a, int) else _tangent(a, rng) for a in args)

    def f_of_floats(*xs):   # the integer argument held fixed
        full = list(args)
        for i, v in zip(argnums, xs):
            full[i] = v
        return f(*full)
    want_out, want_t = wg.jvp(f_of_floats, tuple(args[i] for i in argnums),
                              tuple(tangents[i] for i in argnums))
    got_out, got_t = wg.source.jvp(f)(tuple(args), tangents)
    close(got_out, want_out, want_out)
    close(got_t, want_t, want_out)
    return "agree"


def _tangent(a, rng):
    if isinstance(a, dict):
        return {k: _tangent(v, rng) for k, v in a.items()}
    t = rng.uniform(-1.0, 1.0, size=np.shape(a))
    return type(a)(t) if isinstance(a, (float, np.float64)) else t


def close(got, want, like):
    """Equal to round-off, in the shape (and, for dicts, the keys) of ``like``."""
    if isinstance(like, dict):
        assert isinstance(got, dict) and set(got) == set(like), (got, like)
        for k in like:
            close(got[k], want[k], like[k])
        return
    assert np.shape(got) == np.shape(like), (np.shape(got), np.shape(like))
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float),
                               rtol=RTOL, atol=ATOL)


def describe(src, shapes, seed):
    return f"\n{src}\nshapes={shapes} seed={seed}"


# -- the property --------------------------------------------------------------------------------
def _gen_from_data(data):
    return Gen(lambda opts: data.draw(st.sampled_from(list(opts))),
               lambda lo, hi: data.draw(st.integers(lo, hi)))


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.data(), st.integers(1, 2), st.integers(0, 2 ** 32 - 1))
def test_source_grad_agrees_or_names_unsupported(data, nargs, seed):
    src, shapes = _gen_from_data(data).program(nargs)
    try:
        outcome(src, shapes, seed)
    except AssertionError as e:
        raise AssertionError(str(e) + describe(src, shapes, seed)) from None
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}" + describe(src, shapes, seed)) from e


def run_many(n, first_seed=0):
    """The outcome counts over ``n`` programs from seeds (failures: the first few, printed)."""
    counts = {}
    failures = []
    for k in range(first_seed, first_seed + n):
        rnd = random.Random(k)
        gen = Gen(lambda opts: rnd.choice(list(opts)), rnd.randint)
        src, shapes = "", None
        try:
            src, shapes = gen.program(rnd.randint(1, 2))
            res = outcome(src, shapes, k)
        except Exception as e:
            res = f"fail {type(e).__name__}"
            failures.append((k, src, shapes, f"{type(e).__name__}: {str(e)[:300]}"))
        counts[res] = counts.get(res, 0) + 1
    return counts, failures


@pytest.mark.slow
def test_many_programs(request):
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("a longer run: pytest -m slow tests/test_source_random.py")
    counts, failures = run_many(int(os.environ.get("WENGERT_SOURCE_N", "3000")))
    print(counts)
    assert not failures, failures[:3]
    assert counts.get("agree", 0) > 0.8 * sum(counts.values()), counts


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    first = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    counts, failures = run_many(n, first)
    for k, src, shapes, err in failures[:int(os.environ.get("SHOW", "5"))]:
        print(f"--- seed {k}: {err}\n{src}shapes={shapes}")
    print(counts)
