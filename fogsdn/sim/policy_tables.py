"""What a policy says per OFN availability state, asked once per state and cached: the
view, the route table as cumulative weights (sampled as `random.choices` would) and the
stage plan; a user policy's exception becomes one line naming its file (`PolicyError`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import accumulate
from typing import Any, TypeVar

from fogsdn.policies import ClusterView, NodeView, Policy, PolicyError, policy_failure, routes_for
from fogsdn.policies.base import USER_CODE_ERRORS
from fogsdn.policies.watchdog import user_call
from fogsdn.sim.rows import CLASSES

# node indices, cumulative weights, their total, and the last index (0: one node)
RouteEntry = tuple[list[int], list[float], float, int]
# per node: the size at which it kills a task (inf: never), the node it restarts at (-1:
# none); and whether the plan has stages at all
StageEntry = tuple[list[float], list[int], bool]
T = TypeVar("T")


def guarded(policy: Policy, what: str, call: Callable[..., T], *args: Any) -> T:
    """call(*args), where the user's code runs: its exception becomes one line naming
    its file (`PolicyError`)."""
    try:
        return user_call(f"policy {policy.name!r}: {what}", call, *args)
    except USER_CODE_ERRORS as err:
        raise PolicyError(policy_failure(policy, what, err)) from None


class PolicyTables:
    """A policy's routes, stages and views per availability state (`avail[k]`: node k up)."""

    def __init__(self, policy: Policy, base_view: Sequence[NodeView],
                 index: dict[str, int]) -> None:
        self.policy = policy
        self.base_view = tuple(base_view)
        self.index = index  # node name -> its position in the scenario
        self._views: dict[tuple[bool, ...], ClusterView] = {}
        self._routes: dict[tuple[bool, ...], list[RouteEntry]] = {}
        self._stages: dict[tuple[bool, ...], StageEntry] = {}

    def forget(self) -> None:
        """Drop the routes and stage plans: the policy changed (a stepped run's caller)."""
        self._routes.clear()
        self._stages.clear()

    def view(self, avail: Sequence[bool]) -> ClusterView:
        key = tuple(avail)
        got = self._views.get(key)
        if got is None:
            got = ClusterView(tuple(replace(v, available=a)
                                    for v, a in zip(self.base_view, key, strict=True)))
            self._views[key] = got
        return got

    def routes(self, avail: Sequence[bool]) -> list[RouteEntry]:
        """A `RouteEntry` per class, in CLASSES order."""
        key = tuple(avail)
        got = self._routes.get(key)
        if got is None:
            policy = self.policy
            table = guarded(policy, "routes", policy.routes, self.view(key))
            got = []
            for cls in CLASSES:
                weights = routes_for(table, cls)
                try:
                    idx = [self.index[n] for n in weights]
                except KeyError as err:
                    raise ValueError(f"policy {policy.name} routed to unknown node {err}") from None
                cum = list(accumulate(weights.values()))
                got.append((idx, cum, cum[-1] + 0.0, len(idx) - 1))
            self._routes[key] = got
        return got

    def stages(self, view: ClusterView) -> StageEntry:
        """The policy's stage plan for this view (`Policy.stages`), per node."""
        key = tuple(n.available for n in view.nodes)
        got = self._stages.get(key)
        if got is None:
            policy = self.policy
            plan = guarded(policy, "stages", policy.stages, view)
            nn = len(self.base_view)
            kill_at, next_at = [math.inf] * nn, [-1] * nn
            for i, host in enumerate(plan.hosts):
                lim, nxt = plan.kill_after(host), plan.next_stage(i)
                if lim is None or nxt is None:
                    continue
                try:
                    k, k2 = self.index[host], self.index[plan.hosts[nxt]]
                except KeyError as err:
                    raise ValueError(f"policy {policy.name} staged an unknown node {err}") from None
                kill_at[k], next_at[k] = lim, k2
            got = (kill_at, next_at, plan.kind != "none")
            self._stages[key] = got
        return got
