"""Bundle adjustment's compressed Jacobian pass written by hand as one Numba kernel: a
reference for bench_sparse.py, not wengert. It carries the same 14 tangents (the plan's
column colours) through the same residual, one observation at a time, with every
intermediate in registers or small scratch arrays. So it costs what fusing the whole pass
(across the shapes (p, 3), (p, 1), (14, p, 3)...) would cost: an upper bound on what
wengert's compiled pass could reach with fusion that spans shapes."""
import numpy as np


def make(plan, n_cams, n_pts, cam_of, pt_of, feats):
    """A function of the flat parameters returning the plan's ``csr_array``, or None
    without Numba."""
    try:
        import numba
    except ImportError:
        return None
    k = plan.num_colors
    colors = np.ascontiguousarray(plan.colors, dtype=np.int64)
    cam_of = np.ascontiguousarray(cam_of, dtype=np.int64)
    pt_of = np.ascontiguousarray(pt_of, dtype=np.int64)
    feats = np.ascontiguousarray(feats, dtype=np.float64)

    @numba.njit(cache=True)
    def compressed(params, B):
        p = cam_of.size
        oc, ow = 11 * n_cams, 11 * n_cams + 3 * n_pts
        dcam = np.zeros((11, k))
        dX = np.zeros((3, k))
        dw = np.zeros(k)
        dth = np.empty(k)
        dXc = np.empty((3, k))
        dax = np.empty((3, k))
        dcr = np.empty((3, k))
        dXr = np.empty((3, k))
        Xc, ax, cr, Xr = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
        for i in range(p):
            c0, q0 = 11 * cam_of[i], oc + 3 * pt_of[i]
            cam, X, w = params[c0:c0 + 11], params[q0:q0 + 3], params[ow + i]
            dcam[:] = 0.0
            dX[:] = 0.0
            dw[:] = 0.0
            for j in range(11):
                dcam[j, colors[c0 + j]] = 1.0
            for j in range(3):
                dX[j, colors[q0 + j]] = 1.0
            dw[colors[ow + i]] = 1.0
            th2 = cam[0] * cam[0] + cam[1] * cam[1] + cam[2] * cam[2]
            th = np.sqrt(th2)
            co, si = np.cos(th), np.sin(th)
            for j in range(3):
                Xc[j] = X[j] - cam[3 + j]
                ax[j] = cam[j] / th
            cr[0] = ax[1] * Xc[2] - ax[2] * Xc[1]
            cr[1] = ax[2] * Xc[0] - ax[0] * Xc[2]
            cr[2] = ax[0] * Xc[1] - ax[1] * Xc[0]
            dot = ax[0] * Xc[0] + ax[1] * Xc[1] + ax[2] * Xc[2]
            for j in range(3):
                Xr[j] = Xc[j] * co + cr[j] * si + ax[j] * dot * (1.0 - co)
            for c in range(k):
                dth[c] = (cam[0] * dcam[0, c] + cam[1] * dcam[1, c] + cam[2] * dcam[2, c]) / th
                for j in range(3):
                    dXc[j, c] = dX[j, c] - dcam[3 + j, c]
                    dax[j, c] = dcam[j, c] / th - cam[j] * dth[c] / th2
                dcr[0, c] = dax[1, c] * Xc[2] + ax[1] * dXc[2, c] - dax[2, c] * Xc[1] - ax[2] * dXc[1, c]
                dcr[1, c] = dax[2, c] * Xc[0] + ax[2] * dXc[0, c] - dax[0, c] * Xc[2] - ax[0] * dXc[2, c]
                dcr[2, c] = dax[0, c] * Xc[1] + ax[0] * dXc[1, c] - dax[1, c] * Xc[0] - ax[1] * dXc[0, c]
                ddot = 0.0
                for j in range(3):
                    ddot += dax[j, c] * Xc[j] + ax[j] * dXc[j, c]
                for j in range(3):
                    dXr[j, c] = (dXc[j, c] * co - Xc[j] * si * dth[c] + dcr[j, c] * si
                                 + cr[j] * co * dth[c] + dax[j, c] * dot * (1.0 - co)
                                 + ax[j] * ddot * (1.0 - co) + ax[j] * dot * si * dth[c])
            u0, u1 = Xr[0] / Xr[2], Xr[1] / Xr[2]
            rsq = u0 * u0 + u1 * u1
            dist = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
            e0 = u0 * dist * cam[6] + cam[7] - feats[i, 0]
            e1 = u1 * dist * cam[6] + cam[8] - feats[i, 1]
            for c in range(k):
                du0 = (dXr[0, c] - u0 * dXr[2, c]) / Xr[2]
                du1 = (dXr[1, c] - u1 * dXr[2, c]) / Xr[2]
                drsq = 2.0 * (u0 * du0 + u1 * du1)
                ddist = dcam[9, c] * rsq + cam[9] * drsq + dcam[10, c] * rsq * rsq \
                    + 2.0 * cam[10] * rsq * drsq
                d0 = (du0 * dist + u0 * ddist) * cam[6] + u0 * dist * dcam[6, c] + dcam[7, c]
                d1 = (du1 * dist + u1 * ddist) * cam[6] + u1 * dist * dcam[6, c] + dcam[8, c]
                B[c, 2 * i] = dw[c] * e0 + w * d0
                B[c, 2 * i + 1] = dw[c] * e1 + w * d1
                B[c, 2 * p + i] = -2.0 * w * dw[c]
        return B

    m = plan.sparsity.shape[0]

    def jacobian(params):
        B = compressed(params, np.empty((k, m)))
        return plan.assemble(B.reshape(-1)[plan.take])
    return jacobian
