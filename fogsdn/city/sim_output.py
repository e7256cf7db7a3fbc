"""Seed 003's study rows and table: one row per selector and ratio (the metric columns
`fogsdn.nodes.ncs.discovery.city_metrics` gives either engine, the live run's own columns from
its processes' records) and its CSV; `fogsdn.measure.figures.draw_city` draws them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fogsdn.core.csv_rows import read_csv_rows, write_csv_rows
from fogsdn.core.summary import json_float, json_int, json_object, read_summary
from fogsdn.nodes.ncs.discovery import METRIC_COLUMNS, ClientTally, city_metrics
from fogsdn.nodes.probe import Turnarounds

if TYPE_CHECKING:  # the files' writers
    from fogsdn.city.fog_daemon import FogStateDoc
    from fogsdn.city.mobile_client import ClientResultDoc

LIVE_COLUMNS = ("probe_messages", "rtt_excess_ms", "probe_excess_ms", "probe_excess_p90_ms",
                "coord_median_rel_error", "replies_missing", "replies_undecodable",
                "step_ms", "step_ms_p90", "link_updates", "clients_reporting",
                "fogs_reporting")
# the requests a client waits on a reply for (a `leave` has none)
ANSWERED_OPS = ("view", "join", "task")


# Meridian's messages per query and its upkeep, counted the same way by both engines
MERIDIAN_COLUMNS = ("meridian_queries", "meridian_messages_per_query",
                    "meridian_probes_per_query", "meridian_hops_per_query",
                    "meridian_upkeep_messages")


def live_metrics(results: Mapping[str, ClientResultDoc], fog_states: Mapping[str, FogStateDoc]
                 ) -> dict[str, float]:
    """A live point's columns from its clients' results and fog nodes' state files: the
    simulator's metric columns, the live ones and Meridian's."""
    clients = list(results.values())
    tallies = [ClientTally.from_doc(r | {"messages": int(r["counts"]["in"])
                                         + int(r["counts"]["out"])}) for r in clients]
    excess = [x for r in clients for x in r.get("excess", [])]
    probe_excess = sorted(x for r in clients for x in r.get("probe_excess", []))
    coord = [e for r in clients for e in r.get("coordinate_errors", {}).values()]
    steps = sorted(x for r in clients for x in r.get("step_ms", []))
    probes = sum(int(r["counts"][way].get(kind, 0)) for r in [*clients, *fog_states.values()]
                 for way in ("sent", "received") for kind in ("probe", "m_probe"))
    return city_metrics(tallies, [int(s["counts"]["in"]) for s in fog_states.values()],
                        [int(s["counts"]["out"]) for s in fog_states.values()]) | {
        "probe_messages": probes,
        "rtt_excess_ms": statistics.median(excess) if excess else math.nan,
        "probe_excess_ms": statistics.median(probe_excess) if probe_excess else math.nan,
        "probe_excess_p90_ms": probe_excess[int(0.9 * (len(probe_excess) - 1))]
        if probe_excess else math.nan,
        "coord_median_rel_error": statistics.median(coord) if coord else math.nan,
        # a request whose reply never came in time (a full node's loss is an answer)
        "replies_missing": sum(int(r["counts"]["sent"].get(k, 0))
                               - int(r["counts"]["received"].get(k, 0))
                               for r in clients for k in ANSWERED_OPS),
        # a datagram a client could not read: never the network's doing
        "replies_undecodable": sum(int(r["counts"]["received"].get("malformed", 0))
                                   for r in clients),
        # how long a step's messages took (a simulated one: none, or with step_time:
        # messages, its round trips)
        "step_ms": statistics.median(steps) if steps else math.nan,
        "step_ms_p90": steps[int(0.9 * (len(steps) - 1))] if steps else math.nan,
    } | _meridian_columns(clients, fog_states)


def _meridian_columns(clients: list[ClientResultDoc], fog_states: Mapping[str, FogStateDoc]
                      ) -> dict[str, float]:
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


def write_csv(rows: Sequence[Mapping[str, object]], path: Path) -> None:
    cols = ["selector", "ratio", "clients", "slots", "seed", "duration_model_s", *METRIC_COLUMNS]
    cols += [c for c in (*LIVE_COLUMNS, *MERIDIAN_COLUMNS) if any(c in r for r in rows)]
    write_csv_rows(path, cols, ({k: (f"{v:.6g}" if isinstance(v, float) else v)
                                 for k, v in r.items()} for r in rows), extrasaction="ignore")


def turnaround_columns(engines: Sequence[Mapping[str, object]],
                       fog_states: Mapping[str, FogStateDoc]) -> dict[str, float]:
    """What the probes' responders held their pings (real ms), as taken off the measured
    round trips by the clients and the fog nodes (the client engine's stats file and the
    daemons' state files): the emulator's own waits for a core that no RTT of this point
    carries."""
    all_ = Turnarounds()
    for part in (*engines, *fog_states.values()):
        turnarounds = json_object(part.get("turnarounds", {}), "turnarounds")
        all_.merge(Turnarounds.from_dict(json_object(turnarounds.get("taken_off", {}),
                                                     "taken_off")))
    if not all_.count:
        return {"turnaround_real_ms_mean": math.nan, "turnaround_real_ms_max": math.nan}
    return {"turnaround_real_ms_mean": round(all_.total_ms / all_.count, 4),
            "turnaround_real_ms_max": all_.max_ms}


LIVE_CSV = "seed003-emulate.csv"  # a live city run's rows, in its folder


def read_live_points(run_dir: Path, ratio: float, clients: int, fog_nodes: int,
                     slots: int) -> dict[str, dict[str, float]]:
    """A live city run's rows at `ratio`, by selector, with their figures as floats;
    ValueError naming the file and the cause where the run is not a measurement to
    compare (it crashed or was interrupted, a point ran at another scale, or not every
    client and daemon reported)."""
    summary = read_summary(run_dir / "summary.json")
    if not summary:
        raise ValueError(f"{run_dir}: no summary.json (not a live run's folder)")
    if summary.get("engine") != "emulate" or summary.get("study") != "city":
        raise ValueError(f"{run_dir / 'summary.json'}: not a live city run")
    if summary.get("crashed") or summary.get("failure") or summary.get("interrupted"):
        raise ValueError(f"{run_dir / 'summary.json'}: the run crashed, failed or was "
                         "interrupted: not a measurement")
    try:
        scale = json_object(summary.get("scale"), "scale")
        ran = (json_int(scale.get("fog_nodes")), json_int(scale.get("slots")))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{run_dir / 'summary.json'}: scale: {err}") from None
    if ran != (fog_nodes, slots):
        raise ValueError(f"{run_dir / 'summary.json'}: the run had {ran[0]} fog nodes and "
                         f"{ran[1]} slots, the study's comparison scale {fog_nodes} and "
                         f"{slots}")
    path = run_dir / LIVE_CSV
    try:
        rows = read_csv_rows(path)
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not readable: {err.__class__.__name__}") from None
    out: dict[str, dict[str, float]] = {}
    for i, row in enumerate(rows, start=2):
        try:
            if not math.isclose(json_float(row["ratio"]), ratio, rel_tol=1e-6):
                continue
            figures = {k: json_float(v) for k, v in row.items() if k != "selector" and v}
            selector = row["selector"]
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: line {i}: {err.__class__.__name__}: {err}") from None
        got = (json_int(figures.get("clients", 0)), json_int(figures.get("clients_reporting", 0)),
               json_int(figures.get("fogs_reporting", 0)))
        if got[0] != clients:
            raise ValueError(f"{path}: line {i}: {selector} ran {got[0]} clients, the "
                             f"study's comparison scale has {clients}")
        if got[1] != clients or got[2] != fog_nodes:
            raise ValueError(f"{path}: line {i}: {selector}: {got[1]} of {clients} clients "
                             f"and {got[2]} of {fog_nodes} daemons reported: not a "
                             "measurement")
        out[selector] = figures
    if not out:
        raise ValueError(f"{path}: no row at ratio {ratio:g}")
    return out

