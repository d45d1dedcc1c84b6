"""ht: ADBench's hand tracking: skinned-mesh residuals and their Jacobian.

Columns of the Jacobian: for the complicated variant first the two barycentric
parameters of each residual's own point (compressed into two columns, as ADBench
reports them), then the 26 pose parameters.  ``--jacobian sparse`` takes it with
``wg.sparse_jacobian`` over [us, θ]; ``--jacobian blocks`` takes the 26 θ columns with
forward-mode ``wg.jacobian`` and the two u columns with two ``wg.jvp``\\ s (each residual
reads only its own u, so one tangent of all first coordinates gives every ∂r/∂u₀).
"""
import functools

import numpy as np

import wengert as wg
import wengert.numpy as wnp

from ._common import maybe_compile


def angle_axis_to_rotation(aa):
    norm = wnp.sqrt(wnp.sum(aa * aa))
    if norm < 1e-4:
        return np.eye(3)
    x, y, z = aa[0] / norm, aa[1] / norm, aa[2] / norm
    s, c = wnp.sin(norm), wnp.cos(norm)
    return wnp.stack([
        wnp.stack([x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s]),
        wnp.stack([x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s]),
        wnp.stack([x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c])])


def euler_to_rotations(angles):
    """Rz·Ry·Rx for each bone's (x, z, y) angles, angles (bones, 3) → (bones, 3, 3)."""
    tx, tz, ty = angles[:, 0], angles[:, 1], angles[:, 2]
    one, zero = wnp.ones_like(tx), wnp.zeros_like(tx)
    mat = lambda rows: wnp.stack([wnp.stack(r, axis=-1) for r in rows], axis=-2)
    Rx = mat([[one, zero, zero], [zero, wnp.cos(tx), -wnp.sin(tx)], [zero, wnp.sin(tx), wnp.cos(tx)]])
    Ry = mat([[wnp.cos(ty), zero, wnp.sin(ty)], [zero, one, zero], [-wnp.sin(ty), zero, wnp.cos(ty)]])
    Rz = mat([[wnp.cos(tz), -wnp.sin(tz), zero], [wnp.sin(tz), wnp.cos(tz), zero], [zero, zero, one]])
    return wnp.matmul(wnp.matmul(Rz, Ry), Rx)


@functools.cache
def _pose_index(n_bones):
    """Where each pose parameter (bones + 3 rows of 3) comes from in [0, 1, θ...]."""
    index = np.zeros((n_bones + 3, 3), dtype=np.int64)
    index[0] = 2 + np.arange(3)          # global rotation θ0..2
    index[1] = 1                         # global scale 1
    index[2] = 5 + np.arange(3)          # global translation θ3..5
    i_theta, row = 6, 5
    for _finger in range(5):
        for i in range(2, 5):
            index[row, 0] = 2 + i_theta
            i_theta += 1
            if i == 2:
                index[row, 1] = 2 + i_theta
                i_theta += 1
            row += 1
        row += 1
    return index


def vertex_positions(theta, model):
    n_bones = model["base_relatives"].shape[0]
    pose = wnp.concatenate([np.array([0.0, 1.0]), theta])[_pose_index(n_bones)]
    R = euler_to_rotations(pose[3:])
    top = wnp.concatenate([R, np.zeros((n_bones, 3, 1))], axis=2)
    tr = wnp.concatenate([top, np.broadcast_to(np.array([[[0.0, 0, 0, 1]]]), (n_bones, 1, 4))], axis=1)
    relatives = wnp.matmul(model["base_relatives"], tr)
    absolutes = []
    for i, parent in enumerate(model["parents"]):
        absolutes.append(relatives[i] if parent == -1 else absolutes[parent] @ relatives[i])
    transforms = wnp.matmul(wnp.stack(absolutes), model["inverse_base_absolutes"])
    moved = wnp.matmul(transforms[:, :3, :], model["base_positions"])       # (bones, 3, verts)
    positions = wnp.sum(moved * model["weights"][:, None, :], axis=0)      # (3, verts)
    if model["is_mirrored"]:
        positions = positions * np.array([[-1.0], [1.0], [1.0]])
    Rg = angle_axis_to_rotation(pose[0]) * pose[1][None, :]
    return Rg @ positions + pose[2][:, None]


def residuals(theta, us, data):
    positions = vertex_positions(theta, data["model"])
    if data["triangles"] is None:
        hand = positions[:, data["correspondences"]]
    else:
        v = data["triangles"]
        u0, u1 = us[:, 0], us[:, 1]
        hand = (u0 * positions[:, v[:, 0]] + u1 * positions[:, v[:, 1]]
                + (1 - u0 - u1) * positions[:, v[:, 2]])
    return wnp.reshape(wnp.transpose(data["points"] - hand), (-1,))


def prepare(raw):
    d, m = raw["data"], raw["data"]["model"]
    model = {"parents": [int(p) for p in m["parents"]],
             "base_relatives": np.asarray(m["base_relatives"], float),
             "inverse_base_absolutes": np.asarray(m["inverse_base_absolutes"], float),
             "base_positions": np.asarray(m["base_positions"], float).T,
             "weights": np.asarray(m["weights"], float).T,
             "is_mirrored": bool(m["is_mirrored"])}
    us = np.asarray(raw["us"], float).reshape(-1, 2)
    corr = np.asarray(d["correspondences"], dtype=np.int64)
    data = {"model": model, "correspondences": corr,
            "points": np.asarray(d["points"], float).T,
            "triangles": np.asarray(m["triangles"], dtype=np.int64)[corr] if len(us) else None}
    return np.asarray(raw["theta"], float), us, data


def _entries(J, cols):
    """``J[r, cols[r]]`` for every row ``r`` of the csr matrix ``J`` (0 where not stored)."""
    rows = np.repeat(np.arange(J.shape[0]), np.diff(J.indptr))
    hit = J.indices == cols[rows]
    out = np.zeros(J.shape[0], dtype=J.dtype)
    np.add.at(out, rows[hit], J.data[hit])
    return out


def functions(options):
    def objective(theta, us, data):
        return residuals(theta, us, data)

    def flat_residuals(v, data):
        n_us = v.shape[0] - 26
        return residuals(v[n_us:], wnp.reshape(v[:n_us], (-1, 2)), data)

    obj = maybe_compile(options, objective)
    if options.jacobian == "sparse":
        sparse = maybe_compile(options, wg.sparse_jacobian(flat_residuals))

        def jacobian(theta, us, data):
            J = sparse(np.concatenate([us.ravel(), theta]), data)
            if not len(us):
                return J.toarray()
            # the u columns compressed: row r (residual r // 3) reads only its own u pair,
            # columns 2 (r // 3) and 2 (r // 3) + 1. Read those entries out of the sparse
            # matrix: J.toarray() is 3c x (2c + 26), 126 GB at GradBench's hand11.
            own = 2 * (np.arange(J.shape[0]) // 3)
            Ju = np.stack([_entries(J, own), _entries(J, own + 1)], axis=1)
            return np.concatenate([Ju, J[:, us.size:].toarray()], axis=1)
    else:
        dtheta = maybe_compile(options, wg.jacobian(objective, mode="forward"))

        def du(theta, us, data, t):
            return wg.jvp(lambda u: objective(theta, u, data), (us,), (t,))[1]

        du = maybe_compile(options, du)

        def jacobian(theta, us, data):
            Jt = np.asarray(dtheta(theta, us, data))
            if not len(us):
                return Jt
            cols = [np.asarray(du(theta, us, data, np.tile(e, (us.shape[0], 1))))
                    for e in np.eye(2)]
            return np.concatenate([np.stack(cols, axis=1), Jt], axis=1)

    return {"objective": (prepare, obj, lambda r: np.asarray(r).tolist()),
            "jacobian": (prepare, jacobian, lambda J: np.asarray(J).tolist())}
