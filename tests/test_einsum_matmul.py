"""einsum of two operands large enough to be a BLAS product (rules/products.py): the value is
NumPy's (type, dtype, shape, numbers), and both rules are checked against finite differences on
shapes that take that route, including the broadcast batch of autograd's
bayesian_neural_net.py (``mnd,mdo->mno`` with one input row for every weight sample).
"""
import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.rules.products import _MATMUL_WORK, _einsum, _einsum_matmul

rng = np.random.default_rng(3)

# (ins, out, sizes): each above _MATMUL_WORK multiply-adds, so the matmul route is taken
CASES = [
    (("mnd", "mdo"), "mno", dict(m=3, n=40, d=50, o=6)),   # a batch of layers
    (("ij", "jk"), "ik", dict(i=30, j=40, k=50)),          # a plain product
    (("ij", "jk"), "ki", dict(i=30, j=40, k=50)),          # its transpose
    (("abc", "cbd"), "da", dict(a=20, b=30, c=40, d=5)),   # two letters contracted
    (("abz", "bq"), "aq", dict(a=20, b=30, z=4, q=50)),    # a lone letter summed first
    (("ab", "ab"), "", dict(a=300, b=400)),                # a full contraction: a scalar
    (("tij", "tjk"), "tik", dict(t=3000, i=2, j=2, k=2)),  # many small products
    (("i", "i"), "", dict(i=70000)),
]


def _operands(ins, sizes, dtype):
    ops = [rng.standard_normal([sizes[c] for c in s]) for s in ins]
    if np.dtype(dtype).kind == "c":
        ops = [o + 1j * rng.standard_normal(o.shape) for o in ops]
    return [o.astype(dtype) for o in ops]


@pytest.mark.parametrize("ins, out, sizes", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
def test_value_is_numpys(ins, out, sizes, dtype):
    a, b = _operands(ins, sizes, dtype)
    assert _einsum_matmul(a, b, ins[0], ins[1], out) is not None  # the route under test
    want = np.einsum(f"{ins[0]},{ins[1]}->{out}", a, b)
    got = _einsum(a, b, ins=ins, out=out)
    assert type(got) is type(want) and got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-4 if dtype == np.float32 else 1e-12
    assert np.max(np.abs(got - want)) <= tol * np.max(np.abs(want))


def test_small_or_elementwise_keeps_einsums_loop():
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    assert 3 * 4 * 5 < _MATMUL_WORK and _einsum_matmul(a, b, "ij", "jk", "ik") is None
    big = rng.standard_normal((300, 400))
    assert _einsum_matmul(big, big, "ab", "ab", "ab") is None  # nothing contracted
    assert _einsum_matmul(big, big, "ab", "ab", "b") is None   # a batch of dot products
    ints = np.ones((300, 400), dtype=int)
    assert _einsum_matmul(ints, ints.T, "ab", "bc", "ac") is None  # no BLAS for integers


def test_broadcast_batch_gradient():
    """bayesian_neural_net.py's layer: inputs (1, n, d) broadcast against weights (m, d, o)."""
    x = rng.standard_normal((1, 60, 20))
    w = rng.standard_normal((10, 20, 20))
    assert _einsum_matmul(np.broadcast_to(x, (10, 60, 20)), w, "mnd", "mdo", "mno") is not None

    def f(x, w):
        return wnp.sum(wnp.tanh(wnp.einsum("mnd,mdo->mno", x, w)) ** 2)
    wg.check_grad(f, x, w)
    gx, gw = wg.grad(f, argnums=(0, 1))(x, w)
    t = np.tanh(np.einsum("mnd,mdo->mno", x, w))
    g = 2 * t * (1 - t ** 2)
    np.testing.assert_allclose(gx, np.einsum("mno,mdo->nd", g, w)[None], rtol=1e-10)
    np.testing.assert_allclose(gw, np.einsum("mno,mnd->mdo", g, np.broadcast_to(x, t.shape[:2]
                                                                               + (20,))),
                               rtol=1e-10)


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,jk->ki", [(30, 40), (40, 50)]),
    ("abz,bq->aq", [(20, 30, 4), (30, 50)]),
    ("ab,ab->", [(200, 100), (200, 100)]),
])
def test_rules_on_the_matmul_route(subscripts, shapes):
    ops = [rng.standard_normal(s) for s in shapes]
    wg.check_grad(lambda a, b: wnp.einsum(subscripts, a, b), *ops, order=2)
