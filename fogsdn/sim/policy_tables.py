"""What a policy says per OFN availability state, asked once per state and cached: the
view, the route table as cumulative weights (sampled as `random.choices` would) and the
stage plan; a user policy's exception becomes one line naming its file (`PolicyError`).

The caches are LRUs of `STATES_CACHED` states: every state of an ordinary scenario (up
to 12 OFNs) stays cached, while a run over many OFNs, which meets a new state at almost
every churn event (2^40 of them at 40 OFNs), keeps memory flat in its length. The policy
reads only the view, so a state's entry is the same whenever it is asked again.
"""

from __future__ import annotations

import math
from collections import OrderedDict
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
V = TypeVar("V")
State = tuple[bool, ...]  # avail[k]: node k up
# availability states kept per table: 2^12, all of them up to 12 OFNs; about 11 MB at 41
# nodes (docs/simulator.md, "How fast, how big")
STATES_CACHED = 4096


class StateCache(OrderedDict[State, V]):
    """The `size` states asked most recently, and what was computed for each."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def find(self, key: State) -> V | None:
        got = self.get(key)
        if got is not None:
            self.move_to_end(key)
        return got

    def keep(self, key: State, value: V) -> V:
        self[key] = value
        if len(self) > self.size:
            self.popitem(last=False)
        return value


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
                 index: dict[str, int], states: int | None = None) -> None:
        self.policy = policy
        self.base_view = tuple(base_view)
        self.index = index  # node name -> its position in the scenario
        # each node's view up and down, shared by every state's view
        self._node_views = tuple((replace(v, available=False), replace(v, available=True))
                                 for v in self.base_view)
        states = STATES_CACHED if states is None else states
        self._views: StateCache[ClusterView] = StateCache(states)
        self._routes: StateCache[list[RouteEntry]] = StateCache(states)
        self._stages: StateCache[StageEntry] = StateCache(states)

    def forget(self) -> None:
        """Drop the routes and stage plans: the policy changed (a stepped run's caller)."""
        self._routes.clear()
        self._stages.clear()

    def view(self, avail: Sequence[bool]) -> ClusterView:
        key = tuple(avail)
        got = self._views.find(key)
        if got is None:
            got = self._views.keep(key, ClusterView(tuple(
                up_down[a] for up_down, a in zip(self._node_views, key, strict=True))))
        return got

    def routes(self, avail: Sequence[bool]) -> list[RouteEntry]:
        """A `RouteEntry` per class, in CLASSES order."""
        key = tuple(avail)
        got = self._routes.find(key)
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
            self._routes.keep(key, got)
        return got

    def stages(self, view: ClusterView) -> StageEntry:
        """The policy's stage plan for this view (`Policy.stages`), per node."""
        key = tuple(n.available for n in view.nodes)
        got = self._stages.find(key)
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
            self._stages.keep(key, got)
        return got
