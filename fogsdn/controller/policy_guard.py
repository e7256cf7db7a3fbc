"""A policy asked so that it never takes the live controller down (pure): a call that
raises or answers nonsense is told to `on_failure(call, line)` and a safe answer stands in.
With a `ThreadWatchdog`, a call that runs past the time limit is stopped, said once, and
the policy is not asked again: the safe answers stand in for the rest of the run (a
policy that looped once would cost the limit on every later call).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, TypeVar

from fogsdn.models.network_power import PathMenu, PathOption
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
from fogsdn.policies.watchdog import LIMIT_ENV, PolicyTimeout, ThreadWatchdog

T = TypeVar("T")


class GuardedPolicy:
    """`policy`, each call guarded; `rng` draws its per-request choices and the fallback's."""

    def __init__(self, policy: Policy, rng: random.Random,
                 on_failure: Callable[[str, str], None],
                 watchdog: ThreadWatchdog | None = None) -> None:
        self.policy = policy
        self.rng = rng
        self.on_failure = on_failure
        self.watchdog = watchdog
        self.stopped: str | None = None  # why the policy is no longer asked
        self._said_stopped = False

    def _failed(self, call: str, line: str) -> None:
        """Tell `on_failure`; a stopped policy's later calls are not failures of their own."""
        if self.stopped is not None and self.stopped in line:
            if self._said_stopped:
                return
            self._said_stopped = True
        self.on_failure(call, line)

    def _ask(self, what: str, call: Callable[..., T], *args: Any) -> T:
        """The policy's `call(*args)`, under the time limit where there is a watchdog."""
        if self.stopped is not None:
            raise PolicyTimeout(self.stopped)
        if self.watchdog is None:
            return call(*args)
        try:
            return self.watchdog.call(what, call, *args)
        except PolicyTimeout as err:
            self.stopped = (f"{what} did not return within {self.watchdog.limit:g} s and was "
                            "stopped; the policy is not asked again this run (a loop in its "
                            f"code? the limit is {LIMIT_ENV})")
            raise PolicyTimeout(self.stopped) from err

    def routes(self, view: ClusterView) -> RouteTable:
        """The policy's table, or the safe one (HP and LP to the FNs) when it fails."""
        try:
            table = self._ask("routes", self.policy.routes, view)
        except USER_CODE_ERRORS as err:
            self._failed("routes", policy_failure(self.policy, "routes", err))
            return safe_routes(view)
        problems = route_problems(table, view)
        if problems:
            self._failed("routes", f"policy {self.policy.name!r}: routes: {problems[0]}")
            return safe_routes(view)
        return table

    def decide(self, view: ClusterView, request: Request) -> str:
        """The policy's node for one request, or one of the FNs when it fails."""
        try:
            node = self._ask("decide", self.policy.decide, view, request, self.rng)
            if not any(n.name == node for n in view.nodes):
                raise PolicyError(f"chose {node!r}, not a node of the cluster")
            return node
        except USER_CODE_ERRORS as err:
            self._failed("decide", policy_failure(self.policy, "decide", err))
        weights = routes_for(safe_routes(view), request.cls)
        return self.rng.choices(list(weights), weights=list(weights.values()))[0]

    def paths(self, graph: Any) -> dict[tuple[str, str], tuple[str, ...]]:
        """The policy's own paths, or none (shortest by delay) when asking it fails."""
        try:
            return {k: tuple(v) for k, v in self._ask("paths", self.policy.paths, graph).items()}
        except USER_CODE_ERRORS as err:
            self._failed("paths", policy_failure(self.policy, "paths", err))
            return {}

    def answered(self, client: str, node: str, path: PathOption | None,
                 response_ms: float) -> None:
        """Tell a per-request learner one request's response time; a failure is told
        to `on_failure` (the learner then misses that answer, nothing else changes)."""
        try:
            self._ask("answered", self.policy.answered, client, node, path, response_ms)
        except USER_CODE_ERRORS as err:
            self._failed("answered", policy_failure(self.policy, "answered", err))

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        """The policy's path for one request, or the shortest (0) when it fails."""
        try:
            i = self._ask("choose_path", self.policy.choose_path, view, request, node, menu)
            if not isinstance(i, int) or not 0 <= i < len(menu.options):
                raise PolicyError(f"chose path {i!r} of {len(menu.options)}")
            return i
        except USER_CODE_ERRORS as err:
            self._failed("choose_path", policy_failure(self.policy, "choose_path", err))
            return 0
