"""Measured beside exact, as data and as text (pure): the compared figures of a class,
of power, and of each phase of a time-varying workload.

The measured side is each answered request's node sojourn (`node_ms`), the network's
share being in `W_e2e` only. A time-varying workload is compared phase by phase with
the model at that phase's rates (quasi-stationary, biased near each change:
docs/simulator.md), overall with the phases' mixture.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NotRequired, SupportsFloat, SupportsIndex, TypedDict

import numpy as np

from fogsdn.core.scenario import Scenario
from fogsdn.core.trace import TraceRow
from fogsdn.exact.class_prediction import CLASSES, ClassPrediction
from fogsdn.exact.model_params import AnyPrediction, OutsideModel, exact_prediction, node_busy
from fogsdn.measure.metrics import measured_summary
from fogsdn.models.power_model import (
    predicted_power,
    server_power_gap,
    switch_ports,
)


def number(x: object) -> float:
    """x as a float; NaN where it is none (missing, null, not a number)."""
    if not isinstance(x, str | bytes | SupportsFloat | SupportsIndex):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _mapping(x: object, what: str) -> Mapping[str, object]:
    """A block inside a summary: {} where it is missing or empty, TypeError where it is
    not an object."""
    if not x:
        return {}
    if not isinstance(x, Mapping):
        raise TypeError(f"{what}: an object, got {type(x).__name__}")
    return x


class Interval(TypedDict):
    """One compared figure: measured with its 95 % half-width, and predicted."""

    measured: float
    ci95: float
    predicted: float
    ci_covers: bool | None


class GapInterval(Interval):
    rel_gap: float  # (measured - predicted) / predicted


class ClassComparison(TypedDict):
    """`comparison_block`: one class, measured against predicted."""

    basis: str
    W: GapInterval
    blocking: Interval
    outage: Interval
    percentiles: NotRequired[dict[str, Interval]]


def _interval(measured: float, ci: float, predicted: float) -> Interval:
    """One compared figure; `ci_covers` is None where there is no finite interval (too
    few samples for it, e.g. a p99 from a few hundred requests): nothing to judge."""
    known = math.isfinite(ci) and math.isfinite(measured) and math.isfinite(predicted)
    covers = bool(abs(measured - predicted) <= ci) if known else None
    return {"measured": measured, "ci95": ci, "predicted": predicted, "ci_covers": covers}


def comparison_block(measured: Mapping[str, object], predicted: Mapping[str, object]
                     ) -> ClassComparison:
    """Measured vs predicted for one class: W, blocking, outage and the percentiles, each
    with its 95 % interval and whether that interval covers the prediction."""

    def figure(k: str) -> Interval:
        return _interval(number(measured.get(k)), number(measured.get(f"{k}_ci95")),
                         number(predicted.get(k)))

    w = figure("W")
    w_m, w_p = w["measured"], w["predicted"]
    gap = (w_m - w_p) / w_p if (w_p and math.isfinite(w_p) and math.isfinite(w_m)) else math.nan
    out: ClassComparison = {"basis": "node_ms", "W": {**w, "rel_gap": gap},
                            "blocking": figure("blocking"), "outage": figure("outage")}
    m_pct = _mapping(measured.get("percentiles"), "measured percentiles")
    p_pct = _mapping(predicted.get("percentiles"), "predicted percentiles")
    if m_pct:
        out["percentiles"] = {}
        for name, v in m_pct.items():
            got = _mapping(v, f"measured {name}")
            out["percentiles"][name] = _interval(number(got.get("value")),
                                                 number(got.get("ci95")),
                                                 number(p_pct.get(name)))
    return out


def predicted_power_block(sc: Scenario, pred: AnyPrediction) -> dict[str, object]:
    """Exact mean server power from P(node busy); switches from the expected forwarded
    requests (accepted and blocked ones alike cross the switch)."""
    from fogsdn.core.scenario import scenario_graph

    rate = sc.workload.lambda_hp + sc.workload.lambda_lp
    return predicted_power(sc, node_busy(sc, pred), switch_ports(scenario_graph(sc)), rate)


class PowerFigure(TypedDict):
    measured: float
    predicted: float


class ServersPower(PowerFigure):
    rel_gap: float


class PowerComparison(TypedDict):
    """`power_comparison`: mean W per server and in total, measured beside exact."""

    nodes: dict[str, PowerFigure]
    servers_W: ServersPower
    switches_W: PowerFigure


def _total(block: Mapping[str, object], what: str) -> float:
    """The sum of a power block's per-element W (TypeError where one is not a number)."""
    values = _mapping(block.get("switches"), f"{what} switches").values()
    if not all(isinstance(v, int | float) for v in values):
        raise TypeError(f"{what} switches: numbers, got {list(values)!r}")
    return number(sum(v for v in values if isinstance(v, int | float)))


def power_comparison(measured: Mapping[str, object], predicted: Mapping[str, object]
                     ) -> PowerComparison:
    """Per node and in total (servers): measured mean W beside the exact one."""
    m_nodes = _mapping(measured.get("nodes"), "measured nodes")
    nodes: dict[str, PowerFigure] = {
        name: {"measured": number(m_nodes.get(name)), "predicted": number(w)}
        for name, w in _mapping(predicted.get("nodes"), "predicted nodes").items()}
    return {"nodes": nodes,
            "servers_W": {"measured": number(measured.get("servers_W")),
                          "predicted": number(predicted.get("servers_W")),
                          "rel_gap": server_power_gap(measured, predicted)},
            "switches_W": {"measured": _total(measured, "measured"),
                           "predicted": _total(predicted, "predicted")}}


def _f(x: object, digits: int = 4) -> str:
    v = number(x)
    return f"{v:.{digits}g}" if math.isfinite(v) else "n/a"


def _gap(x: object) -> str:
    """A relative gap as a signed percentage, or n/a."""
    v = number(x)
    return f"{v:+.1%}" if math.isfinite(v) else "n/a"


def _pm(x: Interval, digits: int = 3) -> str:
    """'measured ± half-width' of one compared figure."""
    return f"{_f(x['measured'], digits)} ± {_f(x['ci95'], 2)}"


def comparison_table(sc: Scenario, comp: Mapping[str, ClassComparison],
                     power: PowerComparison | None = None,
                     title: str = "measured vs exact CTMC") -> str:
    lines = [f"{title} ({sc.name}; node sojourn, model ms; ± 95 % interval, "
             "ok = the interval covers the exact value)",
             f"{'class':<6}{'W meas':>17}{'W exact':>10}{'gap':>8}{'ok':>4}"
             f"{'block meas':>22}{'exact':>10}{'ok':>4}{'outage meas':>22}{'exact':>10}{'ok':>4}"]

    def ok(x: Interval) -> str:
        return "n/a" if x["ci_covers"] is None else ("yes" if x["ci_covers"] else "no")

    for cls in CLASSES:
        c = comp[cls]
        w, b, o = c["W"], c["blocking"], c["outage"]
        lines.append(
            f"{cls.upper():<6}{_pm(w, 4):>17}{_f(w['predicted']):>10}"
            f"{_gap(w['rel_gap']):>8}{ok(w):>4}"
            f"{_pm(b):>22}{_f(b['predicted'], 3):>10}{ok(b):>4}"
            f"{_pm(o):>22}{_f(o['predicted'], 3):>10}{ok(o):>4}")
    if any("percentiles" in comp[cls] for cls in CLASSES):
        lines.append(f"{'class':<6}" + "".join(f"{n + ' meas':>17}{'exact':>8}{'ok':>4}"
                                               for n in ("p50", "p90", "p95", "p99")))
        for cls in CLASSES:
            pc = comp[cls].get("percentiles", {})
            lines.append(f"{cls.upper():<6}" + "".join(
                f"{_pm(pc[n]):>17}{_f(pc[n]['predicted'], 3):>8}{ok(pc[n]):>4}"
                if n in pc else f"{'n/a':>17}{'':>8}{'':>4}"
                for n in ("p50", "p90", "p95", "p99")))
    if power:
        lines.append(f"{'power (W)':<16}{'measured':>10}{'exact':>10}")
        for name, v in power["nodes"].items():
            lines.append(f"{'  ' + name:<16}{_f(v['measured']):>10}{_f(v['predicted']):>10}")
        sv = power["servers_W"]
        lines.append(f"{'  servers':<16}{_f(sv['measured']):>10}{_f(sv['predicted']):>10}"
                     f"{_gap(sv['rel_gap']):>8}")
        sw = power["switches_W"]
        lines.append(f"{'  switches':<16}{_f(sw['measured']):>10}{_f(sw['predicted']):>10}"
                     "  (estimate)")
    return "\n".join(lines)


PHASE_BASIS = "quasi-stationary: each phase at its own rates as if it lasted forever"


def phase_scenario(sc: Scenario, phase: int) -> Scenario:
    """The stationary scenario of one phase: both rates times its factor, no profile."""
    assert sc.workload.profile is not None
    f = sc.workload.profile.phases[phase].factor
    return sc.with_overrides({"workload.lambda_hp": sc.workload.lambda_hp * f,
                              "workload.lambda_lp": sc.workload.lambda_lp * f,
                              "workload.profile": None})


def _mixture(parts: list[tuple[float, ClassPrediction]]) -> dict[str, float]:
    """One class's overall prediction from (arrivals, phase prediction) pairs."""
    arrivals = sum(a for a, _ in parts)
    answered = [(a * (1.0 - p.blocking), p) for a, p in parts]
    n_ok = sum(x for x, _ in answered)
    out = {k: sum(a * getattr(p, k) for a, p in parts) / arrivals if arrivals else math.nan
           for k in ("blocking", "outage")}
    return {"W": sum(x * p.W for x, p in answered) / n_ok if n_ok > 0 else math.nan, **out}


class PhaseBlock(TypedDict):
    """One phase of a time-varying workload (`compare_phases`)."""

    phase: int
    factor: float
    duration_ms: float
    exposure_ms: float
    measured: dict[str, object]  # fogsdn.measure.metrics.measured_summary
    predicted: dict[str, object] | None  # per class, the exact model at the phase's rates
    outside_model: NotRequired[str]
    comparison: NotRequired[dict[str, ClassComparison]]


class PhaseFields(TypedDict):
    """What `compare_phases` adds to summary.json."""

    phases: list[PhaseBlock]
    prediction_basis: str
    predicted: dict[str, object] | None  # the phases' mixture, per class
    outside_model: NotRequired[str]
    comparison: NotRequired[dict[str, ClassComparison]]


def compare_phases(sc: Scenario, rows: list[TraceRow]) -> tuple[PhaseFields, str]:
    """(summary fields, table): `phases` (one block per phase), `predicted` (the
    mixture), `comparison` (overall against it)."""
    profile = sc.workload.rate_profile()
    assert profile is not None
    exposure = profile.exposure_ms(sc.warmup_ms, sc.duration_ms)
    rates = {"hp": sc.workload.lambda_hp, "lp": sc.workload.lambda_lp}
    phases: list[PhaseBlock] = []
    mix: dict[str, list[tuple[float, ClassPrediction]]] = {cls: [] for cls in CLASSES}
    lines = [f"per phase ({PHASE_BASIS})"]
    missing = []
    of_row = profile.phases_at(np.fromiter((r.t_send for r in rows), float, len(rows))).tolist()
    for i, phase in enumerate(sc.workload.profile.phases):  # type: ignore[union-attr]
        mine = [r for r, k in zip(rows, of_row, strict=True) if k == i]
        measured = measured_summary(mine, sc.warmup_ms, sc.deadline_ms)
        block: PhaseBlock = {"phase": i, "factor": phase.factor,
                             "duration_ms": phase.duration_ms,
                             "exposure_ms": exposure[i], "measured": measured, "predicted": None}
        if phase.factor == 0:  # an idle phase: no arrivals, nothing to compare
            block["outside_model"] = "no arrivals in this phase"
            phases.append(block)
            continue
        try:
            model = exact_prediction(phase_scenario(sc, i))
            pred = model.to_dict()
        except OutsideModel as err:
            block["outside_model"] = str(err)
            missing.append(f"phase {i}: {err}")
        else:
            block["predicted"] = {cls: pred[cls] for cls in CLASSES}
            block["comparison"] = {cls: comparison_block(measured[cls], pred[cls])  # type: ignore[arg-type]
                                   for cls in CLASSES}
            for cls in CLASSES:
                mix[cls].append((rates[cls] * phase.factor * exposure[i], model.cls(cls)))
            head = f"phase {i} (factor {phase.factor:g}, {phase.duration_ms:g} model ms)"
            lines.append(comparison_table(sc, block["comparison"],
                                          title=f"{head}: measured vs exact"))
        phases.append(block)
    out: PhaseFields = {"phases": phases, "prediction_basis": PHASE_BASIS, "predicted": None}
    if missing:
        out["outside_model"] = "; ".join(missing)
        lines.append(f"overall: no mixture prediction ({out['outside_model']})")
        return out, "\n".join(lines)
    overall_pred = {cls: _mixture(mix[cls]) for cls in CLASSES}
    overall = measured_summary(rows, sc.warmup_ms, sc.deadline_ms)
    out["predicted"] = {**overall_pred, "basis": "arrival-weighted mixture of the phases"}
    out["comparison"] = {cls: comparison_block(overall[cls], overall_pred[cls])  # type: ignore[arg-type]
                         for cls in CLASSES}
    lines.append(comparison_table(sc, out["comparison"],
                                  title="overall: measured vs the phases' mixture"))
    return out, "\n".join(lines)
