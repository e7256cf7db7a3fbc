"""The run's view over HTTP (issue 21): a thin adapter from a `ViewSource` to a stdlib
`ThreadingHTTPServer` in a daemon thread. The page and its JSON come from the same
origin and load nothing from anywhere else; the endpoints: docs/view.md.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Mapping
from contextlib import suppress
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from fogsdn.view.state import RequestError, error_document, finite, json_object, require_token

EVENT_PERIOD_S = 0.4  # at least two updates a second
MAX_BODY = 1 << 16
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class ViewSource(Protocol):
    """What the server asks of a live run or a finished one."""

    token: str  # "" where writes are refused (a replay)

    def state(self, t_ms: float | None = None) -> dict[str, object]: ...

    def topology(self) -> Mapping[str, object]: ...

    def summary(self) -> dict[str, object]: ...

    def swap_policy(self, request: dict[str, object]) -> dict[str, object]: ...


def lower_priority(nice: int) -> None:
    """This thread (and the threads it starts) at a lower CPU priority than the run's:
    on Linux a thread's nice value is its own and is inherited by the threads it starts."""
    with suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def static_page() -> bytes:
    return resources.files("fogsdn.view").joinpath("view_static/index.html").read_bytes()


class _Handler(BaseHTTPRequestHandler):
    server: ViewHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib's name)
        pass  # the run's own output stays readable

    def _send(self, status: int, body: bytes, ctype: str,
              headers: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers:
            self.send_header(name, value)
        if status >= 400:  # a body we did not read would be taken for the next request
            self.close_connection = True
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":  # a HEAD answer has headers only
            self.wfile.write(body)

    def _json(self, status: int, obj: object, headers: tuple[tuple[str, str], ...] = ()) -> None:
        self._send(status, json.dumps(finite(obj)).encode() + b"\n", "application/json",
                   headers)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """The stdlib's own refusals (a bad request line, an unknown method or HTTP
        version, a line too long) as JSON like ours, not its HTML page; with a status line
        even where the request's version was not read (the stdlib then takes HTTP/0.9,
        whose answers have none)."""
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.0"
        self._json(code, error_document(message or HTTPStatus(code).phrase))

    def parse_request(self) -> bool:
        """HTTP/0.9 (`GET /`, no version) is refused: its answer has no status line and
        no headers, so no client can tell an error from the page."""
        if not super().parse_request():
            return False
        if self.request_version == "HTTP/0.9":
            self.send_error(400, "HTTP/0.9 is not served: give a version (HTTP/1.1)")
            return False
        return True

    def do_GET(self) -> None:  # noqa: N802 (stdlib's name)
        url = urlparse(self.path)
        src = self.server.source
        try:
            if url.path in ("/", "/index.html"):
                self._send(200, static_page(), "text/html; charset=utf-8")
            elif url.path == "/api/state":
                t = parse_qs(url.query).get("t", [])
                try:
                    t_ms = float(t[0]) if t else None
                except ValueError:
                    raise RequestError(400, f"t: a number of model ms, got {t[0]!r}") from None
                self._json(200, src.state(t_ms))
            elif url.path == "/api/topology":
                self._json(200, src.topology())
            elif url.path == "/api/summary":
                self._json(200, src.summary())
            elif url.path == "/api/events":
                self._events()
            else:
                self._json(404, error_document(f"no such path {url.path}"))
        except RequestError as err:
            self._json(err.status, error_document(str(err)))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away: nothing to answer
        except Exception as err:  # noqa: BLE001 (one request fails; the page keeps working)
            self._json(500, error_document(f"{err.__class__.__name__}: {_first_line(err)}"))

    def _not_allowed(self) -> None:
        """Any other method: a JSON 405 naming the allowed ones (docs/view.md)."""
        self._json(405, error_document(
            f"method {self.command} not allowed: GET, or PUT /api/policy"),
            (("Allow", "GET, PUT"),))

    do_POST = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = _not_allowed  # noqa: N815

    def _events(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        stop = self.server.stopping
        try:
            while not stop.is_set():
                data = json.dumps(finite(self.server.source.state()))
                self.wfile.write(f"data: {data}\n\n".encode())
                self.wfile.flush()
                stop.wait(EVENT_PERIOD_S)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_PUT(self) -> None:  # noqa: N802 (stdlib's name)
        url = urlparse(self.path)
        try:
            if url.path != "/api/policy":
                raise RequestError(404, f"no such path {url.path}")
            if not self.server.source.token:
                raise RequestError(405, "read-only: a replay, or a city study (no policy)")
            require_token(self.headers.get("Authorization"), self.server.source.token)
            size = int(self.headers.get("Content-Length") or 0)
            if size < 0:  # read(-1) would wait for the client to close
                raise ValueError(f"must be >= 0, got {size}")
            if size > MAX_BODY:
                raise RequestError(413, f"body: at most {MAX_BODY} bytes")
            body = json_object(self.rfile.read(size))
            self._json(200, self.server.source.swap_policy(body))
        except RequestError as err:
            self._json(err.status, error_document(str(err)))
        except ValueError as err:
            self._json(400, error_document(f"Content-Length: {err}"))


def _first_line(err: BaseException) -> str:
    text = str(err)
    return text.splitlines()[0] if text else repr(err)


class ViewHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], source: ViewSource) -> None:
        self.source = source
        self.stopping = threading.Event()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is no news; anything else one line, not a traceback
        over the run's own output."""
        err = sys.exc_info()[1]
        if err is None or isinstance(err, ConnectionError | TimeoutError):
            return
        print(f"[view] request from {client_address[0]} failed: "
              f"{err.__class__.__name__}: {_first_line(err)}", file=sys.stderr, flush=True)


class ViewServer:
    """The server in a daemon thread: start, its URL, stop."""

    def __init__(self, source: ViewSource, port: int, host: str = "127.0.0.1",
                 nice: int = 0) -> None:
        """`nice`: the serving threads' CPU priority below the process's (a live run's
        view yields to the emulation)."""
        self.httpd = ViewHTTPServer((host, port), source)
        self.nice = nice
        self.host = host
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def start(self) -> None:
        if self.host not in LOOPBACK:
            print(f"[view] WARNING: serving on {self.host}, reachable from other machines; "
                  "reads need no token", file=sys.stderr, flush=True)
        self._thread = threading.Thread(target=self._serve, name="view", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        if self.nice:  # handler threads inherit the serving thread's priority
            lower_priority(self.nice)
        self.httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.httpd.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
