"""What the controller must know of the data plane: service address, hosts, ports (pure).

The topology layer produces it once the graph is built; the runner hands it to the
controller, and flow-table checks in tests read it. No discovery: a fog star is known
in advance, so every forwarding rule is proactive and a task needs no packet-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx


@dataclass(frozen=True)
class HostPort:
    name: str
    ip: str
    mac: str
    port: int  # switch port number
    role: str  # a Role value, or "client"
    switch: str = "s1"  # the switch it attaches to


@dataclass(frozen=True)
class Fabric:
    vip: str
    vip_mac: str
    service_port: int
    hosts: tuple[HostPort, ...] = field(default_factory=tuple)
    graph: dict[str, Any] | None = None  # the topology (networkx node-link data); None: a star

    def topology(self) -> nx.Graph:
        """The topology graph; a single-switch star when none was given."""
        if self.graph is not None:
            return nx.node_link_graph(self.graph, edges="links")
        g = nx.Graph(vip=self.vip, vip_mac=self.vip_mac, service_port=self.service_port)
        g.add_node("s1", kind="switch", dpid=1)
        for h in self.hosts:
            g.add_node(h.name, kind="host", role=h.role, ip=h.ip, mac=h.mac, port=h.port,
                       switch=h.switch)
            g.add_edge(h.name, h.switch, id=f"{h.name}-{h.switch}", port=h.port,
                       ports={h.switch: h.port}, delay_ms=0.0, jitter_ms=0.0, loss=0.0,
                       bw_mbps=None)
        return g

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
        return cls(str(d["vip"]), str(d["vip_mac"]), int(d["service_port"]), hosts,
                   d.get("graph"))
