"""The traffic engine: many logical clients in one process, each request once in its own
client's trace, sent near its drawn instant, sockets in each client's own namespace."""

from __future__ import annotations

import asyncio
import fcntl
import math
import os
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import scenario_dict
from test_worker import worker  # noqa: F401 (fixture)

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, TraceRow, TraceWriter, read_trace
from fogsdn.core.workload import drawn_instants
from fogsdn.measure.send_timing import (
    engine_block,
    late_reason,
    send_lateness,
    send_line,
)
from fogsdn.nodes.client import Client
from fogsdn.nodes.deadline_timer import DeadlineTimer
from fogsdn.nodes.host_sockets import HostSocketError, HostSockets, parse_hosts
from fogsdn.nodes.traffic_engine import TrafficEngine

SIOCGSKNS = 0x894C  # a socket's network namespace, as a file descriptor


def test_three_logical_clients_in_one_engine_send_each_drawn_request_once(
        tmp_path: Path, worker) -> None:  # noqa: F811
    port, _, _ = worker  # capacity 2 at time scale 100
    sc = parse_scenario(scenario_dict(time_scale=2, duration_ms=300, timeout_ms=5000,
                                      workload={"lambda_hp": 0.3, "lambda_lp": 0.3,
                                                "clients": 3}))
    epoch = time.monotonic() + 0.05
    writers = {n: TraceWriter(tmp_path / f"trace-{n}.csv") for n in ("c1", "c2", "c3")}
    clients = [Client(n, sc, ("127.0.0.1", port), epoch, w) for n, w in writers.items()]
    engine = TrafficEngine(clients)
    asyncio.run(engine.run())
    for w in writers.values():
        w.close()
    rows = [r for n in writers for r in read_trace(tmp_path / f"trace-{n}.csv")]
    drawn = drawn_instants(sc, sc.seed)
    # every drawn request of every client, once, in its own client's trace
    assert sorted(r.request_id for r in rows) == sorted(drawn)
    assert all(r.request_id.startswith(r.client) for r in rows)
    assert Counter(r.outcome for r in rows)[Outcome.OK] > 0
    assert engine.precise  # a timerfd woke the sends
    lateness = send_lateness(rows, drawn, late_ms=0.1)
    # sent after the drawn instant, never before it (a whole model ms late is 2 real ms:
    # what a loop's millisecond timeouts would give)
    assert lateness["count"] == len(rows)
    assert min(r.t_send - drawn[r.request_id] for r in rows) >= -1e-6
    assert lateness["p50_ms"] < 0.25


def test_an_interrupt_ends_the_engine_between_sends(tmp_path: Path) -> None:
    sc = parse_scenario(scenario_dict(time_scale=100, duration_ms=100000,
                                      workload={"lambda_hp": 0.001, "lambda_lp": 0.001,
                                                "clients": 2}))
    with TraceWriter(tmp_path / "t1.csv") as w1, TraceWriter(tmp_path / "t2.csv") as w2:
        clients = [Client("c1", sc, ("127.0.0.1", 9), time.monotonic(), w1),
                   Client("c2", sc, ("127.0.0.1", 9), time.monotonic(), w2)]
        engine = TrafficEngine(clients)

        async def main() -> float:
            asyncio.get_running_loop().call_later(0.2, engine.interrupted.set)
            t0 = time.monotonic()
            await engine.run()
            return time.monotonic() - t0

        took = asyncio.run(main())
    assert took < 2.0  # the next send was minutes away: the wait ended on the interrupt


def test_the_deadline_timer_wakes_at_the_instant_not_the_next_millisecond() -> None:
    async def main() -> list[float]:
        timer = DeadlineTimer(asyncio.get_running_loop())
        assert timer.precise
        late = []
        for k in range(50):
            t = time.monotonic() + 0.0003 + 0.00001 * k
            await timer.until(t)
            late.append(time.monotonic() - t)
        timer.close()
        return late

    late = sorted(asyncio.run(main()))
    assert late[0] >= 0.0  # never early
    # a loop's own timeout rounds 0.3 ms up to 1 ms: the median would be about 0.7 ms late
    assert late[len(late) // 2] < 0.0005


def _assert_namespaces(pairs: tuple[tuple[socket.socket, int], ...]) -> None:
    """Each socket lives in the namespace of that inode (then it is closed)."""
    for sock, ino in pairs:
        fd = fcntl.ioctl(sock.fileno(), SIOCGSKNS)
        try:
            assert os.fstat(fd).st_ino == ino
        finally:
            os.close(fd)
            sock.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="entering a namespace needs root")
def test_a_clients_socket_is_made_in_its_own_hosts_namespace() -> None:
    host = subprocess.Popen(["unshare", "--net", "sleep", "30"])
    try:
        path = f"/proc/{host.pid}/ns/net"
        for _ in range(100):  # until unshare has entered its namespace
            if os.stat(path).st_ino != os.stat("/proc/self/ns/net").st_ino:
                break
            time.sleep(0.02)
        target = os.stat(path).st_ino
        sockets = HostSockets({"c1": host.pid, "c0": os.getpid()})
        theirs, ours = sockets.tcp("c1"), sockets.tcp("c0")
        _assert_namespaces(((theirs, target), (ours, os.stat("/proc/self/ns/net").st_ino)))
        with sockets.inside("c1"):  # the city's engine: any socket made in the block
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        after = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # and back home after it
        _assert_namespaces(((udp, target), (after, os.stat("/proc/self/ns/net").st_ino)))
        sockets.close()
    finally:
        host.kill()
        host.wait()
    with pytest.raises(HostSocketError, match="client c9: no network namespace"):
        HostSockets({"c9": host.pid})


def test_hosts_argument_is_checked() -> None:
    assert parse_hosts("c1=12,c2=13") == {"c1": 12, "c2": 13}
    with pytest.raises(ValueError, match="'c1' is not NAME=HOST_PID"):
        parse_hosts("c1")


def _row(rid: str, t_send: float) -> TraceRow:
    return TraceRow(rid, "c1", "hp", 1.0, t_send)


def test_lateness_counts_late_sends_and_names_a_load_that_fell_behind() -> None:
    drawn = {f"c1-{k}": float(k) for k in range(100)}
    on_time = [_row(f"c1-{k}", k + 0.01) for k in range(100)]
    got = send_lateness(on_time, drawn, late_ms=0.1)
    assert got["late"] == 0 and math.isclose(got["p50_ms"], 0.01)
    assert late_reason(got) is None
    behind = [_row(f"c1-{k}", k + (0.5 if k % 10 == 0 else 0.01)) for k in range(100)]
    got = send_lateness(behind, drawn, late_ms=0.1)
    assert got["late"] == 10 and got["late_share"] == 0.1 and got["max_ms"] == 0.5
    reason = late_reason(got)
    assert reason is not None and "10.0 % of requests were sent more than 0.1" in reason
    block = engine_block([{"clients": 2, "sent": 100, "cpu_s": 1.5, "wall_s": 10.0,
                           "max_rss_kb": 5, "precise_timer": True}])
    assert block["cpu_share"] == 0.15 and block["cpu_ms_per_request"] == 15.0
    assert "1 process(es) for 2 clients" in send_line(got, block)
    assert send_lateness([], drawn, 0.1)["count"] == 0
