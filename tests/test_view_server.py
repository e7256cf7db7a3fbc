"""The run view's HTTP adapter (fogsdn.view.server) over a fake source on loopback:
routes, the token on writes, one-line JSON errors, server-sent events, the page."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from fogsdn.view.server import EVENT_PERIOD_S, ViewServer, static_page
from fogsdn.view.state import RequestError

TOKEN = "tok-123"


class FakeSource:
    token = TOKEN

    def __init__(self) -> None:
        self.policy = "prioritized"
        self.swaps: list[dict[str, Any]] = []
        self.ticks = 0

    def state(self, t_ms: float | None = None) -> dict[str, Any]:
        self.ticks += 1
        return {"mode": "live", "policy": self.policy, "t": t_ms, "tick": self.ticks,
                "nan": float("nan")}

    def topology(self) -> dict[str, Any]:
        return {"nodes": [{"name": "fn"}], "links": []}

    def summary(self) -> dict[str, Any]:
        return {"policy_epochs": [{"policy": self.policy}]}

    def swap_policy(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("name") == "bad":
            raise RequestError(400, "unknown policy 'bad'")
        self.swaps.append(request)
        self.policy = str(request["name"])
        return {"ok": True, "policy": self.policy}


@pytest.fixture
def served() -> Iterator[tuple[FakeSource, str]]:
    src = FakeSource()
    srv = ViewServer(src, 0)
    srv.start()
    try:
        yield src, srv.url
    finally:
        srv.stop()


def _call(url: str, method: str = "GET", body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_reads(served: tuple[FakeSource, str]) -> None:
    _, url = served
    status, state = _call(url + "api/state?t=12.5")
    assert status == 200 and state["t"] == 12.5 and state["nan"] is None
    assert _call(url + "api/topology")[1]["nodes"] == [{"name": "fn"}]
    assert _call(url + "api/summary")[1]["policy_epochs"] == [{"policy": "prioritized"}]
    status, err = _call(url + "api/state?t=soon")
    assert status == 400 and "t:" in err["error"]
    assert _call(url + "api/nothing")[0] == 404


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer nope"},
                                     {"Authorization": TOKEN}])
def test_write_without_the_token_changes_nothing(served: tuple[FakeSource, str],
                                                  headers: dict[str, str]) -> None:
    src, url = served
    status, err = _call(url + "api/policy", "PUT", b'{"name": "nodiff"}', headers)
    assert status == 401 and "token" in err["error"]
    assert src.swaps == [] and src.policy == "prioritized"


def test_write_with_the_token(served: tuple[FakeSource, str]) -> None:
    src, url = served
    auth = {"Authorization": f"Bearer {TOKEN}"}
    status, out = _call(url + "api/policy", "PUT", b'{"name": "nodiff"}', auth)
    assert status == 200 and out == {"ok": True, "policy": "nodiff"}
    assert src.policy == "nodiff"
    for body, word in ((b"{nope", "JSON"), (b'["x"]', "object"), (b'{"name": "bad"}', "bad")):
        status, err = _call(url + "api/policy", "PUT", body, auth)
        assert status == 400 and word in err["error"] and "\n" not in err["error"]
    assert src.policy == "nodiff" and len(src.swaps) == 1


def test_events_stream_at_least_twice_a_second(served: tuple[FakeSource, str]) -> None:
    _, url = served
    assert EVENT_PERIOD_S <= 0.5
    with urllib.request.urlopen(url + "api/events", timeout=5) as r:
        assert r.headers["Content-Type"] == "text/event-stream"
        events = []
        while len(events) < 3:
            line = r.readline().decode()
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    ticks = [e["tick"] for e in events]
    assert ticks == sorted(ticks) and len(set(ticks)) == 3


def test_page_served_and_self_contained(served: tuple[FakeSource, str]) -> None:
    _, url = served
    with urllib.request.urlopen(url, timeout=5) as r:
        page = r.read().decode()
    assert page == static_page().decode()
    assert 'data-node' in page and "EventSource" in page
    # nothing loaded from another machine: no absolute URL but the SVG namespace name
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+[\w/.-]*", page))
    assert urls <= {"http://www.w3.org/2000/svg"}, urls
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=\"(?!data:)", page)


def test_test_set_up_installs_the_browser() -> None:
    """The test command's set-up brings Debian's chromium and Playwright (the `browser`
    extra); a plain run's set-up does not."""
    from bootstrap import missing_apt_packages
    from run_tests import TEST_EXTRAS

    bare = missing_apt_packages(which=lambda exe: None, exists=lambda path: False, browser=True)
    assert "chromium" in bare
    assert "chromium" not in missing_apt_packages(which=lambda exe: None,
                                                  exists=lambda path: False)
    assert "browser" in TEST_EXTRAS.split(",")


def test_a_read_only_source_refuses_writes() -> None:
    src = FakeSource()
    src.token = ""
    srv = ViewServer(src, 0)
    srv.start()
    try:
        status, err = _call(srv.url + "api/policy", "PUT", b'{"name": "nodiff"}',
                            {"Authorization": "Bearer "})
    finally:
        srv.stop()
    assert status == 405 and "read-only" in err["error"] and src.swaps == []


def test_other_methods_get_a_json_405(served: tuple[FakeSource, str]) -> None:
    src, url = served
    for method in ("POST", "DELETE", "PATCH", "OPTIONS"):
        status, err = _call(url + "api/policy", method, b"{}")
        assert status == 405 and "not allowed" in err["error"], method
    req = urllib.request.Request(url + "api/state", method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as head:
        urllib.request.urlopen(req, timeout=5)
    assert head.value.code == 405 and head.value.headers["Allow"] == "GET, PUT"
    assert src.swaps == []


class _BrokenSource(FakeSource):
    def state(self, t_ms: float | None = None) -> dict[str, Any]:
        if t_ms is not None:
            raise KeyError("t")  # our own bug, for one request
        return super().state(t_ms)


def test_a_failing_request_is_a_json_500_and_the_server_goes_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    srv = ViewServer(_BrokenSource(), 0)
    srv.start()
    try:
        status, err = _call(srv.url + "api/state?t=5")
        assert status == 500 and err["error"].startswith("KeyError")
        assert _call(srv.url + "api/state")[0] == 200
        # a client that goes away mid-stream: no traceback over the run's output
        import socket
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"GET /api/events HTTP/1.1\r\nHost: x\r\n\r\n")
            s.recv(64)
        assert _call(srv.url + "api/summary")[0] == 200
    finally:
        srv.stop()
    assert "Traceback" not in capsys.readouterr().err
