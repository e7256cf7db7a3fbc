"""How faithfully the live nodes behaved, measured on the run's own sample path (pure).

Replaying the very requests a node received, at their instants and with their nominal
service times, through an ideal node gives the sojourn each *should* have had: the
per-request difference isolates what the emulation added, with far less variance than
the gap to the model (docs/emulation.md).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fogsdn.core.scenario import Discipline, NodeSpec, TaskClass
from fogsdn.core.trace import Outcome, TraceRow
from fogsdn.measure.metrics import MeanCI, batch_means_ci, p50_p99
from fogsdn.models.service_queue import ClassQueue, ServiceQueue
from fogsdn.policies import ClusterView, Policy, RouteTable


@dataclass(frozen=True)
class NodeFidelity:
    node: str
    replayed: int  # answered requests replayed
    ideal_W: float  # mean ideal sojourn on this path (model ms)
    measured_W: float
    bias: MeanCI  # mean of measured - ideal, with a batch-means interval
    blocked_disagree: int  # requests blocked live but admitted by the replay, or vice versa


def _arrival(r: TraceRow) -> float:
    """When the request reached the node: its reply left at t_done (the return trip is
    tens of microseconds), so the node saw it node_ms earlier; a blocked one at once."""
    return r.t_done - (r.node_ms if r.outcome is Outcome.OK else 0.0)


def _received(spec: NodeSpec, rows: Iterable[TraceRow]) -> list[TraceRow]:
    """The requests the node answered or blocked (those the replay can place)."""
    return [r for r in rows if r.node == spec.name and r.outcome in
            (Outcome.OK, Outcome.BLOCKED) and not math.isnan(r.nominal_ms)]


def _ideal_sojourns(spec: NodeSpec, arrivals: list[tuple[float, TraceRow]]
                    ) -> tuple[list[tuple[TraceRow, float]], int]:
    """Each request through an ideal node (the worker's own queue model) at the given
    instant: (row, ideal sojourn) for those the ideal node admits and the run answered,
    and how many the two admitted differently."""
    by_class = spec.discipline is not Discipline.FIFO
    cq: ClassQueue[TraceRow] = ClassQueue(spec.capacity, spec.discipline)
    fifo = ServiceQueue(spec.capacity, spec.servers)
    held: list[tuple[Any, float, TraceRow]] = []
    disagree = 0
    for t, r in sorted(arrivals, key=lambda x: x[0]):
        job = (cq.admit(t, r.cls == TaskClass.HP.value, r.nominal_ms, r) if by_class
               else fifo.admit(t, r.nominal_ms))
        if job is None or r.outcome is Outcome.BLOCKED:
            disagree += (job is None) == (r.outcome is Outcome.OK)
            continue
        held.append((job, t, r))
    cq.advance(math.inf)  # a class queue's ends are known once it has run on
    return [(r, job.end - t) for job, t, r in held], disagree


def replay_node(spec: NodeSpec, rows: Iterable[TraceRow]) -> NodeFidelity:
    """Ideal FIFO (or multi-server) node with capacity C on the requests it received."""
    held, disagree = _ideal_sojourns(spec, [(_arrival(r), r) for r in _received(spec, rows)])
    ideal = [w for _, w in held]
    measured = [r.node_ms for r, _ in held]
    return NodeFidelity(spec.name, len(held), float(np.mean(ideal)) if ideal else math.nan,
                        float(np.mean(measured)) if measured else math.nan,
                        batch_means_ci([m - w for m, w in zip(measured, ideal, strict=True)]),
                        disagree)


@dataclass(frozen=True)
class ArrivalTiming:
    """What the way from the drawn instant to the node's kernel did to a node's queue."""
    node: str
    replayed: int
    W_at_arrival: dict[str, float]  # ideal mean sojourn per class, at the instants it arrived
    W_as_drawn: dict[str, float]  # the same requests at their drawn instants
    lag_ms: tuple[float, float]  # p50, p99 model ms from drawn instant to arrival

    def bias(self, cls: str) -> float:
        """Relative: what the timing added to the class's ideal mean sojourn."""
        drawn = self.W_as_drawn.get(cls, math.nan)
        return self.W_at_arrival.get(cls, math.nan) / drawn - 1 if drawn else math.nan


def arrival_timing(spec: NodeSpec, rows: Iterable[TraceRow], drawn: Mapping[str, float],
                   after_ms: float = 0.0) -> ArrivalTiming:
    """The node's requests through the ideal node twice: at the instants they reached it
    and at those the workload drew (`drawn`, by request id). Lags that move together
    bunch arrivals and lengthen the queue: the difference is the emulation's, on top of
    `replay_node`'s bias; `after_ms` leaves out the warm-up."""
    got = [r for r in _received(spec, rows) if r.request_id in drawn]
    at_arrival, _ = _ideal_sojourns(spec, [(_arrival(r), r) for r in got])
    as_drawn, _ = _ideal_sojourns(spec, [(drawn[r.request_id], r) for r in got])

    def by_class(held: list[tuple[TraceRow, float]]) -> dict[str, float]:
        out: dict[str, list[float]] = {}
        for r, w in held:
            if drawn[r.request_id] >= after_ms:
                out.setdefault(r.cls, []).append(w)
        return {c: float(np.mean(ws)) for c, ws in sorted(out.items())}

    lags = [_arrival(r) - drawn[r.request_id] for r in got]
    return ArrivalTiming(spec.name, len(got), by_class(at_arrival), by_class(as_drawn),
                         _p50_p99(lags))


def replay(nodes: Iterable[NodeSpec], rows: list[TraceRow]) -> Mapping[str, NodeFidelity]:
    """Per node; not meaningful under `handoff`, whose moved tasks reach the FN at
    instants the trace does not record."""
    return {n.name: replay_node(n, rows) for n in nodes}


Change = tuple[float, str, bool, float]  # t, node, available, t_installed (model ms)


@dataclass(frozen=True)
class RoutingCheck:
    checked: int  # requests whose serving node is known (answered or blocked)
    against: int  # sent while the drawn availability gave their node no weight
    late_ms: tuple[float, float]  # p50, p99 model ms since the latest change, for the late
    early: int = 0  # of `against`: sent before a change and routed as it says (the lead)
    early_ms: tuple[float, float] = (math.nan, math.nan)  # p50, p99 ms before that change

    @property
    def share(self) -> float:
        return self.against / self.checked if self.checked else math.nan


def routing_against_schedule(
    rows: Iterable[TraceRow], availability: Sequence[tuple[float, str, bool] | Change],
    policy: Policy, base: ClusterView,
) -> RoutingCheck:
    """How many requests the live data plane sent where the policy, applied to the drawn
    OFN availability at their send instant, would not have: the network's reaction time.

    `availability`: (t, node, available[, t_installed]), initial states at t = 0. Each
    is counted early (routed as the next change says: installed before it was sent, or
    sent nearer to it) or late (docs/emulation.md). Proactive policies only.
    """
    changes = sorted((c[0], c[1], c[2], c[3] if len(c) > 3 else math.inf)  # type: ignore[misc]
                     for c in availability)
    times = [c[0] for c in changes]
    installed = [c[3] for c in changes]
    state: dict[str, bool] = {}
    states: list[dict[str, bool]] = []
    for _, node, up, _ in changes:
        state = {**state, node: up}
        states.append(state)
    cache: dict[tuple[tuple[str, bool], ...], RouteTable] = {}
    def routes(i: int) -> RouteTable:
        key = tuple(sorted(states[i].items()))
        if key not in cache:
            view = ClusterView(tuple(replace(n, available=states[i].get(n.name, n.available))
                                     for n in base.nodes))
            cache[key] = policy.routes(view)
        return cache[key]

    checked = against = 0
    late: list[float] = []
    early: list[float] = []
    for r in rows:
        if not r.node or r.outcome not in (Outcome.OK, Outcome.BLOCKED) or r.error:
            continue  # unknown node, or handed off (served elsewhere than routed)
        i = bisect.bisect_right(times, r.t_send) - 1
        if i < 0:
            continue
        checked += 1
        cls = TaskClass(r.cls)
        if routes(i).get(cls, {}).get(r.node, 0.0) <= 0:
            against += 1
            nxt = i + 1
            if nxt < len(times) and routes(nxt).get(cls, {}).get(r.node, 0.0) > 0 and (
                    installed[nxt] <= r.t_send or times[nxt] - r.t_send < r.t_send - times[i]):
                early.append(times[nxt] - r.t_send)  # routed by the change still to come
            else:
                late.append(r.t_send - times[i])
    return RoutingCheck(checked, against, _p50_p99(late), len(early), _p50_p99(early))


def _p50_p99(xs: list[float]) -> tuple[float, float]:
    got = p50_p99(xs)
    return got["p50"], got["p99"]


SERVICE_RATIO_TOLERANCE = 0.03  # a node's achieved/nominal mean service beyond 1 +- this
ROUTING_SHARE_LIMIT = 0.10  # requests routed against the drawn availability beyond this
STEAL_SHARE_LIMIT = 0.02  # CPU time a hypervisor took from the machine beyond this
TIMING_BIAS_LIMIT = 0.05  # ideal mean sojourn at the arrival instants over the drawn ones


def timing_summary(nodes: Iterable[NodeSpec], rows: list[TraceRow],
                   drawn: Mapping[str, float], after_ms: float) -> dict[str, dict[str, float]]:
    """`arrival_timing` per node, as a run's summary holds it (nan: no such class)."""
    timings = (arrival_timing(n, rows, drawn, after_ms) for n in nodes)
    return {t.node: {"hp": t.bias("hp"), "lp": t.bias("lp"),
                     "lag_p50_ms": t.lag_ms[0], "lag_p99_ms": t.lag_ms[1]} for t in timings}


def timing_line(timing: Mapping[str, Mapping[str, float | None]]) -> str:
    """One line for a run's output: `timing_summary` per node and class."""
    parts = [f"{n} {cls.upper()} {100 * b:+.1f} %" for n, t in timing.items()
             for cls in ("hp", "lp") for b in [t.get(cls)] if b is not None and math.isfinite(b)]
    p50 = [v for t in timing.values() if (v := t.get("lag_p50_ms")) is not None]
    p99 = [v for t in timing.values() if (v := t.get("lag_p99_ms")) is not None]
    lag = f"; drawn instant to node p50 {p50[0]:.2f} / p99 {max(p99):.2f} model ms" \
        if p50 and p99 else ""
    return ("arrival timing (an ideal node's sojourn at the instants requests reached it "
            f"over their drawn ones): {', '.join(parts)}{lag}")


def emulation_bias(service_ratios: Mapping[str, float], routing_share: float | None,
                   ratio_tolerance: float = SERVICE_RATIO_TOLERANCE,
                   routing_limit: float = ROUTING_SHARE_LIMIT,
                   steal_share: float | None = None,
                   steal_limit: float = STEAL_SHARE_LIMIT,
                   timing: Mapping[str, Mapping[str, float | None]] | None = None,
                   timing_limit: float = TIMING_BIAS_LIMIT,
                   extra: Sequence[str] = ()) -> dict[str, object]:
    """Emulation artefacts a reader could take for a policy effect (a node off its
    service rate, a data plane late to follow the churn, bunched arrivals), one reason a
    line; a hypervisor steal above `steal_limit` is then named as the likely cause.
    `extra`: reasons found elsewhere (a load sent late: fogsdn.measure.send_timing)."""
    reasons = [f"node {n} served at x{r:.3f} its nominal mean service"
               for n, r in sorted(service_ratios.items())
               if math.isfinite(r) and abs(r - 1.0) > ratio_tolerance]
    for n, t in sorted((timing or {}).items()):
        for cls in ("hp", "lp"):
            b = t.get(cls)
            if b is not None and math.isfinite(b) and abs(b) > timing_limit:
                reasons.append(f"{cls.upper()} requests reached node {n} bunched: an ideal "
                               f"node gives them {100 * b:+.1f} % sojourn over their drawn "
                               "instants (clients or switch that stalled)")
    reasons += extra
    if routing_share is not None and math.isfinite(routing_share) and routing_share > routing_limit:
        reasons.append(f"{100 * routing_share:.1f} % of requests were routed against the "
                       "drawn OFN availability")
    if reasons and steal_share is not None and steal_share > steal_limit:
        reasons.append(f"likely cause: the hypervisor took {100 * steal_share:.1f} % of this "
                       "machine's CPU time during the run (steal)")
    return {"large": bool(reasons), "reasons": reasons,
            "limits": {"service_ratio": ratio_tolerance, "routing_share": routing_limit,
                       "steal_share": steal_limit, "arrival_timing": timing_limit}}


def gap_split(live: Mapping[str, Any], simulated: Mapping[str, Any],
              predicted: Mapping[str, Any] | None) -> dict[str, dict[str, float]]:
    """Each class's W gap split in two: the sample's (the simulator on the very draws the
    live clients sent, against exact) and the emulation's (live against that simulation).
    `live`, `simulated`: `measured` blocks; `predicted`: the exact one (None: outside the
    model, only the emulation's part). Relative gaps; a class missing a figure is left out."""
    out: dict[str, dict[str, float]] = {}
    for cls in ("hp", "lp"):
        w_live = _positive((live.get(cls) or {}).get("W"))
        w_sim = _positive((simulated.get(cls) or {}).get("W"))
        if w_live is None or w_sim is None:
            continue
        split = {"live_vs_sim": w_live / w_sim - 1.0}
        w_exact = _positive(((predicted or {}).get(cls) or {}).get("W"))
        if w_exact is not None:
            split |= {"live_vs_exact": w_live / w_exact - 1.0,
                      "sim_vs_exact": w_sim / w_exact - 1.0}
        out[cls] = split
    return out


def _positive(x: object) -> float | None:
    """`x` as a float where it is a finite positive number, else None."""
    ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0
    return float(x) if ok else None  # type: ignore[arg-type]


def gap_split_line(split: Mapping[str, Mapping[str, float]]) -> str:
    """The printout's line: per class, live vs exact = sample + emulation."""
    parts = []
    for cls, s in split.items():
        if "live_vs_exact" in s:
            parts.append(f"{cls.upper()} {100 * s['live_vs_exact']:+.1f} % = sample "
                         f"{100 * s['sim_vs_exact']:+.1f} % (the simulator on these draws vs "
                         f"exact), emulation {100 * s['live_vs_sim']:+.1f} % (live vs that "
                         "simulation)")
        else:
            parts.append(f"{cls.upper()} emulation {100 * s['live_vs_sim']:+.1f} % (live vs "
                         "the simulator on these draws)")
    return "W gap split: " + "; ".join(parts)
