"""Seed 003's study rows, tables and figures: one row per selector and ratio (the
metric columns `nodes.ncs.discovery.city_metrics` gives either engine, the live run's
own columns from its processes' records), its CSV, and PNGs like the seed's Figs. 4-7
against the client/slot ratio."""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path
from typing import Any

from nodes.ncs.discovery import METRIC_COLUMNS, ClientTally, city_metrics

LIVE_COLUMNS = ("probe_messages", "rtt_excess_ms", "coord_median_rel_error", "link_updates",
                "clients_reporting", "fogs_reporting")
# Meridian's messages per query and its upkeep, counted the same way by both engines
MERIDIAN_COLUMNS = ("meridian_queries", "meridian_messages_per_query",
                    "meridian_probes_per_query", "meridian_hops_per_query",
                    "meridian_upkeep_messages")



def live_metrics(results: dict[str, dict[str, Any]], fog_states: dict[str, dict[str, Any]]
                 ) -> dict[str, Any]:
    """A live point's columns from its clients' results and fog nodes' state files: the
    simulator's metric columns, the live ones and Meridian's."""
    clients = list(results.values())
    tallies = [ClientTally.from_dict(r) for r in clients]
    for t, r in zip(tallies, clients, strict=True):
        t.messages = int(r["counts"]["in"]) + int(r["counts"]["out"])
    excess = [x for r in clients for x in r.get("excess", [])]
    coord = [e for r in clients for e in r.get("coordinate_errors", {}).values()]
    probes = sum(int(r["counts"][way].get(kind, 0)) for r in [*clients, *fog_states.values()]
                 for way in ("sent", "received") for kind in ("probe", "m_probe"))
    return city_metrics(tallies, [int(s["counts"]["in"]) for s in fog_states.values()],
                        [int(s["counts"]["out"]) for s in fog_states.values()]) | {
        "probe_messages": probes,
        "rtt_excess_ms": statistics.median(excess) if excess else math.nan,
        "coord_median_rel_error": statistics.median(coord) if coord else math.nan,
    } | _meridian_columns(clients, fog_states)


def _meridian_columns(clients: list[dict[str, Any]], fog_states: dict[str, dict[str, Any]]
                      ) -> dict[str, Any]:
    """Meridian's messages as the daemons counted them, per query as the simulator
    counts them: the client's query, the asks and forwards, the answers and the
    result, and each probe to the client (ping and echo); and its upkeep."""
    queries = sum(int(r["counts"]["sent"].get("m_query", 0)) for r in clients)
    if not queries:
        return {}
    fogs = list(fog_states.values())

    def sent(kind: str) -> int:
        return sum(int(s["counts"]["sent"].get(kind, 0)) for s in fogs)

    probes = sent("m_probe")
    per_query = queries + sum(sent(k) for k in ("m_query", "m_ask", "m_answer", "m_result"))
    per_query += probes + sum(int(s["counts"]["received"].get("m_probe", 0)) for s in fogs)
    hops = [h for s in fogs for h in s.get("meridian_hops", [])]
    return {"meridian_queries": queries,
            "meridian_messages_per_query": per_query / queries,
            "meridian_probes_per_query": probes / queries,
            "meridian_hops_per_query": statistics.mean(hops) if hops else math.nan,
            "meridian_upkeep_messages": sum(sent(k) for k in ("m_gossip", "m_ring",
                                                                "m_report"))}


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
