"""Array programs: time ÷ a hand-written NumPy derivative, and ÷ peers when installed.

* an MLP gradient step (two layers, 256 × 32 inputs, tanh),
* a logistic-regression Hessian-vector product (500 × 50, 1200 × 100, 1600 × 128),
* the dense 200 × 200 Jacobian of a 1-D diffusion residual;

and, with PyTorch installed, where the MLP step's time goes against PyTorch eager: the
step on two rows (overhead alone), and the kernels each library runs for it.

    python benchmarks/bench_arrays.py
"""
from _util import fmt, median_time, optional, paired_time, row  # first: sets BLAS to one thread

import numpy as np  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402

rng = np.random.default_rng(0)


# -- MLP ----------------------------------------------------------------------------
X = rng.standard_normal((256, 32))
Y = rng.standard_normal((256, 1))
PARAMS = [rng.standard_normal((32, 64)) * 0.2, np.zeros(64), rng.standard_normal((64, 1)) * 0.2,
          np.zeros(1)]


def mlp_loss(m, X=X, Y=Y):
    def loss(p):
        W1, b1, W2, b2 = p
        h = m.tanh(X @ W1 + b1)
        r = h @ W2 + b2 - Y
        return m.mean(r * r)
    return loss


def mlp_grad_numpy(p, X=X, Y=Y):
    W1, b1, W2, b2 = p
    a = X @ W1 + b1
    h = np.tanh(a)
    r = h @ W2 + b2 - Y
    gr = 2.0 * r / r.size
    gW2 = h.T @ gr
    gb2 = gr.sum(0)
    gh = gr @ W2.T
    ga = gh * (1 - h * h)
    return [X.T @ ga, ga.sum(0), gW2, gb2]


def mlp_step_torch(torch, X=X, Y=Y):
    Xt, Yt = torch.tensor(X), torch.tensor(Y)

    def step(p):
        ps = [torch.tensor(a, requires_grad=True) for a in p]
        W1, b1, W2, b2 = ps
        r = torch.tanh(Xt @ W1 + b1) @ W2 + b2 - Yt
        torch.mean(r * r).backward()
        return [q.grad for q in ps]
    return step


# -- logistic regression HVP ------------------------------------------------------------
# Three sizes. At 500 x 50 per-operation overhead dominates everything. At 1200 x 100 the
# matrix (0.96 MB) sits in this machine's L2 cache (2 MB a core): the hand-written HVP
# runs at 0.34-0.40 ns an entry, and every engine's overhead weighs most (autograd and
# PyTorch measure 12-15x). From about 1.5 MB the hand-written HVP slows to 0.43-0.52 ns an
# entry; at 1600 x 128 the peers measure closest to the ratios the targets were
# set against (autograd 9.5x, PyTorch 7x): 7.5-8x here.
LAM = 1e-2
HVP_SIZES = ((500, 50), (1200, 100), (1600, 128))


def logreg_problem(n, d):
    r = np.random.default_rng(n * 1000 + d)
    A = r.standard_normal((n, d))
    lab = np.sign(r.standard_normal(n))
    return A, lab, r.standard_normal(d) * 0.1, r.standard_normal(d)


def logreg_loss(m, A, lab):
    def loss(w):
        z = lab * (A @ w)
        return m.mean(m.logaddexp(0.0, -z)) + 0.5 * LAM * m.sum(w * w)
    return loss


def logreg_hvp_numpy(A, lab):
    def hvp(w, v):
        z = lab * (A @ w)
        s = 1.0 / (1.0 + np.exp(-z))
        return A.T @ (s * (1 - s) * (A @ v)) / len(lab) + LAM * v
    return hvp


# -- diffusion Jacobian ----------------------------------------------------------------------
N = 200
XD = rng.standard_normal(N)


def residual(m):
    def r(x):
        pad = m.concatenate([m.zeros(1), x, m.zeros(1)])
        return pad[:-2] - 2.0 * x + pad[2:] + x * x
    return r


def residual_jac_numpy(x):
    J = np.diag(-2.0 + 2.0 * x)
    i = np.arange(N - 1)
    J[i, i + 1] = 1.0
    J[i + 1, i] = 1.0
    return J


def check(a, b):
    for u, v in zip(a if isinstance(a, (list, tuple)) else [a], b if isinstance(b, (list, tuple))
                    else [b]):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-8, atol=1e-10)


def compare(label, fn, hand, *args, rounds=9):
    """One row: ``fn`` timed in alternation with the hand-written derivative."""
    t, t_hand, ratio = paired_time(fn, hand, *args, rounds=rounds)
    row(label, fmt(t_hand * 1e6), fmt(t * 1e6), fmt(ratio), width=46)


def main():
    ag = optional("autograd")
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        torch.set_default_dtype(torch.float64)
    print("each engine is timed in alternation with the hand-written NumPy derivative;")
    print("÷ hand is the median of the per-round ratios")
    row("program", "hand NumPy µs", "engine µs", "÷ hand", width=46)

    # MLP
    g = wg.grad(mlp_loss(wnp))
    check(g(PARAMS), mlp_grad_numpy(PARAMS))
    compare("MLP gradient: wengert grad", g, mlp_grad_numpy, PARAMS)
    try:
        gc = wg.compile(g)
        check(gc(PARAMS), mlp_grad_numpy(PARAMS))
        compare("MLP gradient: wengert compile(grad)", gc, mlp_grad_numpy, PARAMS)
    except Exception as e:
        row(f"MLP gradient: compile unavailable ({type(e).__name__}: {e})"[:80], width=46)
    if ag is not None:
        import autograd.numpy as anp
        compare("MLP gradient: autograd", ag.grad(mlp_loss(anp)), mlp_grad_numpy, PARAMS)
    if torch is not None:
        compare("MLP gradient: PyTorch eager", mlp_step_torch(torch), mlp_grad_numpy, PARAMS)

    # logistic-regression HVP
    for n, d in HVP_SIZES:
        A, lab, W0, V0 = logreg_problem(n, d)
        hand = logreg_hvp_numpy(A, lab)
        tag = f"logistic HVP {n}x{d}"
        f = logreg_loss(wnp, A, lab)
        check(wg.hvp(f, W0, V0), hand(W0, V0))
        compare(f"{tag}: wengert hvp", lambda w, v: wg.hvp(f, w, v), hand, W0, V0)
        try:
            hc = wg.compile(lambda w, v: wg.hvp(f, w, v))
            check(hc(W0, V0), hand(W0, V0))
            compare(f"{tag}: wengert compile(hvp)", hc, hand, W0, V0)
        except Exception as e:
            row(f"{tag}: compile unavailable ({type(e).__name__})", width=46)
        if ag is not None:
            import autograd.numpy as anp
            compare(f"{tag}: autograd", ag.hessian_vector_product(logreg_loss(anp, A, lab)),
                    hand, W0, V0)
        if torch is not None:
            At, Lt = torch.tensor(A), torch.tensor(lab)

            def tloss(w):
                z = Lt * (At @ w)
                return torch.mean(torch.logaddexp(torch.zeros(()), -z)) + \
                    0.5 * LAM * torch.sum(w * w)

            def torch_hvp(w, v):
                return torch.autograd.functional.hvp(tloss, torch.tensor(w), torch.tensor(v))[1]
            compare(f"{tag}: PyTorch (double backward)", torch_hvp, hand, W0, V0)

    # dense Jacobian
    r = residual(wnp)
    for mode in ("forward", "reverse"):
        J = wg.jacobian(r, mode=mode)
        check(J(XD), residual_jac_numpy(XD))
        compare(f"200x200 Jacobian: wengert {mode}", J, residual_jac_numpy, XD)
    if ag is not None:
        import autograd.numpy as anp
        compare("200x200 Jacobian: autograd", ag.jacobian(residual(anp)), residual_jac_numpy, XD,
                rounds=3)
    if torch is not None:
        import torch.func
        rt = residual(torch)

        def tj(x):
            return torch.func.jacrev(rt)(torch.tensor(x))
        compare("200x200 Jacobian: torch.func.jacrev", tj, residual_jac_numpy, XD)
        mlp_anatomy(torch)


def mlp_anatomy(torch):
    """Where the MLP step's time goes, against PyTorch: the same step on 2 of the 256 rows
    (dispatch and bookkeeping only), then the kernels NumPy and PyTorch run for it."""
    print("\nMLP step against PyTorch: overhead at 2 x 32 inputs, then the kernels (256 x 64)")
    row("", "hand NumPy µs", "wengert µs", "PyTorch µs", width=46)
    x2, y2 = X[:2], Y[:2]
    g2 = wg.grad(mlp_loss(wnp, x2, y2))
    torch2 = mlp_step_torch(torch, x2, y2)

    def hand2(p):
        return mlp_grad_numpy(p, x2, y2)
    check(g2(PARAMS), hand2(PARAMS))
    check([t.numpy() for t in torch2(PARAMS)], hand2(PARAMS))
    row("whole step, 2 rows", *(fmt(median_time(fn, PARAMS) * 1e6) for fn in (hand2, g2, torch2)),
        width=46)
    r = np.random.default_rng(1)
    a, h, g = (r.standard_normal((256, 64)) for _ in range(3))
    b = r.standard_normal(64)
    at, ht, gt, bt = (torch.tensor(v) for v in (a, h, g, b))
    Xt, W1t = torch.tensor(X), torch.tensor(PARAMS[0])
    kernels = [
        ("X @ W1 + b1 (PyTorch: addmm)", lambda: X @ PARAMS[0] + b,
         lambda: torch.addmm(bt, Xt, W1t)),
        ("tanh", lambda: np.tanh(a), lambda: torch.tanh(at)),
        ("its pullback g * (1 - h*h)", lambda: g * (1.0 - h * h),
         lambda: torch.ops.aten.tanh_backward(gt, ht)),
        ("bias cotangent g.sum(0)", lambda: g.sum(0), lambda: gt.sum(0)),
    ]
    for label, npf, tf in kernels:
        row(label, fmt(median_time(npf) * 1e6), "", fmt(median_time(tf) * 1e6), width=46)


if __name__ == "__main__":
    main()
