"""A small local web server for the explorer (standard library only).

Bound to 127.0.0.1 unless another address is asked for explicitly.  Requests are
handled strictly: bounded bodies and headers, JSON only, static files only from
the package's ``static`` folder, and every error is a 4xx JSON ``{"error": ...}``.
"""
from __future__ import annotations

import io
import ipaddress
import json
import mimetypes
import socket
import sys
import threading
import time
import webbrowser
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote

from ..expr import ALIASES, FUNCTIONS
from .api import ApiError, expression_payload, schedule_payload

__all__ = ["make_server", "serve", "ExplorerServer", "is_loopback", "MAX_BODY", "STATIC"]

MAX_BODY = 64 * 1024
STATIC = Path(__file__).resolve().parent / "static"
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
          ".ico": "image/x-icon", ".json": "application/json", ".txt": "text/plain"}
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'; form-action 'none'")


def is_loopback(host):
    if host in ("localhost", "localhost.", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ExplorerServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_threads`` at once; connections beyond that
    wait (accepted, or in the listen queue) for a thread rather than being reset: with a
    listen backlog of 64, a few hundred clients at once saw resets.

    Slow clients cannot hold the threads: a request must arrive whole (request line,
    headers, body) within ``request_deadline`` seconds, however steadily its bytes trickle
    in, and one client address has at most ``max_per_client`` connections still sending
    their request; a new one beyond that drops the oldest of them (the slowest), so a
    request sent at once is answered while a flood from the same address is still open."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # the listen backlog (the kernel caps it at somaxconn)
    max_threads = 256
    request_deadline = 10.0  # seconds
    max_per_client = 32

    def __init__(self, address, handler, loopback, request_deadline=None, max_per_client=None):
        host = address[0]
        if ":" in host:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)
        self.loopback = loopback
        if request_deadline is not None:
            self.request_deadline = float(request_deadline)
        if max_per_client is not None:
            self.max_per_client = int(max_per_client)
        self._slots = threading.BoundedSemaphore(self.max_threads)
        self._stopping = False
        self._reading = {}  # client address -> its connections still sending, oldest first
        self._reading_lock = threading.Lock()

    def _admit(self, request, host):
        """Count ``request`` among ``host``'s connections still sending their request;
        beyond ``max_per_client``, the oldest are dropped (their threads wake and end)."""
        with self._reading_lock:
            queue = self._reading.setdefault(host, [])
            queue.append(request)
            dropped = queue[:max(0, len(queue) - self.max_per_client)]
            del queue[:len(dropped)]
        for sock in dropped:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def request_read(self, request, host):
        """``request`` has arrived whole (or its connection ended): no longer counted."""
        with self._reading_lock:
            queue = self._reading.get(host)
            if queue is not None and request in queue:
                queue.remove(request)
                if not queue:
                    del self._reading[host]

    def process_request(self, request, client_address):
        self._admit(request, client_address[0])
        while not self._slots.acquire(timeout=0.2):  # every thread busy: this one waits
            if self._stopping:
                self.request_read(request, client_address[0])
                self.shutdown_request(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.request_read(request, client_address[0])
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.request_read(request, client_address[0])
            self._slots.release()

    def handle_error(self, request, client_address):
        """A client gone (or dropped as too slow) while we wrote: nothing to report."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

    def shutdown(self):
        self._stopping = True
        super().shutdown()

    @property
    def url(self):
        host, port = self.server_address[:2]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/"


class _DeadlineIO(socket.SocketIO):
    """A socket's reading side that gives up at a deadline: a per-read timeout alone lets a
    client that sends one byte every few seconds hold its connection forever."""

    def __init__(self, sock, deadline, read_timeout):
        super().__init__(sock, "rb")
        self.deadline, self.read_timeout = deadline, read_timeout

    def readinto(self, b):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(min(left, self.read_timeout))
        return super().readinto(b)


class Handler(BaseHTTPRequestHandler):
    server_version = "wengert-explore"
    sys_version = ""
    timeout = 10  # seconds between two reads (and for each write)
    protocol_version = "HTTP/1.0"
    default_request_version = "HTTP/1.0"  # answer even garbage with a status line

    def setup(self):
        super().setup()
        deadline = time.monotonic() + getattr(self.server, "request_deadline", 10.0)
        self.rfile.close()  # (the socket stays open: this only lets go of the reader)
        self.rfile = io.BufferedReader(_DeadlineIO(self.connection, deadline, self.timeout))

    def _arrived(self):
        """The request has been read whole: its connection no longer counts as sending."""
        done = getattr(self.server, "request_read", None)
        if done is not None:
            done(self.request, self.client_address[0])

    # -- responses -----------------------------------------------------------------
    def _send(self, status, body, ctype, extra=()):
        self.connection.settimeout(self.timeout)  # a read may have left less
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", _CSP)
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except OSError:
                pass

    def send_json(self, status, data):
        body = json.dumps(data, allow_nan=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def send_error(self, code, message=None, explain=None):
        """Every error as JSON (also those raised by the request-line parser)."""
        if code >= 500 and code != 501:
            code = 400
        if code == 501:  # unknown method
            code = 405
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        self.close_connection = True
        self.send_json(code, {"error": message or phrase})

    def fail(self, status, message):
        self.close_connection = True
        self.send_json(status, {"error": message})

    def log_message(self, format, *args):  # quiet: the terminal shows only the address
        if getattr(self.server, "verbose", False):
            super().log_message(format, *args)

    # -- routing -----------------------------------------------------------------------
    def _split(self):
        raw = self.path
        path, _, query = raw.partition("?")
        path = path.partition("#")[0]
        return path, query

    def _host_ok(self):
        if not getattr(self.server, "loopback", False):
            return True
        host = self.headers.get("Host")
        if host is None:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if host.startswith("["):
            name = host[:host.find("]") + 1]
        return is_loopback(name)

    def do_GET(self):
        self._arrived()
        try:
            if not self._host_ok():
                return self.fail(403, "the explorer only answers requests addressed to "
                                      "localhost")
            path, query = self._split()
            if path in ("/", "/index.html"):
                return self._static("index.html")
            if path == "/api/schedule":
                try:
                    q = parse_qs(query, keep_blank_values=True, strict_parsing=False,
                                 max_num_fields=10, errors="strict")
                except (ValueError, UnicodeDecodeError) as e:
                    return self.fail(400, f"bad query string: {e}")
                return self.send_json(200, schedule_payload(q))
            if path == "/api/functions":
                return self.send_json(200, {"functions": sorted(FUNCTIONS),
                                            "aliases": ALIASES})
            if path == "/api/health":
                return self.send_json(200, {"ok": True})
            if path.startswith("/static/"):
                return self._static(path[len("/static/"):])
            return self.fail(404, f"not found: {path[:100]}")
        except ApiError as e:
            return self.fail(e.status, str(e))
        except Exception as e:  # never a 500 with a traceback
            return self.fail(400, f"bad request: {type(e).__name__}")

    def do_POST(self):
        try:
            if not self._host_ok():
                return self.fail(403, "the explorer only answers requests addressed to "
                                      "localhost")
            path, _ = self._split()
            if path != "/api/expression":
                return self.fail(404 if not path.startswith("/api/") and path != "/"
                                 else 405 if path in ("/", "/api/schedule") else 404,
                                 f"no POST endpoint at {path[:100]}")
            data = self._read_json()
            self._arrived()
            if not isinstance(data, dict):
                return self.fail(400, "the request body must be a JSON object")
            unknown = set(data) - {"expr", "inputs"}
            if unknown:
                return self.fail(400, f"unknown field {sorted(unknown)[0][:40]!r}")
            if "expr" not in data:
                return self.fail(400, "missing field 'expr'")
            payload = expression_payload(data["expr"], data.get("inputs"))
            return self.send_json(200, payload)
        except ApiError as e:
            return self.fail(e.status, str(e))
        except Exception as e:
            return self.fail(400, f"bad request: {type(e).__name__}")

    def _method_not_allowed(self):
        self.fail(405, f"method {self.command} not allowed")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_TRACE = do_CONNECT = \
        _method_not_allowed

    # -- pieces ---------------------------------------------------------------------
    def _read_json(self):
        if self.headers.get("Transfer-Encoding"):
            raise ApiError("chunked bodies are not accepted; send Content-Length", 411)
        length = self.headers.get("Content-Length")
        if length is None:
            raise ApiError("Content-Length required", 411)
        try:
            n = int(length.strip(), 10)
        except ValueError:
            raise ApiError("bad Content-Length") from None
        if n < 0:
            raise ApiError("bad Content-Length")
        if n > MAX_BODY:
            self._drain(n)
            raise ApiError(f"request body too large ({n} bytes; the limit is {MAX_BODY})", 413)
        try:
            raw = self.rfile.read(n)
        except TimeoutError:
            raise ApiError("the request body did not arrive in time", 408) from None
        if len(raw) != n:
            raise ApiError("request body shorter than its Content-Length")
        try:
            text = raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError as e:
            raise ApiError(f"request body is not valid UTF-8 (byte {e.start})") from None
        try:
            return json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            raise ApiError(f"malformed JSON: {e.msg} (line {e.lineno}, column {e.colno})") \
                from None
        except RecursionError:
            raise ApiError("malformed JSON: nested too deeply") from None
        except ValueError as e:
            raise ApiError(f"malformed JSON: {' '.join(str(e).split())[:120]}") from None

    def _drain(self, n):
        """Read (and drop) a too-large body, up to a bound, so the client sees our 413."""
        left = min(n, 16 * MAX_BODY)
        try:
            while left > 0:
                chunk = self.rfile.read(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def _static(self, rel):
        try:
            rel = unquote(rel, errors="strict")
        except UnicodeDecodeError:
            return self.fail(400, "bad path")
        if "\x00" in rel or "\\" in rel or rel.startswith("/") or not rel:
            return self.fail(404, "not found")
        root = STATIC
        try:
            target = (root / rel).resolve()
        except (OSError, ValueError, RuntimeError):
            return self.fail(404, "not found")
        if not target.is_relative_to(root) or not target.is_file():
            return self.fail(404, "not found")
        ctype = _TYPES.get(target.suffix.lower()) or mimetypes.guess_type(target.name)[0] \
            or "application/octet-stream"
        self._send(200, target.read_bytes(), ctype)


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def make_server(host="127.0.0.1", port=0, *, allow_remote=False, verbose=False,
                request_deadline=None, max_per_client=None):
    """An :class:`ExplorerServer` (not yet serving).

    A non-loopback ``host`` is refused unless ``allow_remote`` (the command
    line's explicit ``--host``).  ``request_deadline`` (seconds, 10 by default) and
    ``max_per_client`` (32) bound what slow clients can hold (see ``ExplorerServer``).
    """
    loop = is_loopback(host)
    if not loop and not allow_remote:
        raise PermissionError(f"refusing to serve on {host}, which is not a loopback "
                              "address; pass --host explicitly to expose the explorer")
    server = ExplorerServer((host, port), Handler, loop, request_deadline, max_per_client)
    server.verbose = verbose
    return server


def serve(host=None, port=8765, open_browser=True, out=None):
    """Serve until interrupted (the ``wengert explore`` command)."""
    out = out or sys.stdout
    explicit = host is not None
    server = make_server(host or "127.0.0.1", port, allow_remote=explicit)
    url = server.url
    if not server.loopback:
        out.write(f"warning: serving on {host}, reachable from other machines\n")
    out.write(f"wengert explorer at {url}  (Ctrl+C to stop)\n")
    out.flush()
    if open_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
