"""Source-to-source differentiation: derivative programs as readable Python.

``wg.source.grad(f)`` reads ``f``'s source, rewrites it into a Wengert list (one
operation per line, fresh names ``a``, ``b``, ...) and generates a new function:
the forward sweep, then the adjoint statements ``gx += ...`` in reverse order.
``wg.source.jvp(f)`` generates the forward-mode program, each statement followed
by its differential ``dx = ...`` (the seeds' Program B).  The derivative of every
operation is read off the primitive's own rules (see ``symbolic``), so a new
primitive needs no change here.

>>> import wengert as wg
>>> print(wg.source.programs_from_source(
...     "def f(x, y):\\n    return x * y + sin(x)\\n", "f")[0])
a = x * y
da = y * dx + x * dy
b = sin(x)
db = cos(x) * dx
z = a + b
dz = da + db
"""
from __future__ import annotations

import builtins
import functools
import inspect
import linecache
import math
import threading

import numpy as np

from .. import numpy as wnp
from ..core import ndim_of, shape_of
from ..transforms import _arg_name, check_argnums, check_differentiable
from . import generated
from .errors import SourceError
from .forward import ForwardGen
from .normalize import normalise, parse_source
from .reverse import ReverseGen
from .runtime import broadcast_like, fit, shaped_tangents

__all__ = ["grad", "jvp", "vjp", "programs_from_source", "SourceError"]

_lock = threading.RLock()
_VJPS = {}   # user function -> dispatcher of its generated (value, pullback) function
_JVPS = {}   # user function -> dispatcher of its generated jvp
_counter = [0]


def _kind(a):
    """'s' a scalar, 'i' an integer, '1' a 1-d array, 'n' a plain 1-d float array,
    'l' a list or tuple of scalars, 't' another list, tuple or dict (a pytree: its adjoint
    is one too), 'a' anything else."""
    t = type(a)
    if t is float:
        return "s"
    if t is int or t is bool or isinstance(a, (np.integer, np.bool_)):
        return "i"  # not differentiated: no tangent, no adjoint
    if t is np.ndarray:
        nd = a.ndim
        if nd == 1 and a.dtype.kind == "f":
            return "n"  # a plain float vector: its adjoint is built as a list of floats
        return "s" if nd == 0 else ("1" if nd == 1 else "a")
    if isinstance(a, (list, tuple)):
        if all(type(e) is float for e in a):
            return "l"
        for e in a:
            if isinstance(e, (list, tuple, dict)) or ndim_of(e) != 0:
                return "t"
        return "l"
    if isinstance(a, dict):
        return "t"
    nd = ndim_of(a)
    return "s" if nd == 0 else ("1" if nd == 1 else "a")


def _compile(src, name, namespace, label):
    """Execute generated source in its own namespace; keep it visible to tracebacks."""
    _counter[0] += 1
    filename = f"<wengert.source {label} #{_counter[0]}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"__name__": "wengert.source.generated", "__builtins__": builtins}
    ns.update(namespace)
    exec(compile(src, filename, "exec"), ns)
    return ns[name]


def _namespace(fn, gen):
    ns = dict(fn.namespace)
    ns.update(gen.namespace)
    return ns


class _Specialised:
    """Generates (once per pattern of scalar / array arguments) and runs a program."""

    def __init__(self, f, kind, argnums=0):
        self.f, self.kind, self.argnums = f, kind, argnums
        self.fn = normalise(f)          # parse now: unsupported syntax fails early
        self.programs = {}              # scalar pattern -> (callable, source)
        self.last = None

    def transform_vjp(self, gen):
        return self._namer(gen, "vjp")

    def transform_jvp(self, gen):
        return self._namer(gen, "jvp")

    @staticmethod
    def _namer(gen, mode):
        """How generated code names the transformed version of a called user function."""
        def name_of(callee):
            d = _dispatcher(callee, mode)
            ref = f"{d.spec.fn.name}_{mode}"   # (a lambda's is the name it is bound to)
            while ref in gen.namespace and gen.namespace[ref] is not d:
                ref += "_"
            gen.namespace[ref] = d
            return ref
        return name_of

    def build(self, pattern):
        with _lock:
            if pattern in self.programs:
                return self.programs[pattern]
            fn = self.fn
            given = tuple(pattern)
            pattern = given + ("s",) * (len(fn.params) - len(given))
            if pattern in self.programs:  # parameters left to their defaults
                self.programs[given] = self.programs[pattern]
                return self.programs[pattern]
            name = f"{fn.name}_{self.kind}"
            if self.kind == "jvp":
                gen = ForwardGen(fn, pattern, None)
                gen.transform = self.transform_jvp(gen)
                src, _ = gen.generate(name)
            else:
                nums = (self.argnums,) if isinstance(self.argnums, int) else tuple(self.argnums)
                nums = tuple(i % len(fn.params) for i in nums)
                split = self.kind == "vjp"
                wrt = [fn.params[i] for i in nums] if not split else \
                    [p for p, k in zip(fn.params, pattern) if k != "i"]
                gen = ReverseGen(fn, wrt, pattern, None, split=split)
                gen.transform = self.transform_vjp(gen)
                src, _ = gen.generate(name, nums, not isinstance(self.argnums, int))
            func = _compile(src, name, _namespace(fn, gen), f"{self.kind} of {fn.name}")
            src = src.rstrip("\n")
            func.source = src
            self.programs[pattern] = self.programs[given] = (func, src)
            return func, src

    def program(self, args):
        pattern = tuple(_kind(a) for a in args)
        got = self.programs.get(pattern)
        if got is None:
            got = self.build(pattern)
        self.last = got[1]
        return got[0]


def _dispatcher(f, kind):
    table = _VJPS if kind == "vjp" else _JVPS
    with _lock:
        d = table.get(f)
        if d is None:
            spec = _Specialised(f, kind)
            if kind == "vjp":
                def d(*args):
                    for a in args:
                        _refuse_complex(a, "vjp")
                    return spec.program(args)(*args)
            else:
                def d(primals, tangents):
                    return spec.program(primals)(primals, shaped_tangents(primals, tangents))
            d.spec = spec
            table[f] = d
        return d


def grad(f, argnums=0):
    """The gradient of ``f`` as a generated Python function (reverse mode, source to source).

    ``df.source`` is the program: the original statements one operation per line,
    then the adjoints ``gx += ...`` in reverse order.  ``df`` is an ordinary function:
    it can be called, pickled (for functions at the top level of a module) and
    differentiated again by any engine (``wg.grad(df)``).

    >>> import wengert as wg
    >>> from wengert.numpy import sin
    >>> def f(x, y):
    ...     return x * y + sin(x)
    >>> df = wg.source.grad(f, argnums=(0, 1))
    >>> [round(float(g), 12) for g in df(0.5, 4.2)]
    [5.07758256189, 0.5]
    """
    argnums = check_argnums(argnums, "source.grad")
    spec = _Specialised(f, "grad", argnums)
    nparams = len(spec.fn.params)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nparams <= i < nparams:
            raise ValueError(f"grad: argnums={argnums!r} but {_name(spec)} takes {nparams} "
                             "argument(s)")
    nums = tuple(i % nparams for i in nums)
    func, src = spec.build(tuple("s" for _ in spec.fn.params))
    one = isinstance(argnums, int)
    df = _make_grad(spec, nums, one)
    functools.update_wrapper(df, f)
    df.__wrapped__ = f
    df.__name__ = f"{_name(spec)}_grad"
    df.__module__ = "wengert.source.generated"
    df.__qualname__ = generated.encode("grad", f, argnums)
    df.source = src
    df.spec = spec
    setattr(generated, df.__qualname__, df)
    return df


def _name(spec):
    """``f``'s name; a lambda's is the name its generated ``def`` takes."""
    return spec.fn.name if spec.f.__name__ == "<lambda>" else spec.f.__name__


def _bind(spec, args, kwargs):
    """Keyword arguments become positional (the programs are specialised on positions)."""
    ba = inspect.signature(spec.f).bind(*args, **kwargs)
    return ba.args


def _make_grad(spec, nums, one):
    def df(*args, **kwargs):
        if kwargs:
            args = _bind(spec, args, kwargs)
        for i in nums:
            if i >= len(args):
                raise TypeError(f"{_name(spec)}_grad: missing argument {i}")
            a = args[i]
            if type(a) is float or (type(a) is np.ndarray and a.dtype.kind == "f") or \
                    isinstance(a, (list, tuple, dict)):
                continue
            check_differentiable(a, lambda: f"grad: {_arg_name(spec.f, i)}")
            _refuse_complex(a, "grad")
        prog = spec.program(args)
        df.source = spec.last
        out = prog(*args)
        if one:
            return fit(out, args[nums[0]])
        return tuple(fit(g, args[i]) for g, i in zip(out, nums))
    return df


def jvp(f):
    """The forward-mode program of ``f``: ``jf(primals, tangents) -> (out, out_tangent)``.

    ``jf.source`` interleaves each statement with its differential (Program B).

    >>> import wengert as wg
    >>> from wengert.numpy import sin
    >>> def f(x, y):
    ...     return x * y + sin(x)
    >>> jf = wg.source.jvp(f)
    >>> out, t = jf((0.5, 4.2), (1.0, 0.0))
    >>> round(float(t), 12)
    5.07758256189
    """
    spec = _Specialised(f, "jvp")
    func, src = spec.build(tuple("s" for _ in spec.fn.params))

    def jf(primals, tangents):
        primals, tangents = tuple(primals), tuple(tangents)
        nparams = len(spec.fn.params)
        if len(primals) < nparams:
            # parameters with defaults take their default, with a zero tangent
            defaults = spec.f.__defaults__ or ()
            missing = nparams - len(primals)
            if missing > len(defaults):
                raise TypeError(f"{_name(spec)}_jvp: expected {nparams} primals")
            extra = defaults[len(defaults) - missing:]
            primals = primals + tuple(extra)
            tangents = tangents + tuple(0.0 for _ in extra)
        if len(primals) != len(tangents):
            raise ValueError("jvp needs one tangent per primal")
        for a in primals:
            _refuse_complex(a, "jvp")
        tangents = shaped_tangents(primals, tangents)
        prog = spec.program(primals)
        jf.source = spec.last
        out, t = prog(primals, tangents)
        if isinstance(out, tuple):
            return out, tuple(broadcast_like(ti, oi) if _needs_fix(ti, oi) else ti
                              for ti, oi in zip(t, out))
        return out, (broadcast_like(t, out) if _needs_fix(t, out) else t)

    functools.update_wrapper(jf, f)
    jf.__wrapped__ = f
    jf.__name__ = f"{_name(spec)}_jvp"
    jf.__module__ = "wengert.source.generated"
    jf.__qualname__ = generated.encode("jvp", f, 0)
    jf.source = src
    jf.spec = spec
    setattr(generated, jf.__qualname__, jf)
    return jf


def _refuse_complex(a, what):
    """Generated programs are written for real numbers (no conjugates): a complex input is
    refused by name rather than given a derivative in the wrong convention."""
    if np.iscomplexobj(a):
        raise NotImplementedError(
            f"wengert.source.{what} does not differentiate complex inputs; use wg.{what} "
            f"(docs/complex.md), which does, or pass real and imaginary parts separately.")


def _needs_fix(t, out):
    return shape_of(t) != shape_of(out)


def vjp(f):
    """``fv(*args) -> (out, pullback)`` as generated code (the form user calls use)."""
    return _dispatcher(f, "vjp")


generated.BUILDERS.update(grad=grad, jvp=jvp)   # unpickling builds the function again


# -- text in, text out: for the command line and the explorer -----------------------------------
def _text_namespace():
    ns = {"np": np, "numpy": np, "math": math, "wnp": wnp, "pi": math.pi, "e": math.e,
          "tau": math.tau, "inf": math.inf, "nan": math.nan}
    for name in dir(wnp):
        if not name.startswith("_"):
            try:
                ns[name] = getattr(wnp, name)
            except AttributeError:
                pass
    return ns


def programs_from_source(src, func_name):
    """``(forward_text, reverse_text)``: the derivative programs of ``func_name`` in ``src``.

    ``src`` is the (trusted, already validated) source of a function whose bare names
    ``sin``, ``cos``, ``exp``... are the ``wengert.numpy`` functions.  Every parameter is
    an input.  The forward text interleaves each operation with its differential
    (``a = x * y`` / ``da = y * dx + x * dy``); the reverse text is the forward sweep,
    then ``gz = 1.0`` and the adjoint statements in reverse order.  Both are Python
    statements (without ``def``), ready to print; they assume scalar inputs.

    >>> fwd, rev = programs_from_source("def f(x, y):\\n    return x * y + sin(x)\\n", "f")
    >>> print(rev)
    a = x * y
    b = sin(x)
    z = a + b
    ga = gb = gx = gy = 0.0
    gz = 1.0
    ga += gz
    gb += gz
    gx += cos(x) * gb
    gx += y * ga
    gy += x * ga
    """
    fn = parse_source(src, func_name, _text_namespace())
    scalars = tuple("s" for _ in fn.params)
    fgen = ForwardGen(fn, scalars, _no_calls)
    _, fbody = fgen.generate(f"{func_name}_jvp")
    rgen = ReverseGen(fn, fn.params, scalars, _no_calls)
    _, (fwd, init, gout, rev) = rgen.generate(f"{func_name}_grad", tuple(range(len(fn.params))),
                                              True)
    stack = [f"{rgen.stack} = []"] if rgen.stack else []
    rlines = stack + [_dedent(x) for x in fwd + init]
    if gout:
        rlines.append(f"{gout} = 1.0")
    rlines += [_dedent(x) for x in rev]
    return "\n".join(_dedent(x) for x in fbody), "\n".join(rlines)


def _dedent(line):
    return line[4:] if line.startswith("    ") else line


def _no_calls(fn):
    raise SourceError(f"a call to the user function {getattr(fn, '__name__', fn)}", None, None,
                      "programs_from_source handles one function")
