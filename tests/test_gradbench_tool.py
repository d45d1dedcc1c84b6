"""benchmarks/gradbench/tool.py spoken to through GradBench's protocol, without GradBench.

Each eval gets a tiny input as its eval would send it (start, define, evaluate messages)
and the answer is checked against a reference that does not use wengert: a closed form,
or central finite differences of a plain NumPy objective written from the eval's spec.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.special

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "benchmarks", "gradbench", "tool.py")
RUNS = {"min_runs": 1, "min_seconds": 0}


class Tool:
    """One tool process; ``evaluate`` defines the module the first time."""

    def __init__(self, *flags):
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen([sys.executable, TOOL, *flags], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.id, self.defined = 0, set()
        self.start = self.send({"kind": "start", "eval": "test"})

    def send(self, message):
        message = {"id": self.id} | message
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        response = json.loads(self.proc.stdout.readline())
        assert response["id"] == self.id
        self.id += 1
        return response

    def evaluate(self, module, function, input):
        if module not in self.defined:
            defined = self.send({"kind": "define", "module": module})
            assert defined["success"], defined.get("error")
            self.defined.add(module)
        response = self.send({"kind": "evaluate", "module": module, "function": function,
                              "input": input | RUNS if isinstance(input, dict) else input})
        assert response["success"], response.get("error")
        assert [t["name"] for t in response["timings"]] == ["evaluate"]
        return response["output"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def eager():
    tool = Tool()
    yield tool
    tool.close()


@pytest.fixture(scope="module")
def blocks():
    tool = Tool("--jacobian", "blocks")
    yield tool
    tool.close()


@pytest.fixture(scope="module")
def compiled():
    tool = Tool("--compile", "--jacobian", "blocks")
    yield tool
    tool.close()


def fd_gradient(f, x, h=1e-6):
    """Central differences of f (any output shape) at the flat vector x: (out..., x.size)."""
    x = np.asarray(x, float)
    cols = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(cols, axis=-1)


# -- the protocol ------------------------------------------------------------------------------
def test_protocol_start_define_and_other_messages(eager):
    assert eager.start == {"id": 0, "tool": "wengert",
                           "config": {"compile": False, "jacobian": "sparse"}}
    unknown = eager.send({"kind": "define", "module": "no-such-eval"})
    assert unknown["success"] is False and "no-such-eval" in unknown["error"]
    # analysis (and any other kind) is acknowledged with the id alone
    assert eager.send({"kind": "analysis", "of": 1, "valid": True}) == {"id": eager.id - 1}


def test_evaluate_repeats_for_min_runs(eager):
    eager.evaluate("hello", "square", 1.0)
    message = {"kind": "evaluate", "module": "hello", "function": "square", "input": 2.0}
    response = eager.send(message)                 # a bare number: no min_runs, one run
    assert response["output"] == 4.0 and len(response["timings"]) == 1
    eager.evaluate("lse", "primal", {"x": [0.0]})
    response = eager.send({"kind": "evaluate", "module": "lse", "function": "primal",
                           "input": {"x": [0.0, 1.0], "min_runs": 3, "min_seconds": 0}})
    assert len(response["timings"]) == 3


def test_evaluate_error_is_reported_not_raised(eager):
    eager.evaluate("lse", "primal", {"x": [1.0]})
    response = eager.send({"kind": "evaluate", "module": "lse", "function": "nonsense",
                           "input": {"x": [1.0]} | RUNS})
    assert response["success"] is False and "nonsense" in response["error"]


# -- evals with closed forms -------------------------------------------------------------------
def test_hello(eager):
    assert eager.evaluate("hello", "square", 3.0) == 9.0
    assert eager.evaluate("hello", "double", 3.0) == 6.0   # d/dx x² = 2x


def lse_input():
    return {"x": list(np.random.default_rng(0).uniform(-5, 5, 30))}


def check_lse(tool):
    x = np.array(lse_input()["x"])
    assert np.isclose(tool.evaluate("lse", "primal", lse_input()), np.log(np.exp(x).sum()))
    softmax = np.exp(x) / np.exp(x).sum()
    np.testing.assert_allclose(tool.evaluate("lse", "gradient", lse_input()), softmax, rtol=1e-12)


def test_lse(eager):
    check_lse(eager)


def test_llsq(eager):
    x, n = np.array([0.3, -0.2, 0.5, 0.1]), 9
    t = -1 + np.arange(n) * 2 / (n - 1)
    T = t[:, None] ** np.arange(4)
    r = np.sign(t) - T @ x
    assert np.isclose(eager.evaluate("llsq", "primal", {"x": list(x), "n": n}), 0.5 * r @ r)
    np.testing.assert_allclose(eager.evaluate("llsq", "gradient", {"x": list(x), "n": n}),
                               -T.T @ r, rtol=1e-12)


def det_input(ell=4):
    return {"A": list(np.random.default_rng(1).random(ell * ell)), "ell": ell}


def check_det(tool):
    A = np.array(det_input()["A"]).reshape(4, 4)
    assert np.isclose(tool.evaluate("det", "primal", det_input()), np.linalg.det(A))
    cofactors = np.linalg.det(A) * np.linalg.inv(A).T
    np.testing.assert_allclose(tool.evaluate("det", "gradient", det_input()),
                               cofactors.ravel(), rtol=1e-10)


def test_det(eager):
    check_det(eager)


def kmeans_input():
    points = np.random.default_rng(2).random((40, 3))
    return {"points": points.tolist(), "centroids": points[-4:].tolist()}


def check_kmeans(tool):
    P, C = np.array(kmeans_input()["points"]), np.array(kmeans_input()["centroids"])
    d2 = ((P[:, None, :] - C[None]) ** 2).sum(-1)
    assert np.isclose(tool.evaluate("kmeans", "cost", kmeans_input()), d2.min(1).sum())
    nearest = d2.argmin(1)
    J = np.array([2 * (C[j] - P[nearest == j]).sum(0) for j in range(4)])
    H = np.array([2.0 * (nearest == j).sum() for j in range(4)])
    np.testing.assert_allclose(tool.evaluate("kmeans", "dir", kmeans_input()),
                               J / H[:, None], rtol=1e-10, atol=1e-14)


def test_kmeans(eager):
    check_kmeans(eager)


# -- evals checked by finite differences of a NumPy reference ----------------------------------
def ode_reference(x, s):
    h, y = 2.0 / s, np.zeros_like(x)
    f = lambda y: np.concatenate([x[:1], x[1:] * y[:-1]])
    for _ in range(s):
        k1 = f(y)
        k2 = f(y + h * k1 / 2)
        k3 = f(y + h * k2 / 2)
        k4 = f(y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def test_ode(eager):
    x, s = np.random.default_rng(3).random(6), 5
    np.testing.assert_allclose(eager.evaluate("ode", "primal", {"x": list(x), "s": s}),
                               ode_reference(x, s), rtol=1e-12)
    fd = fd_gradient(lambda v: ode_reference(v, s)[-1], x)
    np.testing.assert_allclose(eager.evaluate("ode", "gradient", {"x": list(x), "s": s}), fd,
                               rtol=1e-6, atol=1e-9)


def gmm_input():
    rng = np.random.default_rng(4)
    d, k, n = 3, 2, 5
    return {"d": d, "k": k, "n": n, "m": 1, "gamma": 0.7, "x": rng.normal(size=(n, d)).tolist(),
            "alpha": rng.normal(size=k).tolist(), "mu": rng.uniform(size=(k, d)).tolist(),
            "q": rng.normal(size=(k, d)).tolist(), "l": rng.normal(size=(k, 3)).tolist()}


def gmm_reference(alpha, mu, q, l, x, m, gamma):
    """The log posterior straight from its definition (densities, determinants, Γ_D)."""
    n, d = x.shape
    k = alpha.size
    phi = np.exp(alpha) / np.exp(alpha).sum()
    precisions = []
    for j in range(k):
        Q = np.diag(np.exp(q[j]))
        ii = 0
        for col in range(d):
            for row in range(col + 1, d):
                Q[row, col] = l[j][ii]
                ii += 1
        precisions.append(Q.T @ Q)
    loglik = 0.0
    for i in range(n):
        total = 0.0
        for j in range(k):
            diff = x[i] - mu[j]
            total += phi[j] * np.exp(-0.5 * diff @ precisions[j] @ diff) / np.sqrt(
                (2 * np.pi) ** d / np.linalg.det(precisions[j]))
        loglik += np.log(total)
    dof = d + m + 1
    logprior = 0.0
    for j in range(k):
        P = precisions[j]
        logprior += ((dof - d - 1) / 2 * np.log(np.linalg.det(P)) - gamma ** 2 * np.trace(P) / 2
                     - dof * d / 2 * np.log(2) + dof * d * np.log(gamma)
                     - scipy.special.multigammaln(dof / 2, d))
    return loglik + logprior


@pytest.mark.parametrize("which", ["eager", "compiled"])
def test_gmm(which, request):
    """Compiled too: the eval's float gamma in math.log is read as a number, guarded."""
    eager = request.getfixturevalue(which)
    raw = gmm_input()
    parts = [np.array(raw[name], float) for name in ("alpha", "mu", "q", "l")]
    rest = (np.array(raw["x"]), raw["m"], raw["gamma"])
    assert np.isclose(eager.evaluate("gmm", "objective", raw), gmm_reference(*parts, *rest),
                      rtol=1e-10)
    sizes = [p.size for p in parts]
    flat = np.concatenate([p.ravel() for p in parts])

    def f(v):
        pieces = np.split(v, np.cumsum(sizes)[:-1])
        return gmm_reference(*[pc.reshape(p.shape) for pc, p in zip(pieces, parts)], *rest)

    fd = fd_gradient(f, flat)
    got = eager.evaluate("gmm", "jacobian", raw)
    assert set(got) == {"alpha", "mu", "q", "l"}
    flat_got = np.concatenate([np.ravel(got[name]) for name in ("alpha", "mu", "q", "l")])
    np.testing.assert_allclose(flat_got, fd, rtol=1e-6, atol=1e-7)


def lstm_reference(main, extra, state, seq):
    sig = lambda v: 1 / (1 + np.exp(-v))
    layers, b = main.shape[0] // 2, seq.shape[1]
    state, total = state.copy(), 0.0
    for t in range(seq.shape[0] - 1):
        h = seq[t] * extra[0]
        for i in range(layers):
            w, bias = main[2 * i], main[2 * i + 1]
            hid, cell = state[2 * i], state[2 * i + 1]
            f = sig(h * w[:b] + bias[:b])
            ig = sig(hid * w[b:2 * b] + bias[b:2 * b])
            og = sig(h * w[2 * b:3 * b] + bias[2 * b:3 * b])
            ch = np.tanh(hid * w[3 * b:] + bias[3 * b:])
            state[2 * i + 1] = cell * f + ig * ch
            state[2 * i] = og * np.tanh(state[2 * i + 1])
            h = state[2 * i]
        ypred = h * extra[1] + extra[2]
        total += seq[t + 1] @ (ypred - np.log(np.exp(ypred).sum() + 2))
    return -total / ((seq.shape[0] - 1) * b)


def test_lstm(eager):
    rng = np.random.default_rng(5)
    layers, b, c = 2, 3, 5
    main, extra = rng.random((2 * layers, 4 * b)), rng.random((3, b))
    state, seq = rng.random((2 * layers, b)), rng.integers(0, 2, (c, b)).astype(float)
    raw = {"main_params": main.tolist(), "extra_params": extra.tolist(),
           "state": state.tolist(), "sequence": seq.tolist()}
    assert np.isclose(eager.evaluate("lstm", "objective", raw),
                      lstm_reference(main, extra, state, seq), rtol=1e-12)
    flat = np.concatenate([main.ravel(), extra.ravel()])
    f = lambda v: lstm_reference(v[:main.size].reshape(main.shape),
                                 v[main.size:].reshape(extra.shape), state, seq)
    np.testing.assert_allclose(eager.evaluate("lstm", "jacobian", raw), fd_gradient(f, flat),
                               rtol=1e-6, atol=1e-9)


# -- ba: the sparse Jacobian's CSR summary ----------------------------------------------------
BA = {"n": 3, "m": 5, "p": 12, "x": [0.3, 0.2, 5.0], "w": 0.8, "feat": [0.1, 0.2],
      "cam": [0.1, -0.2, 0.15, 0.3, -0.1, 0.2, 1.2, 0.05, -0.03, 0.01, 0.002]}


def ba_observation(v, feat):
    """ADBench's projection of one point by one camera, weighted: [cam(11), X(3), w]."""
    cam, X, w = v[:11], v[11:14], v[14]
    rot, Xo = cam[:3], X - cam[3:6]
    theta = np.sqrt(rot @ rot)
    k = rot / theta
    Xc = (Xo * np.cos(theta) + np.cross(k, Xo) * np.sin(theta)
          + k * (k @ Xo) * (1 - np.cos(theta)))
    proj = Xc[:2] / Xc[2]
    rsq = proj @ proj
    proj = proj * (1 + cam[9] * rsq + cam[10] * rsq * rsq)
    return w * (proj * cam[6] + cam[7:9] - feat)


def ba_expected():
    n, m, p = BA["n"], BA["m"], BA["p"]
    v = np.concatenate([BA["cam"], BA["x"], [BA["w"]]])
    block = fd_gradient(lambda u: ba_observation(u, np.array(BA["feat"])), v)   # (2, 15)
    cols = list(range(11)) + [11 * n, 11 * n + 1, 11 * n + 2] + [11 * n + 3 * m]
    indptr = [15 * i for i in range(2 * p + 1)] + [30 * p + j for j in range(1, p + 1)]
    rows = indptr[:30] + indptr[-1:]
    return {"rows": rows, "cols": cols + cols + [11 * n + 3 * m + p - 1],
            "vals": list(block[0]) + list(block[1]) + [-2 * BA["w"]]}, ba_observation(v, np.array(BA["feat"]))


def check_ba(tool):
    expected, residual = ba_expected()
    objective = tool.evaluate("ba", "objective", BA)
    np.testing.assert_allclose(objective["reproj_error"]["elements"], residual, rtol=1e-12)
    assert objective["reproj_error"]["repeated"] == BA["p"]
    assert np.isclose(objective["w_err"]["element"], 1 - BA["w"] ** 2)
    got = tool.evaluate("ba", "jacobian", BA)
    assert got["rows"] == expected["rows"] and got["cols"] == expected["cols"]
    np.testing.assert_allclose(got["vals"], expected["vals"], rtol=1e-6, atol=1e-8)


def test_ba_sparse_jacobian(eager):
    check_ba(eager)


def test_ba_blocks(blocks):
    check_ba(blocks)


# -- ht: a small random hand with the eval's 22-bone layout -----------------------------------
def ht_input(complicated, n_verts=8, n_points=4, seed=6):
    rng = np.random.default_rng(seed)
    bones = 22
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, bones)]

    def transform():
        a = rng.normal(size=3) * 0.5
        R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = R, a
        return T

    weights = rng.random((n_verts, bones))
    model = {"bone_count": bones, "bone_names": [f"b{i}" for i in range(bones)],
             "parents": parents, "base_relatives": [transform().tolist() for _ in range(bones)],
             "inverse_base_absolutes": [transform().tolist() for _ in range(bones)],
             "base_positions": np.c_[rng.normal(size=(n_verts, 3)), np.ones(n_verts)].tolist(),
             "weights": (weights / weights.sum(1, keepdims=True)).tolist(),
             "triangles": rng.integers(0, n_verts, (6, 3)).tolist(), "is_mirrored": True}
    corr = rng.integers(0, 6 if complicated else n_verts, n_points).tolist()
    us = rng.random((n_points, 2)).tolist() if complicated else []
    return {"theta": (rng.normal(size=26) * 0.3).tolist(), "us": us,
            "data": {"model": model, "correspondences": corr,
                     "points": rng.normal(size=(n_points, 3)).tolist()}}


def ht_reference(theta, us, raw):
    """ADBench's hand model, loop by loop (ht.hpp), in NumPy."""
    model = raw["data"]["model"]
    bones = len(model["parents"])
    pose = np.zeros((bones + 3, 3))
    pose[0], pose[1], pose[2] = theta[0:3], 1.0, theta[3:6]
    i_theta, row = 6, 5
    for _ in range(5):
        for i in range(2, 5):
            pose[row, 0] = theta[i_theta]
            i_theta += 1
            if i == 2:
                pose[row, 1] = theta[i_theta]
                i_theta += 1
            row += 1
        row += 1
    absolutes = []
    for b in range(bones):
        tx, tz, ty = pose[b + 3]
        Rx = np.array([[1, 0, 0], [0, np.cos(tx), -np.sin(tx)], [0, np.sin(tx), np.cos(tx)]])
        Ry = np.array([[np.cos(ty), 0, np.sin(ty)], [0, 1, 0], [-np.sin(ty), 0, np.cos(ty)]])
        Rz = np.array([[np.cos(tz), -np.sin(tz), 0], [np.sin(tz), np.cos(tz), 0], [0, 0, 1]])
        tr = np.eye(4)
        tr[:3, :3] = Rz @ Ry @ Rx
        rel = np.array(model["base_relatives"][b]) @ tr
        parent = model["parents"][b]
        absolutes.append(rel if parent == -1 else absolutes[parent] @ rel)
    base = np.array(model["base_positions"]).T
    weights = np.array(model["weights"])
    positions = np.zeros((3, base.shape[1]))
    for b in range(bones):
        moved = absolutes[b] @ np.array(model["inverse_base_absolutes"][b]) @ base
        positions += moved[:3] * weights[:, b]
    if model["is_mirrored"]:
        positions[0] *= -1
    aa = pose[0]
    angle = np.linalg.norm(aa)
    x, y, z = aa / angle
    s, c = np.sin(angle), np.cos(angle)
    R = np.array([[x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s],
                  [x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s],
                  [x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c]])
    positions = R @ positions + pose[2][:, None]
    points = np.array(raw["data"]["points"])
    corr = raw["data"]["correspondences"]
    err = []
    for i, target in enumerate(corr):
        if len(us):
            tri = model["triangles"][target]
            u = us[2 * i:2 * i + 2]
            hand = u[0] * positions[:, tri[0]] + u[1] * positions[:, tri[1]] + (
                1 - u[0] - u[1]) * positions[:, tri[2]]
        else:
            hand = positions[:, target]
        err.extend(points[i] - hand)
    return np.array(err)


@pytest.mark.parametrize("complicated", [False, True])
def test_ht(eager, blocks, complicated):
    raw = ht_input(complicated)
    theta, us = np.array(raw["theta"]), np.ravel(raw["us"])
    expected = ht_reference(theta, us, raw)
    np.testing.assert_allclose(eager.evaluate("ht", "objective", raw), expected, rtol=1e-10)
    Jt = fd_gradient(lambda t: ht_reference(t, us, raw), theta)
    if complicated:   # residual i reads only u_i: two compressed columns
        Ju = fd_gradient(lambda u: ht_reference(theta, u, raw), us)
        Ju = np.stack([Ju[np.arange(Ju.shape[0]), 2 * (np.arange(Ju.shape[0]) // 3) + j]
                       for j in range(2)], axis=1)
        Jt = np.concatenate([Ju, Jt], axis=1)
    for tool in (eager, blocks):
        got = np.array(tool.evaluate("ht", "jacobian", raw))
        assert got.shape == Jt.shape
        np.testing.assert_allclose(got, Jt, rtol=1e-6, atol=1e-8)


def test_ht_sparse_jacobian_densifies_only_the_pose_columns(monkeypatch):
    """The sparse route reads the two u columns out of the csr matrix: densifying all of it
    (3c x (2c + 26)) took 7.9 GB at GradBench's hand9 and 126 GB at hand11."""
    import argparse
    import importlib
    import scipy.sparse as sp
    monkeypatch.syspath_prepend(os.path.dirname(TOOL))
    ht = importlib.import_module("evals.ht")
    jacobian = ht.functions(argparse.Namespace(compile=False, jacobian="sparse"))["jacobian"]
    raw = ht_input(True, n_points=30)
    dense = []
    toarray = sp.csr_array.toarray
    monkeypatch.setattr(sp.csr_array, "toarray",
                        lambda self, *a, **k: dense.append(self.shape) or toarray(self, *a, **k))
    got = np.asarray(jacobian[1](*jacobian[0](raw)))
    assert dense and all(n <= 26 for _, n in dense), dense
    theta, us = np.array(raw["theta"]), np.ravel(raw["us"])
    Ju = fd_gradient(lambda u: ht_reference(theta, u, raw), us)
    Ju = np.stack([Ju[np.arange(Ju.shape[0]), 2 * (np.arange(Ju.shape[0]) // 3) + j]
                   for j in range(2)], axis=1)
    Jt = fd_gradient(lambda t: ht_reference(t, us, raw), theta)
    np.testing.assert_allclose(got, np.concatenate([Ju, Jt], axis=1), rtol=1e-6, atol=1e-8)


# -- compiled ----------------------------------------------------------------------------------
def test_compiled_lse_det_kmeans_ba(compiled):
    assert compiled.start["config"]["compile"] is True
    check_lse(compiled)
    check_det(compiled)
    check_kmeans(compiled)
    check_ba(compiled)


# -- nested AD (minutes each: GradBench's recorded answers) -----------------------------------
@pytest.mark.slow
def test_saddle_rr(eager):
    got = eager.evaluate("saddle", "rr", {"start": [1.0, 1.0]})
    np.testing.assert_allclose(got, [8.246324826140356e-06] * 4, atol=1e-8)


@pytest.mark.slow
def test_particle_ff(eager):
    assert math.isclose(eager.evaluate("particle", "ff", {"w": 0.0}), 0.2071918746486116,
                        abs_tol=1e-8)
