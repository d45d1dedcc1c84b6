"""Eager engines: microseconds per recorded operation, and gradient time / function time.

The program is a 301-operation chain (100 × tanh, multiply, add, then a sum) on a
scalar and on a 10-element array, the same code for wengert, autograd and
PyTorch eager (when installed).  Also: the derivative of the Babylonian square
root against the plain function.

    python benchmarks/bench_core.py
"""
from _util import fmt, median_time, optional, row  # first: sets BLAS to one thread

import numpy as np  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402

N_OPS = 301


def chain(m):
    def f(x):
        for _ in range(100):
            x = m.tanh(x) * 0.9 + 0.1
        return m.sum(x)
    return f


def babylonian(x, n=10):
    t = (1 + x) / 2
    for _ in range(n):
        t = (t + x / t) / 2
    return t


def main():
    ag = optional("autograd")
    torch = optional("torch")
    print("== eager engines: µs per recorded operation (301-op chain) ==")
    row("program / engine", "function µs", "µs per op", "grad ÷ f")
    for label, x in (("scalar", 0.3), ("10-element array", np.linspace(0.1, 1.0, 10))):
        f_np = chain(np)
        t_f = median_time(f_np, x)
        row(f"{label}: plain NumPy", fmt(t_f * 1e6), "", "")
        g = wg.grad(chain(wnp))
        t = median_time(g, x)
        row(f"{label}: wengert grad (Tape)", fmt(t * 1e6), fmt(t / N_OPS * 1e6), fmt(t / t_f))
        fx = chain(wnp)
        one = 1.0 if np.ndim(x) == 0 else np.ones_like(x)
        t = median_time(lambda x: wg.jvp(fx, (x,), (one,)), x)
        row(f"{label}: wengert jvp (Dual)", fmt(t * 1e6), fmt(t / N_OPS * 1e6), fmt(t / t_f))
        if ag is not None:
            import autograd.numpy as anp
            ga = ag.grad(chain(anp))
            t = median_time(ga, x)
            row(f"{label}: autograd grad", fmt(t * 1e6), fmt(t / N_OPS * 1e6), fmt(t / t_f))
        if torch is not None:
            torch.set_num_threads(1)
            ft = chain(torch)

            def torch_grad(x):
                xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
                ft(xt).backward()
                return xt.grad
            t = median_time(torch_grad, x)
            row(f"{label}: PyTorch eager backward", fmt(t * 1e6), fmt(t / N_OPS * 1e6),
                fmt(t / t_f))
    print()
    print("== derivative of the Babylonian square root (10 iterations) ==")
    t_f = median_time(babylonian, 2.0)
    row("engine", "µs", "÷ plain", "")
    row("plain Python", fmt(t_f * 1e6), "1.00")
    t = median_time(wg.derivative(babylonian), 2.0)
    row("wengert derivative (Dual)", fmt(t * 1e6), fmt(t / t_f))
    t = median_time(wg.grad(babylonian), 2.0)
    row("wengert grad (Tape)", fmt(t * 1e6), fmt(t / t_f))
    try:
        cd = wg.compile(wg.derivative(babylonian))
        t = median_time(cd, 2.0)
        row("wengert compile(derivative)", fmt(t * 1e6), fmt(t / t_f))
    except Exception as e:  # the graph layer may be absent in a partial install
        row(f"wengert compile: unavailable ({type(e).__name__})", "")
    if ag is not None:
        t = median_time(ag.grad(babylonian), 2.0)
        row("autograd grad", fmt(t * 1e6), fmt(t / t_f))
    if torch is not None:
        def torch_d(x):
            xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
            babylonian(xt).backward()
            return xt.grad
        t = median_time(torch_d, 2.0)
        row("PyTorch eager backward", fmt(t * 1e6), fmt(t / t_f))


if __name__ == "__main__":
    main()
