"""What users coming from autograd, JAX or PyTorch write (issue 21, item 4): lists holding
traced values, ``wnp.r_``/``wnp.c_``, ``astype(int)``, dataclass and registered pytrees,
``wg.hvp(f)(x, v)``, batched ``wg.jvp``, ``Var.item()``, size-1 outputs to ``grad``."""
import dataclasses

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp

X = np.array([0.3, -1.2, 0.8])


# -- lists holding traced values ----------------------------------------------------------------
# each: a function of x built from a list of traced values, and the same function written with
# an explicit wnp.stack (the reference: what NumPy would compute from the list)
LISTS = {
    "sin": (lambda x: wnp.sin([x[0], 2 * x[1], 3.0]),
            lambda x: wnp.sin(wnp.stack([x[0], 2 * x[1], 3.0]))),
    "add": (lambda x: wnp.add([x[0], x[1]], x[2]), lambda x: wnp.stack([x[0], x[1]]) + x[2]),
    "multiply": (lambda x: wnp.multiply([x[0], x[1]], [x[2], 2.0]),
                 lambda x: wnp.stack([x[0], x[1]]) * wnp.stack([x[2], 2.0])),
    "dot": (lambda x: wnp.dot([x[0], x[1]], [x[2], x[0]]),
            lambda x: x[0] * x[2] + x[1] * x[0]),
    "matmul": (lambda x: wnp.matmul([[x[0], x[1]], [1.0, x[2]]], [x[2], 1.0]),
               lambda x: wnp.stack([x[0] * x[2] + x[1], x[2] + x[2]])),
    "outer": (lambda x: wnp.outer([x[0], x[1]], [x[2], 1.0]),
              lambda x: wnp.reshape(wnp.stack([x[0] * x[2], x[0], x[1] * x[2], x[1]]), (2, 2))),
    "einsum": (lambda x: wnp.einsum("i,i->", [x[0], x[1]], [x[2], 1.0]),
               lambda x: x[0] * x[2] + x[1]),
    "linalg.norm": (lambda x: wnp.linalg.norm([x[0], 2 * x[1]]),
                    lambda x: wnp.sqrt(x[0] ** 2 + 4 * x[1] ** 2)),
    "linalg.det": (lambda x: wnp.linalg.det([[x[0], x[1]], [1.0, x[2]]]),
                   lambda x: x[0] * x[2] - x[1]),
    "append": (lambda x: wnp.append([x[0], x[1]], [x[2], 1.0]),
               lambda x: wnp.stack([x[0], x[1], x[2], 1.0])),
    "append tracer": (lambda x: wnp.append(x, [x[0] * x[1]]),
                      lambda x: wnp.concatenate([x, wnp.reshape(x[0] * x[1], (1,))])),
    "concatenate": (lambda x: wnp.concatenate([[x[0], x[1]], x]),
                    lambda x: wnp.concatenate([x[:2], x])),
    "hstack": (lambda x: wnp.hstack([[x[0], x[1]], x]), lambda x: wnp.concatenate([x[:2], x])),
    "ravel": (lambda x: wnp.ravel([[x[0], x[1]], [x[2], 1.0]]),
              lambda x: wnp.stack([x[0], x[1], x[2], 1.0])),
    "reshape": (lambda x: wnp.reshape([x[0], x[1]], (2, 1)),
                lambda x: wnp.reshape(x[:2], (2, 1))),
    "transpose": (lambda x: wnp.transpose([[x[0], x[1]], [x[2], 1.0]]),
                  lambda x: wnp.reshape(wnp.stack([x[0], x[2], x[1], 1.0]), (2, 2))),
    "flip": (lambda x: wnp.flip([x[0], x[1]]), lambda x: wnp.stack([x[1], x[0]])),
    "sort": (lambda x: wnp.sort([x[0], x[1], x[2]]), lambda x: wnp.sort(x)),
    "squeeze": (lambda x: wnp.squeeze([[x[0], x[1]]]), lambda x: x[:2]),
    "atleast_2d": (lambda x: wnp.atleast_2d([x[0], x[1]]), lambda x: wnp.reshape(x[:2], (1, 2))),
    "trace": (lambda x: wnp.trace([[x[0], x[1]], [x[2], 1.0]]), lambda x: x[0] + 1.0),
    "clip": (lambda x: wnp.clip([x[0], x[1]], -1.0, 1.0),
             lambda x: wnp.clip(x[:2], -1.0, 1.0)),
    "sum": (lambda x: wnp.sum([x[0], x[1] ** 2]), lambda x: x[0] + x[1] ** 2),
    "copy": (lambda x: wnp.copy([x[0], x[1]]), lambda x: x[:2]),
    "diag": (lambda x: wnp.diag([x[0], x[1]]),
             lambda x: wnp.reshape(wnp.stack([x[0], 0.0, 0.0, x[1]]), (2, 2))),
    "triu": (lambda x: wnp.triu([[x[0], x[1]], [x[2], 1.0]]),
             lambda x: wnp.reshape(wnp.stack([x[0], x[1], 0.0, 1.0]), (2, 2))),
    "tile": (lambda x: wnp.tile([x[0], x[1]], 2), lambda x: wnp.concatenate([x[:2], x[:2]])),
    "roll": (lambda x: wnp.roll([x[0], x[1], x[2]], 1), lambda x: wnp.stack([x[2], x[0], x[1]])),
    "swapaxes": (lambda x: wnp.swapaxes([[x[0], x[1]]], 0, 1),
                 lambda x: wnp.reshape(x[:2], (2, 1))),
    "expand_dims": (lambda x: wnp.expand_dims([x[0], x[1]], 0),
                    lambda x: wnp.reshape(x[:2], (1, 2))),
    "nanmax": (lambda x: wnp.nanmax([x[0], x[1], x[2]]), lambda x: wnp.max(x)),
    "array_split": (lambda x: wnp.array_split([x[0], x[1]], 2)[1], lambda x: x[1:2]),
    "compress": (lambda x: wnp.compress([True, False, True], [x[0], x[1], x[2]]),
                 lambda x: wnp.stack([x[0], x[2]])),
    "array": (lambda x: wnp.array([x[0], 2 * x[1]]), lambda x: wnp.stack([x[0], 2 * x[1]])),
    "array nested": (lambda x: wnp.array([[x[0], 1.0], [x[1], x[2]]]),
                     lambda x: wnp.reshape(wnp.stack([x[0], 1.0, x[1], x[2]]), (2, 2))),
}


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_list_holding_traced_values_is_an_array(name):
    f, ref = LISTS[name]
    np.testing.assert_allclose(f(X), ref(X), rtol=0, atol=1e-15)  # plain values: NumPy's
    loss = lambda x: wnp.sum(wnp.sin(f(x)))  # noqa: E731
    np.testing.assert_allclose(wg.grad(loss)(X), wg.grad(lambda x: wnp.sum(wnp.sin(ref(x))))(X),
                               rtol=1e-13, atol=1e-15)
    wg.check_grad(loss, X, order=2)


def test_numpy_functions_given_a_traced_argument_dispatch_with_lists_beside_it():
    # NEP 18 hands np.append the tracer (a direct argument) and the list beside it
    f = lambda x: np.sum(np.append(x, [x[0] * x[1], 2.0]))  # noqa: E731
    np.testing.assert_allclose(wg.grad(f)(X), [1 + X[1], 1 + X[0], 1.0])
    g = lambda x: np.dot([x[0], x[1]], x[1:])  # noqa: E731
    np.testing.assert_allclose(wg.grad(g)(X), [X[1], X[0] + X[2], X[1]])
    wg.check_grad(f, X, order=2)


@pytest.mark.parametrize("call, ours", [
    (lambda x: np.r_[x, 2 * x], "wnp.r_"),
    (lambda x: np.c_[x, 2 * x], "wnp.r_"),
    (lambda x: np.linalg.norm([x[0], x[1]]), "norm"),
    (lambda x: np.array([x[0], 2 * x[1]]), "wnp.array([x, y])"),
    (lambda x: np.sin([x[0], x[1]]), "wnp.sin([x, y])"),
])
def test_numpy_calls_that_never_dispatch_say_which_wnp_function_to_call(call, ours):
    # NumPy converts a list (or an np.r_ item) itself: NEP 18 never sees what it holds
    for transform in (wg.grad, lambda f: lambda x: wg.jvp(f, (x,), (X,))[1]):
        with pytest.raises(TypeError, match="NumPy") as e:
            transform(lambda x: wnp.sum(call(x)))(X)
        assert ours in str(e.value)


# -- wnp.r_ and wnp.c_ -------------------------------------------------------------------------
CONCAT = [
    lambda x: wnp.r_[x, 2 * x],
    lambda x: wnp.r_[x, 3.0, 1:3, [x[0], 7.0]],
    lambda x: wnp.r_[x[0], x[1]],
    lambda x: wnp.r_[x, 2],
    lambda x: wnp.r_[0:1:3j, x],
    lambda x: wnp.r_["0,2", x, 2 * x],
    lambda x: wnp.r_["0,2,0", x, 2 * x],
    lambda x: wnp.r_["1,2,0", x, 2 * x],
    lambda x: wnp.r_["-1", x, x],
    lambda x: wnp.c_[x, 2 * x],
    lambda x: wnp.c_[x, np.ones(3)],
    lambda x: wnp.c_[wnp.outer(x, x), x],
]


@pytest.mark.parametrize("k", range(len(CONCAT)))
def test_r_and_c_on_traced_values_give_numpys_array_and_its_derivative(k):
    f = CONCAT[k]
    seen = []

    def loss(x):
        out = f(x)
        seen.append((out.shape, out.dtype))
        return wnp.sum(wnp.sin(out) * np.arange(out.size).reshape(out.shape))
    plain = f(X)  # no traced item: NumPy's own r_ / c_
    wg.grad(loss)(X)
    assert seen[-1] == (plain.shape, plain.dtype)
    tape = wg.Tape()
    v = tape.var(X)
    with tape.active():
        np.testing.assert_array_equal(f(v).value, plain)
    wg.check_grad(loss, X, order=2)


def test_r_with_bad_directives_raises_as_numpy_does():
    with pytest.raises(ValueError, match="first entry"):
        wg.grad(lambda x: wnp.sum(wnp.r_[x, "0,2"]))(X)
    with pytest.raises(ValueError, match="unknown special directive"):
        wg.grad(lambda x: wnp.sum(wnp.r_["a,b", x]))(X)
    with pytest.raises(NotImplementedError, match="matrix"):
        wg.grad(lambda x: wnp.sum(wnp.r_["r", x]))(X)


# -- integer casts: plain integers, no derivative, never an error ---------------------------------
CASTS = {
    "astype(int)": lambda x: x * x.astype(int),
    "astype(np.int64)": lambda x: x ** 2 * x.astype(np.int64),
    "wnp.asarray(dtype=int)": lambda x: x * wnp.asarray(x, dtype=int),
    "np.asarray(dtype=int)": lambda x: x * np.asarray(x, dtype=int),
    "wnp.array(dtype=np.int32)": lambda x: x * wnp.array(x, dtype=np.int32),
}
XC = np.array([1.3, 2.7, -0.4])


@pytest.mark.parametrize("name", sorted(CASTS))
def test_an_integer_cast_of_a_traced_value_is_a_constant_in_every_engine(name):
    c = CASTS[name]
    f = lambda x: wnp.sum(c(x))  # noqa: E731
    n = XC.astype(int)
    k = 2 if "int64" in name else 1  # x**2 * n or x * n
    want = k * XC ** (k - 1) * n
    np.testing.assert_allclose(wg.grad(f)(XC), want)
    np.testing.assert_allclose([wg.jvp(f, (XC,), (e,))[1] for e in np.eye(3)], want)
    np.testing.assert_allclose(wg.jvp(f, (XC,), (np.eye(3),), batched=True)[1], want)
    np.testing.assert_allclose(wg.hessian(f)(XC), np.diag(k * (k - 1) * n))
    np.testing.assert_allclose(wg.trace(wg.grad(f), XC)(XC), want)
    compiled = wg.compile(wg.grad(f))
    np.testing.assert_allclose(compiled(XC), want)
    y = XC + 1.0  # other integers: retraced or guarded, never the first call's constant
    np.testing.assert_allclose(compiled(y), k * y ** (k - 1) * y.astype(int))
    t = wg.taylor(f, XC, np.ones(3), 2)
    np.testing.assert_allclose(t[1], np.sum(want))
    wg.check_grad(f, XC, order=2)


def test_an_integer_cast_gives_integers():
    seen = []

    def f(x):
        seen.append(np.asarray(x, dtype=int))
        i = x.astype(int)
        seen.append(wg.core.plain(i).dtype)
        return wnp.sum(x * i)
    wg.grad(f)(XC)
    assert seen[0].dtype == int and type(seen[0]) is np.ndarray
    np.testing.assert_array_equal(seen[0], XC.astype(int))
    assert seen[1] == np.dtype(int)


def test_a_float_conversion_still_raises():
    with pytest.raises(TypeError, match="derivative"):
        wg.grad(lambda x: wnp.sum(x * np.asarray(x)))(XC)
    with pytest.raises(TypeError, match="derivative"):
        wg.grad(lambda x: wnp.sum(x * np.asarray(x, dtype=float)))(XC)
    with pytest.raises(TypeError, match="wnp.sin"):
        wg.grad(lambda x: float(x))(1.5)


# -- pytrees: dataclasses and registered types ---------------------------------------------------
@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: float


@dataclasses.dataclass(frozen=True)
class Frozen:
    w: np.ndarray
    b: float
    name: str = dataclasses.field(default="layer", metadata={"static": True})

    def __post_init__(self):  # not run on rebuilt ones: leaves may be tracers
        if not isinstance(self.name, str):
            raise TypeError("name")


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


wg.tree.register(Pair, lambda p: ((p.a, p.b), "pair"), lambda aux, ch: Pair(*ch))


def _loss(p):
    w, b = (p.w, p.b) if not isinstance(p, Pair) else (p.a, p.b)
    return wnp.sum(wnp.sin(w) * b) + b ** 2


def _vec(tree):
    return np.concatenate([np.ravel(x) for x in wg.tree.leaves(tree)])


@pytest.mark.parametrize("make", [Params, Frozen, Pair], ids=["dataclass", "frozen", "register"])
def test_every_transform_goes_through_dataclasses_and_registered_types(make):
    w = np.array([0.3, 0.7])
    p, v = make(w, 1.5), make(np.array([1.0, -2.0]), 0.5)
    flat = lambda q: _loss(make(q[:2], q[2]))  # noqa: E731  the dense reference
    q, qv = np.r_[w, 1.5], np.r_[1.0, -2.0, 0.5]
    g = wg.grad(_loss)(p)
    assert type(g) is make
    np.testing.assert_allclose(_vec(g), wg.grad(flat)(q), rtol=1e-14)
    out, t = wg.jvp(_loss, (p,), (v,))
    np.testing.assert_allclose(t, wg.grad(flat)(q) @ qv, rtol=1e-14)
    _, pb = wg.vjp(_loss, p)
    (gp,) = pb(1.0)
    assert type(gp) is make
    np.testing.assert_allclose(_vec(gp), wg.grad(flat)(q), rtol=1e-14)
    H = wg.hessian(flat)(q)
    for hv in (wg.hvp(_loss, p, v), wg.hvp(_loss)(p, v)):
        assert type(hv) is make
        np.testing.assert_allclose(_vec(hv), H @ qv, rtol=1e-13)
    h = wg.hessian(_loss)(p)  # a tree of trees, as JAX's
    assert type(h) is make
    np.testing.assert_allclose(np.sort(_vec(h)), np.sort(H.ravel()), rtol=1e-13)
    wb = (lambda r: r.w * r.b) if make is not Pair else (lambda r: r.a * r.b)
    J = wg.jacobian(wb)(p)
    assert type(J) is make
    np.testing.assert_allclose(_vec(J), np.r_[np.diag([1.5, 1.5]).ravel(), w])
    wg.check_grad(_loss, p, order=2)
    compiled = wg.compile(wg.grad(_loss))
    np.testing.assert_allclose(_vec(compiled(p)), wg.grad(flat)(q), rtol=1e-14)
    p2 = make(np.array([-1.0, 2.0]), 0.25)
    np.testing.assert_allclose(_vec(compiled(p2)), wg.grad(flat)(np.r_[-1.0, 2.0, 0.25]),
                               rtol=1e-14)


def test_frozen_dataclass_keeps_its_static_fields_and_skips_post_init():
    p = Frozen(np.array([0.3, 0.7]), 1.5, "dense")
    g = wg.grad(_loss)(p)
    assert g.name == "dense" and isinstance(g, Frozen)
    leaves, d = wg.tree.flatten(p)
    assert len(leaves) == 2
    assert wg.tree.unflatten(d, leaves) == p
    assert wg.tree.structure(p) != wg.tree.structure(Frozen(p.w, p.b, "other"))


def test_tree_functions():
    tree = {"a": Params(np.ones(2), 2.0), "b": [Pair(1.0, 2.0)]}
    doubled = wg.tree.map(lambda x: x * 2, tree)
    assert doubled["a"].b == 4.0 and doubled["b"][0].b == 4.0
    assert len(wg.tree.leaves(tree)) == 4
    with pytest.raises(ValueError, match="pytree already"):
        wg.tree.register(tuple, lambda t: (t, None), lambda a, c: tuple(c))
    with pytest.raises(TypeError, match="flatten"):
        wg.tree.register(Params, None, None)


def test_an_int_field_is_not_differentiable():
    @dataclasses.dataclass
    class Bad:
        w: np.ndarray
        n: int
    with pytest.raises(TypeError, match="integer"):
        wg.grad(lambda p: wnp.sum(p.w) * p.n)(Bad(np.ones(2), 3))


# -- hvp curried, jvp batched ------------------------------------------------------------------
def _f(x):
    return wnp.sum(wnp.sin(x) * x ** 2) + x[0] * x[1] * x[2]


def test_hvp_curried_equals_hvp_and_the_hessian():
    v = np.array([1.0, -0.5, 2.0])
    H = wg.hessian(_f)(X)
    np.testing.assert_allclose(wg.hvp(_f)(X, v), H @ v, rtol=1e-13)
    np.testing.assert_array_equal(wg.hvp(_f)(X, v), wg.hvp(_f, X, v))
    assert wg.hvp(_f).__name__ == "_f"
    with pytest.raises(TypeError, match="f alone"):
        wg.hvp(_f, X)


def test_jvp_batched_equals_a_loop_of_jvps():
    V = np.random.default_rng(0).standard_normal((4, 3))
    g = lambda x, y: (wnp.sin(x) * y, wnp.sum(x * y))  # noqa: E731
    Y = np.array([0.5, 1.5, -2.0])
    out, t = wg.jvp(g, (X, Y), (V, V[::-1]), batched=True)
    for k in range(4):
        o, tk = wg.jvp(g, (X, Y), (V[k], V[::-1][k]))
        np.testing.assert_array_equal(out[0], o[0])
        np.testing.assert_allclose(t[0][k], tk[0], rtol=1e-14)
        np.testing.assert_allclose(t[1][k], tk[1], rtol=1e-14)
    assert t[0].shape == (4, 3) and t[1].shape == (4,)
    # a float primal takes a (k,) tangent; unchanged outputs get zero tangents of shape (k,)
    o, t = wg.jvp(lambda a, c: (a * a, c), (1.5, 2.0), (np.array([1.0, 2.0]), np.zeros(2)),
                  batched=True)
    np.testing.assert_allclose(t[0], [3.0, 6.0])
    np.testing.assert_array_equal(t[1], [0.0, 0.0])
    # the jacobian, by the identity
    np.testing.assert_allclose(wg.jvp(wnp.sin, (X,), (np.eye(3),), batched=True)[1],
                               np.diag(np.cos(X)))


def test_jvp_batched_shapes_are_checked():
    with pytest.raises(ValueError, match="batched=True"):
        wg.jvp(wnp.sin, (X,), (np.eye(3),))
    with pytest.raises(ValueError, match="same k"):
        wg.jvp(lambda a, b: a * b, (X, X), (np.ones((2, 3)), np.ones((3, 3))), batched=True)
    with pytest.raises(ValueError, match=r"\(k,\)"):
        wg.jvp(wnp.sin, (X,), (X,), batched=True)


# -- Var.item(), size-1 outputs ----------------------------------------------------------------
def test_item_is_the_plain_number_without_its_derivative():
    t = wg.Tape()
    x = t.var(2.5)
    y = x * 3.0
    assert y.item() == 7.5 and type(y.item()) is float
    assert t.var(np.array([[4.0]])).item() == 4.0
    # used as a constant: its derivative is not followed (as torch's .item())
    assert wg.grad(lambda a: a * a.item())(3.0) == 3.0
    assert wg.derivative(lambda a: a * a.item())(3.0) == 3.0
    with pytest.raises(TypeError, match="wnp"):
        float(y)


@pytest.mark.parametrize("shape", [(1,), (1, 1)])
def test_a_size_one_output_to_grad_raises_saying_to_sum_or_index(shape):
    with pytest.raises(ValueError, match=r"shape \(\)") as e:
        wg.grad(lambda x: wnp.reshape(x[0] * x[1], shape))(X)
    assert ".sum()" in str(e.value) and "[0" in str(e.value)
    with pytest.raises(ValueError, match="jacobian"):  # a larger one: the usual message
        wg.grad(lambda x: x * 2)(X)
    g = wg.grad(lambda x: wnp.reshape(x[0] * x[1], shape).sum())(X)
    np.testing.assert_allclose(g, [X[1], X[0], 0.0])


def test_average_takes_its_weights_as_a_list():
    """``wnp.average(x, weights=[...])``: a list of weights, plain or traced, is an array."""
    f = lambda x: wnp.average(x, weights=[1.0, 2.0, 3.0])
    np.testing.assert_allclose(wg.grad(f)(np.ones(3)), np.array([1.0, 2.0, 3.0]) / 6.0,
                               rtol=1e-15)
    wg.check_grad(f, np.arange(3.0), order=2)
    wg.check_grad(lambda x: wnp.sum(wnp.average(x, axis=1, weights=[1.0, 2.0, 3.0])),
                  np.ones((2, 3)), order=2)
    wg.check_grad(lambda w: wnp.average(np.arange(3.0), weights=[w, 2 * w, 1.0]), 0.5, order=2)
