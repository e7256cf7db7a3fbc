"""Size-based scenarios (seed 002b): the prediction for a Scenario, measured means from
a trace or the simulator's rows, and the two side by side.

`fogsdn.models.size_assignment` holds the formulas; this module maps a Scenario onto them (or
says why no model applies) and measures the same W, wait and slowdown, per completing
host and overall.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from fogsdn.core.scenario import Role, Scenario, SizeSpec, load_scenario, parse_scenario
from fogsdn.core.summary import json_float, json_object, json_safe, write_summary
from fogsdn.core.trace import Outcome, TraceRow, iter_trace
from fogsdn.exact.model_params import OutsideModel
from fogsdn.measure.metrics import replications_ci
from fogsdn.models.size_assignment import (
    SizeModelError,
    SizePrediction,
    moment,
    predict_random,
    predict_sita,
    predict_tags,
)
from fogsdn.policies import PolicyError, initial_view, make_policy, stage_plan
from fogsdn.policies.size_based import SIZE_POLICIES

NO_MODEL = {
    "round_robin": "round_robin has no closed-form model here (Erlang arrivals per host)",
    "least_work_left": "least_work_left is M/G/h FCFS, which has no exact closed form "
                       "for general sizes",
}


def is_size_scenario(scenario: Scenario) -> bool:
    """A seed-002b policy, or any whose stage plan (`Policy.stages`) has stages."""
    if scenario.policy.name in SIZE_POLICIES:
        return True
    try:
        return stage_plan(scenario).kind != "none"
    except PolicyError:
        return False


def predict_scenario(scenario: Scenario) -> SizePrediction:
    """The per-host M/G/1 prediction for a size-based scenario, or OutsideModel(reason).
    The model is the policy's stage plan (`Policy.stages`): size intervals (SITA),
    kill and restart (TAGS), or, for `random`, none."""
    name = scenario.policy.name
    if name in NO_MODEL:
        raise OutsideModel(NO_MODEL[name])
    if scenario.churn.eta > 0 or scenario.nodes_with(Role.OFN) and \
            scenario.churn.initial == "unavailable":
        raise OutsideModel("the size-based models have no OFN churn")
    wl = scenario.workload
    try:
        plan = make_policy(scenario.policy, wl).stages(initial_view(scenario))
    except PolicyError as err:
        raise OutsideModel(str(err)) from None
    if plan.kind == "none" and name != "random":
        raise OutsideModel(f"policy {name!r} is not a size-based policy")
    lam = wl.lambda_hp + wl.lambda_lp
    mu = {n.name: n.mu for n in scenario.nodes}
    names = list(plan.hosts) if plan.kind != "none" else list(mu)
    mus = [mu[h] for h in names]
    try:
        if plan.kind == "sita":
            pred = predict_sita(lam, wl.size, plan.cutoffs, mus, names, name)
        elif plan.kind == "tags":
            pred = predict_tags(lam, wl.size, plan.cutoffs, mus, names)
        else:
            pred = predict_random(lam, wl.size, mus, names)
    except SizeModelError as err:
        raise OutsideModel(str(err)) from None
    hot = [h for h in pred.hosts if h.rho >= 1.0]
    if hot:
        raise OutsideModel(f"host {hot[0].name} has load rho = {hot[0].rho:.4g} >= 1 "
                           "(no steady state)")
    if not math.isfinite(pred.W):
        raise OutsideModel("the mean response time is infinite")
    if any(n.capacity < 100_000 for n in scenario.nodes):
        pred = replace(pred, notes=(*pred.notes, "the model has unbounded queues; the "
                                    "scenario's capacities are taken as unbounded"))
    return pred


# -- measuring ------------------------------------------------------------------------


@dataclass
class _Sums:
    n: int = 0
    w: float = 0.0
    wait: float = 0.0
    slowdown: float = 0.0
    wasted: float = 0.0

    def add(self, w: float, wait: float, slowdown: float, wasted: float) -> None:
        self.n += 1
        self.w += w
        self.wait += wait
        self.slowdown += slowdown
        self.wasted += wasted

    def means(self) -> dict[str, float]:
        n = self.n or math.nan
        return {"count": self.n, "W": self.w / n, "wait": self.wait / n,
                "slowdown": self.slowdown / n, "wasted": self.wasted / n}


@dataclass
class SizeStats:
    """Streaming means over answered requests sent after warm-up: a row sink for
    `fogsdn.sim.engine.simulate` and a trace reader."""

    scenario: Scenario
    overall: _Sums = field(default_factory=_Sums)
    hosts: dict[str, _Sums] = field(default_factory=dict)
    other: int = 0  # blocked / timeout / lost rows after warm-up

    def __post_init__(self) -> None:
        self._names = [n.name for n in self.scenario.nodes]
        self._mu = {n.name: n.mu for n in self.scenario.nodes}
        self._warm = self.scenario.warmup_ms

    def add(self, node: str, size: float, response: float, busy: float, wasted: float) -> None:
        wait = max(response - busy, 0.0)
        sd = response / (size / self._mu[node])
        self.overall.add(response, wait, sd, wasted)
        self.hosts.setdefault(node, _Sums()).add(response, wait, sd, wasted)

    def __call__(self, rows: list[tuple[Any, ...]]) -> None:
        warm, names = self._warm, self._names
        for r in rows:
            if r[6] < warm:
                continue
            if r[1] != 0:
                self.other += 1
                continue
            wasted = r[12] if len(r) > 12 else 0.0
            self.add(names[r[7]], r[5], r[0] - r[6], r[8], wasted)

    def add_trace(self, rows: Iterable[TraceRow]) -> None:
        """Trace rows: node_ms is the request's time from first send to the final answer
        at the workers (the simulator) or at the final worker (live)."""
        for r in rows:
            if r.t_send < self._warm:
                continue
            if r.outcome is not Outcome.OK or math.isnan(r.node_ms):
                self.other += 1
                continue
            wasted = 0.0 if math.isnan(r.wasted_ms) else r.wasted_ms
            busy = r.service_ms if not math.isnan(r.service_ms) else r.nominal_ms
            self.add(r.node, r.size, r.node_ms, busy, wasted)

    def summary(self) -> dict[str, Any]:
        return {"overall": self.overall.means(), "other_outcomes": self.other,
                "hosts": {k: v.means() for k, v in sorted(self.hosts.items())}}


def overall(summary: Mapping[str, object], key: str) -> float:
    """One of a `SizeStats.summary`'s overall means (count, W, wait, slowdown, wasted), as
    read back: KeyError where it is missing, TypeError where it is not a number."""
    return json_float(json_object(summary["overall"], "overall")[key])


def replicated(summaries: Sequence[Mapping[str, object]]) -> dict[str, dict[str, float]]:
    """Mean and 95 % half-width across replications of overall W, wait and slowdown."""
    cis = {key: replications_ci([overall(s, key) for s in summaries])
           for key in ("W", "wait", "slowdown")}
    return {key: {"mean": ci.mean, "ci95": ci.half_width, "n": ci.n} for key, ci in cis.items()}


class Gap(TypedDict):
    measured: float
    predicted: float
    rel_gap: float


class SizeComparison(TypedDict):
    """`comparison`: the measured overall means beside the prediction."""

    model: str
    exact: bool
    W: Gap
    wait: Gap
    slowdown: Gap


def comparison(measured: Mapping[str, object], pred: SizePrediction) -> SizeComparison:
    """Measured overall means beside the prediction (relative gaps)."""

    def gap(key: str, p: float) -> Gap:
        m = overall(measured, key)
        rel = (m - p) / p if p and math.isfinite(p) and math.isfinite(m) else math.nan
        return {"measured": m, "predicted": p, "rel_gap": rel}

    return {"model": str(pred.to_dict()["model"]), "exact": pred.exact,
            "W": gap("W", pred.W), "wait": gap("wait", pred.wait),
            "slowdown": gap("slowdown", pred.slowdown)}


class SizeBlock(TypedDict):
    """summary.json's `size_based` (`attach_size_prediction`)."""

    measured: dict[str, object]  # `SizeStats.summary`
    outside_model: NotRequired[str]
    predicted: NotRequired[dict[str, object]]  # `SizePrediction.to_dict`
    comparison: NotRequired[SizeComparison]


# -- scenario building (tests, figures) ---------------------------------------------------


def bounded_pareto(alpha: float, low: float, high: float) -> SizeSpec:
    return SizeSpec(distribution="bounded_pareto", shape=alpha, low=low, high=high)


def size_scenario(policy: str, hosts: int, load: float, size: SizeSpec, *, seed: int = 1,
                  name: str = "size", params: Mapping[str, object] | None = None,
                  warmup_ms: float = 0.0, duration_ms: float = 1e12) -> Scenario:
    """`hosts` identical hosts (mu = 1, unbounded queues) at total load `load`
    (lambda = load * hosts / E[size]), every task in class LP."""
    lam = load * hosts / moment(size, 1)
    return parse_scenario({
        "name": name, "seed": seed, "duration_ms": duration_ms, "warmup_ms": warmup_ms,
        "timeout_ms": 1e12, "time_scale": 1.0, "deadline_ms": 1e12,
        "workload": {"lambda_hp": 0.0, "lambda_lp": lam, "clients": 1,
                     "size": size.model_dump(exclude_none=True)},
        "nodes": [{"name": f"h{i + 1}", "role": "fn", "mu": 1.0, "capacity": 100_000}
                  for i in range(hosts)],
        "policy": {"name": policy, "params": dict(params or {})},
    }, source=name)


def attach_size_prediction(out: Path) -> str:
    """For a size-based run directory: measured overall/per-host means from trace.csv,
    the prediction (or why there is none) and the gaps, into summary.json["size_based"];
    returns the lines to print."""
    sc = load_scenario(out / "scenario.yaml")
    stats = SizeStats(sc)
    trace = out / "trace.csv"
    if trace.exists():
        stats.add_trace(iter_trace(trace))
    measured = stats.summary()
    block: SizeBlock = {"measured": measured}
    o = measured["overall"]
    lines = [f"[size-based] {sc.policy.name}: measured W {o['W']:.4g} ms, wait {o['wait']:.4g}"
             f" ms, slowdown {o['slowdown']:.4g} over {o['count']} answered requests"]
    try:
        pred = predict_scenario(sc)
    except OutsideModel as err:
        block["outside_model"] = str(err)
        lines.append(f"[size-based] no prediction: {err}")
    else:
        block["predicted"] = pred.to_dict()
        block["comparison"] = comparison(measured, pred)
        kind = "exact" if pred.exact else "approximation"
        lines.append(f"[size-based] predicted ({kind}): W {pred.W:.4g} ms, wait "
                     f"{pred.wait:.4g} ms, slowdown {pred.slowdown:.4g}")
    path = out / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    summary["size_based"] = json_safe(block)
    write_summary(path, summary)
    return "\n".join(lines)


__all__ = ["NO_MODEL", "SizeStats", "attach_size_prediction", "bounded_pareto", "comparison",
           "is_size_scenario", "predict_scenario", "replicated", "size_scenario"]
