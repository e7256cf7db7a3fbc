"""Greedy baselines for the learning controller (issue 9): least-loaded, latency-, power-greedy.

Each sends every request, of either class, to the available node best by one measure
(docs/learning.md, "Baselines"), preferring nodes with room; ties go to the first node
in scenario order, so the policies are deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.core.scenario import TaskClass
from fogsdn.policies.base import ClusterView, NodeView, Policy, PolicyError, Request, RouteTable

Score = Callable[[NodeView], float]


def held(node: NodeView) -> int:
    """Requests the node holds; an engine that does not know reports None: empty."""
    return node.in_system or 0


def servers(node: NodeView) -> int:
    """Requests it serves at once."""
    return node.capacity if node.multi_server else 1


def expected_sojourn_ms(node: NodeView) -> float:
    """Mean time a new request of mean size 1 spends at the node (exponential service;
    a multi-server node has no waiting)."""
    return (1 if node.multi_server else held(node) + 1) / node.mu


def expected_response_ms(node: NodeView) -> float:
    return expected_sojourn_ms(node) + (node.net_ms or 0.0)


def marginal_energy(node: NodeView) -> float:
    """Dynamic server energy one request of mean size 1 adds (W x model ms): the idle draw
    is paid anyway. No power figures: 1 W of dynamic range."""
    if node.power_idle_w is None or node.power_max_w is None:
        dynamic_w = 1.0
    else:
        dynamic_w = node.power_max_w - node.power_idle_w
    return dynamic_w / (servers(node) * node.mu)


def best_node(view: ClusterView, score: Score) -> str:
    """The available node with the lowest score, preferring nodes with room."""
    up = tuple(n for n in view.nodes if n.available)
    if not up:
        raise PolicyError("no node is available")
    roomy = tuple(n for n in up if held(n) < n.capacity) or up
    return min(roomy, key=score).name  # min keeps the first of equals


@dataclass
class _Greedy(Policy):
    proactive: ClassVar[bool] = False

    def score(self, node: NodeView) -> float:
        raise NotImplementedError

    def routes(self, view: ClusterView) -> RouteTable:
        target = {best_node(view, self.score): 1.0}
        return {TaskClass.HP: target, TaskClass.LP: target}

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        return best_node(view, self.score)


@dataclass
class LeastLoaded(_Greedy):
    name: ClassVar[str] = "least_loaded"

    def score(self, node: NodeView) -> float:
        return held(node) / servers(node)


@dataclass
class LatencyGreedy(_Greedy):
    name: ClassVar[str] = "latency_greedy"

    def score(self, node: NodeView) -> float:
        return expected_response_ms(node)


@dataclass
class PowerGreedy(_Greedy):
    name: ClassVar[str] = "power_greedy"

    def score(self, node: NodeView) -> float:
        return marginal_energy(node)
