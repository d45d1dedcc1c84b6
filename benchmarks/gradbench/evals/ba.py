"""ba: bundle adjustment's residuals and their sparse Jacobian (ADBench's problem).

The eval sends one camera, one point, one weight and one feature, to be repeated n, m
and p times; observation i sees camera i mod n and point i mod m.  The Jacobian is taken
the natural way, ``wg.sparse_jacobian`` of the residuals with respect to every parameter
(``--jacobian sparse``), or per observation, ``wg.vmap`` of ``wg.jacobian`` over the 15
parameters each residual pair reads, assembled into CSR by hand (``--jacobian blocks``).
"""
import numpy as np
import scipy.sparse as sp

import wengert as wg
import wengert.numpy as wnp

from ._common import maybe_compile

NCAM = 11


def rodrigues(rot, X):
    """Rotate the points X (…, 3) by the angle-axis vectors rot (…, 3)."""
    sqtheta = wnp.sum(rot * rot, axis=-1, keepdims=True)
    small = sqtheta == 0
    theta = wnp.sqrt(wnp.where(small, 1.0, sqtheta))
    w = rot / theta
    cos, sin = wnp.cos(theta), wnp.sin(theta)
    turned = (X * cos + wnp.cross(w, X) * sin
              + w * wnp.sum(w * X, axis=-1, keepdims=True) * (1 - cos))
    return wnp.where(small, X + wnp.cross(rot, X), turned)


def project(cam, X):
    Xcam = rodrigues(cam[..., 0:3], X - cam[..., 3:6])
    proj = Xcam[..., 0:2] / Xcam[..., 2:3]
    rsq = wnp.sum(proj * proj, axis=-1, keepdims=True)
    distort = 1 + cam[..., 9:10] * rsq + cam[..., 10:11] * rsq * rsq
    return proj * distort * cam[..., 6:7] + cam[..., 7:9]


def residuals(params, n, m, obs, feats):
    """Every residual, [reprojection errors (2p), weight errors (p)], of the flat parameters."""
    p = obs.shape[0]
    cams = wnp.reshape(params[:NCAM * n], (n, NCAM))
    X = wnp.reshape(params[NCAM * n:NCAM * n + 3 * m], (m, 3))
    w = params[NCAM * n + 3 * m:]
    reproj = w[:, None] * (project(cams[obs[:, 0]], X[obs[:, 1]]) - feats)
    return wnp.concatenate([wnp.reshape(reproj, (2 * p,)), 1 - w * w])


def observation(v, feat):
    """One observation's two residuals from its camera (11), point (3) and weight (1)."""
    return v[14] * (project(v[:NCAM], v[NCAM:14]) - feat)


def expand(raw):
    n, m, p = int(raw["n"]), int(raw["m"]), int(raw["p"])
    cams = np.tile(np.asarray(raw["cam"], float), n)
    X = np.tile(np.asarray(raw["x"], float), m)
    w = np.full(p, float(raw["w"]))
    obs = np.stack([np.arange(p) % n, np.arange(p) % m], axis=1)
    feats = np.tile(np.asarray(raw["feat"], float), (p, 1))
    return np.concatenate([cams, X, w]), n, m, obs, feats


def objective_json(r):
    p = len(r) // 3
    return {"reproj_error": {"elements": r[:2].tolist(), "repeated": p},
            "w_err": {"element": float(r[2 * p]), "repeated": p}}


def jacobian_json(J):
    """GradBench's summary of the CSR Jacobian: the first 30 entries and the last one."""
    J = sp.csr_array(J)
    J.sort_indices()
    head = 2 * (NCAM + 4)
    pick = lambda a: np.concatenate([a[:head], a[-1:]]).tolist()
    return {"rows": [int(v) for v in pick(J.indptr)], "cols": [int(v) for v in pick(J.indices)],
            "vals": pick(J.data)}


def pattern(n, m, p):
    """The structure ADBench's tools report: each residual pair touches its camera's 11
    columns, its point's 3 and its weight; each weight error its weight."""
    i = np.arange(p)
    cols = np.concatenate([NCAM * (i % n)[:, None] + np.arange(NCAM),
                           NCAM * n + 3 * (i % m)[:, None] + np.arange(3),
                           NCAM * n + 3 * m + i[:, None]], axis=1)
    rows = np.concatenate([np.repeat(np.arange(2 * p), 15), 2 * p + i])
    cols = np.concatenate([np.repeat(cols, 2, axis=0).ravel(), NCAM * n + 3 * m + i])
    return sp.csr_array((np.ones(rows.size, bool), (rows, cols)),
                        shape=(3 * p, NCAM * n + 3 * m + p))


def sparse_jacobian(options):
    """``wg.sparse_jacobian`` with the known pattern, one per problem size.  Given the
    pattern rather than detecting it, the Jacobian keeps the entries that happen to be
    structurally zero (∂x-residual/∂v₀), as the reference's CSR layout does."""
    made = {}

    def jacobian(params, n, m, obs, feats):
        key = (n, m, obs.shape[0])
        if key not in made:
            made[key] = maybe_compile(options, wg.sparse_jacobian(
                residuals, sparsity=pattern(*key)))
        return made[key](params, n, m, obs, feats)
    return jacobian


def block_jacobian(observation_jacobian, weight_derivative):
    def jacobian(params, n, m, obs, feats):
        p = obs.shape[0]
        cams = params[:NCAM * n].reshape(n, NCAM)
        X = params[NCAM * n:NCAM * n + 3 * m].reshape(m, 3)
        w = params[NCAM * n + 3 * m:]
        V = np.concatenate([cams[obs[:, 0]], X[obs[:, 1]], w[:, None]], axis=1)
        blocks = np.asarray(observation_jacobian(V, feats))          # (p, 2, 15)
        dw = np.asarray(weight_derivative(w))                          # (p,)
        cols = np.concatenate([NCAM * obs[:, :1] + np.arange(NCAM),
                               NCAM * n + 3 * obs[:, 1:] + np.arange(3),
                               NCAM * n + 3 * m + np.arange(p)[:, None]], axis=1)   # (p, 15)
        indices = np.concatenate([np.repeat(cols, 2, axis=0).ravel(), NCAM * n + 3 * m + np.arange(p)])
        data = np.concatenate([blocks.reshape(-1), dw])
        indptr = np.concatenate([np.arange(2 * p + 1) * 15, 30 * p + 1 + np.arange(p)])
        return sp.csr_array((data, indices, indptr), shape=(3 * p, NCAM * n + 3 * m + p))
    return jacobian


def functions(options):
    obj = maybe_compile(options, residuals)
    if options.jacobian == "sparse":
        jac = sparse_jacobian(options)
    else:
        per_obs = maybe_compile(options, wg.vmap(wg.jacobian(observation)))
        dw = maybe_compile(options, wg.vmap(wg.grad(lambda w: 1 - w * w)))
        jac = block_jacobian(per_obs, dw)
    return {"objective": (expand, obj, lambda r: objective_json(np.asarray(r))),
            "jacobian": (expand, jac, jacobian_json)}
