"""The re-route measurement (tools/rigs/traffic_probe.reroute_times), on made-up
arrivals: what a failure cost a stream of datagrams, three ways (no root)."""

from __future__ import annotations

import socket

import pytest

from tools.rigs.traffic_probe import Outage, reroute_times, tcp_listen_ready

MS = 1_000_000  # ns


def _stream(n: int, interval_ms: float, delay_ms: float, lost: range = range(0),
            held: dict[int, float] | None = None) -> list[tuple[int, int, int]]:
    """seq, sent ns, arrived ns; `lost` never arrive; `held` arrive this much later."""
    held = held or {}
    return [(s, int(s * interval_ms * MS), int((s * interval_ms + delay_ms + held.get(s, 0.0))
                                               * MS))
            for s in range(n) if s not in lost]


def test_a_loss_counts_the_sending_time_lost_and_the_first_packet_after() -> None:
    # 0.5 ms apart, 1 ms one way; fails at 100 ms; datagrams 200..219 (100..109.5 ms) lost;
    # the first one after (220, sent at 110 ms) takes a new path of 3 ms
    arrivals = [a if a[0] < 220 else (a[0], a[1], a[2] + 2 * MS)
                for a in _stream(1000, 0.5, 1.0, lost=range(200, 220))]
    [o] = reroute_times(arrivals, [(100 * MS, 300 * MS)], interval_ms=0.5)
    assert o is not None
    assert o.lost == 20 and abs(o.lost_ms - 10.0) < 1e-9
    assert abs(o.recovery_ms - 13.0) < 1e-6  # sent at 110, arrived at 113
    # arrivals: 199 at 100.5 ms, 220 at 113 ms: 12.5 ms apart, 12 more than usual
    assert abs(o.stall_ms - 12.0) < 1e-6


def test_a_hitless_failure_may_still_stall_the_receiver() -> None:
    # nothing lost, but datagrams 200..214 held up behind a busy switch until 108 ms (FIFO)
    held = {s: 108.0 - (s * 0.5 + 1.0) for s in range(200, 215)}
    [o] = reroute_times(_stream(1000, 0.5, 1.0, held=held), [(100 * MS, 300 * MS)], 0.5)
    assert o == Outage(0, 0.0, 0.0, o.stall_ms if o else 0.0)
    assert o is not None and abs(o.stall_ms - (108.0 - 100.5 - 0.5)) < 1e-6


def test_nothing_after_the_loss_is_none_and_each_failure_counts_its_own() -> None:
    arrivals = _stream(400, 0.5, 1.0, lost=range(100, 110))  # 50 ms: a loss
    windows = [(50 * MS, 60 * MS), (150 * MS, 160 * MS)]   # the second one: no loss
    first, second = reroute_times(arrivals, windows, 0.5)
    assert first is not None and first.lost == 10 and second == Outage(0, 0.0, 0.0, 0.0)
    cut = [a for a in arrivals if a[0] < 100]  # nothing arrives after the loss
    assert reroute_times(cut, windows[:1], 0.5) == [None]


def test_tcp_listen_ready_accepts_after_announcing(capsys: pytest.CaptureFixture[str]) -> None:
    """Both probes' TCP servers: listening (on loopback too) once "ready" is printed."""
    srv = tcp_listen_ready(0, 1)
    with srv, socket.create_connection(("127.0.0.1", srv.getsockname()[1]), timeout=2.0):
        conn, _ = srv.accept()
        conn.close()
    assert capsys.readouterr().out == "ready\n"
