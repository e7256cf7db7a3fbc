"""A scenario with its policy resolved: what every entry point runs (one error path),
here so that no engine or CLI imports another to resolve one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fogsdn.core.scenario import Scenario, absolute_policy_module, load_scenario
from fogsdn.policies import PolicyError, make_policy, probe_policy


def resolve_scenario(path: str | Path, policy: str | None = None,
                     overrides: Mapping[str, Any] | None = None,
                     policy_module: str | None = None) -> Scenario:
    """Load, apply `--policy`, `--policy-module` (relative to the working directory) and
    other overrides, and check the policy builds and answers `routes`; the module's one
    policy is named in the result. ScenarioError or PolicyError, one line.
    """
    sc = load_scenario(path)
    over = dict(overrides or {})
    if policy_module:
        over["policy.module"] = absolute_policy_module(policy_module, Path.cwd())
        if not policy:
            over["policy.name"] = ""  # the module's one policy, unless --policy names one
    if policy:
        over["policy.name"] = policy
    if over:
        sc = sc.with_overrides(over)
    try:
        built = make_policy(sc.policy, sc.workload)
        if sc.policy.name != built.name:
            sc = sc.with_overrides({"policy.name": built.name})
        probe_policy(built, sc)
    except PolicyError as err:
        raise PolicyError(f"{path}: {err}") from None
    return sc
