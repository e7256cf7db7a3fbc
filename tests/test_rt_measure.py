"""The controller's response-time timer (fogsdn.controller.rt_measure): parsing, pairing, stats."""

from __future__ import annotations

import struct

import pytest

from fogsdn.controller.rt_measure import (
    RT_COLUMNS,
    TCP_ACK,
    TCP_FIN,
    TCP_SYN,
    ConnectionTimer,
    PathStats,
    RtRecorder,
    Segment,
    parse_segment,
)

MS_REAL = 0.005  # time scale 5: 5 real ms per model ms
C1 = ("10.0.0.11", 40000)


def _frame(src: str, sport: int, dst: str, dport: int, seq: int, flags: int,
           vlan: bool = False, options: int = 20, ack: int = 0) -> bytes:
    eth = b"\x02" * 12 + (b"\x81\x00\x00\x05" if vlan else b"") + b"\x08\x00"
    ip = bytes([0x45, 0xB8]) + struct.pack("!HHHBBH", 60, 0, 0, 64, 6, 0) + bytes(
        int(x) for x in src.split(".")) + bytes(int(x) for x in dst.split("."))
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, (5 + options // 4) << 4, flags,
                      65535, 0, 0) + b"\x01" * options
    return eth + ip + tcp


def test_parse_segment_reads_the_headers_of_a_truncated_copy() -> None:
    f = _frame("10.0.0.11", 40000, "10.0.0.250", 9000, 123456789, TCP_SYN)
    s = parse_segment(f[:128])
    assert s is not None and (s.src_ip, s.src_port, s.dst_ip, s.dst_port, s.seq) == (
        "10.0.0.11", 40000, "10.0.0.250", 9000, 123456789)
    assert s.client_syn and not s.fin
    fin = parse_segment(_frame("10.0.0.1", 9000, "10.0.0.11", 40000, 5, TCP_FIN | TCP_ACK,
                               vlan=True))
    assert fin is not None and fin.fin and not fin.client_syn and fin.src_ip == "10.0.0.1"
    synack = parse_segment(_frame("10.0.0.1", 9000, "10.0.0.11", 40000, 5, TCP_SYN | TCP_ACK))
    assert synack is not None and not synack.client_syn
    acked = parse_segment(_frame("10.0.0.1", 9000, "10.0.0.11", 40000, 5, TCP_FIN | TCP_ACK,
                                 ack=987654321))
    assert acked is not None and acked.ack == 987654321
    assert parse_segment(f[:14 + 20 + 13]) is None  # cut before the flags
    arp = b"\x02" * 12 + b"\x08\x06" + b"\x00" * 28
    assert parse_segment(arp) is None
    udp = bytearray(f)
    udp[14 + 9] = 17
    assert parse_segment(bytes(udp)) is None


def test_a_connection_is_timed_from_its_syn_to_the_servers_fin_in_model_ms() -> None:
    t = ConnectionTimer(MS_REAL)
    assert t.syn(C1, seq=7, t=10.000) is None
    m = t.fin(C1, t=10.012, node="fn")
    assert m is not None and m.node == "fn" and m.client_port == 40000
    assert m.rt_ms == pytest.approx(12e-3 / MS_REAL)  # 2.4 model ms
    assert t.fin(C1, t=10.013, node="fn") is None  # a retransmitted FIN pairs with nothing
    assert t.counts["paired"] == 1 and t.counts["fin_unmatched"] == 1 and not t.open


def test_interleaved_connections_pair_by_their_client_end() -> None:
    t = ConnectionTimer(MS_REAL)
    a, b, c = ("10.0.0.11", 40000), ("10.0.0.11", 40001), ("10.0.0.12", 40000)
    t.syn(a, 1, 1.0)
    t.syn(b, 2, 1.001)
    t.syn(c, 3, 1.002)
    mc = t.fin(c, 1.004, "ofn1")
    ma = t.fin(a, 1.010, "fn")
    mb = t.fin(b, 1.020, "fn")
    assert mc and ma and mb
    assert [round(m.rt_ms, 6) for m in (ma, mb, mc)] == [2.0, 3.8, 0.4]
    assert (ma.client_ip, mc.client_ip, mc.node) == ("10.0.0.11", "10.0.0.12", "ofn1")


def test_a_fin_handled_before_its_syn_still_pairs() -> None:
    t = ConnectionTimer(MS_REAL)
    assert t.fin(C1, t=5.020, node="fn") is None
    m = t.syn(C1, seq=9, t=5.000)
    assert m is not None and m.rt_ms == pytest.approx(4.0) and m.node == "fn"
    assert not t.open
    # a FIN older than the SYN that follows it is not this connection's
    t.fin(("10.0.0.11", 41000), t=6.0, node="fn")
    assert t.syn(("10.0.0.11", 41000), seq=1, t=6.5) is None
    assert ("10.0.0.11", 41000) in t.open


def test_a_retransmitted_syn_keeps_the_first_stamp() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=7, t=1.0)
    t.syn(C1, seq=7, t=2.0)  # the SYN was lost: the client's clock started at the first
    m = t.fin(C1, t=2.010, node="fn")
    assert m is not None and m.rt_ms == pytest.approx(1.010 / MS_REAL)
    assert t.counts["syn_retransmitted"] == 1 and t.counts["abandoned"] == 0


def test_a_reused_port_with_a_new_sequence_abandons_the_unanswered_connection() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=7, t=1.0)  # reset or dropped: no FIN ever comes
    t.syn(C1, seq=99, t=3.0)
    m = t.fin(C1, t=3.005, node="fn")
    assert m is not None and m.rt_ms == pytest.approx(1.0) and t.counts["abandoned"] == 1


def test_missing_fins_expire() -> None:
    t = ConnectionTimer(MS_REAL, max_open_s=2.0)
    t.syn(C1, seq=1, t=1.0)
    t.syn(("10.0.0.11", 40001), seq=2, t=2.5)
    t.fin(("10.0.0.11", 40009), t=1.5, node="fn")  # a FIN of nothing we saw
    assert t.expire(now=3.6) == 1
    assert list(t.open) == [("10.0.0.11", 40001)] and not t._early_fins
    assert t.fin(C1, t=3.7, node="fn") is None  # too late: already abandoned


def test_the_fin_names_the_node_after_nat_and_the_decision_is_the_fallback() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=1, t=1.0, node="ofn1")  # a per-request policy's decision
    m = t.fin(C1, t=1.01, node=None)  # a FIN whose source address is no worker's
    assert m is not None and m.node == "ofn1"
    t.syn(C1, seq=2, t=2.0, node="ofn1")
    m2 = t.fin(C1, t=2.01, node="fn")  # the network says who answered (e.g. a relay)
    assert m2 is not None and m2.node == "fn"


def test_path_stats_recent_means() -> None:
    s = PathStats(window=3)
    assert s.recent("fn") is None
    for x in (1.0, 2.0, 3.0, 10.0):
        s.add("fn", x)
    s.add("ofn1", 4.0)
    assert s.recent("fn") == pytest.approx(5.0)  # the last three
    assert s.recent("ofn1") == 4.0


def test_the_handshake_adds_the_clients_own_leg() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=1, t=1.000)
    t.ack(C1, t=1.0005)  # an ACK before the SYN-ACK is not the handshake's
    t.synack(C1, t=1.001)
    t.ack(C1, t=1.003)  # the client answered 2 ms (real) after the SYN-ACK passed
    t.ack(C1, t=1.009)  # later pure ACKs (of the reply) are not samples
    m = t.fin(C1, t=1.012, node="fn")
    assert m is not None
    assert (m.span_ms, m.leg_ms, m.rt_ms) == (pytest.approx(2.4), pytest.approx(0.4),
                                              pytest.approx(2.8))
    assert t.counts["legs"] == 1 and t.client_leg_s("10.0.0.11") == pytest.approx(0.002)


def test_an_unsampled_connection_takes_its_clients_recent_leg() -> None:
    t = ConnectionTimer(MS_REAL, leg_window=2)
    c1b, c2 = ("10.0.0.11", 40001), ("10.0.0.12", 40001)
    t.syn(c2, seq=5, t=0.5)
    m0 = t.fin(c2, t=0.51, node="fn")  # no sample of this client yet: no leg added
    assert m0 is not None and m0.leg_ms == 0.0 and t.counts["no_leg"] == 1
    for i, leg in enumerate((0.004, 0.001, 0.003)):  # the window keeps the last two
        key = ("10.0.0.11", 41000 + i)
        t.syn(key, seq=i, t=1.0)
        t.synack(key, t=1.001)
        t.ack(key, t=1.001 + leg)
        t.fin(key, t=1.01, node="fn")
    t.syn(c1b, seq=9, t=2.0)
    t.syn(c2, seq=9, t=2.0)
    m = t.fin(c1b, t=2.010, node="fn")
    m2 = t.fin(c2, t=2.010, node="fn")
    assert m is not None and m.leg_ms == pytest.approx(0.002 / MS_REAL)  # c1's, not c2's
    assert m2 is not None and m2.leg_ms == 0.0


def test_the_simulator_shows_per_request_policies_the_same_measured_figure() -> None:
    """The simulator's views carry each node's recent end-to-end response time (sojourn plus
    path network time of answered requests, as the controller's SYN-to-FIN), known only
    once the requests complete."""
    import random
    from dataclasses import dataclass
    from typing import ClassVar

    from conftest import scenario_dict

    from fogsdn.core.scenario import parse_scenario
    from fogsdn.policies import ClusterView, Policy, Request
    from fogsdn.sim.engine import simulate

    seen: list[tuple[float, float | None]] = []

    @dataclass
    class Recorder(Policy):
        name: ClassVar[str] = "recorder"
        proactive: ClassVar[bool] = False

        def routes(self, view: ClusterView) -> dict:  # type: ignore[type-arg]
            return {c: {"fn": 1.0} for c in ("hp", "lp")}

        def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
            seen.append((request.t_ms or 0.0, view.node("fn").measured_rt_ms))
            return "fn"

    sc = parse_scenario(scenario_dict(churn={"eta": 0.0, "xi": 1.0}))
    rows: list = []  # type: ignore[type-arg]
    simulate(sc, rows.extend, requests=3000,
             policy=Recorder(sc.policy))  # type: ignore[call-arg]
    assert seen[0][1] is None  # nothing has completed before the first request
    ok = sorted((r for r in rows if r[1] == 0), key=lambda r: r[0])
    t, measured = seen[-1]
    done = [r[0] - r[6] for r in ok if r[0] <= t][-100:]  # net time 0 on this star
    assert measured == pytest.approx(sum(done) / len(done))


# -- the controller's recorder: segments in, measurements, stats and CSV rows out ----------
VIP = "10.0.0.250"
HOSTS = {"10.0.0.11": "c1", "10.0.0.1": "fn", "10.0.0.2": "ofn1"}


def _recorder(mask: int = 0) -> RtRecorder:
    return RtRecorder(ConnectionTimer(MS_REAL, max_open_s=2.0), VIP, HOSTS, mask)


def test_recorder_pairs_a_syn_to_the_service_with_the_workers_fin() -> None:
    rec = _recorder()
    assert rec.observe(Segment("10.0.0.11", 40000, VIP, 9000, 7, TCP_SYN), 1.000) is None
    rec.observe(Segment("10.0.0.2", 9000, "10.0.0.11", 40000, 0, TCP_SYN | TCP_ACK), 1.001)
    rec.observe(Segment("10.0.0.11", 40000, VIP, 9000, 8, TCP_ACK), 1.002)  # the client's leg
    m = rec.observe(Segment("10.0.0.2", 9000, "10.0.0.11", 40000, 0, TCP_FIN | TCP_ACK), 1.012)
    assert m is not None and m.node == "ofn1"  # the FIN's source names the node
    assert m.rt_ms == pytest.approx(2.4 + 0.2) and m.leg_ms == pytest.approx(0.2)
    assert rec.stats.recent("ofn1") == pytest.approx(m.rt_ms)
    row = rec.row(m)
    assert row.count(",") == RT_COLUMNS.count(",") and row.endswith("\n")
    assert row.startswith("c1,40000,ofn1,1.000000,1.012000,2.600000,")  # the client by name


def test_recorder_ignores_a_syn_not_to_the_service_and_samples_by_port() -> None:
    rec = _recorder(mask=0x1E)
    assert rec.observe(Segment("10.0.0.11", 40000, "10.0.0.1", 9000, 7, TCP_SYN), 1.0) is None
    assert rec.timer.open == {}
    assert rec.sampled(40000) and rec.sampled(40001) and not rec.sampled(40002)
    assert _recorder().sampled(40002)  # no mask: every connection


def test_recorder_expires_stale_connections_about_once_a_second() -> None:
    rec = _recorder()
    rec.observe(Segment("10.0.0.11", 40000, VIP, 9000, 7, TCP_SYN), 0.5)
    assert not rec.expire_due(0.9)  # within a second of the start (last_expiry 0)
    assert rec.expire_due(1.1) and rec.timer.open  # expired, but 0.6 s open is not stale
    assert not rec.expire_due(2.0)
    assert rec.expire_due(2.6) and rec.timer.open == {}  # open 2.1 s > max_open_s
    assert rec.timer.counts["abandoned"] == 1


def test_a_runs_recorder_abandons_after_twice_the_timeout_or_two_seconds() -> None:
    rec = RtRecorder.of_run(5.0, 400.0, VIP, HOSTS, 0x1E, now=12.5)
    assert (rec.timer.ms_real, rec.timer.max_open_s) == (MS_REAL, 4.0)  # 2 x 400 x 5 ms
    assert (rec.vip, rec.mask, rec.last_expiry) == (VIP, 0x1E, 12.5)
    assert dict(rec.node_of_ip) == HOSTS
    assert RtRecorder.of_run(5.0, 100.0, VIP, HOSTS, 0, now=0.0).timer.max_open_s == 2.0


# Conntrack renames a client port when the client reuses it towards the same worker while
# the old connection's entry is still there (seen live: 54642 -> 54643); the server's
# segments then carry the new port, and pair with the SYN by their acknowledgment number.
RENAMED = ("10.0.0.11", 40001)


def test_a_fin_to_a_port_conntrack_renamed_pairs_by_its_acknowledgment() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=1000, t=10.000)
    t.syn(("10.0.0.12", 40001), seq=1000, t=10.001)  # another client's: never this FIN's
    m = t.fin(RENAMED, t=10.010, node="fn", ack=1000 + 1 + 73)  # 73 request bytes read
    assert m is not None and (m.client_ip, m.client_port, m.node) == ("10.0.0.11", 40000, "fn")
    assert m.rt_ms == pytest.approx(10e-3 / MS_REAL)
    assert t.counts["paired_by_ack"] == 1 and list(t.open) == [("10.0.0.12", 40001)]


def test_a_fin_whose_acknowledgment_answers_no_open_syn_stays_unmatched() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=1000, t=10.000)
    assert t.fin(RENAMED, t=10.010, node="fn", ack=1000 + 1 + (1 << 16) + 1) is None
    assert t.fin(RENAMED, t=10.010, node="fn", ack=999) is None  # before the SYN's
    assert t.fin(RENAMED, t=10.010, node="fn") is None  # no acknowledgment: the port only
    assert t.counts["fin_unmatched"] == 3 and list(t.open) == [C1]


def test_pairing_by_acknowledgment_follows_the_sequence_numbers_wrap() -> None:
    t = ConnectionTimer(MS_REAL)
    seq = (1 << 32) - 10
    t.syn(C1, seq=seq, t=10.000)
    m = t.fin(RENAMED, t=10.004, node="ofn1", ack=(seq + 1 + 73) % (1 << 32))
    assert m is not None and m.client_port == 40000


def test_a_renamed_handshake_still_samples_the_clients_leg() -> None:
    t = ConnectionTimer(MS_REAL)
    t.syn(C1, seq=41, t=10.000)
    t.synack(RENAMED, t=10.001, ack=42)  # the SYN-ACK acknowledges exactly the SYN
    t.ack(C1, t=10.0012)  # the client's ACK keeps its own port
    m = t.fin(RENAMED, t=10.010, node="fn", ack=42 + 73)
    assert m is not None and m.leg_ms == pytest.approx(0.2e-3 / MS_REAL)
    assert t.counts["legs"] == 1


def test_the_recorder_pairs_a_renamed_connections_copies_from_their_frames() -> None:
    rec = RtRecorder(ConnectionTimer(MS_REAL), VIP, {"10.0.0.2": "fn", "10.0.0.11": "c1"})
    syn = parse_segment(_frame("10.0.0.11", 40000, VIP, 9000, 5000, TCP_SYN))
    fin = parse_segment(_frame("10.0.0.2", 9000, "10.0.0.11", 40001, 1, TCP_FIN | TCP_ACK,
                               ack=5000 + 1 + 72))
    assert syn is not None and fin is not None
    assert rec.observe(syn, 1.000) is None
    m = rec.observe(fin, 1.006)
    assert m is not None and rec.row(m).startswith("c1,40000,fn,")
