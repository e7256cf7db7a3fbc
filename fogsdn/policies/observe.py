"""What a learning controller sees in one decision epoch, and what it does per flow (pure).

Built only from what a per-flow policy is shown (each flow's view and its own choice), so
the simulator env and the live controller observe alike (docs/learning.md, "The
environment").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fogsdn.core.latency import node_net_ms
from fogsdn.core.routing import shortest_path
from fogsdn.core.scenario import Scenario, ServerPower, SwitchPower, scenario_graph, scenario_hosts
from fogsdn.models.power_model import server_power_w, switch_ports, switch_power_w
from fogsdn.policies.base import ClusterView, NodeView, PolicyError
from fogsdn.policies.greedy import expected_response_ms, held, servers

Obs = npt.NDArray[np.float32]
FEATURES_PER_NODE = 5


def weighted_choice(view: ClusterView, weights: Sequence[float]) -> int:
    """Index of the available node with room and the least expected response time /
    weight (weight 0 excludes a node; all zero: plain least expected response time)."""
    up = [k for k, n in enumerate(view.nodes) if n.available]
    if not up:
        raise PolicyError("no node is available")
    roomy = [k for k in up if held(view.nodes[k]) < view.nodes[k].capacity] or up
    liked = [k for k in roomy if weights[k] > 0]
    if not liked:
        return min(roomy, key=lambda k: expected_response_ms(view.nodes[k]))
    return min(liked, key=lambda k: expected_response_ms(view.nodes[k]) / weights[k])


@dataclass(frozen=True)
class ObservationLayout:
    """What the observer knows of the scenario's nodes, switches and goal references."""

    nodes: tuple[str, ...]
    node_ports: Mapping[str, Mapping[str, frozenset[str]]]  # node -> switch -> ports used
    switch_ports: Mapping[str, int]
    switch_power: SwitchPower
    rt_ref_ms: float
    p_ref_w: float

    @property
    def size(self) -> int:
        return len(self.nodes) * FEATURES_PER_NODE + len(self.switch_ports) + 2

    def to_json(self) -> dict[str, object]:
        return {"nodes": list(self.nodes),
                "node_ports": {n: {s: sorted(p) for s, p in sw.items()}
                               for n, sw in self.node_ports.items()},
                "switch_ports": dict(self.switch_ports),
                "switch_power": self.switch_power.model_dump(),
                "rt_ref_ms": self.rt_ref_ms, "p_ref_w": self.p_ref_w}

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> ObservationLayout:
        try:
            ports, sw = d["node_ports"], d["switch_ports"]
            assert isinstance(ports, Mapping) and isinstance(sw, Mapping)
            return cls(tuple(str(n) for n in d["nodes"]),  # type: ignore[attr-defined]
                       {str(n): {str(s): frozenset(map(str, p)) for s, p in v.items()}
                        for n, v in ports.items()},
                       {str(s): int(c) for s, c in sw.items()},
                       SwitchPower.model_validate(d["switch_power"]),
                       float(d["rt_ref_ms"]), float(d["p_ref_w"]))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError, AssertionError) as err:
            raise PolicyError(f"layout: missing or bad field ({err})") from None


def observed_response_ms(node: NodeView) -> float:
    """A node's measured recent response time, or its queue-and-path estimate before any."""
    return node.measured_rt_ms if node.measured_rt_ms is not None else expected_response_ms(node)


@dataclass
class EpochObserver:
    """Accumulates one epoch of (view, choice) pairs; `close` gives the observation."""

    layout: ObservationLayout
    _views: int = 0
    _held: list[float] = field(default_factory=list)
    _busy: list[float] = field(default_factory=list)
    _sent: list[int] = field(default_factory=list)
    _rt: float = 0.0
    _last: ClusterView | None = None

    def __post_init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        nn = len(self.layout.nodes)
        self._views, self._rt = 0, 0.0
        self._held, self._busy, self._sent = [0.0] * nn, [0.0] * nn, [0] * nn

    def record(self, view: ClusterView, chosen: int) -> None:
        """One flow: the view it found and the node (index in layout order) it went to."""
        self._views += 1
        self._last = view
        for k, node in enumerate(view.nodes):
            h = held(node)
            self._held[k] += h / node.capacity
            self._busy[k] += min(1.0, h / servers(node))
        self._sent[chosen] += 1
        self._rt += observed_response_ms(view.nodes[chosen])

    def power_w(self, util: Sequence[float], sent: Sequence[int],
                nodes: Sequence[NodeView]) -> tuple[float, dict[str, int]]:
        """Servers at `util` plus switches with the ports of every node that got flows."""
        total = 0.0
        for k, node in enumerate(nodes):
            spec = ServerPower() if node.power_idle_w is None or node.power_max_w is None \
                else ServerPower(idle_w=node.power_idle_w, max_w=node.power_max_w)
            total += server_power_w(spec, util[k])
        active = switch_activity(self.layout, sent)
        for sw, ports in self.layout.switch_ports.items():
            total += switch_power_w(self.layout.switch_power, active[sw], ports, 0.0)
        return total, active

    def close(self) -> tuple[Obs, dict[str, float]]:
        """The epoch's observation and estimates (response_ms, power_w); starts the next."""
        lay = self.layout
        n = max(1, self._views)
        nodes = self._last.nodes if self._last is not None else ()
        util = [b / n for b in self._busy]
        features: list[float] = []
        for k in range(len(lay.nodes)):
            node = nodes[k] if k < len(nodes) else None
            features += [1.0 if node is None or node.available else 0.0, self._held[k] / n,
                         util[k], ((node.net_ms or 0.0) if node else 0.0) / lay.rt_ref_ms,
                         self._sent[k] / n]
        if nodes:
            power, active = self.power_w(util, self._sent, nodes)
        else:
            power, active = 0.0, {s: 0 for s in lay.switch_ports}
        features += [active[s] / max(1, c) for s, c in lay.switch_ports.items()]
        rt = self._rt / n
        features += [rt / lay.rt_ref_ms, power / lay.p_ref_w]
        flows = float(self._views)
        self._clear()
        return (np.asarray(features, dtype=np.float32),
                {"response_ms": rt, "power_w": power, "flows": flows})


def layout_of(scenario: Scenario) -> ObservationLayout:
    """The observer's layout: each (client, node) path shortest by delay, ports named by
    the neighbour they face (as sim/power.py); unset goal references as in docs/learning.md."""
    g = scenario_graph(scenario)
    clients = [h.name for h in scenario_hosts(scenario) if h.role == "client"]
    sw_ports = switch_ports(g)
    node_ports: dict[str, dict[str, frozenset[str]]] = {}
    for node in scenario.nodes:
        used: dict[str, set[str]] = {}
        for c in clients:
            path = shortest_path(g, c, node.name)
            for i in range(1, len(path) - 1):
                if path[i] in sw_ports:
                    used.setdefault(path[i], set()).update((path[i - 1], path[i + 1]))
        node_ports[node.name] = {s: frozenset(p) for s, p in used.items()}
    net = node_net_ms(scenario)
    rt_ref = scenario.goal.rt_ref_ms or min(1.0 / n.mu + net[n.name] for n in scenario.nodes)
    sp = scenario.switch_power
    p_ref = scenario.goal.p_ref_w or (sum(n.power.max_w for n in scenario.nodes)
                                      + max(sp.peak_w, sp.idle_w + sp.port_w * max(
                                          sw_ports.values(), default=0)) * len(sw_ports))
    return ObservationLayout(tuple(n.name for n in scenario.nodes), node_ports, sw_ports, sp,
                  float(rt_ref), float(p_ref))


def switch_activity(layout: ObservationLayout, sent: Sequence[int]) -> dict[str, int]:
    """Active ports per switch when the nodes with flows (sent[k] > 0) carry traffic."""
    used: dict[str, set[str]] = {s: set() for s in layout.switch_ports}
    for k, name in enumerate(layout.nodes):
        if sent[k] > 0:
            for sw, ports in layout.node_ports.get(name, {}).items():
                used[sw].update(ports)
    return {s: len(p) for s, p in used.items()}


__all__ = ["FEATURES_PER_NODE", "EpochObserver", "Obs", "ObservationLayout", "layout_of",
           "switch_activity", "weighted_choice"]
