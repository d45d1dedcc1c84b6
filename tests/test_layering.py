"""The architecture, checked: rules never import an engine; engines name no primitive."""
import ast
import pathlib

PKG = pathlib.Path(__file__).resolve().parents[1] / "wengert"
ENGINES = {"forward", "reverse", "jet", "graph", "source", "transforms", "checkpoint"}


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield (node.module or ""), [a.name for a in node.names]


def test_rules_never_import_an_engine():
    for path in (PKG / "rules").glob("*.py"):
        for module, _ in _imports(path):
            assert module.split(".")[0] not in ENGINES, f"{path.name} imports {module}"


def test_engines_take_only_bookkeeping_from_rules():
    """Forward, reverse, Taylor and graph engines may use the operator table, never a
    particular primitive's module (the zero/sum helpers are wengert.arrays, below rules)."""
    files = [PKG / "forward.py", PKG / "reverse.py", PKG / "jet.py", *(PKG / "graph").glob("*.py")]
    for path in files:
        for module, names in _imports(path):
            parts = module.split(".")
            if "rules" in parts:
                sub = parts[parts.index("rules") + 1:] or [""]
                assert sub[0] == "", f"{path.name} imports rules.{'.'.join(sub)}"
                if sub[0] == "":
                    assert set(names) <= {"OPERATORS"}, f"{path.name} imports {names}"


def _wengert_imports(path):
    """``(module, in_function)`` for each wengert module ``path`` imports, resolved absolutely."""
    package = ["wengert", *path.relative_to(PKG).with_suffix("").parts[:-1]]
    out = []

    def walk(node, depth):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom) and child.level:
                base = package[:len(package) - (child.level - 1)]
                mod = ".".join(base + ([child.module] if child.module else []))
                out.extend((f"{mod}.{a.name}" if not child.module else mod, depth > 0)
                           for a in child.names)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in child.names] if isinstance(child, ast.Import) \
                    else [child.module or ""]
                out.extend((n, depth > 0) for n in names if n.split(".")[0] == "wengert")
            else:
                walk(child, depth + isinstance(child, (ast.FunctionDef, ast.Lambda)))
    walk(ast.parse(path.read_text()), 0)
    return out


def test_the_lowest_floors_import_only_below_them():
    """Floor 0 (wengert.arrays, tree) imports nothing of wengert; core (floor 1) only floor 0,
    and names no primitive: NumPy's protocols on tracers are installed from above."""
    for name in ("arrays.py", "tree.py", "_allocator.py"):
        assert _wengert_imports(PKG / name) == [], name
    core = {m for m, _ in _wengert_imports(PKG / "core.py")}
    assert core <= {"wengert.arrays"}, core
    assert {m for m, _ in _wengert_imports(PKG / "rules" / "__init__.py")} <= {
        f"wengert.rules.{m}" for m in ("arithmetic", "elementwise", "shape", "indexing",
                                       "products")} | {"wengert.rules"}


def test_engines_and_transforms_import_downwards_at_module_level():
    """Engines (forward, reverse, jet) import no transform; they, the transforms and the
    dispatch import in functions only what loads lazily (SciPy)."""
    for name in ("forward.py", "reverse.py", "jet.py", "transforms.py", "_dispatch.py"):
        imports = _wengert_imports(PKG / name)
        if name != "transforms.py":
            assert not any(m.startswith("wengert.transforms") for m, _ in imports), name
        lazy = {m for m, inner in imports if inner}
        assert lazy <= ({"wengert.scipy.special", "wengert.scipy"} if name == "_dispatch.py"
                        else set()), (name, lazy)
