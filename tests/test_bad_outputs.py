"""Issue 28 §3: an output that is not numbers is an error, never a zero gradient; repeated
argnums give the same derivative at each position (as JAX); arguments of the wrong type get
a message that says what they must be; source mode takes nested pytrees as ``wg.grad`` does.
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp


def forgets_return(x):
    x * 2.0  # noqa: B018 (the mistake under test)


def returns_string(x):
    return "loss"


def returns_generator(x):
    return (x * k for k in range(3))


def returns_strings(x):
    return ["a", "b"]


def returns_dict_with_string(x):
    return {"loss": x * x, "note": "ok"}


BAD = {
    "None": (forgets_return, r"returned None \(a missing `return`\?\)"),
    "str": (returns_string, r"returned str 'loss'"),
    "generator": (returns_generator, r"returned generator .*a generator"),
    "list of str": (returns_strings, r"returned list \['a', 'b'\], which holds str 'a'"),
    "dict with a str": (returns_dict_with_string, r"which holds str 'ok'"),
}

# every transform that reads an output, as a call of f at the float 1.5 (or an array)
TRANSFORMS = {
    "grad": lambda f: wg.grad(f)(1.5),
    "value_and_grad": lambda f: wg.value_and_grad(f)(1.5),
    "grad has_aux": lambda f: wg.grad(lambda x: (f(x), 0.0), has_aux=True)(1.5),
    "vjp": lambda f: wg.vjp(f, 1.5),
    "jvp": lambda f: wg.jvp(f, (1.5,), (1.0,)),
    "derivative": lambda f: wg.derivative(f)(1.5),
    "jacobian auto": lambda f: wg.jacobian(f)(np.ones(3)),
    "jacobian forward": lambda f: wg.jacobian(f, mode="forward")(np.ones(3)),
    "jacobian reverse": lambda f: wg.jacobian(f, mode="reverse")(np.ones(3)),
    "jacfwd": lambda f: wg.jacfwd(f)(np.ones(3)),
    "jacrev": lambda f: wg.jacrev(f)(np.ones(3)),
    "hessian": lambda f: wg.hessian(f)(1.5),
    "hvp": lambda f: wg.hvp(f, 1.5, 1.0),
    "taylor": lambda f: wg.taylor(f, 1.5, 1.0, 2),
    "checkpoint": lambda f: wg.grad(wg.checkpoint(f))(1.5),
    "compile(grad)": lambda f: wg.compile(wg.grad(f))(1.5),
    "graph grad": lambda f: wg.trace(f, 1.5).grad()(1.5),
    "sparse_jacobian": lambda f: wg.sparse_jacobian(f)(np.ones(3)),
    "sparse_jacobian given pattern": lambda f: wg.sparse_jacobian(
        f, sparsity=np.eye(3, dtype=bool))(np.ones(3)),
}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("bad", list(BAD))
def test_bad_output_raises_value_error_naming_it(transform, bad):
    f, what = BAD[bad]
    with pytest.raises(ValueError, match=what) as info:
        TRANSFORMS[transform](f)
    assert "return a number or an array of numbers" in str(info.value) or \
        "return the number or array of numbers" in str(info.value)


@pytest.mark.parametrize("bad", list(BAD))
def test_source_grad_of_a_bad_output_raises(bad):
    f, what = BAD[bad]
    if bad in ("None", "generator", "dict with a str"):
        # refused when source mode reads the function: no return, a generator
        # expression, a dict display
        with pytest.raises(wg.source.SourceError):
            wg.source.grad(f)
        return
    with pytest.raises(ValueError, match=what):
        wg.source.grad(f)(1.5)


def returns_none_explicitly(x):
    y = x * 2.0  # noqa: F841
    return None


def test_source_grad_of_an_explicit_none_raises():
    with pytest.raises(ValueError, match="returned None"):
        wg.source.grad(returns_none_explicitly)(1.5)


def test_numbers_of_every_kind_are_still_outputs():
    """What the check must let through: constants, ints in a container, 0-d arrays."""
    assert wg.grad(lambda x: 2.0)(1.5) == 0.0
    assert wg.grad(lambda x: np.float32(2.0) * x)(1.5) == 2.0
    out, pb = wg.vjp(lambda x: (x, None, 3), 1.5)
    assert out == (1.5, None, 3)
    assert wg.jvp(lambda x: {"a": x, "n": np.arange(2)}, (1.5,), (1.0,))[1]["a"] == 1.0
    assert wg.source.grad(lambda_constant)(1.5) == 0.0


def lambda_constant(x):
    return 2.0


# -- repeated argnums: as JAX, the same derivative at each position ----------------------------
def mul(a, b):
    return a * b


def test_grad_repeated_argnums_gives_the_derivative_at_each_position():
    assert wg.grad(mul, argnums=(0, 0))(2.0, 3.0) == (3.0, 3.0)
    assert wg.grad(mul, argnums=(1, 0, 1))(2.0, 3.0) == (2.0, 3.0, 2.0)
    v, g = wg.value_and_grad(mul, argnums=(0, 1, 0))(2.0, 3.0)
    assert type(v) is float and v == 6.0 and g == (3.0, 2.0, 3.0)
    x = {"w": np.array([1.0, 2.0])}
    g = wg.grad(lambda p, c: wnp.sum(p["w"] ** 2) * c, argnums=(0, 0))(x, 3.0)
    np.testing.assert_allclose(g[0]["w"], [6.0, 12.0])
    np.testing.assert_allclose(g[1]["w"], [6.0, 12.0])
    assert g[0]["w"] is not x["w"]


@pytest.mark.parametrize("mode", ["forward", "reverse", "auto"])
def test_jacobian_repeated_argnums(mode):
    a, b = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    J = wg.jacobian(mul, argnums=(0, 1, 0), mode=mode)(a, b)
    np.testing.assert_allclose(J[0], np.diag(b))
    np.testing.assert_allclose(J[1], np.diag(a))
    np.testing.assert_allclose(J[2], np.diag(b))


def test_hessian_and_graph_and_source_repeated_argnums():
    def f(a, b):
        return a * a * b
    H = wg.hessian(f, argnums=(0, 0))(2.0, 3.0)
    assert H == ((6.0, 6.0), (6.0, 6.0))
    assert wg.trace(mul, 2.0, 3.0).grad(argnums=(0, 0))(2.0, 3.0) == (3.0, 3.0)
    assert wg.source.grad(mul, argnums=(0, 0))(2.0, 3.0) == (3.0, 3.0)


# -- arguments of the wrong type --------------------------------------------------------------
@pytest.mark.parametrize("argnums", [1.5, "x", True, [0, 1.0], None])
@pytest.mark.parametrize("make", [
    lambda a: wg.grad(mul, argnums=a),
    lambda a: wg.value_and_grad(mul, argnums=a),
    lambda a: wg.jacobian(mul, argnums=a),
    lambda a: wg.jacfwd(mul, argnums=a),
    lambda a: wg.jacrev(mul, argnums=a),
    lambda a: wg.hessian(mul, argnums=a),
    lambda a: wg.source.grad(mul, argnums=a),
    lambda a: wg.sparse_jacobian(mul, argnums=a)(np.ones(2), np.ones(2)),
    lambda a: wg.sparse_hessian(mul, argnums=a)(np.ones(2), np.ones(2)),
    lambda a: wg.trace(mul, 2.0, 3.0).grad(argnums=a),
], ids=["grad", "value_and_grad", "jacobian", "jacfwd", "jacrev", "hessian", "source.grad",
        "sparse_jacobian", "sparse_hessian", "graph grad"])
def test_argnums_of_the_wrong_type_says_what_it_must_be(make, argnums):
    with pytest.raises(TypeError, match="argnums must be an int or a tuple of ints"):
        make(argnums)


def test_argnums_numpy_integer_is_an_int():
    assert wg.grad(mul, argnums=np.int64(1))(2.0, 3.0) == 2.0


@pytest.mark.parametrize("primals, tangents", [
    (1.0, 1.0), (np.ones(2), np.ones(2)), ((1.0,), 1.0), (1.0, (1.0,))])
def test_jvp_needs_tuples_of_primals_and_tangents(primals, tangents):
    with pytest.raises(TypeError, match="primals and the tangents as tuples"):
        wg.jvp(lambda x: x * x, primals, tangents)


def test_jvp_takes_lists_too():
    assert wg.jvp(lambda x: x * x, [3.0], [1.0]) == (9.0, 6.0)


# -- nested pytrees in source mode ------------------------------------------------------------
def nested_dict(p):
    return p["i"]["j"] * 2.0


def nested_tuple(p):
    return p[0][1] * 2.0


def copied(p):
    q = p
    return q["i"] * 2.0


def read_twice(p):
    a = p["i"]
    b = p["i"]
    return a["j"] * b["k"]


def in_a_loop(p):
    s = 0.0
    for k in range(3):
        a = p["i"]
        s = s + a["j"] * k
    return s


def mixed_with_arrays(p):
    return wnp.sum(p["w"] * p["x"][0]) + p["x"][1]["b"] ** 2


def unpacked(p):
    a, b = p
    return a[0] * b["z"]


def deep(p):
    return p[1][0][0] * p[1][1]


def copied_nested(p):
    q = p
    return q["i"]["j"] * 3.0


def part_unread(p):
    return p["i"]["j"] * 2.0 + p["i"]["k"][1] ** 2


def calls_a_user_function(p):
    return part_unread(p) + copied_nested(p) * wnp.sum(p["w"])


NESTED = [
    (copied_nested, {"i": {"j": 3.0, "k": (1.0, 2.0)}}),
    (part_unread, {"i": {"j": 3.0, "k": (1.0, 2.0)}}),
    (calls_a_user_function, {"i": {"j": 3.0, "k": (1.0, 2.0)}, "w": np.array([0.5, 2.0])}),
    (nested_dict, {"i": {"j": 3.0}}),
    (nested_tuple, ((1.0, 3.0),)),
    (nested_tuple, [[1.0, 3.0]]),
    (copied, {"i": 3.0}),
    (read_twice, {"i": {"j": 3.0, "k": 5.0}}),
    (in_a_loop, {"i": {"j": 3.0}}),
    (mixed_with_arrays, {"w": np.arange(3.0), "x": (np.ones(3), {"b": 2.0})}),
    (unpacked, ((2.0, 1.0), {"z": 4.0})),
    (deep, (1.0, ([2.0], 3.0))),
]


def _same(a, b):
    la, da = wg.tree.flatten(a)
    lb, db = wg.tree.flatten(b)
    assert da == db
    for x, y in zip(la, lb):
        assert isinstance(x, float) if type(y) is float else type(x) is type(y)
        np.testing.assert_allclose(x, y)


@pytest.mark.parametrize("f, x", NESTED, ids=[f.__name__ + str(i) for i, (f, _) in
                                              enumerate(NESTED)])
def test_source_grad_of_nested_pytrees_is_grads(f, x):
    _same(wg.source.grad(f)(x), wg.grad(f)(x))


def test_source_grad_nested_dict_closed_form():
    assert wg.source.grad(nested_dict)({"i": {"j": 3.0}}) == {"i": {"j": 2.0}}
    assert wg.source.grad(read_twice)({"i": {"j": 3.0, "k": 5.0}}) == \
        {"i": {"j": 5.0, "k": 3.0}}
    assert wg.source.grad(in_a_loop)({"i": {"j": 3.0}}) == {"i": {"j": 3.0}}


# -- what is not a function, a length that is not a count -----------------------------------
@pytest.mark.parametrize("make", [
    lambda v: wg.grad(v), lambda v: wg.value_and_grad(v), lambda v: wg.jacobian(v),
    lambda v: wg.jacfwd(v), lambda v: wg.jacrev(v), lambda v: wg.hessian(v),
    lambda v: wg.hvp(v), lambda v: wg.derivative(v), lambda v: wg.vmap(v),
    lambda v: wg.checkpoint(v), lambda v: wg.compile(v), lambda v: wg.vjp(v, 1.0),
    lambda v: wg.jvp(v, (1.0,), (1.0,)),
], ids=["grad", "value_and_grad", "jacobian", "jacfwd", "jacrev", "hessian", "hvp",
        "derivative", "vmap", "checkpoint", "compile", "vjp", "jvp"])
def test_a_value_where_the_function_goes_says_so(make):
    """``wg.grad(f(x))``: a TypeError when the transform is made, not when it is called."""
    with pytest.raises(TypeError, match=r"takes a function \(a callable\), got float 2.5"):
        make(2.5)


@pytest.mark.parametrize("length, error", [(1.5, TypeError), ("3", TypeError),
                                           (-1, ValueError)])
def test_scan_length_must_be_a_count(length, error):
    with pytest.raises(error, match="scan: length must"):
        wg.scan(lambda c, x: (c * 2.0, None), 1.0, length=length)


def test_scan_length_numpy_int():
    assert wg.scan(lambda c, x: (c * 2.0, None), 1.0, length=np.int64(3))[0] == 8.0


def test_custom_nondiff_argnums_of_the_wrong_type():
    with pytest.raises(TypeError, match="nondiff_argnums must be an int or a tuple of ints"):
        wg.custom_vjp(lambda x, n: x * n, nondiff_argnums=1.5)
    with pytest.raises(TypeError, match="nondiff_argnums must be an int or a tuple of ints"):
        wg.custom_jvp(lambda x, n: x * n, nondiff_argnums="n")


@pytest.mark.parametrize("make", [
    lambda a, b: wg.sparse_jacobian(mul, argnums=(0, 0))(a, b),
    lambda a, b: wg.sparse_hessian(lambda a, b: wnp.sum(a * a * b), argnums=(1, 1))(a, b),
    lambda a, b: wg.jacobian_sparsity(mul, a, b, argnums=(0, 1, 0)),
], ids=["sparse_jacobian", "sparse_hessian", "jacobian_sparsity"])
def test_sparse_transforms_refuse_repeated_argnums(make):
    """Their columns are the inputs' elements: a repeated position gave zero columns."""
    with pytest.raises(ValueError, match="names an argument twice"):
        make(np.array([1.0, 2.0]), np.array([3.0, 5.0]))
