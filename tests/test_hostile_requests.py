"""Hostile HTTP requests against the replay server (issue 40): `scripts/view.py` serving a
simulated run's folder gets generated methods, paths, query strings (`t=` negative, huge,
NaN, text), headers and bodies, raw over a socket. Every reply is JSON (the page's HTML
for the page itself) with a 4xx/5xx status for bad input, within seconds; the server
prints no traceback and still answers a good `/api/state` after each (seeded, bounded:
hypothesis). Corrupted run files are refused when the folder is read, in one line."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import ROOT
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fogsdn.core.scenario import ScenarioError
from fogsdn.view.replay import ReplayError, ReplaySource
from fogsdn.view.state import RequestError

REPLY_S = 5.0  # a reply later than this is a hang


@dataclass
class Served:
    run: Path
    port: int
    stderr: Path
    proc: subprocess.Popen[str]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run's folder, made by the simulator."""
    out = tmp_path_factory.mktemp("replay") / "run"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"), "--engine",
                        "simulate", "--requests", "300", "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def served(run_dir: Path) -> Iterator[Served]:
    err = run_dir.parent / "view.stderr"
    with err.open("w") as sink:
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "view.py"),
                                 str(run_dir), "--port", "0"], stdout=subprocess.PIPE,
                                stderr=sink, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert found, line + err.read_text()
    yield Served(run_dir, int(found.group(1)), err, proc)
    proc.terminate()
    proc.wait(timeout=10)


def _exchange(port: int, raw: bytes, method: str) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read one reply (headers only for a stream)."""
    with socket.create_connection(("127.0.0.1", port), timeout=REPLY_S) as sock:
        sock.sendall(raw)
        with suppress_reset():
            sock.shutdown(socket.SHUT_WR)  # the body ends here, whatever it said
        resp = http.client.HTTPResponse(sock, method=method)
        resp.begin()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        body = b"" if headers.get("content-type") == "text/event-stream" else resp.read()
        return resp.status, headers, body


class suppress_reset:  # noqa: N801 (a context manager read as a phrase)
    """The server may close first: a reset on our half-close is no fault of its."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return isinstance(exc[1], OSError)


def _good_state(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REPLY_S)
    conn.request("GET", "/api/state?t=10")
    resp = conn.getresponse()
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 200 and body["mode"] == "replay", body


METHODS = st.sampled_from(["GET", "GET", "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS",
                           "PATCH", "TRACE", "CONNECT", "BREW", "get", "G\tET", ""])
PATHS = st.sampled_from(["/", "/index.html", "/api/state", "/api/state", "/api/topology",
                         "/api/summary", "/api/policy", "/api/events", "/api/nothing", "",
                         "/%00", "/../../etc/passwd", "//api/state", "/api/state/",
                         "http://elsewhere/api/state", "*", "/" + "a" * 70000])
T_VALUES = st.one_of(
    st.sampled_from(["-1", "1e309", "nan", "NaN", "inf", "-inf", "", "abc", "0x10", "1_0",
                     "%00", "10", "0", "1e9", "５", "10&t=20", "%ff"]),
    st.floats().map(repr), st.integers(-10**30, 10**30).map(str),
    st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=20))
HEADERS = st.lists(st.sampled_from([
    "Content-Length: -1", "Content-Length: 99999999999999999999", "Content-Length: abc",
    "Content-Length: 5", "Transfer-Encoding: chunked", "Authorization: Bearer x",
    "Host:", "Expect: 100-continue", "Connection: keep-alive", "X-" + "b" * 70000 + ": 1",
    "no colon here", " folded: header", "Content-Type: application/json",
]), max_size=4)
BODIES = st.one_of(st.just(b""), st.binary(max_size=200),
                   st.sampled_from([b'{"policy": "basic"}', b"[]", b"{" * 1000]))


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, bytes]:
    method, path = draw(METHODS), draw(PATHS)
    if draw(st.booleans()):
        path += "?" + "&".join(f"t={t}" for t in draw(st.lists(T_VALUES, min_size=1,
                                                               max_size=2)))
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/x",
                                    ""]))
    head = "\r\n".join([f"{method} {path} {version}".strip(), *draw(HEADERS)])
    raw = head.encode("utf-8", "surrogateescape") + b"\r\n\r\n" + draw(BODIES)
    return method, path, raw


def _may_succeed(method: str, path: str, raw: bytes) -> bool:
    """A request a browser may send, which may get a 200 (a `t` within the run)."""
    if path.startswith("//"):  # the stdlib takes //x for /x
        path = "/" + path.lstrip("/")
    url = urlparse(path)  # absolute-form too: the path is what counts
    t = parse_qs(url.query).get("t", [])
    numeric = not t or re.fullmatch(r"[0-9.eE+-]+", t[0]) is not None
    known = url.path in ("/", "/index.html", "/api/topology", "/api/summary", "/api/events") \
        or (url.path == "/api/state" and numeric)
    return method == "GET" and known and b" HTTP/1." in raw.split(b"\r\n")[0]


@seed(40)
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=requests())
def test_a_hostile_request_gets_json_and_the_server_goes_on(
        case: tuple[str, str, bytes], served: Served) -> None:
    method, path, raw = case
    status, headers, body = _exchange(served.port, raw, method.upper())
    ctype = headers.get("content-type", "")
    if status == 200 and ctype.startswith("text/html"):
        assert path.split("?")[0] in ("/", "/index.html") and method in ("GET", "HEAD")
    elif ctype != "text/event-stream":
        assert ctype == "application/json", (status, headers, body[:200])
        if method.upper() != "HEAD":
            assert isinstance(json.loads(body), dict)
    if not _may_succeed(method, path, raw) and not (method == "HEAD" and status == 200):
        assert 400 <= status < 600, (status, raw[:200], body[:200])
    said = served.stderr.read_text()
    assert "Traceback" not in said, said
    _good_state(served.port)


def _live_files(run_dir: Path, folder: Path, files: dict[str, bytes]) -> Path:
    """A copy of the simulated run with a live run's files too (the controller's events
    on its clock), then `files` written over it."""
    for f in run_dir.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    (folder / "epoch").write_text("0.0")
    (folder / "controller-events.jsonl").write_text(
        '{"t": 0.01, "event": "ready", "groups": {"hp": {"fn": 16}, "lp": {"ofn1": 16}}}\n')
    for name, body in files.items():
        (folder / name).write_bytes(body)
    return folder


# -- corrupted run files ---------------------------------------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers(-10**20, 10**20) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8)
EPOCH = st.fixed_dictionaries({}, optional={
    "policy": JSON, "from_ms": JSON | st.floats(0, 1e3), "to_ms": JSON, "predicted": JSON})


@st.composite
def corruption(draw: st.DrawFn) -> tuple[str, bytes]:
    """One run file replaced: garbled bytes, or well-formed with hostile values."""
    name = draw(st.sampled_from(["scenario.yaml", "trace.csv", "availability.csv", "power.csv",
                                 "summary.json", "controller-events.jsonl", "epoch",
                                 "learning_curve.csv"]))
    if name == "summary.json" and draw(st.booleans()):
        doc = {"policy_epochs": draw(st.lists(EPOCH | JSON, max_size=3)), "predicted": draw(JSON)}
        return name, json.dumps(doc).encode()
    if name == "controller-events.jsonl" and draw(st.booleans()):
        events = draw(st.lists(st.fixed_dictionaries({"t": JSON, "event": JSON},
                                                      optional={"groups": JSON}), max_size=3))
        return name, "\n".join(json.dumps(e) for e in events).encode()
    if name == "learning_curve.csv":
        rows = draw(st.lists(st.lists(st.sampled_from(["1", "nan", "x", "-1", "1e999", ""]),
                                      min_size=6, max_size=6).map(",".join), max_size=3))
        return name, "\n".join(["policy_epoch,decisions,action,response_ms,network_w,goal",
                                *rows]).encode()
    return name, draw(st.binary(max_size=200) | st.just(b""))


@seed(40)
@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=corruption(), times=st.lists(st.floats(0, 400) | st.none(), min_size=1,
                                          max_size=3))
def test_a_corrupted_run_file_is_refused_when_read_or_shown(
        case: tuple[str, bytes], times: list[float | None], run_dir: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Refused when the folder is read, in one line naming the file (scripts/view.py exits
    2), or every state within the run is shown: never a page whose requests all fail."""
    name, body = case
    folder = _live_files(run_dir, tmp_path_factory.mktemp("corrupt", numbered=True),
                         {name: body})
    try:
        src = ReplaySource.of(folder)
    except (ReplayError, ScenarioError) as err:
        assert "\n" not in str(err).strip() and name in str(err), err
        return
    for t in times:
        try:
            json.dumps(src.state(t))
        except RequestError as err:  # a t past the run's end: the user's, a 400
            assert err.status == 400 and t is not None, err
    json.dumps(src.topology())
    json.dumps(src.summary())


# -- what the generated requests and files found, each kept by a plain test -----------------
def _raw_replies(port: int, raw: bytes) -> bytes:
    """Everything the server sends on one connection until it closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=REPLY_S) as sock:
        sock.sendall(raw)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    return got


@pytest.mark.parametrize(("raw", "status"), [
    (b"BREW /api/state HTTP/1.1\r\n\r\n", 501),  # was the stdlib's HTML page
    (b"GET / HTTP/2.0\r\n\r\n", 505),  # was a body with no status line
    (b"GET /\r\n\r\n", 400),  # HTTP/0.9: was the page with no status line
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
])
def test_the_stdlibs_own_refusals_are_json_with_a_status_line(served: Served, raw: bytes,
                                                              status: int) -> None:
    reply = _raw_replies(served.port, raw)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), reply[:300]
    assert b"Content-Type: application/json" in head and "error" in json.loads(body)


def test_an_unread_body_is_not_taken_for_the_next_request(served: Served) -> None:
    """A refused request's body was left on the connection and parsed as a request of
    its own (a second reply the client never asked for)."""
    smuggled = b"GET /api/nothing HTTP/1.1\r\n\r\n"
    reply = _raw_replies(served.port, b"POST /api/state HTTP/1.1\r\nContent-Length: "
                         + str(len(smuggled)).encode() + b"\r\n\r\n" + smuggled)
    assert reply.count(b"HTTP/1.1 ") == 1 and b" 405 " in reply.split(b"\r\n")[0], reply


def test_a_negative_content_length_is_refused_at_once() -> None:
    """`Content-Length: -1` on a live run's PUT read the socket until the client closed
    it: one stuck thread per request."""
    from test_view_server import TOKEN, FakeSource

    from fogsdn.view.server import ViewServer

    srv = ViewServer(FakeSource(), 0)
    srv.start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=REPLY_S) as sock:
            sock.sendall(b"PUT /api/policy HTTP/1.1\r\nAuthorization: Bearer "
                         + TOKEN.encode() + b"\r\nContent-Length: -1\r\n\r\n{}")
            resp = http.client.HTTPResponse(sock, method="PUT")
            resp.begin()  # the socket stays open: a hang would time out here
            err = json.loads(resp.read())
        assert resp.status == 400 and "Content-Length: must be >= 0" in err["error"], err
    finally:
        srv.stop()




def test_a_policy_epoch_without_its_start_is_refused_when_read(run_dir: Path,
                                                               tmp_path: Path) -> None:
    """It was read as is, and every state request then failed with a 500 KeyError."""
    folder = _live_files(run_dir, tmp_path, {"summary.json": b'{"policy_epochs": [{}]}'})
    with pytest.raises(ReplayError) as err:
        ReplaySource.of(folder)
    assert str(err.value).endswith("summary.json: policy_epochs[0]: from_ms: a number, got None")


def test_a_garbled_controller_event_is_skipped_like_a_torn_line(run_dir: Path,
                                                                tmp_path: Path) -> None:
    """`"t": null` ended scripts/view.py with a TypeError traceback; weights that are not
    whole numbers made every state request a 500."""
    folder = _live_files(run_dir, tmp_path, {"controller-events.jsonl": b"\n".join([
        b'{"t": null, "event": "ready", "groups": {"hp": {"fn": 16}}}',
        b'{"t": 0.001, "event": "ready", "groups": {"hp": {"fn": "x"}, "lp": [1]}}',
        b'{"t": 0.002, "event": "ready", "groups": {"hp": {"fn": 8, "ofn1": 8}}}'])})
    src = ReplaySource.of(folder)
    assert [ev["t_ms"] for ev in src.controller_events] == [pytest.approx(1.0 / src.sc.time_scale),
                                                          pytest.approx(2.0 / src.sc.time_scale)]
    shares = src.state(src.sc.duration_ms)["classes"]["hp"]["routes"]["share"]
    assert shares == {"fn": 0.5, "ofn1": 0.5}
