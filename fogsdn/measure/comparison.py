"""Measured beside exact, as data and as text (pure): the compared figures of a class,
of power, and of each phase of a time-varying workload.

The measured side is each answered request's node sojourn (`node_ms`), the network's
share being in `W_e2e` only. A time-varying workload is compared phase by phase with
the model at that phase's rates (quasi-stationary, biased near each change:
docs/simulator.md), overall with the phases' mixture.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fogsdn.core.scenario import Scenario
from fogsdn.core.trace import TraceRow
from fogsdn.exact.class_prediction import CLASSES
from fogsdn.exact.model_params import AnyPrediction, OutsideModel, exact_prediction, node_busy
from fogsdn.measure.metrics import measured_summary
from fogsdn.models.power_model import (
    predicted_power,
    server_power_gap,
    switch_ports,
)


def number(x: Any) -> float:
    """x as a float; NaN where it is none (missing, null, not a number)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _interval(measured: float, ci: float, predicted: float) -> dict[str, Any]:
    """One compared figure; `ci_covers` is None where there is no finite interval (too
    few samples for it, e.g. a p99 from a few hundred requests): nothing to judge."""
    known = math.isfinite(ci) and math.isfinite(measured) and math.isfinite(predicted)
    covers = bool(abs(measured - predicted) <= ci) if known else None
    return {"measured": measured, "ci95": ci, "predicted": predicted, "ci_covers": covers}


def comparison_block(measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    """Measured vs predicted for one class: W, blocking, outage and the percentiles, each
    with its 95 % interval and whether that interval covers the prediction."""
    out: dict[str, Any] = {"basis": "node_ms", **{
        k: _interval(number(measured.get(k)), number(measured.get(f"{k}_ci95")),
                     number(predicted.get(k))) for k in ("W", "blocking", "outage")}}
    w_m, w_p = out["W"]["measured"], out["W"]["predicted"]
    out["W"]["rel_gap"] = ((w_m - w_p) / w_p if (w_p and math.isfinite(w_p)
                                                  and math.isfinite(w_m)) else math.nan)
    m_pct = measured.get("percentiles") or {}
    p_pct = predicted.get("percentiles") or {}
    if m_pct:
        out["percentiles"] = {
            name: _interval(number(v.get("value")), number(v.get("ci95")), number(p_pct.get(name)))
            for name, v in m_pct.items()}
    return out


def predicted_power_block(sc: Scenario, pred: AnyPrediction) -> dict[str, object]:
    """Exact mean server power from P(node busy); switches from the expected forwarded
    requests (accepted and blocked ones alike cross the switch)."""
    from fogsdn.core.scenario import scenario_graph

    rate = sc.workload.lambda_hp + sc.workload.lambda_lp
    return predicted_power(sc, node_busy(sc, pred), switch_ports(scenario_graph(sc)), rate)


def power_comparison(measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    """Per node and in total (servers): measured mean W beside the exact one."""
    nodes = {name: {"measured": number(measured.get("nodes", {}).get(name)),
                    "predicted": number(w)}
             for name, w in predicted.get("nodes", {}).items()}
    return {"nodes": nodes,
            "servers_W": {"measured": number(measured.get("servers_W")),
                          "predicted": number(predicted.get("servers_W")),
                          "rel_gap": server_power_gap(measured, predicted)},
            "switches_W": {"measured": number(sum(measured.get("switches", {}).values())),
                           "predicted": number(sum(predicted.get("switches", {}).values()))}}


def _f(x: Any, digits: int = 4) -> str:
    v = number(x)
    return f"{v:.{digits}g}" if math.isfinite(v) else "n/a"


def _gap(x: Any) -> str:
    """A relative gap as a signed percentage, or n/a."""
    v = number(x)
    return f"{v:+.1%}" if math.isfinite(v) else "n/a"


def _pm(x: dict[str, Any], digits: int = 3) -> str:
    """'measured ± half-width' of one compared figure."""
    return f"{_f(x['measured'], digits)} ± {_f(x['ci95'], 2)}"


def comparison_table(sc: Scenario, comp: dict[str, Any], power: dict[str, Any] | None = None,
                     title: str = "measured vs exact CTMC") -> str:
    lines = [f"{title} ({sc.name}; node sojourn, model ms; ± 95 % interval, "
             "ok = the interval covers the exact value)",
             f"{'class':<6}{'W meas':>17}{'W exact':>10}{'gap':>8}{'ok':>4}"
             f"{'block meas':>22}{'exact':>10}{'ok':>4}{'outage meas':>22}{'exact':>10}{'ok':>4}"]

    def ok(x: dict[str, Any]) -> str:
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


def _mixture(parts: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """One class's overall prediction from (arrivals, phase prediction) pairs."""
    arrivals = sum(a for a, _ in parts)
    answered = [(a * (1.0 - p["blocking"]), p) for a, p in parts]
    n_ok = sum(x for x, _ in answered)
    out = {k: sum(a * p[k] for a, p in parts) / arrivals if arrivals else math.nan
           for k in ("blocking", "outage")}
    return {"W": sum(x * p["W"] for x, p in answered) / n_ok if n_ok > 0 else math.nan, **out}


def compare_phases(sc: Scenario, rows: list[TraceRow]) -> tuple[dict[str, Any], str]:
    """(summary fields, table): `phases` (one block per phase), `predicted` (the
    mixture), `comparison` (overall against it)."""
    profile = sc.workload.rate_profile()
    assert profile is not None
    exposure = profile.exposure_ms(sc.warmup_ms, sc.duration_ms)
    rates = {"hp": sc.workload.lambda_hp, "lp": sc.workload.lambda_lp}
    phases: list[dict[str, Any]] = []
    mix: dict[str, list[tuple[float, dict[str, Any]]]] = {cls: [] for cls in CLASSES}
    lines = [f"per phase ({PHASE_BASIS})"]
    missing = []
    of_row = profile.phases_at(np.fromiter((r.t_send for r in rows), float, len(rows))).tolist()
    for i, phase in enumerate(sc.workload.profile.phases):  # type: ignore[union-attr]
        mine = [r for r, k in zip(rows, of_row, strict=True) if k == i]
        measured = measured_summary(mine, sc.warmup_ms, sc.deadline_ms)
        block: dict[str, Any] = {"phase": i, "factor": phase.factor,
                                 "duration_ms": phase.duration_ms,
                                 "exposure_ms": exposure[i], "measured": measured}
        if phase.factor == 0:  # an idle phase: no arrivals, nothing to compare
            block["predicted"] = None
            block["outside_model"] = "no arrivals in this phase"
            phases.append(block)
            continue
        try:
            pred = exact_prediction(phase_scenario(sc, i)).to_dict()
        except OutsideModel as err:
            block["predicted"] = None
            block["outside_model"] = str(err)
            missing.append(f"phase {i}: {err}")
        else:
            block["predicted"] = {cls: pred[cls] for cls in CLASSES}
            block["comparison"] = {cls: comparison_block(measured[cls], pred[cls])  # type: ignore[arg-type]
                                   for cls in CLASSES}
            for cls in CLASSES:
                mix[cls].append((rates[cls] * phase.factor * exposure[i],
                                 pred[cls]))  # type: ignore[arg-type]
            head = f"phase {i} (factor {phase.factor:g}, {phase.duration_ms:g} model ms)"
            lines.append(comparison_table(sc, block["comparison"],
                                          title=f"{head}: measured vs exact"))
        phases.append(block)
    out: dict[str, Any] = {"phases": phases, "prediction_basis": PHASE_BASIS}
    if missing:
        out["predicted"] = None
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
