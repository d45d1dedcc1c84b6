"""The architecture, checked: floors that import only downwards, no import circle,
rules that never import an engine, engines that name no primitive.

The floors (issue 18), lowest first; a module imports (at module level) only its
own floor and below, and imports within a floor form no circle:

0 utilities  tree, _allocator, _version, _progress, coloring (graph colourings, pure SciPy),
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

PKG = pathlib.Path(__file__).resolve().parents[1] / "wengert"
MAX_LINES = 800

FLOORS = {
    0: ("wengert.tree", "wengert._allocator", "wengert._version", "wengert._progress",
        "wengert.coloring", "wengert.arrays", "wengert._pickling",
        "wengert._interrupt"),
    1: ("wengert.core", "wengert.tracing"),
    2: ("wengert.rules", "wengert.rules.*"),
    3: ("wengert.numpy", "wengert.numpy.*", "wengert.scipy", "wengert.scipy.*",
        "wengert._dispatch", "wengert.coverage", "wengert.expr"),
    4: ("wengert.forward", "wengert.reverse", "wengert.jet", "wengert.sparsity",
        "wengert.batching", "wengert._validate"),
    5: ("wengert.transforms", "wengert.sparse", "wengert.custom", "wengert.complex_ad",
        "wengert.checking"),
    6: ("wengert.graph", "wengert.graph.*", "wengert.source", "wengert.source.*",
        "wengert.checkpoint", "wengert.checkpoint.*", "wengert.implicit_diff",
        "wengert.scipy.optimize", "wengert.scipy.sparse", "wengert.scipy.sparse.*",
        "wengert.scipy.integrate", "wengert.scipy._quadrature", "wengert.scipy._solving",
        "wengert.scipy._optima", "wengert.scipy._ode", "wengert.scipy._ode_ivp"),
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
# (HEAVY): elementwise's rules for np.logaddexp and np.i0 need scipy.special's expit and i1,
# whose primitives live in special_base (no circle at module level: special_base imports
# elementwise); the dispatch meets a scipy.special ufunc on a tracer before
# wengert.scipy.special, which registers them, was imported; source mode resolves math.erf /
# erfc / gamma / lgamma to wengert.scipy.special's (the command line imports source/ and
# otherwise never scipy.special).
LAZY = {("wengert.rules.elementwise", "wengert.rules.special_base"),
        ("wengert._dispatch", "wengert.scipy.special"),
        ("wengert.source.resolve", "wengert.scipy.special"),
        # autograd's odeint loads wengert's ODE solvers (SciPy's integrators) on first use; until
        # wengert.scipy.integrate exists the import names its package
        ("wengert.compat.autograd.scipy.integrate", "wengert.scipy.integrate"),
        ("wengert.compat.autograd.scipy.integrate", "wengert.scipy")}

# Known violations outside graph/, source/, checkpoint/, explore/, cli and expr (whose
# rules hold): ("upward", module, imported), ("cycle", modules...), ("inner", module,
# imported) for an import inside a function, ("size", module) for more than MAX_LINES
# lines, ("root", module) for an import of the package root.
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
    found.update(("cycle",) + comp for comp in _cycles(graph))
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
    """(a) module-level imports go to the same floor or below; (b) no import circle at
    module level; (c) no import inside a function but of an optional dependency; (d) no
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
