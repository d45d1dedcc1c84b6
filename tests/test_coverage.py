"""The coverage table reads the rule registry."""
import subprocess
import sys

from wengert import coverage


def test_rows_read_primitive_records():
    rows = {(r.module, r.name): r for r in coverage.coverage_rows()}
    assert rows[("numpy", "sin")][2:] == ("primitive", True, True)
    assert rows[("numpy.linalg", "cholesky")][2:] == ("primitive", True, True)
    assert rows[("numpy.fft", "rfft")][2:] == ("primitive", True, True)
    assert rows[("scipy.special", "gammaln")][2:] == ("primitive", True, True)
    assert rows[("scipy.special", "softmax")].kind == "composite"
    assert rows[("numpy.linalg", "eig")].kind == "primitive"
    assert rows[("scipy.linalg", "expm")].kind == "primitive"
    assert rows[("scipy.special", "mathieu_a")].kind == "no rule"
    assert rows[("scipy.special", "hyp2f1")][2:] == ("primitive", True, True)
    assert rows[("scipy.special", "gammainc")][2:] == ("primitive", True, True)
    assert rows[("numpy", "degrees")].kind == rows[("numpy", "acos")].kind == "primitive"
    # SciPy's solvers: differentiated by their mathematics (docs/solvers.md)
    for mod, name in [("scipy.optimize", "root"), ("scipy.optimize", "minimize"),
                      ("scipy.optimize", "brentq"), ("scipy.sparse.linalg", "cg"),
                      ("scipy.sparse.linalg", "splu"), ("scipy.integrate", "quad"),
                      ("scipy.integrate", "simpson")]:
        assert rows[(mod, name)][2:] == ("solver", True, True), (mod, name)
    assert rows[("scipy.optimize", "basinhopping")].kind == "no rule"


def test_markdown_and_cli(tmp_path):
    text = coverage.markdown()
    assert text.startswith("# Coverage") and "| `numpy.linalg` |" in text
    out = tmp_path / "coverage.md"
    res = subprocess.run([sys.executable, "-m", "wengert.coverage", "--write", str(out)],
                         capture_output=True, text=True, check=True)
    assert "wrote" in res.stdout
    assert out.read_text() == text


def _tested_names():
    """Names the tests check: the generic tests' registries, and every name a test calls."""
    import pathlib
    import re
    from wengert.rules.elementwise import REGISTRY
    from wengert.rules.special import SPECIAL
    names = set(REGISTRY) | {n for n, p in SPECIAL.items() if getattr(p, "domain", None)}
    here = pathlib.Path(__file__).parent
    for path in here.glob("test_*.py"):
        text = path.read_text()
        names |= set(re.findall(r"\.(\w+)\(", text))  # wnp.name(...), linalg.name(...)
        keys = re.findall(r"\(\"([\w.]+)\", lambda", text)  # TABLE rows: ("sum_axis", ...)
        keys += re.findall(r"\"(\w+)\": \(", text)  # dict tables: "pinv_tall": (wla.pinv, ...)
        for key in keys:  # an id names its function, and maybe a case: sum_axis
            parts = key.split("_")
            names |= {"_".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return names


def test_every_differentiable_function_is_checked_by_a_test():
    # the promise: every function in the table passes check_grad in both modes. A row
    # no test calls (nor a generic registry test covers) is a rule nobody has checked
    import importlib
    tested = _tested_names()
    missing = []
    for r in coverage.coverage_rows():
        if r.kind not in ("primitive", "composite", "solver"):
            continue
        if r.name in tested or f"{r.module.split('.')[-1]}.{r.name}" in tested:
            continue
        mirror = importlib.import_module(dict(coverage.MODULES)[r.module])
        fn = getattr(mirror, r.name)
        if any(getattr(mirror, n, None) is fn for n in tested):  # an alias of a tested name
            continue
        missing.append(f"{r.module}.{r.name}")
    assert not missing, f"no test checks: {missing}"
