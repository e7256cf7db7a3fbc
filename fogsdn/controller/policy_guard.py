"""A policy asked so that it never takes the live controller down (pure): a call that
raises or answers nonsense is told to `on_failure(call, line)` and a safe answer stands in.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from fogsdn.models.network_power import PathMenu
from fogsdn.policies import (
    ClusterView,
    Policy,
    PolicyError,
    Request,
    RouteTable,
    policy_failure,
    route_problems,
    routes_for,
    safe_routes,
)
from fogsdn.policies.base import USER_CODE_ERRORS


class GuardedPolicy:
    """`policy`, each call guarded; `rng` draws its per-request choices and the fallback's."""

    def __init__(self, policy: Policy, rng: random.Random,
                 on_failure: Callable[[str, str], None]) -> None:
        self.policy = policy
        self.rng = rng
        self.on_failure = on_failure

    def routes(self, view: ClusterView) -> RouteTable:
        """The policy's table, or the safe one (HP and LP to the FNs) when it fails."""
        try:
            table = self.policy.routes(view)
        except USER_CODE_ERRORS as err:
            self.on_failure("routes", policy_failure(self.policy, "routes", err))
            return safe_routes(view)
        problems = route_problems(table, view)
        if problems:
            self.on_failure("routes", f"policy {self.policy.name!r}: routes: {problems[0]}")
            return safe_routes(view)
        return table

    def decide(self, view: ClusterView, request: Request) -> str:
        """The policy's node for one request, or one of the FNs when it fails."""
        try:
            node = self.policy.decide(view, request, self.rng)
            if not any(n.name == node for n in view.nodes):
                raise PolicyError(f"chose {node!r}, not a node of the cluster")
            return node
        except USER_CODE_ERRORS as err:
            self.on_failure("decide", policy_failure(self.policy, "decide", err))
        weights = routes_for(safe_routes(view), request.cls)
        return self.rng.choices(list(weights), weights=list(weights.values()))[0]

    def paths(self, graph: Any) -> dict[tuple[str, str], tuple[str, ...]]:
        """The policy's own paths, or none (shortest by delay) when asking it fails."""
        try:
            return {k: tuple(v) for k, v in self.policy.paths(graph).items()}
        except USER_CODE_ERRORS as err:
            self.on_failure("paths", policy_failure(self.policy, "paths", err))
            return {}

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        """The policy's path for one request, or the shortest (0) when it fails."""
        try:
            i = self.policy.choose_path(view, request, node, menu)
            if not isinstance(i, int) or not 0 <= i < len(menu.options):
                raise PolicyError(f"chose path {i!r} of {len(menu.options)}")
            return i
        except USER_CODE_ERRORS as err:
            self.on_failure("choose_path", policy_failure(self.policy, "choose_path", err))
            return 0
