"""Tests generated from the rule registry: every elementwise primitive, both modes.

Each primitive carries its sampling domain; one parametrised test runs
``check_grad`` in forward and reverse mode, second order where smooth, over
scalar, vector, matrix and broadcast shapes, float64 and float32.
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.rules import arithmetic
from wengert.rules.elementwise import REGISTRY

ARITHMETIC = {
    "add": (arithmetic.add, (-2.0, 2.0)),
    "subtract": (arithmetic.subtract, (-2.0, 2.0)),
    "multiply": (arithmetic.multiply, (-2.0, 2.0)),
    "divide": (arithmetic.divide, (0.3, 2.0)),
    "power": (arithmetic.power, (0.3, 2.0)),
    "negative": (arithmetic.negative, (-2.0, 2.0)),
    "absolute": (arithmetic.absolute, (0.2, 2.0)),
    "positive": (arithmetic.positive, (-2.0, 2.0)),
    "remainder": (arithmetic.remainder, (0.3, 0.9)),
}
PRIMS = {name: (p, p.domain) for name, p in REGISTRY.items()}
PRIMS.update(ARITHMETIC)
NONDIFF = {name for name, p in REGISTRY.items() if getattr(p, "nondiff", False)} | {"floor_divide"}
PIECEWISE = {"maximum", "minimum", "fmax", "fmin", "clip", "absolute", "fabs", "copysign",
             "remainder", "fmod"}


def _arity(name, p):
    if name == "where":
        return 3
    if name == "clip":
        return 3
    if p.nargs is not None:
        return p.nargs
    return p.impl.nin


def _sample(rng, domain, shape, dtype=np.float64):
    lo, hi = domain
    if shape == ():
        return float(rng.uniform(lo, hi))
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _make(name, p, rng, shapes, dtype=np.float64):
    """A function of the differentiable arguments and the sample arguments."""
    domain = PRIMS[name][1] or (-2.0, 2.0)
    if name == "where":
        cond = rng.uniform(size=shapes[0]) > 0.5 if shapes[0] != () else True
        args = [_sample(rng, domain, s, dtype) for s in shapes[1:]]
        return (lambda x, y: p(cond, x, y)), args
    if name == "clip":
        x = _sample(rng, (-2.0, 2.0), shapes[0], dtype)
        lo = _sample(rng, (-1.5, -0.5), shapes[1], dtype)
        hi = _sample(rng, (0.5, 1.5), shapes[2], dtype)
        return p, [x, lo, hi]
    if name in ("remainder", "fmod"):  # x / y in (2, 3): away from the jumps
        return p, [_sample(rng, (2.1, 2.9), shapes[0], dtype), _sample(rng, (1.0, 1.0), shapes[1],
                                                                          dtype)]
    if name == "ldexp":  # an integer exponent, not differentiated
        n = rng.integers(-3, 4, size=shapes[1]) if shapes[1] != () else 2
        return (lambda x: p(x, n)), [_sample(rng, domain, shapes[0], dtype)]
    if name in ("maximum", "minimum", "fmax", "fmin"):  # keep away from ties
        a = _sample(rng, (-2.0, 2.0), shapes[0], dtype)
        b = _sample(rng, (-2.0, 2.0), shapes[1], dtype)
        return p, [a, b]
    return p, [_sample(rng, domain, s, dtype) for s in shapes]


SHAPES = {
    1: [((),), ((3,),), ((2, 3),)],
    2: [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 2))],
    3: [((), (), ()), ((3,), (3,), (3,)), ((2, 3), (3,), (2, 1))],
}

CASES = [(name, shapes) for name, (p, _) in sorted(PRIMS.items())
         for shapes in SHAPES[_arity(name, p)]]


@pytest.mark.parametrize("name,shapes", CASES, ids=[f"{n}-{s}" for n, s in CASES])
def test_check_grad_both_modes(name, shapes):
    p, _ = PRIMS[name]
    rng = np.random.default_rng(abs(hash((name, shapes))) % 2**32)
    f, args = _make(name, p, rng, shapes)
    if name in NONDIFF:
        g = wg.jacobian(lambda *a: f(*a), argnums=tuple(range(len(args))), mode="reverse")(*args)
        for gi in g:
            assert np.all(np.asarray(gi) == 0)
        return
    order = 1 if name in PIECEWISE and name != "absolute" else 2
    wg.check_grad(f, *args, order=order)


@pytest.mark.parametrize("name", sorted(n for n in PRIMS if n not in NONDIFF))
def test_float32_kept(name):
    p, _ = PRIMS[name]
    rng = np.random.default_rng(1)
    shapes = SHAPES[_arity(name, p)][1]
    f, args = _make(name, p, rng, shapes, dtype=np.float32)
    argnums = tuple(range(len(args)))
    out = f(*args)
    kept = np.float64 if name == "float_power" else np.float32  # NumPy's: in float64
    assert np.asarray(out).dtype == kept, name
    gs = wg.grad(lambda *a: wnp.sum(f(*a)), argnums=argnums)(*args)
    for a, g in zip(args, gs):
        assert g.dtype == np.float32 and g.shape == a.shape, name
    _, t = wg.jvp(f, args, [np.ones_like(a) for a in args])
    assert t.dtype == kept, name
    wg.check_grad(f, *args)


@pytest.mark.parametrize("name", sorted(n for n in PRIMS if n not in NONDIFF))
def test_batched_jacobians_agree(name):
    """Forward (all directions in one pass) and reverse (all rows in one sweep) agree."""
    p, _ = PRIMS[name]
    rng = np.random.default_rng(2)
    shapes = SHAPES[_arity(name, p)][-1]
    f, args = _make(name, p, rng, shapes)
    argnums = tuple(range(len(args)))
    Jf = wg.jacobian(f, argnums=argnums, mode="forward")(*args)
    Jr = wg.jacobian(f, argnums=argnums, mode="reverse")(*args)
    for a, b in zip(Jf, Jr):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(n for n in PRIMS if n not in NONDIFF))
def test_engines_agree(name):
    """Dual and Tape give the same derivative, bit for bit on these programs."""
    p, _ = PRIMS[name]
    rng = np.random.default_rng(3)
    f, args = _make(name, p, rng, SHAPES[_arity(name, p)][0])
    fwd = [wg.jvp(f, args, [1.0 if i == j else 0.0 for j in range(len(args))])[1]
           for i in range(len(args))]
    rev = wg.grad(f, argnums=tuple(range(len(args))))(*args)
    np.testing.assert_allclose(fwd, rev, rtol=1e-14, atol=0)


def test_plain_values_are_numpys():
    x = np.linspace(0.2, 0.9, 4)
    for name, p in REGISTRY.items():
        if not isinstance(p.impl, np.ufunc) or not hasattr(np, name):
            continue
        n = p.impl.nin
        args = [x, np.arange(4)] if name == "ldexp" else [x] * n
        got = p(*args)
        want = getattr(np, name)(*args)
        assert type(got) is type(want) and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert wnp.sin(0.5) == np.sin(0.5) and type(wnp.sin(0.5)) is type(np.sin(0.5))


def test_known_closed_forms():
    x = 0.37
    assert wg.grad(wnp.arctan)(x) == pytest.approx(1 / (1 + x * x), rel=1e-15)
    assert wg.derivative(wnp.tanh, 2)(x) == pytest.approx(
        -2 * np.tanh(x) * (1 - np.tanh(x) ** 2), rel=1e-14)
    assert wg.grad(lambda a: wnp.logaddexp(a, 1.0))(x) == pytest.approx(
        np.exp(x) / (np.exp(x) + np.e), rel=1e-14)
    assert wg.grad(lambda y: wnp.arctan2(y, 2.0))(x) == pytest.approx(2 / (4 + x * x), rel=1e-14)


def test_conventions_at_kinks():
    assert wg.grad(wnp.abs)(0.0) == 0.0
    assert wg.grad(lambda x: wnp.maximum(x, 1.0))(1.0) == 0.5
    assert wg.grad(lambda x: wnp.minimum(x, x))(1.0) == 1.0
    with np.errstate(divide="ignore"):
        assert wg.grad(wnp.sqrt)(0.0) == np.inf
    assert wg.grad(lambda x: x ** 2.0)(0.0) == 0.0
    assert wg.grad(lambda x: 0.0 ** x)(1.0) == 0.0


def test_where_does_not_leak_nan():
    def safe_sqrt(x):
        return wnp.where(x > 0, wnp.sqrt(wnp.where(x > 0, x, 1.0)), 0.0)

    x = np.array([-1.0, 0.0, 4.0])
    g = wg.grad(lambda x: wnp.sum(safe_sqrt(x)))(x)
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.25])


def test_checker_catches_a_wrong_rule():
    @wg.primitive
    def bad_sin(x):
        return np.sin(x)

    bad_sin.partials(lambda ans, x: (wnp.cos(x) * 1.001,))
    with pytest.raises(AssertionError, match="forward"):
        wg.check_grad(bad_sin, 0.4)
    with pytest.raises(AssertionError, match="reverse"):
        wg.check_grad(bad_sin, 0.4, modes=("reverse",))

    @wg.primitive
    def bad_second(x):
        return np.sin(x)

    # right first derivative, wrong second: cos written with a non-differentiable value
    bad_second.partials(lambda ans, x: (np.cos(getattr(x, "value", x)),))
    wg.check_grad(bad_second, 0.4, order=1)
    with pytest.raises((AssertionError, TypeError)):
        wg.check_grad(bad_second, 0.4, order=2)


def test_user_rule_from_api_md():
    @wg.primitive
    def softplus(x):
        return np.logaddexp(0.0, x)

    @softplus.rrule
    def _(x):
        y = softplus(x)
        return y, lambda dy: (dy * wnp.exp(x - y),)

    @softplus.frule
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        y = softplus(x)
        return y, dx * wnp.exp(x - y)

    wg.check_grad(softplus, 0.3, order=2)
    wg.check_grad(softplus, np.array([-1.0, 0.5, 2.0]), order=2)
    assert wg.grad(softplus)(0.0) == 0.5


# -- linearity: the one fact a wrong Hessian would follow from, checked numerically ----------------
def _linear_programs():
    """Small programs (and their gradients) that meet every primitive declaring a linearity."""
    from wengert.checkpoint import checkpoint
    from wengert.compat.autograd.scipy.signal import unwindows, windows
    from wengert.rules.checkpointing import checkpoint_put, checkpoint_stack, checkpoint_take
    from wengert.rules.shape import as_float
    from wengert.scipy.sparse.linalg import expm_multiply
    A = np.array([[0.1, 0.2, 0.0], [0.0, -0.3, 0.1], [0.2, 0.0, 0.1]])
    c = np.array([[0.5, -1.0, 2.0, 0.25], [1.5, 0.5, -0.5, 1.0], [0.3, 0.7, -1.2, 0.1]])
    return [
        lambda x: wnp.sum((x + c - x * c - (-x) + (+x)) * wnp.reshape(wnp.transpose(x), (3, 4))),
        lambda x: wnp.sum(wnp.cumsum(x, axis=1) * wnp.concatenate([x, -x])[1:4] ** 2),
        lambda x: wnp.sum(wnp.broadcast_to(x[0], (2, 4)) * x[[0, 2]]) + as_float(x[1, 1]) * x[0, 0],
        lambda x: wnp.sum(wnp.real(wnp.fft.fft(x) * wnp.conj(wnp.fft.ifft2(x)))
                          + wnp.imag(wnp.fft.fftn(x * 1j)) ** 2),
        lambda x: wnp.sum(wnp.fft.irfft(wnp.fft.rfft(x, n=6), n=5) ** 2)
        + wnp.sum(wnp.fft.irfft2(wnp.fft.rfft2(x)) * wnp.fft.irfftn(wnp.fft.rfftn(x ** 2))),
        lambda x: wnp.sum(wnp.deg2rad(x) * wnp.rad2deg(x) + wnp.degrees(x) * wnp.radians(x)),
        lambda x: wnp.sum(wnp.copy(x) ** 2 * wnp.index_update(x, (1, slice(1, 3)), x[0, :2])),
        lambda x: wnp.sum(wnp.index_update(x, ([0, 2], [1, 3]), x[1, :2]) ** 2),
        lambda x: wnp.sum(wnp.real(wnp.fft.ifft(x) * wnp.fft.ifftn(x)) ** 2),
        lambda x: wnp.sum(wnp.roll(x, 1, axis=1) * wnp.roll(x, (-1, 2), axis=(0, 1)) ** 2),
        lambda x: wnp.sum(x @ x[0] + x[0] @ x.T) + wnp.dot(x[0], x[1]) * wnp.sum(x[2]),
        lambda x: wnp.sum(expm_multiply(A, x) ** 2),
        lambda x: wnp.sum(unwindows(windows(x, (2,)) ** 2, (2,))),
        lambda x: wnp.sum(checkpoint_put(checkpoint_take(x, index=1, axis=0), index=0, axis=0,
                                         n=2) * checkpoint_stack(x[0], x[2], axis=0) ** 2),
        lambda x: wnp.sum(checkpoint(lambda y: wnp.sin(y) * y)(x)),
        lambda x: wnp.sum(wnp.maximum(x, c) * wnp.minimum(x, 0.3) + wnp.fmax(x, c) * wnp.fmin(x, c)
                          + wnp.where(x > 0, x, c) ** 2 + wnp.clip(x, -0.5, 0.5) * x
                          + wnp.fabs(x) * wnp.copysign(x, c) + wnp.fmod(x, 0.7) * x
                          + wnp.remainder(x, 0.7) * x + wnp.max(x, axis=0)[0] * wnp.min(x)
                          + wnp.modf(x)[0] * x + x.astype(np.float32).astype(float) * x),
    ]


def _declared_calls():
    """``(primitive, argument values, params)`` of each primitive declaring a linearity, as
    the graphs of ``_linear_programs`` and their gradients call it."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1.0, 1.0, (3, 4))
    calls = {}
    for f in _linear_programs():
        for g in (wg.trace(f, x), wg.trace(wg.grad(f), x)):
            for n in g.nodes:
                if n.kind == "op" and n.prim.linearity is not None:
                    calls.setdefault(n.prim, []).append(
                        ([g.nodes[a].value for a in n.args], dict(n.params)))
    return calls


def _float_args(vals):
    return [i for i, v in enumerate(vals) if np.asarray(v).dtype.kind in "fc"]


def _like(rng, v):
    v = np.asarray(v)
    y = rng.uniform(-1.0, 1.0, v.shape)
    if v.dtype.kind == "c":
        y = y + 1j * rng.uniform(-1.0, 1.0, v.shape)
    return y.astype(v.dtype) if v.shape else v.dtype.type(y)


def _close(a, b):
    if isinstance(a, (tuple, list)):
        return all(_close(u, v) for u, v in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    tol = 1e-4 if np.float32 in (a.dtype.type, b.dtype.type) else 1e-9
    return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


def _combine(s, u, t, v):
    if isinstance(u, (tuple, list)):
        return type(u)(_combine(s, a, t, b) for a, b in zip(u, v))
    return s * np.asarray(u) + t * np.asarray(v)


def test_every_declared_linearity_holds_numerically():
    """``linear=True``: f(a x + b y) = a f(x) + b f(y), jointly in the float arguments (real a, b:
    real, imag and conj are real-linear); ``"bilinear"``: so in each argument alone;
    ``"piecewise"``: no curvature, a zero second difference away from the kinks. Each primitive
    declaring one is met by a program above (a wrongly linear primitive gives wrong Hessians,
    Taylor coefficients and vmap batches)."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_layering import _every_primitive
    calls = _declared_calls()
    declared = {p for p in _every_primitive() if p.linearity is not None
                and not (p.__module__ or "").startswith("test")}  # not the tests' own
    assert {p.name for p in declared - set(calls)} == set(), "no program meets them"
    rng = np.random.default_rng(7)
    a, b = 0.75, -1.25
    for p, seen in calls.items():
        for vals, params in seen:
            fl = _float_args(vals)
            if not fl:
                continue
            f0 = p(*vals, **params)
            if p.linearity == "piecewise":
                d = [_like(rng, vals[i]) if i in fl else None for i in range(len(vals))]
                h = 1e-6
                at = [[v + s * h * d[i] if i in fl else v for i, v in enumerate(vals)]
                      for s in (1.0, -1.0)]
                up, down = p(*at[0], **params), p(*at[1], **params)
                assert _close(_combine(1.0, up, 1.0, down), _combine(2.0, f0, 0.0, f0)) or \
                    _close(_combine(0.5, up, -0.5, down), _combine(1.0, up, -1.0, f0)), p.name
                continue
            groups = [fl] if p.linearity == "linear" else [[i] for i in fl]
            for group in groups:
                ys = [_like(rng, vals[i]) if i in group else v for i, v in enumerate(vals)]
                mixed = [a * vals[i] + b * ys[i] if i in group else v
                         for i, v in enumerate(vals)]
                want = _combine(a, f0, b, p(*ys, **params))
                assert _close(p(*mixed, **params), want), (p.name, group)


def test_a_nonlinear_primitive_fails_the_linearity_check():
    """The check can fail: sin declared linear would not pass it."""
    x, y = np.array([0.3, 1.1]), np.array([-0.4, 0.9])
    assert not _close(wnp.sin(0.75 * x - 1.25 * y), 0.75 * wnp.sin(x) - 1.25 * wnp.sin(y))
