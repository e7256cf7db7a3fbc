from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, free_ports, wait_for_worker, wait_until

from fogsdn.core.local_rpc import recv_line
from fogsdn.core.scenario import Servers, TaskClass
from fogsdn.models.service_queue import ServiceQueue
from fogsdn.nodes.protocol import MAX_REQUEST_BYTES, ProtocolError, TaskRequest, parse_request
from fogsdn.nodes.worker import control_request


def test_fifo_schedules_against_absolute_deadlines() -> None:
    q = ServiceQueue(capacity=3)
    a = q.admit(0.0, 1.0)
    b = q.admit(0.1, 1.0)
    c = q.admit(0.2, 0.5)
    assert a and b and c
    assert (a.start, a.end, b.start, b.end, c.start, c.end) == (0.0, 1.0, 1.0, 2.0, 2.0, 2.5)
    assert q.admit(0.3, 1.0) is None  # full: blocked
    d = q.admit(1.0, 1.0)  # the first left at 1.0: room again, queued behind the third
    assert d is not None and d.start == 2.5
    assert q.in_system == 3


def test_multi_server_has_no_waiting_and_clear_empties() -> None:
    q = ServiceQueue(capacity=2, servers=Servers.MULTI)
    a, b = q.admit(0.0, 5.0), q.admit(0.0, 5.0)
    assert a and b and a.start == b.start == 0.0
    assert q.admit(1.0, 1.0) is None
    assert q.clear(2.0) == 2 and q.in_system == 0
    e = q.admit(2.0, 1.0)
    assert e is not None and e.start == 2.0


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        (b"not json", "not JSON"),
        (b"[1,2]", "JSON object"),
        (b'{"cls":"hp","size":1}', "id:"),
        (b'{"id":"a","cls":"mid","size":1}', "cls:"),
        (b'{"id":"a","cls":"hp","size":-1}', "size: must be >= 0"),
        (b'{"id":"a","cls":"hp","size":"big"}', "size:"),
        (b'{"id":"a","cls":"hp","size":NaN}', "size:"),
        (b"\xff\xfe", "not JSON"),
        (b"x" * (MAX_REQUEST_BYTES + 1), "larger than"),
    ],
)
def test_malformed_requests_are_refused_with_the_cause(line: bytes, cause: str) -> None:
    with pytest.raises(ProtocolError, match=cause):
        parse_request(line)


def test_request_round_trip() -> None:
    r = TaskRequest("c1-1", TaskClass.LP, 0.5, "c1")
    assert parse_request(r.encode().strip()) == r


def _free_port() -> int:
    return free_ports(1)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[int, Path, Path]]:
    port, ctl, events = _free_port(), tmp_path / "w.sock", tmp_path / "w.jsonl"
    p = subprocess.Popen(
        [sys.executable, "-m", "fogsdn.nodes.worker", "--name", "fn", "--host", "127.0.0.1",
         "--port", str(port), "--mu", "1", "--capacity", "2", "--time-scale", "100",
         "--control", str(ctl), "--events", str(events)], cwd=ROOT)
    try:
        wait_for_worker(p, ctl)
        yield port, ctl, events
    finally:
        p.terminate()
        p.wait(5)


def _ask(port: int, data: bytes) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        return json.loads(recv_line(s))


def test_worker_survives_malformed_input_and_blocks_when_full(worker: tuple) -> None:
    port, ctl, events = worker
    assert _ask(port, b"{nope\n")["status"] == "error"
    assert "larger than" in _ask(port, b"y" * 5000 + b"\n")["error"]
    assert _ask(port, b'{"id":"a","cls":"xx","size":1}\n')["error"].startswith("cls:")
    ok = _ask(port, TaskRequest("r1", TaskClass.HP, 0.2, "c").encode())
    assert ok["status"] == "ok" and ok["node"] == "fn"
    assert ok["nominal_ms"] == pytest.approx(0.2)
    assert ok["node_ms"] == pytest.approx(ok["wait_ms"] + ok["service_ms"])
    # 20 ms real at time scale 100: never early; late by however long the machine kept
    # the worker's thread waiting (loose: a wrong time scale is off by a factor)
    assert 0.2 <= ok["service_ms"] < 1.0
    # fill the node (capacity 2) with long tasks held open, then one more is blocked
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    for i, s in enumerate(held):
        s.sendall(TaskRequest(f"long{i}", TaskClass.LP, 50.0, "c").encode())
    wait_until(lambda: control_request(ctl, "stats")["in_system"] == 2, "both long tasks in")
    assert _ask(port, TaskRequest("r2", TaskClass.LP, 1.0, "c").encode())["status"] == "blocked"
    stats = control_request(ctl, "stats")
    assert stats["in_system"] == 2 and stats["blocked"] == 1 and stats["errors"] == 3
    # an OFN leaving with `drop`: held tasks are discarded, their connections reset
    assert control_request(ctl, "drop") == {"dropped": 2}
    for s in held:
        s.settimeout(2)
        try:
            assert s.recv(100) == b""
        except ConnectionResetError:
            pass
        s.close()
    assert _ask(port, TaskRequest("r3", TaskClass.HP, 0.1, "c").encode())["status"] == "ok"
    dropped = [json.loads(x) for x in events.read_text().splitlines()]
    assert {e["id"] for e in dropped if e["event"] == "dropped"} == {"long0", "long1"}
    assert control_request(ctl, "bogus") == {"error": "unknown command 'bogus'"}


def test_worker_counts_busy_time_for_power(worker: tuple) -> None:
    """busy_s grows by each task's service (in progress included) and not while idle."""
    port, ctl, _ = worker
    b0 = control_request(ctl, "stats")["busy_s"]
    for i in range(3):  # 3 x 0.5 model ms at 100 real ms per model ms: 150 ms busy
        assert _ask(port, TaskRequest(f"b{i}", TaskClass.HP, 0.5, "c").encode())["status"] == "ok"
    b1 = control_request(ctl, "stats")["busy_s"]
    assert b1 - b0 == pytest.approx(0.15, abs=0.01)
    time.sleep(0.1)  # idle: no busy time
    assert control_request(ctl, "stats")["busy_s"] == pytest.approx(b1, abs=1e-6)
    held = socket.create_connection(("127.0.0.1", port))
    t_sent = time.monotonic()
    held.sendall(TaskRequest("long", TaskClass.LP, 50.0, "c").encode())  # 5 s of service
    wait_until(lambda: control_request(ctl, "stats")["in_system"] == 1, "the long task in")
    time.sleep(0.3)
    mid = control_request(ctl, "stats")
    t_mid = time.monotonic()
    # the task in service counts as it runs: it was in service 0.3 s before `mid` was
    # asked, and began after t_sent (bounds from this side's clock, whatever the load)
    assert 0.3 - 1e-6 <= mid["busy_s"] - b1 <= t_mid - t_sent
    control_request(ctl, "drop")  # cut short: what it served stays counted
    after = control_request(ctl, "stats")["busy_s"]
    time.sleep(0.1)
    assert control_request(ctl, "stats")["busy_s"] == pytest.approx(after, abs=1e-6)
    held.close()


def test_cpu_work_mode_does_real_work_in_proportion_to_size(tmp_path: Path) -> None:
    """work: cpu: a task hashes size/mu x time_scale x bytes_per_ms bytes; its service
    is what that took (loose bounds: this is a shared machine, not a benchmark)."""
    from fogsdn.nodes.cpu_work import calibrate, kernel

    assert kernel(3000) != kernel(3001)
    rate = calibrate(8 << 20, repeats=2)
    assert rate > 1e4  # bytes per CPU-ms: a figure, not zero
    port, ctl = _free_port(), tmp_path / "c.sock"
    p = subprocess.Popen(
        [sys.executable, "-m", "fogsdn.nodes.worker", "--name", "fn", "--host", "127.0.0.1",
         "--port", str(port), "--mu", "1", "--capacity", "1", "--time-scale", "100",
         "--control", str(ctl), "--bytes-per-ms", repr(rate)], cwd=ROOT)
    try:
        wait_for_worker(p, ctl)
        ok = _ask(port, TaskRequest("w1", TaskClass.HP, 0.5, "c").encode())  # 50 ms of CPU
        assert ok["status"] == "ok" and ok["nominal_ms"] == pytest.approx(0.5)
        # at least most of the CPU time; at most what 10 x contention makes of it
        assert 0.3 < ok["service_ms"] < 5.0, ok
        held = socket.create_connection(("127.0.0.1", port))
        held.sendall(TaskRequest("w2", TaskClass.LP, 10.0, "c").encode())  # 1 s of CPU
        wait_until(lambda: control_request(ctl, "stats")["admitted"] == 2, "w2 admitted")
        blocked = _ask(port, TaskRequest("w3", TaskClass.HP, 0.1, "c").encode())
        assert blocked["status"] == "blocked"  # capacity 1, the long task holds it
        held.settimeout(30)
        assert json.loads(recv_line(held))["status"] == "ok"
        held.close()
        st = control_request(ctl, "stats")
        assert st["completed"] == 2 and st["blocked"] == 1 and st["busy_s"] > 0.5
    finally:
        p.terminate()
        p.wait(5)
