"""What the controller must know of the data plane: service address, hosts, ports (pure).

Known in advance from the topology layer, not discovered, so that every forwarding rule
is proactive and a task needs no packet-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import networkx as nx


@dataclass(frozen=True)
class HostPort:
    name: str
    ip: str
    mac: str
    port: int  # switch port number
    role: str  # a Role value, or "client"
    switch: str  # the switch it attaches to


@dataclass(frozen=True)
class Fabric:
    vip: str
    vip_mac: str
    service_port: int
    hosts: tuple[HostPort, ...]
    graph: dict[str, object]  # the topology (networkx node-link data, read by networkx)

    def topology(self) -> nx.Graph:
        return nx.node_link_graph(self.graph, edges="links")

    def host(self, name: str) -> HostPort:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def workers(self) -> tuple[HostPort, ...]:
        return tuple(h for h in self.hosts if h.role != "client")  # fn, ofn, cloud

    def clients(self) -> tuple[HostPort, ...]:
        return tuple(h for h in self.hosts if h.role == "client")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fabric:
        hosts = tuple(HostPort(**h) for h in d["hosts"])
        return cls(str(d["vip"]), str(d["vip_mac"]), int(d["service_port"]), hosts, d["graph"])
