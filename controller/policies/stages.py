"""Live size-based dispatch (seed 002b) as TCP destination ports the switch matches (pure).

The service listens on `service_port`; a size-based policy's stage i (host i in
scenario order) is reached at `service_port + 1 + i` on the service address. The
controller installs one proactive rule per stage (new connection to that port ->
conntrack NAT to host i's worker at `service_port`), so no request needs the
controller:

* SITA (sita_e, sita_u): the client, which knows its task's size, picks the port of
  the size's interval; the interval travels in the destination port.
* TAGS: every task starts at stage 0; the worker at stage i serves it up to the
  cutoff s_i and answers `killed`; the client re-sends the same request id to stage
  i + 1's port.

Other policies use the service port itself (select groups or the per-request path).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

from controller.policies import initial_view, make_policy
from controller.policies.size_based import SitaE, SitaU, Tags
from fogsdn.scenario import Scenario


@dataclass(frozen=True)
class StagePlan:
    kind: Literal["sita", "tags", "none"]
    hosts: tuple[str, ...] = ()  # stage i is hosts[i]
    cutoffs: tuple[float, ...] = ()  # s_1 < ... < s_(h-1), size units

    def first_stage(self, size: float) -> int | None:
        """The stage a new task of this size goes to (None: the plain service port)."""
        if self.kind == "sita":
            return bisect_left(self.cutoffs, size)
        if self.kind == "tags":
            return 0
        return None

    def next_stage(self, stage: int) -> int | None:
        """Where a task killed at `stage` restarts (TAGS), None after the last."""
        return stage + 1 if self.kind == "tags" and stage + 1 < len(self.hosts) else None

    def kill_after(self, host: str) -> float | None:
        """The size at which `host` kills a task (TAGS stages but the last), else None."""
        if self.kind != "tags" or host not in self.hosts:
            return None
        i = self.hosts.index(host)
        return self.cutoffs[i] if i < len(self.cutoffs) else None


def stage_port(service_port: int, stage: int) -> int:
    return service_port + 1 + stage


def stage_plan(scenario: Scenario) -> StagePlan:
    """The stages of a scenario's policy (all nodes up, as at the start of a run)."""
    policy = make_policy(scenario.policy, scenario.workload)
    if not isinstance(policy, SitaE | SitaU | Tags):
        return StagePlan("none")
    view = initial_view(scenario)
    hosts = tuple(n.name for n in view.nodes if n.available)
    return StagePlan("tags" if isinstance(policy, Tags) else "sita", hosts,
                     policy.cutoffs(view))


__all__ = ["StagePlan", "stage_plan", "stage_port"]
