"""Numba lowerings of SciPy's special functions (issue 32): compiled fused, they agree with
eager to 1e-13 (values and gradients) and run inside a kernel; a compiled scan whose step
calls ``expit`` runs its loop in Numba; a program that runs unfused for want of a lowering
says so once per primitive (``wg.UnfusedWarning``).

Numba compiles are slow: few, small programs.
"""
import warnings

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
import wengert.scipy.special as wss
from wengert.checkpoint.compiled import plans_of
from wengert.graph import fuse

pytest.importorskip("numba", reason="lowerings need numba (the 'fast' extra)")

RNG = np.random.default_rng(32)
X = RNG.uniform(0.05, 0.95, 40)
Y = RNG.uniform(0.1, 3.0, 40)

# each with two elementwise nodes or more around the function, so that a kernel forms
CASES = {
    "expit": (lambda x, y: wnp.sum(wss.expit(3.0 * x - y) * y), "np.exp(-"),
    "logit": (lambda x, y: wnp.sum(wss.logit(x) * y), "np.log1p(2.0"),
    "log_expit": (lambda x, y: wnp.sum(wss.log_expit(4.0 * x - y) * y), "np.log1p(np.exp("),
    "erf": (lambda x, y: wnp.sum(wss.erf(x * y) * x), "math.erf("),
    "erfc": (lambda x, y: wnp.sum(wss.erfc(x - y) * y), "math.erfc("),
    "gammaln": (lambda x, y: wnp.sum(wss.gammaln(y + x) * x), "math.lgamma("),
    "xlogy": (lambda x, y: wnp.sum(wss.xlogy(x, y) * y), "np.log("),
    "xlog1py": (lambda x, y: wnp.sum(wss.xlog1py(x, y) * y), "np.log1p("),
    "logaddexp": (lambda x, y: wnp.sum(wnp.logaddexp(x, y) * x), "np.logaddexp("),
    "softplus": (lambda x, y: wnp.sum(wss.softplus(x - y) * x), "np.logaddexp("),
}


def kernels(cf, *args):
    return " ".join(cf.program(*args).kernel_sources)


@pytest.mark.parametrize("name", list(CASES))
def test_lowered_function_fused_equals_eager(name):
    f, marker = CASES[name]
    value = wg.compile(f, fuse=True)
    np.testing.assert_allclose(value(X, Y), f(X, Y), rtol=1e-13, atol=1e-15)
    assert value.fuse_failures == [] and marker in kernels(value, X, Y)
    g = wg.grad(f, argnums=(0, 1))
    grad = wg.compile(g, fuse=True)
    for got, want in zip(grad(X, Y), g(X, Y)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    assert grad.fuse_failures == [] and "kernel" in grad.program(X, Y).source


def test_scalar_forms_match_scipy_at_the_edges():
    # the tails and special points where a formula could differ from scipy's own
    x = np.array([-800.0, -40.0, -1e-300, 0.0, 1e-300, 0.3, 0.5, 0.65, 36.0, 800.0, np.nan])
    u = np.array([1e-300, 1e-12, 0.3, 0.3000001, 0.5, 0.6499999, 0.65, 1.0 - 1e-12, 0.0, 1.0])
    for f, arg in ((wss.expit, x), (wss.log_expit, x), (wss.erf, x), (wss.erfc, x),
                   (wss.logit, u), (wss.entr, np.abs(x))):
        cf = wg.compile(lambda a: f(a) * 1.0 + 0.0, fuse=True)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(cf(arg), f(arg), rtol=1e-13, atol=0, equal_nan=True)
    y = np.array([0.0, 0.5, np.nan, 2.0, -1.0])
    for f in (wss.xlogy, wss.xlog1py):
        cf = wg.compile(lambda a, b: f(a, b) * 1.0 + 0.0, fuse=True)
        with np.errstate(all="ignore"):
            for a in (np.zeros(5), np.full(5, 1.5)):
                np.testing.assert_allclose(cf(a, y), f(a, y), rtol=1e-13, equal_nan=True)


def test_lstm_like_scan_with_expit_fuses():
    w = RNG.standard_normal((4, 3, 3)) / 3.0
    h0 = RNG.standard_normal(3)

    def loss(w):
        def cell(carry, _):
            h, c = carry
            i, f, o = wss.expit(w[0] @ h), wss.expit(w[1] @ h), wss.expit(w[2] @ h)
            c = f * c + i * wnp.tanh(w[3] @ h)
            return (o * wnp.tanh(c), c), None
        (h, c), _ = wg.scan(cell, (h0, h0 * 0.5), length=12, checkpoint="all")
        return wnp.sum(h * h) + wnp.sum(c)

    eager = wg.value_and_grad(loss)(w)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.UnfusedWarning)
        cf = wg.compile(wg.value_and_grad(loss), fuse=True)
        got = cf(w)
    (p,) = plans_of(cf.graph(w))
    assert p.fuse_failures == [] and p.fused() is not None  # the loop ran in Numba
    np.testing.assert_allclose(got[0], eager[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], eager[1], rtol=1e-12, atol=1e-14)


def test_unfused_program_warns_once_per_primitive(monkeypatch):
    monkeypatch.setattr(fuse, "_WARNED", set())
    f = lambda x: wnp.sum(wss.i0(x) * x + x)  # noqa: E731 (i0: no Numba lowering)
    with pytest.warns(wg.UnfusedWarning, match=r"runs unfused: no Numba lowering for i0"):
        np.testing.assert_allclose(wg.compile(f, fuse=True)(X), f(X), rtol=1e-13)
    with warnings.catch_warnings():
        warnings.simplefilter("error", wg.UnfusedWarning)  # i0 again: told already
        wg.compile(lambda x: wnp.sum(wss.i0(x) * 2.0 - x), fuse=True)(X)
    assert issubclass(wg.UnfusedWarning, RuntimeWarning)


def test_unfused_scan_says_which_primitive(monkeypatch):
    monkeypatch.setattr(fuse, "_WARNED", set())
    w = RNG.standard_normal((3, 3)) / 3.0

    def loss(w):
        def step(h, _):
            return wss.i0(w @ h) * 0.5, None
        h, _ = wg.scan(step, np.ones(3), length=5)
        return wnp.sum(h)

    with pytest.warns(wg.UnfusedWarning, match=r"scan of 5 steps.*i0"):
        got = wg.compile(wg.grad(loss), fuse=True)(w)
    np.testing.assert_allclose(got, wg.grad(loss)(w), rtol=1e-12)


def test_coverage_table_of_lowerings(capsys):
    from wengert import coverage
    assert coverage.main(["--compile"]) == 0
    text = capsys.readouterr().out
    for name, kind in (("expit", "scalar form"), ("erf", "scalar form"), ("sin", "ufunc"),
                       ("logaddexp", "ufunc"), ("i0", "none"), ("angle", "NumPy call")):
        assert f"| `{name}` | {kind} |" in text, name
