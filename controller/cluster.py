"""The controller's view of the cluster and its links: who is up, fed by PortStatus and
registrations (pure).

PortStatus arrives 2-3 times per link-down and once per link-up (docs/architecture.md), and a
registration may repeat what PortStatus said: only transitions change the view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.policies import ClusterView, NodeView, node_view
from fogsdn.scenario import Role, Scenario


@dataclass
class ClusterState:
    nodes: dict[str, NodeView] = field(default_factory=dict)

    @classmethod
    def from_scenario(cls, scenario: Scenario, available: dict[str, bool],
                      net_ms: Mapping[str, float] | None = None) -> ClusterState:
        """`net_ms`: each node's mean network time (fogsdn.latency.node_net_ms)."""
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
        """`switch`'s `port`, one of `link`'s `ends` (switch -> port), is down or up: the
        link's new state (True: up) when that changed it, else None."""
        if down:
            self.ports_down.add((switch, port))
        else:
            self.ports_down.discard((switch, port))
        failed = any((s, int(p)) in self.ports_down for s, p in ends.items())
        if failed == (link in self.failed):
            return None
        (self.failed.add if failed else self.failed.discard)(link)
        return not failed
