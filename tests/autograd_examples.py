"""autograd's own example programs and test files, fetched from PyPI at run time (never
committed), and a harness that runs an example under real autograd or under
``python -m wengert.compat.autograd`` with a small budget of gradient calls, recording a summary
of every gradient it computes, so that the two runs can be compared call by call and timed.

Used by tests/test_autograd_suite.py and benchmarks/bench_autograd.py.
"""
import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile

AUTOGRAD_VERSION = "1.9.1"

# examples that reach into autograd's tracer internals: Node and trace (dot_graph, print_trace),
# a Box subclass and a VSpace of its own for a user type (rkhs: functions in a kernel space,
# which wengert's pytrees and tracers would carry otherwise): not part of the promise
INTERNALS = {"dot_graph.py", "print_trace.py", "rkhs.py"}
# helpers the examples import, not programs
HELPERS = {"data.py", "data_mnist.py", "__init__.py"}
# examples that need wengert.scipy.integrate (the solvers issue): run where it exists
NEEDS_INTEGRATE = {"ode_net.py", "ode_net_tight.py"}
# ode_net.py solves its ODE with rtol=0.01: autograd's LSODA (its Jacobian by differences) and
# wengert's (the exact one) take other steps, and both gradients are that accurate (they differ
# by 5e-4 relative). So it is compared at its own tolerance, and a copy solving at 1e-10
# (ode_net_tight.py, written next to it) at the usual 1e-6.
TOLERANCE = {"ode_net.py": 1e-2}
VARIANTS = {"ode_net_tight.py": ("ode_net.py", "rtol=0.01)", "rtol=1e-10, atol=1e-10)")}

# The harness each example runs under (written next to it at run time). It caps the number of
# gradient calls (then stops the program: "budget"), replaces MNIST's download by synthetic
# images, draws plots nowhere, seeds NumPy (an unseeded RandomState() too), and logs a summary of each gradient (per leaf: shape,
# sum, sum of absolute values) of the operators called at top level (not those nested inside
# another's differentiation).
SHIM = r'''
import json, os, runpy, sys, time, types
import numpy as onp

example, budget, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.environ.setdefault("MPLBACKEND", "Agg")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name in ("show", "pause", "draw", "savefig", "ion"):
        setattr(plt, name, lambda *a, **k: None)
except ImportError:
    pass

def _synthetic_mnist():
    rs = onp.random.RandomState(0)
    imgs = lambda n: (rs.rand(n, 28, 28) * 255).astype(onp.uint8)
    labels = lambda n: rs.randint(0, 10, size=n).astype(onp.uint8)
    return imgs(512), labels(512), imgs(128), labels(128)

sys.modules["data_mnist"] = types.SimpleNamespace(mnist=_synthetic_mnist)

class _SeededRandomState(onp.random.RandomState):
    """An unseeded RandomState() seeded: both runs draw the same numbers."""
    def __init__(self, seed=None):
        super().__init__(0 if seed is None else seed)

onp.random.RandomState = _SeededRandomState

import autograd
import autograd.numpy, autograd.scipy, autograd.misc.optimizers  # imported before the clock
import scipy.linalg, scipy.optimize, scipy.signal, scipy.special, scipy.stats  # so is SciPy
OPS = ("grad", "value_and_grad", "elementwise_grad", "jacobian", "hessian", "deriv",
       "holomorphic_grad", "grad_and_aux", "hessian_tensor_product", "hessian_vector_product",
       "tensor_jacobian_product", "vector_jacobian_product")
state = {"calls": 0, "depth": 0, "log": []}

class Budget(Exception):
    pass

def leaves(x):
    if isinstance(x, (list, tuple)):
        return [l for v in x for l in leaves(v)]
    if isinstance(x, dict):
        return [l for k in sorted(x) for l in leaves(x[k])]
    return [x]

def summary(x):
    out = []
    for v in leaves(x):
        try:
            a = onp.asarray(v, dtype=complex)
        except (TypeError, ValueError):
            continue
        out.append([list(a.shape), [float(a.sum().real), float(a.sum().imag)],
                    float(onp.abs(a).sum())])
    return out

def counted(op):
    def make(fun, *a, **k):
        inner = op(fun, *a, **k)
        def run(*args, **kwargs):
            state["depth"] += 1
            try:
                res = inner(*args, **kwargs)
            finally:
                state["depth"] -= 1
            if state["depth"] == 0:
                state["log"].append(summary(res))
                state["calls"] += 1
                if state["calls"] >= budget:
                    raise Budget()
            return res
        return run
    return make

for name in OPS:
    if hasattr(autograd, name):
        setattr(autograd, name, counted(getattr(autograd, name)))

onp.random.seed(0)
sys.argv = [example]
sys.path.insert(0, os.path.dirname(os.path.abspath(example)))
status, t0, c0 = "finished", time.perf_counter(), time.process_time()
try:
    runpy.run_path(example, run_name="__main__")
except Budget:
    status = "budget"
except SystemExit:
    pass
elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
with open(log_path, "w") as fh:
    json.dump({"status": status, "seconds": elapsed, "cpu": cpu, "calls": state["log"],
               "autograd": autograd.__file__}, fh)
'''


def fetch_sdist(dest):
    """autograd's source distribution from PyPI, unpacked under ``dest``: its root (with
    ``tests/`` and ``examples/``), or ``None`` when PyPI cannot be reached."""
    roots = glob.glob(os.path.join(dest, f"autograd-{AUTOGRAD_VERSION}"))
    if roots:
        return roots[0]
    try:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"autograd=={AUTOGRAD_VERSION}", "-d", dest],
                       check=True, capture_output=True, timeout=300)
    except (subprocess.SubprocessError, OSError):
        return None
    archives = glob.glob(os.path.join(dest, "autograd-*.tar.gz"))
    if not archives:
        return None
    with tarfile.open(archives[0]) as tar:
        tar.extractall(dest, filter="data")
    roots = glob.glob(os.path.join(dest, f"autograd-{AUTOGRAD_VERSION}"))
    return roots[0] if roots else None


def examples(root, variants=False):
    """``{name: path}`` of the example programs that should run unchanged; with ``variants``,
    also the ``VARIANTS`` (an example with one text replaced, written next to it)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "examples", "*.py"))
                       + glob.glob(os.path.join(root, "examples", "fluidsim", "*.py"))):
        name = os.path.basename(path)
        if name in HELPERS or name in INTERNALS:
            continue
        out[name] = path
    for name, (source, old, new) in VARIANTS.items() if variants else ():
        if source not in out:
            continue
        with open(out[source]) as fh:
            text = fh.read()
        if old not in text:
            raise ValueError(f"{source} no longer contains {old!r}: update VARIANTS")
        path = os.path.join(os.path.dirname(out[source]), name)
        with open(path, "w") as fh:
            fh.write(text.replace(old, new))
        out[name] = path
    return out


def run_example(path, engine, budget=6, timeout=600, python=None, repo=None):
    """Run one example; ``engine`` is ``"wengert"`` (the compat layer of the tree ``repo``, this
    one by default) or ``"autograd"`` (the real one, in ``python``). Returns the shim's record
    (``seconds``: wall time, ``cpu``: the process's CPU time) plus ``returncode`` and
    ``stderr``."""
    with tempfile.TemporaryDirectory(prefix="ag-example-") as work:
        shim = os.path.join(work, "shim.py")
        log = os.path.join(work, "log.json")
        with open(shim, "w") as fh:
            fh.write(SHIM)
        env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        if engine == "wengert":
            repo = repo or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
            cmd = [python or sys.executable, "-m", "wengert.compat.autograd", shim, path,
                   str(budget), log]
        else:
            cmd = [python or sys.executable, shim, path, str(budget), log]
        proc = subprocess.run(cmd, cwd=os.path.dirname(path), env=env, capture_output=True,
                              text=True, timeout=timeout)
        record = {"status": "crashed", "seconds": None, "cpu": None, "calls": []}
        if os.path.exists(log):
            with open(log) as fh:
                record = json.load(fh)
        record["returncode"] = proc.returncode
        record["stderr"] = proc.stderr[-3000:]
    return record


def compare(a, b, tol=1e-6):
    """Where two runs' gradient summaries differ by more than ``tol`` (relative to the
    gradient's size): a list of messages, empty when they agree on every call."""
    bad = []
    if len(a["calls"]) != len(b["calls"]):
        bad.append(f"{len(a['calls'])} gradient calls against {len(b['calls'])}")
    for k, (ca, cb) in enumerate(zip(a["calls"], b["calls"])):
        if len(ca) != len(cb):
            bad.append(f"call {k}: {len(ca)} leaves against {len(cb)}")
            continue
        for (sa, (ra, ia), absa), (sb, (rb, ib), absb) in zip(ca, cb):
            scale = max(1.0, absa, absb)
            if sa != sb or abs(ra - rb) > tol * scale or abs(ia - ib) > tol * scale \
                    or abs(absa - absb) > tol * scale:
                bad.append(f"call {k}: shape {sa} sum {ra}+{ia}j |.| {absa} against shape "
                           f"{sb} sum {rb}+{ib}j |.| {absb}")
    return bad
