"""Policy epochs of a live run (issue 21): which policy ran over which span of model
time, and each span's measured figures beside the exact prediction for its own policy
(quasi-stationary, biased just after a swap: docs/view.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from fogsdn.core.scenario import Scenario, ScenarioError
from fogsdn.core.summary import json_float
from fogsdn.core.trace import TraceRow
from fogsdn.exact.ctmc import CLASSES
from fogsdn.exact.model_params import OutsideModel, exact_prediction
from fogsdn.measure.comparison import comparison_block, comparison_table
from fogsdn.measure.metrics import measured_summary


@dataclass(frozen=True)
class PolicyEpoch:
    """One policy's span, model ms, `to_ms` None while it runs."""

    policy: str
    spec: Mapping[str, object]
    from_ms: float
    to_ms: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {"policy": self.policy, "from_ms": self.from_ms, "to_ms": self.to_ms,
                "spec": dict(self.spec)}


@dataclass
class EpochLog:
    """The epochs so far: the first opens at 0, each swap closes one and opens the next."""

    epochs: list[PolicyEpoch] = field(default_factory=list)

    def start(self, policy: str, spec: Mapping[str, object], t_ms: float) -> None:
        t = max(0.0, t_ms)
        if self.epochs and self.epochs[-1].to_ms is None:
            t = max(t, self.epochs[-1].from_ms)
        self.close(t)
        self.epochs.append(PolicyEpoch(policy, dict(spec), t))

    def close(self, t_ms: float) -> None:
        if self.epochs and self.epochs[-1].to_ms is None:
            last = self.epochs[-1]
            self.epochs[-1] = replace(last, to_ms=max(last.from_ms, t_ms))

    @property
    def current(self) -> PolicyEpoch | None:
        return self.epochs[-1] if self.epochs else None

    def to_list(self) -> list[dict[str, object]]:
        return [e.to_dict() for e in self.epochs]


def epoch_scenario(sc: Scenario, spec: Mapping[str, object]) -> Scenario:
    """The run's scenario with one epoch's policy."""
    return sc.with_overrides({"policy": dict(spec)})


def rows_in(rows: Sequence[TraceRow], from_ms: float, to_ms: float | None) -> list[TraceRow]:
    """Requests sent during [from_ms, to_ms)."""
    end = math.inf if to_ms is None else to_ms
    return [r for r in rows if from_ms <= r.t_send < end]


def epoch_ms(epoch: Mapping[str, object], key: str) -> float:
    """An epoch's `from_ms` or `to_ms` (KeyError, or TypeError or ValueError where it is
    not a number)."""
    return json_float(epoch[key])


def epoch_spec(epoch: Mapping[str, object]) -> Mapping[str, object]:
    """An epoch's policy spec (just its name where it has none)."""
    spec = epoch.get("spec") or {"name": epoch["policy"]}
    if not isinstance(spec, Mapping):
        raise TypeError(f"policy epoch spec: an object, got {spec!r}")
    return spec


def epoch_comparisons(sc: Scenario, rows: Sequence[TraceRow],
                      epochs: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """Each epoch with `measured` (its requests after the warm-up), `predicted` (the
    exact model for its policy, or None with `outside_model`) and `comparison`."""
    out = []
    for ep in epochs:
        block: dict[str, object] = {k: ep[k] for k in ("policy", "from_ms", "to_ms")}
        block.update({k: v for k, v in ep.items() if k not in block and k not in
                      ("measured", "predicted", "comparison", "outside_model")})
        mine = rows_in(rows, epoch_ms(ep, "from_ms"),
                       None if ep.get("to_ms") is None else epoch_ms(ep, "to_ms"))
        measured = measured_summary(mine, sc.warmup_ms, sc.deadline_ms)
        block["requests"] = len(mine)
        block["measured"] = measured
        try:
            pred = exact_prediction(epoch_scenario(sc, epoch_spec(ep)))
        except (OutsideModel, ScenarioError) as err:
            block["predicted"] = None
            block["outside_model"] = str(err)
        else:
            d = pred.to_dict()
            block["predicted"] = {cls: d[cls] for cls in CLASSES}
            block["comparison"] = {cls: comparison_block(measured[cls], d[cls])  # type: ignore[arg-type]
                                   for cls in CLASSES}
        out.append(block)
    return out


def epochs_table(sc: Scenario, blocks: Sequence[Mapping[str, object]]) -> str:
    """One comparison table per epoch (or its one-line reason)."""
    lines = ["per policy epoch (each against the exact model for its own policy)"]
    for b in blocks:
        end = "end" if b.get("to_ms") is None else f"{epoch_ms(b, 'to_ms'):g}"
        head = f"epoch {b['policy']} [{epoch_ms(b, 'from_ms'):g}, {end}) model ms"
        comp = b.get("comparison")
        if comp:
            if not isinstance(comp, dict):
                raise TypeError(f"epoch comparison: an object, got {comp!r}")
            lines.append(comparison_table(sc, comp, title=f"{head}: measured vs exact"))
        else:
            lines.append(f"{head}: {b.get('requests', 0)} requests; outside the model "
                         f"({b.get('outside_model', 'no prediction')})")
    return "\n".join(lines)
