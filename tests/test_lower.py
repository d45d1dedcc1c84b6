"""The emitter (wengert/graph/lower.py and its dialects) and the passes it reads
(wengert/graph/passes.py): every optimisation is decided on the graph, as data, before any
text is written, and the text is written once from it.

* the ``out=`` buffers, the in-place updates and the schedule come from the graph alone, and
  the pooled program writes ``out=`` exactly where the plan says (nothing rewrites the
  plain program's lines);
* the emitter writes what it is handed: a decision taken away is a statement not written;
* the generated programs of a small corpus are the ones recorded in
  tests/emitted_programs.txt (``python tests/test_lower.py --write`` records them again,
  after a change meant to change them).
"""
import pathlib
import re
import sys

import numpy as np
import pytest

import wengert as wg
import wengert.numpy as wnp
from wengert.graph import passes
from wengert.graph.codegen import preamble, returned, start
from wengert.graph.lower import Writer
from wengert.graph.lower_numpy import NumPy

try:
    import numba  # noqa: F401
    HAVE_NUMBA = True
except ImportError:
    HAVE_NUMBA = False

GOLDEN = pathlib.Path(__file__).with_name("emitted_programs.txt")
RNG = np.random.default_rng(11)


def mlp(W, x):
    h = wnp.tanh(x @ W)
    return wnp.sum(h * h) + wnp.mean(wnp.sin(h), axis=0).sum()


def scatter_loop(x):
    y = x[0] * x[1]
    for i in range(1, x.shape[0] - 1):
        y = y + wnp.sin(x[i - 1]) * x[i + 1]
    return y


def babylon(a):
    x = a
    for _ in range(6):
        x = 0.5 * (x + a / x)
    return x


def temporaries(W, x):
    t = wnp.exp(W * 0.1)
    u = wnp.tanh(t * 2.0)
    return u + W, t @ x


def folded(x, c):
    from wengert.rules.indexing import gather
    y = c * x + c
    return gather(wnp.reshape(y, (-1,)), np.array([-1, 3, 3, 0, 14, -15, 7])) * 2.0


def short_sums(x):
    r = wnp.sqrt(wnp.sum(x * x, axis=1, keepdims=True))
    return x / r + wnp.sum(x * 2.0, axis=-1)[:, None]


def joined(x):
    a, b = x[:, 0] * x[:, 1], wnp.sin(x[:, 2])
    y = wnp.concatenate([a.reshape(-1, 1), b.reshape(-1, 1), x[:, :1]], axis=1) * x + 1.0
    return wnp.concatenate([y, x[:, :2] * 2.0], axis=-1) - 0.5


W0, X0 = RNG.standard_normal((32, 48)), RNG.standard_normal((64, 32))
CORPUS = [  # name, function, arguments, fused
    ("mlp grad", wg.grad(mlp, argnums=(0, 1)), (W0, X0), False),
    ("scatter grad", wg.grad(scatter_loop), (RNG.standard_normal(8),), False),
    ("babylon", babylon, (2.0,), False),
    ("babylon grad", wg.grad(babylon), (2.0,), False),
    ("temporaries", temporaries, (RNG.standard_normal((40, 30)),
                                  RNG.standard_normal((30, 3))), True),
    ("scatter grad", wg.grad(scatter_loop), (RNG.standard_normal(8),), True),
    ("folded", folded, (RNG.standard_normal(5), RNG.standard_normal((3, 5))), True),
    ("short sums", short_sums, (RNG.standard_normal((300, 3)),), True),
    ("joined", joined, (RNG.standard_normal((40, 3)),), True),
]


def emitted():
    """Every program of the corpus, as text: plain, exact, pooled, kernels."""
    out = []
    for name, f, args, fuse in CORPUS:
        if fuse and not HAVE_NUMBA:
            continue
        for reuse in (False, True):
            cf = wg.compile(f, fuse=fuse, reuse_buffers=reuse)
            cf(*args)
            fn = cf.program(*args)
            out.append(f"===== {name} fuse={fuse} reuse_buffers={reuse}")
            for attr in ("source", "exact_source", "pooled_source"):
                if getattr(fn, attr, None):
                    out.append(f"--- {attr}\n{getattr(fn, attr)}")
            for k, src in enumerate(getattr(fn, "kernel_sources", ()) or ()):
                out.append(f"--- kernel {k}\n{src}")
    return "\n".join(out) + "\n"


def sections(text):
    return dict(re.findall(r"^===== (.*)\n((?:(?!=====).*\n)*)", text, re.M))


def test_the_corpus_is_written_as_recorded():
    want, got = sections(GOLDEN.read_text()), sections(emitted())
    assert got, "nothing emitted"
    for name, text in got.items():
        assert text == want[name], f"{name}: the generated program changed"


def test_buffers_are_planned_on_the_graph_before_any_text():
    """passes.buffers needs the graph and the schedule only; the pooled program writes
    ``out=`` into exactly the planned buffers, on the plain program's lines."""
    cf = wg.compile(wg.grad(mlp, argnums=(0, 1)), fuse=False, reuse_buffers=True)
    g = cf.graph(W0, X0)
    fn = cf.program(W0, X0)
    live = passes.live(g)
    fused, _, _ = passes.accumulations(g, live)
    steps = passes.schedule(g, live)
    plan = passes.buffers(g, live, steps, fused, {}, passes.users(g, live))
    assert plan and set(plan) == set(fn.pool)
    shared = {i: j for i in plan for j in plan if plan[i] is plan[j]}
    assert shared == {i: j for i in fn.pool for j in fn.pool if fn.pool[i] is fn.pool[j]}
    firsts = {min(j for j in plan if plan[j] is plan[i]) for i in plan}  # bound by first use
    assert fn.pooled_source.count("out=") == len(plan)
    assert {int(b) for b in re.findall(r"out=buf(\d+)\)", fn.pooled_source)} == firsts
    # the pooled body is the plain body line for line, but for the calls given a buffer
    pooled = fn.pooled_source.split("\n")[2:len(fn.source.split("\n"))]
    plain = fn.source.split("\n")[1:-1]
    assert len(pooled) == len(plain)
    differ = [(p, q) for p, q in zip(plain, pooled) if p != q]
    assert len(differ) == len(plan) and all("out=buf" in q for _, q in differ)


def _write(g, fast=True, out=None, inplace=None, steps=None):
    em, live, names, params, unpack, name = preamble(g)
    fused, chain_end, _ = passes.accumulations(g, live)
    d = NumPy(fast, out, passes.users(g, live), None)
    w = start(g, Writer(g, em, d, fused, chain_end, inplace, twin=bool(out)), names, live)
    d.steps(w, steps or passes.schedule(g, live))
    if out:  # the plain program and its pooled twin, written in one walk
        assert list(w.lines) == _write(g, fast, None, inplace, steps)[0]
        return w.lines.pooled, returned(g, w, em)
    return w.lines, returned(g, w, em)


def test_the_emitter_writes_what_the_passes_decided():
    """The same graph written with and without a decision: ``out=`` where a buffer is
    given, ``a op= b`` where an in-place update is, and otherwise the same statements."""
    def f(W):
        a = W * 3.0
        b = a - 1.0
        return wnp.sum(b * W)
    g = wg.trace(f, RNG.standard_normal((40, 40)))
    live = passes.live(g)
    sub = next(i for i, n in enumerate(g.nodes) if live[i] and n.kind == "op"
               and n.prim.name == "subtract")
    mul = g.nodes[sub].args[0]
    plain, _ = _write(g)
    assert not any("+=" in ln or "-=" in ln or "out=" in ln for ln in plain)
    lines, _ = _write(g, inplace={sub: mul})
    assert len(lines) == len(plain) and lines[0] == plain[0] == "v1 = W * 3.0"
    assert lines[1] == "v1 -= 1.0" and sum(ln.split()[1] != "=" for ln in lines) == 1
    buf = np.empty(g.nodes[mul].value.shape)
    lines, _ = _write(g, out={mul: buf})
    changed = [ln for ln in lines if ln not in plain]
    assert len(changed) == 1 and changed[0].endswith(f"out=buf{mul})")


def test_in_place_is_decided_on_the_graph():
    """passes.in_place: a temporary the fused program allocated, read once, is overwritten;
    never an input, nor a value read again."""
    pytest.importorskip("numba", reason="in-place updates are the fused program's")
    W, x = RNG.standard_normal((100, 50)), RNG.standard_normal((50, 3))
    g = wg.trace(temporaries, W, x)
    live = passes.live(g)
    fused, _, _ = passes.accumulations(g, live)
    from wengert.graph.fuse import numba_or_none
    kernels = passes.plan(g, live, fused, numba_or_none()[1])
    uses = passes.users(g, live)
    steps = passes.schedule(g, live, fused, kernels, uses)
    decided = passes.in_place(g, live, steps, fused, uses)
    inputs = set(g.input_nodes)
    assert decided and not (set(decided.values()) & inputs)
    assert all(len(uses[a]) == 1 for a in decided.values())
    src = wg.compile(temporaries, fuse=True).program(W, x).source
    assert src.count("+= ") + src.count("*= ") + src.count("-= ") == len(decided)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.write_text(emitted())
