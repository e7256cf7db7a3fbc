"""Paths over a topology graph: shortest by delay (ties to fewer hops), around failed
links (pure); the one routing of the controller, the simulator and the model.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import networkx as nx

HOP_COST_MS = 1e-6  # breaks delay ties towards fewer hops without outweighing any delay


def _cost(u: str, v: str, d: Mapping[str, Any]) -> float:
    return float(d["delay_ms"]) + HOP_COST_MS


def usable(g: nx.Graph, failed: Collection[str] = ()) -> nx.Graph:
    """The graph without the failed links (by edge id)."""
    if not failed:
        return g
    keep = [(u, v) for u, v, d in g.edges(data=True) if d["id"] not in failed]
    return g.edge_subgraph(keep).copy() if keep else nx.Graph()


def shortest_path(g: nx.Graph, src: str, dst: str, failed: Collection[str] = ()) -> list[str]:
    """Nodes from src to dst, shortest by delay; raises nx.NetworkXNoPath if cut off."""
    return list(nx.dijkstra_path(usable(g, failed), src, dst, weight=_cost))


def shortest_paths_from(g: nx.Graph, src: str) -> dict[str, list[str]]:
    """Every reachable node's path from src, shortest by delay: one Dijkstra for all,
    the same paths `shortest_path` gives one at a time."""
    return {k: list(v) for k, v in nx.single_source_dijkstra_path(g, src, weight=_cost).items()}


def k_shortest_paths(g: nx.Graph, src: str, dst: str, k: int) -> list[list[str]]:
    """Up to k loop-free paths from src to dst, shortest by delay first (ties to fewer
    hops): the candidates a path-choosing policy picks from (networkx's Yen)."""
    return [list(p) for p in islice(nx.shortest_simple_paths(g, src, dst, weight=_cost), k)]


def path_links(g: nx.Graph, path: Sequence[str]) -> list[dict[str, Any]]:
    return [g.edges[a, b] for a, b in zip(path, path[1:], strict=False)]


@dataclass(frozen=True)
class NextHops:
    """Destination-based forwarding: for each (switch, host), the port towards the host,
    and where one exists a loop-free backup port (used the moment the first one dies)."""

    port: Mapping[tuple[str, str], int]
    backup: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def towards(self, switch: str, host: str) -> int | None:
        return self.port.get((switch, host))

    def backup_towards(self, switch: str, host: str) -> int | None:
        return self.backup.get((switch, host))


def next_hops(g: nx.Graph, failed: Collection[str] = ()) -> NextHops:
    """Each switch's port towards each host along that host's shortest-path tree.

    One tree per destination, so hop-by-hop forwarding follows exactly the path
    `shortest_path` gives (sub-paths of shortest paths are shortest)."""
    live = usable(g, failed)
    switches = [n for n, d in g.nodes(data=True) if d["kind"] == "switch"]
    sw_graph = live.subgraph([s for s in switches if s in live])
    dist = dict(nx.all_pairs_dijkstra_path_length(sw_graph, weight=_cost))
    out: dict[tuple[str, str], int] = {}
    backup: dict[tuple[str, str], int] = {}
    for h, d in g.nodes(data=True):
        if d["kind"] != "host" or not live.has_edge(h, d["switch"]):
            continue
        home = d["switch"]
        out[(home, h)] = int(d["port"])
        if home not in sw_graph:
            continue
        paths = nx.single_source_dijkstra_path(sw_graph, home, weight=_cost)
        for s, p in paths.items():
            if s == home:
                continue
            primary = p[-2]
            out[(s, h)] = int(g.edges[s, primary]["ports"][s])
            alt = _loop_free_alternate(sw_graph, dist, s, home, primary)
            if alt is not None:
                backup[(s, h)] = int(g.edges[s, alt]["ports"][s])
    return NextHops(out, backup)


def _loop_free_alternate(sw: nx.Graph, dist: Mapping[str, Mapping[str, float]], s: str,
                         dest: str, primary: str) -> str | None:
    """A neighbour of s other than the primary next hop whose own shortest path to dest
    does not come back through s (RFC 5286: d(n, dest) < d(n, s) + d(s, dest)), the
    cheapest such; None when s has none."""
    best: tuple[float, str] | None = None
    for n in sw.neighbors(s):
        if n == primary or dest not in dist.get(n, {}):
            continue
        if dist[n][dest] < dist[n][s] + dist[s][dest] - 1e-12:
            cost = _cost(s, n, sw.edges[s, n]) + dist[n][dest]
            if best is None or cost < best[0]:
                best = (cost, n)
    return None if best is None else best[1]
