"""The ``wengert`` command line: differentiate, plot, draw and explore expressions.

Expressions are parsed by :mod:`wengert.expr` (never ``eval``-ed).  Any bad
expression or argument gives a one-line error on stderr and exit status 2.

>>> main(["diff", "x*y + sin(x)", "--at", "x=0.5", "y=4.2"])  # doctest: +ELLIPSIS
f(x, y) = x * y + sin(x)
at x = 0.5, y = 4.2
value  2.579425538604203
df/dx  5.077582561890373
df/dy  0.5
...
0
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np

from ._version import __version__
from .explore import serve
from .expr import ExprError, parse
from .expr_derivatives import gradient, programs
from .reverse import Tape, Var
from .transforms import derivative

__all__ = ["main"]

EXIT_USAGE = 2


class UsageError(Exception):
    """A bad argument: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    out = None  # where --help and --version go (main's stdout)

    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(message)

    def _print_message(self, message, file=None):
        if message:
            (self.out or file or sys.stdout).write(message)


_OPTIONS = {"-h", "--help", "--at", "--format", "--range", "-o", "--output", "--points"}


def _protect_expression(argv):
    """Let an expression that starts with '-' ("-x*y") be the positional EXPR, and a range
    that starts with '-' ("--range -2:2") be the value of --range: argparse would take
    either for an option."""
    argv = list(argv)
    if len(argv) > 1 and argv[0] in ("diff", "plot", "dot") and argv[1].startswith("-") \
            and argv[1].split("=")[0] not in _OPTIONS:
        argv[1] = " " + argv[1]
    for i in range(len(argv) - 1):
        if argv[i] == "--range" and argv[i + 1].startswith("-"):
            argv[i:i + 2] = [f"--range={argv[i + 1]}", None]
    return [a for a in argv if a is not None]


def _build_parser():
    p = _Parser(prog="wengert", description="Automatic differentiation from the command line.")
    p.add_argument("--version", action="version", version=f"wengert {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    d = sub.add_parser("diff", help="value, gradient and derivative programs of an expression")
    d.add_argument("expr", metavar="EXPR", help='e.g. "x*y + sin(x)"')
    d.add_argument("--at", nargs="+", default=[], metavar="NAME=VALUE",
                   help="the point, e.g. --at x=0.5 y=4.2")
    d.add_argument("--format", choices=("text", "json"), default="text")

    e = sub.add_parser("explore", help="serve the interactive explorer in the browser")
    e.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    e.add_argument("--host", default=None,
                   help="address to bind (default 127.0.0.1; anything else must be explicit)")
    e.add_argument("--no-browser", action="store_true", help="do not open a browser")

    pl = sub.add_parser("plot", help="plot f, f' and a finite-difference check of a function of "
                                     "one variable: an expression, or FILE.py:FUNCTION")
    pl.add_argument("expr", metavar="EXPR|FILE.py:FUNCTION",
                    help='e.g. "sqrt(x) * sin(x)", or babysqrt.py:babysqrt (the file is '
                         "imported, as pytest imports test files)")
    pl.add_argument("--range", required=True, metavar="A:B", dest="range_",
                    help="the interval, e.g. 0.1:2 or -2:2")
    pl.add_argument("-o", "--output", required=True, metavar="OUT.png")
    pl.add_argument("--points", type=int, default=400)

    g = sub.add_parser("dot", help="the tape of an expression as a Graphviz graph")
    g.add_argument("expr", metavar="EXPR")
    g.add_argument("-o", "--output", required=True, metavar="OUT.svg|OUT.dot")
    g.add_argument("--at", nargs="+", default=[], metavar="NAME=VALUE",
                   help="the point the tape is recorded at (default 1.0 for every variable)")
    return p


# -- helpers ---------------------------------------------------------------------------
def _number(text, what):
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a number") from None
    if not math.isfinite(v):
        raise UsageError(f"{what}: {text!r} is not a finite number")
    return v


def parse_point(items, variables, *, default=None):
    """``["x=0.5", "y=4.2"]`` (or ``"x=0.5,y=4.2"``) -> ``{"x": 0.5, "y": 4.2}``."""
    env = {}
    for item in items:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            name, eq, val = part.partition("=")
            name = name.strip()
            if not eq or not name:
                raise UsageError(f"--at expects NAME=VALUE, got {part!r}")
            if name not in variables:
                known = ", ".join(variables) or "none"
                raise UsageError(f"--at {name}: not a variable of the expression "
                                 f"(variables: {known})")
            env[name] = _number(val.strip(), f"--at {name}")
    missing = [v for v in variables if v not in env]
    if missing:
        if default is None:
            raise UsageError(f"no value for {', '.join(missing)}: give --at "
                             + " ".join(f"{v}=..." for v in missing))
        env.update({v: default for v in missing})
    return env


def _fmt(v):
    v = float(v)
    return repr(v) if math.isfinite(v) else str(v)


def _jsonable(v):
    v = float(v)
    return v if math.isfinite(v) else str(v)


# -- commands ----------------------------------------------------------------------------
def cmd_diff(args, out):
    expr = parse(args.expr)
    env = parse_point(args.at, expr.variables)
    value, grads = gradient(expr, env)
    try:
        progs = programs(expr)
        prog_error = None
    except Exception as e:  # the source transformer may not cover everything yet
        progs, prog_error = None, f"{type(e).__name__}: {e}"
    head = f"f({', '.join(expr.variables)}) = {expr.to_text()}"
    if args.format == "json":
        data = {"expression": args.expr, "source": expr.python_source("f"),
                "at": env, "value": _jsonable(value),
                "gradient": {k: _jsonable(v) for k, v in grads.items()},
                "programs": ({"forward": progs[0], "reverse": progs[1]} if progs else None)}
        if prog_error:
            data["programs_error"] = prog_error
        out.write(json.dumps(data, indent=2) + "\n")
        return 0
    w = max([5] + [len(f"df/d{k}") for k in grads])
    lines = [head]
    if env:
        lines.append("at " + ", ".join(f"{k} = {_fmt(v)}" for k, v in env.items()))
    lines.append(f"{'value':<{w}}  {_fmt(value)}")
    lines += [f"{'df/d' + k:<{w}}  {_fmt(v)}" for k, v in grads.items()]
    lines.append("")
    if progs:
        lines += ["forward program (tangents dx, dy, ...):", _indent(progs[0]), "",
                  "reverse program (adjoints gx, gy, ..., in reverse order):",
                  _indent(progs[1])]
    else:
        why = f" ({prog_error})" if prog_error else ""
        lines.append(f"derivative programs: (unavailable){why}")
    out.write("\n".join(lines) + "\n")
    return 0


def _indent(text):
    if not text.strip():
        return "    (nothing to compute)"
    return "\n".join("    " + ln if ln else ln for ln in text.rstrip("\n").splitlines())


_FILE_FUNCTION = re.compile(r"(?P<path>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)")


def load_function(target):
    """``FILE.py:FUNCTION`` -> the function, by importing the file as a module (the user's
    own code, run as ``python FILE.py`` would run it; nothing else is evaluated)."""
    m = _FILE_FUNCTION.fullmatch(target.strip())
    if m is None:
        raise UsageError(f"expected FILE.py:FUNCTION, got {target!r}")
    path = os.path.abspath(m["path"])
    if not os.path.isfile(path):
        raise UsageError(f"no such file: {m['path']}")
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    mod_name = f"_wengert_plot_{stem}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    folder = os.path.dirname(path)
    sys.modules[mod_name] = module
    sys.path.insert(0, folder)  # its own imports of files beside it work, as under pytest
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        sys.modules.pop(mod_name, None)
        where = f" (line {e.lineno})" if isinstance(e, SyntaxError) and e.lineno else ""
        raise _UserCodeError(f"importing {m['path']} failed{where}: {type(e).__name__}: {e}") \
            from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    fn = getattr(module, m["name"], None)
    if fn is None:
        defined = sorted(k for k, v in vars(module).items()
                         if callable(v) and getattr(v, "__module__", None) == mod_name)
        raise UsageError(f"{m['path']} has no function {m['name']!r} (it defines: "
                         f"{', '.join(defined) or 'no functions'})")
    if not callable(fn):
        raise UsageError(f"{m['path']}:{m['name']} is not a function")
    try:
        inspect.signature(fn).bind(0.0)
    except TypeError:
        raise UsageError(f"{m['name']}{inspect.signature(fn)} cannot be called with one "
                         "number: plot needs a function of one float") from None
    except ValueError:  # no signature to read (a builtin): try it
        pass
    return fn


def plot_data(fn, lo, hi, points):
    """``(xs, f, f', finite differences)`` on ``points`` points of [lo, hi]: ``f'`` by
    forward mode (``wg.derivative``), the check by central differences with the step
    ``eps**(1/3) * max(1, |x|)``.  A point where ``fn`` fails (an overflow, a domain
    error) is a gap (NaN)."""
    df = derivative(fn)
    xs = np.linspace(lo, hi, points)
    fs, dfs, fds = (np.full(points, np.nan) for _ in range(3))
    with np.errstate(all="ignore"):
        for i, x in enumerate(xs):
            x = float(x)
            h = np.finfo(float).eps ** (1 / 3) * max(1.0, abs(x))
            try:
                fs[i] = float(fn(x))
                dfs[i] = float(df(x))
                fds[i] = (float(fn(x + h)) - float(fn(x - h))) / (2 * h)
            except (ArithmeticError, ValueError):
                pass
    return xs, fs, dfs, fds


def cmd_plot(args, out):
    if _FILE_FUNCTION.fullmatch(args.expr.strip()):
        fn = load_function(args.expr)
        name, var = args.expr.strip().rpartition(":")[2], "x"
        title = f"{name}({var})"
    else:
        expr = parse(args.expr)
        if len(expr.variables) != 1:
            raise UsageError(f"plot needs an expression of one variable, got "
                             f"{len(expr.variables)} ({', '.join(expr.variables) or 'none'})")
        fn, name, (var,) = expr, "f", expr.variables
        title = f"f({var}) = {expr.to_text()}"
    a, sep, b = args.range_.partition(":")
    if not sep:
        raise UsageError(f"--range expects A:B, got {args.range_!r}")
    lo, hi = _number(a, "--range start"), _number(b, "--range end")
    if not lo < hi:
        raise UsageError(f"--range needs A < B, got {args.range_!r}")
    if not 2 <= args.points <= 100_000:
        raise UsageError("--points must be between 2 and 100000")
    try:  # matplotlib is optional (the "plot" extra): loaded only here
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise _MissingDependency("plot needs matplotlib: pip install 'wengert[plot]' "
                                 "(or pip install matplotlib)") from None
    xs, fs, dfs, fds = plot_data(fn, lo, hi, args.points)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(xs, fs, label=title, linewidth=2.5)
    ax.plot(xs, dfs, label=f"{name}'({var}), forward mode (wg.derivative)", linestyle="--",
            linewidth=2.5)
    ax.plot(xs, fds, label="central finite differences", linestyle=":", linewidth=2,
            color="0.3")
    ax.axhline(0.0, color="0.7", linewidth=0.8)
    ax.set_xlabel(var)
    ax.legend()
    ax.grid(alpha=0.3)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        fig.tight_layout()
        fig.savefig(args.output, dpi=120)
    plt.close(fig)
    out.write(f"wrote {args.output}\n")
    ok = np.isfinite(dfs) & np.isfinite(fds)
    if ok.any():
        gap = np.abs(dfs[ok] - fds[ok])
        scale = np.maximum(1.0, np.abs(dfs[ok]))
        out.write(f"largest |{name}' - finite differences| = {gap.max():.2g} "
                  f"(relative {np.max(gap / scale):.2g}) over {int(ok.sum())} points\n")
    return 0


def tape_dot(expr, env):
    """Graphviz DOT of the tape (Wengert list) that evaluating ``expr`` records.

    Inputs are named by their variables; every node shows its value.
    """
    tape = Tape()
    env_vars = {k: tape.var(v) for k, v in env.items()}
    vals = expr.evaluate_all(env_vars)
    values = {}
    for v in vals:
        if isinstance(v, Var) and v.tape is tape:
            values[v.index] = v.value
    names = {v.index: k for k, v in env_vars.items()}
    lines = ["digraph tape {", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
    for i, (op, parents) in enumerate(zip(tape._names, tape._parents)):
        label = names.get(i, op)
        if i in values:
            label += f"\\n{float(values[i]):.6g}"
        shape = ', shape=ellipse' if op == "input" else ""
        lines.append(f'  n{i} [label="{i}: {label}"{shape}];')
        for p in parents:
            if p >= 0:
                lines.append(f"  n{p} -> n{i};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def cmd_dot(args, out):
    expr = parse(args.expr)
    env = parse_point(args.at, expr.variables, default=1.0)
    text = tape_dot(expr, env)
    path = args.output
    if path.lower().endswith(".svg"):
        dot = shutil.which("dot")
        if dot is None:
            raise _MissingDependency("rendering SVG needs Graphviz's 'dot' program (e.g. "
                                     "apt-get install graphviz); or write DOT text with "
                                     f"-o {os.path.splitext(path)[0]}.dot")
        r = subprocess.run([dot, "-Tsvg", "-o", path], input=text.encode(),
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            msg = r.stderr.decode(errors="replace").strip().splitlines()
            raise _MissingDependency(f"dot failed: {msg[0] if msg else r.returncode}")
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    out.write(f"wrote {path}\n")
    return 0


def cmd_explore(args, out):
    if not 0 <= args.port <= 65535:
        raise UsageError("--port must be between 0 and 65535")
    return serve(host=args.host, port=args.port, open_browser=not args.no_browser, out=out)


class _MissingDependency(Exception):
    """An optional tool is missing: exit status 1 with what to install."""


class _UserCodeError(Exception):
    """The user's own file failed to import: exit status 1, saying so."""


def main(argv=None, *, stdout=None, stderr=None):
    """Run the command line; returns the exit status (the console script exits with it)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        parser = _build_parser()
        _Parser.out = out
        args = parser.parse_args(_protect_expression(sys.argv[1:] if argv is None else argv))
        if args.command is None:
            raise UsageError("missing command: diff, explore, plot or dot (see --help)")
        cmd = {"diff": cmd_diff, "plot": cmd_plot, "dot": cmd_dot,
               "explore": cmd_explore}[args.command]
        return cmd(args, out)
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else 0
    except (UsageError, ExprError) as e:
        err.write(f"wengert: error: {_one_line(e)}\n")
        return EXIT_USAGE
    except (_MissingDependency, _UserCodeError) as e:
        err.write(f"wengert: error: {_one_line(e)}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except (ArithmeticError, ValueError, TypeError, NotImplementedError) as e:
        err.write(f"wengert: error: {type(e).__name__}: {_one_line(e)}\n")
        return EXIT_USAGE
    except OSError as e:
        err.write(f"wengert: error: {_one_line(e)}\n")
        return 1


def _one_line(e):
    s = " ".join(str(e).split())
    return s[:500]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
