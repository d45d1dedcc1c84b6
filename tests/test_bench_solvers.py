"""benchmarks/bench_solvers.py's peers (diffrax, torchdiffeq): where installed (the ``bench``
extra), they compute the same gradient as wengert; where not, the test says why it skips."""
import os
import sys

import numpy as np
import pytest

import wengert as wg

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
import bench_solvers  # noqa: E402


@pytest.mark.parametrize("lib", sorted(bench_solvers.PEERS))
@pytest.mark.parametrize("make", [bench_solvers.lotka_volterra,
                                  bench_solvers.reaction_diffusion])
def test_peer_gradient_matches_wengert(lib, make):
    name, _, theta, loss, _ = make(6)
    got = bench_solvers.PEERS[lib](loss.peer, theta)
    if isinstance(got, str):
        pytest.skip(f"{lib} on {name}: {got}")
    g, primal, grad = got
    ref = np.asarray(wg.grad(loss)(theta))
    # both at rtol 1e-6, atol 1e-8: the gradients agree to what the tolerances allow
    np.testing.assert_allclose(g, ref, rtol=1e-4, atol=1e-6 * np.abs(ref).max())
    primal()
    np.testing.assert_allclose(np.asarray(grad()), g, rtol=1e-12, atol=0)


def test_peer_not_installed_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "diffrax", None)   # an import of it fails
    monkeypatch.setitem(sys.modules, "torchdiffeq", None)
    _, _, theta, loss, _ = bench_solvers.lotka_volterra(6)
    for lib, make in bench_solvers.PEERS.items():
        msg = make(loss.peer, theta)
        assert isinstance(msg, str) and "not installed" in msg and "bench" in msg, (lib, msg)
