"""The architecture, checked: floors that import only downwards, no import circle,
rules that never import an engine, engines that name no primitive.

The floors (issue 18), lowest first; a module imports (at module level) only its
own floor and below, and imports within a floor form no circle:

0 utilities  tree, _allocator, _version, _progress, _collector, coloring (graph colourings,
             pure SciPy),
             arrays (bookkeeping for any array, traced or not)
1 core       the Primitive record (core) and the tracer protocol (tracing)
2 rules      every primitive (checkpoint's and the graph tracer's own too)
3 namespaces numpy, scipy, _dispatch (NEP 13/18), coverage, expr (the CLI's language)
4 engines    forward, reverse, jet, sparsity (index sets: sparsity detection)
5 transforms, sparse (sparse Jacobians and Hessians)
6 built on transforms: graph, source, checkpoint, implicit and the SciPy solvers on it
             (scipy.optimize, scipy.sparse.linalg, scipy.integrate: their rules call jvp/vjp)
7 what users run: cli, explore, expr_derivatives (what both show of an expression)
8 the package root, which no library module imports
9 compat: other libraries' module trees (autograd's) built on all of the above

An import inside a function is allowed only to load an optional dependency lazily.
``PENDING`` lists what still breaks these rules in the lower floors, being re-laid: it
can only shrink (an entry that no longer breaks a rule fails the test until deleted).
"""
import ast
import collections
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[1] / "wengert"
MAX_LINES = 800

FLOORS = {
    0: ("wengert.tree", "wengert._allocator", "wengert._version", "wengert._progress",
        "wengert.coloring", "wengert.arrays", "wengert._pickling",
        "wengert._interrupt", "wengert._collector"),
    1: ("wengert.core", "wengert.tracing"),
    2: ("wengert.rules", "wengert.rules.*"),
    3: ("wengert.numpy", "wengert.numpy.*", "wengert.scipy", "wengert.scipy.*",
        "wengert._dispatch", "wengert.coverage", "wengert.expr"),
    4: ("wengert.forward", "wengert.reverse", "wengert.jet", "wengert.sparsity",
        "wengert.batching", "wengert._validate"),
    5: ("wengert.transforms", "wengert.sparse", "wengert.custom", "wengert.complex_ad",
        "wengert.checking", "wengert.directions"),
    6: ("wengert.graph", "wengert.graph.*", "wengert.source", "wengert.source.*",
        "wengert.checkpoint", "wengert.checkpoint.*", "wengert.implicit_diff",
        "wengert.scipy.optimize", "wengert.scipy.sparse", "wengert.scipy.sparse.*",
        "wengert.scipy.integrate", "wengert.scipy._quadrature", "wengert.scipy._solving",
        "wengert.scipy._optima", "wengert.scipy._ode", "wengert.scipy._ode_ivp",
        "wengert.scipy._ode_rhs"),
    7: ("wengert.cli", "wengert.explore", "wengert.explore.*", "wengert.expr_derivatives"),
    8: ("wengert",),
    9: ("wengert.compat", "wengert.compat.*"),
}
# optional dependencies, which a function may import lazily (and only these)
OPTIONAL = {"matplotlib", "tqdm", "numba"}  # the "plot", "progress" and "fast" extras
# runtime dependencies slow enough to load that a function loads them on first use:
# scipy.special and scipy.linalg take about 0.3 s, as long as ``import wengert`` itself;
# scipy.stats and scipy.signal (whose names without rules wengert.scipy.stats and .signal pass
# through) longer still
HEAVY = {"scipy.special", "scipy.linalg", "scipy.stats", "scipy.signal"}
# the imports of wengert modules inside a function, each of one that loads scipy.special
# (HEAVY), none closing a circle: elementwise's rules for np.logaddexp and np.i0 need
# scipy.special's expit and i1 (rules/special_core, which imports no rules module but the
# declaring helper); the dispatch meets a scipy.special ufunc on a tracer and loads its rules
# (wengert.rules.special, below it); source mode resolves math.erf / erfc / gamma / lgamma to
# wengert.scipy.special's (the command line imports source/ and otherwise never scipy.special).
LAZY = {("wengert.rules.elementwise", "wengert.rules.special_core"),
        ("wengert._dispatch", "wengert.rules.special"),
        ("wengert.source.resolve", "wengert.scipy.special"),
        # autograd's odeint loads wengert's ODE solvers (SciPy's integrators) on first use; until
        # wengert.scipy.integrate exists the import names its package
        ("wengert.compat.autograd.scipy.integrate", "wengert.scipy.integrate"),
        ("wengert.compat.autograd.scipy.integrate", "wengert.scipy")}

# Known violations outside graph/, source/, checkpoint/, explore/, cli and expr (whose
# rules hold): ("upward", module, imported), ("cycle", modules...), ("inner", module,
# imported) for an import inside a function, ("size", module) for more than MAX_LINES
# lines, ("root", module) for an import of the package root.
# ("lazy-cycle", modules...): a circle closed by an import inside a function
PENDING = set()  # none left: every module keeps every rule


# -- reading the imports ------------------------------------------------------------------------
def _modules():
    mods = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        is_pkg = parts[-1] == "__init__"
        mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


MODULES = _modules()


def _wengert_module(name):
    """The module of ``wengert`` that importing ``name`` loads (``None``: not ours)."""
    if name != "wengert" and not name.startswith("wengert."):
        return None
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def _targets(module, is_pkg, node):
    """What an import statement imports: wengert modules by name, others by their name."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module if is_pkg else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        source = base + ("." + node.module if node.module else "")
    else:
        source = node.module
    if _wengert_module(source) is None:
        return [source]
    # ``from pkg import name``: the submodule ``pkg.name`` where there is one
    return [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source
            for a in node.names]


def _imports(module):
    """``(module-level imports, in-function imports)`` of ``module``, as names."""
    path, is_pkg = MODULES[module]
    top, inner = set(), set()

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for t in _targets(module, is_pkg, child):
                    ours = _wengert_module(t)
                    (inner if in_function else top).add(ours or t)
            elif isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                continue
            else:
                walk(child, in_function or isinstance(
                    child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
    walk(ast.parse(path.read_text()), False)
    top.discard(module)
    inner.discard(module)
    return top, inner


IMPORTS = {m: _imports(m) for m in MODULES}


def floor_of(module):
    """The floor of the most specific name that covers ``module`` (``wengert.scipy.optimize``
    over ``wengert.scipy.*``)."""
    best = None
    for floor, names in FLOORS.items():
        for n in names:
            if module == n:
                return floor
            if n.endswith(".*") and module.startswith(n[:-1]) and (
                    best is None or len(n) > best[0]):
                best = (len(n), floor)
    if best is not None:
        return best[1]
    raise AssertionError(f"{module} has no floor: add it to FLOORS in tests/test_layering.py "
                         "(and to the README's drawing)")


def _module_level_graph():
    """Module-level imports, each with the packages it loads on the way (``a.b.c`` loads
    ``a.b``), except the importer's own packages, which are loading already."""
    graph = collections.defaultdict(set)
    for m, (top, _) in IMPORTS.items():
        for t in top:
            if _wengert_module(t) is None:
                continue
            graph[m].add(t)
            parts = t.split(".")
            for i in range(1, len(parts)):
                parent = ".".join(parts[:i])
                if not m.startswith(parent + ".") and parent != m:
                    graph[m].add(parent)
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(MODULES):
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(tuple(sorted(comp)))
    return found


def violations():
    found = set()
    graph = _module_level_graph()
    for m, targets in graph.items():
        for t in targets:
            if floor_of(t) > floor_of(m):
                found.add(("upward", m, t))
    cycles = _cycles(graph)
    found.update(("cycle",) + comp for comp in cycles)
    # and with the imports inside functions: a lazy import is still an import circle
    lazy = collections.defaultdict(set, {m: set(t) for m, t in graph.items()})
    for m, (_, inner) in IMPORTS.items():
        lazy[m].update(t for t in inner if _wengert_module(t) is not None)
    found.update(("lazy-cycle",) + comp for comp in _cycles(lazy) if comp not in cycles)
    for m, (top, inner) in IMPORTS.items():
        for t in inner:
            if (m, t) in LAZY or t in HEAVY:
                continue
            if _wengert_module(t) is not None or t.split(".")[0] not in OPTIONAL:
                found.add(("inner", m, t))
        if m != "wengert" and "wengert" in top | inner:
            found.add(("root", m))
        path, _ = MODULES[m]
        if len(path.read_text().splitlines()) > MAX_LINES:
            found.add(("size", m))
    return found


# -- the tests ------------------------------------------------------------------------------------
def test_every_module_has_a_floor():
    for m in MODULES:
        floor_of(m)


def test_floors_no_circle_no_import_in_functions_no_large_module():
    """(a) module-level imports go to the same floor or below; (b) no import circle, at
    module level or through imports inside functions; (c) no import inside a function but of an optional dependency; (d) no
    module over MAX_LINES lines; (e) the package root is imported by no library module."""
    found = violations()
    new = sorted(found - PENDING)
    fixed = sorted(PENDING - found)
    assert not new, "the layering is broken:\n" + "\n".join(map(repr, new))
    assert not fixed, ("fixed, so delete from PENDING in tests/test_layering.py:\n"
                       + "\n".join(map(repr, fixed)))


def test_upper_floors_have_nothing_pending():
    """graph/, source/, checkpoint/, explore/, cli and expr keep every rule."""
    upper = ("wengert.graph", "wengert.source", "wengert.checkpoint", "wengert.explore",
             "wengert.cli", "wengert.expr", "wengert.expr_derivatives", "wengert.rules.logic",
             "wengert.rules.checkpointing")
    for entry in PENDING:
        for m in entry[1:]:
            assert not any(m == u or m.startswith(u + ".") for u in upper), entry


def test_the_checker_sees_what_it_checks():
    """The reader: relative (``from .. import transforms``, ``from ..rules.logic import``),
    absolute and in-function imports; the circle finder, on a made-up graph."""
    top, inner = IMPORTS["wengert.graph.graph"]
    assert {"wengert.graph.codegen", "wengert.graph.ir", "wengert.transforms",
            "wengert.reverse", "numpy"} <= top and not inner
    assert "wengert.rules.logic" in IMPORTS["wengert.graph.trace"][0]
    assert "wengert.numpy" in IMPORTS["wengert.expr"][0]
    top, inner = IMPORTS["wengert.cli"]
    assert {"wengert.explore", "wengert._version"} <= top and inner == {"matplotlib",
                                                                         "matplotlib.pyplot"}
    graph = collections.defaultdict(set, {"wengert.core": {"wengert.tree"},
                                          "wengert.tree": {"wengert.core"},
                                          "wengert.cli": {"wengert.core"}})
    assert _cycles(graph) == [("wengert.core", "wengert.tree")]
    assert floor_of("wengert.rules.logic") == 2 and floor_of("wengert.explore.api") == 7


# -- rules and engines ----------------------------------------------------------------------------
ENGINES = {"forward", "reverse", "jet", "graph", "source", "transforms", "checkpoint",
           "sparsity", "sparse"}


def _relative_imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield (node.module or ""), [a.name for a in node.names]


def test_rules_never_import_an_engine():
    for path in (PKG / "rules").glob("*.py"):
        for module, _ in _relative_imports(path):
            assert module.split(".")[0] not in ENGINES, f"{path.name} imports {module}"


def test_engines_take_only_bookkeeping_from_rules():
    """Forward, reverse, Taylor and graph engines may use the operator table and the graph
    tracer's own comparison primitives (rules/logic.py) and how a record says it is lowered
    (rules/lowering.py, which names no primitive), never a particular primitive's module (the
    zero/sum helpers are wengert.arrays, below rules)."""
    files = [PKG / "forward.py", PKG / "reverse.py", PKG / "jet.py", *(PKG / "graph").glob("*.py")]
    for path in files:
        for module, names in _relative_imports(path):
            parts = module.split(".")
            if "rules" in parts:
                sub = parts[parts.index("rules") + 1:] or [""]
                assert sub[0] in ("", "logic", "lowering"), \
                    f"{path.name} imports rules.{'.'.join(sub)}"
                if sub[0] == "":
                    assert set(names) <= {"OPERATORS"}, f"{path.name} imports {names}"


# -- the rule record: closed, sealed, read only in core -----------------------------------------
# the names a probe or an assignment of a primitive's fact would use: every fact, the rules the
# decorators declare, and the linearity's readable forms, and the six flags the one ``lowering``
# fact replaced (none may come back); not what any function has too (``name``, ``__name__``,
# ``impl``)
RECORD_NAMES = {"broadcasting", "multiple_results", "nargs", "linearity", "nondiff", "domain",
                "ufunc", "sparsity", "batch", "identity_when", "impure", "lowering",
                "fast_partials", "_frule", "_rrule", "_symbolic_zeros", "_rrule_needs", "_sealed",
                "sealed", "linear", "bilinear",
                "numba_scalar", "numba_form", "gather_at_index", "scatter_into_zeros",
                "gather_flat", "flat_view", "python_operator"}
FORMER_FACTS = {"numba_scalar", "numba_form", "gather_at_index", "scatter_into_zeros",
                "gather_flat", "flat_view", "python_operator"}  # now parts of ``lowering``


def _record_names():
    return RECORD_NAMES


def test_the_record_names_are_the_records():
    """The names checked are core's: its facts, and slots or properties of the record."""
    from wengert.core import FACTS, Primitive
    assert set(FACTS) <= RECORD_NAMES
    assert RECORD_NAMES - set(FACTS) - FORMER_FACTS <= set(Primitive.__slots__) | set(dir(Primitive))
    assert not FORMER_FACTS & (set(Primitive.__slots__) | set(dir(Primitive)))


def _record_violations(path, names):
    """``getattr``/``hasattr``/``setattr`` of a fact by its name, and ``x.fact = ...`` (but a
    class's own ``self.fact``: custom.py's records have their own ``nondiff``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                "getattr", "hasattr", "setattr") and len(node.args) >= 2 and isinstance(
                node.args[1], ast.Constant) and node.args[1].value in names:
            found.append(f"{node.func.id}(..., {node.args[1].value!r}) at line {node.lineno}")
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            for a in ast.walk(t):
                if isinstance(a, ast.Attribute) and isinstance(a.ctx, ast.Store) and \
                        a.attr in names and getattr(a.value, "id", None) != "self":
                    found.append(f"{ast.unparse(a)} = ... at line {node.lineno}")
    return found


def test_no_fact_is_probed_or_assigned_outside_core():
    """Every fact is a keyword of the primitive's declaration and an attribute of its closed
    record: nothing outside core.py asks ``getattr(prim, "fact", default)`` (as if the record
    might lack it) or assigns one after the declaration."""
    names = _record_names()
    bad = {}
    for path in sorted(PKG.rglob("*.py")):
        if path == PKG / "core.py":
            continue
        found = _record_violations(path, names)
        if found:
            bad[str(path.relative_to(PKG))] = found
    assert not bad, f"facts probed or assigned outside core.py: {bad}"


def test_the_record_checker_sees_what_it_checks(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("p.sparsity = 1\nq.a.batch = 2\nself.nondiff = 3\n"
                   "getattr(p, 'linear', False)\nhasattr(p, 'domain')\ngetattr(p, '__name__')\n")
    found = _record_violations(src, _record_names())
    assert [f.split(" ")[0] for f in found] == ["p.sparsity", "q.a.batch", "getattr(...,",
                                                "hasattr(...,"]


def _every_primitive():
    """Every Primitive that importing every module of wengert declares."""
    import gc
    import importlib
    from wengert.core import Primitive
    for m in sorted(MODULES):
        if m.startswith(("wengert.explore", "wengert.compat.autograd.__main__")):
            continue
        importlib.import_module(m)
    return [o for o in gc.get_objects() if type(o) is Primitive]


def test_every_primitive_is_sealed():
    """At run time: every record is closed (``__slots__``, no ``__dict__``) and sealed: a fact
    assigned after the declaration raises, naming the keyword to use instead."""
    from wengert.core import FACTS
    prims = _every_primitive()
    assert len(prims) > 300
    for p in prims:
        assert p.sealed and not hasattr(p, "__dict__"), p
    p = prims[0]
    for fact in FACTS + ("linear", "made_up"):
        if fact == "lowering":
            continue
        with pytest.raises(AttributeError, match="declaration"):
            setattr(p, fact, getattr(p, fact, None))


# -- what a module exports ----------------------------------------------------------------------
def _binds_public_names(path):
    """Whether a module defines a public name (a function, a class, a variable)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            return True
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and not t.id.startswith("_") and t.id != "__all__"
                for t in node.targets):
            return True
    return False


def test_every_module_that_exports_names_has_all():
    """``__all__`` says what ``from m import *`` gives: without it, every module a module
    imports leaks (``wnp.np``, ``wnp.math``, ``wnp.patterns`` once did)."""
    missing = []
    for m, (path, is_pkg) in sorted(MODULES.items()):
        if m.startswith("wengert.compat"):  # other libraries' module trees, as they are
            continue
        text = path.read_text()
        if (_binds_public_names(path) or "import *" in text) and "__all__" not in text:
            missing.append(m)
    assert not missing, f"modules without __all__: {missing}"


def _documented_numpy_extras():
    """The names of wengert.numpy that NumPy lacks, as docs/api.md lists them (its bullet
    "`wengert.numpy`'s names beyond NumPy's: ..."): documenting one is what adds one."""
    import re
    text = (PKG.parent / "docs" / "api.md").read_text()
    start = text.index("* `wengert.numpy`'s names beyond NumPy's")
    end = text.index("\n* ", start + 1)
    import numpy as np
    import wengert.numpy as wnp
    named = set(re.findall(r"`([a-z_]+)[(`]", text[start:end]))
    return {n for n in named if hasattr(wnp, n)} - set(dir(np))


def test_the_numpy_namespace_holds_numpys_names():
    """``wengert.numpy``'s public names are NumPy's (plus the documented extras), and no
    module leaks in but NumPy's own submodules (fft, linalg, random)."""
    import types
    import numpy as np
    import wengert.numpy as wnp
    names = {n for n in vars(wnp) if not n.startswith("_")}
    extras = names - set(dir(np))
    assert extras == _documented_numpy_extras()
    modules = {n for n in names if isinstance(getattr(wnp, n), types.ModuleType)}
    assert modules == {"fft", "linalg", "random"}
    for n in modules:
        assert getattr(wnp, n).__name__ == f"wengert.numpy.{n}"


HOLES_PROBE = r"""
import os, sys, types
# the package without its __init__ (which imports every floor): core and what core imports
stub = types.ModuleType("wengert")
stub.__path__ = [os.path.join(os.environ["PYTHONPATH"], "wengert")]
sys.modules["wengert"] = stub
import wengert.core
low = [m for m in sorted(sys.modules) if m.startswith("wengert.")]
def snapshot():
    out = {}
    for m in low:
        mod = sys.modules[m]
        # a slot in a list counts too (core's _NESTED_ARRAY[0] was one)
        out[m] = {k: (id(v), tuple(map(id, v)) if type(v) is list else ())
                  for k, v in vars(mod).items()
                  if not (isinstance(v, types.ModuleType) and v.__name__ == m + "." + k)}
        for k, v in vars(mod).items():
            if isinstance(v, type) and v.__module__ == m:
                out[m + "." + k] = {a: id(b) for a, b in vars(v).items()}
    return out
before = snapshot()
del sys.modules["wengert"]
import wengert, wengert.numpy, wengert.scipy.special, wengert.source, wengert.checkpoint
import wengert.rules.special  # noqa: E401
after = snapshot()
for key in sorted(before):
    changed = sorted(k for k in set(before[key]) | set(after[key])
                     if before[key].get(k) != after[key].get(k))
    if changed:
        print(key, changed)
"""


def test_no_lower_floor_is_filled_from_above():
    """What ``wengert.core`` loads (core, tracing, arrays and what they import) is complete
    when it has loaded: importing every floor above adds or replaces nothing in those modules
    or their classes (once, Tracer got its operators and core a list-stacker that way)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", HOLES_PROBE], capture_output=True, text=True,
                         cwd=PKG.parent, env={**__import__("os").environ,
                                              "PYTHONPATH": str(PKG.parent)})
    assert out.returncode == 0, out.stderr
    assert out.stdout == "", "filled from above:\n" + out.stdout
