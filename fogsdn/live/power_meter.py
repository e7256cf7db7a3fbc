"""Live power: the runner polls busy time and switch port counters once a second.

A node's utilisation is its busy server-seconds over a poll; a switch port whose
counters moved was active. Polled by the runner, not the controller, so that a
controller restart never loses the account (docs/architecture.md, "Live power").
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from fogsdn.core.scenario import NodeSpec, SwitchPower
from fogsdn.models.power_model import (
    PowerSample,
    awake_ports,
    hold_intervals,
    server_power_w,
    switch_power_w,
)

POLL_S = 1.0

_PORT = re.compile(r'port\s+"?([^:"\s]+)"?:\s*rx pkts=(\d+), bytes=(\d+).*?'
                   r'tx pkts=(\d+), bytes=(\d+)', re.S)


@dataclass(frozen=True)
class PortCounters:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int


def parse_dump_ports(text: str) -> dict[str, PortCounters]:
    """`ovs-ofctl dump-ports` output -> counters per port (the LOCAL port left out)."""
    return {m.group(1): PortCounters(*(int(m.group(i)) for i in range(2, 6)))
            for m in _PORT.finditer(text) if m.group(1) != "LOCAL"}


def dump_ports(bridge: str) -> dict[str, PortCounters]:
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-ports", bridge],
                       capture_output=True, text=True, timeout=5)
    if r.returncode != 0:
        raise OSError(f"ovs-ofctl dump-ports {bridge}: {r.stderr.strip()}")
    return parse_dump_ports(r.stdout)


def moved_ports(before: Mapping[str, PortCounters], after: Mapping[str, PortCounters]
                ) -> set[str]:
    """The ports whose packet counters moved between two readings."""
    out = set()
    for port, now in after.items():
        then = before.get(port, PortCounters(0, 0, 0, 0))
        if now.rx_packets != then.rx_packets or now.tx_packets != then.tx_packets:
            out.add(port)
    return out


def switch_sample(spec: SwitchPower, name: str, t_s: float, dt_s: float,
                  before: Mapping[str, PortCounters], after: Mapping[str, PortCounters],
                  earlier_active: Sequence[Iterable[str]] = ()) -> PowerSample:
    """One switch's power over the interval between two counter readings; ports that
    moved in the `earlier_active` intervals (the hold, `hold_intervals`) stay awake."""
    rx = sum(max(0, now.rx_bytes - before.get(port, PortCounters(0, 0, 0, 0)).rx_bytes)
             for port, now in after.items())
    active = awake_ports([*earlier_active, moved_ports(before, after)])
    rate = rx / dt_s
    return PowerSample(t_s, dt_s, name, "switch",
                       switch_power_w(spec, active, len(after), rate),
                       active_ports=active, ports=len(after), bytes_per_s=rate)


BusyReader = Callable[[str], tuple[float, float]]  # node -> (clock s, busy server-s)


class LivePowerMeter:
    """A thread that samples every node and switch each POLL_S seconds until stopped."""

    def __init__(self, nodes: Mapping[str, tuple[NodeSpec, int]], bridges: Mapping[str, str],
                 switch_spec: SwitchPower, read_busy: BusyReader, epoch: float,
                 read_ports: Callable[[str], dict[str, PortCounters]] = dump_ports,
                 poll_s: float = POLL_S) -> None:
        self.nodes = nodes  # name -> (spec, servers)
        self.bridges = bridges  # graph switch name -> bridge name
        self.switch_spec = switch_spec
        self.read_busy = read_busy
        self.read_ports = read_ports
        self.epoch = epoch
        self.poll_s = poll_s
        self.samples: list[PowerSample] = []
        self.errors: list[str] = []
        self.last_total_w = float("nan")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy: dict[str, tuple[float, float]] = {}
        self._ports: dict[str, tuple[float, dict[str, PortCounters]]] = {}
        self._hold = hold_intervals(switch_spec, poll_s)
        self._recent: dict[str, deque[set[str]]] = {}

    def _error(self, what: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(what)

    def _read_all(self, first: bool) -> None:
        total = 0.0
        for name, (spec, servers) in self.nodes.items():
            prev = self._busy.get(name)
            try:
                t, busy = self.read_busy(name)
            except (OSError, ValueError, KeyError) as err:
                # a dead or silent worker counts as idle from its last figure on
                self._error(f"{name}: {err.__class__.__name__}: {err}")
                t, busy = time.monotonic(), (prev[1] if prev is not None else 0.0)
            self._busy[name] = (t, busy)
            if first or prev is None or t <= prev[0]:
                continue
            dt = t - prev[0]
            u = min(1.0, max(0.0, (busy - prev[1]) / (dt * servers)))
            w = server_power_w(spec.power, u)
            total += w
            self.samples.append(PowerSample(prev[0] - self.epoch, dt, name, "server", w,
                                            utilization=u))
        for sw, bridge in self.bridges.items():
            t = time.monotonic()
            try:
                ports = self.read_ports(bridge)
            except (OSError, subprocess.SubprocessError) as err:
                self._error(f"{sw}: {err}")
                continue
            prev_p = self._ports.get(sw)
            self._ports[sw] = (t, ports)
            if first or prev_p is None or t <= prev_p[0]:
                continue
            recent = self._recent.setdefault(sw, deque(maxlen=max(1, self._hold)))
            s = switch_sample(self.switch_spec, sw, prev_p[0] - self.epoch, t - prev_p[0],
                              prev_p[1], ports, list(recent) if self._hold else ())
            recent.append(moved_ports(prev_p[1], ports))
            total += s.power_w
            self.samples.append(s)
        if not first:
            self.last_total_w = total

    def _loop(self) -> None:
        self._read_all(first=True)
        while not self._stop.wait(self.poll_s):
            self._read_all(first=False)
        self._read_all(first=False)  # the last, partial interval

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="power", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None


__all__ = ["POLL_S", "LivePowerMeter", "PortCounters", "dump_ports", "parse_dump_ports",
           "moved_ports", "switch_sample"]
