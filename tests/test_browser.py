"""End to end in headless Chromium: type the seeds' expression, step through both passes,
read the gradient off the page and compare with wg.grad.  Screenshots go to artifacts/.

Needs Debian's Chromium (apt-get install chromium) and the Python playwright package
(pip install playwright); never `playwright install`.  Skipped, with the reason, otherwise.
"""
import json
import os
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
