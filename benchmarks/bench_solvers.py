"""Derivatives through SciPy's solvers: time of a gradient against one primal solve.

    python benchmarks/bench_solvers.py              # every size: 10, 100, 1,000 parameters
    python benchmarks/bench_solvers.py --sizes 10 100 --repeat 3

``bench_odes()``: the gradient of a loss (the squared solution at 20 output times) through
``wengert.scipy.integrate.solve_ivp`` with respect to every parameter, for

* a generalised Lotka-Volterra family ``y' = y * (r + A y)``, parameters ``r`` and ``A``
  (n species: n + n² parameters, n = 3, 9, 31), RK45;
* a discretised reaction-diffusion equation ``u_t = D u_xx + k(x) u (1 - u)`` on n points
  with one rate ``k`` per point (n parameters), BDF (sparse Jacobian from wengert).

Per sensitivity method (``adjoint=``; ``"auto"``, the default, first: what a user who
names none gets; ``"discrete"``, the discrete adjoint of SciPy's stored
Runge-Kutta stages or BDF steps, asked for by name: ``"auto"`` never differentiates the
steps): the time of ``wg.value_and_grad`` divided by the time
of one primal solve (the same ``solve_ivp`` call on plain values; the median of paired
rounds, ``_util.paired_time``), which must stay <= 3 at
every size ("ok" / "MISSED"; finite differences would cost p + 1 solves), and the peak
memory of the gradient (tracemalloc).  Beside them, where installed (the ``bench`` extra),
the same gradients by diffrax (JAX, jit-compiled; Tsit5, Kvaerno5 for the stiff problem,
RecursiveCheckpointAdjoint) and torchdiffeq (dopri5, ``odeint_adjoint``; it has no adaptive
stiff solver, so the reaction-diffusion row is skipped with that reason), each as its own
gradient time ÷ its own primal solve, with the largest relative difference from wengert's
gradient.  A peer that is not installed is skipped with a printed reason.

Roots and optima (``bench_roots_and_optima``): the gradient of a scalar loss of the solution
with respect to the parameters, by the implicit function theorem, against one primal SciPy
call with the same options.  The gradient's own work is its time less the primal solve it
contains (``wg.grad`` runs SciPy once, then the tangent solve); the target is that work ≤ 1
primal solve.  Two primals, side by side: wengert's call on plain values (``primal``,
``d ÷ primal``) and SciPy's own call on the same functions (``SciPy``, ``d ÷ SciPy``; for
``minimize`` with the gradient written out by hand).  Problems (n unknowns, θ of size n):

* ``brentq``: the scalar root of ``x³ + x - θ``;
* ``root`` (hybr, SciPy's finite-difference Jacobian): ``A x + 0.1 x³ = θ``, n = 10, 40, 200;
* ``minimize`` (BFGS, ``jac=wg.grad(f)``, gtol 1e-7): ``½ xᵀQx - θ·x + 0.1 Σ x⁴``, n = 10, 40, 200;
* ``least_squares`` (trf): a linear model with a soft-L1 loss, 60 residuals, n = 10.

    python benchmarks/bench_solvers.py --only roots   # or odes
"""
from _util import fmt, paired_time, row  # first: sets BLAS to one thread

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402
import scipy.optimize as so  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402
from wengert.scipy import optimize  # noqa: E402
from wengert.scipy.integrate import solve_ivp  # noqa: E402

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
    loss.peer = dict(kind="lv", n=n, y0=y0, t_eval=t_eval, t1=5.0)
    return "Lotka-Volterra", "RK45", theta, loss, ("auto", "discrete", "interpolate",
                                                   "backsolve", "forward", "checkpoint")


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
    loss.peer = dict(kind="rd", n=n, y0=u0, t_eval=t_eval, t1=1.0, D=D)
    return "reaction-diffusion", "BDF", k, loss, ("auto", "discrete", "interpolate", "forward")


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


def _rhs_for(xp, spec):
    """The benchmark's right-hand side written with one array library ``xp``."""
    n = spec["n"]
    if spec["kind"] == "lv":
        def f(t, y, theta):
            r, A = theta[:n], xp.reshape(theta[n:], (n, n))
            return y * (r + A @ y)
        return f
    D = spec["D"]

    def f(t, u, k):
        lap = xp.concatenate([u[1:2] - 2 * u[:1], u[2:] - 2 * u[1:-1] + u[:-2],
                              u[-2:-1] - 2 * u[-1:]])
        return D * lap + k * u * (1 - u)
    return f


def peer_diffrax(spec, theta):
    """``(grad, primal s, grad s)`` by diffrax, or a string saying why not."""
    try:
        import jax
        import jax.numpy as jnp
        import diffrax
    except ImportError as e:
        return f"not installed ({e.name}; pip install 'wengert[bench]')"
    jax.config.update("jax_enable_x64", True)
    f = _rhs_for(jnp, spec)
    solver = diffrax.Tsit5() if spec["kind"] == "lv" else diffrax.Kvaerno5()
    ts = jnp.asarray(spec["t_eval"])

    def loss(th):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(f), solver, 0.0, spec["t1"], None, jnp.asarray(spec["y0"]),
            args=th, saveat=diffrax.SaveAt(ts=ts), max_steps=100_000,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8),
            adjoint=diffrax.RecursiveCheckpointAdjoint())
        return jnp.sum(sol.ys ** 2)
    primal, grad = jax.jit(loss), jax.jit(jax.grad(loss))
    th = jnp.asarray(theta)
    g = np.asarray(grad(th))
    primal(th).block_until_ready()
    return (g, lambda: primal(th).block_until_ready(), lambda: grad(th).block_until_ready())


def peer_torchdiffeq(spec, theta):
    """As :func:`peer_diffrax`, by torchdiffeq's adjoint (explicit problems only)."""
    try:
        import torch
        from torchdiffeq import odeint, odeint_adjoint
    except ImportError as e:
        return f"not installed ({e.name}; pip install 'wengert[bench]')"
    if spec["kind"] != "lv":
        return "skipped (no adaptive stiff solver in torchdiffeq: dopri5 on a stiff PDE)"
    torch.set_num_threads(1)
    f = _rhs_for(torch, spec)

    class Rhs(torch.nn.Module):
        def __init__(self, th):
            super().__init__()
            self.theta = torch.nn.Parameter(th)

        def forward(self, t, y):
            return f(t, y, self.theta)
    y0 = torch.tensor(spec["y0"], dtype=torch.float64)
    ts = torch.tensor(np.concatenate([[0.0], spec["t_eval"]]), dtype=torch.float64)
    module = Rhs(torch.tensor(theta, dtype=torch.float64))
    opts = dict(rtol=1e-6, atol=1e-8, method="dopri5")

    def primal():
        with torch.no_grad():
            return odeint(module, y0, ts, **opts)

    def grad():
        module.theta.grad = None
        ys = odeint_adjoint(module, y0, ts, **opts)
        torch.sum(ys[1:] ** 2).backward()
        return module.theta.grad
    return grad().numpy().copy(), primal, grad


PEERS = {"diffrax": peer_diffrax, "torchdiffeq": peer_torchdiffeq}


def _peer_rows(loss, theta, g_ref, repeat, name, p):
    for lib, make in PEERS.items():
        try:
            got = make(loss.peer, theta)
        except Exception as e:   # a peer's failure is reported, not fatal to the table
            got = f"failed ({type(e).__name__}: {e})"
        if isinstance(got, str):
            print(f"{name:20s} {p:5d} {lib:12s} {got}")
            continue
        g, primal, grad = got
        tp, tg = _best(primal, repeat), _best(grad, repeat)
        diff = np.max(np.abs(g - g_ref)) / np.max(np.abs(g_ref))
        print(f"{name:20s} {p:5d} {lib:12s} {tp:9.4f} {tg:9.4f} {tg / tp:6.2f} {'':8s}  "
              f"(gradient differs from wengert's by {diff:.1e} relative)")


def bench_odes(sizes=(10, 100, 1000), repeat=2, forward_limit=30, peers=True):
    """The table; returns ``[(problem, p, method, ratio, ok)]``."""
    rows = []
    print(f"{'problem':20s} {'p':>5s} {'adjoint':12s} {'primal s':>9s} {'grad s':>9s} "
          f"{'ratio':>6s} {'peak MB':>8s}")
    for make in (lotka_volterra, reaction_diffusion):
        for size in sizes:
            name, method, theta, loss, adjoints = make(size)
            p = theta.size
            for adjoint in adjoints:
                if adjoint == "forward" and p > forward_limit:
                    continue  # n (n + p) states, a dense Jacobian as large: few parameters only
                vg = wg.value_and_grad(lambda th: loss(th, adjoint))
                vg(theta)  # first call: traces and generates the adjoint's code
                # gradient and primal timed in alternation, the ratio a median of the rounds'
                # ratios: a slow spell on the shared machine slows both
                t, primal, ratio = paired_time(vg, loss, theta, rounds=max(3, repeat))
                peak = _peak(lambda: vg(theta)) / 2 ** 20
                ok = ratio <= TARGET
                rows.append((name, p, adjoint, ratio, ok))
                print(f"{name:20s} {p:5d} {adjoint:12s} {primal:9.4f} {t:9.4f} {ratio:6.2f} "
                      f"{peak:8.1f}  {'ok' if ok else 'MISSED'}")
            if peers:
                g_ref = np.asarray(wg.grad(loss)(theta))
                _peer_rows(loss, theta, g_ref, repeat, name, p)
    return rows


def _cases():
    """``(name, solve, bare, theta)``: wengert's call, and SciPy's own call on the same plain
    functions (minimize's gradient written out by hand, as a SciPy user would pass it)."""
    rng = np.random.default_rng(0)
    cases = []

    def scalar(theta):
        return optimize.brentq(lambda x: x ** 3 + x - theta, -10.0, 10.0, xtol=1e-14)

    def scalar_bare(theta):
        return so.brentq(lambda x: x ** 3 + x - theta, -10.0, 10.0, xtol=1e-14)
    cases.append(("brentq, n = 1", scalar, scalar_bare, 2.0))

    for n in (10, 40, 200):
        m = rng.standard_normal((n, n)) / np.sqrt(n)
        a = m @ m.T + np.eye(n)

        def rooted(theta, a=a, n=n):
            return optimize.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(n),
                                 tol=1e-12).x

        def rooted_bare(theta, a=a, n=n):
            return so.root(lambda x: a @ x + 0.1 * x ** 3 - theta, np.zeros(n), tol=1e-12).x
        cases.append((f"root (hybr), n = {n}", rooted, rooted_bare, rng.standard_normal(n)))

        def f(x, theta, a=a):
            return 0.5 * x @ a @ x - theta @ x + 0.1 * wnp.sum(x ** 4)

        def argmin(theta, f=f, n=n):
            return optimize.minimize(f, np.zeros(n), args=(theta,), method="BFGS",
                                     jac=wg.grad(f), options={"gtol": 1e-7}).x

        def f_bare(x, theta, a=a):
            return 0.5 * x @ a @ x - theta @ x + 0.1 * np.sum(x ** 4)

        def g_bare(x, theta, a=a):
            return a @ x - theta + 0.4 * x ** 3

        def argmin_bare(theta, n=n, f=f_bare, g=g_bare):
            return so.minimize(f, np.zeros(n), args=(theta,), method="BFGS", jac=g,
                               options={"gtol": 1e-7}).x
        cases.append((f"minimize (BFGS), n = {n}", argmin, argmin_bare,
                      rng.standard_normal(n)))

    design = rng.standard_normal((60, 10))

    def fit(y):
        return optimize.least_squares(lambda x: design @ x - y, np.zeros(10),
                                      jac=lambda x: design, loss="soft_l1", xtol=1e-12,
                                      ftol=1e-12, gtol=1e-12).x

    def fit_bare(y):
        return so.least_squares(lambda x: design @ x - y, np.zeros(10), jac=lambda x: design,
                                loss="soft_l1", xtol=1e-12, ftol=1e-12, gtol=1e-12).x
    cases.append(("least_squares (soft_l1), n = 10", fit, fit_bare, rng.standard_normal(60)))
    return cases


def _paired3(grad, primal, bare, x, rounds=5, min_time=0.03):
    """Medians of ``grad``, ``primal`` and ``bare`` timed in turn in each round (as
    ``_util.paired_time``, for three): ``(t_grad, t_primal, t_bare, d ÷ primal, d ÷ bare)``,
    each ratio the median of the rounds' own."""
    def batch(fn, k):
        t = time.perf_counter()
        for _ in range(k):
            fn(x)
        return (time.perf_counter() - t) / k
    fns = (grad, primal, bare)
    ks = []
    for fn in fns:
        fn(x)
        k = 1
        while batch(fn, k) * k < min_time and k < 1 << 16:
            k *= 2
        ks.append(k)
    rows = [[], [], []]
    for _ in range(rounds):
        for fn, k, r in zip(fns, ks, rows):
            r.append(batch(fn, k))
    tg, tp, tb = (statistics.median(r) for r in rows)
    over_primal = statistics.median([(g - p) / p for g, p in zip(rows[0], rows[1])])
    over_bare = statistics.median([(g - b) / b for g, b in zip(rows[0], rows[2])])
    return tg, tp, tb, over_primal, over_bare


def bench_roots_and_optima(rounds=5):
    """Rows of (case, SciPy ms, primal ms, gradient ms, d ÷ primal, d ÷ SciPy): d is the
    gradient's own work, its time less one primal solve."""
    print("Roots and optima: the gradient of sum(solution) by the implicit function theorem, "
          "beside one primal solve (ms; medians of paired runs). primal: wengert's call on "
          "plain values; SciPy: SciPy's own call, the same functions")
    row("", "SciPy", "primal", "gradient", "d ÷ primal", "d ÷ SciPy", width=34)
    results = []
    for name, solve, bare, theta in _cases():
        loss = wg.grad(lambda t, solve=solve: wnp.sum(solve(t)))
        t_grad, t_primal, t_bare, ratio, ratio_bare = _paired3(loss, solve, bare, theta,
                                                               rounds=rounds)
        results.append((name, t_primal, t_grad, ratio, t_bare, ratio_bare))
        row(name, fmt(t_bare * 1e3), fmt(t_primal * 1e3), fmt(t_grad * 1e3), f"{ratio:.2f}",
            f"{ratio_bare:.2f}", width=34)
    worst = max(r[3] for r in results)
    worst_bare = max(r[5] for r in results)
    print(f"worst derivative ÷ primal: {worst:.2f}, ÷ SciPy's own call: {worst_bare:.2f} "
          "(target ≤ 1)")
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--repeat", type=int, default=5, help="paired rounds per ODE row")
    ap.add_argument("--only", choices=["odes", "roots"], default=None)
    a = ap.parse_args(argv)
    if a.only in (None, "roots"):
        bench_roots_and_optima()
        print()
    if a.only in (None, "odes"):
        bench_odes(tuple(a.sizes), a.repeat)


if __name__ == "__main__":
    main()
