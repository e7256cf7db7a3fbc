"""Measured against exact for one run directory: summary.json updated, a plot, a table.

The comparison itself is pure and lives in `fogsdn/measure/comparison.py`; this module reads
the run's files, writes the summary and draws the plot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fogsdn.core.scenario import Scenario, load_scenario
from fogsdn.core.summary import json_object, read_summary, write_summary
from fogsdn.core.trace import Outcome, TraceRow, read_trace
from fogsdn.exact.class_prediction import CLASSES, PERCENTILES
from fogsdn.exact.model_params import AnyPrediction, OutsideModel, exact_prediction
from fogsdn.measure.comparison import (
    ClassComparison,
    PowerComparison,
    compare_phases,
    comparison_block,
    comparison_table,
    number,
    power_comparison,
    predicted_power_block,
)
from fogsdn.measure.figures import pyplot, save_figure
from fogsdn.measure.metrics import measured_summary, percentiles_ci
from fogsdn.measure.policy_epochs import (
    epoch_comparisons,
    epoch_ms,
    epoch_scenario,
    epoch_spec,
    epochs_table,
    rows_in,
)


def _answered(rows: list[TraceRow], sc: Scenario, cls: str, order: str = "sorted") -> np.ndarray:
    """Answered requests' node sojourns after warm-up: sorted, or in arrival order."""
    ok = [r for r in rows
          if r.cls == cls and r.t_send >= sc.warmup_ms and r.outcome is Outcome.OK
          and not math.isnan(r.node_ms)]
    if order == "arrival":
        ok.sort(key=lambda r: r.t_send)
        return np.asarray([r.node_ms for r in ok], dtype=float)
    return np.sort(np.asarray([r.node_ms for r in ok], dtype=float))


def plot_comparison(path: Path, rows: list[TraceRow], sc: Scenario, pred: AnyPrediction,
                    measured: Mapping[str, object],
                    comp: Mapping[str, ClassComparison] | None = None,
                    power: PowerComparison | None = None) -> None:
    """Empirical CDF of node_ms per class over the exact CDF, with the measured
    percentiles' intervals; W, blocking and outage with their 95 % intervals beside
    the exact values."""
    fig, axes = pyplot().subplots(1, 4 if power else 3, figsize=(21 if power else 16, 4.4))
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
        pct = comp[cls].get("percentiles", {}) if comp and cls in comp else {}
        for name, q in PERCENTILES:
            v = pct.get(name)
            if v and math.isfinite(number(v["measured"])):
                err = number(v["ci95"])
                ax_cdf.errorbar([v["measured"]], [q], xerr=[[err if math.isfinite(err) else 0.0]]
                                * 2, fmt="|", color=colors[cls], capsize=4, ms=10)
    ax_cdf.set(xlabel="response time at the node (model ms)",
               ylabel="P(T <= t | answered); bars: percentiles, 95 % CI", ylim=(0, 1.02))
    shares = [(c, k) for c in CLASSES for k in ("blocking", "outage")]
    for ax, figures in ((ax_w, [(c, "W") for c in CLASSES]), (ax_p, shares)):
        for i, (cls, metric) in enumerate(figures):
            m = measured.get(cls, {})
            if not isinstance(m, Mapping):
                raise TypeError(f"measured {cls}: an object, got {type(m).__name__}")
            y, ci = number(m.get(metric)), number(m.get(f"{metric}_ci95"))
            if math.isfinite(y):
                ax.errorbar([i], [y], yerr=[[ci if math.isfinite(ci) else 0.0]] * 2, fmt="o",
                            color=colors[cls], capsize=6,
                            label=f"{cls.upper()} measured, 95% CI" if ax is ax_w else None)
            ax.plot([i], [getattr(pred.cls(cls), metric)], marker="x", ms=10, color="black",
                    ls="none", label="exact" if i == 0 else None)
    ax_w.set_xticks([0, 1], ["HP", "LP"])
    ax_w.set_ylabel("mean response time W (model ms)")
    ax_p.set_xticks(range(len(shares)), [f"{c.upper()} {k}" for c, k in shares], fontsize=8)
    ax_p.set_yscale("symlog", linthresh=1e-4)
    ax_p.set_ylabel("share of arrivals (95 % CI)")
    for ax in (ax_cdf, ax_w, ax_p):
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    if power:  # mean power per server, measured beside exact
        ax_pw = axes[3]
        names = list(power["nodes"])
        xs = np.arange(len(names))
        ax_pw.bar(xs - 0.2, [number(power["nodes"][n]["measured"]) for n in names], 0.4,
                  label="measured", color="tab:green")
        ax_pw.bar(xs + 0.2, [number(power["nodes"][n]["predicted"]) for n in names], 0.4,
                  label="exact", color="tab:gray")
        ax_pw.set_xticks(xs, names)
        ax_pw.set_ylabel("mean server power (W)")
        gap = number(power["servers_W"]["rel_gap"])
        ax_pw.set_title(f"servers: {gap:+.1%} vs exact" if math.isfinite(gap) else "servers",
                        fontsize=9)
        ax_pw.legend(fontsize=8)
        ax_pw.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{sc.name}: measured vs exact CTMC")
    save_figure(fig, path)


def _objects(x: object, what: str) -> list[dict[str, object]]:
    """A JSON list of objects read back from summary.json (TypeError where it is not)."""
    if not isinstance(x, list):
        raise TypeError(f"{what}: a list, got {type(x).__name__}")
    return [json_object(e, f"{what}[{i}]") for i, e in enumerate(x)]


def _not_compared(summary_path: Path, summary: dict[str, object], key: str, why: str) -> None:
    """Record in summary.json that no prediction stands beside the run, and why (`key`)."""
    summary["predicted"] = None
    summary[key] = why
    summary.pop("comparison", None)
    write_summary(summary_path, summary)


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
    summary = read_summary(summary_path)
    # a live run's policy swaps (issue 21)
    epochs = _objects(summary.get("policy_epochs") or [], "policy_epochs")
    rows = (read_trace(run_dir / "trace.csv")
            if plot or "measured" not in summary or sc.workload.profile is not None
            or epochs else [])
    if "measured" not in summary:
        summary["measured"] = measured_summary(rows, sc.warmup_ms, sc.deadline_ms)
    measured = json_object(summary["measured"], "measured")
    if summary.get("crashed"):
        # a crashed run's numbers never appear beside the model as a measurement
        why = "the run crashed (see incidents in summary.json)"
        _not_compared(summary_path, summary, "not_compared", why)
        return f"exact model: not compared: {why}"
    if sc.faults:  # a fault changes the system for a while: no stationary model has it
        why = ("the scheduled faults (faults:) are outside the stationary model; each "
               "fault's cost is in summary.json's faults")
        _not_compared(summary_path, summary, "outside_model", why)
        return f"exact model: not compared: {why}"
    if rows:  # a streamed summary has no percentiles: take them from the trace read here
        for cls in CLASSES:
            m = measured.get(cls)
            if isinstance(m, dict) and not m.get("percentiles"):
                m["percentiles"] = percentiles_ci(_answered(rows, sc, cls, order="arrival"))
    epoch_text = ""
    if epochs:  # each policy's span against its own prediction (fogsdn.measure.policy_epochs)
        summary["policy_epochs"] = blocks = epoch_comparisons(sc, rows, epochs)
        epoch_text = "\n" + epochs_table(sc, blocks)
    if len(epochs) > 1:  # swapped policies: no one prediction stands for the whole run
        text = _compare_per_epoch(run_dir, summary, blocks, sc, rows, plot)
        write_summary(summary_path, summary)
        return text + epoch_text
    if sc.workload.profile is not None:  # per phase (fogsdn.measure.comparison)
        fields, text = compare_phases(sc, rows)
        for key in ("predicted", "comparison", "outside_model"):
            summary.pop(key, None)
        summary.update(fields)
        write_summary(summary_path, summary)
        return text + epoch_text
    try:
        pred = exact_prediction(sc)
    except OutsideModel as err:
        _not_compared(summary_path, summary, "outside_model", str(err))
        return f"exact model: outside the model ({err}); no prediction to compare{epoch_text}"
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
        notes = summary.get("notes", [])
        if not isinstance(notes, list):
            raise TypeError(f"notes: a list, got {type(notes).__name__}")
        summary["notes"] = [*notes, note]
    write_summary(summary_path, summary)
    text = comparison_table(sc, comp, power) + epoch_text
    if not plot:
        return text
    plot_comparison(run_dir / "comparison.png", rows, sc, pred, measured, comp, power)
    return text + f"\nplot: {run_dir / 'comparison.png'}"


def _compare_per_epoch(run_dir: Path, summary: dict[str, object],
                       blocks: list[dict[str, object]], sc: Scenario, rows: list[TraceRow],
                       plot: bool) -> str:
    """A run whose policy was swapped: the whole run's figures stay `measured`, but they
    mix policies, so the top level carries no prediction; each epoch (`blocks`, already
    in summary["policy_epochs"]) stands beside its own, one plot per epoch."""
    why = ("the policy was swapped during the run: each policy epoch is compared with "
           "the exact model for its own policy (policy_epochs)")
    for key in ("comparison", "power_comparison", "outside_model"):
        summary.pop(key, None)
    summary["predicted"] = None
    summary["not_compared"] = why
    plots = []
    for i, block in enumerate(blocks):
        comp = block.get("comparison")
        if not plot or not comp:
            continue
        if not isinstance(comp, dict):  # per class, `comparison_block`'s
            raise TypeError(f"comparison: an object, got {type(comp).__name__}")
        spec = epoch_spec(block)
        pred = exact_prediction(epoch_scenario(sc, spec))
        path = run_dir / f"comparison-epoch{i + 1}-{block['policy']}.png"
        plot_comparison(path, rows_in(rows, epoch_ms(block, "from_ms"),
                                      None if block.get("to_ms") is None
                                      else epoch_ms(block, "to_ms")),
                        epoch_scenario(sc, spec), pred, json_object(block["measured"], "measured"),
                        comp)
        plots.append(str(path))
    return f"whole run: not compared: {why}" + "".join(f"\nplot: {p}" for p in plots)


def attach_prediction(out: Path, plot: bool = True, no_plot_why: str = "",
                      verbose: bool = True) -> dict[str, object] | None:
    """Add the exact prediction where a model exists (says so where none applies);
    returns the updated summary, or None when the comparison failed."""
    from fogsdn.measure.size_compare import attach_size_prediction, is_size_scenario

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
