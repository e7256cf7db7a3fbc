"""Scenario resolution shared by the command-line entry points (one error path)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller.policies import PolicyError, make_policy
from fogsdn.scenario import Scenario, load_scenario


def resolve_scenario(path: str | Path, policy: str | None = None,
                     overrides: Mapping[str, Any] | None = None) -> Scenario:
    """Load, apply `--policy` and other overrides, and check the policy can be built.

    Raises ScenarioError or PolicyError with a one-line message naming the field.
    """
    sc = load_scenario(path)
    over = dict(overrides or {})
    if policy:
        over["policy.name"] = policy
    if over:
        sc = sc.with_overrides(over)
    try:
        make_policy(sc.policy)
    except PolicyError as err:
        raise PolicyError(f"{path}: {err}") from None
    return sc
