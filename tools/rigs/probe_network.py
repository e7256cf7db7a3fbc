"""Measurements on a live network (`fogsdn.live.live_network.live_network`): ping round trips,
re-route times, TCP sessions. Needs root, Open vSwitch and the emulation lock.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any

from fogsdn.live.live_network import LiveNetwork
from tools.rigs.traffic_probe import Outage, reroute_times

_TIME = re.compile(r"time=([0-9.]+) ms")


def ping_rtts_ms(live: LiveNetwork, src: str, dst: str, count: int = 50, interval_s: float = 0.02
                 ) -> list[float]:
    """Round trips (real ms) of `count` pings from `src` to `dst`, after a warm-up (ARP)."""
    host = live.host(src)
    ip = live.ip(dst)
    host.cmd(f"ping -c 1 -W 2 {ip}")
    out = host.cmd(f"ping -c {count} -i {interval_s} -W 2 {ip}")
    return [float(m) for m in _TIME.findall(out)]


def _popen(live: LiveNetwork, host: str, label: str, *args: str) -> subprocess.Popen[str]:
    """A probe in `host`, its output piped; recorded for removal, ended by the caller."""
    p: subprocess.Popen[str] = live.start_in_host(
        host, f"probe {label}", ["tools.rigs.traffic_probe", *args], None)
    return p


def _ready(p: subprocess.Popen[str]) -> None:
    assert p.stdout is not None
    line = p.stdout.readline().strip()
    if line != "ready":
        raise RuntimeError(f"probe did not start: {line!r}")


def measure_reroutes(live: LiveNetwork, src: str, dst: str, link_id: str, failures: int,
                     down_s: float = 0.2, up_s: float = 0.2, interval_ms: float = 0.5
                     ) -> list[Outage | None]:
    """Fail `link_id` `failures` times while `src` streams to `dst`: what each one cost."""
    out = live.out / f"reroute-{link_id}.json"
    sink = _popen(live, dst, "sink", "sink", "7100", str(out))
    _ready(sink)
    src_ip = live.ip(dst)
    stream = _popen(live, src, "stream", "stream", src_ip, "7100", str(interval_ms))
    windows: list[tuple[int, int]] = []
    try:
        time.sleep(0.5)  # ARP and the first datagrams
        for _ in range(failures):
            t_fail = time.monotonic_ns()
            live.set_link(link_id, False)
            time.sleep(down_s)
            t_restore = time.monotonic_ns()
            live.set_link(link_id, True)
            windows.append((t_fail, t_restore))
            time.sleep(up_s)
    finally:
        stream.terminate()
        stream.wait(timeout=5)
        sink.send_signal(signal.SIGTERM)
        sink.wait(timeout=5)
    arrivals = [tuple(a) for a in json.loads(out.read_text())]
    return reroute_times(arrivals, windows, interval_ms)  # type: ignore[arg-type]


def tcp_echo_session(live: LiveNetwork, client: str, server: str, seconds: float,
                     port: int = 7200) -> tuple[subprocess.Popen[str], subprocess.Popen[str]]:
    """An echo server on `server` and one long TCP connection from `client` pinging
    through it for `seconds`; read the client's JSON line when it ends."""
    srv = _popen(live, server, f"echo {server}", "tcp-echo", str(port))
    _ready(srv)
    cli = _popen(live, client, f"ping {client}", "tcp-ping", live.ip(server),
                 str(port), str(seconds), "10")
    return srv, cli


def service_session(live: LiveNetwork, client: str, servers: Sequence[str], seconds: float
                    ) -> tuple[list[subprocess.Popen[str]], subprocess.Popen[str]]:
    """Echo servers on `servers` and one long TCP connection from `client` to the service
    address, dispatched (and routed) like any request; read it with `session_result`."""
    port = str(live.graph.graph["service_port"])
    srvs = [_popen(live, s, f"echo {s}", "tcp-echo", port) for s in servers]
    for srv in srvs:
        _ready(srv)
    cli = _popen(live, client, f"ping {client}", "tcp-ping", str(live.graph.graph["vip"]),
                 port, str(seconds), "10")
    return srvs, cli


def session_result(srv: subprocess.Popen[str], cli: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = cli.communicate(timeout=60)
    srv.terminate()
    srv.wait(timeout=5)
    return dict(json.loads(out.strip().splitlines()[-1]))
