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
    assert rows[("scipy.special", "hyp2f1")].kind == "no rule"
    assert rows[("scipy.special", "gammainc")][2:] == ("primitive", True, True)
    assert rows[("numpy", "degrees")].kind == rows[("numpy", "acos")].kind == "primitive"


def test_markdown_and_cli(tmp_path):
    text = coverage.markdown()
    assert text.startswith("# Coverage") and "| `numpy.linalg` |" in text
    out = tmp_path / "coverage.md"
    res = subprocess.run([sys.executable, "-m", "wengert.coverage", "--write", str(out)],
                         capture_output=True, text=True, check=True)
    assert "wrote" in res.stdout
    assert out.read_text() == text
