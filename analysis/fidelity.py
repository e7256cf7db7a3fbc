"""How faithfully the live nodes behaved, measured on the run's own sample path (pure).

Comparing emulated means with the exact model needs long runs (the LP queue's
variance is large). Replaying the very requests a node received, at the instants it
received them, with their nominal service times, through an ideal FIFO node gives the
sojourn each request *should* have had on that path: the per-request difference
isolates what the emulation added (timer overshoot, scheduling jitter), with a far
smaller variance than the gap to the model.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from analysis.metrics import MeanCI, batch_means_ci
from fogsdn.scenario import NodeSpec, Servers
from fogsdn.trace import Outcome, TraceRow


@dataclass(frozen=True)
class NodeFidelity:
    node: str
    replayed: int  # answered requests replayed
    ideal_W: float  # mean ideal sojourn on this path (model ms)
    measured_W: float
    bias: MeanCI  # mean of measured - ideal, with a batch-means interval
    blocked_disagree: int  # requests blocked live but admitted by the replay, or vice versa

    @property
    def relative_bias(self) -> float:
        return self.bias.mean / self.ideal_W if self.ideal_W > 0 else math.nan


def _arrival(r: TraceRow) -> float:
    """When the request reached the node: its reply left at t_done (the return trip is
    tens of microseconds), so the node saw it node_ms earlier; a blocked one at once."""
    return r.t_done - (r.node_ms if r.outcome is Outcome.OK else 0.0)


def replay_node(spec: NodeSpec, rows: Iterable[TraceRow]) -> NodeFidelity:
    """Ideal FIFO (or multi-server) node with capacity C on the requests it received."""
    got = sorted((r for r in rows if r.node == spec.name and r.outcome in
                  (Outcome.OK, Outcome.BLOCKED) and not math.isnan(r.nominal_ms)),
                 key=_arrival)
    ends: list[float] = []  # scheduled ends of what the ideal node holds
    last_end = -math.inf
    diffs: list[float] = []
    ideal: list[float] = []
    measured: list[float] = []
    disagree = 0
    for r in got:
        t = _arrival(r)
        while ends and ends[0] <= t:
            heapq.heappop(ends)
        if len(ends) >= spec.capacity:
            disagree += r.outcome is Outcome.OK
            continue
        start = max(t, last_end) if spec.servers is Servers.SINGLE else t
        end = start + r.nominal_ms
        last_end = max(last_end, end)
        heapq.heappush(ends, end)
        if r.outcome is Outcome.BLOCKED:
            disagree += 1
            continue
        ideal.append(end - t)
        measured.append(r.node_ms)
        diffs.append(r.node_ms - (end - t))
    return NodeFidelity(
        spec.name, len(diffs),
        float(np.mean(ideal)) if ideal else math.nan,
        float(np.mean(measured)) if measured else math.nan,
        batch_means_ci(diffs), disagree)


def replay(nodes: Iterable[NodeSpec], rows: list[TraceRow]) -> Mapping[str, NodeFidelity]:
    return {n.name: replay_node(n, rows) for n in nodes}
