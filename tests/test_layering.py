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
