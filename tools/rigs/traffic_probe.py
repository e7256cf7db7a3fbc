"""Traffic tools run inside a namespace or a Mininet host (each answer printed as JSON).

    python -m tools.rigs.traffic_probe udp-echo PORT
    python -m tools.rigs.traffic_probe udp-rtt HOST PORT COUNT INTERVAL_MS [TIMEOUT_MS]
    python -m tools.rigs.traffic_probe tcp-sink PORT
    python -m tools.rigs.traffic_probe tcp-source HOST PORT SECONDS
    python -m tools.rigs.traffic_probe sink PORT OUT.json      # until SIGTERM
    python -m tools.rigs.traffic_probe stream HOST PORT INTERVAL_MS
    python -m tools.rigs.traffic_probe tcp-echo PORT
    python -m tools.rigs.traffic_probe tcp-ping HOST PORT SECONDS INTERVAL_MS

Servers print "ready" once listening; what each one measures: docs/benchmarks.md.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fogsdn.core import rx_stamp
from fogsdn.nodes.probe import EchoResponder, Prober

_DGRAM = struct.Struct("!QQ")  # sequence number, send time (ns)

Arrival = tuple[int, int, int]  # seq, sent ns, received ns


@dataclass(frozen=True)
class Outage:
    """What one link failure cost a stream of datagrams (docs/topologies.md, Re-route): ms
    to the first datagram on the new path, the sending time lost, the receiver's stall."""

    lost: int
    recovery_ms: float
    lost_ms: float
    stall_ms: float


def reroute_times(arrivals: Sequence[Arrival], failures: Sequence[tuple[int, int]],
                  interval_ms: float) -> list[Outage | None]:
    """Each failure window's (failed ns, restored ns) Outage: zeros but the stall when
    nothing was lost, None when nothing arrived after the loss."""
    by_seq = sorted(arrivals)
    out: list[Outage | None] = []
    for t_fail, t_restore in failures:
        if not any(t >= t_fail for _, t, _ in by_seq):
            out.append(None)  # nothing sent after the failure arrived
            continue
        # datagrams lost in the window: gaps in seq between arrivals sent around it
        last_lost, lost = -1, 0
        for (s0, t0, _), (s1, _, _) in zip(by_seq, by_seq[1:], strict=False):
            if s1 > s0 + 1 and t_fail - 50_000_000 <= t0 < t_restore:
                last_lost, lost = s1 - 1, lost + s1 - s0 - 1
        # arrivals of what was sent from just before the failure until the restore
        around = sorted(r for _, t, r in by_seq if t_fail - 50_000_000 <= t < t_restore)
        gaps = [b - a for a, b in zip(around, around[1:], strict=False)]
        stall = max(0.0, max(gaps, default=0) / 1e6 - interval_ms)
        if last_lost < 0:
            out.append(Outage(0, 0.0, 0.0, stall))
            continue
        after = [r for s, _, r in by_seq if s > last_lost]
        out.append(Outage(lost, (min(after) - t_fail) / 1e6, lost * interval_ms, stall)
                   if after else None)
    return out


# -- the link rig: round trips and bulk transfer ---------------------------------------
def udp_echo(port: int) -> None:
    """`fogsdn.nodes.probe`'s echo responder on every address of this namespace."""
    responder = EchoResponder(("0.0.0.0", port), allow_wildcard=True)
    print("ready", flush=True)
    responder.serve()


def udp_rtt(host: str, port: int, count: int, interval_ms: float, timeout_ms: float = 1000.0
            ) -> dict[str, Any]:
    """`fogsdn.nodes.probe`'s open-loop round trips to a `udp-echo`, as JSON-ready figures."""
    prober = Prober(("0.0.0.0", 0), allow_wildcard=True)
    try:
        run = prober.open_loop((host, port), count, interval_ms / 1000, timeout_ms / 1000)
    finally:
        prober.close()
    return {"sent": run.sent, "rtt_ms": list(run.rtt_ms), "send_ns": list(run.send_ns),
            "arrival_order": list(run.arrival_order), "lost": run.lost}


def tcp_listen_ready(port: int, backlog: int) -> socket.socket:
    """A TCP socket listening on every address of this namespace at `port`, announced to
    the parent with the "ready" line it waits for before it starts the client."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(backlog)
    print("ready", flush=True)
    return srv


def tcp_sink(port: int) -> dict:
    srv = tcp_listen_ready(port, 1)
    conn, _ = srv.accept()
    total = 0
    first = None
    buf = bytearray(1 << 20)
    while n := conn.recv_into(buf):
        first = first or time.monotonic()
        total += n
    seconds = time.monotonic() - first if first else 0.0
    return {"bytes": total, "seconds": seconds}


def tcp_source(host: str, port: int, seconds: float) -> dict:
    s = socket.create_connection((host, port), timeout=10)
    chunk = b"\xa5" * (1 << 16)
    total = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        total += s.send(chunk)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # the sink closes after reading everything
    s.close()
    return {"bytes": total, "seconds": time.monotonic() - t0}


# -- the re-route measurement -------------------------------------------------------------
def sink(port: int, out: Path) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind(("0.0.0.0", port))
    rx_stamp.enable(s)
    got: list[Arrival] = []

    def stop(*_: Any) -> None:
        out.write_text(json.dumps(got))
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    print("ready", flush=True)
    while True:
        data, t = rx_stamp.recv_stamped(s, 64)  # arrival: the kernel's stamp
        seq, sent = _DGRAM.unpack_from(data)
        got.append((seq, sent, int(t * 1e9)))


def stream(host: str, port: int, interval_ms: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, port))
    step = int(interval_ms * 1e6)
    start = time.monotonic_ns()
    seq = 0
    while True:
        due = start + seq * step
        now = time.monotonic_ns()
        if now < due:
            time.sleep((due - now) / 1e9)
        try:
            s.send(_DGRAM.pack(seq, time.monotonic_ns()).ljust(64, b"\0"))
        except OSError:
            pass  # no route for a moment: that datagram is lost, as on a wire
        seq += 1


def tcp_echo(port: int) -> None:
    srv = tcp_listen_ready(port, 8)
    while True:
        conn, _ = srv.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)


def tcp_ping(host: str, port: int, seconds: float, interval_ms: float) -> dict[str, Any]:
    s = socket.create_connection((host, port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(5.0)
    sent = echoed = 0
    errors: list[str] = []
    slowest = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            s.sendall(b"x" * 31 + b"\n")
            sent += 1
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(64)
                if not chunk:
                    raise ConnectionResetError("closed by peer")
                buf += chunk
            echoed += 1
            slowest = max(slowest, time.monotonic() - t)
        except OSError as err:
            errors.append(f"{type(err).__name__}: {err}")
            break
        time.sleep(interval_ms / 1000.0)
    s.close()
    return {"sent": sent, "echoed": echoed, "errors": errors, "slowest_s": slowest}


# command -> (function, how to read each argument); a function's JSON answer is printed
COMMANDS: dict[str, tuple[Callable[..., Any], tuple[Callable[[str], Any], ...]]] = {
    "udp-echo": (udp_echo, (int,)),
    "udp-rtt": (udp_rtt, (str, int, int, float, float)),
    "tcp-sink": (tcp_sink, (int,)),
    "tcp-source": (tcp_source, (str, int, float)),
    "sink": (sink, (int, Path)),
    "stream": (stream, (str, int, float)),
    "tcp-echo": (tcp_echo, (int,)),
    "tcp-ping": (tcp_ping, (str, int, float, float)),
}


def main(argv: list[str]) -> int:
    cmd, *args = argv
    if cmd not in COMMANDS:
        print(f"unknown command {cmd!r}", file=sys.stderr)
        return 2
    fn, kinds = COMMANDS[cmd]
    answer = fn(*(kind(a) for kind, a in zip(kinds, args, strict=False)))
    if answer is not None:
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
