"""Hostile requests against a live run's REST API (issue 40, the emulation stage): one
live run with its view serves generated raw HTTP requests, generated policy swaps without
the token or with a wrong one, and generated swap bodies with the right token. Without
the token nothing changes; every reply is JSON (or the page) within seconds; a bad swap
is a 4xx naming the cause and the running policy stays; the runner prints no traceback
and its run ends whole (seeded, bounded: hypothesis)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests as http
from conftest import ROOT, scenario_dict
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from test_hostile_requests import JSON, _exchange
from test_hostile_requests import requests as raw_requests

from fogsdn.core.scenario import parse_scenario

pytestmark = pytest.mark.emulation

REPLY_S = 5.0


class LiveApi:
    def __init__(self, tmp: Path) -> None:
        sc = parse_scenario(scenario_dict(
            name="hostileapi", time_scale=20.0, duration_ms=4000, warmup_ms=0, seed=7,
            churn={"eta": 0.01, "xi": 0.01, "leave": "drain"}))
        f = tmp / "api.yaml"
        f.write_text(sc.to_yaml())
        self.out = tmp / "out"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = tmp / "runner.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "run_testbed.py"), "--scenario", str(f),
             "--out", str(self.out), "--quiet", "--view", str(self.port)],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def state(self) -> dict[str, Any]:
        assert self.proc.poll() is None, f"the runner exited; see {self.log_path}"
        r = http.get(self.url + "api/state", timeout=REPLY_S)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        return dict(r.json())

    def token(self) -> str:
        return (self.out / "api_token").read_text().strip()

    def no_traceback(self) -> None:
        said = self.log_path.read_text(errors="replace")
        assert "Traceback" not in said, said[-3000:]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    run = LiveApi(tmp_path_factory.mktemp("hostileapi"))
    deadline = time.monotonic() + 120
    while True:
        assert run.proc.poll() is None, run.log_path.read_text(errors="replace")[-3000:]
        try:
            if http.get(run.url + "api/state", timeout=2).json().get("running"):
                break
        except (http.RequestException, ValueError):
            pass
        assert time.monotonic() < deadline, "the live run's view never came up"
        time.sleep(0.5)
    yield run
    try:
        rc = run.proc.wait(timeout=150)
    finally:
        if run.proc.poll() is None:
            run.proc.terminate()
            run.proc.wait(timeout=30)
        run.log.close()
    run.no_traceback()
    summary = json.loads((run.out / "summary.json").read_text())
    assert rc == 0 and summary["crashed"] is False, (rc, summary.get("incidents"))


@seed(40)
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=raw_requests())
def test_a_hostile_raw_request_changes_nothing_and_the_server_goes_on(
        case: tuple[str, str, bytes], live: LiveApi) -> None:
    method, path, raw = case
    status, headers, body = _exchange(live.port, raw, method.upper())
    ctype = headers.get("content-type", "")
    if ctype not in ("text/event-stream",) and not ctype.startswith("text/html"):
        assert ctype == "application/json", (status, headers, body[:200])
        if method.upper() != "HEAD":
            assert isinstance(json.loads(body), dict)
    if path.startswith("/api/policy") and method.upper() in ("PUT", "POST"):
        assert status >= 400  # no generated request carries the token
    state = live.state()
    assert state["policy"] == "prioritized" and len(state["policy_epochs"]) == 1
    live.no_traceback()


SWAPS = st.one_of(
    JSON,
    st.fixed_dictionaries({}, optional={
        "name": st.sampled_from(["nodiff", "basic", "prioritized", "", "no_such", "../x"]) | JSON,
        "alpha": st.floats(allow_nan=True, allow_infinity=True) | JSON,
        "params": st.dictionaries(st.text(max_size=6), JSON, max_size=3) | JSON,
        "module": st.sampled_from(["/etc/passwd", "x.py", "/dev/zero"]) | JSON,
    }))
TOKENS = st.sampled_from([None, "", "x", "Bearer", "Basic abc"])


@seed(40)
@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=SWAPS, token=TOKENS)
def test_a_swap_without_the_token_is_refused_and_changes_nothing(
        body: Any, token: str | None, live: LiveApi) -> None:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    r = http.put(live.url + "api/policy", data=json.dumps(body), headers=headers,
                 timeout=REPLY_S)
    assert r.status_code == 401 and "token" in r.json()["error"], r.text
    state = live.state()
    assert state["policy"] == "prioritized" and len(state["policy_epochs"]) == 1


@seed(40)
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=SWAPS)
def test_a_hostile_swap_with_the_token_is_one_line_or_a_real_swap(body: Any,
                                                                    live: LiveApi) -> None:
    before = live.state()
    r = http.put(live.url + "api/policy", data=json.dumps(body),
                 headers={"Authorization": f"Bearer {live.token()}"}, timeout=30)
    assert r.headers["content-type"] == "application/json"
    after = live.state()
    if r.status_code == 200:  # a valid swap: the new policy runs, as one more epoch
        assert after["policy"] == r.json()["policy"]
        assert len(after["policy_epochs"]) == len(before["policy_epochs"]) + 1
    else:
        assert 400 <= r.status_code < 500, r.text
        err = r.json()["error"]
        assert isinstance(err, str) and err and "\n" not in err.strip()
        assert not re.search(r"Traceback|File \"", err)
        assert after["policy"] == before["policy"]
        assert len(after["policy_epochs"]) == len(before["policy_epochs"])
    live.no_traceback()
