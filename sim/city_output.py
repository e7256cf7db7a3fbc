"""Seed 003's study tables and figures: one CSV row per selector and ratio, and PNGs
like the seed's Figs. 4-7 against the client/slot ratio (both engines write these)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from sim.city_study import METRIC_COLUMNS

LIVE_COLUMNS = ("probe_messages", "rtt_excess_ms", "coord_median_rel_error", "link_updates",
                "clients_reporting", "fogs_reporting")
# Meridian's messages per query and its upkeep, counted the same way by both engines
MERIDIAN_COLUMNS = ("meridian_queries", "meridian_messages_per_query",
                    "meridian_probes_per_query", "meridian_hops_per_query",
                    "meridian_upkeep_messages")

FIGURES: dict[str, list[tuple[str, str]]] = {
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


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    cols = ["selector", "ratio", "clients", "slots", "seed", "duration_s", *METRIC_COLUMNS]
    cols += [c for c in (*LIVE_COLUMNS, *MERIDIAN_COLUMNS) if any(c in r for r in rows)]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})


def draw(rows: list[dict[str, Any]], out: Path, engine: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    selectors = list(dict.fromkeys(r["selector"] for r in rows))
    paths = []
    for fig_name, panels in FIGURES.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
        for ax, (col, label) in zip(axes, panels, strict=True):
            for sel in selectors:
                pts = sorted((r["ratio"], r[col]) for r in rows if r["selector"] == sel)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=sel)
            ax.set_xlabel("client/slot ratio")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"seed 003 {fig_name} ({engine})", fontsize=9)
        fig.tight_layout()
        path = out / f"seed003_{fig_name}-{engine}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)
    return paths
