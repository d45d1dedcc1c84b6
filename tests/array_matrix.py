"""Every transform on arrays of another library, compared with NumPy on the same data.

A case is a function of ``wrap`` (NumPy array -> the library's array) returning a pytree
of results; ``run_case`` calls it once with NumPy and once with the library, and checks
that each result is the library's array (never converted to NumPy) and equals NumPy's
(rtol 1e-12). The same matrix serves the NEP-18 test double, Dask (threaded and
distributed) and CuPy.
"""
import numpy as np

import wengert as wg
import wengert.numpy as wnp
from wengert.scipy.special import logsumexp

rng = np.random.default_rng(19)
N, D = 12, 3
X = rng.normal(size=(N, D))
Y = np.where(rng.normal(size=N) > 0, 1.0, -1.0)
W = rng.normal(size=D) * 0.5
V = rng.normal(size=N) * 0.3
U = rng.normal(size=N)


def f(x):  # scalar of a vector
    return wnp.sum(np.sin(x) * x ** 2) + np.dot(x, x) / 3


def g(x):  # vector of a vector
    return np.tanh(x) * x[::-1] + np.exp(x / 4)


def loss(w, X, y):  # logistic regression: NumPy weights, data of any library
    return np.mean(np.logaddexp(0.0, -y * (X @ w))) + 0.05 * np.sum(w * w)


def _step(c, x):
    c2 = np.sin(c) * 0.9 + x * c
    return c2, np.sum(c2 * c2)


def _inverse(c2, x):  # unused by the value; the "invert" schedule needs it
    raise NotImplementedError


def scan_loss(c0, schedule, snapshots=None):
    xs = np.linspace(0.1, 0.5, 6)
    if schedule == "invert":
        def step(c, x):
            return c * np.exp(x) + x, None

        def inverse(c2, x):
            return (c2 - x) * np.exp(-x)
        c, _ = wg.scan(step, c0, xs, checkpoint="invert", inverse=inverse)
        return np.sum(np.sin(c))
    c, ys = wg.scan(_step, c0, xs, checkpoint=schedule, snapshots=snapshots)
    return np.sum(c) + np.sum(ys)


A = rng.normal(size=(6, 4))
B = rng.normal(size=(4, 3))


def ops(x, b):
    """A tour of the rules whose plain values were once made by NumPy (gather/scatter,
    astype, copy, ties of max, zero norms, new axes, joining, einsum)."""
    return (wnp.sum(x[[0, 2, 2]] ** 2) + wnp.sum(x[[1, 3]] ** 3)
            + wnp.sum(np.where(x > 0, x, 0.1 * x) ** 2)
            + wnp.sum(np.concatenate([x, 2 * x]) ** 2) + wnp.sum(np.stack([x, np.sin(x)]) ** 2)
            + np.einsum("ij,jk->", x, b) + wnp.sum(np.tanh(x @ b)) + np.max(x, axis=1).sum()
            + wnp.sum(x.astype(np.float32).astype(np.float64) ** 2) + np.linalg.norm(x)
            + wnp.sum(x[None] * x[:, None, :1]) + wnp.sum(logsumexp(x, axis=1))
            + wnp.sum(np.cumsum(x, axis=0) ** 2) + wnp.sum(np.clip(x, -0.5, 0.5) ** 2)
            + wnp.sum(wnp.copy(x) * x.T.T) + np.mean(x, axis=0).sum() + np.var(x))


def _per_example(w, x, y):
    return np.logaddexp(0.0, -y * np.dot(x, w))


@wg.custom_vjp
def _square(x):
    return x * x


_square.defvjp(lambda x: (x * x, x), lambda r, g: (2.0 * r * g,))


@wg.custom_jvp
def _sine(x):
    return wnp.sin(x)


_sine.defjvp(lambda p, t: (wnp.sin(p[0]), wnp.cos(p[0]) * t[0]))


CASES = {
    "jacfwd": lambda w: wg.jacfwd(g)(w(V)),
    "jacrev": lambda w: wg.jacrev(g)(w(V)),
    "stop_gradient": lambda w: wg.grad(lambda x: wnp.sum(x * wg.stop_gradient(x)))(w(V)),
    "custom_vjp": lambda w: wg.grad(lambda x: wnp.sum(_square(x) * x))(w(V)),
    "custom_jvp": lambda w: wg.grad(lambda x: wnp.sum(_sine(x) * x))(w(V)),
    "custom_jvp_forward": lambda w: wg.jvp(lambda x: _sine(x) * x, (w(V),), (w(U),)),
    "ops_grad": lambda w: wg.grad(ops)(w(A), w(B)),
    "ops_hvp": lambda w: wg.hvp(lambda x: ops(x, w(B)), w(A), w(A[::-1].copy())),
    "ops_jvp": lambda w: wg.jvp(lambda x: ops(x, w(B)), (w(A),), (w(A[::-1].copy()),)),
    "grad": lambda w: wg.grad(f)(w(V)),
    "value_and_grad": lambda w: wg.value_and_grad(f)(w(V)),
    "jvp": lambda w: wg.jvp(g, (w(V),), (w(U),)),
    "vjp": lambda w: wg.vjp(g, w(V))[1](w(U)),
    "vjp_value": lambda w: wg.vjp(g, w(V))[0],
    "jacobian_forward": lambda w: wg.jacobian(g, mode="forward")(w(V)),
    "jacobian_reverse": lambda w: wg.jacobian(g, mode="reverse")(w(V)),
    "jacobian_auto": lambda w: wg.jacobian(g)(w(V)),
    "hessian": lambda w: wg.hessian(f)(w(V)),
    "hvp": lambda w: wg.hvp(f, w(V), w(U)),
    "taylor": lambda w: wg.taylor(f, w(V), w(U), 3),
    "taylor_vector": lambda w: wg.taylor(g, w(V), w(U), 2),
    "checkpoint": lambda w: wg.grad(lambda x: wnp.sum(wg.checkpoint(g)(x) ** 2))(w(V)),
    "scan_all": lambda w: wg.grad(lambda c: scan_loss(c, "all"))(w(V)),
    "scan_ctz": lambda w: wg.grad(lambda c: scan_loss(c, "ctz"))(w(V)),
    "scan_binomial": lambda w: wg.grad(lambda c: scan_loss(c, "binomial", 2))(w(V)),
    "scan_invert": lambda w: wg.grad(lambda c: scan_loss(c, "invert"))(w(V)),
    "compile": lambda w: wg.compile(f)(w(V)),
    "compile_grad": lambda w: wg.compile(wg.grad(f))(w(V)),
    "trace": lambda w: wg.trace(g, w(V))(w(U)),
    "trace_grad": lambda w: wg.trace(f, w(V)).grad()(w(U)),
    "vmap": lambda w: wg.vmap(lambda x: np.sin(x) * x)(w(X)),
    "vmap_grad": lambda w: wg.vmap(wg.grad(_per_example), in_axes=(None, 0, 0))(w(W), w(X), w(Y)),
    "vmap_jvp": lambda w: wg.vmap(lambda t: wg.jvp(g, (w(V),), (t,))[1])(
        w(np.stack([U, U[::-1] * 2, V]))),  # distinct rows: a reversed batch axis shows
    # weights and data of the library (CuPy refuses NumPy operands: this is its common case)
    "lib_grad": lambda w: wg.grad(loss)(w(W), w(X), w(Y)),
    "lib_hvp": lambda w: wg.hvp(lambda p: loss(p, w(X), w(Y)), w(W), w(W[::-1].copy())),
    "lib_hessian": lambda w: wg.hessian(loss)(w(W), w(X), w(Y)),
    "lib_jacobian_reverse": lambda w: wg.jacobian(lambda p: p * loss(p, w(X), w(Y)),
                                                  mode="reverse")(w(W)),
    # NumPy weights, data of the library (the common case)
    "mixed_grad": lambda w: wg.grad(loss)(W, w(X), w(Y)),
    "mixed_value_and_grad": lambda w: wg.value_and_grad(loss)(W, w(X), w(Y)),
    "mixed_hvp": lambda w: wg.hvp(lambda p: loss(p, w(X), w(Y)), W, W[::-1].copy()),
    "mixed_hessian": lambda w: wg.hessian(loss)(W, w(X), w(Y)),
    "mixed_jvp": lambda w: wg.jvp(lambda p: loss(p, w(X), w(Y)), (W,), (W[::-1].copy(),)),
    "mixed_data_grad": lambda w: wg.grad(loss, argnums=1)(W, w(X), w(Y)),
}


def leaves(tree):
    out, stack = [], [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, (tuple, list)):
            stack.extend(reversed(t))
        else:
            out.append(t)
    return out


def run_case(name, wrap, to_numpy, is_native, *, allow_plain=()):
    """Run case ``name`` with NumPy and with ``wrap``; compare leaf by leaf.

    ``allow_plain`` names leaves (by position) that may legitimately be NumPy or a float:
    derivatives with respect to NumPy weights whose computation never met the library
    are still the library's arrays, since the data enters every term.
    """
    ref = leaves(CASES[name](lambda a: a))
    got = leaves(CASES[name](wrap))
    assert len(ref) == len(got), (name, len(ref), len(got))
    for i, (r, x) in enumerate(zip(ref, got)):
        if i not in allow_plain:
            assert is_native(x), f"{name}[{i}]: {type(x).__module__}.{type(x).__name__}"
        xv = to_numpy(x)
        assert np.shape(xv) == np.shape(r), (name, i, np.shape(xv), np.shape(r))
        assert np.asarray(xv).dtype == np.asarray(r).dtype, (name, i)
        np.testing.assert_allclose(xv, r, rtol=1e-12, atol=1e-13, err_msg=f"{name}[{i}]")
    return got
