"""Derivatives through SciPy's solvers: time of a gradient against one primal solve.

    python benchmarks/bench_solvers.py              # every size: 10, 100, 1,000 parameters
    python benchmarks/bench_solvers.py --sizes 10 100 --repeat 3

``bench_odes()``: the gradient of a loss (the squared solution at 20 output times) through
``wengert.scipy.integrate.solve_ivp`` with respect to every parameter, for

* a generalised Lotka-Volterra family ``y' = y * (r + A y)``, parameters ``r`` and ``A``
  (n species: n + n² parameters, n = 3, 9, 31), RK45;
* a discretised reaction-diffusion equation ``u_t = D u_xx + k(x) u (1 - u)`` on n points
  with one rate ``k`` per point (n parameters), BDF (sparse Jacobian from wengert).

Per sensitivity method (``adjoint=``): the time of ``wg.value_and_grad`` divided by the time
of one primal solve (the same ``solve_ivp`` call on plain values), which must stay <= 3 at
every size ("ok" / "MISSED"; finite differences would cost p + 1 solves), and the peak
memory of the gradient (tracemalloc).  Whether diffrax and torchdiffeq are installed is
reported; timing the same gradients with them, side by side, is not written yet.
"""
import argparse
import time
import tracemalloc

import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.integrate import solve_ivp

TARGET = 3.0


# -- the problems ------------------------------------------------------------------------------
def lotka_volterra(size):
    """n species with n + n² parameters, the nearest family member to ``size``."""
    n = max(2, int(round((np.sqrt(1 + 4 * size) - 1) / 2)))
    rng = np.random.default_rng(0)
    r = 0.5 + 0.5 * rng.random(n)
    A = -np.eye(n) - 0.3 * rng.random((n, n)) / n
    theta = np.concatenate([r, A.ravel()])
    y0 = 0.5 + 0.5 * rng.random(n)
    t_eval = np.linspace(0.0, 5.0, 21)[1:]

    def loss(theta, adjoint="auto"):
        r, A = theta[:n], wnp.reshape(theta[n:], (n, n))
        sol = solve_ivp(lambda t, y: y * (r + A @ y), (0.0, 5.0), y0, t_eval=t_eval,
                        adjoint=adjoint, rtol=1e-6, atol=1e-8)
        return wnp.sum(sol.y ** 2)
    return "Lotka-Volterra", "RK45", theta, loss, ("interpolate", "backsolve", "forward",
                                                   "checkpoint")


def reaction_diffusion(size):
    """n grid points, one reaction rate per point: n parameters."""
    n = size
    x = np.linspace(0.0, 1.0, n + 2)[1:-1]
    k = 1.0 + 0.5 * np.sin(3 * x)
    u0 = 0.2 + 0.6 * np.exp(-20 * (x - 0.5) ** 2)
    D = 0.01 * (n + 1) ** 2
    t_eval = np.linspace(0.0, 1.0, 21)[1:]

    def rhs(t, u, k):
        lap = wnp.concatenate([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2],
                               u[-2:-1] - 2 * u[-1:]])
        return D * lap + k * u * (1 - u)

    def loss(k, adjoint="auto"):
        sol = solve_ivp(rhs, (0.0, 1.0), u0, t_eval=t_eval, method="BDF", args=(k,),
                        adjoint=adjoint, rtol=1e-6, atol=1e-8)
        return wnp.sum(sol.y ** 2)
    return "reaction-diffusion", "BDF", k, loss, ("interpolate", "forward")


# -- measuring ---------------------------------------------------------------------------------
def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _peak(fn):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def _optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def bench_odes(sizes=(10, 100, 1000), repeat=2, forward_limit=30):
    """The table; returns ``[(problem, p, method, ratio, ok)]``."""
    rows = []
    print(f"{'problem':20s} {'p':>5s} {'adjoint':12s} {'primal s':>9s} {'grad s':>9s} "
          f"{'ratio':>6s} {'peak MB':>8s}")
    for make in (lotka_volterra, reaction_diffusion):
        for size in sizes:
            name, method, theta, loss, adjoints = make(size)
            p = theta.size
            primal = _best(lambda: loss(theta), repeat)
            for adjoint in adjoints:
                if adjoint == "forward" and p > forward_limit:
                    continue  # n (n + p) states, a dense Jacobian as large: few parameters only
                vg = wg.value_and_grad(lambda th: loss(th, adjoint))
                vg(theta)  # first call: traces and generates the adjoint's code
                t = _best(lambda: vg(theta), repeat)
                peak = _peak(lambda: vg(theta)) / 2 ** 20
                ratio = t / primal
                ok = ratio <= TARGET
                rows.append((name, p, adjoint, ratio, ok))
                print(f"{name:20s} {p:5d} {adjoint:12s} {primal:9.4f} {t:9.4f} {ratio:6.2f} "
                      f"{peak:8.1f}  {'ok' if ok else 'MISSED'}")
    for lib in ("diffrax", "torchdiffeq"):
        if _optional(lib) is None:
            print(f"{lib}: not installed (pip install {lib} to compare; not timed here)")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args(argv)
    bench_odes(tuple(a.sizes), a.repeat)


if __name__ == "__main__":
    main()
