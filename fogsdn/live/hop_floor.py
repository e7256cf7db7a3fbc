"""A live run's cost per hop: measured before its network is built and again under the
run's own load, deducted from its delayed links (scenario `topology.hop_cost`), and
reported in summary.json's `links.hop_cost`.

The measurement is `fogsdn.netem.hop_probe`, the arithmetic `fogsdn.netem.hop_cost`; this
module puts them in the run: its record (so a killed run still removes the probe's chain),
its notes and its printout. A probe that fails leaves the links as configured and says so:
a fidelity note, not a crash.
"""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import networkx as nx

from fogsdn.live.cleanup import RunRecord
from fogsdn.netem.hop_cost import Deduction, HopCost, HopCostError, deduct, floor_warning
from fogsdn.netem.hop_probe import HopChain, ProbeResources
from fogsdn.netem.mininet_net import Network, configured_delays_ms

PROBE_LABEL = "hop probe"
DURING_RUN_PERIOD_S = 10.0  # real seconds between measurements under the run's load
DURING_RUN_PINGS = 90  # per hop count and measurement: 270 pings, about 3 s of probing
# iputils ping busy-waits between pings sent less than 10 ms apart: measured here, 30 pings
# at 9 ms took 0.26 CPU-s (a core for their whole span), at 10 ms 0.005. At the start
# the machine is quiet and the faster probe costs nothing; under the run's load it
# would take a core from the run it measures
DURING_RUN_INTERVAL_S = 0.010


def _recorder(rec: RunRecord) -> Callable[[ProbeResources], None]:
    """Mirror the probe's chain into the run's record as it grows and goes (whatever
    else the run writes there meanwhile stays)."""
    mine = ProbeResources()

    def register(res: ProbeResources) -> None:
        rec.bridges = [b for b in rec.bridges if b not in mine.bridges] + res.bridges
        rec.interfaces = [i for i in rec.interfaces if i not in mine.interfaces] + res.interfaces
        rec.pids = {k: v for k, v in rec.pids.items() if not k.startswith(PROBE_LABEL)}
        rec.pids.update({f"{PROBE_LABEL}: {k}": v for k, v in res.pids.items()})
        mine.bridges, mine.interfaces = list(res.bridges), list(res.interfaces)
        rec.save()

    return register


def probe_cost(cpu_s: float, bridge_packets: int, wall_s: float) -> dict[str, float]:
    """What measuring under the run's load cost the run: the probes' CPU as a share of
    the machine's, and the packets per second they put through bridges (the chain's own:
    the same Open vSwitch forwards the run's)."""
    cores = os.cpu_count() or 1
    return {"cpu_s": round(cpu_s, 3), "wall_s": round(wall_s, 1),
            "cpu_share": round(cpu_s / (wall_s * cores), 5) if wall_s > 0 else 0.0,
            "bridge_packets_per_s": round(bridge_packets / wall_s, 1) if wall_s > 0 else 0.0}


class HopFloor:
    """What the run does about its cost per hop, and what it says of it: `deduction`
    (None: links as configured), `report` (summary.json) and `notes`."""

    def __init__(self, graph: nx.Graph, time_scale: float, mode: str,
                 tabled: Collection[str] = (), every_s: float = DURING_RUN_PERIOD_S) -> None:
        """`tabled`: links whose elements carry per-peer delay tables, which take what
        the element's own delay cannot (`Network.update_peers`): not below the floor.
        `every_s`: real seconds between measurements under the run's load (0: none, the
        start's measurement holds for the whole run)."""
        self.time_scale, self.mode, self.every_s = time_scale, mode, every_s
        self.tabled = frozenset(tabled)
        self.configured = configured_delays_ms(graph, time_scale)
        self.deduction: Deduction | None = None
        self.report: dict[str, Any] = {}
        self.notes: list[str] = []
        self._chain: HopChain | None = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._during: list[float] = []

    @property
    def wanted(self) -> bool:
        """Some link asks for a delay: only then does the cost per hop matter."""
        return any(ms > 0 for ms in self.configured.values())

    def measure_at_start(self, mechanism: str, prefix: str, state_dir: Path,
                         rec: RunRecord) -> None:
        """Build the probe chain (kept for `follow`) and measure on the quiet machine."""
        try:
            self._chain = HopChain(prefix, mechanism, state_dir, _recorder(rec)).open()
            cost = self._chain.measure()
        except (HopCostError, RuntimeError, OSError) as err:
            self.close()
            self.report = {"mode": self.mode, "error": str(err)}
            self.notes = [f"cost per hop not measured ({err}); the links keep their "
                          "configured delays"]
            return
        self._apply(cost.per_hop_ms)
        self.report.update(cost.to_dict())
        self.report["at_start_real_ms"] = round(cost.per_hop_ms, 5)

    def _apply(self, per_hop_ms: float) -> Deduction:
        # `keep` deducts nothing, from the tables neither: their links stay named short
        full = deduct(self.configured, per_hop_ms,
                      self.tabled if self.mode == "deduct" else ())
        self.report.update({"mode": self.mode, **full.to_dict(self.time_scale)})
        self.report["per_hop_real_ms"] = round(per_hop_ms, 5)
        if self.mode == "keep":
            self.report["applied_model_ms"] = {
                k: round(v / self.time_scale, 6) for k, v in sorted(self.configured.items())}
        else:
            self.deduction = full
        warning = floor_warning(full, self.time_scale)
        self.notes = [warning] if warning else []
        return full

    def follow(self, network: Network, load_started: Callable[[], bool],
               stop: threading.Event) -> None:
        """Once the load runs, measure again every `every_s` and deduct the median of
        those measurements (the run's own load makes each hop dearer than at start)."""
        if self._chain is None:
            return
        self.report["during_run_every_s"] = max(0.0, self.every_s)
        if self.every_s <= 0:
            return

        def loop() -> None:
            while not (self._done.is_set() or stop.is_set()) and not load_started():
                self._done.wait(0.2)
            t0 = time.monotonic()
            first = self._chain
            if first is None:
                return
            cpu0, packets0 = first.cpu_s, first.bridge_packets
            while not self._done.wait(self.every_s) and not stop.is_set():
                chain = self._chain
                if chain is None:
                    return
                try:
                    cost: HopCost = chain.measure(DURING_RUN_PINGS, DURING_RUN_INTERVAL_S)
                except (HopCostError, RuntimeError, OSError, ValueError):
                    continue  # the run is ending, or a probe round lost every reply
                self._during.append(cost.per_hop_ms)
                per_hop = statistics.median(self._during)
                full = self._apply(per_hop)
                self.report["during_run_real_ms"] = [round(c, 5) for c in self._during]
                self.report["probe_cost"] = probe_cost(
                    chain.cpu_s - cpu0, chain.bridge_packets - packets0,
                    time.monotonic() - t0)
                if self.mode == "deduct" and network.shaper is not None:
                    network.set_per_hop_ms(full.per_hop_ms)

        self._thread = threading.Thread(target=loop, name="hop-floor", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop measuring and remove the chain (teardown; safe twice)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            self._thread = None
        if self._chain is not None:
            self._chain.close()
            self._chain = None

    def line(self) -> str:
        """The run's line about it (once measured: `report` is not empty)."""
        r = self.report
        if "error" in r:
            return self.notes[0]
        verb = "deducted from" if r["mode"] == "deduct" else "not deducted from (hop_cost: keep)"
        during = r.get("during_run_real_ms")
        tail = (f"; under the run's load {statistics.median(during):.3f} real ms "
                f"({len(during)} measurement(s))" if during else "")
        return (f"links: the emulator's cost per hop {r['at_start_real_ms']:.3f} real ms at "
                f"start{tail}, {verb} {len(r['applied_model_ms'])} shaped link(s) "
                f"(time scale {self.time_scale:g}); {len(r['below_floor_model_ms'])} "
                "below it")


def load_started_at(epoch: Callable[[], float]) -> Callable[[], bool]:
    """The supervisor's epoch is NaN until the load starts."""
    return lambda: math.isfinite(epoch()) and time.monotonic() >= epoch()
