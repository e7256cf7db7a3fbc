"""Small traffic tools run inside a namespace of the link rig (stdlib only, prints JSON):

    python -m topologies.linkem_probe udp-echo PORT
    python -m topologies.linkem_probe udp-rtt HOST PORT COUNT INTERVAL_MS [TIMEOUT_MS]
    python -m topologies.linkem_probe tcp-sink PORT
    python -m topologies.linkem_probe tcp-source HOST PORT SECONDS

udp-rtt sends COUNT timestamped datagrams, one every INTERVAL_MS without waiting for
replies, and reports each round trip and its send time (CLOCK_MONOTONIC, which all
namespaces share; ns resolution), so that long delays do not stretch the run. The
servers print "ready" once listening.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time

_PROBE = struct.Struct("!QQ")  # sequence number, send time (ns)


def udp_echo(port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    print("ready", flush=True)
    while True:
        data, addr = s.recvfrom(2048)
        s.sendto(data, addr)


def udp_rtt(host: str, port: int, count: int, interval_ms: float, timeout_ms: float) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect((host, port))
    s.setblocking(False)
    sent: dict[int, int] = {}
    rtts: dict[int, float] = {}
    order: list[int] = []  # sequence numbers in the order their replies came back
    interval = int(interval_ms * 1e6)
    start = time.monotonic_ns()
    seq = 0
    end = None
    while True:
        now = time.monotonic_ns()
        if seq < count and now >= start + seq * interval:
            s.send(_PROBE.pack(seq, now).ljust(64, b"\0"))
            sent[seq] = now
            seq += 1
            continue
        if seq >= count:
            end = end or now + int(timeout_ms * 1e6)
            if now >= end or len(rtts) == count:
                break
            wait = end - now
        else:
            wait = start + seq * interval - now
        readable, _, _ = select.select([s], [], [], max(wait, 0) / 1e9)
        while readable:
            try:
                data = s.recv(2048)
            except BlockingIOError:
                break
            t = time.monotonic_ns()
            n, t0 = _PROBE.unpack_from(data)
            if n in sent and n not in rtts:
                rtts[n] = (t - t0) / 1e6
                order.append(n)
    return {"sent": count, "rtt_ms": [rtts[n] for n in sorted(rtts)],
            "send_ns": [sent[n] for n in sorted(rtts)], "arrival_order": order,
            "lost": count - len(rtts)}


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
    while True:
        n = conn.recv_into(buf)
        if n == 0:
            break
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


def main(argv: list[str]) -> int:
    cmd, *args = argv
    if cmd == "udp-echo":
        udp_echo(int(args[0]))
        return 0
    if cmd == "udp-rtt":
        timeout = float(args[4]) if len(args) > 4 else 1000.0
        out = udp_rtt(args[0], int(args[1]), int(args[2]), float(args[3]), timeout)
    elif cmd == "tcp-sink":
        out = tcp_sink(int(args[0]))
    elif cmd == "tcp-source":
        out = tcp_source(args[0], int(args[1]), float(args[2]))
    else:
        print(f"unknown command {cmd!r}", file=sys.stderr)
        return 2
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
