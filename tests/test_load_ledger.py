"""The controller's own count per node for per-request policies: the workers' load reports
(fogsdn.core.load_report), the ledger that keeps decisions on their way and judges each
decision's staleness (fogsdn.controller.load_ledger), and a real worker's reports."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, free_ports, wait_for_worker

from fogsdn.controller.load_ledger import LoadLedger, read_staleness, staleness_summary
from fogsdn.core.load_report import MAX_REPORT_BYTES, LoadReport, LoadReportError
from fogsdn.core.local_rpc import listen_packets, recv_line
from fogsdn.core.scenario import TaskClass
from fogsdn.nodes.protocol import TaskRequest

C1, C2 = ("10.0.0.1", 40001), ("10.0.0.2", 40002)


def test_a_report_reads_back_as_sent() -> None:
    for r in (LoadReport("fn", 0, 0, 1.5), LoadReport("ofn1", 7, 3, 12.25, C1, 2, 11.5),
              LoadReport("fn", 1, 2, 3.0, ends=(2.5, 3.0))):
        assert LoadReport.decode(r.encode()) == r


@pytest.mark.parametrize(("data", "cause"), [
    (b"not json", "not a JSON object"),
    (b"[1]", "not a JSON object"),
    (b'{"n":"fn","s":1,"q":1}', "not a JSON object"),
    (b'{"n":"fn","s":-1,"q":1,"b":0}', "out of type or range"),
    (b'{"n":"fn","s":1,"q":true,"b":0}', "out of type or range"),
    (b'{"n":"fn","s":1,"q":1,"b":NaN}', "out of type or range"),
    (b'{"n":"fn","s":1,"q":1,"b":"x"}', "out of type or range"),
    (b'{"n":3,"s":1,"q":1,"b":0}', "out of type or range"),
    (b'{"n":"fn","s":1,"q":1,"b":0,"a":["10.0.0.1"],"q0":0}', r"is not \[ip, port\]"),
    (b'{"n":"fn","s":1,"q":1,"b":0,"a":["10.0.0.1",5]}', "without q0"),
    (b'{"n":"fn","s":1,"q":1,"b":0,"e":[1,"x"]}', "out of type or range"),
    (b'{"n":"fn","s":1,"q":1,"b":0,"e":[0,1,2,3,4,5,6,7,8]}', "out of type or range"),
    (b'{"n":"fn","s":1,"q":1,"b":0,"a":["10.0.0.1",5],"q0":0,"ta":Infinity}', "range"),
    (b"x" * (MAX_REPORT_BYTES + 1), "bytes"),
])
def test_a_bad_report_is_refused_with_its_cause(data: bytes, cause: str) -> None:
    with pytest.raises(LoadReportError, match=cause) as err:
        LoadReport.decode(data)
    assert "\n" not in str(err.value)


def _ledger() -> LoadLedger:
    return LoadLedger.of(["fn", "ofn1"], expire_s=2.0, ms_real=0.01)


def test_a_decided_connection_counts_from_its_decision_until_its_node_reports_it() -> None:
    led = _ledger()
    assert led.in_system("fn", 0.0) == 0 and led.in_system("nope", 0.0) is None
    led.decided("fn", C1, 0, 0.0)
    led.decided("fn", C2, 1, 0.001)
    assert led.in_system("fn", 0.002) == 2  # both on their way: the node has not seen them
    # the first arrives: the node now holds it; the second is still on its way
    led.report(LoadReport("fn", 0, 1, 0.5, C1, 0))
    assert led.in_system("fn", 0.003) == 2
    # the second met one there, as the policy saw: both decisions exact
    led.report(LoadReport("fn", 1, 2, 0.9, C2, 1))
    assert led.in_system("fn", 0.004) == 2
    led.report(LoadReport("fn", 2, 1, 0.9))  # one completed
    assert led.in_system("fn", 0.005) == 1
    assert led.staleness == Counter({0: 2})


def test_a_late_report_does_not_undo_a_newer_one_but_its_arrival_still_counts() -> None:
    led = _ledger()
    led.decided("fn", C1, 0, 0.0)
    led.report(LoadReport("fn", 5, 0, 0.0))  # a completion, numbered after the arrival
    led.report(LoadReport("fn", 4, 1, 0.0, C1, 1))  # the arrival's report, come late
    assert led.in_system("fn", 0.01) == 0
    assert led.staleness == Counter({-1: 1})  # saw 0, met 1: the policy saw one fewer


def test_a_decision_whose_request_never_arrives_stops_counting() -> None:
    led = _ledger()
    led.decided("fn", C1, 0, 0.0)
    assert led.in_system("fn", 1.9) == 1
    assert led.in_system("fn", 2.1) == 0 and led.expired == 1 and not led.seen
    led.report(LoadReport("fn", 0, 1, 0.0, C1, 0))  # arrives after all: counted by the node
    assert led.in_system("fn", 2.2) == 1 and led.staleness == Counter()


def test_the_count_is_the_one_a_request_decided_now_will_meet() -> None:
    """Held requests due to leave before the connection's request reaches the node (the
    median decision-to-arrival time ahead) are not counted."""
    led = _ledger()
    led.decided("fn", C1, 0, 10.0)
    led.report(LoadReport("fn", 0, 1, 10.05, C1, 0, arrived_at=10.002, ends=(10.05,)))
    assert led.nodes["fn"].lag_s() == pytest.approx(0.002)
    led.report(LoadReport("fn", 1, 3, 10.2, ends=(10.05, 10.101, 10.2)))
    assert led.in_system("fn", 10.0) == 3
    assert led.in_system("fn", 10.049) == 2  # the first ends before 10.049 + 0.002
    assert led.in_system("fn", 10.1) == 1
    led.decided("fn", C2, 1, 10.1)
    assert led.in_system("fn", 10.1) == 2  # and the one on its way
    assert led.in_system("fn", 10.3) == 1  # all due have left; C2 still on its way


def test_an_arrival_whose_port_was_remapped_answers_the_oldest_decision_of_its_client(
        ) -> None:
    """Connection tracking gave a reused port's connection port + 1: the node's report
    names that; it answers the oldest decision on its way from that client."""
    led = _ledger()
    led.decided("fn", ("10.0.0.2", 43284), 0, 0.0)
    led.decided("fn", ("10.0.0.2", 43288), 1, 0.001)
    led.decided("fn", C1, 2, 0.002)
    led.report(LoadReport("fn", 0, 1, 0.5, ("10.0.0.2", 43285), 0, arrived_at=0.003))
    assert set(led.nodes["fn"].pending) == {("10.0.0.2", 43288), C1}
    assert led.staleness == Counter({0: 1})
    # a handoff's arrival (from another node's address) answers no decision
    led.report(LoadReport("fn", 1, 2, 0.5, ("10.0.0.9", 5000), 1, arrived_at=0.004))
    assert len(led.nodes["fn"].pending) == 2 and led.in_system("fn", 0.004) == 4


def test_work_left_runs_down_from_the_last_report() -> None:
    led = _ledger()
    led.report(LoadReport("fn", 0, 2, 10.0))
    assert led.work_left_ms("fn", 9.99) == pytest.approx(1.0)  # 0.01 s = 1 model ms
    assert led.work_left_ms("fn", 11.0) == 0.0
    assert led.work_left_ms("nope", 0.0) is None


def test_the_staleness_summary_and_its_file() -> None:
    hist = Counter({0: 97, 1: 2, -1: 1})
    s = staleness_summary(hist, reports=300, expired=1)
    assert s["decisions"] == 100 and s["exact_share"] == 0.97
    assert (s["min"], s["p1"], s["p99"], s["max"]) == (-1, -1, 1, 1)
    assert s["mean"] == pytest.approx(0.01)
    assert staleness_summary(Counter())["decisions"] == 0
    assert read_staleness(json.dumps({"staleness": {"0": 3, "-2": 1}})) == Counter({0: 3, -2: 1})
    with pytest.raises(ValueError):
        read_staleness("[]")


def test_a_worker_reports_each_arrival_and_completion(tmp_path: Path) -> None:
    """A real worker process told to report: the arrival names the client's address and
    what the node held before it; the completion brings the count back to 0."""
    listener = listen_packets(tmp_path / "load.sock")
    listener.settimeout(10)
    port, ctl = free_ports(1), tmp_path / "w.sock"
    p = subprocess.Popen(
        [sys.executable, "-m", "fogsdn.nodes.worker", "--name", "fn", "--host", "127.0.0.1",
         "--port", str(port), "--mu", "1", "--capacity", "2", "--time-scale", "100",
         "--control", str(ctl), "--load-report", str(tmp_path / "load.sock")], cwd=ROOT)
    try:
        wait_for_worker(p, ctl)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            me = s.getsockname()
            s.sendall(TaskRequest("r1", TaskClass.HP, 0.5, "c").encode())
            assert json.loads(recv_line(s))["status"] == "ok"
        conn, _ = listener.accept()  # the worker connected at its first report
        conn.settimeout(5)
        arrival, done = (LoadReport.decode(conn.recv(2048)) for _ in range(2))
    finally:
        p.terminate()
        p.wait(5)
    assert arrival.arrival == (me[0], me[1]) and arrival.before == 0
    assert arrival.in_system == 1 and arrival.busy_until > 0
    assert arrival.arrived_at is not None and len(arrival.ends) == 1
    # 0.5 model ms at time scale 100: it ends 50 ms after it arrived
    assert arrival.ends[0] - arrival.arrived_at == pytest.approx(0.05, abs=0.01)
    assert done.arrival is None and done.in_system == 0 and done.seq > arrival.seq
    assert done.ends == ()
