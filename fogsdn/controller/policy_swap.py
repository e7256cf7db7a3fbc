"""A policy swap in a running testbed (issue 21), as pure functions: the request made a
spec, built and checked before anything changes, and the OpenFlow entries that differ.
A request that fails anywhere changes nothing (`SwapError`, one line).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fogsdn.controller.pipeline import Flow, Topology, base_flows
from fogsdn.core.routing import NextHops
from fogsdn.core.scenario import PolicySpec, Scenario, ScenarioError, absolute_policy_module
from fogsdn.core.stages import StagePlan
from fogsdn.policies import Policy, PolicyError, make_policy, probe_policy, stage_plan
from fogsdn.policies.check import check_policy

SWAP_KEYS = frozenset({"name", "module", "params", "alpha"})
# beside the registration socket: a restarted controller runs it, not the scenario's
SWAPPED_POLICY_FILE = "policy.json"
CHECK_VIEWS = 40  # the checker's generated views for a live swap (a second, not minutes)
CHECK_TIMED = 200


class SwapError(ValueError):
    """A swap refused, one line; nothing was changed."""


def _scalar(key: str, v: object) -> float | int | str | bool:
    if isinstance(v, bool | int | str) or (isinstance(v, float) and math.isfinite(v)):
        return v
    raise SwapError(f"params.{key}: a number, string or boolean, got {v!r}")


def swap_spec(current: PolicySpec, request: Mapping[str, Any], cwd: Path) -> PolicySpec:
    """The spec a swap request names (`module` relative to `cwd`), `params` merged over
    the current ones, `alpha` kept unless given."""
    unknown = sorted(set(request) - SWAP_KEYS)
    if unknown:
        raise SwapError(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(SWAP_KEYS))})")
    name, module = request.get("name"), request.get("module")
    if name is None and module is None:
        raise SwapError("name or module: say which policy to run")
    for key, v in (("name", name), ("module", module)):
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise SwapError(f"{key}: a non-empty string, got {v!r}")
    params = request.get("params", {})
    if not isinstance(params, Mapping):
        raise SwapError(f"params: an object of name: value, got {type(params).__name__}")
    merged = {**current.params, **{str(k): _scalar(str(k), v) for k, v in params.items()}}
    alpha = request.get("alpha", current.alpha)
    try:
        return PolicySpec(name=str(name or ""), alpha=alpha, params=merged,
                          module=absolute_policy_module(str(module), cwd) if module else None)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "policy"
        raise SwapError(f"{where}: {first['msg']}") from None


def swapped_scenario(scenario: Scenario, spec: PolicySpec) -> Scenario:
    """The scenario with `spec` as its policy (re-validated)."""
    try:
        return scenario.with_overrides({"policy": spec.model_dump(exclude_none=True)})
    except ScenarioError as err:
        raise SwapError(str(err).splitlines()[0]) from None


def live_stages(sc: Scenario) -> tuple[StagePlan, str | None]:
    """The size-based stage rules for `sc`, and why there are none where it gives none."""
    try:
        return stage_plan(sc), None
    except PolicyError as err:
        return StagePlan("none"), str(err)


def restarted_scenario(scenario: Scenario, spec_json: str | None) -> Scenario:
    """The scenario with the last swapped policy (`SWAPPED_POLICY_FILE`'s text), if any."""
    if not spec_json:
        return scenario
    try:
        return build_swap(scenario, PolicySpec.model_validate_json(spec_json))[0]
    except ValueError as err:  # SwapError, or a torn file: the scenario's own policy
        raise SwapError(f"swapped policy not restored: {str(err).splitlines()[0]}") from None


def build_swap(scenario: Scenario, spec: PolicySpec) -> tuple[Scenario, Policy]:
    """Build and probe the new policy, refusing one whose size-based stages differ (set
    up with the workers); returns the scenario with the policy named as built."""
    sc = swapped_scenario(scenario, spec)
    try:
        built = make_policy(sc.policy, sc.workload)
        if sc.policy.name != built.name:
            sc = swapped_scenario(sc, sc.policy.model_copy(update={"name": built.name}))
        probe_policy(built, sc)
        before, after = live_stages(scenario)[0], live_stages(sc)[0]
    except PolicyError as err:
        raise SwapError(str(err).splitlines()[0]) from None
    if before != after:
        raise SwapError(f"policy {built.name!r}: its size-based stages differ from the "
                        "running ones (set up with the workers); not swappable live")
    return sc, built


def checked_swap(scenario: Scenario, spec: PolicySpec, views: int = CHECK_VIEWS
                 ) -> tuple[Scenario, Policy]:
    """`build_swap`, then the checker; its first failure refuses the swap."""
    sc, built = build_swap(scenario, spec)
    report = check_policy(built, sc, views=views, timed=CHECK_TIMED)
    if report.failures:
        raise SwapError(f"policy {built.name!r} fails the checker: {report.failures[0]}")
    return sc, built


def flow_changes(old: Sequence[Flow], new: Sequence[Flow]) -> tuple[list[Flow], list[Flow]]:
    """(entries to delete, flows to send) that take a switch from `old` to `new`."""
    have = {f.entry: f for f in old}
    want = {f.entry: f for f in new}
    gone = [f for e, f in have.items() if e not in want]
    send = [f for e, f in want.items() if have.get(e) != f]
    return gone, send


def dispatch_changes(topo: Topology, switch: str, hops: NextHops, was_proactive: bool,
                     proactive: bool, measure_rt: int) -> tuple[list[Flow], list[Flow]]:
    """`flow_changes` at one switch when the dispatch kind changes (none where it stays)."""
    return flow_changes(base_flows(topo, switch, hops, was_proactive, measure_rt),
                        base_flows(topo, switch, hops, proactive, measure_rt))
