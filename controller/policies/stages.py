"""The stage plan (`fogsdn.stages`) of a scenario's size-based policy (pure)."""

from __future__ import annotations

from controller.policies import initial_view, make_policy
from controller.policies.size_based import SitaE, SitaU, Tags
from fogsdn.scenario import Scenario
from fogsdn.stages import StagePlan, stage_port


def stage_plan(scenario: Scenario) -> StagePlan:
    """SITA's size intervals or TAGS's stages over the hosts (all up, as a run starts);
    kind "none" for any other policy. PolicyError where the cutoffs cannot be chosen."""
    policy = make_policy(scenario.policy, scenario.workload)
    if not isinstance(policy, SitaE | SitaU | Tags):
        return StagePlan("none")
    view = initial_view(scenario)
    hosts = tuple(n.name for n in view.nodes if n.available)
    return StagePlan("tags" if isinstance(policy, Tags) else "sita", hosts,
                     policy.cutoffs(view))


__all__ = ["StagePlan", "stage_plan", "stage_port"]
