"""The explorer's server: the seeds' gradient through the API, and strict, bounded handling of
hostile requests (each a 4xx JSON error, quickly, with the server answering afterwards)."""
import http.client
import json
import random
import re
import socket
import threading
import time

import numpy as np
import pytest

import wengert as wg
from wengert.explore import make_server
from wengert.explore.api import ApiError, expression_payload
from wengert.explore.server import MAX_BODY, is_loopback

SEED_EXPR = "x*y + sin(x)"
VALUE, DX, DY = 2.579425538604203, 5.077582561890373, 0.5
BOUND = 2.0  # seconds per request


@pytest.fixture(scope="module")
def server():
    srv = make_server("127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(server, method, path, body=None, headers=None):
    host, port = server.server_address[:2]
    c = http.client.HTTPConnection(host, port, timeout=10)
    t0 = time.perf_counter()
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    elapsed = time.perf_counter() - t0
    return r.status, r.getheader("Content-Type") or "", data, elapsed


def post(server, obj=None, raw=None):
    body = raw if raw is not None else json.dumps(obj).encode()
    return request(server, "POST", "/api/expression", body,
                   {"Content-Type": "application/json"})


def assert_client_error(result, *statuses, bound=BOUND):
    status, ctype, data, elapsed = result
    assert 400 <= status < 500, (status, data[:200])
    if statuses:
        assert status in statuses, (status, data[:200])
    assert ctype.startswith("application/json")
    msg = json.loads(data)["error"]
    assert isinstance(msg, str) and msg and "\n" not in msg and "Traceback" not in msg
    assert elapsed < bound, elapsed
    return msg


def assert_alive(server):
    status, _, data, _ = post(server, {"expr": SEED_EXPR, "inputs": {"x": 0.5, "y": 4.2}})
    assert status == 200 and json.loads(data)["value"] == VALUE


# -- the seeds' example ------------------------------------------------------------------------
def test_seed_gradient_via_api(server):
    status, ctype, data, _ = post(server, {"expr": SEED_EXPR, "inputs": {"x": 0.5, "y": 4.2}})
    assert status == 200 and ctype.startswith("application/json")
    d = json.loads(data)
    assert d["value"] == VALUE
    assert d["gradient"] == {"x": DX, "y": DY}
    assert d["adjoints"] == {"x": DX, "y": DY}  # the step-by-step accumulation agrees
    g = wg.grad(lambda x, y: x * y + wg.numpy.sin(x), argnums=(0, 1))(0.5, 4.2)
    assert (d["gradient"]["x"], d["gradient"]["y"]) == tuple(float(v) for v in g)
    assert d["variables"] == ["x", "y"]
    assert d["source"] == "def f(x, y):\n    return x * y + sin(x)\n"


def test_payload_structure():
    d = expression_payload(SEED_EXPR, {"x": 0.5, "y": 4.2})
    nodes, edges = d["graph"]["nodes"], d["graph"]["edges"]
    assert [n["label"] for n in nodes] == ["x", "y", "*", "sin", "+"]
    assert [n["name"] for n in nodes] == ["x", "y", "a", "b", "z"]  # as the seeds name them
    assert [n["layer"] for n in nodes] == [0, 0, 1, 1, 2]
    assert len(edges) == 5
    # forward steps: every node once, in evaluation order, with its value
    assert [s["node"] for s in d["forward"]] == [0, 1, 2, 3, 4]
    assert d["forward"][2]["value"] == 2.1
    # backward steps: seed the output, then push along edges in reverse order
    b = d["backward"]
    assert {k: b[0][k] for k in ("kind", "node", "adjoint", "text")} == \
        {"kind": "seed", "node": 4, "adjoint": 1.0, "text": "gz = 1"}
    # ... and each step names the program lines it runs (the seed: the zeros and gz = 1.0)
    rev = d["programs"]["reverse"].splitlines()
    assert [rev[i] for i in b[0]["rev_lines"]] == ["ga = gb = gx = gy = 0.0", "gz = 1.0"]
    assert [rev[i] for i in b[3]["rev_lines"]] == ["gx += cos(x) * gb"]
    fwd = d["programs"]["forward"].splitlines()
    assert [fwd[i] for i in d["forward"][2]["fwd_lines"]] == ["a = x * y", "da = y * dx + x * dy"]
    pushes = [(s["source"], s["target"], s["local"]) for s in b[1:]]
    assert pushes == [(2, 4, 1.0), (3, 4, 1.0), (0, 3, pytest.approx(0.8775825618903728)),
                      (0, 2, 4.2), (1, 2, 0.5)]
    assert b[-2]["adjoint"] == DX and b[-1]["adjoint"] == DY
    # the tape is the one wg.Tape records
    assert [r["op"] for r in d["tape"]] == ["input", "input", "multiply", "sin", "add"]
    assert d["tape"][2]["args"] == ["x", "y"]


def test_shared_subexpression_accumulates():
    d = expression_payload("sin(x*y) * (x*y)", {"x": 0.3, "y": 0.9})
    muls = [n for n in d["graph"]["nodes"] if n["label"] == "*"]
    assert len(muls) == 2  # x*y once
    g = wg.grad(lambda x, y: wg.numpy.sin(x * y) * (x * y), argnums=(0, 1))(0.3, 0.9)
    assert d["gradient"]["x"] == pytest.approx(float(g[0]), rel=1e-15)
    assert d["adjoints"]["x"] == pytest.approx(float(g[0]), rel=1e-12)
    assert d["adjoints"]["y"] == pytest.approx(float(g[1]), rel=1e-12)


def test_random_inputs_in_unit_interval(server):
    for _ in range(20):
        status, _, data, _ = post(server, {"expr": "a + b*c"})
        d = json.loads(data)
        assert status == 200 and set(d["inputs"]) == {"a", "b", "c"}
        assert all(0.0 <= v <= 1.0 for v in d["inputs"].values())


def test_non_finite_values_are_json_strings(server):
    status, _, data, _ = post(server, {"expr": "log(x) + 1/y", "inputs": {"x": 0, "y": 0}})
    assert status == 200
    d = json.loads(data)  # strict JSON: no NaN / Infinity tokens
    assert d["value"] in ("inf", "-inf", "nan")


def test_static_files(server):
    status, ctype, data, _ = request(server, "GET", "/")
    assert status == 200 and ctype.startswith("text/html") and b"wengert explorer" in data
    for path, kind in [("/static/app.js", "text/javascript"), ("/static/style.css", "text/css"),
                       ("/static/dagre.min.js", "text/javascript"),
                       ("/static/dagre.LICENSE.txt", "text/plain")]:
        status, ctype, _, _ = request(server, "GET", path)
        assert status == 200 and ctype.startswith(kind)


def test_vendored_layout_engine_is_the_published_file_with_its_licence():
    """dagre is @dagrejs/dagre 3.1.3's dist/dagre.min.js, byte for byte (its sha256 as
    published), with the MIT licence beside it; the page loads it before app.js."""
    import hashlib
    from wengert.explore.server import STATIC
    data = (STATIC / "dagre.min.js").read_bytes()
    assert hashlib.sha256(data).hexdigest() == \
        "54a503e346f93ca0bb10abe7999587e037262935687aca45eb4e4b0f64bbb578"
    licence = (STATIC / "dagre.LICENSE.txt").read_text()
    assert "MIT" in licence and "Permission is hereby granted" in licence
    assert b"eval(" not in data and b"new Function" not in data  # the page's CSP forbids both
    html = (STATIC / "index.html").read_text()
    assert html.index("/static/dagre.min.js") < html.index("/static/app.js")


def test_page_loads_nothing_from_elsewhere(server):
    for path in ["/", "/static/app.js", "/static/style.css", "/static/dagre.min.js"]:
        _, _, data, _ = request(server, "GET", path)
        assert b"http://" not in data.replace(b"http://www.w3.org/2000/svg", b"")
        assert b"https://" not in data


def test_schedule(server):
    status, _, data, _ = request(server, "GET", "/api/schedule?n=16&strategy=ctz&snapshots=3")
    assert status == 200
    d = json.loads(data)
    assert d["n"] == 16 and d["strategy"] == "ctz"
    kinds = {a["kind"] for a in d["actions"]}
    assert {"advance", "store", "reverse"} <= kinds
    rows = d["rows"]
    assert rows[0]["cells"] == "X.......X...X.XX"  # the seed's diagram after the forward sweep
    assert rows[1]["cells"] == "X.......X...X.X^"
    assert rows[5]["cells"] == "X.......X+X^...."  # recompute from 8, keeping a
    assert rows[9]["cells"] == "X+++X+X^........"  # to get 7, recompute from 0 keeping 4, 6
    assert len(rows) == 17
    assert d["stats"]["max_stored"] <= 16 .bit_length() + 1


def test_schedule_online_uses_its_snapshots(server):
    status, _, data, _ = request(server, "GET", "/api/schedule?n=40&strategy=online&snapshots=4")
    assert status == 200
    d = json.loads(data)
    assert d["strategy"] == "online" and d["snapshots"] == 4 and len(d["rows"]) == 41
    assert d["stats"]["max_snapshots"] <= 4
    want = wg.checkpoint_schedule(40, "online", snapshots=4)
    assert [a["kind"] for a in d["actions"]] == [a.kind for a in want]


@pytest.mark.parametrize("query", ["n=0", "n=-1", "n=abc", "n=100000", "strategy=nope",
                                   "n=16&n=17", "snapshots=x&strategy=binomial", "bogus=1",
                                   "n=1e3", "n=%ff", "&".join(["n=1"] * 50)])
def test_schedule_bad_queries(server, query):
    result = request(server, "GET", "/api/schedule?" + query)
    assert_client_error(result, 400)


# -- hostile requests ----------------------------------------------------------------------------
_ATTACKS = ["x.__class__", "().__class__.__bases__[0].__subclasses__()", "__import__('os')",
            "9**9**9", "exp(1e5)", "lambda: 1", "open('/etc/passwd')", "x[0]", "'a'*10**9",
            "getattr(x, '__dict__')", "[x for x in range(10**9)]", "x if y else z",
            "eval('1')", "sin", "foo(x)", "__builtins__", "(" * 150 + "x" + ")" * 150,
            "-" * 5000 + "x", "x" * 20_000, "\x00", "\ud800", "1e999"]


def _hostile_expression(rng):
    kind = rng.randrange(5)
    if kind == 0:
        return rng.choice(_ATTACKS)
    if kind == 1:
        return "".join(rng.choice(["__", "import", "(", ")", ".", "x", "'", "[", "]", "**",
                                   "9", "lambda", ":", "os", "sin", " ", "\\", "\n"])
                       for _ in range(rng.randrange(1, 25)))
    if kind == 2:
        return rng.choice(["+", "*", "-"]).join(["x"] * rng.choice([300, 2000, 4000]))
    if kind == 3:
        return "".join(chr(rng.randrange(1, 0xD7FF)) for _ in range(rng.randrange(1, 30)))
    return rng.choice(_ATTACKS) + rng.choice(["", " + x", "*y", ".__class__"])


def _hostile_body(rng):
    kind = rng.randrange(9)
    if kind == 0:
        return b"\xff\xfe" + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    if kind == 1:
        return b'{"expr": "x\xc3\x28"}'  # invalid UTF-8 inside a string
    if kind == 2:
        return rng.choice([b"{", b"}", b"{bad json", b'{"expr": }', b"[" * 5000,
                           b'{"expr": "x", }', b"NaN", b'{"expr": NaN}', b"",
                           b'{"expr": "x", "inputs": {"x": Infinity}}'])
    if kind == 3:
        return json.dumps(rng.choice([[], "x", 1, None, {}, {"expr": 1}, {"expr": None},
                                      {"expr": ["x"]}, {"expr": "x", "inputs": [1]},
                                      {"expr": "x", "inputs": {"x": "abc"}},
                                      {"expr": "x", "inputs": {"x": True}},
                                      {"expr": "x", "inputs": {"x": 1e308 * 10}},
                                      {"expr": "x", "extra": 1}])).encode()
    if kind == 4:
        return b'{"inputs": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    if kind == 5:
        return json.dumps({"expr": "x", "inputs": {"x": int("9" * 400)}}).encode()
    return json.dumps({"expr": _hostile_expression(rng)}).encode()


def test_thousands_of_hostile_requests(server):
    rng = random.Random(7)
    statuses = {}
    times = []
    for i in range(2000):
        body = _hostile_body(rng)
        status, ctype, data, elapsed = post(server, raw=body)
        if status == 200:  # random junk can be a valid expression now and then
            json.loads(data)
            continue
        # one request in 2,000 may wait out a busy machine's scheduler (4.6 s seen under a
        # load of 10 on 2 cores); a request that hangs or costs its input's square does not
        # fit under 5 BOUNDs, and the 99th percentile must stay under one
        assert_client_error((status, ctype, data, elapsed), bound=5 * BOUND)
        statuses[status] = statuses.get(status, 0) + 1
        times.append(elapsed)
    assert np.percentile(times, 99) < BOUND
    assert sum(statuses.values()) > 1800
    assert set(statuses) <= {400, 413, 422}
    assert_alive(server)


@pytest.mark.parametrize("size", [MAX_BODY + 1, 1 << 20, 8 << 20])
def test_large_bodies_refused(server, size):
    body = json.dumps({"expr": "x" + " " * size}).encode()
    try:
        result = post(server, raw=body)
    except (ConnectionError, BrokenPipeError):
        result = None  # very large: the server may hang up before the client finishes
    if result is not None:
        msg = assert_client_error(result, 413)
        assert "too large" in msg
    assert_alive(server)


def test_expression_too_large_for_drawing(server):
    text = " + ".join(f"sin(a{i}) * cos(b{i})" for i in range(100))  # 600 nodes, shallow
    msg = assert_client_error(post(server, {"expr": text}), 413)
    assert "too large" in msg


TRAVERSALS = [
    "/static/../../etc/passwd", "/static/../server.py", "/static/..%2f..%2fserver.py",
    "/static/%2e%2e/%2e%2e/etc/passwd", "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/static/%252e%252e/server.py", "/static/..\\..\\server.py", "/static/%5c..%5cserver.py",
    "/static//etc/passwd", "/static/%2fetc%2fpasswd", "/static/./../api.py",
    "/static/app.js%00.png", "/static/%00", "/static/", "/static", "/../../etc/passwd",
    "/etc/passwd", "//etc/passwd", "/static/....//....//etc/passwd", "/static/..;/server.py",
    "/static/%c0%ae%c0%ae/server.py", "/static/nonexistent.js", "/static/../__init__.py",
    "/static/" + "a/" * 2000, "/api/expression", "/api/nope", "/index.php", "/.git/config",
]


@pytest.mark.parametrize("path", TRAVERSALS, ids=[p[:40] for p in TRAVERSALS])
def test_path_traversal_refused(server, path):
    result = request(server, "GET", path)
    msg = assert_client_error(result, 400, 404, 405)
    assert "root:" not in msg
    assert b"import" not in result[2]


def test_path_traversal_over_raw_socket(server):
    """Paths sent exactly as written, with no client-side normalisation."""
    host, port = server.server_address[:2]
    for path in ["/static/../../../../etc/passwd", "/static/../server.py",
                 "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/static/..%2fapi.py"]:
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        head = data.split(b"\r\n", 1)[0]
        assert head.split()[1] in (b"400", b"404"), head
        assert b"root:" not in data and b"import" not in data


@pytest.mark.parametrize("raw", [
    b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
    b"GET /" + b"a" * 70000 + b" HTTP/1.0\r\n\r\n",
    b"BREW / HTTP/1.0\r\n\r\n", b"DELETE / HTTP/1.0\r\n\r\n",
    b"POST /api/expression HTTP/1.0\r\nContent-Length: abc\r\n\r\n",
    b"POST /api/expression HTTP/1.0\r\nContent-Length: -5\r\n\r\n",
    b"POST /api/expression HTTP/1.0\r\n\r\n",
    b"POST /api/expression HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    b"POST /api/expression HTTP/1.0\r\nContent-Length: 10\r\n\r\n{}",
    b"GET / HTTP/1.0\r\n" + b"X-A: b\r\n" * 200 + b"\r\n",
    b"GET / HTTP/1.0\r\nHost: evil.example\r\n\r\n",
])
def test_malformed_requests(server, raw):
    host, port = server.server_address[:2]
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=15) as s:
        s.sendall(raw)
        if b"Content-Length: 10\r\n" in raw:
            s.shutdown(socket.SHUT_WR)  # the body never completes
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert time.perf_counter() - t0 < 12
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    assert 400 <= status < 500, head
    assert json.loads(body)["error"]
    assert_alive(server)


def test_slow_client_does_not_block_others(server):
    host, port = server.server_address[:2]
    slow = socket.create_connection((host, port), timeout=30)
    try:
        slow.sendall(b"POST /api/expression HTTP/1.0\r\nContent-Length: 1000\r\n\r\n{")
        t0 = time.perf_counter()
        assert_alive(server)  # served by another thread meanwhile
        assert time.perf_counter() - t0 < BOUND
    finally:
        slow.close()


def test_security_headers(server):
    host, port = server.server_address[:2]
    c = http.client.HTTPConnection(host, port, timeout=10)
    c.request("GET", "/")
    r = c.getresponse()
    r.read()
    assert r.getheader("X-Content-Type-Options") == "nosniff"
    assert "default-src 'self'" in r.getheader("Content-Security-Policy")
    c.close()


# -- binding ---------------------------------------------------------------------------------------
def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert is_loopback("127.8.9.10")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10")
    assert not is_loopback("example.com") and not is_loopback("::")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_non_loopback_bind_refused_without_explicit_host(host):
    with pytest.raises(PermissionError, match="not a loopback address; pass --host"):
        make_server(host, 0)


def test_explicit_non_loopback_bind_allowed():
    srv = make_server("0.0.0.0", 0, allow_remote=True)
    try:
        assert srv.server_address[0] == "0.0.0.0" and not srv.loopback
    finally:
        srv.server_close()


def test_serve_refuses_and_says_so(monkeypatch):
    from wengert.explore import server as server_mod
    with pytest.raises(PermissionError) as info:
        server_mod.make_server("0.0.0.0", 0)
    assert "--host" in str(info.value)


def test_default_bind_is_loopback():
    srv = make_server()
    try:
        assert srv.server_address[0] == "127.0.0.1"
        assert srv.url.startswith("http://127.0.0.1:")
    finally:
        srv.server_close()


# -- steps and program lines ------------------------------------------------------------------
def _check_program_lines(d):
    """Every step's program lines say what the step does, and every line of the reverse
    sweep belongs to exactly one step."""
    names = {n["id"]: n["name"] for n in d["graph"]["nodes"]}
    fwd = d["programs"]["forward"].splitlines()
    rev = d["programs"]["reverse"].splitlines()
    for st in d["forward"]:
        nm = names[st["node"]]
        kind = d["graph"]["nodes"][st["node"]]["kind"]
        got_f = [fwd[i] for i in st["fwd_lines"]]
        got_r = [rev[i] for i in st["rev_lines"]]
        if kind != "op":
            assert got_f == got_r == [], st
            continue
        assert st["text"].startswith(f"{nm} = ")
        heads = [ln.split(" = ")[0] for ln in got_f]
        assert heads in ([nm, "d" + nm], [f"{nm}, d{nm}"]), (st, got_f)
        assert [ln.split(" = ")[0].split(",")[0] for ln in got_r] == [nm], (st, got_r)
    seed = d["backward"][0]
    root = names[seed["node"]]
    assert [rev[i] for i in seed["rev_lines"]][-1] == f"g{root} = 1.0"
    defined = {}  # temporaries of the reverse sweep: name -> what its line reads
    for ln in rev[seed["rev_lines"][-1] + 1:]:
        lhs, op, rhs = ln.partition(" = ")
        if op and not lhs.startswith("g"):
            defined[lhs] = rhs

    def reads(rhs):
        words = set(re.findall(r"[A-Za-z_]\w*", rhs))
        return words.union(*(reads(defined[w]) for w in words & set(defined)))
    claimed = set()
    for st in d["backward"][1:]:
        s, t = names[st["source"]], names[st["target"]]
        lines = [rev[i] for i in st["rev_lines"]]
        if not lines:  # the transformer writes no line for a derivative that is always zero
            assert st["local"] == 0.0, st
            continue
        *temps, line = lines  # temporaries first (ct = a_pullback(ga)), then the push
        assert all(ln.split(" = ")[0] in defined for ln in temps), lines
        assert line.startswith((f"g{s} += ", f"g{s} -= ")), (st, line)
        assert f"g{t}" in reads(line.split("= ", 1)[1]), (st, lines)
        assert st["text"].startswith(f"g{s} += g{t} * ")
        claimed.update(st["rev_lines"])
    after_seed = set(range(seed["rev_lines"][-1] + 1, len(rev)))
    assert claimed == after_seed, [rev[i] for i in after_seed - claimed]


@pytest.mark.parametrize("text", [
    SEED_EXPR, "x*x*x", "sin(x*y) * (x*y) + exp(-x/z) - log(1 + y*y)", "exp(x)*exp(x)",
    "a*b*c*d + a", "x**2 - x % 3 // y", "-x/y", "hypot(x, y) * exp(x*y)", "x - x",
    "2*x + pi", "tanh(w1*x + w2*y + b) * v1 + sin(x*y) / (1 + exp(-z))"])
def test_steps_name_their_program_lines(text):
    d = expression_payload(text, rng=random.Random(3))
    assert d["programs"], d["programs_error"]
    _check_program_lines(d)


def test_every_function_steps_through_its_program_lines():
    from wengert.expr import FUNCTIONS
    rng = random.Random(5)
    missing = []
    for name, (_, nargs) in sorted(FUNCTIONS.items()):
        text = f"{name}(x) * y" if nargs == 1 else f"{name}(x, y) + x"
        for x in (0.4, 1.4, 2.5):  # a point in the function's domain (arccosh needs x > 1)
            try:
                d = expression_payload(text, {"x": x, "y": 0.7}, rng=rng)
                break
            except ApiError:
                continue
        if d["programs"] is None:
            missing.append(name)
            continue
        _check_program_lines(d)
    assert len(missing) < len(FUNCTIONS) // 4, missing


def test_names_are_the_programs_names():
    d = expression_payload("exp(x)*exp(x) + a*b*c*d", {"x": 0.1, "a": 1, "b": 2, "c": 3, "d": 4})
    names = [n["name"] for n in d["graph"]["nodes"]]
    assert "f" not in names and "d" in names  # d the user's variable; f the program's name
    for n in d["graph"]["nodes"]:
        if n["kind"] == "op":
            assert any(ln.startswith(n["name"] + " = ")
                       for ln in d["programs"]["forward"].splitlines()), n


# -- many clients at once -------------------------------------------------------------------------
def _concurrent_requests(server, n, bound):
    """``n`` clients connect at the same moment and each POSTs the seed expression; returns
    the statuses (or exception names) and the slowest answer, every client bounded in time."""
    host, port = server.server_address[:2]
    start = threading.Barrier(n)
    results = [None] * n

    def client(i):
        start.wait()
        t0 = time.perf_counter()
        try:
            c = http.client.HTTPConnection(host, port, timeout=bound)
            c.request("POST", "/api/expression",
                      body=json.dumps({"expr": SEED_EXPR, "inputs": {"x": 0.5, "y": 4.2}}),
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            body = r.read()
            c.close()
            ok = r.status == 200 and json.loads(body)["value"] == VALUE
            results[i] = ("answered" if ok else r.status, time.perf_counter() - t0)
        except Exception as e:  # a reset or a timeout: the failure this test is about
            results[i] = (type(e).__name__, time.perf_counter() - t0)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(bound + 5)
    assert not any(t.is_alive() for t in threads)
    return [r[0] for r in results], max(r[1] for r in results)


def test_two_hundred_clients_at_once_are_all_answered(server):
    statuses, slowest = _concurrent_requests(server, 200, bound=30)
    assert statuses == ["answered"] * 200, {s: statuses.count(s) for s in set(statuses)}
    assert slowest < 30
    assert server.request_queue_size >= 512  # the backlog that made some of them resets
    assert_alive(server)


def test_clients_beyond_the_thread_limit_wait_for_a_thread():
    from wengert.explore.server import ExplorerServer, Handler
    busy, most, lock = [0], [0], threading.Lock()

    class Counting(Handler):
        def handle(self):
            with lock:
                busy[0] += 1
                most[0] = max(most[0], busy[0])
            try:
                time.sleep(0.05)  # a slow request: the others pile up behind the three
                super().handle()
            finally:
                with lock:
                    busy[0] -= 1

    class Small(ExplorerServer):
        max_threads = 3
    small = Small(("127.0.0.1", 0), Counting, True)
    threading.Thread(target=small.serve_forever, daemon=True).start()
    try:
        statuses, _ = _concurrent_requests(small, 40, bound=30)
        assert statuses == ["answered"] * 40
        assert most[0] == 3  # three at a time; the others waited, none was refused
    finally:
        small.shutdown()
        small.server_close()


# -- slow clients (issue 28 §6): a deadline per request, a cap per client address --------------
def _slow_server(deadline):
    srv = make_server("127.0.0.1", 0)
    # set as attributes, not make_server's arguments, so that this test runs (and fails)
    # on a server without these bounds too
    srv.request_deadline = deadline
    srv.max_per_client = 32
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def _trickle(socks, stop, period):
    """Send one byte of a never-finished request on every socket each ``period`` s."""
    msg = b"GET /api/health HTTP/1.0\r\nX-Slow: " + b"a" * 10_000
    pos = 0
    while not stop.wait(period):
        for s in list(socks):
            try:
                s.send(msg[pos:pos + 1])
            except OSError:  # dropped by the server
                socks.remove(s)
        pos += 1


def test_a_trickling_request_is_dropped_at_its_deadline():
    srv = _slow_server(1.0)
    s = socket.create_connection(srv.server_address[:2], timeout=5)
    stop = threading.Event()
    socks = [s]
    feeder = threading.Thread(target=_trickle, args=(socks, stop, 0.2), daemon=True)
    t0 = time.perf_counter()
    feeder.start()
    try:
        s.settimeout(4.0)  # a byte every 0.2 s keeps any per-read timeout happy
        try:
            closed = s.recv(1024) == b""
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            closed = False
        assert closed, "the server kept a request that never arrived whole for 4 s"
        assert time.perf_counter() - t0 < 3.0
    finally:
        stop.set()
        feeder.join()
        s.close()
        srv.shutdown()
        srv.server_close()


def test_legitimate_requests_are_answered_during_a_slow_client_flood():
    """300 connections sending a byte a second (more than the server's 256 threads) while
    20 ordinary requests come in: every ordinary one is answered, quickly."""
    srv = _slow_server(2.0)
    host, port = srv.server_address[:2]
    socks, stop = [], threading.Event()
    feeder = threading.Thread(target=_trickle, args=(socks, stop, 1.0), daemon=True)
    try:
        for _ in range(300):
            s = socket.socket()
            s.settimeout(5)
            s.connect((host, port))
            s.send(b"G")
            socks.append(s)
        feeder.start()
        answered, times = 0, []
        t_end = time.perf_counter() + 8.0
        for _ in range(20):
            t0 = time.perf_counter()
            c = http.client.HTTPConnection(host, port, timeout=3)
            try:
                c.request("GET", "/api/health")
                r = c.getresponse()
                if r.status == 200 and json.loads(r.read()) == {"ok": True}:
                    answered += 1
                    times.append(time.perf_counter() - t0)
            except OSError:
                pass
            finally:
                c.close()
            if time.perf_counter() > t_end:
                break
            time.sleep(0.1)
        assert answered == 20, f"{answered} of 20 ordinary requests answered"
        assert max(times) < 2.0
    finally:
        stop.set()
        if feeder.is_alive():
            feeder.join()
        for s in socks:
            s.close()
        srv.shutdown()
        srv.server_close()
