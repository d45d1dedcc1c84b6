"""Progress bars (API.md §12): ``progress=True`` on scan, while_loop, jacobian and hessian
shows tqdm bars on stderr, forward sweep and reverse sweep with its recomputations, and
changes no number; off by default; without tqdm, an ImportError saying what to install."""
import re
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint import while_loop

pytest.importorskip("tqdm")

N = 16
XS = np.linspace(0.1, 2.0, N)


def step(c, x):
    c = c + 0.1 * wnp.sin(c * x)
    return c, c


def loss(c0, how, progress=False, **kw):
    return wnp.sum(wg.scan(step, c0, XS, checkpoint=how, snapshots=3, progress=progress,
                           **kw)[1])


def bars(text):
    """The last state of every bar: {description: (done, total)} (tqdm shortens a long
    description to "..." while the bar is narrow: those states are left out)."""
    last = {}
    for piece in re.split(r"[\r\n]", text):
        m = re.match(r"(.+?):\s+\d+%\|.*?\| (\d+)/(\d+) ", piece)
        if m and not m[1].endswith("..."):
            last[m[1]] = (int(m[2]), int(m[3]))
    return last


@pytest.mark.parametrize("how", ["all", "ctz", "binomial", "online", "invert"])
def test_scan_bars_count_the_sweeps_and_recomputations(capsys, how):
    kw = {"inverse": lambda c, x: c} if how == "invert" else {}  # (a wrong inverse is fine
    want = wg.grad(loss)(0.3, how, **kw)                         # for counting steps)
    assert capsys.readouterr().err == ""  # off by default
    got = wg.grad(loss)(0.3, how, True, **kw)
    assert got == want
    st = wg.checkpoint_schedule(N, how, snapshots=3 if how in ("binomial", "online")
                                else None).stats()
    recomputed = sum(st["recomputed"])
    inverted = st.get("inverted", 0)
    what = f"{N} steps, {recomputed} recomputed" + (f", {inverted} inverted" if inverted else "")
    assert bars(capsys.readouterr().err) == {
        "wg.scan forward": (N, N),
        f"wg.scan reverse ({what})": (N + recomputed + inverted,) * 2}
    if how == "ctz":
        assert recomputed == 17  # the count-trailing-zeros schedule of seed 000 at N = 16


def test_a_second_pullback_counts_the_rebuilt_forward_phase(capsys):
    out, pullback = wg.vjp(lambda c0: loss(c0, "ctz", True), 0.3)
    first = pullback(1.0)
    capsys.readouterr()
    assert pullback(1.0) == first
    advanced = wg.checkpoint_schedule(N, "ctz").stats()["advanced"]  # forward phase included
    assert bars(capsys.readouterr().err) == {
        f"wg.scan reverse ({N} steps, {advanced} recomputed)": (N + advanced,) * 2}


def test_scan_without_a_tape_shows_the_forward_sweep(capsys):
    carry, ys = wg.scan(step, 0.3, XS, progress=True)
    assert bars(capsys.readouterr().err) == {"wg.scan forward": (N, N)}
    assert np.array_equal(ys, wg.scan(step, 0.3, XS)[1])


def test_while_loop_bars(capsys):
    def f(a, progress):
        return while_loop(lambda c: c[1] > 0.01, lambda c: (c[0] * wnp.cos(c[1]), c[1] / 2),
                          (a, a), progress=progress)[0]
    want = wg.grad(f)(1.0, False)
    assert wg.grad(f)(1.0, True) == want
    err = capsys.readouterr().err
    assert re.search(r"while_loop forward: 7step", err), err  # a count: no total known
    (desc, (done, total)), = [(k, v) for k, v in bars(err).items() if "reverse" in k]
    assert desc.startswith("while_loop reverse (7 steps, ") and done == total > 7


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_bars_and_identical_numbers(capsys, mode):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 250))

    def f(x):
        return {"t": wnp.tanh(A @ x) * x[:30], "s": wnp.sin(x[:3])}
    x = rng.normal(size=250)
    want = wg.jacobian(f, mode=mode)(x)
    assert capsys.readouterr().err == ""
    got = wg.jacobian(f, mode=mode, progress=True)(x)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])
    seen = bars(capsys.readouterr().err)
    if mode == "forward":
        assert seen == {"wg.jacobian forward": (250, 250)}
    else:
        assert seen == {"wg.jacobian forward sweep": (1, 1), "wg.jacobian reverse": (33, 33)}


def test_hessian_bar(capsys):
    h = lambda v: wnp.sum(wnp.sin(v) * v[::-1])  # noqa: E731
    x = np.arange(1.0, 8.0)
    np.testing.assert_array_equal(wg.hessian(h, progress=True)(x), wg.hessian(h)(x))
    assert bars(capsys.readouterr().err) == {"wg.hessian forward": (7, 7)}


def test_without_tqdm_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now fails
    for call in (lambda: wg.scan(step, 0.3, XS, progress=True),
                 lambda: wg.jacobian(wnp.sin, progress=True),
                 lambda: wg.hessian(wnp.sin, progress=True)):
        with pytest.raises(ImportError, match=re.escape('pip install "wengert[progress]"')):
            call()
    wg.scan(step, 0.3, XS)  # not asked for: nothing needed


def test_progress_takes_a_bool():
    with pytest.raises(TypeError, match="progress must be True or False"):
        wg.scan(step, 0.3, XS, progress="yes")
