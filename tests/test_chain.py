"""wg.chain_order (seed 004's lesson): the matrix-chain dynamic programme on a traced
program's chain of Jacobians, against pure forward and pure reverse mode."""
import itertools
import random

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph.chain import _cost, _left, _right, matrix_chain


def _all_bracketings(lo, hi):
    """Every bracketing of J_hi ... J_lo (brute force, for checking)."""
    if lo == hi:
        yield lo
        return
    for k in range(lo, hi):
        for right in _all_bracketings(lo, k):
            for left in _all_bracketings(k + 1, hi):
                yield (left, right)


def _multiply(tree, mats):
    """The product a bracketing describes, computed in that order (mats[k] is J_k)."""
    if isinstance(tree, int):
        return mats[tree]
    return _multiply(tree[0], mats) @ _multiply(tree[1], mats)


def test_dynamic_programme_is_the_cheapest_bracketing():
    rng = random.Random(4)
    for _ in range(60):
        n = rng.randint(1, 7)
        dims = [rng.choice([1, 2, 3, 5, 8, 40, 100]) for _ in range(n + 1)]
        cost, tree = matrix_chain(dims)
        brute = min(_cost(t, dims) for t in _all_bracketings(1, n))
        assert cost == brute, (dims, tree)
        # the bracketing multiplies the same chain: the same product
        mats = {k: np.random.default_rng(k).normal(size=(dims[k], dims[k - 1]))
                for k in range(1, n + 1)}
        np.testing.assert_allclose(_multiply(tree, mats), _multiply(_right(n), mats),
                                   rtol=1e-9, atol=1e-9)


def test_forward_and_reverse_counts_are_the_seeds_formulas():
    dims = [10, 50, 50, 3, 3, 40]
    n = len(dims) - 1
    assert _cost(_right(n), dims) == sum(dims[k] * dims[k - 1] * dims[0] for k in range(2, n + 1))
    assert _cost(_left(n), dims) == sum(dims[n] * dims[k] * dims[k - 1] for k in range(1, n))
    huge = [10**7, 10**7, 10**7, 1]
    assert _cost(_right(3), huge) == 10**21 + 10**14  # exact integers, no rounding


def test_mlp_chain_mixed_mode_wins():
    A, B, C = np.ones((50, 10)), np.ones((3, 50)), np.ones((40, 3))
    r = wg.chain_order(lambda x: C @ wnp.tanh(B @ wnp.tanh(A @ x)), np.ones(10))
    assert r.names == ["matvec", "tanh", "matvec", "tanh", "matvec"]
    assert r.shapes == [(50, 10), (50, 50), (3, 50), (3, 3), (40, 3)]
    assert (r.forward, r.reverse) == (27790, 126360)
    assert r.best == 10290 < r.forward < r.reverse and r.mode == "mixed"
    assert r.order == "J5 (J4 ((J3 J2) J1))"
    text = str(r)
    assert "forward" in text and "27,790" in text and "126,360" in text and "10,290" in text


def test_scalar_output_reverse_wins_wide_output_forward_wins():
    r = wg.chain_order(lambda x, y: x * y + wnp.sin(x), 0.5, 4.2)  # the seeds' z
    assert r.dims == [2, 2, 2, 1] and (r.forward, r.reverse, r.best) == (12, 8, 8)
    assert r.mode == "reverse"
    W1, W2 = np.ones((50, 2)), np.ones((200, 50))
    r = wg.chain_order(lambda t: W2 @ wnp.tanh(W1 @ t), np.ones(2))  # 2 inputs, 200 outputs
    assert r.shapes == [(50, 2), (50, 50), (200, 50)] and r.mode == "forward"
    assert (r.forward, r.reverse) == (25000, 520000)


def test_state_counts_every_value_still_needed():
    # x is needed until the last step: it stays in the state beside the intermediates
    r = wg.chain_order(lambda x: wnp.sin(wnp.exp(x)) * x, np.ones(4))
    assert r.dims == [4, 8, 8, 4]
    # several outputs: the last state is all of them
    r = wg.chain_order(lambda x: (wnp.sum(x), x * 2.0), np.ones(3))
    assert r.dims[0] == 3 and r.dims[-1] == 1 + 3


def test_a_traced_graph_is_accepted():
    f = lambda x: wnp.tanh(x) @ np.ones((5, 2))  # noqa: E731
    g = wg.trace(f, np.ones(5))
    assert wg.chain_order(g).dims == wg.chain_order(f, np.ones(5)).dims == [5, 5, 2]


def test_long_chain_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="too long"):
        matrix_chain([2] * 5000)
