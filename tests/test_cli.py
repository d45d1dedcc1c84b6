"""The ``wengert`` command line: the seeds' numbers, and one-line errors with exit status 2."""
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.cli import main

SEED = ["diff", "x*y + sin(x)", "--at", "x=0.5", "y=4.2"]
VALUE, DX, DY = 2.579425538604203, 5.077582561890373, 0.5


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_diff_text():
    code, out, err = run(SEED)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "f(x, y) = x * y + sin(x)"
    assert lines[1] == "at x = 0.5, y = 4.2"
    assert lines[2].split() == ["value", "2.579425538604203"]
    assert lines[3].split() == ["df/dx", "5.077582561890373"]
    assert lines[4].split() == ["df/dy", "0.5"]


def test_diff_json():
    code, out, err = run(SEED + ["--format", "json"])
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["value"] == VALUE
    assert data["gradient"] == {"x": DX, "y": DY}
    assert data["at"] == {"x": 0.5, "y": 4.2}
    assert data["source"] == "def f(x, y):\n    return x * y + sin(x)\n"


def test_gradient_agrees_with_forward_mode():
    """The CLI's reverse-mode partials equal wg.jvp's forward-mode directional derivatives."""
    code, out, _ = run(["diff", "x*y + sin(x) - exp(x/y)", "--at", "x=0.5,y=4.2",
                        "--format", "json"])
    assert code == 0
    g = json.loads(out)["gradient"]

    def f(x, y):
        return x * y + wnp.sin(x) - wnp.exp(x / y)
    _, tx = wg.jvp(f, (0.5, 4.2), (1.0, 0.0))
    _, ty = wg.jvp(f, (0.5, 4.2), (0.0, 1.0))
    assert g["x"] == pytest.approx(float(tx), rel=1e-14)
    assert g["y"] == pytest.approx(float(ty), rel=1e-14)
    assert (g["x"], g["y"]) == pytest.approx(wg.grad(f, argnums=(0, 1))(0.5, 4.2), rel=1e-14)


def test_diff_programs():
    """The programs are the source transformer's, in the seeds' form."""
    code, out, _ = run(SEED)
    assert code == 0
    fwd = out.split("forward program")[1].split("reverse program")[0]
    rev = out.split("reverse program")[1]
    assert "    a = x * y\n    da = y * dx + x * dy\n" in fwd
    assert "    db = cos(x) * dx\n" in fwd
    # adjoints in reverse order: the last operation's first
    lines = [ln.strip() for ln in rev.splitlines() if "+=" in ln]
    assert lines == ["ga += gz", "gb += gz", "gx += cos(x) * gb", "gx += y * ga",
                     "gy += x * ga"]
    from wengert.source import programs_from_source
    from wengert.expr import parse
    assert programs_from_source(parse("x*y + sin(x)").python_source("f"), "f")[1] \
        .endswith("gy += x * ga")


def test_constant_expression_and_one_variable():
    code, out, _ = run(["diff", "2 * 3 + 1"])
    assert code == 0 and out.splitlines()[1].split() == ["value", "7.0"]
    code, out, _ = run(["diff", "x**3", "--at", "x=2", "--format", "json"])
    assert json.loads(out)["gradient"] == {"x": 12.0}


BAD = [
    (["diff", "x.__class__", "--at", "x=1"], "attribute access"),
    (["diff", "__import__('os').system('echo pwned')"], "is not allowed"),
    (["diff", "__import__('os')"], "unknown function '__import__'"),
    (["diff", "foo(x)", "--at", "x=1"], "unknown function 'foo'"),
    (["diff", "__x + 1", "--at", "__x=1"], "double underscores"),
    (["diff", "lambda: 1"], "lambda"),
    (["diff", "x[0]", "--at", "x=1"], "subscript"),
    (["diff", "'a' * 3"], "string"),
    (["diff", "9**9**9"], "overflow"),
    (["diff", "exp(x)", "--at", "x=1000"], "overflow"),
    (["diff", "-x.real", "--at", "x=1"], "attribute access"),
    (["diff", "x" * 20_000, "--at", "x=1"], "too long"),
    (["diff", "(" * 1000 + "x" + ")" * 1000, "--at", "x=1"], "nested too deeply"),
    (["diff", "-" * 3000 + "x", "--at", "x=1"], "nested too deeply"),
    (["diff", "x +", "--at", "x=1"], "syntax error"),
    (["diff", ""], "empty expression"),
    (["diff", "x*y"], "no value for x, y"),
    (["diff", "x*y", "--at", "x=1"], "no value for y"),
    (["diff", "x*y", "--at", "x=1", "y=abc"], "not a number"),
    (["diff", "x*y", "--at", "x=1", "y=nan"], "not a finite number"),
    (["diff", "x*y", "--at", "x=1", "y"], "NAME=VALUE"),
    (["diff", "x*y", "--at", "x=1", "y=2", "z=3"], "not a variable"),
    (["diff", "x", "--at"], "expected at least one argument"),
    (["diff"], "required"),
    (["diff", "x", "--at", "x=1", "--format", "xml"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
    ([], "missing command"),
    (["plot", "x*y", "--range", "0:1", "-o", "out.png"], "one variable"),
    (["plot", "x", "--range", "1", "-o", "out.png"], "A:B"),
    (["plot", "x", "--range", "2:1", "-o", "out.png"], "A < B"),
    (["plot", "x.y", "--range", "0:1", "-o", "out.png"], "attribute access"),
    (["dot", "open('x')", "-o", "out.dot"], "unknown function"),
    (["explore", "--port", "99999", "--no-browser"], "--port"),
]


@pytest.mark.parametrize("argv,msg", BAD, ids=[" ".join(a)[:40] for a, _ in BAD])
def test_bad_input_exits_2_with_one_line(argv, msg, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv)
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("wengert: error: ")
    assert msg in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_version():
    code, out, _ = run(["--version"])
    assert code == 0 and out.strip() == f"wengert {wg.__version__}"


def test_dot_file(tmp_path):
    path = tmp_path / "tape.dot"
    code, out, err = run(["dot", "x*y + sin(x)", "-o", str(path), "--at", "x=0.5", "y=4.2"])
    assert code == 0, err
    text = path.read_text()
    assert text.startswith("digraph tape {")
    assert 'label="0: x\\n0.5"' in text and "multiply" in text and "sin" in text
    assert text.count("->") == 5


def test_dot_svg(tmp_path):
    path = tmp_path / "tape.svg"
    code, out, err = run(["dot", "x*y + sin(x)", "-o", str(path)])
    if shutil.which("dot") is None:
        assert code == 1 and "Graphviz" in err and ".dot" in err
        assert not path.exists()
    else:
        assert code == 0 and path.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "baby.png"
    code, out, err = run(["plot", "sqrt(x) * sin(x)", "--range", "0.1:4", "-o", str(path)])
    assert code == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code, out, err = run(["plot", "x", "--range", "0:1", "-o", str(tmp_path / "a.png")])
    assert code == 1 and "matplotlib" in err and err.count("\n") == 1


def _console_script():
    exe = shutil.which("wengert")
    if exe is None:
        pytest.skip("the wengert console script is not installed (pip install -e .)")
    return exe


def test_console_script():
    exe = _console_script()
    r = subprocess.run([exe] + SEED, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "value  2.579425538604203" in r.stdout
    assert "df/dx  5.077582561890373" in r.stdout
    r = subprocess.run([exe, "diff", "x.__class__", "--at", "x=1"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "attribute access" in r.stderr
    assert r.stdout == ""


def test_console_script_explore():
    """``wengert explore --port 0 --no-browser`` prints its address and answers there."""
    import urllib.request
    exe = _console_script()
    p = subprocess.Popen([exe, "explore", "--port", "0", "--no-browser"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = p.stdout.readline()
        assert line.startswith("wengert explorer at http://127.0.0.1:"), line
        url = line.split()[3]
        with urllib.request.urlopen(url + "api/health", timeout=30) as r:
            assert json.loads(r.read()) == {"ok": True}
    finally:
        p.terminate()
        p.wait(timeout=30)


# -- wengert plot FILE.py:FUNCTION -----------------------------------------------------------------
BABYSQRT = '''\
def babysqrt(x, n=10):
    """Seed 004's Babylonian square root: a loop of Heron's steps."""
    t = (1 + x) / 2
    for _ in range(n):
        t = (t + x / t) / 2
    return t
'''


def test_plot_file_function_babysqrt(tmp_path):
    """Seed 004's plot: babysqrt and its derivative by forward mode, checked against
    finite differences, written as a PNG; the derivative is 1/(2 sqrt x)."""
    pytest.importorskip("matplotlib")
    from wengert.cli import load_function, plot_data
    src = tmp_path / "babysqrt.py"
    src.write_text(BABYSQRT)
    png = tmp_path / "babysqrt.png"
    code, out, err = run(["plot", f"{src}:babysqrt", "--range", "0.1:2", "-o", str(png)])
    assert code == 0 and err == "", err
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (840, 540)  # 7 x 4.5 inches at 120 dpi
    lines = out.splitlines()
    assert lines[0] == f"wrote {png}"
    gap = float(lines[1].split(" = ")[1].split()[0])
    assert lines[1].startswith("largest |babysqrt' - finite differences| = ") and gap < 1e-7
    # the curves drawn are these: forward mode's derivative is 1/(2 sqrt x)
    xs, f, df, fd = plot_data(load_function(f"{src}:babysqrt"), 0.1, 2.0, 400)
    np.testing.assert_allclose(f, np.sqrt(xs), rtol=1e-14)
    np.testing.assert_allclose(df, 1 / (2 * np.sqrt(xs)), rtol=1e-12)
    np.testing.assert_allclose(fd, df, rtol=1e-7)


def test_plot_negative_range_and_branches(tmp_path):
    pytest.importorskip("matplotlib")
    from wengert.cli import load_function, plot_data
    (tmp_path / "series.py").write_text(
        "def partial_sum(x):\n"
        "    s = 0.0\n"
        "    for k in range(1, 4):\n"
        "        s = s + x ** k / k\n"
        "    return s if x > -1.5 else 2 * s\n")
    png = tmp_path / "series.png"
    for rng in (["--range", "-2:2"], ["--range=-2:2"]):
        code, out, err = run(["plot", f"{tmp_path / 'series.py'}:partial_sum", *rng,
                              "-o", str(png)])
        assert code == 0 and png.exists(), err
    xs, f, df, fd = plot_data(load_function(f"{tmp_path / 'series.py'}:partial_sum"),
                              -2.0, 2.0, 101)
    want = (1 + xs + xs ** 2) * np.where(xs > -1.5, 1, 2)
    np.testing.assert_allclose(df, want, rtol=1e-14)
    code, out, err = run(["plot", "-x**3 + x", "--range", "-2:2", "-o", str(png)])
    assert code == 0, err


@pytest.mark.parametrize("make,target,msg,status", [
    (None, "missing.py:f", "no such file: missing.py", 2),
    ("def g(x):\n    return x\n", "mod.py:f", "has no function 'f' (it defines: g)", 2),
    ("f = 3\n", "mod.py:f", "is not a function", 2),
    ("def f(x, y):\n    return x * y\n", "mod.py:f", "cannot be called with one number", 2),
    ("raise RuntimeError('boom')\n", "mod.py:f", "importing mod.py failed: RuntimeError: boom", 1),
    ("def f(x):\n    return x +\n", "mod.py:f", "importing mod.py failed (line 2): SyntaxError", 1),
    ("import math\ndef f(x):\n    return math.sin(x)\n", "mod.py:f", "wnp.sin", 2),
])
def test_plot_file_function_errors(tmp_path, monkeypatch, make, target, msg, status):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    if make is not None:
        (tmp_path / "mod.py").write_text(make)
    code, out, err = run(["plot", target, "--range", "0:1", "-o", "out.png"])
    assert code == status and msg in err and err.count("\n") == 1, err
    assert not (tmp_path / "out.png").exists()
