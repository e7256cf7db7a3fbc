"""The policy the live controller runs now: its select groups and its decision for one
new connection (pure). A swap replaces it whole, so a packet-in never sees a mix.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fogsdn.controller.flow_tables import GROUP_ID, bucket_weights
from fogsdn.controller.learner_reports import LearnerReports
from fogsdn.controller.path_choice import PathRouter, connection_path, path_router
from fogsdn.controller.pipeline import Flow, Topology
from fogsdn.controller.policy_guard import GuardedPolicy
from fogsdn.core.scenario import Scenario, TaskClass
from fogsdn.models.network_power import PathOption
from fogsdn.policies import ClusterView, Policy, Request, is_per_request, routes_for
from fogsdn.policies.watchdog import thread_watchdog

Buckets = list[tuple[str, int]]  # one select group's (node, weight), `bucket_weights`


@dataclass(frozen=True)
class ConnectionChoice:
    """What the controller does for one new connection, besides its dispatch rule."""

    node: str
    decide_ms: float  # the policy's own time (issue 9)
    path: list[str] | None  # the switches of its own path, for a policy that chooses paths
    option: PathOption | None  # the option chosen from the policy's menu, as it was offered
    path_flows: list[tuple[str, Flow]]  # (switch, rule) in the order they are sent
    curve_rows: str  # the learner's epochs that closed since (learning_curve.csv lines)
    agent: dict[str, object] | None  # a learning agent's state, in some decision events


@dataclass(frozen=True)
class RunningPolicy:
    """The policy a controller runs now and what follows from it."""

    scenario: Scenario  # with this policy
    policy: GuardedPolicy  # each call guarded (fogsdn.controller.policy_guard)
    per_request: bool  # `decide` per connection, as every engine asks it
    router: PathRouter | None  # seed 002a: a policy that chooses each connection's path
    reports: LearnerReports  # its policy epoch's learning curve and agent state

    @property
    def learns_per_request(self) -> bool:
        """Whether the policy is told each request's response time (`answered`)."""
        return self.policy.policy.learns_per_request

    @classmethod
    def start(cls, scenario: Scenario, built: Policy, on_failure: Callable[[str, str], None],
              policy_epoch: int) -> RunningPolicy:
        """`built` run as policy epoch `policy_epoch`, its choices drawn from the
        scenario's seed, its failures told to `on_failure`."""
        # its calls under the time limit (FOGSDN_POLICY_TIME_LIMIT_S): a loop is stopped
        guarded = GuardedPolicy(built, random.Random(scenario.seed), on_failure,
                                thread_watchdog())
        return cls(scenario, guarded,
                   is_per_request(built), path_router(scenario, built),
                   LearnerReports(policy_epoch, built.name))

    def swapped(self, scenario: Scenario, built: Policy) -> RunningPolicy:
        """The next policy epoch, running `built` (`policy_swap.build_swap`'s answer)."""
        return RunningPolicy.start(scenario, built, self.policy.on_failure,
                                   self.reports.policy_epoch + 1)

    def group_changes(self, view: ClusterView, installed: Mapping[TaskClass, Buckets],
                      initial: bool) -> dict[TaskClass, Buckets]:
        """The select-group buckets that differ from `installed` (all where `initial`): a
        per-request policy's too, its fallback while the controller is away."""
        table = self.policy.routes(view)
        wanted = {cls: bucket_weights(routes_for(table, cls)) for cls in GROUP_ID}
        return {cls: b for cls, b in wanted.items() if initial or installed.get(cls) != b}

    def connection(self, view: ClusterView, request: Request, client_port: int,
                   topo: Topology, model_ms: Callable[[], float], idle_s: int
                   ) -> ConnectionChoice:
        """Decide one connection and, for a policy that chooses paths, its own path
        (`model_ms`: the clock; its rules expire `idle_s` after its last packet)."""
        t0 = time.perf_counter()
        node = self.policy.decide(view, request)
        decide_ms = (time.perf_counter() - t0) * 1000.0
        path: list[str] | None = None
        option: PathOption | None = None
        flows: list[tuple[str, Flow]] = []
        if self.router is not None and request.client in topo.graph:
            option, flows = connection_path(
                self.router, lambda menu: self.policy.choose_path(view, request, node, menu),
                topo, request.client, node, client_port, model_ms(), idle_s)
            path = list(option.switches)
        learner = self.policy.policy
        return ConnectionChoice(node, decide_ms, path, option, flows,
                                self.reports.new_rows(learner.learning_curve()),
                                self.reports.agent_state(learner))


class DecidedSyns:
    """Each recent connection's worker by client address, port and initial sequence
    number: a retransmitted SYN goes where its first went, a reused port is decided
    afresh (a 5-tuple rule in the switch cannot tell the two apart).
    """

    def __init__(self, keep_s: float = 10.0) -> None:
        if keep_s <= 0:
            raise ValueError(f"DecidedSyns: keep_s > 0, got {keep_s}")
        self.keep_s = keep_s  # longer than TCP's SYN retries within a client's timeout
        self._by_key: dict[tuple[str, int], tuple[int, str, float]] = {}  # insertion order

    def retransmitted(self, client_ip: str, port: int, seq: int, t: float) -> str | None:
        """The worker a SYN with this sequence number went to, if one went recently."""
        self._expire(t)
        got = self._by_key.get((client_ip, port))
        return got[1] if got is not None and got[0] == seq else None

    def decided(self, client_ip: str, port: int, seq: int, worker_ip: str, t: float) -> None:
        self._by_key.pop((client_ip, port), None)  # re-inserted last: the dict stays in time order
        self._by_key[(client_ip, port)] = (seq, worker_ip, t)

    def _expire(self, t: float) -> None:
        while self._by_key:
            key, (_, _, t0) = next(iter(self._by_key.items()))
            if t - t0 <= self.keep_s:
                return
            del self._by_key[key]


__all__ = ["Buckets", "ConnectionChoice", "DecidedSyns", "RunningPolicy"]
