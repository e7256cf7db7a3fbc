"""A per-request policy's decisions in a live run (pure): how long each held its
connection (packet-in read to packet-out queued, against the budget at the run's time
scale) and how stale the count it decided on was (the controller's count at the
decision against what the node held when the request reached it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from fogsdn.core.latency import DECISION_BUDGET_SHARE
from fogsdn.core.timebase import Timebase
from fogsdn.measure.metrics import p50_p99


class DecisionBlock(TypedDict):
    """`decision_block`: summary.json's `decisions`."""

    count: int
    path_ms: dict[str, float]  # real: p50, p99, max
    path_model_ms: dict[str, float]
    budget_ms: float
    over_budget_share: float
    staleness: dict[str, object] | None  # as the controller wrote it (its load file)
    fallback_decided: int


def decision_block(path_ms: Sequence[float], time_scale: float, budget_ms: float,
                   staleness: Mapping[str, object] | None, fallback: int = 0
                   ) -> DecisionBlock:
    """summary.json's `decisions`: the decision path in real and model ms, the share over
    `budget_ms` (real), the staleness summary the controller wrote (or None), and how many
    requests the switches' fallback (the policy's routes) served while the controller
    was away."""
    real = {**p50_p99(path_ms), "max": max(path_ms)}
    return {"count": len(path_ms), "path_ms": real,
            "path_model_ms": {k: Timebase(time_scale).model_ms_of_real_ms(v)
                              for k, v in real.items()},
            "budget_ms": budget_ms,
            "over_budget_share": sum(x > budget_ms for x in path_ms) / len(path_ms),
            "staleness": dict(staleness) if staleness is not None else None,
            "fallback_decided": fallback}


def decision_lines(block: Mapping[str, Any]) -> list[str]:
    """The printout's two lines: the decision path, and the state it decided on."""
    p, m = block["path_ms"], block["path_model_ms"]
    lines = [f"per-request decisions: {block['count']}, packet-in to packet-out p50 "
             f"{p['p50']:.3f} / p99 {p['p99']:.3f} / max {p['max']:.3f} ms real ("
             f"{m['p50']:.4f} / {m['p99']:.4f} model ms); budget {block['budget_ms']:.3f} ms "
             f"real ({100 * DECISION_BUDGET_SHARE:.0f} % of the fastest node's mean service "
             f"time), {100 * block['over_budget_share']:.1f} % over it"]
    st = block.get("staleness")
    if not st or not st.get("decisions"):
        lines.append("decision state: no decision was matched to its request's arrival")
    else:
        lines.append(
            f"decision state: {100 * st['exact_share']:.1f} % of {st['decisions']} decisions "
            f"saw the count their request met at its node; off by {st['p1']:+d} .. "
            f"{st['p99']:+d} (p1 .. p99), mean {st['mean']:+.3f} requests"
            + (f"; {st['expired']} decided requests never arrived" if st.get("expired")
               else ""))
    if block.get("fallback_decided"):
        lines.append(f"decided by the fallback: {block['fallback_decided']} requests went by "
                     "the policy's own routes (select groups) while the controller was away")
    return lines
