"""Generated programs reuse the names of dead temporaries (graph/codegen.py, ``Reusing``):
CPython's ``compile()`` slows per statement as a function's local names grow, so a program
names about as many temporaries as it holds values at once.

The check that matters: every name a statement reads refers to the same statement's value as
in the program written with one name per temporary.  Each program here is written both ways
and both are brought to one form -- every read of a temporary replaced by the line that
assigned the value it reads -- which must be equal line for line.
"""
import ast

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import codegen
from wengert.graph.lower import Writer
from test_lower import babylon, folded, scatter_loop, temporaries  # noqa: I001 (the corpus's own programs)

try:
    import numba  # noqa: F401
    HAVE_NUMBA = True
except ImportError:
    HAVE_NUMBA = False

RNG = np.random.default_rng(5)


def chain(x, steps=40):
    for _ in range(steps):
        x = wnp.tanh(x) * 0.9 + 0.1
    return wnp.sum(x)


def lstm(w, xs):
    h = c = wnp.zeros(4)
    loss = 0.0
    for t in range(xs.shape[0]):
        f = 1 / (1 + wnp.exp(-(w[0] * h + xs[t])))
        i = 1 / (1 + wnp.exp(-(w[1] * h + xs[t])))
        g = wnp.tanh(w[3] * h + xs[t])
        c = f * c + i * g
        h = wnp.tanh(c)
        loss = loss + wnp.sum(h * h)
    return loss


def guarded(x):
    y = wnp.sin(x) * 2.0
    z = y if wnp.sum(y) > 0 else -y  # a guard on a temporary
    return wnp.exp(z) + y, z


def scalars(p):  # a long all-scalar group: Python floats in the fused program
    x = p[0]
    for k in range(40):
        x = x * 0.5 + wnp.sin(x) * p[k % 3]
    return x


CORPUS = [  # name, function, arguments
    ("chain", chain, (np.linspace(0.1, 1.0, 10),)),
    ("chain grad", wg.grad(chain), (np.linspace(0.1, 1.0, 10),)),
    ("scatter grad", wg.grad(scatter_loop), (RNG.standard_normal(8),)),
    ("babylon grad", wg.grad(babylon), (2.0,)),
    ("lstm grad", wg.grad(lstm), (RNG.standard_normal((4, 4)) * 0.5, RNG.standard_normal((6, 4)))),
    ("guarded", guarded, (RNG.standard_normal(5),)),
    ("scalars grad", wg.grad(scalars), (RNG.standard_normal(3),)),
    ("temporaries", temporaries, (RNG.standard_normal((40, 30)), RNG.standard_normal((30, 3)))),
    ("folded", folded, (RNG.standard_normal(5), RNG.standard_normal((3, 5)))),
]


def one_name_each(self):
    """``Reusing.fresh`` as the plain Writer's: a new name for every temporary."""
    v = Writer.fresh(self)
    self.temps.add(v)
    return v


def sources(f, args, fuse, reuse_buffers):
    cf = wg.compile(f, fuse=fuse, reuse_buffers=reuse_buffers)
    out = cf(*args)
    fn = cf.program(*args)
    return out, [getattr(fn, a, None) for a in ("source", "exact_source", "pooled_source")]


def _parse(text):
    for t in (text, text + "\n pass"):  # a block's head: given a body
        try:
            return ast.parse(t)
        except SyntaxError:
            pass
    return None


def _is_temp(node):
    return isinstance(node, ast.Name) and node.id[:1] == "v" and node.id[1:].isdigit()


def assigned_form(src):
    """Each line of ``src`` with every temporary (``v<n>``) it names replaced by the number
    of the line that assigned the value it holds there (``a += b`` changes ``a``'s value where
    it is: it reads ``a``)."""
    at = {}
    out = []
    for k, line in enumerate(src.splitlines()):
        tree = _parse(line.strip())
        if tree is None:  # try:, except ...:
            out.append(line.strip())
            continue
        stores = []
        for node in ast.walk(tree):
            if not _is_temp(node):
                continue
            if isinstance(node.ctx, ast.Store) and not isinstance(tree.body[0], ast.AugAssign):
                stores.append(node)
                continue
            assert node.id in at, f"line {k}: {node.id} read before it is assigned"
            node.id = f"line{at[node.id]}"
        for node in stores:  # after the reads: ``v1 = v1 * 2.0`` reads the earlier v1
            at[node.id] = k
            node.id = f"line{k}"
        out.append(ast.unparse(tree))
    return out


def names_in(src):
    return {node.id for node in ast.walk(ast.parse(src)) if isinstance(node, ast.Name)
            and node.id[:1] == "v" and node.id[1:].isdigit()}


CASES = [(name, f, args, fuse, pool) for name, f, args in CORPUS for fuse in (False, True)
         for pool in (False, True)]


@pytest.mark.parametrize("name, f, args, fuse, pool", CASES,
                         ids=[f"{c[0]}-fuse{int(c[3])}-pool{int(c[4])}" for c in CASES])
def test_reused_names_read_the_same_values(name, f, args, fuse, pool, monkeypatch):
    if fuse and not HAVE_NUMBA:
        pytest.skip("numba is not installed")
    got, reused = sources(f, args, fuse, pool)
    with monkeypatch.context() as m:
        m.setattr(codegen.Reusing, "fresh", one_name_each)
        want, plain = sources(f, args, fuse, pool)
    for a, b in zip(wg.tree.leaves(got), wg.tree.leaves(want)):
        np.testing.assert_array_equal(a, b)
    for r, p in zip(reused, plain):
        assert (r is None) == (p is None)
        if r is not None:
            assert assigned_form(r) == assigned_form(p)
            assert len(names_in(r)) <= len(names_in(p))


def test_the_checker_catches_a_name_reused_too_soon(monkeypatch):
    """A test of the test: with every name freed once its value is written (but the
    returned ones) the forms differ: the reverse sweep reads forward values overwritten."""
    real = codegen._last_reads

    def early(g, steps, fused):
        return [s if s == len(steps) else -1 for s in real(g, steps, fused)]
    x = np.linspace(0.1, 1.0, 10)
    _, (plain, _, _) = sources(wg.grad(chain), (x,), False, False)
    monkeypatch.setattr(codegen, "_last_reads", early)
    _, (wrong, _, _) = sources(wg.grad(chain), (x,), False, False)
    assert assigned_form(wrong) != assigned_form(plain)


def test_a_long_chain_compiles_with_a_few_names():
    """One name per temporary made 10⁵ local names at 10⁵ primitives; the chain holds two
    values at once, its gradient one forward value per step."""
    x = np.linspace(0.1, 1.0, 10)
    _, (src, _, _) = sources(lambda x: chain(x, 500), (x,), False, False)
    assert len(names_in(src)) <= 3
    f = wg.grad(lambda x: chain(x, 500))
    got, (src, _, _) = sources(f, (x,), False, False)
    assert 500 <= len(names_in(src)) <= 510  # the tanh of every step, kept for the reverse
    np.testing.assert_array_equal(got, f(x))
