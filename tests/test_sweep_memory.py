"""A one-shot reverse sweep (wg.grad, autograd's grad on the compat layer) frees each node's
pullback, and the primals it holds, once it has run: memory falls as the sweep goes, as
autograd's does, instead of peaking at its end (reverse.py, ``Tape.sweep``). A ``wg.vjp``
pullback may be called again, so it keeps its tape whole."""
import weakref

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.compat import autograd as ag


class _Held:
    """Something a pullback holds, standing for a large primal array."""


def _program():
    """``f`` with two ``hold`` nodes after a ``probe`` node; the probe's pullback, which runs
    after theirs, records which of the held objects are gone by then."""
    refs, seen = [], []

    @wg.primitive
    def hold(x):
        return x * 1.0

    @hold.rrule
    def _(x):
        held = _Held()
        refs.append(weakref.ref(held))
        return x * 1.0, lambda g, held=held: (g,)

    @wg.primitive
    def probe(x):
        return x * 1.0

    @probe.rrule
    def _(x):
        def pullback(g):
            seen.append([r() is None for r in refs])
            return (g,)
        return x * 1.0, pullback

    def f(x):
        return wnp.sum(hold(hold(probe(x))) * x)
    return f, refs, seen


@pytest.mark.parametrize("grad", [wg.grad, ag.grad, ag.elementwise_grad,
                                  lambda f: (lambda x: ag.value_and_grad(f)(x)[1])])
def test_one_shot_sweep_frees_swept_nodes(grad):
    f, refs, seen = _program()
    x = np.array([1.0, 2.0, 3.0])
    g = grad(f)(x)
    np.testing.assert_allclose(g, 2 * x)
    assert seen == [[True, True]]  # both holds' pullbacks were gone when the probe's ran


def test_vjp_pullback_keeps_its_tape_for_another_call():
    f, refs, seen = _program()
    x = np.array([1.0, 2.0, 3.0])
    out, pullback = wg.vjp(f, x)
    (g1,) = pullback(1.0)
    (g2,) = pullback(2.0)
    np.testing.assert_allclose(g1, 2 * x)
    np.testing.assert_allclose(g2, 4 * x)
    assert seen == [[False, False], [False, False]]


def test_tape_api_still_reads_every_adjoint():
    # Var.grad() sweeps a user's tape: any Var's adjoint may be read, intermediates too
    t = wg.Tape()
    x = t.var(np.array([1.0, 2.0]))
    y = x * 3.0
    z = wnp.sum(y * y)
    g = z.grad()
    np.testing.assert_allclose(g.wrt(y), 2 * 3.0 * np.array([1.0, 2.0]))
    np.testing.assert_allclose(g.wrt(x), 18.0 * np.array([1.0, 2.0]))


def test_nested_grads_and_multiple_results_after_freeing():
    # reverse over reverse: the inner one-shot sweep records on the outer tape as it frees
    f = lambda x: wnp.sum(wnp.sin(x) * wnp.exp(x))
    x = np.array([0.3, -0.7, 1.1])
    h = wg.jacobian(wg.grad(f))(x)
    expected = np.diag(2 * np.cos(x) * np.exp(x))
    np.testing.assert_allclose(h, expected, rtol=1e-12)
    # a primitive with several results (its _Output nodes) on a freeing sweep
    x2 = np.array([0.25, 1.75])
    g = wg.grad(lambda x: wnp.sum(wnp.modf(x * 2.0)[0] * x))(x2)
    np.testing.assert_allclose(g, np.modf(2.0 * x2)[0] + 2.0 * x2)  # frac's slope is 1
    # autograd's hessian on the compat layer, through its one-shot grads
    np.testing.assert_allclose(ag.hessian(f)(x), expected, rtol=1e-12)
