"""RTT probes between hosts: a UDP echo responder and a prober, every message counted.

The one echo probe of the project (the fog city, and tools/rigs/traffic_probe.py). The wire
format is `_HEADER`; the prober times against its own monotonic clock, so the
hosts' clocks never need to agree, and anything malformed is dropped and counted
(docs/coordinates.md, Probes). Sockets bind only to the address given.

An echo carries the responder's turnaround (from the kernel's receive stamp of the ping
to its own send), which the prober takes off the round trip, as a TWAMP reflector's two
stamps let its sender do (RFC 5357): on two shared cores the wait of a responder for a
core (or its process's GIL) is the emulator's, not the network's.

    python -m fogsdn.nodes.probe respond --bind 10.0.0.1:7000 [--duration S] [--payload JSON]
    python -m fogsdn.nodes.probe ping --bind 10.0.0.2 --target 10.0.0.1:7000 [--count N]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import select
import signal
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fogsdn.core import rx_stamp

MAGIC = b"FGPR"
VERSION = 2
PING, ECHO = 1, 2
# magic | version | kind | seq | t_send_ns (echoed unchanged) | turnaround_ns (echoes;
# 0 in pings) | payload_len, then payload
_HEADER = struct.Struct("!4sBBIQIH")
MAX_TURNAROUND_NS = 2**32 - 1  # about 4.3 s; a longer hold is sent as this
MAX_PAYLOAD = 512
MAX_DATAGRAM = _HEADER.size + MAX_PAYLOAD


class ProbeError(ValueError):
    """A bad address or option; the message names it."""


class MalformedDatagram(ValueError):
    """A datagram that is not one of ours (the message says what is wrong)."""


@dataclass(frozen=True)
class ProbeMessage:
    kind: int
    seq: int
    t_send_ns: int
    payload: bytes = b""
    turnaround_ns: int = 0  # echoes: how long the responder held the ping

    def encode(self) -> bytes:
        if len(self.payload) > MAX_PAYLOAD:
            raise ProbeError(f"payload: {len(self.payload)} bytes > {MAX_PAYLOAD}")
        return _HEADER.pack(MAGIC, VERSION, self.kind, self.seq, self.t_send_ns,
                            self.turnaround_ns, len(self.payload)) + self.payload


def held_ns(received_s: float | None) -> int:
    """How long a responder has held what its kernel received at `received_s` (monotonic
    s; None: no stamp, 0), in ns, within [0, MAX_TURNAROUND_NS]."""
    held = 0 if received_s is None else round((time.monotonic() - received_s) * 1e9)
    return min(max(held, 0), MAX_TURNAROUND_NS)


def echo_of(ping: ProbeMessage, payload: bytes, received_s: float | None) -> ProbeMessage:
    """The echo of `ping`, stamped with how long it was held since the kernel received it
    (`held_ns`)."""
    return ProbeMessage(ECHO, ping.seq, ping.t_send_ns, payload, held_ns(received_s))


def decode(datagram: bytes) -> ProbeMessage:
    if len(datagram) < _HEADER.size:
        raise MalformedDatagram(f"short: {len(datagram)} bytes")
    if len(datagram) > MAX_DATAGRAM:
        raise MalformedDatagram(f"long: {len(datagram)} bytes")
    magic, version, kind, seq, t_send, turnaround, plen = _HEADER.unpack_from(datagram)
    if magic != MAGIC:
        raise MalformedDatagram("magic")
    if version != VERSION:
        raise MalformedDatagram(f"version {version}")
    if kind not in (PING, ECHO):
        raise MalformedDatagram(f"kind {kind}")
    if _HEADER.size + plen != len(datagram):
        raise MalformedDatagram("payload length")
    if kind == PING and (plen or turnaround):
        raise MalformedDatagram("ping with payload or turnaround")
    return ProbeMessage(kind, seq, t_send, datagram[_HEADER.size:], turnaround)


def parse_endpoint(text: str, *, need_port: bool, allow_wildcard: bool = False
                   ) -> tuple[str, int]:
    """'IP' or 'IP:PORT' (IPv4) into (ip, port); the wildcard only when allowed."""
    host, sep, port_s = text.rpartition(":")
    if not sep:
        host = text
    try:
        ip = ipaddress.IPv4Address(host)
    except ValueError:
        raise ProbeError(f"address: {text!r} is not an IPv4 address[:port]") from None
    if ip.is_unspecified and not allow_wildcard:
        raise ProbeError(f"address: {text!r} is the wildcard; give the host's own address")
    port = 0
    if sep:
        if not port_s.isdigit() or not 0 < int(port_s) < 65536:
            raise ProbeError(f"address: port in {text!r} must be 1-65535")
        port = int(port_s)
    elif need_port:
        raise ProbeError(f"address: {text!r} needs a port (IP:PORT)")
    return str(ip), port


@dataclass
class Turnarounds:
    """The responders' turnarounds an end put on its echoes or took off its round trips:
    what the emulator's own waits for a core would have added to the measured RTTs."""

    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0

    def add(self, ms: float) -> None:
        self.count += 1
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)

    def merge(self, other: Turnarounds) -> None:
        self.count += other.count
        self.total_ms += other.total_ms
        self.max_ms = max(self.max_ms, other.max_ms)

    def to_dict(self) -> dict[str, float]:
        mean = self.total_ms / self.count if self.count else 0.0
        return {"count": self.count, "mean_ms": round(mean, 4), "max_ms": round(self.max_ms, 4),
                "total_ms": round(self.total_ms, 4)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Turnarounds:
        """`to_dict`'s figures read back (a missing one is 0)."""
        return cls(int(d.get("count", 0)), float(d.get("total_ms", 0.0)),
                   float(d.get("max_ms", 0.0)))


@dataclass
class ProbeCounters:
    sent: int = 0
    received: int = 0
    malformed: int = 0
    unmatched: int = 0
    timeouts: int = 0
    # put on the echoes (a responder) or taken off the round trips (a prober)
    turnarounds: Turnarounds = field(default_factory=Turnarounds)

    @property
    def messages(self) -> int:
        """Every probe message this end put on or took off the wire."""
        return self.sent + self.received + self.malformed + self.unmatched


def _bound_socket(bind: tuple[str, int], allow_wildcard: bool) -> socket.socket:
    if ipaddress.IPv4Address(bind[0]).is_unspecified and not allow_wildcard:
        raise ProbeError("bind: the wildcard address needs allow_wildcard")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind(bind)
    except OSError as err:
        sock.close()
        raise ProbeError(f"bind: cannot bind {bind[0]}:{bind[1]}: {err.strerror}") from None
    return sock


class EchoResponder:
    """Answers each ping with an echo carrying `payload` (may change between echoes) and
    how long it held the ping."""

    def __init__(self, bind: tuple[str, int], payload: bytes = b"",
                 allow_wildcard: bool = False) -> None:
        self.sock = _bound_socket(bind, allow_wildcard)
        rx_stamp.enable(self.sock)
        self.counters = ProbeCounters()
        self.payload = payload
        self._stop = threading.Event()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()
        return str(host), int(port)

    def handle(self, datagram: bytes, sender: tuple[str, int],
               received_s: float | None = None) -> None:
        """Answer `datagram` (received by the kernel at `received_s`, monotonic s)."""
        try:
            msg = decode(datagram)
        except MalformedDatagram:
            self.counters.malformed += 1
            return
        if msg.kind != PING:
            self.counters.unmatched += 1
            return
        self.counters.received += 1
        echo = echo_of(msg, self.payload, received_s)
        self.sock.sendto(echo.encode(), sender)
        self.counters.sent += 1
        self.counters.turnarounds.add(echo.turnaround_ns / 1e6)

    def answer_one(self) -> None:
        """Read one datagram (the socket is readable) and answer it."""
        datagram, sender, received_s = rx_stamp.recvfrom_stamped(self.sock, MAX_DATAGRAM + 1)
        self.handle(datagram, sender, received_s)

    def serve(self, duration_s: float | None = None) -> None:
        end = None if duration_s is None else time.monotonic() + duration_s
        while not self._stop.is_set() and (end is None or time.monotonic() < end):
            ready, _, _ = select.select([self.sock], [], [], 0.05)
            if ready:
                self.answer_one()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self.stop()
        self.sock.close()


@dataclass(frozen=True)
class Sample:
    seq: int
    rtt_ms: float | None  # None: no echo within the timeout; the turnaround taken off
    payload: bytes = b""
    turnaround_ms: float = 0.0  # what the responder said it held the ping


class Prober:
    """Sends pings from its bound address and times the echoes (by the kernel's receive
    stamp: many probers share one process's cores in the city's client engine)."""

    def __init__(self, bind: tuple[str, int], allow_wildcard: bool = False) -> None:
        self.sock = _bound_socket(bind, allow_wildcard)
        rx_stamp.enable(self.sock)
        self.counters = ProbeCounters()
        self._seq = 0

    def _decode(self, datagram: bytes) -> ProbeMessage | None:
        """The message, or None for a malformed datagram (counted)."""
        try:
            return decode(datagram)
        except MalformedDatagram:
            self.counters.malformed += 1
            return None

    def ping(self, target: tuple[str, int], timeout_s: float = 1.0) -> Sample:
        """One RTT sample; late echoes of earlier pings are counted as unmatched."""
        self._seq = (self._seq + 1) % 2**32
        seq, t_send = self._seq, time.monotonic_ns()
        self.sock.sendto(ProbeMessage(PING, seq, t_send).encode(), target)
        self.counters.sent += 1
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                break
            # the kernel's receive stamp: not when this thread got a core (or the GIL)
            datagram, t_recv_s = rx_stamp.recv_stamped(self.sock, MAX_DATAGRAM + 1)
            t_recv = round(t_recv_s * 1e9)
            if (msg := self._decode(datagram)) is None:
                continue
            if msg.kind != ECHO or msg.seq != seq or msg.t_send_ns != t_send:
                self.counters.unmatched += 1
                continue
            self.counters.received += 1
            self.counters.turnarounds.add(msg.turnaround_ns / 1e6)
            return Sample(seq, round_trip_ms(t_send, t_recv, msg.turnaround_ns), msg.payload,
                          msg.turnaround_ns / 1e6)
        self.counters.timeouts += 1
        return Sample(seq, None)

    def measure(self, target: tuple[str, int], count: int, interval_s: float = 0.01,
                timeout_s: float = 1.0) -> list[Sample]:
        if count < 1:
            raise ProbeError(f"count: must be >= 1, got {count}")
        out = []
        for i in range(count):
            out.append(self.ping(target, timeout_s))
            if i + 1 < count:
                time.sleep(interval_s)
        return out

    def open_loop(self, target: tuple[str, int], count: int, interval_s: float,
                  timeout_s: float = 1.0) -> OpenLoopRun:
        """`count` pings, one every `interval_s` on a fixed schedule without waiting for
        echoes (long delays do not stretch the run, and reordering shows), then up to
        `timeout_s` for the last echoes."""
        if count < 1:
            raise ProbeError(f"count: must be >= 1, got {count}")
        base = self._seq + 1
        index: dict[int, int] = {}  # wire seq -> i
        send_ns: list[int] = []
        rtts: dict[int, float] = {}
        order: list[int] = []
        step = int(interval_s * 1e9)
        start = time.monotonic_ns()
        end: int | None = None
        self.sock.setblocking(False)
        try:
            while True:
                now = time.monotonic_ns()
                i = len(send_ns)
                if i < count and now >= start + i * step:
                    seq = (base + i) % 2**32
                    self.sock.sendto(ProbeMessage(PING, seq, now).encode(), target)
                    self.counters.sent += 1
                    index[seq] = i
                    send_ns.append(now)
                    continue
                if i >= count:
                    end = end or now + int(timeout_s * 1e9)
                    if now >= end or len(rtts) == count:
                        break
                    wait = end - now
                else:
                    wait = start + i * step - now
                readable, _, _ = select.select([self.sock], [], [], max(wait, 0) / 1e9)
                while readable:
                    try:
                        datagram, t_recv_s = rx_stamp.recv_stamped(self.sock,
                                                                    MAX_DATAGRAM + 1)
                    except BlockingIOError:
                        break
                    t_recv = round(t_recv_s * 1e9)
                    if (msg := self._decode(datagram)) is None:
                        continue
                    k = index.get(msg.seq)
                    if (msg.kind != ECHO or k is None or send_ns[k] != msg.t_send_ns
                            or k in rtts):
                        self.counters.unmatched += 1
                        continue
                    self.counters.received += 1
                    self.counters.turnarounds.add(msg.turnaround_ns / 1e6)
                    rtts[k] = round_trip_ms(msg.t_send_ns, t_recv, msg.turnaround_ns)
                    order.append(k)
        finally:
            self.sock.setblocking(True)
        self._seq = (base + count - 1) % 2**32
        self.counters.timeouts += count - len(rtts)
        answered = sorted(rtts)
        return OpenLoopRun(count, tuple(rtts[k] for k in answered),
                           tuple(send_ns[k] for k in answered), tuple(order))

    def close(self) -> None:
        self.sock.close()


def round_trip_ms(t_send_ns: int, t_recv_ns: int, turnaround_ns: int) -> float:
    """The network's round trip: the prober's send to its kernel's receive stamp, less
    the responder's turnaround (never below 0: the two ends' stamps are not one clock's
    reading, so a tiny round trip may come out a hair negative)."""
    return max(t_recv_ns - t_send_ns - turnaround_ns, 0) / 1e6


@dataclass(frozen=True)
class OpenLoopRun:
    """What `Prober.open_loop` saw: the answered pings' round trips (ms) and send times
    (CLOCK_MONOTONIC ns, which all network namespaces share), in send order, and the
    order (0-based send index) in which their echoes came back."""

    sent: int
    rtt_ms: tuple[float, ...]
    send_ns: tuple[int, ...]
    arrival_order: tuple[int, ...]

    @property
    def lost(self) -> int:
        return self.sent - len(self.rtt_ms)


def summarize(samples: list[Sample], counters: ProbeCounters) -> dict[str, object]:
    rtts = sorted(s.rtt_ms for s in samples if s.rtt_ms is not None)
    out: dict[str, object] = {"count": len(samples), "answered": len(rtts),
                              "counters": asdict(counters), "messages": counters.messages}
    if rtts:
        out.update(rtt_ms_min=rtts[0], rtt_ms_p50=statistics.median(rtts),
                   rtt_ms_max=rtts[-1])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("respond")
    r.add_argument("--bind", required=True)
    r.add_argument("--duration", type=float, default=None, help="seconds; default: forever")
    r.add_argument("--payload", default="")
    p = sub.add_parser("ping")
    p.add_argument("--bind", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--timeout-ms", type=float, default=1000.0)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "respond":
            responder = EchoResponder(parse_endpoint(args.bind, need_port=True),
                                      args.payload.encode())
            # SIGTERM (a runner stopping it) and Ctrl-C end serving as --duration does:
            # the counters follow
            signal.signal(signal.SIGTERM, lambda signum, frame: responder.stop())
            try:
                responder.serve(args.duration)
            except KeyboardInterrupt:
                pass
            finally:
                responder.close()
            print(json.dumps({"counters": asdict(responder.counters)}))
            return 0
        prober = Prober(parse_endpoint(args.bind, need_port=False))
        try:
            samples = prober.measure(parse_endpoint(args.target, need_port=True), args.count,
                                     args.interval_ms / 1000, args.timeout_ms / 1000)
        finally:
            prober.close()
        print(json.dumps(summarize(samples, prober.counters)))
        return 0
    except ProbeError as err:
        print(f"probe: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
