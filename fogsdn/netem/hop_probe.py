"""Measure the emulator's cost per hop on this machine, now: a private chain of Open
vSwitch userspace bridges joined by link elements at 0 ms, pinged over 0, 1 and 2 hops.

The chain is built as a run's network is (the same bridges, the same element and
mechanism), under the run's own name prefix, and removed after; its endpoints are processes
in network namespaces of their own, so the probes never leave the chain. What it creates
is announced to `register` before it exists, so that a run killed meanwhile still removes
it (fogsdn.live.cleanup). The fit is `fogsdn.netem.hop_cost.fit_hop_cost`.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fogsdn.core.processes import proc_start_time
from fogsdn.netem.hop_cost import HopCost, fit_hop_cost, ping_rtts_ms
from fogsdn.netem.link_params import LinkParams
from fogsdn.netem.linkem import LinkShaper, make_shaper

HOPS = (0, 1, 2)  # endpoint A on bridge 0; one endpoint on each bridge 0..2
SUBNET = "10.254.77."  # inside the probe namespaces only
ROUNDS = 6


@dataclass
class ProbeResources:
    """What the chain creates, for the run's record."""

    bridges: list[str] = field(default_factory=list)
    interfaces: list[str] = field(default_factory=list)  # root-namespace ends
    pids: dict[str, tuple[int, int]] = field(default_factory=dict)


def _run(argv: list[str]) -> None:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()}")


def _in(pid: int, argv: list[str]) -> list[str]:
    return ["nsenter", "-t", str(pid), "-n", *argv]


@dataclass
class PingRound:
    """One ping process's round trips (ms) and its own CPU time (s), user and system,
    as the kernel accounted it at its exit (`os.wait4`)."""

    rtts_ms: list[float]
    cpu_s: float


def _ping(pid: int, ip: str, count: int, interval_s: float) -> PingRound:
    deadline_s = max(1, math.ceil(count * interval_s) + 2)  # ping's own: it always ends
    proc = subprocess.Popen(_in(pid, ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}",
                                      "-W", "1", "-w", str(deadline_s), ip]),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return PingRound(ping_rtts_ms(out), usage.ru_utime + usage.ru_stime)


class HopChain:
    """The probe chain, built once (`open`), measured as often as asked (`measure`: at
    the start, and again under the run's own load), removed by `close`."""

    def __init__(self, prefix: str, mechanism: str, state_dir: Path,
                 register: Callable[[ProbeResources], None]) -> None:
        self.prefix, self.mechanism, self.state_dir = prefix, mechanism, state_dir
        self.register = register
        self.res = ProbeResources()
        self.bridges = [f"{prefix}hb{i}" for i in range(len(HOPS))]
        self.holders: list[subprocess.Popen[bytes]] = []
        self.cpu_s = 0.0  # the probes' own CPU time so far (`_count`)
        self.bridge_packets = 0  # packets the chain's bridges forwarded for the probes
        self.shaper: LinkShaper | None = None

    def open(self) -> HopChain:
        res, bridges = self.res, self.bridges
        res.bridges = list(bridges)
        # root-namespace veth ends: host k's bridge side, and both sides of each element
        res.interfaces = ([f"{self.prefix}hh{k}" for k in range(len(HOPS) + 1)]
                          + [f"{self.prefix}hx{i}{s}" for i in range(1, len(HOPS))
                             for s in "abcd"])
        self.register(res)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        res, bridges, prefix = self.res, self.bridges, self.prefix
        for br in bridges:
            _run(["ovs-vsctl", "--timeout=10", "add-br", br, "--", "set", "bridge", br,
                  "datapath_type=netdev", "fail-mode=secure"])
            _run(["ovs-ofctl", "add-flow", br, "actions=NORMAL"])
            _run(["ip", "link", "set", br, "up"])
        # endpoints: A (k = 0) and one host per bridge (k = 1..3 on bridges 0..2)
        for k in range(len(HOPS) + 1):
            holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"],
                                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)
            self.holders.append(holder)
            start = proc_start_time(holder.pid)
            if start is not None:
                res.pids[f"host {k}"] = (holder.pid, start)
                self.register(res)
        for k, holder in enumerate(self.holders):
            root_end, inner = f"{prefix}hh{k}", f"{prefix}hi{k}"
            _wait_netns(holder)
            _run(["ip", "link", "add", root_end, "type", "veth", "peer", "name", inner])
            _run(["ip", "link", "set", inner, "netns", str(holder.pid)])
            _run(_in(holder.pid, ["ip", "addr", "add", f"{SUBNET}{k + 1}/24", "dev", inner]))
            for dev in (inner, "lo"):
                _run(_in(holder.pid, ["ip", "link", "set", dev, "up"]))
            subprocess.run(_in(holder.pid, ["ethtool", "-K", inner, "tx", "off"]),
                           capture_output=True)
            _run(["ip", "link", "set", root_end, "up"])
            _run(["ovs-vsctl", "--timeout=10", "add-port", bridges[max(0, k - 1)], root_end])
        self.shaper = make_shaper(self.mechanism, self.state_dir / "hop-probe", seed=0)
        for i in range(1, len(HOPS)):
            a, b, c, d = (f"{prefix}hx{i}{s}" for s in "abcd")
            _run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
            _run(["ip", "link", "add", c, "type", "veth", "peer", "name", d])
            for dev in (a, d):
                _run(["ip", "link", "set", dev, "up"])
            _run(["ovs-vsctl", "--timeout=10", "add-port", bridges[i - 1], a])
            _run(["ovs-vsctl", "--timeout=10", "add-port", bridges[i], d])
            self.shaper.attach(f"hop{i}", b, c, LinkParams())
            res.pids.update({f"relay {k}": v for k, v in self.shaper.created().pids.items()})
            self.register(res)
        for hops in HOPS:  # addresses learnt before any timing
            self._count(hops, _ping(self.holders[0].pid, f"{SUBNET}{hops + 2}", 3, 0.005))

    def measure(self, pings: int = 180, interval_s: float = 0.005) -> HopCost:
        """Ping each endpoint from A, `pings` each, in rounds (so that a busy spell
        falls on every chain), and fit the cost per hop."""
        rtts: dict[int, list[float]] = {h: [] for h in HOPS}
        per_round = max(1, pings // ROUNDS)
        for _ in range(ROUNDS):
            for hops in HOPS:
                done = _ping(self.holders[0].pid, f"{SUBNET}{hops + 2}", per_round, interval_s)
                rtts[hops] += done.rtts_ms
                self._count(hops, done)
        return fit_hop_cost(rtts)

    def _count(self, hops: int, done: PingRound) -> None:
        """What probing cost: the ping processes' CPU, and the packets the chain's
        bridges forwarded (an echo and its reply, through hops + 1 bridges each)."""
        self.cpu_s += done.cpu_s
        self.bridge_packets += 2 * (hops + 1) * len(done.rtts_ms)

    def close(self) -> None:
        if self.shaper is not None:
            self.shaper.close()
            self.shaper = None
        for br in self.bridges:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br],
                           capture_output=True)
        for intf in self.res.interfaces:
            if Path(f"/sys/class/net/{intf}").exists():
                subprocess.run(["ip", "link", "del", intf], capture_output=True)
        for holder in self.holders:
            holder.kill()
            holder.wait()
        self.holders.clear()
        self.res = ProbeResources()
        self.register(self.res)


def measure_hop_cost(prefix: str, mechanism: str, state_dir: Path,
                     register: Callable[[ProbeResources], None],
                     pings: int = 180, interval_s: float = 0.005) -> HopCost:
    """Build the chain, measure once, remove it."""
    chain = HopChain(prefix, mechanism, state_dir, register).open()
    try:
        return chain.measure(pings, interval_s)
    finally:
        chain.close()


def _wait_netns(holder: subprocess.Popen[bytes], timeout_s: float = 5.0) -> None:
    """unshare has made the namespace once the holder runs `sleep` (its own exec)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if holder.poll() is not None:
            raise RuntimeError("hop probe: unshare --net exited")
        try:
            if os.readlink(f"/proc/{holder.pid}/ns/net") != os.readlink("/proc/self/ns/net") \
                    and Path(f"/proc/{holder.pid}/comm").read_text().strip() == "sleep":
                return
        except OSError:
            pass
        time.sleep(0.005)
    raise RuntimeError("hop probe: no network namespace after 5 s")
