"""Two network namespaces joined through one link element, or by a plain veth: the rig on
which the emulation tests and scripts/bench_links.py measure the element (its layout:
docs/benchmarks.md). Everything is named with a unique prefix and removed on exit.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IP_A, IP_B = "10.77.0.1", "10.77.0.2"
PROBE = "tools.rigs.traffic_probe"
ROOT = Path(__file__).resolve().parents[2]  # tools/rigs/ is importable from here
_counter = itertools.count()


@dataclass(frozen=True)
class Rig:
    ns_a: str
    ns_b: str
    intf_a: str | None  # the element's interfaces in the root namespace (None: plain veth)
    intf_b: str | None
    ip_a: str = IP_A
    ip_b: str = IP_B

    def exec_argv(self, side: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns_a if side == "a" else self.ns_b, *argv]

    def python_argv(self, side: str, module: str, *args: str, realtime: bool = False) -> list[str]:
        """Run one of our modules inside a namespace, with this interpreter; `realtime`:
        SCHED_FIFO 1, so that a loaded machine delays the measuring tool less."""
        rt = ["chrt", "-f", "1"] if realtime else []
        return self.exec_argv(side, ["env", f"PYTHONPATH={ROOT}", *rt, sys.executable, "-m",
                                     module, *args])


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


def _host_side(ns: str, intf: str, ip: str) -> None:
    _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", intf)
    _ip("-n", ns, "link", "set", "dev", intf, "up")
    _ip("-n", ns, "link", "set", "dev", "lo", "up")
    subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", intf, "tx", "off"],
                   capture_output=True)
    subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1"], capture_output=True)


@contextmanager
def namespace_rig(spliced: bool = True) -> Iterator[Rig]:
    """Build the rig; with `spliced`, the two root-namespace ends await a shaper's attach."""
    prefix = f"lk{os.getpid() % 100000}{next(_counter)}"  # short (15-byte names), unique
    ns_a, ns_b = f"fogsdn-{prefix}-a", f"fogsdn-{prefix}-b"
    root_ends = [f"{prefix}a", f"{prefix}b"] if spliced else []
    try:
        _ip("netns", "add", ns_a)
        _ip("netns", "add", ns_b)
        if spliced:
            _ip("link", "add", root_ends[0], "type", "veth", "peer", "name", "a0", "netns", ns_a)
            _ip("link", "add", root_ends[1], "type", "veth", "peer", "name", "b0", "netns", ns_b)
        else:
            _ip("-n", ns_a, "link", "add", "a0", "type", "veth", "peer", "name", "b0",
                "netns", ns_b)
        _host_side(ns_a, "a0", IP_A)
        _host_side(ns_b, "b0", IP_B)
        yield Rig(ns_a, ns_b, root_ends[0] if spliced else None, root_ends[1] if spliced else None)
    finally:
        for ns in (ns_a, ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for intf in root_ends:
            if Path(f"/sys/class/net/{intf}").exists():
                subprocess.run(["ip", "link", "del", intf], capture_output=True)


def _kill(*procs: subprocess.Popen[str] | None) -> None:
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


def ping_rtts(rig: Rig, count: int, interval_s: float, timeout_s: float = 60.0,
              realtime: bool = False) -> list[float]:
    """Round trips (ms, 3 significant digits) of `count` pings from A to B; lost ones absent."""
    rt = ["chrt", "-f", "1"] if realtime else []
    r = subprocess.run(rig.exec_argv("a", [*rt, "ping", "-n", "-c", str(count), "-i",
                                           str(interval_s), "-W", "2", rig.ip_b]),
                       capture_output=True, text=True, timeout=timeout_s)
    return [float(m) for m in re.findall(r"time=([0-9.]+) ms", r.stdout)]


def udp_rtts(rig: Rig, count: int, interval_ms: float, port: int = 9999,
             during: Callable[[], None] | None = None, realtime: bool = False) -> dict[str, Any]:
    """Our UDP echo's round trips (fogsdn.nodes.probe, ns), send times and losses; `during` runs
    while the probes are being sent."""
    server = subprocess.Popen(rig.python_argv("b", PROBE, "udp-echo", str(port),
                                              realtime=realtime),
                              stdout=subprocess.PIPE, text=True)
    client: subprocess.Popen[str] | None = None
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "ready"
        client = subprocess.Popen(rig.python_argv("a", PROBE, "udp-rtt", rig.ip_b, str(port),
                                                  str(count), str(interval_ms),
                                                  realtime=realtime),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if during is not None:
            during()
        stdout, stderr = client.communicate(timeout=60 + count * interval_ms / 1e3)
        if client.returncode != 0:
            raise RuntimeError(f"udp-rtt failed: {stderr.strip()[-300:]}")
        return dict(json.loads(stdout))
    finally:
        _kill(client, server)


@contextmanager
def tcp_transfer(rig: Rig, seconds: float, port: int = 5001) -> Iterator[dict[str, Any]]:
    """A TCP bulk transfer A -> B running while the body runs; afterwards the dict holds
    the sink's {"bytes", "seconds", "mbps"} and the source's exit status ("source_rc")."""
    sink = subprocess.Popen(rig.python_argv("b", PROBE, "tcp-sink", str(port)),
                            stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = {}
    source: subprocess.Popen[str] | None = None
    try:
        assert sink.stdout is not None
        sink.stdout.readline()  # "ready"
        source = subprocess.Popen(rig.python_argv("a", PROBE, "tcp-source", rig.ip_b, str(port),
                                                  str(seconds)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        yield result
        _, err = source.communicate(timeout=seconds + 30)
        result["source_rc"] = source.returncode
        result["source_err"] = err.strip()[-300:]
        line = sink.stdout.readline()
        sink.wait(timeout=10)
        if line:
            result.update(json.loads(line))
            result["mbps"] = result["bytes"] * 8 / max(result["seconds"], 1e-9) / 1e6
    finally:
        _kill(source, sink)

