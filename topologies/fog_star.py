"""Seed 000's fog star as a graph: one access switch, FN, OFNs, optional cloud, clients (pure).

The graph is the topology layer's currency: Mininet glue builds it, tests inspect
it, and a later multi-machine build can partition it (Fogbed/MaxiNet style).
"""

from __future__ import annotations

import networkx as nx

from fogsdn.fabric import Fabric, HostPort
from fogsdn.scenario import Scenario

SUBNET_PREFIX = "10.0.0."
VIP = "10.0.0.250"
VIP_MAC = "02:00:00:00:00:fa"
SERVICE_PORT = 9000


def _mac(i: int) -> str:
    return f"02:00:00:00:{i >> 8:02x}:{i & 0xFF:02x}"


def fog_star_graph(scenario: Scenario, switch: str = "s1") -> nx.Graph:
    """Hosts carry ip, mac, role and their switch port; the switch carries its dpid."""
    g = nx.Graph(name=f"fog-star-{scenario.name}", vip=VIP, vip_mac=VIP_MAC,
                 service_port=SERVICE_PORT)
    g.add_node(switch, kind="switch", dpid=1)
    port = 0
    for i, node in enumerate(scenario.nodes, start=1):
        port += 1
        g.add_node(node.name, kind="host", role=node.role.value, ip=f"{SUBNET_PREFIX}{i}",
                   mac=_mac(i), port=port)
        g.add_edge(node.name, switch, port=port)
    for k in range(1, scenario.workload.clients + 1):
        port += 1
        idx = 100 + k
        name = f"c{k}"
        g.add_node(name, kind="host", role="client", ip=f"{SUBNET_PREFIX}{idx}", mac=_mac(idx),
                   port=port)
        g.add_edge(name, switch, port=port)
    return g


def hosts(g: nx.Graph) -> list[str]:
    return [n for n, d in g.nodes(data=True) if d["kind"] == "host"]


def fabric_of(g: nx.Graph) -> Fabric:
    return Fabric(
        vip=g.graph["vip"], vip_mac=g.graph["vip_mac"], service_port=g.graph["service_port"],
        hosts=tuple(
            HostPort(n, d["ip"], d["mac"], d["port"], d["role"])
            for n, d in g.nodes(data=True) if d["kind"] == "host"
        ),
    )
