"""``wg.compile`` against JAX jit on five workloads (issue 22), ratios from one run.

    python benchmarks/bench_compile.py

Each row times the compiled gradient (or Jacobian) in alternation with its reference --
the plain NumPy function or the hand-written NumPy derivative -- and prints time ÷
reference (the median of per-round ratios) for:

* ``numpy``: ``wg.compile(..., fuse=False)``, the plain-NumPy generated code (the baseline);
* ``fused``: ``wg.compile(...)``, fused kernels where Numba is installed (else the same);
* ``jax``: ``jax.jit`` of JAX's transform, when JAX is importable (float64).

The first call of each (trace + generate + compile kernels; for JAX tracing + XLA) is
printed as compile time: for the plain-NumPy program, for the fused one in a new process
with an empty kernel cache (``1st cold``: Numba compiles every kernel) and in another new
process with the cache the first one filled (``1st warm``: Numba loads the machine code;
the number of kernels it still compiled follows ``/``), and JAX's twice: in this process
(``1st jax``, after the rows before it have started XLA and JAX's tracing machinery) and
in a new process (``jax new``: the cold first call's counterpart, which also pays the
runtime's own first-use set-up, as ``1st cold`` pays Numba's).  The new processes have
imported Numba, or JAX configured for float64 on the CPU, before timing; the cache is a
temporary directory (``WENGERT_CACHE_DIR``), never the user's.  The workloads:

A second table runs each program with ``reuse_buffers`` off and on (time ratios, the peak
memory one call holds as tracemalloc sees it, how many temporaries the NumPy / fused program
pools into how many buffers), and a sixth workload with many temporaries of a medium size: 20
steps of the elementwise chain on 32,768 elements, grad.

1. 301 elementwise ops (100 × tanh, multiply, add, then a sum) on 10 elements, grad
   (÷ the NumPy function; bench_core.py's chain);
2. the extended Rosenbrock function, n = 300, a Python loop over ``x[i]``, grad
   (÷ the NumPy function; bench_graph.py's);
3. an MLP 64-128-10, batch 256, tanh, mean squared error, grad (÷ hand-written backward);
4. the dense 200 × 200 Jacobian of a diffusion residual (÷ hand-written; bench_arrays.py's);
5. a 2,000-step chain ``x <- x + 0.01 tanh(W x)`` (x of size 10, a ``wg.scan`` with
   ``checkpoint="all"``), gradient in ``W`` (÷ hand-written backward).

``--scaling``: compile time against program size (issue 32) -- an elementwise chain, its
gradient and an unrolled small LSTM's gradient at about 10², 10³, 10⁴, 10⁵ primitives, each
compiled cold in a new process (an empty kernel cache), ``fuse=False`` then ``fuse=True``,
with the processor seconds spent in each phase: trace, simplify (CSE, algebra), passes (live,
accumulations, plan, budget, buffers), code generation, Python's ``compile()``, Numba
(kernel modules and their compilation) and the rest of the first call (running it, keeping
the program), then the whole first call's wall time and processor time (``cpu``: what the
load on a shared machine does not change).  ``--scaling --sizes 100,1000`` runs fewer sizes, ``--programs chain``
fewer programs, ``--fuse 0`` one setting, ``--roll 0`` compiles the straight line (by default a
program of 20,000 nodes or more is rolled into loops: graph/roll.py), ``--timeout 300`` gives up
on a cell after so many seconds.
"""
from _util import fmt, optional, paired_time, row  # first: sets BLAS to one thread

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import wengert as wg  # noqa: E402
import wengert.numpy as wnp  # noqa: E402

rng = np.random.default_rng(0)


# 1. elementwise chain --------------------------------------------------------------------
def chain(m, steps=100):
    def f(x):
        for _ in range(steps):
            x = m.tanh(x) * 0.9 + 0.1
        return m.sum(x)
    return f


X1 = np.linspace(0.1, 1.0, 10)


# 2. Rosenbrock ------------------------------------------------------------------------------
def rosenbrock(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


X2 = np.linspace(-1.2, 1.3, 300)


# 3. MLP -------------------------------------------------------------------------------------
XM = rng.standard_normal((256, 64))
YM = rng.standard_normal((256, 10))
PM = (rng.standard_normal((64, 128)) * 0.1, np.zeros(128),
      rng.standard_normal((128, 10)) * 0.1, np.zeros(10))


def mlp(m):
    def loss(p):
        W1, b1, W2, b2 = p
        h = m.tanh(XM @ W1 + b1)
        r = h @ W2 + b2 - YM
        return m.mean(r * r)
    return loss


def mlp_hand(p):
    W1, b1, W2, b2 = p
    h = np.tanh(XM @ W1 + b1)
    r = h @ W2 + b2 - YM
    gr = (2.0 / r.size) * r
    gh = gr @ W2.T
    ga = gh * (1.0 - h * h)
    return (XM.T @ ga, ga.sum(0), h.T @ gr, gr.sum(0))


# 4. dense Jacobian -------------------------------------------------------------------------
N4 = 200
X4 = rng.standard_normal(N4)


def residual(m):
    def r(x):
        pad = m.concatenate([m.zeros(1), x, m.zeros(1)])
        return pad[:-2] - 2.0 * x + pad[2:] + x * x
    return r


def residual_jac_hand(x):
    J = np.diag(-2.0 + 2.0 * x)
    i = np.arange(N4 - 1)
    J[i, i + 1] = 1.0
    J[i + 1, i] = 1.0
    return J


# 5. 2,000-step chain --------------------------------------------------------------------
STEPS, SIZE = 2000, 10
X5 = rng.standard_normal(SIZE)
W5 = rng.standard_normal((SIZE, SIZE)) / np.sqrt(SIZE)


def chain_loss(W):
    def step(x, _):
        return x + 0.01 * wnp.tanh(W @ x), None
    x, _ = wg.scan(step, X5, length=STEPS, checkpoint="all")
    return wnp.sum(x)


def chain_hand(W):
    xs = [X5]
    ts = []
    x = X5
    for _ in range(STEPS):
        t = np.tanh(W @ x)
        ts.append(t)
        x = x + 0.01 * t
        xs.append(x)
    g = np.ones(SIZE)
    gW = np.zeros_like(W)
    for k in range(STEPS - 1, -1, -1):
        ga = 0.01 * g * (1.0 - ts[k] * ts[k])
        gW += np.outer(ga, xs[k])
        g = g + W.T @ ga
    return gW


def jax_versions(jax):
    import jax.numpy as jnp
    from jax import lax

    def chain_loss_jax(W):
        def step(x, _):
            return x + 0.01 * jnp.tanh(W @ x), None
        x, _ = lax.scan(step, jnp.asarray(X5), None, length=STEPS)
        return jnp.sum(x)
    return {
        "chain": jax.jit(jax.grad(chain(jnp))),
        "rosenbrock": jax.jit(jax.grad(rosenbrock)),
        "mlp": jax.jit(jax.grad(mlp(jnp))),
        "jacobian": jax.jit(jax.jacobian(residual(jnp))),
        "scan": jax.jit(jax.grad(chain_loss_jax)),
    }


def blocking(fn):
    def call(*args):
        out = fn(*args)
        for leaf in (out if isinstance(out, (tuple, list)) else (out,)):
            leaf.block_until_ready()
        return out
    return call


def first_call(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def ms(t):
    return "—" if t is None else f"{t * 1e3:.0f} ms"


def compiled(make, fuse):
    try:
        return wg.compile(make(), fuse=fuse)
    except TypeError:  # before the fuse switch existed: the NumPy code is all there is
        return wg.compile(make())


def check(a, b, rtol=1e-9, atol=1e-12):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    for u, v in zip(a, b):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=rtol, atol=atol)


def cases():
    return [
        ("chain", "301 elementwise ops, 10 elements, grad", "NumPy f",
         lambda: wg.grad(chain(wnp)), chain(np), (X1,)),
        ("rosenbrock", "Rosenbrock n=300, loop over x[i], grad", "NumPy f",
         lambda: wg.grad(rosenbrock), rosenbrock, (X2,)),
        ("mlp", "MLP 64-128-10, batch 256, grad", "hand",
         lambda: wg.grad(mlp(wnp)), mlp_hand, (PM,)),
        ("jacobian", "dense 200x200 Jacobian", "hand",
         lambda: wg.jacobian(residual(wnp)), residual_jac_hand, (X4,)),
        ("scan", "2,000-step chain (scan 'all'), grad", "hand",
         lambda: wg.grad(chain_loss), chain_hand, (W5,)),
    ]


def first_call_child(key):
    """In a new process: the fused program's first call, and how many kernel signatures
    Numba compiled (misses) or loaded from the disk cache (hits)."""
    import numba  # noqa: F401  (imported before timing, like JAX)
    from wengert.graph import kernel_cache
    make, args = next((c[3], c[5]) for c in cases() if c[0] == key)
    fn = wg.compile(make(), fuse=True)
    _, t = first_call(fn, *args)
    hits = misses = 0
    for funcs in kernel_cache._MODULES.values():
        for d in set(funcs.values()):
            hits += sum(d.stats.cache_hits.values())
            misses += sum(d.stats.cache_misses.values())
    print(json.dumps({"t": t, "hits": hits, "misses": misses}))


def jax_first_call_child(key):
    """In a new process: JAX jit's first call of the row (import and configuration done
    before timing, as the fused child imports Numba first)."""
    import jax
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    args = next(c[5] for c in cases() if c[0] == key)
    _, t = first_call(blocking(jax_versions(jax)[key]), *args)
    print(json.dumps({"t": t}))


def jax_first_call_process(key):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--jax-first-call", key],
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])["t"]


def first_call_process(key, cache):
    """``(seconds, kernels compiled)`` of the fused first call in a new process."""
    env = dict(os.environ, WENGERT_CACHE_DIR=cache, WENGERT_FUSE="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] +
        [p for p in [os.environ.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-call", key],
                         env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return r["t"], r["misses"]


def main():
    cache_root = tempfile.mkdtemp(prefix="wengert-bench-cache-")
    os.environ["WENGERT_CACHE_DIR"] = os.path.join(cache_root, "this")
    try:
        run(cache_root)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def run(cache_root):
    jax = optional("jax")
    peers = {}
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_platforms", "cpu")
        peers = jax_versions(jax)
    print("time ÷ reference (median of per-round ratios, each engine timed in alternation "
          "with its reference); first call = trace + generate + compile")
    row("workload", "ref", "numpy ×", "fused ×", "jax ×", "1st numpy", "1st cold",
        "1st warm", "1st jax", "jax new", width=40)
    summary = []
    for key, label, ref_name, make, ref, args in cases():
        want = make()(*args)
        ratios, firsts = [], []
        for fuse in (False, True):
            fn = compiled(make, fuse)
            out, t_first = first_call(fn, *args)
            check(out, want)
            ratios.append(paired_time(fn, ref, *args)[2])
            firsts.append(t_first)
        jr = jf = jn = None
        if key in peers:
            jfn = blocking(peers[key])
            jargs = args
            out, jf = first_call(jfn, *jargs)
            check([np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))],
                  want, rtol=1e-7, atol=1e-10)
            jr = paired_time(jfn, ref, *jargs)[2]
            jn = jax_first_call_process(key)
        cache = os.path.join(cache_root, key)  # a new, empty kernel cache for this row
        cold, _ = first_call_process(key, cache)
        warm, compiled_warm = first_call_process(key, cache)
        row(label, ref_name, fmt(ratios[0]), fmt(ratios[1]), fmt(jr), ms(firsts[0]), ms(cold),
            f"{ms(warm)} /{compiled_warm}", ms(jf), ms(jn), width=40)
        summary.append((label, ratios[1], jr, cold, jf, jn))
    if peers:
        ok = sum(1 for _, r, j, *_ in summary if j is not None and r <= j)
        print(f"fused compiled at or below JAX jit on {ok} of {len(summary)} rows")
        for name, col in (("1st jax", 4), ("jax new", 5)):
            ok = sum(1 for s in summary if s[col] is not None and s[3] <= s[col])
            print(f"fused cold first call at or below JAX's ({name}) on {ok} of "
                  f"{len(summary)} rows")
    buffers(cases())


def peak_bytes(fn, *args):
    """The most memory one call holds at once beyond what it started with (tracemalloc sees
    NumPy's array data, and Python's objects)."""
    import tracemalloc
    fn(*args)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    fn(*args)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def pool_size(fn, args):
    """``"temporaries>buffers"`` pooled by the program these arguments run."""
    pool = getattr(fn.program(*args), "pool", None) or {}
    return f"{len(pool)}>{len({id(b) for b in pool.values()})}"


def buffers(cases):
    """Buffers reused across calls (``reuse_buffers``, docs/graph.md): each engine with the
    pool off and on, timed in alternation against the same reference, and its peak memory
    per call."""
    print("\nbuffers reused across calls: time ÷ reference with reuse_buffers off / on, "
          "peak traced memory per call (kB) off/on, temporaries>buffers pooled (numpy / fused)")
    row("workload", "numpy off", "numpy on", "fused off", "fused on", "kB numpy",
        "kB fused", "pooled", width=40)
    X6 = np.linspace(0.1, 1.0, 32768)
    cases = cases + [  # beyond the five: many temporaries of a medium size
        ("chain32k", "20 x (tanh, *, +) on 32,768 elements, grad", "NumPy f",
         lambda: wg.grad(chain(wnp, 20)), chain(np, 20), (X6,))]
    for key, label, ref_name, make, ref, args in cases:
        cells, kb, pooled = [], [], []
        for fuse in (False, True):
            peaks = []
            for reuse in (False, True):
                fn = wg.compile(make(), fuse=fuse, reuse_buffers=reuse)
                fn(*args)
                cells.append(fmt(paired_time(fn, ref, *args)[2]))
                peaks.append(f"{peak_bytes(fn, *args) / 1024:.0f}")
                if reuse:
                    pooled.append(str(pool_size(fn, args)))
            kb.append("/".join(peaks))
        row(label, *cells, *kb, "/".join(pooled), width=40)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--first-call"]:
        first_call_child(sys.argv[2])
    elif sys.argv[1:2] == ["--jax-first-call"]:
        jax_first_call_child(sys.argv[2])
    elif sys.argv[1:2] == ["--scaling-cell"]:
        from _scaling import cell
        cell(*sys.argv[2:])
    elif "--scaling" in sys.argv[1:]:
        from _scaling import table
        table(sys.argv[1:], os.path.abspath(__file__))
    else:
        main()
