"""llsq: the linear least-squares objective y(x) = ½ Σ (s_i − Σ_j x_j t_i^j)² and its gradient."""
import numpy as np

import wengert as wg
import wengert.numpy as wnp

from ._common import array, maybe_compile, to_float, to_list


def llsq(x, n):
    # t_i = -1 + 2i/(n-1), written as the reference writes it so sign(t_i) agrees at t = 0
    t = -1 + np.arange(n) * 2.0 / (n - 1)
    powers = t[:, None] ** np.arange(x.shape[0])   # n × m Vandermonde matrix of the data
    r = np.sign(t) - wnp.matmul(powers, x)
    return 0.5 * wnp.sum(r * r)


def functions(options):
    prep = lambda raw: (array(raw["x"]), int(raw["n"]))
    return {"primal": (prep, maybe_compile(options, llsq), to_float),
            "gradient": (prep, maybe_compile(options, wg.grad(llsq)), to_list)}
