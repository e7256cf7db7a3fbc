"""The controller's view of the cluster and its links, fed by PortStatus, registrations
and the workers' load reports (pure). Only transitions change it: PortStatus repeats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from fogsdn.controller.pipeline import Topology
from fogsdn.core.scenario import Role, Scenario
from fogsdn.policies import ClusterView, NodeView, node_view


@dataclass
class ClusterState:
    nodes: dict[str, NodeView] = field(default_factory=dict)

    @classmethod
    def from_scenario(cls, scenario: Scenario, available: dict[str, bool],
                      net_ms: Mapping[str, float] | None = None) -> ClusterState:
        """`net_ms`: each node's mean network time (fogsdn.core.latency.node_net_ms)."""
        net = net_ms or {}
        return cls({
            n.name: node_view(n, available.get(n.name, True), net.get(n.name))
            for n in scenario.nodes
        })

    def set_available(self, name: str, up: bool) -> bool:
        """Record a node's availability; True only when it changed."""
        node = self.nodes.get(name)
        if node is None or node.role is Role.FN or node.available == up:
            return False
        self.nodes[name] = replace(node, available=up)
        return True

    def view(self) -> ClusterView:
        return ClusterView(tuple(self.nodes.values()))


@dataclass
class LinkState:
    """Switch-to-switch links: one has failed while either of its ends is reported down."""

    failed: set[str] = field(default_factory=set)  # link ids
    ports_down: set[tuple[str, int]] = field(default_factory=set)  # (switch, port)

    def report(self, link: str, ends: Mapping[str, int], switch: str, port: int,
               down: bool) -> bool | None:
        """`switch`'s `port`, one of `link`'s `ends`, is down or up: the link's new state
        (True: up) when that changed it, else None."""
        if down:
            self.ports_down.add((switch, port))
        else:
            self.ports_down.discard((switch, port))
        failed = any((s, int(p)) in self.ports_down for s, p in ends.items())
        if failed == (link in self.failed):
            return None
        (self.failed.add if failed else self.failed.discard)(link)
        return not failed


def port_change(topo: Topology, links: LinkState, switch: str, port: int, down: bool
                ) -> tuple[Literal["link", "node"], str, bool] | None:
    """What a PortStatus changes: ("link", its id, up) for a switch-to-switch link whose
    state turns, ("node", the OFN, up) for an OFN's own port; None for anything else."""
    peer = topo.peer(switch, port)
    if peer is None:
        return None
    g = topo.graph
    if g.nodes[peer]["kind"] == "switch":
        edge = g.edges[switch, peer]
        link = str(edge["id"])
        up = links.report(link, edge["ports"], switch, port, down)
        return None if up is None else ("link", link, up)
    if g.nodes[peer]["role"] == Role.OFN.value:
        return "node", peer, not down
    return None


def loaded_view(view: ClusterView, in_system: Callable[[str], int | None],
                work_left_ms: Callable[[str], float | None],
                recent_rt_ms: Callable[[str], float | None]) -> ClusterView:
    """`view` with each node's count and work left as the controller keeps them
    (`fogsdn.controller.load_ledger`; None where unknown) and its recently measured
    response time."""
    return ClusterView(tuple(
        replace(n, in_system=in_system(n.name), work_left=work_left_ms(n.name),
                measured_rt_ms=recent_rt_ms(n.name)) for n in view.nodes))
