"""The controller's response-time measurement against the clients' own (pure, no I/O).

A connection is the same in both when client and port agree and the controller's SYN
falls within the client's request; per node the two means are compared on the same
connections. `rt_measurement_error`, the largest relative gap, must stay within 5 %.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypedDict

from fogsdn.core.trace import Outcome, TraceRow

__all__ = ["ControllerRt", "RtBlock", "RtReport", "compare_rt", "rt_report_line"]

MATCH_SLACK_MS = 1.0  # model ms the controller's SYN stamp may lie outside the request


@dataclass(frozen=True)
class ControllerRt:
    """One row of controller-rt.csv, its SYN already in model ms from the run's epoch."""

    client: str
    client_port: int
    node: str
    t_syn_ms: float
    rt_ms: float


def _match(row: TraceRow, candidates: Sequence[ControllerRt]) -> ControllerRt | None:
    lo, hi = row.t_send - MATCH_SLACK_MS, row.t_done + MATCH_SLACK_MS
    inside = [c for c in candidates if lo <= c.t_syn_ms <= hi]
    return min(inside, key=lambda c: abs(c.t_syn_ms - row.t_send)) if inside else None


class RtBlock(TypedDict):
    """Connections matched, the two mean response times on them (model ms), and the
    controller's relative error."""

    count: int
    controller_ms: float
    clients_ms: float
    error: float


class RtReport(TypedDict):
    """`compare_rt`: summary.json's `rt_measurement`."""

    answered: int
    matched: int
    coverage: float
    nodes: dict[str, RtBlock]
    overall: RtBlock | None
    rt_measurement_error: float


def compare_rt(measured: Iterable[ControllerRt], rows: Iterable[TraceRow],
               warmup_ms: float = 0.0) -> RtReport:
    """Per node: connections matched, the controller's and the clients' mean response
    time (model ms) on them, and the relative error; overall the same, `coverage` (the
    share of answered single-connection requests the controller timed) and
    `rt_measurement_error` (the largest per-node |error|; NaN when nothing matched)."""
    by_conn: dict[tuple[str, int], list[ControllerRt]] = defaultdict(list)
    for rec in measured:
        by_conn[(rec.client, rec.client_port)].append(rec)
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)  # node -> (ctrl, client)
    answered = 0
    for r in rows:
        if (r.outcome is not Outcome.OK or r.t_send < warmup_ms or not r.ports
                or ">" in r.ports or math.isnan(r.response_ms)):
            continue
        answered += 1
        m = _match(r, by_conn.get((r.client, int(r.ports)), ()))
        if m is not None:
            pairs[m.node].append((m.rt_ms, r.response_ms))

    def block(p: list[tuple[float, float]]) -> RtBlock:
        ctrl = sum(c for c, _ in p) / len(p)
        cli = sum(c for _, c in p) / len(p)
        return {"count": len(p), "controller_ms": ctrl, "clients_ms": cli,
                "error": ctrl / cli - 1.0 if cli > 0 else math.nan}

    nodes = {n: block(p) for n, p in sorted(pairs.items())}
    everything = [x for p in pairs.values() for x in p]
    matched = len(everything)
    return {
        "answered": answered, "matched": matched,
        "coverage": matched / answered if answered else math.nan,
        "nodes": nodes,
        "overall": block(everything) if everything else None,
        "rt_measurement_error": max((abs(b["error"]) for b in nodes.values()),
                                    default=math.nan),
    }


def rt_report_line(report: RtReport) -> str:
    """One line for the end of a run."""
    nodes = ", ".join(f"{n} {b['controller_ms']:.3f} vs {b['clients_ms']:.3f} ms "
                      f"({100 * b['error']:+.1f} %)" for n, b in report["nodes"].items())
    return (f"controller-measured response time (SYN to FIN) against the clients': "
            f"{nodes or 'nothing matched'}; rt_measurement_error "
            f"{100 * report['rt_measurement_error']:.1f} %, {report['matched']} of "
            f"{report['answered']} answered requests timed")
