"""Measured against exact: one run directory in, summary.json updated, a plot, a table.

What is compared is each answered request's node sojourn (`node_ms`: wait plus
service at the serving node) with the model's response time; the network's share
is in `W_e2e` on the measured side only. Under `handoff` the model's response time
runs from arrival at the OFN to completion at the FN.

Under a time-varying workload (`workload.profile`) no stationary prediction exists, so
each phase is compared with the exact model at that phase's rates, as if the phase
lasted forever (quasi-stationary). That is exact for phases long against the system's
relaxation time and biased near each change (a queue built in a busy phase drains in
the next): the per-phase table shows it. Overall, the prediction is the phases'
mixture: W weighted by each phase's answered requests, blocking and outage by its
arrivals; percentiles are compared per phase only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from analysis.ctmc import Prediction
from analysis.metrics import measured_summary, percentiles_ci
from analysis.model_params import AnyPrediction, OutsideModel, exact_prediction
from fogsdn.scenario import Role, Scenario, load_scenario
from fogsdn.summary import json_safe
from fogsdn.trace import Outcome, TraceRow, read_trace
from models.power_model import (
    busy_fraction,
    predicted_power,
    server_count,
    server_power_gap,
    switch_ports,
)

CLASSES = ("hp", "lp")


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _interval(measured: float, ci: float, predicted: float) -> dict[str, Any]:
    """One compared figure; `ci_covers` is None where there is no finite interval (too
    few samples for it, e.g. a p99 from a few hundred requests): nothing to judge."""
    known = math.isfinite(ci) and math.isfinite(measured) and math.isfinite(predicted)
    covers = bool(abs(measured - predicted) <= ci) if known else None
    return {"measured": measured, "ci95": ci, "predicted": predicted, "ci_covers": covers}


def comparison_block(measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    """Measured vs predicted for one class: W, blocking, outage and the percentiles, each
    with its 95 % interval and whether that interval covers the prediction."""
    w_m, ci = _num(measured.get("W")), _num(measured.get("W_ci95"))
    w_p = _num(predicted.get("W"))
    gap = (w_m - w_p) / w_p if (w_p and math.isfinite(w_p) and math.isfinite(w_m)) else math.nan
    out: dict[str, Any] = {
        "basis": "node_ms",
        "W": {**_interval(w_m, ci, w_p), "rel_gap": gap},
        "blocking": _interval(_num(measured.get("blocking")),
                              _num(measured.get("blocking_ci95")),
                              _num(predicted.get("blocking"))),
        "outage": _interval(_num(measured.get("outage")), _num(measured.get("outage_ci95")),
                            _num(predicted.get("outage"))),
    }
    m_pct = measured.get("percentiles") or {}
    p_pct = predicted.get("percentiles") or {}
    if m_pct:
        out["percentiles"] = {
            name: _interval(_num(v.get("value")), _num(v.get("ci95")), _num(p_pct.get(name)))
            for name, v in m_pct.items()}
    return out


def _answered(rows: list[TraceRow], sc: Scenario, cls: str, order: str = "sorted"
              ) -> np.ndarray:
    """Answered requests' node sojourns after warm-up: sorted, or in arrival order."""
    ok = [r for r in rows
          if r.cls == cls and r.t_send >= sc.warmup_ms and r.outcome is Outcome.OK
          and not math.isnan(r.node_ms)]
    if order == "arrival":
        ok.sort(key=lambda r: r.t_send)
        return np.asarray([r.node_ms for r in ok], dtype=float)
    return np.sort(np.asarray([r.node_ms for r in ok], dtype=float))


def node_busy(sc: Scenario, pred: AnyPrediction) -> dict[str, float]:
    """Each node's exact mean share of busy servers: from the closed chain's stationary
    marginals, or as the policy chain computed it."""
    if isinstance(pred, Prediction):
        st = pred.stationary
        fn = sc.nodes_with(Role.FN)[0]
        busy = {fn.name: busy_fraction(list(st.p_fn.sum(axis=0)), server_count(fn))}
        for ofn in sc.nodes_with(Role.OFN):
            busy[ofn.name] = busy_fraction(list(st.p_ofn.sum(axis=0)), server_count(ofn))
        return busy
    return dict(pred.node_busy)


def predicted_power_block(sc: Scenario, pred: AnyPrediction) -> dict[str, object]:
    """Exact mean server power from P(node busy); switches from the expected forwarded
    requests (accepted and blocked ones alike cross the switch)."""
    from fogsdn.scenario import scenario_graph

    rate = sc.workload.lambda_hp + sc.workload.lambda_lp
    return predicted_power(sc, node_busy(sc, pred), switch_ports(scenario_graph(sc)), rate)


def power_comparison(measured: dict[str, Any], predicted: dict[str, Any]) -> dict[str, Any]:
    """Per node and in total (servers): measured mean W beside the exact one."""
    nodes = {name: {"measured": _num(measured.get("nodes", {}).get(name)),
                    "predicted": _num(w)}
             for name, w in predicted.get("nodes", {}).items()}
    return {"nodes": nodes,
            "servers_W": {"measured": _num(measured.get("servers_W")),
                          "predicted": _num(predicted.get("servers_W")),
                          "rel_gap": server_power_gap(measured, predicted)},
            "switches_W": {"measured": _num(sum(measured.get("switches", {}).values())),
                           "predicted": _num(sum(predicted.get("switches", {}).values()))}}


def plot_comparison(path: Path, rows: list[TraceRow], sc: Scenario, pred: AnyPrediction,
                    measured: dict[str, Any], comp: dict[str, Any] | None = None,
                    power: dict[str, Any] | None = None) -> None:
    """Empirical CDF of node_ms per class over the exact CDF, with the measured
    percentiles' intervals; W, blocking and outage with their 95 % intervals beside
    the exact values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4 if power else 3, figsize=(21 if power else 16, 4.4))
    ax_cdf, ax_w, ax_p = axes[0], axes[1], axes[2]
    colors = {"hp": "tab:red", "lp": "tab:blue"}
    for cls in CLASSES:
        x = _answered(rows, sc, cls)
        hi = pred.cls(cls).percentiles()["p99"] * 1.5
        if x.size:
            hi = max(hi, float(x[-1]))
            ax_cdf.step(x, np.arange(1, x.size + 1) / x.size, where="post",
                        color=colors[cls], alpha=0.6, label=f"{cls.upper()} measured (n={x.size})")
        if math.isfinite(hi) and hi > 0:
            t = np.linspace(0.0, hi, 200)
            ax_cdf.plot(t, pred.cdf(cls, t), color=colors[cls], ls="--",
                        label=f"{cls.upper()} exact")
        pct = (comp or {}).get(cls, {}).get("percentiles", {})
        for name, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)):
            v = pct.get(name)
            if v and math.isfinite(_num(v["measured"])):
                err = _num(v["ci95"])
                ax_cdf.errorbar([v["measured"]], [q], xerr=[[err if math.isfinite(err) else 0.0]]
                                * 2, fmt="|", color=colors[cls], capsize=4, ms=10)
    ax_cdf.set_xlabel("response time at the node (model ms)")
    ax_cdf.set_ylabel("P(T <= t | answered); bars: percentiles, 95 % CI")
    ax_cdf.set_ylim(0, 1.02)
    ax_cdf.legend(fontsize=8)
    ax_cdf.grid(alpha=0.3)
    for i, cls in enumerate(CLASSES):
        m = measured.get(cls, {})
        w, ci = _num(m.get("W")), _num(m.get("W_ci95"))
        if math.isfinite(w):
            ax_w.errorbar([i], [w], yerr=[[ci if math.isfinite(ci) else 0.0]] * 2, fmt="o",
                          color=colors[cls], capsize=6, label=f"{cls.upper()} measured, 95% CI")
        ax_w.plot([i], [pred.cls(cls).W], marker="x", ms=10, color="black",
                  ls="none", label="exact" if i == 0 else None)
    ax_w.set_xticks([0, 1], ["HP", "LP"])
    ax_w.set_ylabel("mean response time W (model ms)")
    ax_w.legend(fontsize=8)
    ax_w.grid(alpha=0.3)
    ticks: list[str] = []
    for i, (cls, metric) in enumerate((c, k) for c in CLASSES for k in ("blocking", "outage")):
        m = measured.get(cls, {})
        v, ci = _num(m.get(metric)), _num(m.get(f"{metric}_ci95"))
        ticks.append(f"{cls.upper()} {metric}")
        if math.isfinite(v):
            ax_p.errorbar([i], [v], yerr=[[ci if math.isfinite(ci) else 0.0]] * 2, fmt="o",
                          color=colors[cls], capsize=6)
        ax_p.plot([i], [getattr(pred.cls(cls), metric)], marker="x", ms=10, color="black",
                  ls="none", label="exact" if i == 0 else None)
    ax_p.set_xticks(range(len(ticks)), ticks, fontsize=8)
    ax_p.set_yscale("symlog", linthresh=1e-4)
    ax_p.set_ylabel("share of arrivals (95 % CI)")
    ax_p.legend(fontsize=8)
    ax_p.grid(alpha=0.3)
    if power:  # mean power per server, measured beside exact
        ax_pw = axes[3]
        names = list(power["nodes"])
        xs = np.arange(len(names))
        ax_pw.bar(xs - 0.2, [_num(power["nodes"][n]["measured"]) for n in names], 0.4,
                  label="measured", color="tab:green")
        ax_pw.bar(xs + 0.2, [_num(power["nodes"][n]["predicted"]) for n in names], 0.4,
                  label="exact", color="tab:gray")
        ax_pw.set_xticks(xs, names)
        ax_pw.set_ylabel("mean server power (W)")
        gap = _num(power["servers_W"]["rel_gap"])
        ax_pw.set_title(f"servers: {gap:+.1%} vs exact" if math.isfinite(gap) else "servers",
                        fontsize=9)
        ax_pw.legend(fontsize=8)
        ax_pw.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{sc.name}: measured vs exact CTMC")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _f(x: Any, digits: int = 4) -> str:
    v = _num(x)
    if not math.isfinite(v):
        return "n/a"
    return f"{v:.{digits}g}"


def _pm(x: dict[str, Any], digits: int = 3) -> str:
    """'measured ± half-width' of one compared figure."""
    return f"{_f(x['measured'], digits)} ± {_f(x['ci95'], 2)}"


def comparison_table(sc: Scenario, comp: dict[str, Any],
                     power: dict[str, Any] | None = None) -> str:
    lines = [f"measured vs exact CTMC ({sc.name}; node sojourn, model ms; ± 95 % interval, "
             "ok = the interval covers the exact value)",
             f"{'class':<6}{'W meas':>17}{'W exact':>10}{'gap':>8}{'ok':>4}"
             f"{'block meas':>22}{'exact':>10}{'ok':>4}{'outage meas':>22}{'exact':>10}{'ok':>4}"]

    def ok(x: dict[str, Any]) -> str:
        return "n/a" if x["ci_covers"] is None else ("yes" if x["ci_covers"] else "no")

    for cls in CLASSES:
        c = comp[cls]
        w, b, o = c["W"], c["blocking"], c["outage"]
        gap = _num(w["rel_gap"])
        lines.append(
            f"{cls.upper():<6}{_pm(w, 4):>17}{_f(w['predicted']):>10}"
            f"{(f'{gap:+.1%}' if math.isfinite(gap) else 'n/a'):>8}{ok(w):>4}"
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
        gap = _num(sv["rel_gap"])
        lines.append(f"{'  servers':<16}{_f(sv['measured']):>10}{_f(sv['predicted']):>10}"
                     f"{(f'{gap:+.1%}' if math.isfinite(gap) else 'n/a'):>8}")
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
    return {
        "W": sum(x * p["W"] for x, p in answered) / n_ok if n_ok > 0 else math.nan,
        "blocking": sum(a * p["blocking"] for a, p in parts) / arrivals if arrivals else math.nan,
        "outage": sum(a * p["outage"] for a, p in parts) / arrivals if arrivals else math.nan,
    }


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
            lines.append(comparison_table(sc, block["comparison"]).replace(
                f"measured vs exact CTMC ({sc.name};", f"{head}: measured vs exact ({sc.name};",
                1))
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
    lines.append(comparison_table(sc, out["comparison"]).replace(
        "measured vs exact CTMC (", "overall: measured vs the phases' mixture (", 1))
    return out, "\n".join(lines)



def compare_run(run_dir: Path, plot: bool = True, no_plot_why: str = "") -> str:
    """Add the exact prediction to run_dir/summary.json, plot it, return a table.

    Outside the model's domain the summary records `"predicted": null` and the
    reason, and the text says so instead of giving a number. With `plot=False` the
    trace is not read (a run too large to load, or one that wrote none) and the
    summary must already hold `measured`.
    """
    run_dir = Path(run_dir)
    sc = load_scenario(run_dir / "scenario.yaml")
    summary_path = run_dir / "summary.json"
    summary: dict[str, Any] = (json.loads(summary_path.read_text())
                               if summary_path.exists() else {})
    rows = (read_trace(run_dir / "trace.csv")
            if plot or "measured" not in summary or sc.workload.profile is not None else [])
    if "measured" not in summary:
        summary["measured"] = measured_summary(rows, sc.warmup_ms, sc.deadline_ms)
    measured = summary["measured"]
    if summary.get("crashed"):
        # a crashed run's numbers never appear beside the model as a measurement
        why = "the run crashed (see incidents in summary.json)"
        summary["predicted"] = None
        summary["not_compared"] = why
        summary.pop("comparison", None)
        summary_path.write_text(json.dumps(json_safe(summary), indent=1, default=str))
        return f"exact model: not compared: {why}"
    if rows:  # a streamed summary has no percentiles: take them from the trace read here
        for cls in CLASSES:
            m = measured.get(cls)
            if isinstance(m, dict) and not m.get("percentiles"):
                m["percentiles"] = percentiles_ci(_answered(rows, sc, cls, order="arrival"))
    if sc.workload.profile is not None:  # per phase (module docstring)
        fields, text = compare_phases(sc, rows)
        for key in ("predicted", "comparison", "outside_model"):
            summary.pop(key, None)
        summary.update(fields)
        summary_path.write_text(json.dumps(json_safe(summary), indent=1, default=str))
        return text
    try:
        pred = exact_prediction(sc)
    except OutsideModel as err:
        summary["predicted"] = None
        summary["outside_model"] = str(err)
        summary.pop("comparison", None)
        summary_path.write_text(json.dumps(json_safe(summary), indent=1, default=str))
        return f"exact model: outside the model ({err}); no prediction to compare"
    d = pred.to_dict()
    d["power"] = predicted_power_block(sc, pred)
    summary["predicted"] = d
    summary.pop("outside_model", None)
    comp = {cls: comparison_block(measured.get(cls, {}), d[cls])  # type: ignore[arg-type]
            for cls in CLASSES}
    summary["comparison"] = comp
    power = (power_comparison(summary["power"], d["power"])  # type: ignore[arg-type]
             if summary.get("power") else None)
    if power is not None:
        summary["power_comparison"] = power
    if not plot:
        note = f"no comparison plot: {no_plot_why}" if no_plot_why else "no comparison plot"
        summary["notes"] = [*summary.get("notes", []), note]
    summary_path.write_text(json.dumps(json_safe(summary), indent=1, default=str))
    if not plot:
        return comparison_table(sc, comp, power)
    plot_comparison(run_dir / "comparison.png", rows, sc, pred, measured, comp, power)
    return comparison_table(sc, comp, power) + f"\nplot: {run_dir / 'comparison.png'}"


def attach_prediction(out: Path, plot: bool = True, no_plot_why: str = "",
                      verbose: bool = True) -> dict[str, Any] | None:
    """Add the exact prediction where a model exists (says so where none applies);
    returns the updated summary, or None when the comparison failed."""
    from analysis.size_compare import attach_size_prediction, is_size_scenario

    try:
        if is_size_scenario(load_scenario(out / "scenario.yaml")):  # seed 002b: per-host M/G/1
            text = attach_size_prediction(out)
        else:
            text = compare_run(out, plot=plot, no_plot_why=no_plot_why)
    except Exception as err:  # a comparison failure must not lose the measured results
        if verbose:
            print(f"[compare] could not compare with the model: {err}")
        return None
    if verbose and text:
        print(text)
    return json.loads((out / "summary.json").read_text())
