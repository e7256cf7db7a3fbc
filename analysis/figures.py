"""Exact curves for seed 000's figures: every scheme along a scenario's sweep (pure)."""

from __future__ import annotations

import math
from typing import Any

from analysis.model_params import OutsideModel, exact_prediction
from fogsdn.scenario import Scenario

METRICS: tuple[str, ...] = ("W", "outage", "blocking", "drop_prob")
# curve name -> (policy, class): NoDiff and Basic treat the classes alike
CURVES: dict[str, tuple[str, str]] = {
    "proposed_hp": ("prioritized", "hp"),
    "proposed_lp": ("prioritized", "lp"),
    "nodiff": ("nodiff", "hp"),
    "basic": ("basic", "hp"),
}


def exact_curves(scenario: Scenario) -> dict[str, Any]:
    """Exact W, outage, blocking and drop probability of the four curves at each x.

    x is the sweep's values (the scenario itself, x = nan, without a sweep). A point
    outside the model has None and its reason in `outside_model`.
    """
    if scenario.sweep is None:
        xs: list[float] = [math.nan]
        param = ""
    else:
        xs = [float(v) for v in scenario.sweep.values]
        param = scenario.sweep.parameter
    curves: dict[str, dict[str, list[float | None]]] = {
        name: {m: [] for m in METRICS} for name in CURVES
    }
    outside: list[str | None] = []
    cache: dict[tuple[float, str], Any] = {}
    for x in xs:
        reason: str | None = None
        for name, (policy, cls) in CURVES.items():
            over: dict[str, Any] = {"policy.name": policy}
            if param:
                over[param] = x
            key = (x, policy)
            if key not in cache:
                try:
                    sc = scenario.with_overrides(over)
                    sc = sc.model_copy(update={"sweep": None})
                    cache[key] = exact_prediction(sc)
                except OutsideModel as err:
                    cache[key] = None
                    reason = str(err)
            pr = cache[key]
            for m in METRICS:
                curves[name][m].append(None if pr is None else float(getattr(pr.cls(cls), m)))
        outside.append(reason)
    return {"parameter": param, "x": xs, "deadline_ms": scenario.deadline_ms,
            "curves": curves, "outside_model": outside}
