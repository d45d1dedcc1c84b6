"""Differential test: every engine computes the same derivative of random programs.

Each program (tests/random_programs.py: elementwise functions, powers with constant
and traced exponents, where, maximum, broadcasting, indexing, reshapes, reductions,
dot/@, in-place updates, int()/float() of comparisons, if/for) is written to a module
and imported, so that source mode reads real source.  At a point kept away from every
kink, these must agree:

* reverse mode (``wg.grad``) with central finite differences (a 4-point stencil, its
  own error estimated from a second step);
* with reverse mode, to round-off: forward mode (``wg.jacobian(mode="forward")``),
  ``wg.jvp`` with a random tangent, ``wg.trace`` -> ``Graph.grad`` and ``Graph.jvp``,
  the simplified graphs, ``wg.compile(wg.grad(f))`` (twice at the point, then at a
  second point, which may take other branches: compile re-traces) and
  ``wg.source.grad`` (which may instead raise its named ``SourceError``); the compiled
  gradients reusing buffers across calls give the bits of those allocating on every call;
* on a quarter of the programs, Hessians: ``wg.hessian``, the forward Jacobian of
  ``wg.grad``, ``Graph.hessian``, ``wg.compile(wg.hessian(f))`` and Taylor mode's
  second coefficient, against finite differences of ``wg.grad``.

No engine may change its input arrays, and an engine stuck for seconds counts as a
crash.  The default run checks 300 programs chosen by hypothesis (derandomised:
the same programs every run); ``python -m pytest -m slow tests/test_differential.py``
checks 10,000 (``WENGERT_DIFF_N``; ``WENGERT_DIFF_LOG=file`` writes every failure
with its program) and prints how many programs each engine agreed on, declined with
its named error, got wrong or crashed on.
"""
import collections
import contextlib
import importlib.util
import itertools
import os
import re
import signal
import sys
import threading
import traceback

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import random_programs as rp  # tests/random_programs.py
import wengert as wg
from wengert.source import SourceError

RTOL = 1e-9          # engine against engine: round-off only
FD_RTOL = 1e-6       # against the finite-difference stencil
FD_STEP = 1e-4       # the 4-point stencil's error is O(h^4): about 1e-16 here
HESSIAN_SHARE = 4    # one program in this many gets the Hessian checks
ENGINE_SECONDS = 3   # an engine that takes longer on these small programs is stuck
FUSED_SHARE = 6      # one program in this many is also compiled with fused kernels (Numba:
FUSED_SECONDS = 60   # a compilation per new kernel, so fewer programs and more time)

ENGINES = ("reverse", "forward", "jvp", "graph", "simplified", "compile", "compile_new",
           "compile_fused", "source", "hessian", "fwd_over_rev", "hessian_graph", "taylor")
SECOND_ORDER = ("hessian", "fwd_over_rev", "hessian_graph", "taylor")
OUTCOMES = ("agree", "unsupported", "mismatch", "crash", "skipped")


def fuse_available():
    from wengert.graph.fuse import numba_or_none
    return numba_or_none() is not None


class Mismatch(AssertionError):
    pass


class Stuck(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Raise ``Stuck`` in the main thread after ``seconds`` (a hang is a crash, and must
    not stop the run)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum, frame):
        raise Stuck(f"no result after {seconds}s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# -- comparing --------------------------------------------------------------------------------
def _leaves(v):
    return list(v) if isinstance(v, tuple) else [v]


def compare(got, want, rtol, scale=None, what="", slack=None):
    """Raise ``Mismatch`` unless ``got`` has ``want``'s structure and shapes and is close.

    The absolute tolerance is ``rtol`` times ``scale`` (by default the largest
    entry of ``want``, at least 1): entries much smaller than the largest come out
    of the same sums, so they carry that size's rounding.  ``slack`` (shaped like
    ``want``) is added: the estimated error of a finite difference."""
    g, w = _leaves(got), _leaves(want)
    s = _leaves(slack) if slack is not None else [0.0] * len(w)
    if len(g) != len(w):
        raise Mismatch(f"{what}: {len(g)} results, expected {len(w)}")
    if scale is None:
        scale = max([1.0] + [float(np.max(np.abs(x))) for x in w if np.size(x)])
    for k, (a, b, sk) in enumerate(zip(g, w, s)):
        if np.shape(a) != np.shape(b):
            raise Mismatch(f"{what}[{k}]: shape {np.shape(a)}, expected {np.shape(b)}")
        a = np.asarray(a, float)
        b = np.asarray(b, float)
        if not np.all(np.isfinite(a)):
            raise Mismatch(f"{what}[{k}]: not finite:\n{a!r}\nexpected\n{b!r}")
        err = np.abs(a - b)
        if np.any(err > rtol * (scale + np.abs(b)) + sk):
            raise Mismatch(f"{what}[{k}]: max error {float(np.max(err)):.3g} "
                           f"(scale {scale:.3g}):\n{a!r}\nexpected\n{b!r}")


def identical(got, want, what=""):
    """Raise ``Mismatch`` unless ``got`` and ``want`` are the same bits (NaNs included): a
    program reusing buffers against the one allocating (wengert/graph/pool.py)."""
    g, w = _leaves(got), _leaves(want)
    if len(g) != len(w):
        raise Mismatch(f"{what}: {len(g)} results, expected {len(w)}")
    for k, (a, b) in enumerate(zip(g, w)):
        if type(a) is not type(b) or np.shape(a) != np.shape(b) or \
                not np.array_equal(a, b, equal_nan=True):
            raise Mismatch(f"{what}[{k}]: not the same bits:\n{a!r}\nexpected\n{b!r}")


# -- finite differences ---------------------------------------------------------------------
def _perturbed(args, k, idx, delta):
    out = list(args)
    a = args[k]
    if isinstance(a, np.ndarray):
        a = a.copy()
        a[idx] += delta
    else:
        a = a + delta
    out[k] = a
    return tuple(out)


def fd_derivative(fn, args, nums, h=FD_STEP):
    """The 4-point central difference of ``fn`` (a scalar or array function) with respect
    to each argument in ``nums``, shaped ``in.shape + out.shape``."""
    out = []
    for k in nums:
        shape = np.shape(args[k])
        cols = []
        for idx in (np.ndindex(*shape) if shape else [()]):
            f = [np.asarray(fn(*_perturbed(args, k, idx, s * h)), float)
                 for s in (2, 1, -1, -2)]
            cols.append((-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h))
        out.append(np.array(cols).reshape(shape + cols[0].shape))
    return out


def fd_with_error(fn, args, nums):
    """Finite differences with steps h and h/4, and 4 times their difference: an error
    bound that grows where the function varies fast on the scale of the step."""
    coarse = fd_derivative(fn, args, nums)
    fine = fd_derivative(fn, args, nums, FD_STEP / 4)
    return fine, [4 * np.abs(c - f) for c, f in zip(coarse, fine)]


def copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


# -- one program ------------------------------------------------------------------------------
def load(prog, directory, name):
    """Write ``prog`` as ``name.py`` in ``directory`` and import it: source mode reads it."""
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as fh:
        fh.write(prog.source())
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.f


def safe(prog, args):
    """The plain value of ``prog`` at ``args`` if every kink is far enough, else None."""
    try:
        value, mon = prog.run(args)
    except (FloatingPointError, ZeroDivisionError, OverflowError):
        return None
    if mon.margin < rp.MARGIN or mon.magnitude > rp.MAX_MAGNITUDE:
        return None
    return value


def points(prog, rng, tries=10):
    """A safe point, and a second one for the compiled function (None if none was found)."""
    a = b = None
    for _ in range(tries):
        p = prog.inputs(rng)
        if safe(prog, p) is not None:
            if a is None:
                a = p
            else:
                b = p
                break
    return a, b


def check_program(prog, f, a, b, hessian, fused=False):
    """``{engine: (outcome, message)}`` for the program ``f`` at ``a`` (and ``b``)."""
    nargs = len(a)
    argnums = 0 if nargs == 1 else tuple(range(nargs))
    nums = (0,) if nargs == 1 else argnums
    value = f(*copies(a))
    want_value = prog.run(a)[0]
    compare(value, want_value, 1e-12, what="the generator: program text against its tree")
    fd, fd_err = fd_with_error(f, a, nums)
    fd, fd_err = (fd[0], fd_err[0]) if nargs == 1 else (tuple(fd), tuple(fd_err))
    results = {}

    def run(engine, body, unsupported=()):
        args = copies(a)
        try:
            with np.errstate(all="ignore"), time_limit(
                    FUSED_SECONDS if engine == "compile_fused" else ENGINE_SECONDS):
                body(args)
            for x, y in zip(args, a):
                if isinstance(y, np.ndarray) and not np.array_equal(x, y):
                    raise Mismatch("the engine changed its input array")
            results[engine] = ("agree", "")
        except (NotImplementedError, *unsupported) if engine == "taylor" else unsupported as e:
            results[engine] = ("unsupported", f"{type(e).__name__}: {e}")
        except Mismatch as e:
            results[engine] = ("mismatch", str(e))
        except Exception as e:
            results[engine] = ("crash", "".join(
                traceback.format_exception_only(type(e), e)).strip()
                + "\n" + "".join(traceback.format_tb(e.__traceback__)[-3:]))

    ref = {}

    def reverse(args):
        ref["grad"] = wg.grad(f, argnums)(*args)
        compare(ref["grad"], fd, FD_RTOL, what="reverse against finite differences",
                slack=fd_err)
    run("reverse", reverse)

    def forward(args):
        g = wg.jacobian(f, argnums, mode="forward")(*args)
        if "grad" not in ref:  # no reverse result: finite differences are the reference
            compare(g, fd, FD_RTOL, what="forward against finite differences", slack=fd_err)
            ref["grad"] = g
        else:
            compare(g, ref["grad"], RTOL, what="forward against reverse")
    run("forward", forward)
    if "grad" not in ref:
        ref["grad"] = fd
    grad = ref["grad"]
    tight = RTOL if grad is not fd else FD_RTOL

    rng = np.random.default_rng(7)
    v = tuple(rng.standard_normal(np.shape(x)) if isinstance(x, np.ndarray)
              else float(rng.standard_normal()) for x in a)
    terms = [np.asarray(gi) * vi for gi, vi in zip(_leaves(grad), v)]
    grad_v = float(sum(np.sum(x) for x in terms))
    grad_v_scale = max(1.0, float(sum(np.sum(np.abs(x)) for x in terms)))

    def jvp(args):
        out, t = wg.jvp(f, args, v)
        compare(out, value, RTOL, what="jvp's value")
        compare(t, grad_v, tight, grad_v_scale, what="jvp's tangent against grad . v")
    run("jvp", jvp)

    def graph(args):
        g = wg.trace(f, *args)
        compare(g(*args), value, RTOL, what="the traced graph's value")
        gg = g.grad(argnums)
        first = gg(*args)
        compare(gg(*args), grad, tight, what="Graph.grad")
        compare(first, grad, tight, what="Graph.grad's first result, after a second call")
        out, t = g.jvp()(*args, *v)
        compare(out, value, RTOL, what="Graph.jvp's value")
        compare(t, grad_v, tight, grad_v_scale, what="Graph.jvp's tangent against grad . v")
    run("graph", graph)

    def simplified(args):
        g = wg.trace(f, *args)
        s = g.simplify()
        compare(s(*args), value, RTOL, what="the simplified graph's value")
        compare(s.grad(argnums)(*args), grad, tight, what="simplify().grad()")
        compare(g.grad(argnums).simplify()(*args), grad, tight, what="grad().simplify()")
    run("simplified", simplified)

    compiled = {}

    def compile_(args):
        cf = wg.compile(f, fuse=False)
        compare(cf(*args), value, RTOL, what="wg.compile(f)")
        cg = compiled["grad"] = wg.compile(wg.grad(f, argnums), fuse=False)
        compiled["f"] = cf
        first = compiled["first"] = cg(*args)
        compare(first, grad, tight, what="wg.compile(wg.grad(f))")
        second = compiled["second"] = cg(*args)
        compare(second, grad, tight, what="wg.compile(wg.grad(f)), called again")
        # a generated program must not reuse the arrays it returned as scratch
        compare(first, grad, tight, what="wg.compile(wg.grad(f))'s first result, later")
        # buffers reused across calls (every array temporary here: pool_every_array) change
        # no bit
        identical(second, wg.compile(wg.grad(f, argnums), fuse=False, reuse_buffers=False)(
            *args), what="wg.compile(wg.grad(f)) against reuse_buffers=False")
    run("compile", compile_)

    if b is None or results["compile"][0] != "agree":
        results["compile_new"] = ("skipped", "")
    else:
        try:
            want_b = wg.grad(f, argnums)(*copies(b))
            value_b = f(*copies(b))
        except Exception:
            want_b = None
        if want_b is None:
            results["compile_new"] = ("skipped", "")
        else:
            def compile_new(args):
                args = copies(b)
                compare(compiled["f"](*args), value_b, RTOL, what="wg.compile(f), a new point")
                compare(compiled["grad"](*args), want_b, RTOL,
                        what="wg.compile(wg.grad(f)), a new point")
                for k in ("first", "second"):
                    compare(compiled[k], grad, tight,
                            what=f"wg.compile(wg.grad(f))'s {k} result, after a new point")
            run("compile_new", compile_new)

    def compile_fused(args):
        # Numba's kernels round tanh, exp... like the C library (NumPy may use SIMD
        # versions): a few ulps, amplified through the program like any round-off
        cf = wg.compile(f, fuse=True)
        compare(cf(*args), value, RTOL, what="wg.compile(f, fuse=True)")
        cg = wg.compile(wg.grad(f, argnums), fuse=True)
        first = cg(*args)
        compare(first, grad, tight, what="wg.compile(wg.grad(f), fuse=True)")
        compare(cg(*args), grad, tight, what="wg.compile(wg.grad(f), fuse=True), again")
        compare(first, grad, tight, what="the fused gradient's first result, later")
        identical(cg(*args), wg.compile(wg.grad(f, argnums), fuse=True, reuse_buffers=False)(
            *args), what="the fused gradient against reuse_buffers=False")
        for c in (cf, cg):  # a budget's back-off (graph/budget.py) is a choice, not a failure
            failed = [e for e in c.fuse_failures if "fusion backed off" not in str(e)]
            if failed:
                raise Mismatch(f"the fused program fell back to NumPy's: {failed!r}")
        if b is not None:
            try:
                want_b = wg.grad(f, argnums)(*copies(b))
            except Exception:
                return
            compare(cg(*copies(b)), want_b, RTOL, what="the fused gradient, a new point")
    if fused and fuse_available():
        run("compile_fused", compile_fused)
    else:
        results["compile_fused"] = ("skipped", "")

    def source(args):
        df = wg.source.grad(f, argnums)
        compare(df(*args), grad, tight, what="wg.source.grad")
    run("source", source, unsupported=SourceError)

    if not hessian:
        results.update((e, ("skipped", "")) for e in SECOND_ORDER)
        return results
    n = np.size(a[0])
    try:
        H_fd, H_err = fd_with_error(lambda *p: wg.grad(f)(*p), a, (0,))
    except Exception:  # reverse mode fails: reported above
        results.update((e, ("skipped", "")) for e in SECOND_ORDER)
        return results
    H_fd, H_err = H_fd[0].reshape(n, n), H_err[0].reshape(n, n)
    hess = {}

    def hessian_(args):
        H = wg.hessian(f)(*args)
        shape = np.shape(a[0])
        if np.shape(H) != shape + shape:
            raise Mismatch(f"hessian: shape {np.shape(H)}, expected {shape + shape}")
        hess["H"] = H = np.reshape(H, (n, n))
        compare(H, H_fd, FD_RTOL * 10, what="hessian against finite differences of grad",
                slack=H_err)
    run("hessian", hessian_)

    def fwd_over_rev(args):
        J = np.reshape(wg.jacobian(wg.grad(f), mode="forward")(*args), (n, n))
        if "H" in hess:
            compare(J, hess["H"], RTOL * 10, what="jacobian(grad, forward) against hessian")
        else:
            compare(J, H_fd, FD_RTOL * 10, what="jacobian(grad, forward) against differences",
                    slack=H_err)
    run("fwd_over_rev", fwd_over_rev)
    H = hess.get("H")

    def hessian_graph(args):
        want = H if H is not None else H_fd
        rtol = RTOL * 10 if H is not None else FD_RTOL * 10
        slack = None if H is not None else H_err
        g = wg.trace(f, *args)
        compare(np.reshape(g.hessian()(*args), (n, n)), want, rtol,
                what="Graph.hessian", slack=slack)
        compare(np.reshape(wg.compile(wg.hessian(f))(*args), (n, n)), want, rtol,
                what="wg.compile(wg.hessian(f))", slack=slack)
    run("hessian_graph", hessian_graph)

    def taylor(args):
        """t -> f(x + t v): c1 = grad . v, c2 = v.H.v / 2."""
        rest = args[1:]
        c = wg.taylor(lambda x: f(x, *rest), args[0], v[0], 2)
        compare(c[0], value, RTOL, what="taylor c0")
        g0 = np.asarray(_leaves(grad)[0])
        compare(c[1], float(np.sum(g0 * v[0])), tight,
                max(1.0, float(np.sum(np.abs(g0 * v[0])))), what="taylor c1 against grad . v")
        v0 = np.reshape(v[0], n)
        want = H if H is not None else H_fd
        hv = np.abs(want) * np.abs(np.outer(v0, v0))
        compare(c[2], float(v0 @ want @ v0) / 2, RTOL * 10 if H is not None else FD_RTOL * 10,
                max(1.0, float(np.sum(hv))), what="taylor c2 against v.H.v / 2")
    run("taylor", taylor)
    return results


def report(prog, a, b, results, only_bad=True):
    lines = ["program:", prog.source(), f"at {a!r}", f"second point {b!r}"]
    for engine, (outcome, msg) in results.items():
        if not only_bad or outcome in ("mismatch", "crash"):
            lines.append(f"-- {engine}: {outcome}\n{msg}")
    return "\n".join(lines)


# -- the default run: hypothesis, a few hundred programs --------------------------------------
@pytest.fixture(scope="module", autouse=True)
def pool_every_array():
    """wg.compile reuses the buffer of every array temporary here, not only of large ones
    (wengert/graph/pool.py), so that the random programs exercise it."""
    from wengert.graph import pool
    with pytest.MonkeyPatch.context() as m:
        m.setattr(pool, "POOL_MIN_SIZE", 1)
        yield


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("programs")
    yield str(d)
    for name in [m for m in sys.modules if m.startswith("wg_diff_")]:
        del sys.modules[name]


_count = itertools.count()


@settings(max_examples=int(os.environ.get("WENGERT_DIFF_EXAMPLES", "300")), derandomize=True,
          deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_engines_agree_on_random_programs(program_dir, data):
    prog = rp.generate(rp.HypothesisChooser(data))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    a, b = points(prog, rng)
    assume(a is not None)
    f = load(prog, program_dir, f"wg_diff_{next(_count)}")
    results = check_program(prog, f, a, b, hessian=data.draw(st.integers(0, HESSIAN_SHARE - 1))
                            == 0, fused=data.draw(st.integers(0, FUSED_SHARE - 1)) == 0)
    bad = [e for e, (o, _) in results.items() if o in ("mismatch", "crash")]
    assert not bad, report(prog, a, b, results)


@pytest.mark.parametrize("factor, engine", [(1.001, "reverse"), (1 + 1e-7, "forward")])
def test_the_checker_catches_a_wrong_derivative(program_dir, factor, engine):
    """A wrong reverse rule shows up: against finite differences when it is coarse, and
    against forward mode when it is off in the 7th digit (the test of the tester)."""
    @wg.primitive
    def badsin(x):
        return np.sin(x)

    @badsin.rrule
    def _(x):
        return badsin(x), lambda g: (g * wg.numpy.cos(x) * factor,)

    @badsin.frule
    def _(primals, tangents):
        return badsin(primals[0]), tangents[0] * wg.numpy.cos(primals[0])

    prog = rp.generate(rp.RandomChooser(3))
    a, b = points(prog, np.random.default_rng(0))
    f0 = load(prog, program_dir, f"wg_diff_{next(_count)}")

    def f(*args):
        return f0(*args) + np.sum(badsin(args[0]))

    class Wrapped:  # the plain value check reads f, not the generated tree
        def run(self, args):
            return f(*copies(args)), None
        source = prog.source
    res = check_program(Wrapped(), f, a, b, hessian=False)
    assert res[engine][0] == "mismatch", res[engine]
    assert res["source"][0] in ("agree", "unsupported")


# -- the long run: 10,000 programs, every outcome counted ------------------------------------
def run_many(n, directory, start=0, log=None):
    """Counts per engine and outcome over programs ``start .. start + n - 1`` (by seed), and
    the failures: ``(seed, engine, outcome, report)``."""
    counts = {e: collections.Counter() for e in ENGINES}
    failures = []
    programs = rejected = 0
    for seed in range(start, start + n):
        prog = rp.generate(rp.RandomChooser(seed))
        a, b = points(prog, np.random.default_rng(seed))
        if a is None:
            rejected += 1
            continue
        programs += 1
        name = f"wg_diff_s{seed}"
        f = load(prog, directory, name)
        try:
            results = check_program(prog, f, a, b, hessian=seed % HESSIAN_SHARE == 0,
                                    fused=seed % FUSED_SHARE == 0)
        finally:
            del sys.modules[name]
        for e, (o, msg) in results.items():
            counts[e][o] += 1
            if o in ("mismatch", "crash"):
                failures.append((seed, e, o, msg))
                if log:
                    log.write(f"== seed {seed} {e} {o}\n{report(prog, a, b, {e: (o, msg)})}\n")
                    log.flush()
    return programs, rejected, counts, failures


def table(programs, rejected, counts):
    lines = [f"{programs} programs checked ({rejected} generated but skipped: no point far "
             "enough from a kink)",
             f"{'engine':<14}" + "".join(f"{o:>13}" for o in OUTCOMES)]
    for e in ENGINES:
        lines.append(f"{e:<14}" + "".join(f"{counts[e][o]:>13}" for o in OUTCOMES))
    return "\n".join(lines)


def kinds(failures):
    """The failures grouped by engine, outcome and first line of the message (numbers
    left out), each with its count and first seed (``RandomChooser(seed)`` rebuilds it)."""
    groups = collections.Counter()
    first = {}
    for seed, e, o, msg in failures:
        line = msg.splitlines()[0] if msg else ""
        key = (e, o, re.sub(r"[-+]?\d[\d.e+-]*", "#", line)[:150])
        groups[key] += 1
        first.setdefault(key, seed)
    return "\n".join(f"{n:>6}  {e} {o} (first: seed {first[(e, o, m)]}): {m}"
                     for (e, o, m), n in groups.most_common())


@pytest.mark.slow
def test_ten_thousand_programs(tmp_path, capsys):
    n = int(os.environ.get("WENGERT_DIFF_N", "10000"))
    log_path = os.environ.get("WENGERT_DIFF_LOG")
    with open(log_path or os.devnull, "w") as log:
        programs, rejected, counts, failures = run_many(n, str(tmp_path), log=log)
    summary = table(programs, rejected, counts) + "\n" + kinds(failures)
    with capsys.disabled():
        print("\n" + summary)
    if failures:
        pytest.fail(f"{len(failures)} mismatches or crashes\n{summary}", pytrace=False)
