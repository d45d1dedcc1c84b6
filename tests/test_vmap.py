"""wg.vmap: every primitive of the registry mapped over a batch equals the Python loop.

The primitives are read off the registry (every ``Primitive`` in ``wengert.rules``), so a new
one is covered or the completeness test fails; elementwise ones are sampled from their
declared domains, the others from ``SAMPLES``.
"""
import dataclasses
import importlib
import pkgutil

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
import wengert.scipy.special as wsp
import wengert.rules as rules
import wengert.scipy.special  # noqa: F401  (registers scipy.special's primitives)
from wengert.batching import BatchedControlFlowError, batching_kind, loop_primitives
from wengert.core import Primitive
from wengert.rules.linalg import _lstsq
from wengert.rules.logic import SAME_NUMBER, SAME_VALUE
from wengert.rules.shape import as_float as _as_float
from wengert.rules.take import put_dynamic, take_dynamic

# the rule registry's samples reach special functions' poles and integer orders: NumPy's
# RuntimeWarnings there say nothing about batching
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

B = 4


def _registry():
    seen = {}
    for m in pkgutil.iter_modules(rules.__path__):
        mod = importlib.import_module(f"wengert.rules.{m.name}")
        for v in vars(mod).values():
            if isinstance(v, Primitive):
                seen.setdefault(id(v), v)
    return sorted(seen.values(), key=lambda p: p.name)


PRIMS = _registry()
ELEMENTWISE = [p for p in PRIMS if batching_kind(p) == "elementwise"]

# the primitives vmap runs once per example (no batching rule): this list may only shrink
# (a compiled scan's nodes are mapped by their plan: scan_reverse with batched cotangents
# in one run of the schedule, anything else once per example)
LOOPED = ["lstsq", "same_value", "solve_banded", "solve_triangular", "sqrtm"]


def test_the_loop_fallback_is_listed():
    assert loop_primitives(PRIMS) == LOOPED


def _loop(f, args, in_axes):
    outs = []
    for i in range(B):
        outs.append(f(*[a if ax is None else np.take(a, i, axis=ax)
                        for a, ax in zip(args, in_axes)]))
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[k] for o in outs]) for k in range(len(outs[0])))
    return np.stack(outs)


def _same(got, want, exact=False):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, exact)
        return
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300, equal_nan=True)


def _arity(p):
    if p.nargs is not None:
        return p.nargs
    nin = getattr(p.impl, "nin", None)
    if nin is None:  # a wrapper of scipy.special's ufunc
        import scipy.special
        nin = getattr(scipy.special, p.name).nin
    return nin


# arguments the domains do not say: (function of the arguments, sample maker)
_SPECIAL_ARGS = {
    "astype": lambda p, x: (lambda a: p(a, dtype=np.float32)),
    "invert": lambda p, x: (lambda a: p(a > 0.5)),
    "ldexp": lambda p, x: (lambda a: p(a, np.array([1, -2, 3]))),
    "multigammaln": lambda p, x: (lambda a: p(a, 3)),
    "round": lambda p, x: (lambda a: p(a, decimals=1)),
    "polygamma": lambda p, x: (lambda a: p(2, a)),
    "eval_hermite": lambda p, x: (lambda a: p(3, a)),
    "eval_hermitenorm": lambda p, x: (lambda a: p(3, a)),
}


@pytest.mark.parametrize("p", ELEMENTWISE, ids=[p.name for p in ELEMENTWISE])
def test_elementwise_equals_the_loop(p):
    rng = np.random.default_rng(abs(hash(p.name)) % 2**32)
    lo, hi = p.domain or (0.2, 0.9)
    if p.name in _SPECIAL_ARGS:
        f, n = _SPECIAL_ARGS[p.name](p, None), 1
    else:
        f, n = p, _arity(p)
    # the first argument mapped along axis 0, then alternately an unbatched array, one mapped
    # along its last axis, and an unbatched scalar: ranks and axes differ
    args, axes = [rng.uniform(lo, hi, (B, 3))], [0]
    for k in range(1, n):
        kind = k % 3
        args.append(rng.uniform(lo, hi, (2, 3)) if kind == 1 else
                    rng.uniform(lo, hi, (3, B)) if kind == 2 else float(rng.uniform(lo, hi)))
        axes.append(None if kind != 2 else 1)
    if p.name == "where":
        args[0] = args[0] > (lo + hi) / 2
    with np.errstate(all="ignore"):
        try:
            want = _loop(f, args, axes)
        except (TypeError, ValueError) as e:  # integer-only arguments etc.: NumPy refuses
            pytest.skip(f"{p.name} refuses these samples: {e}")
        got = wg.vmap(f, in_axes=tuple(axes))(*args)
    _same(got, want, exact=True)


def _spd(rng, n=3):
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


# name -> (function of the arrays, arrays of one example): mapped with every argument batched,
# then with only the first
SAMPLES = {
    "airy": None, "airye": None, "itairy": None, "itj0y0": None, "iti0k0": None,
    "it2j0y0": None, "it2i0k0": None, "sici": None, "shichi": None, "fresnel": None,
    "broadcast_to": (lambda x: wnp.broadcast_to(x, (2, 3)), lambda r: [r.normal(size=3)]),
    "reshape": (lambda x: wnp.reshape(x, (3, 2)), lambda r: [r.normal(size=(2, 3))]),
    "sum": (lambda x: (wnp.sum(x), wnp.sum(x, axis=0), wnp.sum(x, axis=-1, keepdims=True)),
            lambda r: [r.normal(size=(2, 3))]),
    "transpose": (lambda x: (x.T, wnp.transpose(x, (1, 0, 2))),
                  lambda r: [r.normal(size=(2, 3, 4))]),
    "getitem_basic": (lambda x: (x[1:, ::-1], x[0], x[..., 1], x[None, 1]),
                      lambda r: [r.normal(size=(2, 3))]),
    "gather": (lambda x: (x[[0, 2, 2]], x[:, [1, 0]], x[x.value > 0.0] if False else x[0, [2]]),
               lambda r: [r.normal(size=(3, 3))]),
    "scatter_basic": (lambda x: wg.grad(lambda y: wnp.sum(y[1:] ** 2))(x),
                      lambda r: [r.normal(size=4)]),
    "scatter_add": (lambda x: wg.grad(lambda y: wnp.sum(y[[0, 0, 2]] ** 2))(x),
                    lambda r: [r.normal(size=4)]),
    "set_basic": (lambda x, v: _set(x, 1, v), lambda r: [r.normal(size=4), r.normal()]),
    "set_flat": (lambda x, v: _set(x, [0, 3], v), lambda r: [r.normal(size=4), r.normal(size=2)]),
    "concatenate": (lambda x, y: (wnp.concatenate([x, y]),
                                  wnp.concatenate([x[None], y[None]], axis=1)),
                    lambda r: [r.normal(size=3), r.normal(size=3)]),
    "checkpoint_take": None, "checkpoint_put": None, "checkpoint_stack": None,
    # a compiled scan's loop: test_vmap_of_a_compiled_scan
    "scan_loop": None, "scan_forward": None, "scan_reverse": None,
    "real": (lambda z: wnp.real(z * 1j + z), lambda r: [r.normal(size=3)]),
    "imag": (lambda z: wnp.imag(z * 1j + z), lambda r: [r.normal(size=3)]),
    "conj": (lambda z: wnp.conj(z * 1j), lambda r: [r.normal(size=3)]),
    "angle": (lambda z: wnp.angle(z * 1j + 0.5), lambda r: [r.normal(size=3)]),
    "astype": (lambda x: wnp.astype(x, np.float32), lambda r: [r.normal(size=3)]),
    "copy": (lambda x: wnp.copy(x), lambda r: [r.normal(size=3)]),
    "as_float": (lambda x: _as_float(x[0]) * 2.0, lambda r: [r.normal(size=3)]),
    "constant_like": (lambda x: _filled(x), lambda r: [r.normal(size=3)]),
    "convolve": (lambda a, v: wnp.convolve(a, v), lambda r: [r.normal(size=5), r.normal(size=3)]),
    "correlate": (lambda a, v: wnp.correlate(a, v, "full"),
                  lambda r: [r.normal(size=5), r.normal(size=3)]),
    "eig": (lambda a: wnp.linalg.eigvals(a), lambda r: [_spd(r)]),
    "eigvals": (lambda a: wnp.linalg.eigvals(a), lambda r: [_spd(r)]),
    "eigh": (lambda a: wnp.linalg.eigh(a)[0], lambda r: [_spd(r)]),
    "eigvalsh": (lambda a: wnp.linalg.eigvalsh(a), lambda r: [_spd(r)]),
    "qr": (lambda a: tuple(wnp.linalg.qr(a)), lambda r: [r.normal(size=(4, 3))]),
    "svd": (lambda a: tuple(wnp.linalg.svd(a, full_matrices=False)),
            lambda r: [r.normal(size=(4, 3))]),
    "svdvals": (lambda a: wnp.linalg.svd(a, compute_uv=False), lambda r: [r.normal(size=(4, 3))]),
    "inv": (lambda a: wnp.linalg.inv(a), lambda r: [_spd(r)]),
    "det": (lambda a: wnp.linalg.det(a), lambda r: [_spd(r)]),
    "slogdet": (lambda a: tuple(wnp.linalg.slogdet(a)), lambda r: [_spd(r)]),
    "cholesky": (lambda a: wnp.linalg.cholesky(a), lambda r: [_spd(r)]),
    "pinv": (lambda a: wnp.linalg.pinv(a), lambda r: [r.normal(size=(4, 3))]),
    "solve": (lambda a, b: (wnp.linalg.solve(a, b), wnp.linalg.solve(a, wnp.stack([b, b], 1))),
              lambda r: [_spd(r), r.normal(size=3)]),
    # (wnp.linalg.lstsq reads the plain values for its rank: its primitive, directly)
    "lstsq": (lambda a, b: _lstsq(a, b[:, None]),
              lambda r: [r.normal(size=(4, 3)), r.normal(size=4)]),
    "expm": (lambda a: wg.scipy.linalg.expm(a * 0.1), lambda r: [r.normal(size=(3, 3))]),
    "sqrtm": (lambda a: wg.scipy.linalg.sqrtm(a), lambda r: [_spd(r)]),
    "solve_triangular": (lambda a, b: wg.scipy.linalg.solve_triangular(a, b, lower=True),
                         lambda r: [_spd(r), r.normal(size=3)]),
    "solve_banded": (lambda a, b: wg.scipy.linalg.solve_banded((1, 1), a, b),
                     lambda r: [r.normal(size=(3, 4)) + np.array([[0], [4], [0]]),
                                r.normal(size=4)]),
    "solve_sylvester": (lambda a, b, q: wg.scipy.linalg.solve_sylvester(a, b, q),
                        lambda r: [_spd(r), _spd(r), r.normal(size=(3, 3))]),
    "vector_norm": (lambda x: (wnp.linalg.norm(x), wnp.linalg.norm(x, axis=0),
                               wnp.linalg.norm(x, 1)),
                    lambda r: [r.normal(size=(2, 3))]),
    "matmul": (lambda a, b: (a @ b, a[0] @ b, a @ b[:, 0], b.T @ a.T),
               lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))]),
    "matvec": (lambda a, b: a @ b[:, 0], lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))]),
    "vecmat": (lambda a, b: a[0] @ b, lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))]),
    "dot": (lambda a, b: a[0] @ b[:, 0], lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))]),
    "einsum": (lambda a, b: (wnp.einsum("ij,jk->ki", a, b), wnp.einsum("ij->", a)),
               lambda r: [r.normal(size=(2, 3)), r.normal(size=(3, 4))]),
    "cumsum": (lambda x: (wnp.cumsum(x), wnp.cumsum(x, axis=0)),
               lambda r: [r.normal(size=(2, 3))]),
    "cumprod": (lambda x: (wnp.cumprod(x), wnp.cumprod(x, axis=-1)),
                lambda r: [r.normal(size=(2, 3))]),
    "prod": (lambda x: (wnp.prod(x), wnp.prod(x, axis=1)), lambda r: [r.normal(size=(2, 3))]),
    "max": (lambda x: (wnp.max(x), wnp.max(x, axis=0)), lambda r: [r.normal(size=(2, 3))]),
    "min": (lambda x: (wnp.min(x), wnp.min(x, axis=-1, keepdims=True)),
            lambda r: [r.normal(size=(2, 3))]),
    "logsumexp": (lambda x: (wg.scipy.special.logsumexp(x), wg.scipy.special.logsumexp(x, axis=0)),
                  lambda r: [r.normal(size=(2, 3))]),
    "logsumexp_b": (lambda x, b: wg.scipy.special.logsumexp(x, b=b, axis=1),
                    lambda r: [r.normal(size=(2, 3)), r.uniform(0.5, 1, size=3)]),
    "fft": (lambda x: (wnp.fft.fft(x), wnp.fft.ifft(x, axis=0), wnp.fft.rfft(x, n=4)),
            lambda r: [r.normal(size=(2, 3))]),
    "fft2": (lambda x: (wnp.fft.fft2(x), wnp.fft.ifft2(x), wnp.fft.fftn(x),
                        wnp.fft.ifftn(x, s=(2, 2), axes=(0, 1)),
                        wnp.fft.rfft2(x), wnp.fft.rfftn(x), wnp.fft.irfft2(x), wnp.fft.irfftn(x),
                        wnp.fft.irfft(x)),
             lambda r: [r.normal(size=(2, 3))]),
    "value_of": (lambda x: wg.scipy.special.eval_legendre(3, x), lambda r: [r.uniform(-1, 1, 3)]),
    "modf": (lambda x: tuple(wnp.modf(x)), lambda r: [r.normal(size=3)]),
    "take_dynamic": (lambda a: a[np.array([2, 0])] * 1.0, lambda r: [r.normal(size=(3, 2))]),
    "put_dynamic": (lambda a: wg.grad(lambda b: wnp.sum(b[np.array([2, 2])] ** 2))(a),
                    lambda r: [r.normal(size=(3, 2))]),
    "same_value": (lambda a, b: SAME_VALUE(a, b), lambda r: [r.normal(size=3), r.normal(size=3)]),
    "same_number": (lambda a, b: SAME_NUMBER(a, b), lambda r: [r.normal(), r.normal()]),
    "round": (lambda x: wnp.round(x, 1), lambda r: [r.normal(size=3)]),
}
for _n in ("ifft", "ifft2", "fftn", "ifftn", "rfft", "rfft2", "rfftn", "irfft", "irfft2", "irfftn",
           "fix_length"):
    SAMPLES[_n] = SAMPLES["fft2"]


def _filled(x):
    a = wnp.zeros(4, like=x)
    a[1:] = x * 2.0
    return a


def _set(x, idx, v):
    y = wnp.zeros_like(x) + x
    y[idx] = v
    return y


OTHERS = [p for p in PRIMS if batching_kind(p) != "elementwise"
          and p.name not in ("invert",) and not p.name.startswith(("lt", "le", "gt", "ge", "eq",
                                                                   "ne", "and_", "or_", "xor"))]


# a primitive without a sample here takes tests/test_arrays.py's TABLE row of its name, its
# arguments perturbed per example: a new primitive needs one table row, not two
from test_arrays import TABLE as _ARRAY_TABLE  # noqa: E402

for _name, _f, _args, _order in _ARRAY_TABLE:
    if _name not in SAMPLES and _name in {p.name for p in OTHERS}:
        SAMPLES[_name] = (_f, lambda r, _args=_args: [a * r.uniform(0.8, 1.2, np.shape(a))
                                                     for a in _args])


def test_every_other_primitive_has_a_sample():
    missing = sorted({p.name for p in OTHERS} - set(SAMPLES))
    assert not missing, f"give these a row in tests/test_arrays.py's TABLE, or a sample in " \
        f"SAMPLES: {missing}"


@pytest.mark.parametrize("name", sorted(n for n, s in SAMPLES.items() if s is not None))
def test_others_equal_the_loop(name):
    fn, make = SAMPLES[name]
    rng = np.random.default_rng(7)
    examples = [make(rng) for _ in range(B)]
    stacked = [np.stack([e[k] for e in examples]) for k in range(len(examples[0]))]
    for axes in [(0,) * len(stacked), (0,) + (None,) * (len(stacked) - 1)]:
        args = [s if a == 0 else s[0] for s, a in zip(stacked, axes)]
        want = _loop(lambda *a: _plain(fn(*a)), args, axes)
        got = _plain(wg.vmap(fn, in_axes=axes)(*args))
        if name in ("eig", "eigvals"):  # a stack is complex if one example is: NumPy's rule
            got = np.real_if_close(got)
        _same(got, want)


def _plain(out):
    return tuple(np.asarray(o) for o in out) if isinstance(out, (tuple, list)) else np.asarray(out)


@pytest.mark.parametrize("name", ["airy", "sici", "fresnel"])
def test_several_results_elementwise(name):
    f = getattr(wg.scipy.special, name)
    x = np.linspace(0.2, 1.5, 8).reshape(B, 2)
    _same(tuple(wg.vmap(f)(x)), tuple(np.asarray(o) for o in f(x)), exact=True)


def test_checkpoint_primitives():
    def f(x):
        return wg.checkpoint(lambda y: wnp.sin(y) * y)(x).sum()
    X = np.random.default_rng(1).normal(size=(B, 3))
    _same(wg.vmap(f)(X), _loop(f, [X], [0]))
    _same(wg.vmap(wg.grad(f))(X), _loop(wg.grad(f), [X], [0]))

    def step(c, x):
        c = wnp.tanh(c * x)
        return c, c * 2.0

    def g(x):
        c, ys = wg.scan(step, 0.5, x)
        return c + wnp.sum(ys)
    _same(wg.vmap(g)(X), _loop(g, [X], [0]))
    _same(wg.vmap(wg.grad(g))(X), _loop(wg.grad(g), [X], [0]))


# -- in_axes, out_axes ---------------------------------------------------------------------------
def test_axes_and_pytrees():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, B)), rng.normal(size=(B, 2))
    f = wg.vmap(lambda a, d: a[0] * d["y"] + d["c"], in_axes=(-1, {"y": 0, "c": None}),
                out_axes=1)
    got = f(x, {"y": y, "c": 1.5})
    want = np.stack([x[0, i] * y[i] + 1.5 for i in range(B)], axis=1)
    _same(got, want)
    out = wg.vmap(lambda a: (a, a.sum()), out_axes=(None, 0), in_axes=None, axis_size=3)
    with pytest.raises(ValueError, match="out_axes is None"):
        wg.vmap(lambda a: (a, a.sum()), out_axes=(None, 0))(x)
    a, s = out(np.ones(2))  # nothing mapped: axis_size says how many
    assert a.shape == (2,) and s.shape == (3,)
    _same(wg.vmap(lambda a: 2.0)(x.T), np.full(B, 2.0))


@dataclasses.dataclass
class _Layer:
    w: np.ndarray
    b: np.ndarray


def test_in_axes_as_a_dataclass():
    rng = np.random.default_rng(19)
    X, w, bs = rng.normal(size=(B, 3)), rng.normal(size=(3, 2)), rng.normal(size=(B, 2))
    f = lambda p, x: x @ p.w + p.b  # noqa: E731
    got = wg.vmap(f, in_axes=(_Layer(None, 0), 0))(_Layer(w, bs), X)
    _same(got, np.stack([X[i] @ w + bs[i] for i in range(B)]))
    g = wg.vmap(wg.grad(lambda p, x: wnp.sum(f(p, x) ** 2)), in_axes=(_Layer(None, 0), 0))
    gs = g(_Layer(w, bs), X)
    assert isinstance(gs, _Layer) and gs.w.shape == (B, 3, 2) and gs.b.shape == (B, 2)


def test_bad_axes_say_so():
    x = np.ones((3, 4))
    with pytest.raises(ValueError, match="inconsistent sizes"):
        wg.vmap(lambda a, b: a + b)(x, np.ones((4, 4)))
    with pytest.raises(ValueError, match="at least one mapped"):
        wg.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(ValueError, match="out of range"):
        wg.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(ValueError, match="positional arguments"):
        wg.vmap(lambda a: a, in_axes=(0, 0))(x)
    with pytest.raises(ValueError, match="structure"):
        wg.vmap(lambda a: a, in_axes=({"a": 0},))(x)


def test_an_index_that_differs_by_example():
    rng = np.random.default_rng(13)
    z, i = rng.normal(size=(B, 5, 2)), np.array([0, 3, -1, 2])
    _same(wg.vmap(lambda a, j: a[j])(z, i), np.stack([z[k][i[k]] for k in range(B)]),
          exact=True)
    _same(wg.vmap(lambda j: wnp.take(z[0], j, axis=0))(i), z[0][i], exact=True)  # a plain table
    _same(wg.vmap(lambda j: wnp.take(z[0], j))(i), z[0].ravel()[i], exact=True)
    rows = np.array([[0, 1], [2, 2], [4, 0], [1, 1]])  # repeated rows: cotangents add up
    f = lambda a, j: wnp.sum(wnp.sin(a[j]) ** 2)
    _same(wg.vmap(wg.grad(f))(z, rows), _loop(wg.grad(f), [z, rows], [0, 0]))
    _same(wg.vmap(wg.grad(f), in_axes=(None, 0))(z[0], i), _loop(wg.grad(f), [z[0], i], [None, 0]))
    h = wg.hessian(lambda a, j: wnp.sum(a[j] ** 3))
    _same(wg.vmap(h)(z[:, :, 0], i), _loop(h, [z[:, :, 0], i], [0, 0]))
    jv = lambda a, j: wg.jvp(lambda b: b[j] * b[j], (a,), (np.ones_like(a),))[1]
    _same(wg.vmap(jv)(z, i), _loop(jv, [z, i], [0, 0]))
    inner = np.array([[0, 1, 2], [3, 4, 0], [1, 1, 1], [2, 0, 4]])
    _same(wg.vmap(wg.vmap(lambda a, j: a[j], in_axes=(None, 0)))(z, inner),
          np.stack([[z[b][inner[b, c]] for c in range(3)] for b in range(B)]))
    # a mask that differs by example selects a different number of entries: refused by name
    with pytest.raises(BatchedControlFlowError, match="index"):
        wg.vmap(lambda a: a[a > 0])(z)


def test_take_dynamic_rules():
    rng = np.random.default_rng(14)
    x, i = rng.normal(size=(5, 2)), np.array([[0, 4], [4, 1]])
    wg.check_grad(lambda a: take_dynamic(a, i) ** 2, x, order=2)
    wg.check_grad(lambda g: put_dynamic(g, i, 5) ** 2, rng.normal(size=(2, 2, 2)), order=2)
    _same(put_dynamic(np.ones((2, 2)), i, 5), np.array([1.0, 1, 0, 0, 2]))


def test_control_flow_names_where():
    x = np.array([-1.0, 2.0])
    with pytest.raises(BatchedControlFlowError, match="wnp.where"):
        wg.vmap(lambda a: a if a > 0 else -a)(x)
    with pytest.raises(TypeError, match="wnp.where"):
        wg.vmap(lambda a: a * int(a > 0))(x)
    _same(wg.vmap(lambda a: wnp.where(a > 0, a, -a))(x), np.abs(x), exact=True)
    _same(wg.vmap(lambda a: a * (a > 0))(x), np.array([-0.0, 2.0]), exact=True)


# -- composition with the transforms --------------------------------------------------------------
def _mlp(params, x, y):
    (w1, b1), (w2, b2) = params
    h = wnp.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    return wg.scipy.special.logsumexp(z) - wnp.sum(z * y)  # y: one-hot


def _mlp_params(rng, sizes=(6, 8, 3)):
    return [(rng.normal(size=(m, n)) / np.sqrt(m), rng.normal(size=n) * 0.1)
            for m, n in zip(sizes[:-1], sizes[1:])]


def test_per_example_gradients_of_an_mlp():
    rng = np.random.default_rng(3)
    params = _mlp_params(rng)
    X, Y = rng.normal(size=(B, 6)), np.eye(3)[[0, 2, 1, 2]]
    got = wg.vmap(wg.grad(_mlp), in_axes=(None, 0, 0))(params, X, Y)
    want = [wg.grad(_mlp)(params, X[i], Y[i]) for i in range(B)]
    for (gw, gb), k in zip(got, range(2)):
        _same(gw, np.stack([w[k][0] for w in want]))
        _same(gb, np.stack([w[k][1] for w in want]))
    # and the gradient of the batch's mean loss, by grad of vmap
    mean = wg.grad(lambda p: wnp.mean(wg.vmap(_mlp, in_axes=(None, 0, 0))(p, X, Y)))(params)
    for k in range(2):
        for j in range(2):
            _same(mean[k][j], np.mean(np.stack([w[k][j] for w in want]), axis=0))


def f_test(w, x):
    return wnp.sum(wnp.sin(x @ w) ** 2) + wnp.prod(wnp.cos(w[:, 0]))


def test_grad_of_vmap_and_vmap_of_grad():
    rng = np.random.default_rng(4)
    w, X = rng.normal(size=(3, 2)), rng.normal(size=(B, 3))
    g = wg.grad(lambda w: wnp.sum(wg.vmap(f_test, in_axes=(None, 0))(w, X)))(w)
    _same(g, sum(wg.grad(f_test)(w, x) for x in X))
    Ws = rng.normal(size=(B, 3, 2))
    _same(wg.vmap(wg.grad(f_test), in_axes=(0, None))(Ws, X[0]),
          _loop(lambda w: wg.grad(f_test)(w, X[0]), [Ws], [0]))
    _same(wg.vmap(wg.hessian(lambda w: f_test(w, X[0])))(Ws),
          _loop(wg.hessian(lambda w: f_test(w, X[0])), [Ws], [0]))


def test_batched_jvps_and_jacobians_by_vmap_of_vjp():
    rng = np.random.default_rng(5)
    x = rng.normal(size=3)

    def f(x):
        return wnp.sin(x) * wnp.sum(x ** 2) + x[::-1]
    T = np.eye(3)
    J = wg.jacobian(f)(x)
    _same(wg.vmap(lambda t: wg.jvp(f, (x,), (t,))[1])(T), J.T)
    _, pb = wg.vjp(f, x)
    _same(wg.vmap(lambda c: pb(c)[0])(T), J)
    _same(wg.vmap(wg.jacobian(f))(np.stack([x, 2 * x])), np.stack([J, wg.jacobian(f)(2 * x)]))


def test_vmap_of_vmap_and_no_perturbation_confusion():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(B, 3, 2))
    f = wg.vmap(wg.vmap(lambda a, b: a * wnp.sum(b), in_axes=(0, None)), in_axes=(0, None))
    _same(f(X, X[0, 0]), X * X[0, 0].sum())
    g = wg.vmap(lambda x: wg.vmap(lambda y: x * y)(X[0, :, 0]))  # inner maps y, outer x
    _same(g(X[:, 0, 0]), X[:, 0, 0][:, None] * X[0, :, 0][None, :])
    # an inner vmap closing over the outer's derivative variable
    d = wg.derivative(lambda s: wnp.sum(wg.vmap(lambda y: s * y + s ** 2)(X[0, :, 0])))(1.5)
    _same(np.asarray(d), np.asarray(np.sum(X[0, :, 0]) + 2 * 1.5 * 3))


def test_check_grad_through_vmap():
    rng = np.random.default_rng(8)
    w, X = rng.normal(size=(3, 2)), rng.normal(size=(B, 3))

    def loss(w):
        per = wg.vmap(f_test, in_axes=(None, 0))(w, X)
        return wnp.sum(per * wnp.arange(1.0, B + 1))
    wg.check_grad(loss, w, order=2)

    def vec(x):  # vector valued: each mode's Jacobian, and second order
        return wg.vmap(lambda r: wnp.tanh(r @ w) * wnp.sum(r ** 2))(x)
    wg.check_grad(vec, X, order=2)


def test_escaped_batched_value():
    kept = []
    wg.vmap(lambda a: kept.append(a) or a)(np.ones(3))
    with pytest.raises(wg.EscapedTracerError):
        kept[0] + 1.0


def test_trace_and_compile_a_vmapped_function():
    rng = np.random.default_rng(9)
    w, X = rng.normal(size=(3, 2)), rng.normal(size=(B, 3))
    per = wg.vmap(f_test, in_axes=(None, 0))
    g = wg.trace(per, w, X)
    _same(g(w, X), per(w, X))
    c = wg.compile(per)
    _same(c(w, X), per(w, X))
    w2 = rng.normal(size=(3, 2))
    _same(c(w2, X), _loop(lambda x: f_test(w2, x), [X], [0]))


# -- NumPy's functions, as a user calls them ------------------------------------------------------
COMPOSITES = {
    "mean": lambda x: wnp.mean(x, axis=0),
    "nanmean": lambda x: wnp.nanmean(wnp.where(x > 1.0, np.nan, x), axis=1),
    "nanvar": lambda x: wnp.nanvar(wnp.where(x > 1.0, np.nan, x)),
    "mean_where": lambda x: wnp.mean(x, where=x > 0),
    "var": lambda x: wnp.var(x),
    "std": lambda x: wnp.std(x, axis=1),
    "softmax": lambda x: wsp.softmax(x, axis=-1),
    "norm": lambda x: wnp.linalg.norm(x),
    "norm_fro": lambda x: wnp.linalg.norm(x, 'fro'),
    "norm2": lambda x: wnp.linalg.norm(x, 2),
    "clip": lambda x: wnp.clip(x, -0.5, 0.5),
    "maximum": lambda x: wnp.maximum(x, 0),
    "tensordot": lambda x: wnp.tensordot(x, x, 1),
    "outer": lambda x: wnp.outer(x[0], x[1]),
    "kron": lambda x: wnp.kron(x[0], x[1]),
    "trace": lambda x: wnp.trace(x),
    "diagonal": lambda x: wnp.diagonal(x),
    "diag": lambda x: wnp.diag(x[0]),
    "cross": lambda x: wnp.cross(x[0], x[1]),
    "stack": lambda x: wnp.stack([x, 2*x], axis=1),
    "split": lambda x: wnp.split(x, 3, axis=1)[1],
    "flip": lambda x: wnp.flip(x),
    "roll": lambda x: wnp.roll(x, 1, axis=0),
    "roll_flat": lambda x: wnp.roll(x, 2),
    "tile": lambda x: wnp.tile(x, (2,1)),
    "repeat": lambda x: wnp.repeat(x, 2, axis=1),
    "pad": lambda x: wnp.pad(x, 1),
    "diff": lambda x: wnp.diff(x, axis=0),
    "triu": lambda x: wnp.triu(x),
    "tril": lambda x: wnp.tril(x, -1),
    "swapaxes": lambda x: wnp.swapaxes(x, 0, 1),
    "moveaxis": lambda x: wnp.moveaxis(x, 0, -1),
    "expand": lambda x: wnp.expand_dims(x, 0),
    "squeeze": lambda x: wnp.squeeze(x[None]),
    "ravel": lambda x: wnp.ravel(x),
    "flatten": lambda x: x.flatten(),
    "T": lambda x: x.T,
    "det": lambda x: wnp.linalg.det(x),
    "det_sing": lambda x: wg.grad(lambda a: wnp.linalg.det(a))(x * np.array([1.0, 1.0, 0.0])),
    "matrix_power": lambda x: wnp.linalg.matrix_power(x, 3),
    "inv_grad": lambda x: wg.grad(lambda a: wnp.sum(wnp.linalg.inv(a @ a.T + 3*np.eye(3))))(x),
    "eigh_grad": lambda x: wg.grad(lambda a: wnp.sum(wnp.linalg.eigh(a + a.T)[0] ** 2))(x),
    "svd_grad": lambda x: wg.grad(lambda a: wnp.sum(wnp.linalg.svd(a, compute_uv=False)))(x),
    "cholesky_grad":
        lambda x: wg.grad(lambda a: wnp.sum(wnp.linalg.cholesky(a @ a.T + 3*np.eye(3))))(x),
    "slogdet": lambda x: wnp.linalg.slogdet(x)[1],
    "solve_vec": lambda x: wnp.linalg.solve(x + 3*np.eye(3), x[0]),
    "fft_grad": lambda x: wg.grad(lambda a: wnp.sum(wnp.abs(wnp.fft.fft(a)) ** 2))(x),
    "logsumexp": lambda x: wsp.logsumexp(x, axis=1),
    "max": lambda x: wnp.max(x),
    "amax_grad": lambda x: wg.grad(lambda a: wnp.max(a))(x),
    "nanmax": lambda x: wnp.nanmax(x, axis=0),
    "nansum": lambda x: wnp.nansum(x),
    "prod_grad": lambda x: wg.grad(lambda a: wnp.prod(a))(x),
    "cumprod_grad": lambda x: wg.grad(lambda a: wnp.sum(wnp.cumprod(a)))(x),
    "setitem": lambda x: _si(x),
    "inplace": lambda x: _ip(x),
    "abs": lambda x: abs(x),
    "power": lambda x: x ** 2.5 if False else wnp.abs(x) ** 2.5,
    "hypot": lambda x: wnp.hypot(x, 1.0),
    "einsum3": lambda x: wnp.einsum("ij,jk,kl->il", x, x, x),
    "dot": lambda x: wnp.dot(x, x[0]),
    "vdot": lambda x: wnp.vdot(x, x),
    "inner": lambda x: wnp.inner(x, x),
    "matmul_vec": lambda x: x[0] @ x,
    "where": lambda x: wnp.where(x > 0, x, 0.0),
    "mask": lambda x: x * (x > 0),
    "hessian": lambda x: wg.hessian(lambda a: wnp.sum(wnp.sin(a) ** 3))(x[0]),
    "jacfwd": lambda x: wg.jacobian(lambda a: wnp.tanh(a @ x), mode="forward")(x[0]),
    "jacrev": lambda x: wg.jacobian(lambda a: wnp.tanh(a @ x), mode="reverse")(x[0]),
    "taylor": lambda x: wg.taylor(lambda a: wnp.sum(wnp.exp(a)), x[0], x[1], 3)[3],
    "hvp": lambda x: wg.hvp(lambda a: wnp.sum(wnp.sin(a) ** 3), x[0], x[1]),
    "checkpoint": lambda x: wg.checkpoint(lambda a: wnp.sin(a) @ a)(x),
    "trapezoid": lambda x: wnp.trapezoid(x, axis=0),
    "gradient": lambda x: wnp.gradient(x[0]),
    "meshgrid": lambda x: wnp.meshgrid(x[0], x[1])[0],
    "polyval": lambda x: wnp.polyval(x[0], x[1]),
    "convolve": lambda x: wnp.convolve(x[0], x[1]),
    "zeros_set": lambda x: _zs(x),
    "array_of": lambda x: wnp.array([x[0,0], 2*x[1,1]]),
    "expm": lambda x: wg.scipy.linalg.expm(0.1*x),
    "astype32": lambda x: x.astype(np.float32),
    "real": lambda x: wnp.real(wnp.fft.ifft(wnp.fft.fft(x))),
    "ptp": lambda x: wnp.ptp(x, axis=0),
    "minimum_grad": lambda x: wg.grad(lambda a: wnp.sum(wnp.minimum(a, a.T)))(x),
    "cov": lambda x: wnp.cov(x),
    "corrcoef": lambda x: wnp.corrcoef(x),
}


def _si(x):
    y = wnp.zeros_like(x); y[0] = x[1] * 2; y[:, 1] += x[:, 2]; return y


def _ip(x):
    y = x * 1.0; y *= 2.0; y[1:] -= x[:-1]; return y


def _zs(x):
    a = wnp.zeros((3, 3), like=x); a[0, 0] = x[1, 1]; return a


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_numpy_functions_equal_the_loop(name):
    f = COMPOSITES[name]
    X = np.random.default_rng(11).normal(size=(B, 3, 3))
    with np.errstate(all="ignore"):
        want = np.stack([np.asarray(f(x)) for x in X])
        got = np.asarray(wg.vmap(f)(X))
    _same(got, want)


ORDERS = {  # a sort order or a position read off the values: each example's own
    "sort": wnp.sort, "sort_axis0": lambda x: wnp.sort(x, axis=0),
    "sort_flat": lambda x: wnp.sort(x, axis=None), "partition": lambda x: wnp.partition(x, 1),
    "median": wnp.median, "quantile": lambda x: wnp.quantile(x, 0.3),
    "percentile": lambda x: wnp.percentile(x, 70, axis=1),
    "max_by_argmax": lambda x: x.ravel()[wnp.argmax(x)],
    "argsort_rows": lambda x: x[wnp.argsort(x[:, 0])],
    "interp": lambda x: wnp.interp(x, [-1.0, 0.0, 1.0], [0.0, 1.0, 4.0]),
    "interp_periodic": lambda x: wnp.interp(x, [-1.0, 0.0, 1.0], [0.0, 1.0, 4.0], period=3.0),
}


@pytest.mark.parametrize("name", sorted(ORDERS))
def test_orders_that_differ_by_example(name):
    f = ORDERS[name]
    X = np.random.default_rng(16).normal(size=(B, 3, 3))
    _same(wg.vmap(f)(X), np.stack([np.asarray(f(x)) for x in X]))
    g = wg.grad(lambda x: wnp.sum(f(x) ** 2))
    _same(wg.vmap(g)(X), np.stack([g(x) for x in X]))
    _same(wg.vmap(wnp.argmax)(X), X.reshape(B, -1).argmax(axis=1), exact=True)


def test_interp_with_sample_points_that_differ_by_example():
    rng = np.random.default_rng(18)
    X, XP = rng.normal(size=(B, 5)), np.sort(rng.normal(size=(B, 3)), axis=1)
    fp = np.array([0.0, 1.0, 4.0])
    f = lambda x, xp: wnp.interp(x, xp, fp)  # noqa: E731
    _same(wg.vmap(f)(X, XP), _loop(f, [X, XP], [0, 0]), exact=True)
    g = wg.grad(lambda x, xp: wnp.sum(f(x, xp) ** 2), argnums=(0, 1))
    got = wg.vmap(g)(X, XP)
    want = [g(X[i], XP[i]) for i in range(B)]
    for k in range(2):
        _same(got[k], np.stack([w[k] for w in want]))


def test_what_cannot_be_batched_says_so():
    X = np.random.default_rng(0).normal(size=(B, 3))
    # unique values: how many there are differs by example, and Python reads the count
    with pytest.raises(BatchedControlFlowError, match="loop over the examples"):
        wg.vmap(wnp.unique)(X)
    # a result whose shape depends on the values has no batch
    with pytest.raises(ValueError, match="different shapes"):
        wg.vmap(lambda x: wnp.flatnonzero(x > 0))(np.array([[1.0, -1.0], [1.0, 1.0]]))


def test_transforms_of_a_vmapped_function():
    rng = np.random.default_rng(12)
    W, X = rng.normal(size=(3, 2)), rng.normal(size=(B, 3))

    def per(x):
        return wnp.sum(wnp.sin(x @ W) ** 2)

    def batch(X):
        return wg.vmap(per)(X)
    # the Jacobian of a batch map is block diagonal: row i is per's gradient at X[i]
    J = np.zeros((B, B, 3))
    for i, x in enumerate(X):
        J[i, i] = wg.grad(per)(x)
    _same(wg.jacobian(batch, mode="forward")(X), J)
    _same(wg.jacobian(batch, mode="reverse")(X), J)
    _same(wg.jvp(batch, (X,), (np.ones_like(X),))[1], np.einsum("ijk,jk->i", J, np.ones_like(X)))
    H = wg.hessian(lambda X: wnp.sum(batch(X)))(X)
    for i, x in enumerate(X):
        _same(H[i, :, i], wg.hessian(per)(x))
    _same(wg.hvp(lambda X: wnp.sum(batch(X)), X, X), np.einsum("ijkl,kl->ij", H, X))
    c = wg.taylor(lambda s: wnp.sum(batch(X * s)), 1.0, 1.0, 3)
    want = wg.taylor(lambda s: sum(per(x * s) for x in X), 1.0, 1.0, 3)
    np.testing.assert_allclose(np.asarray(c, float), np.asarray(want, float), rtol=1e-12)
    _same(wg.grad(lambda X: wnp.sum(wg.checkpoint(batch)(X)))(X), J.sum(axis=0))
    g = wg.trace(lambda X: wnp.sum(batch(X)), X).grad()
    _same(g(X), J.sum(axis=0))


def test_per_example_gradients_with_integer_labels():
    # z[y], the JAX habit: each example's own label picks its logit
    def loss(params, x, y):
        (w1, b1), (w2, b2) = params
        z = wnp.tanh(x @ w1 + b1) @ w2 + b2
        return wsp.logsumexp(z) - z[y]
    rng = np.random.default_rng(15)
    params = _mlp_params(rng)
    X, Y = rng.normal(size=(B, 6)), np.array([0, 2, 1, 2])
    got = wg.vmap(wg.grad(loss), in_axes=(None, 0, 0))(params, X, Y)
    want = [wg.grad(loss)(params, X[i], Y[i]) for i in range(B)]
    for k in range(2):
        for j in range(2):
            _same(got[k][j], np.stack([w[k][j] for w in want]))


def test_custom_rules_and_stop_gradient_under_vmap():
    X = np.random.default_rng(17).normal(size=(B, 3))
    f = lambda x: wnp.sum(wg.stop_gradient(x) * x ** 2)  # noqa: E731
    _same(wg.vmap(wg.grad(f))(X), np.stack([wg.grad(f)(x) for x in X]))

    @wg.custom_vjp
    def g(x):
        return wnp.sin(x)
    g.defvjp(lambda x: (wnp.sin(x), wnp.cos(x)), lambda c, ct: (2.0 * c * ct,))
    h = lambda x: wnp.sum(g(x))  # noqa: E731
    _same(wg.vmap(h)(X), np.sin(X).sum(axis=1))
    _same(wg.vmap(wg.grad(h))(X), 2.0 * np.cos(X))  # the custom rule, per example
    _same(wg.grad(lambda X: wnp.sum(wg.vmap(h)(X)))(X), 2.0 * np.cos(X))

    @wg.custom_jvp
    def k(x):
        return wnp.exp(x)
    k.defjvp(lambda p, t: (wnp.exp(p[0]), 3.0 * t[0]))
    kk = lambda x: wnp.sum(k(x))  # noqa: E731
    _same(wg.vmap(wg.grad(kk))(X), np.full_like(X, 3.0))
    _same(wg.vmap(lambda t: wg.jvp(kk, (X[0],), (t,))[1])(np.eye(3)), np.full(3, 3.0))


def test_complex_values_under_vmap():
    rng = np.random.default_rng(20)
    Z = rng.normal(size=(B, 3)) + 1j * rng.normal(size=(B, 3))
    f = lambda z: wnp.sum(wnp.abs(z - 1.0) ** 2)  # noqa: E731  (real f: steepest ascent)
    _same(wg.vmap(wg.grad(f))(Z), np.stack([wg.grad(f)(z) for z in Z]))
    h = wg.grad(lambda z: wnp.sum(wnp.exp(z) * z), holomorphic=True)
    _same(wg.vmap(h)(Z), np.stack([h(z) for z in Z]))


@pytest.mark.parametrize("schedule", ["all", "ctz"])
def test_vmap_of_a_compiled_scan(schedule):
    """A scan traced into one loop node (wg.trace) and vmapped: the loop runs per example."""
    def f(w, x0):
        def step(c, _):
            return wnp.tanh(w * c) + c, None
        return wnp.sum(wg.scan(step, x0, length=9, checkpoint=schedule)[0])
    w = 0.7
    xs = np.random.default_rng(3).normal(size=(4, 3))
    g = wg.trace(wg.grad(f), w, xs[0])
    assert any(n.prim.name.startswith("scan_") for n in g.nodes if getattr(n, "prim", None))
    got = wg.vmap(g, in_axes=(None, 0))(w, xs)
    want = np.stack([wg.grad(f)(w, x) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12)


# -- one batching mechanism: several directions are vmap over one direction's pass ----------------
def _shape_recording_square():
    """``x ** 2`` as a primitive whose rules record the shapes they are given."""
    seen = []

    @wg.primitive
    def square(x):
        return x * x

    @square.frule
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        seen.append(("tangent", np.shape(x), dx.shape))
        return square(x), 2.0 * x * dx

    @square.rrule
    def _(x):
        def pullback(g):
            seen.append(("cotangent", np.shape(x), g.shape))
            return (2.0 * x * g,)
        return square(x), pullback
    return square, seen


@pytest.mark.parametrize("how", ["jacfwd", "jacrev", "hessian", "jvp_batched", "sparse_fwd",
                                 "sparse_rev", "vjp_stacked"])
def test_rules_see_one_direction_at_a_time(how):
    """Tangents and cotangents carry no batch axes: under every transform that pushes or
    pulls several directions, a rule gets one direction, of its primal's shape (the
    directions are vmap's values), and the results are the closed form's."""
    square, seen = _shape_recording_square()
    x = np.array([0.5, -1.0, 2.0])
    f = lambda x: wnp.sin(square(x))  # noqa: E731
    J = np.diag(2 * x * np.cos(x ** 2))
    if how == "jacfwd":
        np.testing.assert_allclose(wg.jacobian(f, mode="forward")(x), J, rtol=1e-13)
    elif how == "jacrev":
        np.testing.assert_allclose(wg.jacobian(f, mode="reverse")(x), J, rtol=1e-13)
    elif how == "hessian":
        H = np.diag(2 * np.cos(x ** 2) - 4 * x ** 2 * np.sin(x ** 2))
        np.testing.assert_allclose(wg.hessian(lambda x: wnp.sum(f(x)))(x), H, rtol=1e-12)
    elif how == "jvp_batched":
        V = np.arange(6.0).reshape(2, 3)
        np.testing.assert_allclose(wg.jvp(f, (x,), (V,), batched=True)[1], V @ J.T,
                                   rtol=1e-13)
    elif how in ("sparse_fwd", "sparse_rev"):
        Js = wg.sparse_jacobian(f, mode="forward" if how == "sparse_fwd" else "reverse")(x)
        np.testing.assert_allclose(Js.toarray(), J, rtol=1e-13)
    else:
        out, pb = wg.vjp(f, x)
        W = np.arange(6.0).reshape(2, 3)
        np.testing.assert_allclose(pb(W)[0], W @ J, rtol=1e-13)
    assert seen and all(shape == got for _, shape, got in seen), seen


def test_no_rule_addresses_batch_axes():
    """The issue's check: no ``nb`` (a count of leading batch axes) in the rules."""
    import pathlib
    import re
    root = pathlib.Path(rules.__file__).parent
    hits = [f"{p.name}:{i}" for p in sorted(root.glob("*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"\bnb\b", line)]
    assert hits == []


def test_a_custom_rule_that_needs_plain_arrays_runs_once_per_direction():
    """A custom_jvp / custom_vjp rule that converts its tangent to NumPy (np.asarray: no
    batch can go through it) runs once per direction under jacobian: BatchTrace's loop."""
    @wg.custom_jvp
    def f(x):
        return wnp.sin(x)

    @f.defjvp
    def _(primals, tangents):
        (x,), (dx,) = primals, tangents
        return f(x), wnp.cos(x) * np.asarray(dx)

    @wg.custom_vjp
    def g(x):
        return wnp.sin(x)

    g.defvjp(lambda x: (g(x), x), lambda x, ct: (np.cos(x) * np.asarray(ct),))
    x = np.array([0.3, 1.2])
    for h in (f, g):
        np.testing.assert_allclose(wg.jacobian(h, mode="reverse" if h is g else "forward")(x),
                                   np.diag(np.cos(x)), rtol=1e-14)


def test_per_example_call_stacks_results_and_zeros():
    """A function that takes plain arrays only, on a batch: once per example, the results
    stacked; a zero (None) for some examples is an array of zeros, for all of them None."""
    from wengert.batching import per_example_call

    def fn(t):
        t = np.asarray(t)  # no batch goes through this
        return None, (t * 2.0 if t.sum() > 0 else None)
    f = wg.vmap(lambda t: per_example_call(fn, t)[1])
    np.testing.assert_allclose(f(np.array([[1.0, 2.0], [-3.0, 1.0], [3.0, 4.0]])),
                               [[2.0, 4.0], [0.0, 0.0], [6.0, 8.0]])
    assert wg.vmap(lambda t: per_example_call(fn, t)[0] is None and t)(np.ones((2, 1))) \
        .shape == (2, 1)
    assert per_example_call(fn, np.array([1.0]))[1] == pytest.approx([2.0])
