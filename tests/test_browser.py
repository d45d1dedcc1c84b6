"""End to end in headless Chromium: type the seeds' expression, step through both passes,
read the gradient off the page and compare with wg.grad.  Screenshots go to artifacts/.

Needs Debian's Chromium (apt-get install chromium) and the Python playwright package
(pip install playwright); never `playwright install`.  Skipped, with the reason, otherwise.
"""
import json
import os
import random
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

import wengert as wg
import wengert.numpy as wnp

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SEED_EXPR = "x*y + sin(x)"


def _chromium():
    for path in (os.environ.get("WENGERT_CHROMIUM"), "/usr/bin/chromium",
                 shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and os.path.exists(path):
            return path
    return None


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright Python package is not installed (pip install playwright)")
    exe = _chromium()
    if exe is None:
        pytest.skip("Chromium not found at /usr/bin/chromium (apt-get install chromium)")
    with sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        except Exception as e:  # a broken Chromium install
            pytest.skip(f"Chromium at {exe} did not start: {str(e).splitlines()[0]}")
        yield b
        b.close()


@pytest.fixture(scope="module")
def server():
    from wengert.explore import make_server
    srv = make_server("127.0.0.1", 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def page(browser, server):
    # bypass_csp lets playwright evaluate its wait_for_function predicates; the page itself
    # never needs eval (test_explore checks the CSP header)
    ctx = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    pg = ctx.new_page()
    problems = []
    pg.on("pageerror", lambda e: problems.append(str(e)))
    pg.on("dialog", lambda d: (problems.append("dialog: " + d.message), d.dismiss()))
    pg.on("request", lambda r: None if r.url.startswith(server.url) or r.url.startswith("data:")
          else problems.append("external request: " + r.url))
    pg.problems = problems
    yield pg
    ctx.close()
    assert problems == []


def shot(pg, name):
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def loads(pg):
    return int(pg.evaluate("document.body.dataset.loads || '0'"))


def wait_loaded(pg, after):
    pg.wait_for_function(f"(+document.body.dataset.loads || 0) > {after}")


def wait_settled(pg):
    """No request in flight: every answer the page asked for has been drawn or dropped."""
    pg.wait_for_function("(+document.body.dataset.pending || 0) === 0")


def step_count(pg):
    return int(pg.evaluate("document.body.dataset.step"))


def gradient_on_page(pg):
    return {td.get_attribute("data-var"): td.inner_text()
            for td in pg.query_selector_all("#gradient td.grad")}


def test_seed_expression_step_by_step(page, server):
    pg = page
    pg.goto(server.url)
    wait_loaded(pg, 0)
    # type the expression
    pg.fill("#expr", SEED_EXPR)
    n = loads(pg)
    pg.click("#go")
    wait_loaded(pg, n)
    # set the inputs (each change re-evaluates)
    for name, value in [("x", "0.5"), ("y", "4.2")]:
        n = loads(pg)
        pg.fill(f"#input-{name}", value)
        pg.press(f"#input-{name}", "Enter")
        pg.dispatch_event(f"#input-{name}", "change")
        wait_loaded(pg, n)
        wait_settled(pg)
    assert json.loads(pg.evaluate("document.body.dataset.inputs")) == {"x": 0.5, "y": 4.2}
    assert "expr=x*y" in pg.url.replace("%2B", "+").replace("+", "") or "expr=" in pg.url
    assert len(pg.query_selector_all("#graph .node")) == 5
    assert len(pg.query_selector_all("#graph .edge")) == 5
    shot(pg, "browser-0-start")

    # forward pass with the keyboard: focus leaves the text box, arrows step
    pg.focus("#step")
    for k in range(1, 6):
        pg.keyboard.press("ArrowRight")
        assert step_count(pg) == k
    assert "forward pass 5 / 5" in pg.inner_text("#phase")
    values = [t.text_content() for t in pg.query_selector_all("#graph .node .val")]
    assert all(v.startswith("= ") for v in values)
    assert pg.inner_text("#value-line") == "f = 2.579425538604203"
    assert gradient_on_page(pg) == {"x": "", "y": ""}  # not before the backward pass
    assert pg.query_selector("#tape tr.current td").inner_text() == "4"
    shot(pg, "browser-1-forward")

    # backward pass with the Step button
    pg.click("#step")
    assert "backward pass 1 / 6" in pg.inner_text("#phase")
    pg.click("#step")
    pg.click("#step")
    shot(pg, "browser-2-backward-partial")
    while not pg.is_disabled("#step"):
        pg.click("#step")
    assert "backward pass 6 / 6" in pg.inner_text("#phase")
    assert len(pg.query_selector_all("#graph .edge.pushed")) == 5
    adj = [t.text_content() for t in pg.query_selector_all("#graph .node .adj")]
    assert all(a.startswith("g = ") for a in adj)
    shot(pg, "browser-3-backward-done")

    shown = gradient_on_page(pg)
    want = wg.grad(lambda x, y: x * y + wnp.sin(x), argnums=(0, 1))(0.5, 4.2)
    assert float(shown["x"]) == float(want[0]) == 5.077582561890373
    assert float(shown["y"]) == float(want[1]) == 0.5
    # the adjoints accumulated step by step agree
    acc = {td.get_attribute("data-var"): float(td.inner_text())
           for td in pg.query_selector_all("#gradient td.adjoint")}
    assert acc == {"x": float(want[0]), "y": float(want[1])}

    # step back, reset
    pg.keyboard.press("ArrowLeft")
    assert step_count(pg) == 10 and gradient_on_page(pg) == {"x": "", "y": ""}
    pg.click("#reset")
    assert step_count(pg) == 0


def test_shareable_url_and_programs(page, server):
    pg = page
    pg.goto(server.url + f"?expr={quote(SEED_EXPR)}&x=0.5&y=4.2")
    wait_loaded(pg, 0)
    assert pg.input_value("#expr") == SEED_EXPR
    assert pg.input_value("#input-x") == "0.5" and pg.input_value("#input-y") == "4.2"
    pg.click("#end")
    shown = gradient_on_page(pg)
    assert (float(shown["x"]), float(shown["y"])) == (5.077582561890373, 0.5)
    fwd, rev = pg.inner_text("#prog-forward"), pg.inner_text("#prog-reverse")
    if "(unavailable" not in fwd:
        assert "da = y * dx + x * dy" in fwd
        assert "gx += y * ga" in rev
    href = pg.get_attribute("#share", "href")
    assert "expr=" in href and "x=0.5" in href and "y=4.2" in href


def test_reroll_draws_inputs_in_unit_interval(page, server):
    pg = page
    pg.goto(server.url + "?expr=" + quote("a*b - c"))
    wait_loaded(pg, 0)
    for _ in range(3):
        n = loads(pg)
        pg.click("#reroll")
        wait_loaded(pg, n)
        ins = json.loads(pg.evaluate("document.body.dataset.inputs"))
        assert set(ins) == {"a", "b", "c"} and all(0 <= v <= 1 for v in ins.values())


def test_late_answers_neither_win_nor_clobber_typing(page, server):
    # hold the server's answers so they can be released out of order
    pg = page
    pg.goto(server.url + f"?expr={quote(SEED_EXPR)}&x=0.5&y=4.2")
    wait_loaded(pg, 0)
    held = []
    pg.route("**/api/expression", lambda route: held.append(route))
    pg.fill("#input-x", "0.25")
    pg.press("#input-x", "Enter")                      # first request, x=0.25
    pg.wait_for_function("+document.body.dataset.pending === 1")
    pg.fill("#input-x", "0.75")
    pg.press("#input-x", "Enter")                      # second request, x=0.75
    pg.wait_for_function("+document.body.dataset.pending === 2")
    pg.fill("#input-y", "3")                           # typed, not yet committed
    assert len(held) == 2
    held[1].continue_()                                # the later answer first
    pg.wait_for_function("+document.body.dataset.pending === 1")
    held[0].continue_()                                # then the stale one
    wait_settled(pg)
    assert json.loads(pg.evaluate("document.body.dataset.inputs")) == {"x": 0.75, "y": 4.2}
    assert pg.input_value("#input-x") == "0.75"
    assert pg.input_value("#input-y") == "3"
    pg.unroute("**/api/expression")
    n = loads(pg)
    pg.press("#input-y", "Enter")
    wait_loaded(pg, n)
    assert json.loads(pg.evaluate("document.body.dataset.inputs")) == {"x": 0.75, "y": 3.0}


def test_hostile_expressions_show_an_error_and_run_nothing(page, server):
    pg = page
    pg.goto(server.url)
    wait_loaded(pg, 0)
    for i, text in enumerate(["x.__class__", "__import__('os')",
                              "<img src=x onerror=alert(1)>", "</script><script>alert(1)",
                              "9**9**9"]):
        pg.fill("#expr", text)
        pg.click("#go")
        pg.wait_for_function(f"(+document.body.dataset.errors || 0) > {i}")
        msg = pg.inner_text("#error")
        assert msg and "\n" not in msg.strip()
    assert pg.query_selector("img") is None
    shot(pg, "browser-4-error")


def test_phone_width(browser, server):
    ctx = browser.new_context(viewport={"width": 375, "height": 740}, is_mobile=True,
                              has_touch=True, device_scale_factor=2, bypass_csp=True)
    pg = ctx.new_page()
    try:
        pg.goto(server.url + f"?expr={quote(SEED_EXPR)}&x=0.5&y=4.2")
        wait_loaded(pg, 0)
        pg.tap("#end")
        assert pg.evaluate("document.documentElement.scrollWidth") <= 375
        for sel in ["#step", "#back", "#reset", "#play", "#expr", "#graph"]:
            box = pg.query_selector(sel).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 376, sel
        shot(pg, "browser-5-phone")
    finally:
        ctx.close()


def test_buttons_are_keyboard_reachable(page, server):
    pg = page
    pg.goto(server.url + f"?expr={quote(SEED_EXPR)}&x=0.5&y=4.2&step=2")
    wait_loaded(pg, 0)
    pg.wait_for_function("document.body.dataset.step === '2'")  # every control enabled
    seen = set()
    for _ in range(25):
        pg.keyboard.press("Tab")
        seen.add(pg.evaluate("document.activeElement.id"))
    assert {"expr", "go", "reroll", "reset", "back", "step", "play", "end"} <= seen
    pg.focus("#step")
    pg.keyboard.press("Enter")  # a focused button activates with the keyboard
    assert step_count(pg) == 3


def test_schedule_view(page, server):
    pg = page
    pg.goto(server.url + "?view=schedule&n=16&strategy=ctz")
    pg.wait_for_selector("#schedule .sched-row", timeout=10_000)
    rows = pg.query_selector_all("#schedule .sched-row")
    assert len(rows) == 17
    first = "".join(t.text_content() for t in rows[0].query_selector_all("text")[:16])
    assert first.replace("\u00b7", ".") == "X.......X...X.XX"
    shot(pg, "browser-6-schedule-ctz")
    pg.select_option("#sched-strategy", "binomial")
    pg.fill("#sched-snapshots", "2")
    pg.click("#sched-go")
    pg.wait_for_function("document.getElementById('sched-summary').textContent"
                         ".includes('binomial')")
    assert "strategy=binomial" in pg.url
    shot(pg, "browser-7-schedule-binomial")
    pg.select_option("#sched-strategy", "online")
    pg.fill("#sched-snapshots", "3")
    pg.click("#sched-go")
    pg.wait_for_function("document.getElementById('sched-summary').textContent"
                         ".includes('online, N = 16, 3 snapshots')")
    assert "strategy=online" in pg.url


# -- layout: boxes that never overlap, inputs in one order --------------------------------------
# expressions of 5, 15 and 40 nodes (screenshots of each go to artifacts/)
SIZED = {5: SEED_EXPR,
         15: "sin(x*y) * (x*y) + exp(-x/z) - log(1 + y*y)",
         40: "tanh(w1*x + w2*y + b) * v1 + tanh(w3*x + w4*y + b) * v2 + sin(x*y) / (1 + exp(-z))"
             " - log(1 + x*x + y*y) * cos(z - x)"}


def _random_expression(rng, size):
    """A random expression of about ``size`` operations over a few variables."""
    unary = ["sin", "cos", "exp", "tanh", "sqrt", "log1p", "-", "arctan"]
    binary = ["+", "-", "*", "/", "hypot", "maximum"]
    names = ["x", "y", "z", "u", "v", "w"][:rng.randint(1, 6)]

    def build(n):
        if n <= 0:
            return rng.choice(names + names + ["2", "0.5", "pi"])
        if rng.random() < 0.35:
            f = rng.choice(unary)
            inner = build(n - 1)
            return f"-({inner})" if f == "-" else f"{f}(abs({inner}))" if f in ("sqrt",) \
                else f"{f}({inner})"
        f = rng.choice(binary)
        k = rng.randint(0, n - 1)
        a, b = build(k), build(n - 1 - k)
        if f == "/":
            return f"({a}) / (1.5 + {b} * {b})"
        return f"{f}({a}, {b})" if f.isalpha() else f"({a}) {f} ({b})"
    return build(size)


def _random_expressions():
    from wengert.expr import parse
    rng = random.Random(23)
    buckets = {0: [], 1: [], 2: [], 3: []}  # 3-10, 11-20, 21-30, 31-40 nodes: three each
    while any(len(b) < 3 for b in buckets.values()):
        text = _random_expression(rng, rng.randint(1, 16))
        n = len(parse(text).nodes)
        if 3 <= n <= 40 and len(buckets[(n - 1) // 10]) < 3:
            buckets[(n - 1) // 10].append(text)
    return [t for b in buckets.values() for t in b]


_BOXES = """() => {
  const boxes = [], loose = [];
  const add = (kind, id, el) => {
    const r = el.getBoundingClientRect();
    boxes.push({ kind, id, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom });
  };
  const fits = (kind, id, text, rect) => {
    if (text.getBBox().width > rect.getBBox().width + 0.5) loose.push([kind, id, text.textContent]);
  };
  for (const g of document.querySelectorAll("#graph .node")) {
    add("node", g.dataset.name, g.querySelector("rect.box"));
    const ab = g.querySelector(".adjg");
    if (ab && ab.getAttribute("visibility") === "visible") {
      add("badge", g.dataset.name, ab.querySelector("rect"));
      fits("badge", g.dataset.name, ab.querySelector("text"), ab.querySelector("rect"));
    }
    for (const t of g.querySelectorAll(":scope > text")) fits("node", g.dataset.name, t, g.querySelector("rect.box"));
  }
  for (const g of document.querySelectorAll("#graph .elabel")) {
    if (g.getAttribute("visibility") !== "visible") continue;
    add("label", g.dataset.edge, g.querySelector("rect"));
    fits("label", g.dataset.edge, g.querySelector("text"), g.querySelector("rect"));
  }
  const overlaps = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i], b = boxes[j];
    const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0), h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
    if (w > 0.5 && h > 0.5) overlaps.push([a.kind, a.id, b.kind, b.id]);
  }
  const kinds = {};
  for (const b of boxes) kinds[b.kind] = (kinds[b.kind] || 0) + 1;
  return { kinds, overlaps, loose };
}"""

_ORDERS = """() => {
  const inputs = [...document.querySelectorAll("#graph .node.input")].map((g) => {
    const r = g.querySelector("rect.box").getBoundingClientRect();
    return { name: g.dataset.name, x: r.left + r.width / 2, y: r.top + r.height / 2 };
  });
  inputs.sort((a, b) => a.x - b.x);
  return {
    variables: state.data.variables,
    graph: inputs.map((i) => i.name),
    rows: [...new Set(inputs.map((i) => Math.round(i.y)))],
    bar: [...document.querySelectorAll("#inputs input")].map((i) => i.dataset.var),
    tape: [...document.querySelectorAll("#tape tbody tr")].filter((tr) => tr.cells[2].textContent === "input")
            .map((tr) => tr.cells[1].textContent),
    gradient: [...document.querySelectorAll("#gradient td.grad")].map((td) => td.dataset.var),
  };
}"""


def _open(pg, server, text):
    pg.goto(server.url + "?expr=" + quote(text))
    wait_loaded(pg, 0)


def _assert_laid_out(pg):
    pg.click("#end")  # every label and badge shown
    got = pg.evaluate(_BOXES)
    assert got["overlaps"] == [], got["overlaps"]
    assert got["loose"] == [], got["loose"]
    nodes = len(pg.query_selector_all("#graph .node"))
    assert got["kinds"]["node"] == nodes and got["kinds"].get("label", 0) > 0 or nodes < 3
    orders = pg.evaluate(_ORDERS)
    want = orders["variables"]
    assert orders["graph"] == orders["bar"] == orders["tape"] == orders["gradient"] == want
    assert len(orders["rows"]) <= 1  # every input on the top rank
    return nodes


@pytest.fixture
def wide_page(browser, server):
    # a wide screen: the 40-node drawing whole, at a readable scale
    ctx = browser.new_context(viewport={"width": 1920, "height": 1080}, bypass_csp=True)
    pg = ctx.new_page()
    problems = []
    pg.on("pageerror", lambda e: problems.append(str(e)))
    yield pg
    ctx.close()
    assert problems == []


@pytest.mark.parametrize("size", sorted(SIZED))
def test_layout_sizes_no_overlap_screenshots(wide_page, server, size):
    pg = wide_page
    _open(pg, server, SIZED[size])
    assert _assert_laid_out(pg) == size
    # the whole drawing is on the page at a readable scale (at most 70% down), unscrolled
    svg = pg.query_selector("#graph").bounding_box()
    box = pg.query_selector(".graph-box").bounding_box()
    natural = float(pg.get_attribute("#graph", "width"))
    assert svg["width"] >= 0.7 * natural - 1
    assert svg["x"] >= box["x"] and svg["x"] + svg["width"] <= box["x"] + box["width"]
    shot(pg, f"layout-{size:02d}-nodes")
    pg.query_selector("#graph").screenshot(path=str(ARTIFACTS / f"layout-{size:02d}-graph.png"))


def test_layout_random_expressions_no_overlap(wide_page, server):
    sizes = []
    for text in _random_expressions():
        _open(wide_page, server, text)
        sizes.append(_assert_laid_out(wide_page))
    assert max(sizes) > 30 and min(sizes) <= 10, sizes


def test_boxes_hold_their_text_at_every_step(wide_page, server):
    pg = wide_page
    _open(pg, server, SIZED[15])
    pg.focus("#step")
    while True:
        got = pg.evaluate(_BOXES)
        assert got["overlaps"] == [] and got["loose"] == [], (step_count(pg), got)
        if pg.is_disabled("#step"):
            break
        pg.keyboard.press("ArrowRight")


# -- step, graph, tape and both programs agree ----------------------------------------------------
_SYNC = """() => {
  const d = state.data, names = {};
  for (const n of d.graph.nodes) names[n.id] = n.name;
  const node = document.querySelector("#graph .node.current");
  const edge = document.querySelector("#graph .edge.current");
  const tr = document.querySelector("#tape tr.current");
  const lines = (id) => [...document.querySelectorAll(`#${id} .pl.current`)].map((e) => e.textContent);
  return {
    step: +document.body.dataset.step, text: document.getElementById("step-text").textContent,
    node: node ? node.dataset.name : null,
    edge: edge ? [names[edge.dataset.source], names[edge.dataset.target]] : null,
    tape: tr ? tr.cells[1].textContent : null,
    fwd: lines("prog-forward"), rev: lines("prog-reverse"),
    program: [...document.querySelectorAll("#prog-reverse .pl")].map((e) => e.textContent),
    kinds: Object.fromEntries(d.graph.nodes.map((n) => [n.name, n.kind])),
    root: names[d.graph.root],
  };
}"""


def _assert_in_sync(v):
    text = v["text"]
    if v["step"] == 0:
        assert v["node"] is None and v["fwd"] == v["rev"] == [] and v["tape"] is None
        return
    if text.startswith("forward: "):
        name = text[len("forward: "):].split(" = ")[0]
        assert v["node"] == name and v["edge"] is None, v
        if v["kinds"][name] == "op":
            assert v["tape"] == name, v
            heads = [ln.split(" = ")[0] for ln in v["fwd"]]
            assert heads in ([name, "d" + name], [f"{name}, d{name}"]), v
            assert [ln.split(" = ")[0].split(",")[0] for ln in v["rev"]] == [name], v
        else:  # an input is a tape row but no program line; a constant neither
            assert v["tape"] == (name if v["kinds"][name] == "input" else None), v
            assert v["fwd"] == v["rev"] == [], v
        return
    assert text.startswith("backward: "), v
    body = text[len("backward: "):]
    assert v["fwd"] == [], v
    if body == f"g{v['root']} = 1":  # the seed
        assert v["node"] == v["root"] and v["rev"][-1] == f"g{v['root']} = 1.0", v
        return
    head = body.split(" * ")[0]          # "gs += gt"
    s, t = head.split(" += ")
    s, t = s[1:], t[1:]
    assert v["edge"] == [s, t] and v["node"] == s and v["tape"] == t, v
    assert v["rev"], v  # (the sync expressions have no derivative that is always zero)
    assert v["rev"][-1].startswith((f"g{s} += ", f"g{s} -= ")), v
    assert f"g{t}" in _reads(v["rev"][-1].split("= ", 1)[1], v["program"]), v


def _reads(rhs, program):
    """The names an expression of the reverse program reads, through its temporaries."""
    temps = {}
    for ln in program:
        lhs, eq, right = ln.partition(" = ")
        if eq and not lhs.startswith("g") and "," not in lhs:
            temps[lhs] = right
    words = set(re.findall(r"[A-Za-z_]\w*", rhs))
    return words.union(*(_reads(temps[w], program) for w in words & set(temps)))


@pytest.mark.parametrize("text", [SEED_EXPR, SIZED[15], "maximum(x, y) * sin(x) - x/y"])
def test_step_text_graph_tape_and_programs_agree(page, server, text):
    pg = page
    pg.goto(server.url + "?expr=" + quote(text))
    wait_loaded(pg, 0)
    pg.focus("#step")
    seen = {}
    while True:
        v = pg.evaluate(_SYNC)
        _assert_in_sync(v)
        seen[v["step"]] = v
        if pg.is_disabled("#step"):
            break
        pg.keyboard.press("ArrowRight")
    total = step_count(pg)
    assert len(seen) == total + 1
    if text == SIZED[15]:
        pg.keyboard.press("Home")
        for _ in range(total - 6):
            pg.keyboard.press("ArrowRight")
        shot(pg, "sync-15-backward")
    # stepping back shows what stepping forward showed
    pg.keyboard.press("End")
    for _ in range(min(total, 12)):
        pg.keyboard.press("ArrowLeft")
        v = pg.evaluate(_SYNC)
        assert v == seen[v["step"]]
