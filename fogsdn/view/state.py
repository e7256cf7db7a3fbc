"""What the run's view (issue 21) serves, as pure functions: the documents, the running
per-class figures and the request checks, for the HTTP adapter (fogsdn.view.server)
and the live and replay sources (fogsdn.live.live_view, fogsdn.view.replay).
"""

from __future__ import annotations

import bisect
import csv
import hmac
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, NotRequired, TypedDict, overload

import networkx as nx

from fogsdn.measure.metrics import StreamingBatchMeans

CLASSES = ("hp", "lp")
Z95 = 1.96
HISTORY_POINTS = 600  # the chart's points per class (older ones thinned)
TIMELINE_CHURN = 200  # the churn events each state carries (the latest)
CURVE_ROWS = 60  # an online learner's latest epochs each state carries


class RequestError(ValueError):
    """A request refused with `status` and a one-line message; nothing changed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries the run's token (constant-time compare)."""
    if not header or not token:
        return False
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


def require_token(header: str | None, token: str) -> None:
    if not check_bearer(header, token):
        raise RequestError(401, "missing or wrong token: send Authorization: Bearer TOKEN "
                                "(the run folder's api_token)")


def json_object(body: bytes) -> dict[str, object]:
    """A request body that must be one JSON object."""
    try:
        obj = json.loads(body.decode() or "null")
    except (UnicodeDecodeError, ValueError) as err:
        raise RequestError(400, f"body: not JSON ({err.__class__.__name__})") from None
    if not isinstance(obj, dict):
        raise RequestError(400, "body: a JSON object, e.g. {\"name\": \"nodiff\"}")
    return obj


def error_document(message: str) -> dict[str, str]:
    """A one-line JSON error."""
    return {"error": " ".join(str(message).split())}


# -- running per-class figures ----------------------------------------------------------
@dataclass
class ClassTally:
    """One class's requests so far: W (node sojourn of answered ones after the warm-up)
    with its batch-means interval, blocking with a binomial interval, and a history of
    (t_ms, W, W_ci95, blocking) the chart draws."""

    warmup_ms: float = 0.0
    sent: int = 0
    answered: int = 0
    blocked: int = 0
    w: StreamingBatchMeans = field(default_factory=StreamingBatchMeans)
    history: list[tuple[float, float, float, float]] = field(default_factory=list)

    def add(self, t_send: float, outcome: str, node_ms: float) -> None:
        if t_send < self.warmup_ms:
            return
        self.sent += 1
        if outcome == "blocked":
            self.blocked += 1
        elif outcome == "ok" and math.isfinite(node_ms):
            self.answered += 1
            self.w.add(node_ms)

    def figures(self) -> dict[str, float | int]:
        r = self.w.result()
        b = self.blocked / self.sent if self.sent else math.nan
        b_ci = Z95 * math.sqrt(b * (1 - b) / self.sent) if self.sent else math.nan
        return {"sent": self.sent, "answered": self.answered, "blocked": self.blocked,
                "W": r.mean, "W_ci95": r.half_width, "blocking": b, "blocking_ci95": b_ci}

    def mark(self, t_ms: float) -> None:
        """Add the current figures to the history (at most HISTORY_POINTS, thinned);
        nothing before the first request counts."""
        if not self.sent:
            return
        f = self.figures()
        self.history.append((t_ms, float(f["W"]), float(f["W_ci95"]), float(f["blocking"])))
        if len(self.history) > HISTORY_POINTS:
            self.history = self.history[::2]


def new_tallies(warmup_ms: float) -> dict[str, ClassTally]:
    return {c: ClassTally(warmup_ms) for c in CLASSES}


@dataclass
class EpochTallies:
    """The class figures of each policy epoch apart (a request counts in the epoch it was
    sent in), so that each stands beside its own policy's prediction."""

    warmup_ms: float = 0.0
    starts: list[float] = field(default_factory=list)
    tallies: list[dict[str, ClassTally]] = field(default_factory=list)

    def open(self, from_ms: float) -> None:
        self.starts.append(from_ms)
        self.tallies.append(new_tallies(self.warmup_ms))

    def add(self, cls: str, t_send: float, outcome: str, node_ms: float) -> None:
        if not self.tallies or cls not in CLASSES:
            return
        i = max(0, bisect.bisect_right(self.starts, t_send) - 1)
        self.tallies[i][cls].add(t_send, outcome, node_ms)

    def mark(self, t_ms: float) -> None:
        if self.tallies:
            for tally in self.tallies[-1].values():
                tally.mark(t_ms)

    def current(self) -> dict[str, ClassTally]:
        return self.tallies[-1] if self.tallies else new_tallies(self.warmup_ms)

    def histories(self) -> dict[str, list[list[float | None]]]:
        """Each class's chart points over every epoch, a gap (a null point) between two."""
        out: dict[str, list[list[float | None]]] = {c: [] for c in CLASSES}
        for i, t in enumerate(self.tallies):
            for c in CLASSES:
                if i and out[c]:
                    out[c].append([self.starts[i], None, None, None])
                out[c] += [list(p) for p in t[c].history]
        return out


@dataclass(frozen=True)
class TraceRecord:
    """What the view reads of one trace row."""

    cls: str
    t_send: float
    outcome: str
    node: str
    node_ms: float
    t_done: float


def _num(x: object) -> float:
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def parse_trace_lines(lines: Sequence[str], header: Sequence[str]) -> list[TraceRecord]:
    """Complete CSV lines of a trace (fogsdn.core.trace columns) into records; a torn or
    malformed line is skipped."""
    out = []
    for rec in csv.DictReader(lines, fieldnames=list(header)):
        if rec.get("cls") not in CLASSES:
            continue
        t = _num(rec.get("t_send"))
        if not math.isfinite(t):
            continue
        out.append(TraceRecord(str(rec["cls"]), t, str(rec.get("outcome") or ""),
                               str(rec.get("node") or ""), _num(rec.get("node_ms")),
                               _num(rec.get("t_done"))))
    return out


def split_complete(buffer: str) -> tuple[list[str], str]:
    """(complete lines, the unfinished rest) of text read so far from a growing file."""
    head, sep, rest = buffer.rpartition("\n")
    if not sep:
        return [], buffer
    return [ln for ln in head.split("\n") if ln], rest


# -- where each class's flows go (from the controller's events) ---------------------------
DECISION_WINDOW = 500  # a per-request policy's share per node over its last decisions


class ClassRoute(TypedDict):
    """One class's route in the state (`ClassRoutes.document`): each node's share."""

    kind: Literal["groups", "decisions"]
    share: dict[str, float]
    of: NotRequired[int]  # decisions: how many the share is of


@dataclass
class ClassRoutes:
    """Each class's route as the switch holds it (select-group weights, from the
    controller's `ready`, `availability` and `policy_swap` events) and, for a
    per-request policy, its recent decisions per node."""

    weights: dict[str, dict[str, int]] = field(default_factory=dict)
    per_request: bool = False
    recent: dict[str, list[str]] = field(default_factory=dict)
    agent: dict[str, object] | None = None  # a learning policy's last `describe()`

    def apply(self, ev: Mapping[str, object]) -> None:
        kind = ev.get("event")
        if kind == "policy_swap":
            self.per_request = bool(ev.get("per_request"))
            self.recent = {}
            self.agent = None
        groups = ev.get("groups")
        if kind in ("ready", "availability", "policy_swap") and isinstance(groups, Mapping):
            for cls, w in groups.items():
                weights = _group_weights(w)
                if weights is not None:
                    self.weights[str(cls)] = weights
        elif kind == "decision":
            self.per_request = True
            seen = self.recent.setdefault(str(ev.get("cls")), [])
            seen.append(str(ev.get("node")))
            del seen[:-DECISION_WINDOW]
            agent = ev.get("agent")
            if isinstance(agent, Mapping):
                self.agent = dict(agent)

    def document(self) -> dict[str, ClassRoute]:
        """Per class: `{"kind": "groups"|"decisions", "share": {node: share}}`."""
        out: dict[str, ClassRoute] = {}
        for cls in CLASSES:
            if self.per_request:
                seen = self.recent.get(cls, [])
                share = {n: seen.count(n) / len(seen) for n in sorted(set(seen))}
                out[cls] = {"kind": "decisions", "share": share, "of": len(seen)}
            else:
                w = self.weights.get(cls, {})
                total = sum(w.values())
                out[cls] = {"kind": "groups",
                            "share": {n: x / total for n, x in w.items()} if total else {}}
        return out


def _group_weights(w: object) -> dict[str, int] | None:
    """A select group's bucket weights, or None where they are not whole numbers >= 0 (a
    replayed log's garbled line: skipped, as a torn line is)."""
    if not isinstance(w, Mapping):
        return None
    ok = all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in w.values())
    return {str(n): int(x) for n, x in w.items()} if ok else None


def event_lines(lines: Iterable[str]) -> list[dict[str, object]]:
    """The JSON events of an event log's complete lines (a torn one skipped)."""
    out = []
    for ln in lines:
        try:
            ev = json.loads(ln)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(ev)
    return out


# -- the documents ----------------------------------------------------------------------
@dataclass(frozen=True)
class NodeLive:
    name: str
    role: str
    up: bool
    capacity: int
    in_system: int | None = None
    utilisation: float | None = None
    power_w: float | None = None
    load_per_ms: float | None = None  # requests the node took per model ms


def utilisation(prev: tuple[float, float] | None, now: tuple[float, float], servers: int
                ) -> float | None:
    """Busy share of a node's servers between two (t, busy_s) readings."""
    if prev is None or now[0] <= prev[0]:
        return None
    return min(1.0, max(0.0, (now[1] - prev[1]) / ((now[0] - prev[0]) * max(1, servers))))


class TopologyNode(TypedDict):
    """A switch or a host in `topology_document`."""

    name: str
    kind: Literal["switch", "host"]
    role: NotRequired[str]  # a host's
    switch: NotRequired[str]
    ip: NotRequired[str]


class TopologyLink(TypedDict):
    """A link in `topology_document`: its ends and configured delay (model ms)."""

    id: str
    a: str
    b: str
    delay_ms: float
    bw_mbps: float | None


def topology_document(graph: nx.Graph) -> dict[str, list[TopologyNode] | list[TopologyLink]]:
    """Switches, hosts (role, switch) and links (id, ends, configured delay, model ms)."""
    nodes: list[TopologyNode] = []
    for name, d in graph.nodes(data=True):
        if d.get("kind") == "switch":
            nodes.append({"name": str(name), "kind": "switch"})
        else:
            nodes.append({"name": str(name), "kind": "host", "role": str(d.get("role", "")),
                          "switch": str(d.get("switch", "")), "ip": str(d.get("ip", ""))})
    links: list[TopologyLink] = [{"id": str(d["id"]), "a": str(a), "b": str(b),
                                  "delay_ms": float(d.get("delay_ms", 0.0)),
                                  "bw_mbps": d.get("bw_mbps")}
                                 for a, b, d in graph.edges(data=True)]
    return {"nodes": nodes, "links": links}


def link_loads(graph: nx.Graph, per_host: Mapping[str, float]) -> dict[str, float]:
    """Each host link's load (its host's requests per model ms, where given; 0 for a
    switch-to-switch link, whose share of each host's flows is not tracked here)."""
    out = {}
    for a, b, d in graph.edges(data=True):
        host = a if graph.nodes[a].get("kind") == "host" else (
            b if graph.nodes[b].get("kind") == "host" else None)
        out[str(d["id"])] = float(per_host.get(str(host), 0.0)) if host else 0.0
    return out


def predicted_figures(prediction: object) -> dict[str, dict[str, float]] | None:
    """The exact W and blocking per class of a prediction's `to_dict()` (None outside;
    TypeError for something else that is not empty)."""
    if not prediction:
        return None
    if not isinstance(prediction, Mapping):
        raise TypeError(f"prediction: an object, got {type(prediction).__name__}")
    out = {}
    for c in CLASSES:
        p = prediction.get(c)
        if isinstance(p, Mapping):
            out[c] = {"W": _num(p.get("W")), "blocking": _num(p.get("blocking"))}
    return out


@overload
def finite(x: Mapping[str, object]) -> dict[str, object]: ...


@overload
def finite(x: object) -> object: ...


def finite(x: object) -> object:
    """JSON without NaN or infinity (browsers' JSON.parse refuses them): None instead."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, Mapping):
        return {str(k): finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    return x


def state_document(*, mode: str, t_model_ms: float, duration_ms: float, running: bool,
                   nodes: Iterable[NodeLive], tallies: Mapping[str, ClassTally],
                   prediction: object, links: Mapping[str, float],
                   policy: str, timeline: Sequence[TimelineEvent],
                   epochs: Sequence[Mapping[str, object]], sent: int = 0, answered: int = 0,
                   total_power_w: float | None = None,
                   histories: Mapping[str, Sequence[Sequence[float | None]]] | None = None,
                   routes: Mapping[str, ClassRoute] | None = None,
                   agent: Mapping[str, object] | None = None,
                   learning_curve: Sequence[Mapping[str, object]] = ()) -> dict[str, object]:
    """GET /api/state and each server-sent event: the whole picture at one instant.
    `tallies` and `prediction` are the current policy epoch's; `histories` (default: the
    tallies' own) the chart's points; each epoch may carry its own `predicted`."""
    pred = predicted_figures(prediction)
    classes = {}
    for c, tally in tallies.items():
        hist = histories[c] if histories is not None else tally.history
        classes[c] = {**tally.figures(),
                      "predicted": (pred or {}).get(c),
                      "routes": (routes or {}).get(c),
                      "history": [list(p) for p in hist]}
    return finite({
        "mode": mode, "t_model_ms": t_model_ms, "duration_ms": duration_ms,
        "running": running, "policy": policy, "sent": sent, "answered": answered,
        "agent": dict(agent) if agent else None,
        "learning_curve": [dict(r) for r in learning_curve[-CURVE_ROWS:]],
        "total_power_w": total_power_w,
        "nodes": [asdict(n) for n in nodes],
        "classes": classes,
        "links": [{"id": k, "load_per_ms": v} for k, v in links.items()],
        "timeline": recent_timeline(timeline),
        "policy_epochs": [{**e, "predicted": predicted_figures(e.get("predicted"))}
                          for e in epochs],
    })


def curve_points(lines: Iterable[str], header: Sequence[str]
                 ) -> list[dict[str, str | int | float]]:
    """Rows of a run's learning_curve.csv (fogsdn.controller.learner_reports) as the page draws
    them, numbers as numbers; a row that does not parse is left out."""
    out = []
    for row in csv.reader(lines):
        if len(row) != len(header):
            continue
        rec: dict[str, str | int | float] = dict(zip(header, row, strict=True))
        try:
            for k in ("policy_epoch", "decisions"):
                rec[k] = int(rec[k])
            for k in ("response_ms", "network_w", "goal"):
                rec[k] = float(rec[k])
        except (KeyError, ValueError):
            continue
        out.append(rec)
    return out


class TimelineEvent(TypedDict):
    """One event of the view's timeline (`run_timeline`), model ms."""

    t_ms: float
    kind: Literal["churn", "policy", "fault"]
    node: NotRequired[str]  # churn, fault
    up: NotRequired[bool]  # churn
    policy: NotRequired[str]
    fault: NotRequired[str]  # the fault's kind


def recent_timeline(timeline: Sequence[TimelineEvent], keep: int = TIMELINE_CHURN
                    ) -> list[TimelineEvent]:
    """Every policy change and the last `keep` churn events (seed 000's OFN changes every
    few model ms: a whole run's would make each event large), in time order."""
    churn = [i for i, e in enumerate(timeline) if e.get("kind") == "churn"]
    drop = set(churn[:-keep]) if keep else set(churn)
    return [e.copy() for i, e in enumerate(timeline) if i not in drop]


def run_timeline(availability: Iterable[Mapping[str, object]],
                 epochs: Iterable[Mapping[str, object]],
                 faults: Iterable[object] = ()) -> list[TimelineEvent]:
    """The run's OFN changes, policy epochs and scheduled faults (summary.json `faults`,
    fogsdn.core.faults) as timeline events, in time order (model ms)."""
    churn: list[TimelineEvent] = [
        {"t_ms": _num(a.get("t")), "kind": "churn", "node": str(a.get("node")),
         "up": a.get("state") == "available"} for a in availability]
    policy: list[TimelineEvent] = [
        {"t_ms": _num(e.get("from_ms")), "kind": "policy", "policy": str(e.get("policy"))}
        for e in epochs]
    fault: list[TimelineEvent] = [
        {"t_ms": _num(f.get("t_ms")), "kind": "fault", "fault": str(f.get("kind")),
         "node": str(f.get("node") or "")} for f in faults if isinstance(f, Mapping)]
    return sorted(churn + policy + fault, key=lambda e: e["t_ms"])
