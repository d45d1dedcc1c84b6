"""Per-example gradients of an MLP (64-128-10, softmax cross-entropy) for 256 examples.

wengert's ``wg.vmap(wg.grad(loss))`` (one vectorised pass) against a Python loop of
``wg.grad`` over the examples, and ``torch.func.vmap(torch.func.grad)`` and
``jax.vmap(jax.grad)`` (eager and jitted) when installed.  Medians; ratios against the
wengert loop.  All compute the same numbers (checked before timing).

    python benchmarks/bench_vmap.py [--quick]
"""
import sys

from _util import fmt, median_time, optional, row  # first: sets BLAS to one thread

import numpy as np  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402
import wengert.scipy.special as wsp  # noqa: E402

SIZES = (64, 128, 10)
N = 256


def loss(params, x, y):
    """Cross-entropy of one example (``y`` one-hot)."""
    (w1, b1), (w2, b2) = params
    h = wnp.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    return wsp.logsumexp(z) - wnp.sum(z * y)


def data(rng):
    params = [(rng.normal(size=(m, n)) / np.sqrt(m), rng.normal(size=n) * 0.1)
              for m, n in zip(SIZES[:-1], SIZES[1:])]
    X = rng.normal(size=(N, SIZES[0]))
    Y = np.eye(SIZES[-1])[rng.integers(0, SIZES[-1], N)]
    return params, X, Y


def main():
    quick = "--quick" in sys.argv
    repeat = 3 if quick else 7
    rng = np.random.default_rng(0)
    params, X, Y = data(rng)
    per_example = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))
    g_loop = wg.grad(loss)

    def loop(params, X, Y):
        return [g_loop(params, x, y) for x, y in zip(X, Y)]

    ref = per_example(params, X, Y)
    lp = loop(params, X, Y)
    for k in range(2):
        for j in range(2):
            np.testing.assert_allclose(ref[k][j], np.stack([g[k][j] for g in lp]), rtol=1e-10,
                                       atol=1e-12)

    print(f"== per-example gradients: MLP {'-'.join(map(str, SIZES))}, {N} examples ==")
    row("engine", "ms", "÷ loop")
    t_loop = median_time(loop, params, X, Y, repeat=repeat)
    t_vmap = median_time(per_example, params, X, Y, repeat=repeat)
    row("wengert: loop of wg.grad", fmt(t_loop * 1e3), fmt(1.0))
    row("wengert: wg.vmap(wg.grad)", fmt(t_vmap * 1e3), fmt(t_vmap / t_loop))

    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
        from torch.func import grad, vmap

        def tloss(params, x, y):
            (w1, b1), (w2, b2) = params
            z = torch.tanh(x @ w1 + b1) @ w2 + b2
            return torch.logsumexp(z, 0) - (z * y).sum()
        tp = [(torch.tensor(w), torch.tensor(b)) for w, b in params]
        tX, tY = torch.tensor(X), torch.tensor(Y)
        tf = vmap(grad(tloss), in_dims=(None, 0, 0))
        got = tf(tp, tX, tY)
        np.testing.assert_allclose(got[0][0].numpy(), ref[0][0], rtol=1e-10, atol=1e-12)
        t = median_time(tf, tp, tX, tY, repeat=repeat)
        row("torch.func.vmap(grad)", fmt(t * 1e3), fmt(t / t_loop))

    jax = optional("jax")
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        import jax.numpy as jnp

        def jloss(params, x, y):
            (w1, b1), (w2, b2) = params
            z = jnp.tanh(x @ w1 + b1) @ w2 + b2
            return jax.nn.logsumexp(z) - jnp.sum(z * y)
        jp = [(jnp.asarray(w), jnp.asarray(b)) for w, b in params]
        jX, jY = jnp.asarray(X), jnp.asarray(Y)
        jf = jax.vmap(jax.grad(jloss), in_axes=(None, 0, 0))
        np.testing.assert_allclose(np.asarray(jf(jp, jX, jY)[0][0]), ref[0][0], rtol=1e-10,
                                   atol=1e-12)

        def eager(*a):
            return jax.block_until_ready(jf(*a))
        t = median_time(eager, jp, jX, jY, repeat=repeat)
        row("jax.vmap(grad), eager", fmt(t * 1e3), fmt(t / t_loop))
        jj = jax.jit(jf)

        def jitted(*a):
            return jax.block_until_ready(jj(*a))
        t = median_time(jitted, jp, jX, jY, repeat=repeat)
        row("jax.jit(jax.vmap(grad))", fmt(t * 1e3), fmt(t / t_loop))


if __name__ == "__main__":
    main()
