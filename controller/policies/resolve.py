"""A scenario with its policy resolved: what every entry point runs (one error path).

Here, not in an engine, so that every engine and CLI (runner, simulator, sweeps,
predict, the checker) resolves a scenario the same way without importing another.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.policies import PolicyError, make_policy, probe_policy
from fogsdn.scenario import Scenario, absolute_policy_module, load_scenario


def resolve_scenario(path: str | Path, policy: str | None = None,
                     overrides: Mapping[str, Any] | None = None,
                     policy_module: str | None = None) -> Scenario:
    """Load, apply `--policy`, `--policy-module` and other overrides, and check the
    policy can be built and answers `routes`.

    A `--policy-module` file is relative to the working directory (a scenario's
    `policy.module` to the scenario file) and made absolute here; the module's one policy
    is named in the returned scenario, so every process and report sees the same policy.
    Raises ScenarioError or PolicyError with one line naming the field or the file.
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
