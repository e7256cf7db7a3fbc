"""Paths as the action (seed 002a): each (client, node) pair's k shortest loop-free paths
by delay, and the choice of one per connection, the same in every engine (pure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import networkx as nx

from fogsdn.controller.pipeline import Flow, Topology, path_flows
from fogsdn.core.latency import PathTiming
from fogsdn.core.routing import k_shortest_paths
from fogsdn.core.scenario import Scenario, scenario_graph
from fogsdn.core.workload import client_names
from fogsdn.models.network_power import PathMenu, PathOption, PortActivity, path_hops
from fogsdn.models.power_model import switch_ports
from fogsdn.policies import Policy, PolicyError

K_PATHS_DEFAULT = 3


def candidate_paths(g: nx.Graph, client: str, node: str, k: int) -> tuple[PathOption, ...]:
    """The k shortest paths between two hosts, each with its switches, hops and delay."""
    ports = switch_ports(g)
    out = []
    for path in k_shortest_paths(g, client, node, k):  # a host has one link: never inside
        out.append(PathOption(tuple(p for p in path if p in ports), path_hops(path, ports),
                              PathTiming.of(g, path).fixed_ms()))
    return tuple(out)


class PathRouter:
    """Every (client, node) pair's candidates and the ports' recent use."""

    def __init__(self, g: nx.Graph, clients: Sequence[str], nodes: Sequence[str],
                 activity: PortActivity, k: int = K_PATHS_DEFAULT) -> None:
        if k < 1:
            raise PolicyError(f"policy.params.k_paths: must be >= 1, got {k}")
        self.options = {(c, n): candidate_paths(g, c, n, k) for c in clients for n in nodes}
        self.activity = activity

    @classmethod
    def of(cls, scenario: Scenario, k: int = K_PATHS_DEFAULT) -> PathRouter:
        """The scenario's router; a port stays awake `switch_power.port_hold_s` real seconds."""
        g = scenario_graph(scenario)
        sp = scenario.switch_power
        activity = PortActivity(sp, switch_ports(g), scenario.timebase.model_ms(sp.port_hold_s))
        return cls(g, client_names(scenario), [n.name for n in scenario.nodes], activity, k)

    def menu(self, client: str, node: str, t_ms: float) -> PathMenu:
        act = self.activity
        return PathMenu(tuple(PathOption(o.switches, o.hops, o.delay_ms, act.wake_w(o.hops, t_ms))
                              for o in self.options[(client, node)]), act.network_w(t_ms))

    def choose(self, ask: Callable[[PathMenu], int], client: str, node: str,
               t_ms: float) -> PathOption:
        """The option `ask` names from this moment's menu, its ports marked used."""
        menu = self.menu(client, node, t_ms)
        i = ask(menu)
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(menu.options):
            raise PolicyError(f"choose_path: chose {i!r}, not one of {len(menu.options)} paths")
        option = menu.options[i]
        self.activity.use(option.hops, t_ms)
        return option


def k_paths(params: Mapping[str, object]) -> int:
    """`policy.params.k_paths`: how many candidates per pair (default 3)."""
    k = params.get("k_paths", K_PATHS_DEFAULT)
    if isinstance(k, bool) or not isinstance(k, int):
        raise PolicyError(f"policy.params.k_paths: must be an integer, got {k!r}")
    return k


def path_router(scenario: Scenario, policy: Policy) -> PathRouter | None:
    """The router of a policy that chooses each connection's path; None for others."""
    return PathRouter.of(scenario, k_paths(policy.spec.params)) if policy.chooses_paths else None


def connection_path(router: PathRouter, ask: Callable[[PathMenu], int], topo: Topology,
                    client: str, node: str, client_port: int, t_ms: float, idle_s: int
                    ) -> tuple[PathOption, list[tuple[str, Flow]]]:
    """The live controller's side: the option `ask` names for one connection and its
    rules as (switch, rule), far switches first (the edge's last, before the SYN)."""
    option = router.choose(ask, client, node, t_ms)
    flows = path_flows(topo, option.switches, client, node, client_port, idle_s)
    return option, flows[::-1]


__all__ = ["K_PATHS_DEFAULT", "PathRouter", "candidate_paths", "connection_path", "k_paths",
           "path_router"]
