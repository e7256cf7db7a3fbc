"""Where each part of one emulation runs when it spans several servers: the servers file,
and a placement of the network's hosts and switches that keeps the links crossing
servers few and quiet (docs/scale-out.md). Pure: no ssh, no Mininet, no sockets.

A link that crosses servers becomes a tunnel, whose own latency is added to the path
and whose bandwidth is shared, so the placement minimises the expected traffic over
crossing links (`crossing_weight`), with each server holding about its share of the
hosts (their processes are the CPU; a switch is a bridge in the server's one Open
vSwitch, free to go where its traffic pulls it). Nodes a user pins (`placement:` in the
servers file) stay where they are pinned.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import networkx as nx
from pydantic import Field, ValidationError, model_validator

from fogsdn.core.errors import validation_line
from fogsdn.core.scenario_yaml import YamlFileError, read_yaml_file
from fogsdn.core.topology import FrozenModel

# a server may hold this share more than an even split of the hosts (a 2-server split of
# 5 hosts: at most 3 on one), so that a cheaper cut can win over a perfect balance
BALANCE_SLACK = 0.10
IMPROVE_PASSES = 50  # each pass moves a node only for a strictly smaller crossing weight
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


HEAD = "head"  # a placement on the machine that runs the runner and the controller


class ClusterError(ValueError):
    """A servers file or placement that cannot be used: one line naming the field."""


class ServerSpec(FrozenModel):
    """One server: how the runner reaches it over ssh."""

    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,7}$")
    address: str  # an IP address or a host name
    user: str = Field("root", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    key: str | None = None  # the ssh identity file; None: ssh's default
    port: int = Field(22, ge=1, le=65535)

    @model_validator(mode="after")
    def _address(self) -> ServerSpec:
        try:
            ipaddress.ip_address(self.address)
        except ValueError:
            if not _HOSTNAME.match(self.address):
                raise ValueError(f"address: {self.address!r} is neither an IP address nor a "
                                 "host name") from None
        return self


class ClusterSpec(FrozenModel):
    """The servers of one emulation; cross-server links are `tunnel`s. The runner and the
    controller run on the machine that starts the run (the head), which reaches every
    server over ssh and is reached by every switch over the servers' LAN; nodes pinned
    to `head` run there too (only those: the rest is placed on the servers)."""

    servers: tuple[ServerSpec, ...] = Field(min_length=1)
    placement: dict[str, str] = Field(default_factory=dict)  # graph node -> server name
    tunnel: Literal["vxlan"] = "vxlan"
    known_hosts: str | None = None  # the servers' host keys (ssh's known_hosts format)

    @model_validator(mode="after")
    def _consistent(self) -> ClusterSpec:
        names = [s.name for s in self.servers]
        if len(set(names)) != len(names):
            raise ValueError(f"servers: names repeat: {names}")
        if HEAD in names:
            raise ValueError(f"servers: {HEAD!r} names the machine that runs the run, "
                             "not a server")
        where = [(s.address, s.port) for s in self.servers]
        if len(set(where)) != len(where):
            raise ValueError("servers: two servers at one address and port")
        for node, server in self.placement.items():
            if server not in names and server != HEAD:
                raise ValueError(f"placement.{node}: no server named {server!r} (nor "
                                 f"{HEAD!r}, this machine)")
        return self

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.servers]


def load_cluster(path: str | Path) -> ClusterSpec:
    """The servers file at `path`; ClusterError (one line naming the file and field)."""
    p = Path(path)
    try:
        data = read_yaml_file(p)
    except YamlFileError as err:
        raise ClusterError(str(err)) from None
    if not isinstance(data, Mapping):
        raise ClusterError(f"{p}: expected a mapping with servers: at the top level")
    try:
        return ClusterSpec.model_validate(dict(data))
    except ValidationError as err:
        raise ClusterError(validation_line(err, str(p))) from None


# -- placement ---------------------------------------------------------------------------
def path_traffic(g: nx.Graph, flows: Iterable[tuple[str, str, float]]
                 ) -> dict[frozenset[str], float]:
    """Expected traffic per link: each (source, destination, rate) flow added to every
    link of its shortest path (hop count, ties by node name)."""
    load: dict[frozenset[str], float] = {}
    for src, dst, rate in flows:
        if not math.isfinite(rate) or rate < 0:
            raise ClusterError(f"flow {src}->{dst}: rate {rate} is not a finite number >= 0")
        path = nx.shortest_path(g, src, dst)
        for u, v in zip(path, path[1:], strict=False):
            e = frozenset((u, v))
            load[e] = load.get(e, 0.0) + rate
    return load


def crossing_links(g: nx.Graph, placement: Mapping[str, str]) -> list[tuple[str, str]]:
    """The links whose ends are on different servers (each as a sorted pair)."""
    out: list[tuple[str, str]] = []
    for u, v in g.edges:
        if placement[u] != placement[v]:
            a, b = sorted((str(u), str(v)))
            out.append((a, b))
    return sorted(out)


def crossing_weight(g: nx.Graph, placement: Mapping[str, str],
                    traffic: Mapping[frozenset[str], float]) -> float:
    return sum(_weight(traffic, u, v) for u, v in crossing_links(g, placement))


def _weight(traffic: Mapping[frozenset[str], float], u: str, v: str) -> float:
    # a link nobody is expected to use still costs a little to cross (a tunnel to keep)
    return 1e-6 + traffic.get(frozenset((u, v)), 0.0)


def place(g: nx.Graph, servers: Sequence[str], traffic: Mapping[frozenset[str], float],
          pinned: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every node of `g` on a server: pinned nodes where pinned, the rest grown greedily
    from them (each next to the server it talks to most, within the balance limit), then
    improved by single moves that lower the crossing weight. Deterministic."""
    pinned = dict(pinned or {})
    if not servers:
        raise ClusterError("no server to place the network on")
    for node, server in pinned.items():
        if node not in g:
            raise ClusterError(f"placement.{node}: no such host or switch in the network")
        if server not in servers:
            raise ClusterError(f"placement.{node}: no server named {server!r}")
    hosts = {n for n, kind in g.nodes(data="kind") if kind != "switch"}
    cap = max(1, math.ceil(len(hosts) / len(servers) * (1 + BALANCE_SLACK)))
    counts = {s: 0 for s in servers}  # hosts per server
    for n, s in pinned.items():
        counts[s] += n in hosts
    if max(counts.values()) > cap:
        over = max(counts, key=lambda s: counts[s])
        raise ClusterError(f"placement: {counts[over]} hosts pinned to {over}, more than its "
                           f"share ({cap} of {len(hosts)} on {len(servers)} servers)")
    at = dict(pinned)

    def room(node: str, server: str) -> bool:
        return node not in hosts or counts[server] < cap

    def pull(node: str, server: str) -> float:
        return sum(_weight(traffic, node, n) for n in g[node] if at.get(n) == server)

    for node in _growth_order(g, pinned):
        if node in at:
            continue
        free = [s for s in servers if room(node, s)]
        best = max(free, key=lambda s: (pull(node, s), -counts[s], -servers.index(s)))
        at[node] = best
        counts[best] += node in hosts
    for _ in range(IMPROVE_PASSES):
        moved = False
        for node in sorted(g, key=str):
            if node in pinned:
                continue
            here = at[node]
            for s in servers:
                if s == here or not room(node, s):
                    continue
                if pull(node, s) > pull(node, here) + 1e-12:
                    counts[here] -= node in hosts
                    counts[s] += node in hosts
                    at[node] = here = s
                    moved = True
        if not moved:
            break
    return at


def _growth_order(g: nx.Graph, pinned: Mapping[str, str]) -> list[str]:
    """Breadth first from the pinned nodes (or the busiest node), so that each node is
    placed after a neighbour; every component reached, in a fixed order."""
    order: list[str] = []
    seen: set[str] = set()
    starts = sorted(pinned, key=str)
    rest = sorted(g, key=lambda n: (-g.degree(n), str(n)))
    for root in [*starts, *rest]:
        if root in seen:
            continue
        frontier = [root]
        seen.add(root)
        while frontier:
            nxt: list[str] = []
            for n in frontier:
                order.append(n)
                for m in sorted(g[n], key=str):
                    if m not in seen:
                        seen.add(m)
                        nxt.append(m)
            frontier = nxt
    return order
