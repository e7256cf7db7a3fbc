"""The simulator's power account: busy time and routed traffic per real second (pure).

A row sink that adds each served request's interval to its node's busy time and
`BYTES_PER_REQUEST` to each switch on its path (the chosen one where a policy picks
paths), binned by real second as the live runner polls (docs/power.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import networkx as nx
import numpy as np
import numpy.typing as npt

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
from fogsdn.sim.rows import OK, TIMEOUT, Row, node_names, row_columns

BIN_S = 1.0
_FINISHED_AT = "node finished at "
Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


class PowerAccount:
    """Per real second: each node's busy server-seconds, each switch's bytes and ports."""

    def __init__(self, scenario: Scenario, graph: nx.Graph,
                 chosen: Mapping[tuple[int, int], PathOption] | None = None,
                 bytes_per_request: float = BYTES_PER_REQUEST) -> None:
        self.scenario = scenario
        # what a request puts through each switch (another size: seed 002a's traffic scan)
        self.half = bytes_per_request / 2.0
        self.nodes = scenario.nodes
        self.to_s = scenario.timebase.real_s_per_model_ms
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
        if self.chosen is not None or not self.half.is_integer():  # a path per request
            self._one_by_one(rows)
        elif rows:
            self._batch(rows)

    def _batch(self, rows: list[Row]) -> None:
        """`_one_by_one`'s sums, counted as columns: each bin's busy time still added one
        piece at a time in row order (np.cumsum), the bytes whole multiples of `half`
        (exact in any order)."""
        to_s = self.to_s
        cols = row_columns(rows)
        t_done, t_send, svc = cols[0], cols[6], cols[8]
        outcome, c, k = cols[[1, 3, 7]].view(np.int64)
        # served here: answered, or timed out once the node finished (its end in the note)
        done = np.where(outcome == OK, t_done, np.nan)
        end = t_done.copy()
        for i in np.flatnonzero(outcome == TIMEOUT).tolist():
            r = rows[i]
            if len(r) > 10 and str(r[10]).startswith(_FINISHED_AT):
                done[i] = end[i] = float(str(r[10])[len(_FINISHED_AT):])
        top = float((end * to_s).max())
        if top > self.end_s:
            self.end_s = top
        self._add_busy_many(k, (done - svc) * to_s, done * to_s)
        # traffic: half the packets when sent, half when answered, per path and second
        nn = len(self.nodes)
        path = np.concatenate((c, c)) * nn + np.concatenate((k, k))
        second = np.floor_divide(np.concatenate((t_send, t_done)) * to_s, BIN_S).astype(np.int64)
        keys, counts = np.unique(path << 32 | second, return_counts=True)
        for key, n in zip(keys.tolist(), counts.tolist(), strict=True):
            b = key & 0xFFFFFFFF
            for sw, p_in, p_out in self.paths[divmod(key >> 32, nn)]:
                tr = self.traffic[sw]
                tr[b] = tr.get(b, 0.0) + n * self.half
                self.active[sw].setdefault(b, set()).update((p_in, p_out))

    def _add_busy_many(self, k: Ints, a: Floats, b: Floats) -> None:
        """`_add_busy` for each row with a < b (NaN: none), in row order."""
        served = np.flatnonzero(a < b)
        a, b, k = a[served], b[served], k[served]
        first = np.floor_divide(a, BIN_S)
        within = b <= (first + 1) * BIN_S  # in one bin: most rows
        order, node, bin_ = [served[within]], [k[within]], [first[within]]
        piece = [(b - a)[within]]
        for j in np.flatnonzero(~within).tolist():  # across bins: each bin's share
            lo, hi, i = float(a[j]), float(b[j]), int(first[j])
            while lo < hi:
                edge = (i + 1) * BIN_S
                cut = hi if hi < edge else edge
                order.append(served[j:j + 1])
                node.append(k[j:j + 1])
                bin_.append(np.array([i], dtype=np.float64))
                piece.append(np.array([cut - lo]))
                lo = cut
                i += 1
        o, kk, bb, pp = (np.concatenate(x) for x in (order, node, bin_, piece))
        sort = np.lexsort((o, bb, kk))
        kk, bb, pp = kk[sort], bb[sort].astype(np.int64), pp[sort]
        starts = np.flatnonzero(np.r_[True, (kk[1:] != kk[:-1]) | (bb[1:] != bb[:-1])])
        ends = [*starts[1:].tolist(), len(pp)]
        for s_, e_, node_, i_ in zip(starts.tolist(), ends, kk[starts].tolist(),
                                     bb[starts].tolist(), strict=True):
            bins = self.busy[node_]
            run = np.cumsum(np.r_[bins.get(i_, 0.0), pp[s_:e_]])  # one at a time, as `+=`
            bins[i_] = float(run[-1])

    def _one_by_one(self, rows: list[Row]) -> None:
        """The account a row at a time (where each request has its own path)."""
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
                    tr[b] = tr.get(b, 0.0) + self.half
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
