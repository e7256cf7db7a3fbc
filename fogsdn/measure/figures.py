"""Every study's figures, in one place: seed 000's sweep figure (W and outage per
policy against the swept value, with `fogsdn.studies.sweep.exact_curves`), seed 002b's
size-based figures (model curves with simulated points, the TAGS / SITA-E ratio, live
points) and seed 003's Figs. 4-7 (the city's metric columns against the client/slot
ratio). The drivers (`fogsdn/studies/sweep.py`, `fogsdn/studies/size_study.py`,
`fogsdn/city/study_run.py`) make the data."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fogsdn.core.scenario import Scenario
from fogsdn.core.summary import json_float
from fogsdn.exact.class_prediction import CLASSES
from fogsdn.exact.model_params import OutsideModel
from fogsdn.measure.size_compare import predict_scenario, size_scenario
from fogsdn.models.size_assignment import moment

if TYPE_CHECKING:  # seed 002b's rows
    from fogsdn.measure.seed002b_claims import LightSimRow, QosClassRow, QosNone, TwoServerRow


def pyplot() -> Any:
    """matplotlib's pyplot on the file backend, imported when a figure is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 110) -> None:
    """Lay out, write and close a figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


# -- seed 000: a sweep ------------------------------------------------------------------


Curves = dict[tuple[str, str], list[tuple[float, float, float]]]


def draw_sweep(scenario: Scenario, agg: Sequence[Mapping[str, str | float]], path: Path,
         exact: Curves | None = None, measured_label: str = "sim") -> Path:
    """Mean W (95 % interval) per policy and class vs the swept value, and the outage
    probability beside it; exact curves (dashed HP, dotted LP) where the model applies."""
    plt = pyplot()
    assert scenario.sweep is not None
    fig, (ax_w, ax_o) = plt.subplots(1, 2, figsize=(12, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # measured policies, then exact-only ones (the optimal curve)
    policies = sorted({str(a["policy"]) for a in agg})
    policies += sorted({p for p, _ in exact or {}} - set(policies))
    style = {"hp": ("o", "--"), "lp": ("s", ":")}  # marker (simulated), line (exact)
    for i, policy in enumerate(policies):
        col = colors[i % len(colors)]
        for cls in CLASSES:
            pts = [a for a in agg if a["policy"] == policy and a["cls"] == cls]
            x = [a["value"] for a in pts]
            marker, line = style[cls]
            yerr = [ci if math.isfinite(ci := json_float(a["W_ci95"])) else 0.0 for a in pts]
            if pts:
                ax_w.errorbar(x, [a["W"] for a in pts], yerr=yerr, fmt=marker + "-",
                              color=col, capsize=3, lw=0.8,
                              label=f"{policy} {cls.upper()} ({measured_label})")
                ax_o.plot(x, [a["outage"] for a in pts], marker + "-", color=col, lw=0.8,
                          label=f"{policy} {cls.upper()} ({measured_label})")
            if exact and (policy, cls) in exact:
                ex = exact[(policy, cls)]
                ax_w.plot([e[0] for e in ex], [e[1] for e in ex], line, color=col, lw=1.5,
                          label=f"{policy} {cls.upper()} (exact)")
                ax_o.plot([e[0] for e in ex], [e[2] for e in ex], line, color=col, lw=1.5,
                          label=f"{policy} {cls.upper()} (exact)")
    ax_w.set(xlabel=scenario.sweep.parameter, ylabel="mean response W (model ms)",
             title=f"{scenario.name}: W with 95 % CI")
    ax_w.legend(fontsize=7)
    ax_o.set(xlabel=scenario.sweep.parameter,
             ylabel=f"outage P(not answered within {scenario.deadline_ms:g} ms)", title="outage")
    ax_o.legend(fontsize=7)
    save_figure(fig, path, dpi=120)
    return path


# -- seed 002b: size-based assignment ---------------------------------------------------


LABELS = {"sita_e": "SITA-E", "sita_u": "SITA-U", "tags": "TAGS", "random": "Random",
          "least_work_left": "Least-Work-Left", "round_robin": "Round-Robin"}


COLORS = {"sita_e": "tab:blue", "sita_u": "tab:cyan", "tags": "tab:red", "random": "tab:gray",
          "least_work_left": "tab:green", "round_robin": "tab:olive"}


def load_of(sc: Scenario) -> float:
    wl = sc.workload
    return (wl.lambda_hp + wl.lambda_lp) * moment(wl.size, 1) / sum(n.mu for n in sc.nodes)


def point(base: Scenario, value: float, policy: str) -> Scenario:
    """The base scenario at one sweep value under `policy` (load held for size sweeps)."""
    assert base.sweep is not None
    param = base.sweep.parameter
    sc = base.with_overrides({param: value, "policy.name": policy})
    if param.startswith("workload.size."):
        lam = load_of(base) * sum(n.mu for n in sc.nodes) / moment(sc.workload.size, 1)
        sc = sc.with_overrides({"workload.lambda_lp": lam, "workload.lambda_hp": 0.0})
    return sc


def x_of(sc: Scenario, param: str) -> float:
    """The figure's x: load for a rate sweep, else the swept value itself."""
    if param == "workload.lambda_lp":
        return load_of(sc)
    if param == "workload.size.high":
        lo = sc.workload.size.low
        assert lo is not None and sc.workload.size.high is not None
        return sc.workload.size.high / lo
    assert sc.workload.size.shape is not None
    return sc.workload.size.shape


def predicted(sc: Scenario) -> dict[str, float]:
    try:
        p = predict_scenario(sc)
    except OutsideModel:
        return {"W": math.nan, "wait": math.nan, "slowdown": math.nan}
    return {"W": p.W, "wait": p.wait, "slowdown": p.slowdown}


def dense_values(base: Scenario, n: int = 40) -> list[float]:
    """Sweep values for a smooth model curve over the sweep's range."""
    assert base.sweep is not None
    lo, hi = min(base.sweep.values), max(base.sweep.values)
    if base.sweep.parameter == "workload.size.high":
        return list(np.geomspace(lo, hi * 100, n))
    if base.sweep.parameter == "workload.lambda_lp":
        return list(np.linspace(lo * 0.5, min(hi * 1.05, hi / max(load_of(point(base, hi,
                    base.policy.name)), 1e-9) * 0.97), n))
    return list(np.linspace(lo, hi, n))


@dataclass(frozen=True)
class FigurePoint:
    policy: str
    x: float
    pred: dict[str, float]
    sim: dict[str, dict[str, float]]  # metric -> {"mean", "ci95", "n"}
    requests: int


# the figure per swept parameter: metrics, x label, log x
SIZE_FIGURES = {
    "workload.lambda_lp": (["wait", "slowdown"], "load (rho)", False),
    "workload.size.shape": (["wait", "slowdown"], "Pareto shape alpha", False),
    "workload.size.high": (["wait"], "H / L (largest / smallest size)", True),
}


RATIO_LOADS = (0.1, 0.01, 0.001)  # model curves of the ratio figure


def curves(base: Scenario, policies: Sequence[str]) -> dict[str, tuple[list[float],
                                                                        list[dict[str, float]]]]:
    """The model's curve per policy (NaN where it has none or the point is unstable)."""
    assert base.sweep is not None
    out = {}
    for pol in policies:
        scs = [point(base, v, pol) for v in dense_values(base)]
        out[pol] = ([x_of(sc, base.sweep.parameter) for sc in scs], [predicted(sc) for sc in scs])
    return out


def draw_size(path: Path, base: Scenario, points: Sequence[FigurePoint],
         model: dict[str, tuple[list[float], list[dict[str, float]]]], metrics: Sequence[str],
         xlabel: str, logx: bool = False) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4.2))
    axes = np.atleast_1d(axes)
    ylabels = {"wait": "mean waiting time (model ms)", "slowdown": "mean slowdown",
               "W": "mean response time (model ms)"}
    for ax, metric in zip(axes, metrics, strict=True):
        for pol, (xs, ys) in model.items():
            y = [d[metric] for d in ys]
            if any(math.isfinite(v) for v in y):
                style = "--" if pol == "tags" else "-"
                ax.plot(xs, y, style, color=COLORS[pol], lw=1.2,
                        label=f"{LABELS[pol]} model" + (" (approx.)" if pol == "tags" else ""))
        for pol in dict.fromkeys(p.policy for p in points):
            pts = [p for p in points if p.policy == pol]
            ax.errorbar([p.x for p in pts], [p.sim[metric]["mean"] for p in pts],
                        yerr=[p.sim[metric]["ci95"] for p in pts], fmt="o", ms=4, capsize=2,
                        color=COLORS[pol], label=f"{LABELS[pol]} simulated")
        ax.set_yscale("log")
        if logx:
            ax.set_xscale("log")
        ax.set(xlabel=xlabel, ylabel=ylabels[metric])
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=7)
    import textwrap

    fig.suptitle(textwrap.fill(base.description or base.name, 130), fontsize=8)
    save_figure(fig, path)


def ratio_curve(base: Scenario, load: float, highs: Sequence[float]) -> list[float]:
    """The model's TAGS / SITA-E ratio of mean waiting times at `load` for each H."""
    out = []
    for h in highs:
        sc = base.with_overrides({"workload.size.high": h})
        lam = load * sum(n.mu for n in sc.nodes) / moment(sc.workload.size, 1)
        sc = sc.with_overrides({"workload.lambda_lp": lam, "workload.lambda_hp": 0.0})
        w = {pol: predicted(sc.with_overrides({"policy.name": pol}))["wait"]
             for pol in ("tags", "sita_e")}
        out.append(w["tags"] / w["sita_e"])
    return out


def draw_size_ratio(path: Path, base: Scenario, points: Sequence[FigurePoint],
               loads: Sequence[float]) -> list[tuple[float, float, float]]:
    """TAGS / SITA-E mean waiting time vs H/L: model curves at several loads, simulated
    ratios (with the two intervals combined) at the base load; returns the simulated
    (x, ratio, half-width)."""
    plt = pyplot()
    lo = base.workload.size.low
    assert lo is not None
    highs = list(np.geomspace(lo * 2, lo * 1e10, 60))
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    for load, style in zip(loads, ("-", "--", ":", "-."), strict=False):
        ax.plot([h / lo for h in highs], ratio_curve(base, load, highs), style, color="k",
                lw=1.2, label=f"model, load {load:g} (TAGS per-host approx.)")
    sim = []
    by_x: dict[float, dict[str, FigurePoint]] = {}
    for p in points:
        by_x.setdefault(p.x, {})[p.policy] = p
    for x, d in sorted(by_x.items()):
        if "tags" not in d or "sita_e" not in d:
            continue
        t, e = d["tags"].sim["wait"], d["sita_e"].sim["wait"]
        r = t["mean"] / e["mean"]
        hw = r * math.hypot(t["ci95"] / t["mean"], e["ci95"] / e["mean"])
        sim.append((x, r, hw))
    ax.errorbar([s[0] for s in sim], [s[1] for s in sim], yerr=[s[2] for s in sim], fmt="o",
                color="tab:red", capsize=2, label=f"simulated, load {load_of(base):.2g}")
    ax.set(xscale="log", yscale="log", xlabel="H / L (largest / smallest size), alpha = 1, 2 hosts",
           ylabel="TAGS / SITA-E mean waiting time")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    save_figure(fig, path)
    return sim


def draw_size_live(path: Path, live: Sequence[dict[str, str]], size: Any, hosts: int = 2) -> None:
    """Live mean response times (95 % interval over answered requests) over the model's
    curves, per policy, against load."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.4))
    loads = list(np.linspace(0.05, 0.9, 40))
    for pol in dict.fromkeys(r["policy"] for r in live):
        ys = [predicted(size_scenario(pol, hosts, x, size))["W"] for x in loads]
        ax.plot(loads, ys, "--" if pol == "tags" else "-", color=COLORS[pol],
                label=f"{LABELS[pol]} model" + (" (approx.)" if pol == "tags" else ""))
        pts = [r for r in live if r["policy"] == pol]
        ax.errorbar([float(r["load"]) for r in pts], [float(r["W_live"]) for r in pts],
                    yerr=[float(r["W_live_ci95"]) for r in pts], fmt="s", color=COLORS[pol],
                    capsize=3, label=f"{LABELS[pol]} live (testbed)")
    ax.set(yscale="log", xlabel="load (rho)", ylabel="mean response time at the workers (model ms)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title("seed 002b live: 2 hosts, bounded Pareto alpha 1.5 on [1, 100]", fontsize=9)
    save_figure(fig, path)


def write_size_csv(path: Path, points: Sequence[FigurePoint]) -> None:
    cols = ["policy", "x", "requests"]
    lines = [",".join(cols + [f"{m}_{k}" for m in ("W", "wait", "slowdown")
                              for k in ("predicted", "sim", "ci95", "reps")])]
    for p in points:
        vals = [p.policy, f"{p.x:.6g}", str(p.requests)]
        for m in ("W", "wait", "slowdown"):
            vals += [f"{p.pred[m]:.6g}", f"{p.sim[m]['mean']:.6g}", f"{p.sim[m]['ci95']:.6g}",
                     str(p.sim[m]["n"])]
        lines.append(",".join(vals))
    path.write_text("\n".join(lines) + "\n")


def read_size_csv(path: Path) -> list[FigurePoint]:
    """The points `write_csv` wrote (to redraw a figure without simulating again)."""
    import csv

    out = []
    with open(path) as fh:
        for r in csv.DictReader(fh):
            pred = {m: float(r[f"{m}_predicted"]) for m in ("W", "wait", "slowdown")}
            sim = {m: {"mean": float(r[f"{m}_sim"]), "ci95": float(r[f"{m}_ci95"]),
                       "n": float(r[f"{m}_reps"])} for m in ("W", "wait", "slowdown")}
            out.append(FigurePoint(r["policy"], float(r["x"]), pred, sim, int(r["requests"])))
    return out


# -- seed 003: the city ------------------------------------------------------------------


CITY_FIGURES: dict[str, list[tuple[str, str]]] = {
    "fig4": [("client_messages", "total messages per client"),
             ("client_lost", "lost messages per client"),
             ("client_reconnections", "reconnections per client")],
    "fig5": [("node_in", "incoming messages per fog node"),
             ("node_out", "outgoing messages per fog node"),
             ("node_total", "total messages per fog node")],
    "fig6": [("optimal_rate", "optimal selection rate"),
             ("selection_rmse_ms", "selection RMSE (ms)"),
             ("unique_per_step", "unique selections per step")],
    "fig7": [("mean_latency_ms", "mean latency (ms)"),
             ("connection_error_ms", "connection error eq. 13 (ms)")],
}


def draw_city(rows: Sequence[Mapping[str, object]], out: Path, engine: str) -> list[Path]:
    """Seed 003's figures from the study's rows (a point's selector, ratio and metric
    columns, with `<metric>_lo/_hi` where replicated)."""
    plt = pyplot()
    selectors = list(dict.fromkeys(r["selector"] for r in rows))
    paths = []
    for fig_name, panels in CITY_FIGURES.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
        for ax, (col, label) in zip(axes, panels, strict=True):
            for sel in selectors:
                mine = sorted((r for r in rows if r["selector"] == sel),
                              key=lambda r: json_float(r["ratio"]))
                xs = [json_float(r["ratio"]) for r in mine]
                ys = [json_float(r[col]) for r in mine]
                if mine and f"{col}_lo" in mine[0]:  # replications: 95 % intervals
                    err = [[y - json_float(r[f"{col}_lo"]) for y, r in zip(ys, mine, strict=True)],
                           [json_float(r[f"{col}_hi"]) - y for y, r in zip(ys, mine, strict=True)]]
                    ax.errorbar(xs, ys, yerr=err, marker="o", ms=3, capsize=2, label=sel)
                else:
                    ax.plot(xs, ys, marker="o", ms=3, label=sel)
            ax.set(xlabel="client/slot ratio", ylabel=label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"seed 003 {fig_name} ({engine})", fontsize=9)
        path = out / f"seed003_{fig_name}-{engine}.png"
        save_figure(fig, path, dpi=100)
        paths.append(path)
    return paths


# -- seed 002b's claims: light traffic and the QoS design ----------------------------------


_READING_STYLE = {"fixed_approx": ("--", "TAGS at SITA-E's cutoffs, per-host approx."),
                  "fixed_exact": ("-", "TAGS at SITA-E's cutoffs, exact light traffic"),
                  "response_optimal": (":", "response-optimal TAGS (no kills)")}


def _sim_points(ax: Any, sim: Sequence[LightSimRow], x_key: Literal["high", "hosts"],
                color_of: Callable[[LightSimRow], str]) -> None:
    for r in sim:
        marker = "o" if r["tags"] == "tags_fixed" else "s"
        ax.errorbar([r[x_key]], [r["sim"]["mean"]], yerr=[r["sim"]["ci95"]], fmt=marker,
                    color=color_of(r), mfc="none" if r["tags"] == "tags_opt" else None,
                    capsize=2, ms=5)


def draw_seed002b_light(path: Path, light: Sequence[Mapping[str, float]],
                        sim: Sequence[LightSimRow], x_key: Literal["high", "hosts"],
                        series_key: Literal["hosts", "alpha"], title: str) -> None:
    """kappa_TAGS / kappa_SITA-E (light traffic) against `x_key` (H/L or hosts), one
    colour per `series_key` value, one line style per TAGS reading; simulated ratios at
    the light load (circles: fixed cutoffs, open squares: response-optimal)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    series = sorted({r[series_key] for r in light})
    colors = {s: c for s, c in zip(series, ("tab:blue", "tab:orange", "tab:green", "tab:red",
                                            "tab:purple", "tab:brown"), strict=False)}
    for s in series:
        sub = sorted((r for r in light if r[series_key] == s), key=lambda r: r[x_key])
        for reading, (style, _) in _READING_STYLE.items():
            ax.plot([r[x_key] for r in sub], [r[reading] for r in sub], style,
                    color=colors[s], lw=1.2)
        ax.plot([], [], "-", color=colors[s], label=f"{series_key} = {s:g}")
    for _, (style, label) in _READING_STYLE.items():
        ax.plot([], [], style, color="k", label=label)
    _sim_points(ax, [r for r in sim if r[series_key] in colors], x_key,
                lambda r: colors[r[series_key]])
    ax.plot([], [], "o", color="gray", label="simulated, fixed (load 0.01, H/L = 100)")
    ax.plot([], [], "s", color="gray", mfc="none", label="simulated, response-optimal")
    ax.set(xscale="log", yscale="log", ylabel="TAGS / SITA-E mean waiting time",
           xlabel="H / L" if x_key == "high" else "hosts h", title=title)
    if x_key == "hosts":
        ticks = sorted({r["hosts"] for r in light})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6.5)
    save_figure(fig, path)


def draw_seed002b_qos(path: Path, rows: Sequence[QosNone | QosClassRow]) -> None:
    """Each size class's simulated mean (95 % interval) and model value against its
    target (the ratio value / target), per design."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.0))
    got = [r for r in rows if "none" not in r]
    labels = [f"{r['targets']}, {r['policy'].upper()}\nclass {r['class']} "
              f"({r['metric']} <= {r['target']:g})" for r in got]
    xs = list(range(len(got)))
    ax.bar(xs, [r["model"] / r["target"] for r in got], color="lightgray", label="model")
    ax.errorbar(xs, [r["sim"]["mean"] / r["target"] for r in got],
                yerr=[r["sim"]["ci95"] / r["target"] for r in got], fmt="o", color="tab:red",
                capsize=3, label="simulated")
    ax.axhline(1.0, color="k", lw=1, ls="--", label="target")
    ax.set_xticks(xs, labels, fontsize=6, rotation=30, ha="right")
    ax.set(ylabel="class mean / target")
    ax.legend(fontsize=7)
    save_figure(fig, path)


def draw_seed002b_two_server(path: Path, rows: Sequence[TwoServerRow],
                             peaks: Sequence[Mapping[str, float]], sim: Sequence[LightSimRow],
                             sweep: Sequence[Mapping[str, float]] = ()) -> None:
    """Claim 3: two hosts, alpha = 1, TAGS / SITA-E mean wait against H/L, one colour per
    regime (a fixed load, or lambda H fixed), solid: response-optimal TAGS, dashed: TAGS
    at SITA-E's cutoff; crosses: the response-optimal peak at each load; simulated
    ratios (2 hosts, load 0.01) as points, and the ratio sweep's (`sweep`: load 0.1,
    response-optimal) as triangles."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    regimes = sorted({(r["regime"], r["load"] if r["regime"] == "load" else 0.0)
                      for r in rows}, key=lambda k: (k[0] != "load", -k[1]))
    colors = dict(zip(regimes, ("tab:blue", "tab:orange", "tab:green", "tab:red"),
                      strict=False))
    for key, color in colors.items():
        regime, load = key
        sub = sorted((r for r in rows if r["regime"] == regime
                      and (regime != "load" or r["load"] == load)), key=lambda r: r["high"])
        label = (f"load {load:g}" if regime == "load"
                 else f"lambda H = {sub[0]['lambda'] * sub[0]['high']:g}")
        ax.plot([r["high"] for r in sub], [r["response_optimal"] for r in sub], "-",
                color=color, lw=1.2, label=label)
        ax.plot([r["high"] for r in sub], [r["fixed"] for r in sub], "--", color=color, lw=1.2)
        for p in peaks:
            if regime == "load" and p["load"] == load:
                ax.plot([p["switch_high"]], [p["peak"]], "x", color=color, ms=7)
    ax.plot([], [], "-", color="k", label="response-optimal TAGS")
    ax.plot([], [], "--", color="k", label="TAGS at SITA-E's cutoff")
    ax.plot([], [], "x", color="k", label="peak at a fixed load")
    sim2 = [r for r in sim if r["hosts"] == 2 and r["alpha"] == 1.0]
    _sim_points(ax, sim2, "high", lambda r: "k")
    ax.plot([], [], "o", color="gray", label="simulated, fixed (load 0.01)")
    ax.plot([], [], "s", color="gray", mfc="none", label="simulated, response-optimal")
    if sweep:
        ax.plot([r["high"] for r in sweep], [r["ratio"] for r in sweep], "^",
                color=colors.get(("load", 0.1), "k"), mfc="none", ms=6,
                label="simulated, response-optimal, load 0.1 (ratio sweep)")
    ax.set(xscale="log", yscale="log", xlabel="H / L",
           ylabel="TAGS / SITA-E mean waiting time",
           title="seed 002b: two servers, alpha = 1")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6.5)
    save_figure(fig, path)
