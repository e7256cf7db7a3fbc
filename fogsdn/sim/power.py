"""The simulator's power account: busy time and routed traffic per real second (pure).

A row sink that adds each served request's interval to its node's busy time and
`BYTES_PER_REQUEST` to each switch on its path (the chosen one where a policy picks
paths), binned by real second as the live runner polls (docs/power.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import networkx as nx

from fogsdn.core.scenario import Scenario
from fogsdn.core.workload import client_names
from fogsdn.models.network_power import Hop, PathOption, path_hops
from fogsdn.models.power_model import (
    BYTES_PER_REQUEST,
    PowerSample,
    awake_ports,
    hold_intervals,
    server_count,
    server_power_w,
    switch_ports,
    switch_power_w,
)
from fogsdn.sim.rows import OK, TIMEOUT, Row, node_names

BIN_S = 1.0
_FINISHED_AT = "node finished at "


class PowerAccount:
    """Per real second: each node's busy server-seconds, each switch's bytes and ports."""

    def __init__(self, scenario: Scenario, graph: nx.Graph,
                 chosen: Mapping[tuple[int, int], PathOption] | None = None) -> None:
        self.scenario = scenario
        self.nodes = scenario.nodes
        self.to_s = scenario.time_scale / 1000.0  # real seconds per model ms
        self.busy: list[dict[int, float]] = [{} for _ in self.nodes]
        self.ports = switch_ports(graph)
        self.traffic: dict[str, dict[int, float]] = {s: {} for s in self.ports}
        self.active: dict[str, dict[int, set[str]]] = {s: {} for s in self.ports}
        # (client index, node index) -> [(switch, port in, port out)] along the path
        self.paths: dict[tuple[int, int], tuple[Hop, ...]] = {
            (c, k): path_hops(nx.shortest_path(graph, cname, nname), self.ports)
            for c, cname in enumerate(client_names(scenario))
            for k, nname in enumerate(node_names(scenario))}
        self.end_s = 0.0
        self.chosen = chosen  # a path-choosing policy's path per (client index, seq)

    def _add_busy(self, k: int, start_ms: float, end_ms: float) -> None:
        a, b = start_ms * self.to_s, end_ms * self.to_s
        bins = self.busy[k]
        i = int(a // BIN_S)
        while a < b:
            edge = (i + 1) * BIN_S
            top = b if b < edge else edge
            bins[i] = bins.get(i, 0.0) + (top - a)
            a = top
            i += 1

    def __call__(self, rows: list[Row]) -> None:
        to_s = self.to_s
        for r in rows:
            outcome, c, k, t_send = r[1], r[3], r[7], r[6]
            if outcome == OK:
                self._add_busy(k, r[0] - r[8], r[0])
                end = r[0]
            elif outcome == TIMEOUT and len(r) > 10 and str(r[10]).startswith(_FINISHED_AT):
                done = float(str(r[10])[len(_FINISHED_AT):])
                self._add_busy(k, done - r[8], done)
                end = done
            else:
                end = r[0]
            if end * to_s > self.end_s:
                self.end_s = end * to_s
            # half the packets when it is sent (handshake, request), half when answered
            for t in (t_send, r[0]):
                b = int(t * to_s // BIN_S)
                hops = self.chosen[c, r[2]].hops if self.chosen is not None else self.paths[c, k]
                for sw, p_in, p_out in hops:
                    tr = self.traffic[sw]
                    tr[b] = tr.get(b, 0.0) + BYTES_PER_REQUEST / 2.0
                    self.active[sw].setdefault(b, set()).update((p_in, p_out))

    def samples(self) -> list[PowerSample]:
        """One sample per second per node and per switch, the last second partial."""
        n_bins = max(1, math.ceil(self.end_s / BIN_S))
        hold = hold_intervals(self.scenario.switch_power, BIN_S)
        out: list[PowerSample] = []
        for i in range(n_bins):
            t0 = i * BIN_S
            dt = min(BIN_S, self.end_s - t0) if self.end_s > t0 else BIN_S
            for k, node in enumerate(self.nodes):
                u = min(1.0, self.busy[k].get(i, 0.0) / (dt * server_count(node)))
                out.append(PowerSample(t0, dt, node.name, "server",
                                       server_power_w(node.power, u), utilization=u))
            for sw, ports in self.ports.items():
                rate = self.traffic[sw].get(i, 0.0) / dt
                active = awake_ports([self.active[sw].get(j, ()) for j in
                                      range(max(0, i - hold), i + 1)])
                out.append(PowerSample(
                    t0, dt, sw, "switch",
                    switch_power_w(self.scenario.switch_power, active, ports, rate),
                    active_ports=active, ports=ports, bytes_per_s=rate))
        return out


def tee(*sinks: Callable[[list[Row]], None]) -> Callable[[list[Row]], None]:
    """One row sink feeding several."""
    def both(rows: list[Row]) -> None:
        for s in sinks:
            s(rows)
    return both


__all__ = ["BIN_S", "PowerAccount", "tee"]
