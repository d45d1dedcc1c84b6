"""Checkpointing: schedules (counted, not timed), wg.scan under every strategy, wg.checkpoint."""
import collections
import functools
import json
import math

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.checkpoint import Action, revolve_cost

STRATS = ("all", "ctz", "binomial", "online")


# -- schedules ----------------------------------------------------------------------------
def _floor_log2(n):
    return n.bit_length() - 1


def _ceil_log2(n):
    return (n - 1).bit_length()


def test_ctz_n16_matches_the_seed():
    s = wg.checkpoint_schedule(16, "ctz")
    stored = set()
    for a in s[:s.split]:
        if a.kind == "store":
            stored.add(a.index)
        elif a.kind == "free":
            stored.discard(a.index)
    assert sorted(stored) == [0, 8, 12, 14, 15]
    rows = s.draw().splitlines()
    assert rows[1].startswith("X . . . . . . . X . . . X . X X")
    # to get 7, recompute from 0 keeping 4 and 6 (the seed's picture)
    assert rows[10].startswith("X + + + X + X ^")
    rev = s[s.split:]
    i7 = rev.index(Action("reverse", 7))
    assert rev[i7 - 7:i7] == [Action("restore", 0), Action("advance", 0, 4), Action("store", 4),
                              Action("advance", 4, 6), Action("store", 6),
                              Action("advance", 6, 7), Action("store", 7)]


@pytest.mark.parametrize("n", list(range(1, 260)) + [511, 512, 513, 1000, 1023, 1024, 1025])
def test_ctz_bounds(n):
    st = wg.checkpoint_schedule(n, "ctz").stats()
    assert st["max_stored"] <= _floor_log2(n) + 1
    assert max(st["recomputed"]) <= _ceil_log2(n)
    if n > 1:  # even counting the taped evaluation in the reverse action
        assert max(st["recomputed"]) + 1 <= _ceil_log2(n)
    assert st["reversed"] == n


def test_ctz_forward_is_online():
    # the forward phase for N steps is a prefix of that for any longer loop:
    # it can run before the number of steps is known (while-style loops)
    long = wg.checkpoint_schedule(300, "ctz")
    for n in (1, 2, 5, 16, 17, 100, 299):
        s = wg.checkpoint_schedule(n, "ctz")
        assert list(s[:s.split]) == list(long[:len(s[:s.split])])


def _recursion_table(nmax, smax):
    t = [[0] * (smax + 1) for _ in range(nmax + 1)]
    for s in range(smax + 1):
        for n in range(2, nmax + 1):
            if s == 0:
                t[n][s] = n * (n - 1) // 2
            else:
                t[n][s] = min(m + t[n - m][s - 1] + t[m][s] for m in range(1, n))
    return t


def test_binomial_is_optimal_for_all_n_up_to_300_and_s_up_to_10():
    t = _recursion_table(300, 10)
    for s in range(11):
        for n in range(1, 301):
            assert revolve_cost(n, s) == t[n][s], (n, s)
            st = wg.checkpoint_schedule(n, "binomial", snapshots=s).stats()
            assert st["advanced"] == t[n][s], (n, s)
            assert st["max_snapshots"] <= s, (n, s)
            assert st["reversed"] == n


def test_binomial_closed_form_beta():
    # with r repetitions and s snapshots besides state 0, beta(s+1, r) steps cost r*n - C(s+1+r, r-1)
    for s in range(1, 6):
        for r in range(1, 6):
            n = math.comb(s + 1 + r, r)
            assert revolve_cost(n, s) == r * n - math.comb(s + 1 + r, r - 1)
    assert revolve_cost(10000, 20) == 37700


def test_online_schedule():
    # dynamic checkpointing (Wang, Moin & Iaccarino 2009): decided without knowing N
    long = wg.checkpoint_schedule(300, "online", 4)
    for n in (1, 2, 5, 17, 100, 299):
        s = wg.checkpoint_schedule(n, "online", 4)
        assert list(s[:s.split]) == list(long[:s.split])
    worst = 0.0
    for s in range(0, 11):
        for n in range(1, 301, 7):
            st = wg.checkpoint_schedule(n, "online", s).stats()
            assert st["max_snapshots"] <= s and st["reversed"] == n
            assert st["advanced"] >= revolve_cost(n, s)
            if s >= 3:
                worst = max(worst, st["advanced"] / max(1, revolve_cost(n, s)))
    assert worst < 1.6  # measured: within 1.56x of the offline optimum for s >= 3, n <= 300
    st = wg.checkpoint_schedule(10_000, "online", 20).stats()
    assert st["advanced"] <= 1.02 * revolve_cost(10_000, 20) and max(st["recomputed"]) <= 3


def test_all_and_invert_schedules():
    st = wg.checkpoint_schedule(10, "all").stats()
    assert st["advanced"] == 9 and st["max_stored"] == 10 and max(st["recomputed"]) == 0
    st = wg.checkpoint_schedule(10, "invert").stats()
    assert st["advanced"] == 9 and st["max_stored"] == 0 and st["inverted"] == 9
    assert wg.checkpoint_schedule(1, "binomial", 0).stats()["advanced"] == 0


def test_schedule_is_json_friendly():
    s = wg.checkpoint_schedule(9, "binomial", snapshots=2)
    d = json.loads(json.dumps(s.to_dict()))
    assert d["strategy"] == "binomial" and d["snapshots"] == 2 and d["length"] == 9
    assert d["actions"][0] == {"kind": "store", "index": 0}
    assert {"kind": "advance", "start": 0, "stop": s[1].stop} == d["actions"][1]
    assert all(a.kind in ("advance", "store", "restore", "reverse", "free") for a in s)
    assert repr(Action("advance", 0, 3)) == "Action('advance', 0, 3)"


def test_schedule_errors():
    with pytest.raises(ValueError, match="unknown checkpoint strategy"):
        wg.checkpoint_schedule(4, "sometimes")
    with pytest.raises(ValueError, match="length"):
        wg.checkpoint_schedule(0, "ctz")


# -- scan: gradients equal across strategies ----------------------------------------------
def _counted(step):
    calls = [0]

    @functools.wraps(step)
    def counted(c, x):
        calls[0] += 1
        return step(c, x)
    return counted, calls


def _grads_all_strategies(loss, *args, argnums=0, snapshots=2):
    out = {}
    for how in STRATS:
        out[how] = wg.grad(lambda *a: loss(*a, how=how, snapshots=snapshots), argnums)(*args)
    return out


def _assert_tree_close(a, b, rtol=1e-10, atol=1e-12):
    from wengert.tree import flatten
    la, da = flatten(a)
    lb, db = flatten(b)
    assert da == db
    for x, y in zip(la, lb):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_scalar_carry_with_xs_and_ys():
    xs = np.linspace(0.1, 2.0, 11)

    def loss(c0, how, snapshots):
        step = lambda c, x: (c + 0.1 * wnp.sin(c * x), c * c)
        c, ys = wg.scan(step, c0, xs, checkpoint=how, snapshots=snapshots)
        return c + wnp.sum(ys * xs)

    def unrolled(c0):
        c, tot = c0, 0.0
        for x in xs:
            c, y = c + 0.1 * wnp.sin(c * x), c * c
            tot = tot + y * x
        return c + tot

    ref = wg.grad(unrolled)(0.4)
    for how, g in _grads_all_strategies(loss, 0.4).items():
        assert abs(g - ref) < 1e-12, how
    assert wg.scan(lambda c, x: (c + x, None), 0.0, xs)[1] is None


def test_array_carry_without_xs():
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(5)

    def loss(x0, how, snapshots):
        c, ys = wg.scan(lambda c, _: (c + 0.1 * wnp.tanh(c * c), None), x0, length=13,
                        checkpoint=how, snapshots=snapshots)
        assert ys is None
        return wnp.sum(c * c)

    gs = _grads_all_strategies(loss, x0)
    for how in STRATS:
        _assert_tree_close(gs[how], gs["all"])
    np.testing.assert_allclose(gs["all"], wg.jacobian(lambda x: loss(x, "all", None),
                                                      mode="forward")(x0), rtol=1e-12)


Pair = collections.namedtuple("Pair", "h s")


def test_pytree_carry_xs_and_ys():
    rng = np.random.default_rng(2)
    init = {"h": rng.standard_normal(3), "p": Pair(0.5, rng.standard_normal(2))}
    xs = (rng.standard_normal((6, 3)), {"b": rng.standard_normal(6)})

    def step(c, x):
        a, d = x
        h = c["h"] + 0.2 * wnp.sin(c["h"] * a + d["b"])
        p = Pair(c["p"].h * 0.9 + wnp.sum(h) * 0.1, c["p"].s * wnp.cos(d["b"]))
        return {"h": h, "p": p}, (wnp.sum(h * h), [h * 2.0])

    def loss(init, xs, how, snapshots):
        c, (y1, [y2]) = wg.scan(step, init, xs, checkpoint=how, snapshots=snapshots)
        return wnp.sum(c["h"]) + c["p"].h * 3.0 + wnp.sum(c["p"].s) + wnp.sum(y1) \
            + wnp.sum(wnp.sin(y2))

    gs = _grads_all_strategies(loss, init, xs, argnums=(0, 1))
    for how in STRATS:
        _assert_tree_close(gs[how], gs["all"])
    wg.check_grad(lambda i, x: loss(i, x, "ctz", None), init, xs, modes=("reverse",))
    wg.check_grad(lambda i, x: loss(i, x, "binomial", 1), init, xs, modes=("forward", "reverse"))


def test_closure_over_a_weight_matrix():
    rng = np.random.default_rng(3)
    n = 6
    W = rng.standard_normal((n, n)) / n
    b = rng.standard_normal(n)
    x0 = rng.standard_normal(n)
    xs = rng.standard_normal((9, n))

    def loss(W, b, how, snapshots):
        def step(x, u):
            x = x + 0.1 * wnp.tanh(W @ x + b * u)
            return x, wnp.sum(W @ u)
        x, ys = wg.scan(step, x0, xs, checkpoint=how, snapshots=snapshots)
        return wnp.sum(x * x) + wnp.sum(ys)

    def unrolled(W, b):
        x, tot = x0, 0.0
        for u in xs:
            x = x + 0.1 * wnp.tanh(W @ x + b * u)
            tot = tot + wnp.sum(W @ u)
        return wnp.sum(x * x) + tot

    ref = wg.grad(unrolled, (0, 1))(W, b)
    for how, g in _grads_all_strategies(loss, W, b, argnums=(0, 1)).items():
        _assert_tree_close(g, ref, rtol=1e-10, atol=1e-13)


def test_closure_over_the_initial_carry_and_a_captured_output():
    # step reads a differentiated value that is also init, and returns a captured Var as y
    def loss(a, how, snapshots):
        c, ys = wg.scan(lambda c, x: (c * a + x, a), a, np.arange(4.0), checkpoint=how,
                        snapshots=snapshots)
        return c + wnp.sum(ys * ys)

    def unrolled(a):
        c = a
        for x in range(4):
            c = c * a + x
        return c + 4 * a * a

    for how, g in _grads_all_strategies(loss, 0.7).items():
        assert abs(g - wg.grad(unrolled)(0.7)) < 1e-12, how


def _reversible_step(c, x):
    # additive coupling: exactly invertible in exact arithmetic
    a, b = c
    a = a + wnp.sin(b) * x
    b = b + wnp.tanh(a)
    return (a, b), a * b


def _reversible_inverse(c, x):
    a, b = c
    b = b - wnp.tanh(a)
    a = a - wnp.sin(b) * x
    return (a, b)


def test_invert_strategy():
    rng = np.random.default_rng(4)
    init = (rng.standard_normal(3), rng.standard_normal(3))
    xs = rng.standard_normal((20, 3)) * 0.3
    inv_calls = [0]

    def inverse(c, x):
        inv_calls[0] += 1
        return _reversible_inverse(c, x)

    def loss(init, xs, how):
        (a, b), ys = wg.scan(_reversible_step, init, xs, checkpoint=how, inverse=inverse)
        return wnp.sum(a * b) + wnp.sum(ys)

    ref = wg.grad(lambda i, x: loss(i, x, "all"), (0, 1))(init, xs)
    got = wg.grad(lambda i, x: loss(i, x, "invert"), (0, 1))(init, xs)
    _assert_tree_close(got, ref, rtol=1e-8, atol=1e-10)  # states rebuilt: round-off
    assert inv_calls[0] == 19
    with pytest.raises(ValueError, match="inverse"):
        wg.scan(_reversible_step, init, xs, checkpoint="invert")


# -- counting: the reverse pass executes the schedule ---------------------------------------
@pytest.mark.parametrize("how,snapshots", [("all", None), ("ctz", None), ("binomial", 1),
                                           ("binomial", 3), ("binomial", 0), ("online", 2),
                                           ("online", 0)])
@pytest.mark.parametrize("n", [1, 2, 7, 16, 33])
def test_step_calls_follow_the_schedule(how, snapshots, n):
    step, calls = _counted(lambda c, x: (c * wnp.cos(x) + 0.1 * wnp.sin(c), c))
    xs = np.linspace(0.0, 1.0, n)

    def loss(c0):
        c, ys = wg.scan(step, c0, xs, checkpoint=how, snapshots=snapshots)
        return c + wnp.sum(ys)

    wg.grad(loss)(0.3)
    st = wg.checkpoint_schedule(n, how, snapshots).stats()
    # primal: forward-phase advances + the last step; pullback: reverse-phase advances
    # + one taped step per reverse action.  "all" keeps each step's sub-tape from the
    # forward sweep instead: every step runs once.
    assert calls[0] == (n if how == "all" else st["advanced"] + 1 + n)
    calls[0] = 0
    loss(0.3)  # no transform: just the loop
    assert calls[0] == n


def test_all_runs_each_step_once_and_a_second_pullback_recomputes():
    # "all" records each step on a sub-tape in the forward sweep and sweeps those tapes:
    # 2n step calls before (an untaped forward, a taped recomputation), n now
    rng = np.random.default_rng(7)
    W, b = rng.standard_normal((3, 3)) * 0.5, rng.standard_normal(3)
    xs = {"u": rng.standard_normal((9, 3)), "s": np.linspace(0.5, 1.5, 9)}

    def body(c, x):
        h, k = c
        h = wnp.tanh(W @ h * x["s"] + x["u"] + b)
        return (h, k + wnp.sum(h * h)), h[0] * k

    step, calls = _counted(body)

    def loss(W_, b_, xs_, h0, how, snapshots=None):
        nonlocal W, b
        W, b = W_, b_
        (h, k), ys = wg.scan(step, (h0, 0.5), xs_, checkpoint=how, snapshots=snapshots)
        return wnp.sum(h) * k + wnp.sum(ys * ys)

    args = (W, b, xs, rng.standard_normal(3))
    argnums = (0, 1, 2, 3)
    g = wg.grad(loss, argnums)(*args, "all")
    assert calls[0] == 9
    calls[0] = 0
    # "binomial" with a snapshot per state stores what "all" stored before and tapes
    # each step in the pullback
    ref = wg.grad(loss, argnums)(*args, "binomial", 9)
    assert calls[0] == 18
    _assert_tree_close(g, ref, rtol=1e-13, atol=1e-15)
    out, pb = wg.vjp(lambda *a: loss(*a, "all"), *args)
    calls[0] = 0
    _assert_tree_close(pb(1.0), ref, rtol=1e-13, atol=1e-15)
    assert calls[0] == 0  # the kept sub-tapes
    _assert_tree_close(pb(1.0), ref, rtol=1e-13, atol=1e-15)
    assert calls[0] == 8 + 9  # swept once: the forward phase (states 1..8) again, 9 taped


def test_all_while_loop_runs_each_step_once():
    from wengert.checkpoint import while_loop
    body, calls = _counted(lambda c, _: ((c[0] * wnp.cos(c[1]), c[1] / 2), None))

    def f(a, how):
        return while_loop(lambda c: c[1] > 0.01, lambda c: body(c, None)[0], (a, a),
                          checkpoint=how)[0]
    g = wg.grad(f)(1.0, "all")
    assert calls[0] == 7
    assert abs(g - wg.grad(f)(1.0, "ctz")) < 1e-14
    assert wg.grad(f)(1.0, "all") == g


@pytest.mark.parametrize("how", ["all", "ctz"])
def test_higher_order_through_an_all_scan(how):
    # forward over reverse and reverse over reverse through the kept sub-tapes
    xs = np.linspace(0.1, 1.0, 6)

    def f(w, how=how):
        c, ys = wg.scan(lambda c, x: (wnp.sin(c * w) + x * c, c * c), w, xs, checkpoint=how)
        return c + wnp.sum(ys)

    def unrolled(w):
        c, tot = w, 0.0
        for x in xs:
            tot = tot + c * c
            c = wnp.sin(c * w) + x * c
        return c + tot
    for w in (0.3, 0.8):
        assert abs(wg.hessian(f)(w) - wg.hessian(unrolled)(w)) < 1e-11
        assert abs(wg.grad(wg.grad(f))(w) - wg.grad(wg.grad(unrolled))(w)) < 1e-11
        wg.check_grad(f, w, order=2)


def test_binomial_calls_are_optimal():
    step, calls = _counted(lambda c, x: (wnp.sin(c) + x, None))
    n, s = 40, 3
    wg.grad(lambda c: wg.scan(step, c, np.ones(n) * 0.1, checkpoint="binomial",
                              snapshots=s)[0])(0.2)
    assert calls[0] == revolve_cost(n, s) + n + 1
    t = _recursion_table(n, s)
    assert revolve_cost(n, s) == t[n][s]


def test_ctz_holds_few_states_while_running():
    # count live states: each state is a fresh array; count the ones alive at each step
    import weakref
    live = weakref.WeakSet()
    peak = [0]

    class State(np.ndarray):
        __hash__ = object.__hash__

    def step(c, x):
        out = (c + 0.01 * wnp.sin(c)).view(State) if not isinstance(c, wg.Var) \
            else c + 0.01 * wnp.sin(c)
        if isinstance(out, State):
            live.add(out)
            peak[0] = max(peak[0], len(live))
        return out, None

    n = 64
    wg.grad(lambda c: wnp.sum(wg.scan(step, c, length=n, checkpoint="ctz")[0]))(np.ones(3))
    # stored states + the current one + the one being produced
    assert peak[0] <= _floor_log2(n) + 1 + 2
    # "all" records each step on a sub-tape it keeps: the states are Vars' values there
    refs = []

    def step_all(c, x):
        out = c + 0.01 * wnp.sin(c)
        refs.append(weakref.ref(out.value))
        peak[0] = max(peak[0], sum(r() is not None for r in refs))
        return out, None
    peak[0] = 0
    wg.grad(lambda c: wnp.sum(wg.scan(step_all, c, length=n, checkpoint="all")[0]))(np.ones(3))
    assert peak[0] == n


def test_vjp_pullback_called_twice():
    xs = np.linspace(0, 1, 10)
    u = np.cos(np.arange(10.0))
    step, calls = _counted(lambda c, x: (c + wnp.sin(c) * x, c))
    for how in ("all", "ctz", "binomial", "online"):
        out, pb = wg.vjp(lambda c: wg.scan(step, c, xs, checkpoint=how, snapshots=2)[1], 0.5)
        first = pb(u)[0]
        calls[0] = 0
        assert np.allclose(pb(u)[0], first, rtol=1e-12)
        # the second call first rebuilds the forward phase's snapshots
        st = wg.checkpoint_schedule(10, how, 2).stats()
        assert calls[0] == st["advanced"] + 10
    out, pb = wg.vjp(lambda c: wg.scan(_reversible_step, (c, c), xs, checkpoint="invert",
                                       inverse=_reversible_inverse)[1], 0.5)
    assert np.allclose(pb(u)[0], pb(u)[0], rtol=1e-12)


# -- forward mode and higher order ---------------------------------------------------------
def test_forward_mode_through_scan():
    xs = np.linspace(0.1, 1.0, 8)

    def f(a, how="ctz"):
        c, ys = wg.scan(lambda c, x: (c * wnp.sin(a * x) + a, c * a), 0.5, xs, checkpoint=how)
        return c + wnp.sum(ys)

    d = wg.derivative(f)(0.8)
    for how in STRATS:
        assert abs(d - wg.grad(lambda a: f(a, how))(0.8)) < 1e-12
    _, t = wg.jvp(f, (0.8,), (1.0,))
    assert abs(t - d) < 1e-12


@pytest.mark.parametrize("how", STRATS)
def test_higher_order(how):
    xs = np.array([0.1, 0.2, 0.3, 0.4])

    def f(a):
        c, ys = wg.scan(lambda c, x: (c * wnp.sin(a * c) + x, c * c), 0.5, xs, checkpoint=how,
                        snapshots=1)
        return c + wnp.sum(ys)

    d2 = wg.derivative(f, 2)(0.7)
    assert abs(wg.grad(wg.grad(f))(0.7) - d2) < 1e-10
    assert abs(wg.hessian(f)(0.7) - d2) < 1e-10
    assert abs(wg.derivative(wg.grad(f))(0.7) - d2) < 1e-10


def test_batched_jacobian_through_scan():
    rng = np.random.default_rng(5)
    w, x0, xs = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal((7, 4))

    def f(w):
        return wg.scan(lambda c, x: (c + 0.1 * wnp.tanh(w * c + x), c * w), x0, xs,
                       checkpoint="ctz")[1]

    jr = wg.jacobian(f, mode="reverse")(w)
    jf = wg.jacobian(f, mode="forward")(w)
    assert jr.shape == (7, 4, 4)
    np.testing.assert_allclose(jr, jf, rtol=1e-12, atol=1e-14)


def test_float32_is_kept():
    x0 = np.ones(3, np.float32)
    g = wg.grad(lambda x: wnp.sum(wg.scan(lambda c, _: (c * 0.5 + wnp.sin(c), None), x,
                                          length=5, checkpoint="ctz")[0]))(x0)
    assert g.dtype == np.float32


def test_nested_scans_and_a_closure():
    w = np.array([0.3, -0.2])

    def loss(w, how):
        def inner(c, x):
            return c + 0.1 * wnp.sin(w * c + x), None

        def outer(c, x):
            c2, _ = wg.scan(inner, c, np.full((3, 2), x), checkpoint=how)
            return c2 * 0.9, wnp.sum(c2)
        c, ys = wg.scan(outer, np.ones(2), np.linspace(0, 1, 5), checkpoint=how)
        return wnp.sum(c) + wnp.sum(ys)

    ref = wg.grad(lambda w: loss(w, "all"))(w)
    for how in ("ctz", "binomial"):
        np.testing.assert_allclose(wg.grad(lambda w: loss(w, how))(w), ref, rtol=1e-12)
    wg.check_grad(lambda w: loss(w, "ctz"), w)


def test_scan_errors():
    with pytest.raises(ValueError, match="xs or length"):
        wg.scan(lambda c, x: (c, None), 0.0)
    with pytest.raises(ValueError, match="structure"):
        wg.grad(lambda c: wg.scan(lambda c, x: ((c, c), None), c, length=3)[0][0])(1.0)
    with pytest.raises(ValueError, match="pair"):
        wg.scan(lambda c, x: c, 0.0, length=2)
    assert wg.scan(lambda c, x: (c + x, None), 1.0, np.zeros((0,)))[0] == 1.0


# -- checkpoint(f) -------------------------------------------------------------------------
def test_checkpoint_same_gradient_and_recomputes():
    calls = [0]

    def block(x, y):
        calls[0] += 1
        return wnp.sin(x * y) * wnp.exp(x), x + y

    f_ck = lambda x, y: (wnp.sum(wg.checkpoint(block)(x, y)[0] * 2.0)
                         + wnp.sum(wg.checkpoint(block)(x, y)[1]))
    f = lambda x, y: wnp.sum(block(x, y)[0] * 2.0) + wnp.sum(block(x, y)[1])
    x, y = np.array([0.2, 0.5]), 1.3
    calls[0] = 0
    g = wg.grad(f_ck, (0, 1))(x, y)
    assert calls[0] == 4  # two calls, each run forward and again in the reverse sweep
    _assert_tree_close(g, wg.grad(f, (0, 1))(x, y))
    calls[0] = 0
    v = f_ck(x, y)
    assert calls[0] == 2  # no transform: plain calls
    assert np.allclose(v, f(x, y))


def test_nested_checkpoints_and_closure():
    calls = collections.Counter()
    W = np.array([[0.5, -0.3], [0.2, 0.8]])

    def inner(x):
        calls["inner"] += 1
        return wnp.tanh(W_cur[0] @ x)

    def outer(x):
        calls["outer"] += 1
        return wg.checkpoint(inner)(x) * 2.0 + wg.checkpoint(inner)(x * 0.5)

    W_cur = [W]

    def loss(W, ck):
        W_cur[0] = W
        return wnp.sum((wg.checkpoint(outer) if ck else outer)(np.array([1.0, -2.0])))

    calls.clear()
    g = wg.grad(lambda W: loss(W, True))(W)
    # outer: forward, and again in the sweep; inner: twice in outer's forward, twice when
    # outer is re-run on its sub-tape, twice more for their own reverse sweeps
    assert calls["outer"] == 2 and calls["inner"] == 6
    np.testing.assert_allclose(g, wg.grad(lambda W: loss(W, False))(W), rtol=1e-12)


def test_checkpoint_higher_order_and_forward():
    f = wg.checkpoint(lambda x: wnp.sin(x) * x * x)
    g2 = wg.grad(wg.grad(f))(0.9)
    assert abs(g2 - wg.derivative(lambda x: wnp.sin(x) * x * x, 2)(0.9)) < 1e-12
    assert abs(wg.derivative(f)(0.9) - wg.grad(f)(0.9)) < 1e-12
    wg.check_grad(f, 0.9, order=2)


def test_checkpoint_inside_scan_step():
    calls = [0]

    def cell(c, x):
        calls[0] += 1
        return wnp.sin(c) + x

    def loss(c0, ck):
        body = wg.checkpoint(cell) if ck else cell
        return wg.scan(lambda c, x: (body(c, x), None), c0, np.ones(5) * 0.1,
                       checkpoint="ctz")[0]

    assert abs(wg.grad(lambda c: loss(c, True))(0.3) - wg.grad(lambda c: loss(c, False))(0.3)) \
        < 1e-13


@pytest.mark.parametrize("n", [5, 16, 37, 64])
def test_ctz_calls_per_step(n):
    per_step = collections.Counter()

    def step(c, x):
        per_step[int(x)] += 1
        return c * 0.99 + wnp.sin(c) * 0.01, None

    wg.grad(lambda c: wg.scan(step, c, np.arange(n), checkpoint="ctz")[0])(0.3)
    # primal pass once, reverse phase at most ceil(log2 N) times including the taped run
    assert max(per_step.values()) <= 1 + _ceil_log2(n)
    st = wg.checkpoint_schedule(n, "ctz").stats()
    for k in range(n):
        assert per_step[k] == 1 + st["recomputed"][k] + 1


def test_scan_under_compile():  # one node running the schedule: tests/test_compiled_scan.py
    def f(x):
        c, ys = wg.scan(lambda c, u: (c * wnp.sin(c) + u, c * c), x, np.arange(3.0),
                        checkpoint="ctz")
        return wnp.sum(ys) + c

    assert abs(wg.compile(f)(0.5) - f(0.5)) < 1e-14
    assert abs(wg.compile(wg.grad(f))(0.5) - wg.grad(f)(0.5)) < 1e-14


def test_jvp_with_pytree_carry():
    init = {"a": np.array([0.1, 0.2]), "b": 0.5}
    t_init = {"a": np.array([1.0, 0.0]), "b": 1.0}

    def f(init):
        c, ys = wg.scan(lambda c, x: ({"a": c["a"] * wnp.cos(c["b"] + x), "b": c["b"] * 0.9},
                                      wnp.sum(c["a"])), init, np.linspace(0, 1, 6),
                        checkpoint="binomial", snapshots=1)
        return wnp.sum(c["a"]) + c["b"] + wnp.sum(ys)

    _, t = wg.jvp(f, (init,), (t_init,))
    g = wg.grad(f)(init)
    assert abs(t - (np.dot(g["a"], t_init["a"]) + g["b"] * t_init["b"])) < 1e-12


# -- while_loop: the number of steps is found by running ------------------------------------
def test_while_loop_strategies_and_counts():
    from wengert.checkpoint import while_loop
    calls = [0]

    def body(c):
        calls[0] += 1
        a, b, k = c
        a = a + wnp.sin(b) * 0.3
        b = b + wnp.tanh(a) * 0.5
        return a, b, k + 1

    def inverse(c, _):
        a, b, k = c
        b = b - wnp.tanh(a) * 0.5
        a = a - wnp.sin(b) * 0.3
        return a, b, k - 1

    def loss(a0, how):
        a, b, k = while_loop(lambda c: c[2] < 23, body, (a0, np.array([0.1, 0.2]), 0),
                             checkpoint=how, inverse=inverse, snapshots=3)
        assert k == 23
        return wnp.sum(a * b)

    a0 = np.array([0.3, -0.4])
    ref = wg.grad(lambda a: loss(a, "all"))(a0)
    for how in ("ctz", "invert", "online"):
        calls[0] = 0
        g = wg.grad(lambda a: loss(a, how))(a0)
        np.testing.assert_allclose(g, ref, rtol=1e-10)
        st = wg.checkpoint_schedule(23, how, 3 if how == "online" else None).stats()
        assert calls[0] == st["advanced"] + 1 + 23
    np.testing.assert_allclose(wg.jacobian(lambda a: loss(a, "ctz"), mode="forward")(a0), ref,
                               rtol=1e-12)
    assert while_loop(lambda c: c < 0.0, lambda c: c + 1.0, 2.0) == 2.0
    assert wg.grad(lambda x: while_loop(lambda c: c < 0.0, lambda c: c * 3.0, x))(2.0) == 1.0
    with pytest.raises(ValueError, match="binomial"):
        while_loop(lambda c: False, lambda c: c, 1.0, checkpoint="binomial")


# -- escaped tracers: the sub-tapes of a reverse sweep die with it -----------------------------
def _escape_checks(leak, name):
    tracers = [t for t in leak if isinstance(t, wg.core.Tracer)]
    assert tracers  # the reverse sweep ran the function again on a sub-tape
    for t in tracers:
        for use in (lambda t: t * 2.0, np.sin, lambda t: wg.grad(lambda y: wnp.sum(t * y))(1.0),
                    lambda t: wg.grad(lambda y: y)(t)):
            with pytest.raises(wg.EscapedTracerError, match=rf"made by {name}, which has"):
                use(t)
        assert not isinstance(t.value, wg.core.Tracer)  # the value is still readable


def test_escaped_tracers_of_checkpoint_and_scan():
    from wengert.checkpoint import while_loop
    x = np.array([0.5, 1.0, 1.5])

    def block(v):
        leak.append(v * 2.0)
        return wnp.sin(v)

    leak = []
    wg.grad(lambda v: wnp.sum(wg.checkpoint(block)(v)))(x)
    _escape_checks(leak, r"wg\.checkpoint\(block\)")
    leak = []
    wg.vjp(lambda v: wg.checkpoint(block)(v), x)[1](np.ones(3))  # a pullback called later
    _escape_checks(leak, r"wg\.checkpoint\(block\)")

    def step(c, xi):
        leak.append(c * 2.0)
        return c * wnp.cos(xi), None

    for how in ("all", "ctz", "binomial"):
        leak = []
        wg.grad(lambda v: wg.scan(step, 0.5, v, checkpoint=how)[0])(x)
        _escape_checks(leak, r"wg\.scan\(step\)")

    def body(c):
        return step(c[0], c[1])[0], c[1] / 2

    leak = []
    wg.grad(lambda a: while_loop(lambda c: c[1] > 0.1, body, (a, a))[0])(1.0)
    _escape_checks(leak, r"while_loop\(body\)")


@pytest.mark.parametrize("how", ["all", "ctz", "binomial", "online", "ctz-revolve"])
def test_reverse_over_reverse_through_a_scan_in_a_closed_over_value(how):
    # the inner gradient's pullback re-runs the step on a sub-tape; the outer derivative's
    # value w, closed over by the step, reached that sub-tape and was refused as "a Var of
    # another tape at the same level" (it is a lower level's: a constant there)
    def f(x, w, scanned=True):
        def step(c, _):
            return wnp.sin(c * w) + c, None
        if scanned:
            return wnp.sum(wg.scan(step, x, None, length=5, checkpoint=how,
                                   snapshots=2)[0])
        for _ in range(5):
            x, _ = step(x, None)
        return wnp.sum(x)

    x, w = np.array([0.3, 0.7]), 1.3

    def mixed(scanned):
        return wg.grad(lambda x, w: wnp.sum(wg.grad(f, 0)(x, w, scanned)), 1)(x, w)

    def both(scanned):
        return wg.grad(lambda x, w: wnp.sum(wg.grad(f, 1)(x, w, scanned)), 0)(x, w)

    h = 1e-6
    fd = (np.sum(wg.grad(f, 0)(x, w + h)) - np.sum(wg.grad(f, 0)(x, w - h))) / (2 * h)
    assert np.allclose(mixed(True), mixed(False), rtol=1e-12, atol=0)
    assert np.allclose(mixed(True), fd, rtol=1e-6)
    assert np.allclose(both(True), both(False), rtol=1e-12, atol=0)
    hess = wg.hessian(lambda w: f(x, w))(w)
    assert np.allclose(hess, wg.hessian(lambda w: f(x, w, False))(w), rtol=1e-12)


@pytest.mark.parametrize("how", ["all", "ctz", "online"])
def test_reverse_over_reverse_through_a_while_loop_in_a_closed_over_value(how):
    from wengert.checkpoint import while_loop

    def f(x, w):
        return wnp.sum(while_loop(lambda s: s[1] < 4,
                                  lambda s: (wnp.sin(s[0] * w) + s[0], s[1] + 1), (x, 0),
                                  checkpoint=how, snapshots=2)[0])

    def unrolled(x, w):
        for _ in range(4):
            x = wnp.sin(x * w) + x
        return wnp.sum(x)

    x, w = np.array([0.3, 0.7]), 1.3
    mixed = [wg.grad(lambda x, w: wnp.sum(wg.grad(g, 0)(x, w)), 1)(x, w) for g in (f, unrolled)]
    assert np.allclose(mixed[0], mixed[1], rtol=1e-12, atol=0)


@pytest.mark.parametrize("strategy", ["all", "ctz"])
def test_gradient_of_a_jvp_through_a_scan(strategy):
    """grad of jvp: the step's carry is a Dual holding Vars of the step's sub-tape; "all"
    (which keeps each step's tape) hands such a loop to the schedule's path, where those
    Vars never outlive their step (it raised EscapedTracerError)."""
    def f(k):
        def step(y, _):
            return y - 0.1 * k * y ** 3, None
        return wg.scan(step, 1.0, None, length=6, checkpoint=strategy)[0]

    def unrolled(k):
        y = 1.0
        for _ in range(6):
            y = y - 0.1 * k * y ** 3
        return y
    second = wg.grad(lambda k: wg.jvp(f, (k,), (1.0,))[1])(0.7)
    assert second == pytest.approx(wg.grad(wg.grad(unrolled))(0.7), rel=1e-12)
    from wengert.checkpoint import while_loop

    def g(k):
        return while_loop(lambda c: c[1] < 6, lambda c: (c[0] - 0.1 * k * c[0] ** 3, c[1] + 1),
                          (1.0, 0), checkpoint=strategy)[0]
    assert wg.grad(lambda k: wg.jvp(g, (k,), (1.0,))[1])(0.7) == pytest.approx(second, rel=1e-12)
