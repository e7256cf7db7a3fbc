"""UDP echo probes: loopback (no root), and across two network namespaces joined by a
veth (emulation; run it under the emulation lock)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, wait_until

from fogsdn.core import rx_stamp
from fogsdn.nodes.probe import (
    ECHO,
    MAX_DATAGRAM,
    MAX_TURNAROUND_NS,
    PING,
    EchoResponder,
    MalformedDatagram,
    ProbeError,
    ProbeMessage,
    Prober,
    decode,
    echo_of,
    parse_endpoint,
    round_trip_ms,
)

LOOP = ("127.0.0.1", 0)


@pytest.fixture
def responder() -> Iterator[EchoResponder]:
    r = EchoResponder(LOOP)
    t = threading.Thread(target=r.serve, daemon=True)
    t.start()
    yield r
    r.stop()
    t.join(timeout=2)
    r.sock.close()


def _settle(responder: EchoResponder, sent: int) -> None:
    """The responder's thread counts an echo just after sending it: wait for that."""
    wait_until(lambda: responder.counters.sent >= sent, f"{sent} echoes counted")


def test_round_trip_on_loopback_counts_every_message(responder: EchoResponder) -> None:
    prober = Prober(LOOP)
    try:
        # a timeout a busy machine cannot reach: every ping is answered
        samples = prober.measure(responder.address, count=5, interval_s=0.0, timeout_s=10.0)
    finally:
        prober.close()
    rtts = [s.rtt_ms for s in samples]
    assert all(r is not None and r > 0 for r in rtts), rtts
    assert (prober.counters.sent, prober.counters.received) == (5, 5)
    assert prober.counters.messages == 10
    _settle(responder, 5)
    assert (responder.counters.received, responder.counters.sent) == (5, 5)


def test_open_loop_sends_on_schedule_and_times_every_echo(responder: EchoResponder) -> None:
    prober = Prober(LOOP)
    try:
        prober.ping(responder.address, timeout_s=10.0)  # the seq goes on from here
        run = prober.open_loop(responder.address, count=20, interval_s=0.002, timeout_s=10.0)
    finally:
        prober.close()
    assert (run.sent, run.lost, len(run.rtt_ms)) == (20, 0, 20)
    assert all(r > 0 for r in run.rtt_ms)
    assert sorted(run.arrival_order) == list(range(20))
    # on the schedule (ping i no earlier than i intervals in), not back to back
    assert run.send_ns[-1] - run.send_ns[0] >= 18 * 2_000_000
    assert (prober.counters.sent, prober.counters.received, prober.counters.unmatched) == \
        (21, 21, 0)


def test_open_loop_counts_what_is_lost() -> None:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind(LOOP)
    prober = Prober(LOOP)
    try:
        run = prober.open_loop(silent.getsockname(), count=3, interval_s=0.0, timeout_s=0.05)
    finally:
        prober.close()
        silent.close()
    assert (run.sent, run.lost, run.rtt_ms, run.arrival_order) == (3, 3, (), ())
    assert prober.counters.timeouts == 3


@pytest.mark.parametrize("datagram, why", [
    (b"xx", "short"),
    (b"NOPE" + bytes(20), "magic"),
    (ProbeMessage(PING, 1, 2).encode()[:4] + b"\x09" + ProbeMessage(PING, 1, 2).encode()[5:],
     "version"),
    (ProbeMessage(7, 1, 2).encode(), "kind"),
    (ProbeMessage(ECHO, 1, 2, b"abc").encode()[:-1], "payload length"),
    (ProbeMessage(PING, 1, 2, b"abc").encode(), "ping with payload"),
    (ProbeMessage(PING, 1, 2, turnaround_ns=5).encode(), "turnaround"),
    (ProbeMessage(ECHO, 1, 2).encode() + bytes(600), "long"),
])
def test_decode_rejects_malformed(datagram: bytes, why: str) -> None:
    with pytest.raises(MalformedDatagram, match=why):
        decode(datagram)


def test_decode_round_trip() -> None:
    msg = ProbeMessage(ECHO, 2**32 - 1, 123456789, b'{"a":1}', 2**32 - 1)
    assert decode(msg.encode()) == msg


def test_the_responders_turnaround_is_taken_off_the_round_trip() -> None:
    """A responder that holds a ping 60 ms (as one waiting for a core would) says so in
    its echo; the prober's round trip leaves it out and counts what it took off."""
    slow = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    slow.bind(LOOP)
    rx_stamp.enable(slow)

    def hold_and_answer() -> None:
        data, sender, received_s = rx_stamp.recvfrom_stamped(slow, MAX_DATAGRAM)
        time.sleep(0.06)
        slow.sendto(echo_of(decode(data), b"", received_s).encode(), sender)

    t = threading.Thread(target=hold_and_answer, daemon=True)
    t.start()
    prober = Prober(LOOP)
    try:
        sample = prober.ping(slow.getsockname(), timeout_s=10.0)
    finally:
        prober.close()
        t.join(timeout=5)
        slow.close()
    assert sample.rtt_ms is not None and sample.turnaround_ms >= 60.0
    assert sample.rtt_ms < sample.turnaround_ms  # the loopback's part, not the hold
    assert prober.counters.turnarounds.count == 1
    assert prober.counters.turnarounds.max_ms == sample.turnaround_ms


def test_turnarounds_saturate_and_round_trips_never_go_negative() -> None:
    ping = ProbeMessage(PING, 1, 2)
    assert echo_of(ping, b"", time.monotonic() - 10.0).turnaround_ns == MAX_TURNAROUND_NS
    assert echo_of(ping, b"", None).turnaround_ns == 0
    assert echo_of(ping, b"", time.monotonic() + 5.0).turnaround_ns == 0  # a stamp ahead
    assert round_trip_ms(1_000, 2_000, 5_000) == 0.0
    assert round_trip_ms(1_000, 3_001_000, 1_000_000) == 2.0


def test_responder_ignores_and_counts_malformed(responder: EchoResponder) -> None:
    junk = [b"", b"hello", ProbeMessage(ECHO, 1, 1).encode(), bytes(40)]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(LOOP)
        s.settimeout(10.0)  # however long a busy machine keeps the responder's thread
        for d in junk:
            s.sendto(d, responder.address)
        s.sendto(ProbeMessage(PING, 9, 9).encode(), responder.address)
        reply, _ = s.recvfrom(1024)  # only the valid ping is answered ...
        assert decode(reply).seq == 9
        s.settimeout(0.3)  # ... and the junk, handled before it in order, got nothing
        with pytest.raises(TimeoutError):
            s.recvfrom(1024)
    _settle(responder, 1)
    c = responder.counters
    assert (c.malformed, c.unmatched, c.received, c.sent) == (3, 1, 1, 1)


def test_prober_counts_timeouts_and_unmatched() -> None:
    """A silent peer times out; a peer echoing the wrong seq is unmatched, not an RTT."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(LOOP)
        prober = Prober(LOOP)
        try:
            sample = prober.ping(silent.getsockname(), timeout_s=0.05)
            assert sample.rtt_ms is None and prober.counters.timeouts == 1
            # answer the next ping with a stale seq, from the silent socket
            def liar() -> None:
                data, addr = silent.recvfrom(1024)
                msg = decode(data)
                silent.sendto(ProbeMessage(ECHO, msg.seq + 1, msg.t_send_ns).encode(), addr)
                silent.sendto(b"garbage", addr)
            t = threading.Thread(target=liar)
            t.start()
            # the whole timeout passes (no matching echo): long enough for the liar's
            # thread to answer on a busy machine
            sample = prober.ping(silent.getsockname(), timeout_s=1.0)
            t.join()
        finally:
            prober.close()
    assert sample.rtt_ms is None
    assert (prober.counters.unmatched, prober.counters.malformed) == (1, 1)
    assert prober.counters.timeouts == 2


def test_binds_only_to_given_addresses() -> None:
    with pytest.raises(ProbeError, match="wildcard"):
        parse_endpoint("0.0.0.0:7000", need_port=True)
    with pytest.raises(ProbeError, match="wildcard"):
        EchoResponder(("0.0.0.0", 0))
    with pytest.raises(ProbeError, match="needs a port"):
        parse_endpoint("10.0.0.1", need_port=True)
    with pytest.raises(ProbeError, match="port"):
        parse_endpoint("10.0.0.1:70000", need_port=True)
    with pytest.raises(ProbeError, match="IPv4"):
        parse_endpoint("host.example:7", need_port=True)
    assert parse_endpoint("10.0.0.1:7000", need_port=True) == ("10.0.0.1", 7000)
    assert parse_endpoint("10.0.0.2", need_port=False) == ("10.0.0.2", 0)
    r = EchoResponder(LOOP)
    try:
        assert r.address[0] == "127.0.0.1"
    finally:
        r.close()


def test_echoes_carry_the_responders_payload(responder: EchoResponder) -> None:
    """What the responder holds when a ping arrives comes back with the echo."""
    prober = Prober(LOOP)
    try:
        responder.payload = b'{"coord": [3.0, 4.0]}'
        first = prober.ping(responder.address, timeout_s=10.0)
        responder.payload = b"changed"
        second = prober.ping(responder.address, timeout_s=10.0)
    finally:
        prober.close()
    assert (first.payload, second.payload) == (b'{"coord": [3.0, 4.0]}', b"changed")


def _udp_bound(port: int) -> bool:
    """Some socket is bound to 127.0.0.1:`port` (UDP), from /proc/net/udp."""
    want = f"0100007F:{port:04X}"
    lines = Path("/proc/net/udp").read_text().splitlines()[1:]
    return any(line.split()[1] == want for line in lines)


def test_command_line_on_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(LOOP)
        port = s.getsockname()[1]
    # pings start once the responder is bound; SIGTERM ends it, and it reports (SIGINT
    # would not do: a process started in the background, as by pytest-xdist, ignores it)
    resp = subprocess.Popen([sys.executable, "-m", "fogsdn.nodes.probe", "respond", "--bind",
                             f"127.0.0.1:{port}", "--duration", "60"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _udp_bound(port) or resp.poll() is not None, "the responder's bind")
        r = subprocess.run([sys.executable, "-m", "fogsdn.nodes.probe", "ping",
                            "--bind", "127.0.0.1",
                            "--target", f"127.0.0.1:{port}", "--count", "3",
                            "--interval-ms", "20"],
                           cwd=ROOT, capture_output=True, text=True, timeout=30)
    finally:
        resp.send_signal(signal.SIGTERM)
        out, err = resp.communicate(timeout=30)
    assert resp.returncode == 0 and "Traceback" not in err, err
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["count"] == summary["answered"] == 3
    assert json.loads(out)["counters"]["received"] == 3
    bad = subprocess.run([sys.executable, "-m", "fogsdn.nodes.probe", "respond",
                          "--bind", "0.0.0.0:1"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "wildcard" in bad.stderr


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.mark.emulation
def test_probe_across_namespaces() -> None:
    """Responder and prober in two namespaces joined by a veth; always cleaned up."""
    tag = f"fgpr{os.getpid() % 100000}"
    ns_a, ns_b = f"{tag}a", f"{tag}b"
    try:
        _ip("netns", "add", ns_a)
        _ip("netns", "add", ns_b)
        _ip("link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}y")
        _ip("link", "set", f"{tag}x", "netns", ns_a)
        _ip("link", "set", f"{tag}y", "netns", ns_b)
        for ns, dev, addr in ((ns_a, f"{tag}x", "10.213.0.1/30"),
                              (ns_b, f"{tag}y", "10.213.0.2/30")):
            _ip("-n", ns, "addr", "add", addr, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        resp = subprocess.Popen(["ip", "netns", "exec", ns_a, sys.executable, "-m",
                                 "fogsdn.nodes.probe", "respond", "--bind", "10.213.0.1:7000",
                                 "--duration", "4"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        try:
            r = subprocess.run(["ip", "netns", "exec", ns_b, sys.executable, "-m",
                                "fogsdn.nodes.probe",
                                "ping", "--bind", "10.213.0.2", "--target", "10.213.0.1:7000",
                                "--count", "20", "--interval-ms", "20"],
                               cwd=ROOT, capture_output=True, text=True, timeout=30)
        finally:
            out, _ = resp.communicate(timeout=15)
        assert r.returncode == 0, r.stderr
        summary = json.loads(r.stdout)
        assert summary["answered"] >= 19, summary
        assert 0 < summary["rtt_ms_p50"] < 5
        assert summary["messages"] == summary["count"] + summary["answered"]
        assert json.loads(out)["counters"]["sent"] == summary["answered"]
    finally:
        for ns in (ns_a, ns_b):  # deleting a namespace deletes its end of the veth
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
