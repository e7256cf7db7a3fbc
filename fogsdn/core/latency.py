"""What the network adds to a request's response time, per (client, serving node) (pure).

Two round trips per request (connect, then request and reply), each link adding delay,
jitter and transmission time; a lost frame costs a TCP retransmission timeout, an
approximation (docs/topologies.md). Times are model ms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from fogsdn.core.routing import path_links, shortest_path, shortest_paths_from
from fogsdn.core.scenario import scenario_graph, scenario_hosts

if TYPE_CHECKING:
    from fogsdn.core.scenario import Scenario

ROUND_TRIPS = 2  # TCP connect, then request and reply
# approximate Ethernet frame sizes of the four traversals: SYN, SYN-ACK, request, reply
FRAME_BYTES: tuple[int, int, int, int] = (74, 74, 200, 300)
SYN_RTO_REAL_MS = 1000.0  # Linux TCP_TIMEOUT_INIT
DATA_RTO_MIN_REAL_MS = 200.0  # Linux TCP_RTO_MIN
CONGESTED_UTILISATION = 0.1  # above this, queueing at a link is no longer negligible
MAX_RETRIES = 6


@dataclass(frozen=True)
class PathTiming:
    """One (client, node) path's links: delay, jitter, loss, rate (model units)."""

    delay_ms: tuple[float, ...]
    jitter_ms: tuple[float, ...]
    loss: tuple[float, ...]
    bw_mbps: tuple[float | None, ...]

    @classmethod
    def of(cls, g: nx.Graph, path: Sequence[str]) -> PathTiming:
        links = path_links(g, path)
        return cls(tuple(float(d["delay_ms"]) for d in links),
                   tuple(float(d["jitter_ms"]) for d in links),
                   tuple(float(d["loss"]) for d in links),
                   tuple(d["bw_mbps"] for d in links))

    def one_way_ms(self) -> float:
        return sum(self.delay_ms)

    def transmission_ms(self, frame_bytes: int) -> float:
        """Serialisation of one frame over every rated link (Mbit/s = 1000 bit per ms)."""
        return sum(frame_bytes * 8 / (bw * 1000.0) for bw in self.bw_mbps if bw is not None)

    def fixed_ms(self) -> float:
        """The network's share of a request without jitter or loss: 2 round trips plus
        the four frames' transmission."""
        return (2 * ROUND_TRIPS * self.one_way_ms()
                + sum(self.transmission_ms(b) for b in FRAME_BYTES))

    def traversal_loss(self) -> float:
        return 1.0 - math.prod(1.0 - p for p in self.loss)

    @property
    def random(self) -> bool:
        return any(j > 0 for j in self.jitter_ms) or any(p > 0 for p in self.loss)

    def mean_jitter_shift_ms(self) -> float:
        """Mean extra delay from clamping delay +- jitter at 0 (zero when jitter <= delay):
        E[max(0, U(d-j, d+j))] - d = (j - d)^2 / (4 j)."""
        pairs = zip(self.delay_ms, self.jitter_ms, strict=True)
        return sum(((j - d) ** 2 / (4 * j) for d, j in pairs if j > d), 0.0)

    def sample_ms(self, rng: np.random.Generator, time_scale: float) -> float:
        """One request's network time: four traversals with jitter draws, and for each
        lost frame a retransmission timeout before it is sent again."""
        total = 0.0
        p_lost = self.traversal_loss()
        rtt = 2 * self.one_way_ms()
        for i, frame in enumerate(FRAME_BYTES):
            rto = (SYN_RTO_REAL_MS / time_scale if i < 2
                   else DATA_RTO_MIN_REAL_MS / time_scale + rtt)
            tries = 0
            while p_lost > 0 and tries < MAX_RETRIES and rng.random() < p_lost:
                total += rto
                rto *= 2
                tries += 1
            total += self.transmission_ms(frame)
            for d, j in zip(self.delay_ms, self.jitter_ms, strict=True):
                total += max(0.0, d + rng.uniform(-j, j)) if j > 0 else d
        return total


@dataclass(frozen=True)
class RequestNetwork:
    """Every (client, node) path of a scenario's topology, as the routing chooses it."""

    paths: Mapping[tuple[str, str], PathTiming]

    @classmethod
    def of(cls, g: nx.Graph, clients: Sequence[str], nodes: Sequence[str],
           pinned: Mapping[tuple[str, str], Sequence[str]] | None = None) -> RequestNetwork:
        paths = {}
        for c in clients:
            tree = shortest_paths_from(g, c)  # one Dijkstra per client, not per pair
            for n in nodes:
                via = (pinned or {}).get((c, n))
                if via is not None:
                    path = [c, *via, n]
                elif n in tree:
                    path = tree[n]
                else:
                    path = shortest_path(g, c, n)  # raises: no path
                paths[(c, n)] = PathTiming.of(g, path)
        return cls(paths)

    @property
    def zero(self) -> bool:
        return all(p.fixed_ms() == 0 and not p.random for p in self.paths.values())

    @property
    def random(self) -> bool:
        return any(p.random for p in self.paths.values())

    def fixed_ms(self, client: str, node: str) -> float:
        return self.paths[(client, node)].fixed_ms()

    def mean_ms(self, client: str, node: str) -> float:
        """Mean network time without loss: the fixed part plus jitter's clamping shift."""
        p = self.paths[(client, node)]
        return p.fixed_ms() + 2 * ROUND_TRIPS * p.mean_jitter_shift_ms()


def node_net_ms(scenario: Scenario, pinned: Mapping[tuple[str, str], Sequence[str]]
                | None = None) -> dict[str, float]:
    """Each node's mean network time per request, averaged over the clients' paths
    (`NodeView.net_ms`: what a policy adds to a node's expected sojourn)."""
    network = request_network(scenario, pinned)
    clients = sorted({c for c, _ in network.paths})
    return {n.name: sum(network.mean_ms(c, n.name) for c in clients) / max(1, len(clients))
            for n in scenario.nodes}


def busiest_link(g: nx.Graph, network: RequestNetwork, requests_per_ms: float
                 ) -> tuple[str, float] | None:
    """The rated link with the highest utilisation bound (every request's four frames
    over it), or None when no link has a rate."""
    bits = 8 * sum(FRAME_BYTES)
    rated = [(str(d["id"]), requests_per_ms * bits / (float(d["bw_mbps"]) * 1000.0))
             for _, _, d in g.edges(data=True) if d["bw_mbps"] is not None]
    return max(rated, key=lambda r: r[1], default=None)


def request_network(scenario: Scenario, pinned: Mapping[tuple[str, str], Sequence[str]]
                    | None = None) -> RequestNetwork:
    """Each (client, node) path's timing on the scenario's topology (model ms)."""
    g = scenario_graph(scenario)
    clients = [h.name for h in scenario_hosts(scenario) if h.role == "client"]
    return RequestNetwork.of(g, clients, [n.name for n in scenario.nodes], pinned)


# a per-request decision holds the connection's SYN while it runs, adding its time to every
# response: this share of the fastest node's mean service time is what it may add
DECISION_BUDGET_SHARE = 0.02


def decision_budget_real_ms(scenario: Scenario) -> float:
    """Real ms a decision (packet-in to packet-out) may take at the scenario's time scale:
    DECISION_BUDGET_SHARE of the fastest node's mean service time, so that it biases a
    response time by no more than that share."""
    fastest = max(n.mu for n in scenario.nodes)
    return scenario.timebase.real_ms(DECISION_BUDGET_SHARE * scenario.workload.size.mean / fastest)
