"""How faithfully the traffic engine sent the drawn load (pure).

A request's lateness is its trace `t_send` against the instant the workload drew for it
(model ms). Load generators trusted for timing refuse to report when they fell behind;
here a run whose share of late sends passes a limit is flagged as emulation bias, and
the engine's own CPU is reported beside it (docs/emulation.md, "The traffic engine").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

from fogsdn.core.summary import json_float, json_int
from fogsdn.core.trace import TraceRow

# a send later than this share of the fastest node's mean service is late: half a
# service bunches arrivals enough to show in W (bench_load.py at time scale 2: runs whose
# p99 passed it missed W_LP by 8-9 %; the SCHED_FIFO engine's p99 0.3 did not)
LATE_SEND_SHARE_OF_SERVICE = 0.5
# a run with more than this share of its requests sent late is flagged
LATE_SENDS_LIMIT = 0.01


def late_threshold_ms(fastest_mean_service_ms: float) -> float:
    return LATE_SEND_SHARE_OF_SERVICE * fastest_mean_service_ms


def send_lateness(rows: Iterable[TraceRow], drawn: Mapping[str, float],
                  late_ms: float) -> dict[str, float]:
    """p50, p99 and max of t_send minus the drawn instant (model ms), how many requests
    left later than `late_ms`, and their share."""
    lag = np.asarray([r.t_send - drawn[r.request_id] for r in rows if r.request_id in drawn],
                     dtype=float)
    if lag.size == 0:
        return {"count": 0, "p50_ms": math.nan, "p99_ms": math.nan, "max_ms": math.nan,
                "late": 0, "late_share": math.nan, "late_ms": late_ms}
    late = int(np.count_nonzero(lag > late_ms))
    return {"count": int(lag.size), "p50_ms": float(np.percentile(lag, 50)),
            "p99_ms": float(np.percentile(lag, 99)), "max_ms": float(lag.max()),
            "late": late, "late_share": late / lag.size, "late_ms": late_ms}


class EngineBlock(TypedDict):
    """`engine_block`: summary.json's `load_engine`."""

    processes: int
    clients: int
    sent: int
    cpu_s: float
    cpu_share: float  # cores
    cpu_ms_per_request: float
    rss_kb_each: list[int]
    precise_timer: bool
    realtime: bool


def engine_block(stats: Sequence[Mapping[str, object]]) -> EngineBlock:
    """The traffic engines' own figures (each one's stats file): processes, clients,
    CPU seconds, and CPU share (cores: CPU seconds over the longest wall time)."""
    cpu = sum(json_float(s.get("cpu_s", 0.0)) for s in stats)
    wall = max((json_float(s.get("wall_s", 0.0)) for s in stats), default=0.0)
    sent = sum(json_int(s.get("sent", 0)) for s in stats)
    return {"processes": len(stats),
            "clients": sum(json_int(s.get("clients", 0)) for s in stats),
            "sent": sent, "cpu_s": cpu, "cpu_share": cpu / wall if wall > 0 else math.nan,
            "cpu_ms_per_request": 1000.0 * cpu / sent if sent else math.nan,
            "rss_kb_each": [json_int(s.get("max_rss_kb", 0)) for s in stats],
            "precise_timer": all(bool(s.get("precise_timer")) for s in stats),
            "realtime": all(bool(s.get("realtime")) for s in stats)}


def late_reason(lateness: Mapping[str, float], limit: float = LATE_SENDS_LIMIT) -> str | None:
    """The emulation-bias line for a load that left late, or None."""
    share = lateness.get("late_share", math.nan)
    if not math.isfinite(share) or share <= limit:
        return None
    return (f"{100 * share:.1f} % of requests were sent more than {lateness['late_ms']:.3g} "
            f"model ms after their drawn instant (p99 {lateness['p99_ms']:.3g}, max "
            f"{lateness['max_ms']:.3g} ms): the traffic engine fell behind")


def send_line(lateness: Mapping[str, float], engine: Mapping[str, Any] | None) -> str:
    """One line for a run's output."""
    line = (f"sends against the drawn instants: p50 {lateness['p50_ms']:.4f} / p99 "
            f"{lateness['p99_ms']:.4f} / max {lateness['max_ms']:.3f} model ms late; "
            f"{lateness['late']} of {lateness['count']} later than {lateness['late_ms']:.3g}")
    if engine:
        line += (f"; traffic engine: {engine['processes']} process(es) for "
                 f"{engine['clients']} clients, {engine['cpu_s']:.1f} CPU-s "
                 f"({100 * engine['cpu_share']:.1f} % of a core)")
    return line
