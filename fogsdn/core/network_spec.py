"""What a live network is built from, whichever study draws it.

The live core (`fogsdn.live.live_network.LiveNetwork`) needs hosts, links, switches and a
time base, not a workload: the queueing scenario gives one (`network_of`), and seed 003's
city study gives its own (`fogsdn.city.live_run.city_network`) without pretending to be a
queueing scenario. Fog hosts come first in their given order, then clients c1..cN.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from fogsdn.core.scenario import NodeSpec, Role, Scenario, Workload
from fogsdn.core.timebase import Timebase
from fogsdn.core.topology import HostSpec, TopologySpec, build_graph, client_hosts


@dataclass(frozen=True)
class FogHost:
    """A fog node (or the cloud) as the network sees it: a named host with a role, and the
    limits a live run puts on its container (None: unlimited)."""

    name: str
    role: Role
    cpu: float | None = None
    memory_mb: int | None = None


@dataclass(frozen=True)
class NetworkSpec:
    """Hosts, topology and time base of one live network; `containers`: each fog host's
    processes in their own container (docs/containers.md)."""

    name: str
    seed: int
    time_scale: float  # real ms per model ms
    fog_hosts: tuple[FogHost, ...]
    clients: int
    topology: TopologySpec
    containers: bool = False
    # every host holds its peers' MAC addresses from the start (`neighbours`), so no ARP
    # exchange crosses an emulated link: seed 003's latencies are IP round trips, and a
    # routed network would resolve only its first hop
    static_neighbours: bool = False

    def __post_init__(self) -> None:
        if not self.fog_hosts:
            raise ValueError(f"network {self.name}: no fog host")
        names = [h.name for h in self.fog_hosts]
        if len(set(names)) != len(names):
            raise ValueError(f"network {self.name}: fog host names repeat: {names}")
        if self.clients < 0:
            raise ValueError(f"network {self.name}: clients {self.clients} < 0")
        Timebase(self.time_scale)  # a non-finite or non-positive scale, one line

    @property
    def timebase(self) -> Timebase:
        return Timebase(self.time_scale)

    def hosts(self) -> list[HostSpec]:
        """Fog hosts in their order, then clients c1..cN."""
        return [HostSpec(h.name, h.role.value) for h in self.fog_hosts] + client_hosts(self.clients)

    def graph(self) -> nx.Graph:
        """The network graph (`fogsdn.core.topology`; TopologyError names the field)."""
        return build_graph(self.topology, self.hosts(), self.name)

    def neighbours(self, graph: nx.Graph) -> dict[str, list[tuple[str, str]]]:
        """Per host, the (IP, MAC) of the hosts it exchanges packets with: every fog host,
        and for a fog host every host (clients talk to fog nodes, fog nodes to both)."""
        fogs = {h.name for h in self.fog_hosts}
        hosts = [(h.name, str(graph.nodes[h.name]["ip"]), str(graph.nodes[h.name]["mac"]))
                 for h in self.hosts()]
        return {name: [(ip, mac) for other, ip, mac in hosts
                       if other != name and (name in fogs or other in fogs)]
                for name, _, _ in hosts}

    def fog_host(self, name: str) -> FogHost:
        for h in self.fog_hosts:
            if h.name == name:
                return h
        raise KeyError(name)


def network_of(scenario: Scenario) -> NetworkSpec:
    """A queueing scenario's network: its nodes as fog hosts, its workload's clients."""
    return NetworkSpec(
        name=scenario.name, seed=scenario.seed, time_scale=scenario.time_scale,
        fog_hosts=tuple(FogHost(n.name, n.role, n.cpu, n.memory_mb) for n in scenario.nodes),
        clients=scenario.workload.clients, topology=scenario.topology,
        containers=scenario.containers)


# the idle service's placeholders: nothing reads them, since no packet reaches the address
_IDLE_RATE_PER_MS = 0.001
_IDLE_DURATION_MS = 1e9


def idle_service(network: NetworkSpec) -> Scenario:
    """What the controller is told to serve on a network that carries no queueing service
    (seed 003's city: its clients address fog hosts, never the service address). The
    controller needs a service to start; it runs its default policy at the service
    address, which no client addresses, so all it does for this network is route. Service
    rates, capacities and the load are placeholders that nothing reads."""
    return Scenario(
        name=network.name, seed=network.seed, time_scale=network.time_scale,
        duration_ms=_IDLE_DURATION_MS, containers=network.containers,
        workload=Workload(lambda_hp=0.0, lambda_lp=_IDLE_RATE_PER_MS, clients=network.clients),
        nodes=tuple(NodeSpec(name=h.name, role=h.role, mu=1.0, capacity=1, cpu=h.cpu,
                             memory_mb=h.memory_mb) for h in network.fog_hosts),
        topology=network.topology)
