"""Every request a client sends ends as exactly one trace row, whatever happens to it."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from pathlib import Path

from conftest import scenario_dict
from test_worker import _free_port, worker  # noqa: F401 (fixture)

from fogsdn.core.scenario import parse_scenario
from fogsdn.core.trace import Outcome, TraceWriter, read_trace
from fogsdn.nodes.client import Client
from fogsdn.nodes.traffic_engine import TrafficEngine


def _run_client(tmp_path: Path, port: int, interrupt_after: float | None = None,
                **over: object) -> tuple[Client, list]:
    sc = parse_scenario(scenario_dict(**over))
    trace = tmp_path / "trace.csv"
    with TraceWriter(trace) as w:
        client = Client("c1", sc, ("127.0.0.1", port), time.monotonic() + 0.05, w)
        engine = TrafficEngine([client])

        async def main() -> None:
            if interrupt_after is not None:
                asyncio.get_running_loop().call_later(interrupt_after, engine.interrupted.set)
            await engine.run()

        asyncio.run(main())
    return client, read_trace(trace)


def _exactly_once(client: Client, rows: list) -> None:
    ids = [r.request_id for r in rows]
    assert len(ids) == len(set(ids)) == client.sent > 0


def test_ok_and_blocked_against_a_worker(tmp_path: Path, worker) -> None:  # noqa: F811
    port, _, _ = worker  # capacity 2 at time scale 100: heavy load blocks some
    # a generous timeout (10 s real): on a loaded machine a 0.8 s one made this flaky
    client, rows = _run_client(tmp_path, port, time_scale=2, duration_ms=300, timeout_ms=5000,
                               workload={"lambda_hp": 1.0, "lambda_lp": 1.0, "clients": 1})
    _exactly_once(client, rows)
    outcomes = Counter(r.outcome for r in rows)
    assert outcomes[Outcome.OK] > 0 and outcomes[Outcome.BLOCKED] > 0
    assert set(outcomes) <= {Outcome.OK, Outcome.BLOCKED}
    for r in rows:
        if r.outcome is Outcome.OK:
            assert r.node == "fn" and r.response_ms >= r.node_ms > 0


def test_a_silent_server_means_timeouts(tmp_path: Path) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except TimeoutError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        client, rows = _run_client(tmp_path, port, time_scale=1, duration_ms=100,
                                   timeout_ms=150)
    finally:
        stop.set()
        t.join()
        for s in held:
            s.close()
        srv.close()
    _exactly_once(client, rows)
    assert {r.outcome for r in rows} == {Outcome.TIMEOUT}


def test_nobody_listening_means_lost(tmp_path: Path) -> None:
    client, rows = _run_client(tmp_path, _free_port(), time_scale=1, duration_ms=100)
    _exactly_once(client, rows)
    assert {r.outcome for r in rows} == {Outcome.LOST}
    assert all("Connection" in r.error or "refused" in r.error for r in rows)


def test_interrupt_keeps_every_request_once(tmp_path: Path, worker) -> None:  # noqa: F811
    port, _, _ = worker
    client, rows = _run_client(tmp_path, port, interrupt_after=0.3, time_scale=2,
                               duration_ms=2000, timeout_ms=5000)
    _exactly_once(client, rows)
    assert max(r.t_send for r in rows) < 2000 * 0.5  # stopped sending early
