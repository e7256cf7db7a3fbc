"""Faults on a schedule: what a scenario's `faults:` list says, the timed actions it
expands to, how it changes the OFNs' availability, and what each fault cost (pure).

A fault happens at model time `t_ms` from the load's start. The live runner applies
every kind; the simulator applies the one its model has (`cut_ofn`, a forced departure:
the OFN leaves as a churn departure would, under the scenario's `churn.leave`, and the
churn cannot bring it back while the cut lasts). docs/reliability.md, "Faults on a
schedule", says what each kind does and how its cost is counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NotRequired, Self, TypedDict

from pydantic import Field, model_validator

from fogsdn.core.topology import FrozenModel


class FaultKind(StrEnum):
    LINK_DOWN = "link_down"  # the node's link loses carrier; nobody tells the controller
    LINK_UP = "link_up"
    LOSS_BURST = "loss_burst"  # the node's link drops a share of its packets for a while
    KILL_WORKER = "kill_worker"  # SIGKILL the node's worker; optionally started again
    KILL_CONTROLLER = "kill_controller"  # SIGKILL the controller; the runner restarts it
    CUT_OFN = "cut_ofn"  # the OFN leaves now (out of range) and stays away for a while


# the kinds the simulator's model has; the others are live only
SIMULATED_KINDS = frozenset({FaultKind.CUT_OFN})


class FaultSpec(FrozenModel):
    """One entry of a scenario's `faults:` list."""

    t_ms: float = Field(ge=0, le=1e12, description="model ms after the load's start")
    kind: FaultKind
    node: str | None = Field(None, description="the node whose link, worker or range it hits")
    duration_ms: float | None = Field(
        None, gt=0, le=1e12, description="link_down, loss_burst, cut_ofn: how long it lasts "
        "(none: to the end of the run)")
    loss: float | None = Field(None, gt=0, lt=1, description="loss_burst: drop share, below 1")
    restart_after_ms: float | None = Field(
        None, ge=0, le=1e12, description="kill_worker: start the worker again this much later "
        "(none: it stays dead)")

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Self:
        k = self.kind
        if k is FaultKind.KILL_CONTROLLER:
            if self.node is not None:
                raise ValueError("kill_controller takes no node")
        elif self.node is None:
            raise ValueError(f"{k.value} needs a node")
        if (self.loss is None) == (k is FaultKind.LOSS_BURST):
            raise ValueError("loss is loss_burst's field, and loss_burst needs it")
        if self.duration_ms is not None and k not in (
                FaultKind.LINK_DOWN, FaultKind.LOSS_BURST, FaultKind.CUT_OFN):
            raise ValueError(f"duration_ms is not a field of {k.value}")
        if self.restart_after_ms is not None and k is not FaultKind.KILL_WORKER:
            raise ValueError(f"restart_after_ms is not a field of {k.value}")
        return self

    @property
    def end_ms(self) -> float:
        """When the fault's own effect ends (inf: never, within the run)."""
        if self.kind is FaultKind.KILL_WORKER:
            return math.inf if self.restart_after_ms is None else self.t_ms + self.restart_after_ms
        if self.kind in (FaultKind.LINK_UP, FaultKind.KILL_CONTROLLER):
            return self.t_ms  # the controller's outage is measured, not scheduled
        return math.inf if self.duration_ms is None else self.t_ms + self.duration_ms

    def label(self) -> str:
        """`kill_worker fn at 2000 ms`: how printouts and errors name it."""
        where = f" {self.node}" if self.node else ""
        return f"{self.kind.value}{where} at {self.t_ms:g} ms"


class ActionKind(StrEnum):
    LINK = "link"  # set the node's link up or down
    LOSS = "loss"  # set the node's link's loss (0: back to the configured)
    KILL_WORKER = "kill_worker"
    START_WORKER = "start_worker"
    KILL_CONTROLLER = "kill_controller"


@dataclass(frozen=True)
class FaultAction:
    """One timed step of the live schedule; `fault` indexes the scenario's list."""

    t_ms: float
    fault: int
    kind: ActionKind
    node: str | None = None
    up: bool = True  # LINK
    loss: float = 0.0  # LOSS


def fault_actions(faults: Sequence[FaultSpec]) -> list[FaultAction]:
    """The live runner's steps in time order (a stable sort: a fault's start precedes its
    end when both fall at one instant). `cut_ofn` is not among them: it changes the OFN's
    availability (`cut_transitions`), which the churn replay applies."""
    steps: list[FaultAction] = []
    for i, f in enumerate(faults):
        if f.kind is FaultKind.LINK_DOWN:
            steps.append(FaultAction(f.t_ms, i, ActionKind.LINK, f.node, up=False))
            if math.isfinite(f.end_ms):
                steps.append(FaultAction(f.end_ms, i, ActionKind.LINK, f.node, up=True))
        elif f.kind is FaultKind.LINK_UP:
            steps.append(FaultAction(f.t_ms, i, ActionKind.LINK, f.node, up=True))
        elif f.kind is FaultKind.LOSS_BURST:
            steps.append(FaultAction(f.t_ms, i, ActionKind.LOSS, f.node, loss=f.loss or 0.0))
            if math.isfinite(f.end_ms):
                steps.append(FaultAction(f.end_ms, i, ActionKind.LOSS, f.node, loss=0.0))
        elif f.kind is FaultKind.KILL_WORKER:
            steps.append(FaultAction(f.t_ms, i, ActionKind.KILL_WORKER, f.node))
            if math.isfinite(f.end_ms):
                steps.append(FaultAction(f.end_ms, i, ActionKind.START_WORKER, f.node))
        elif f.kind is FaultKind.KILL_CONTROLLER:
            steps.append(FaultAction(f.t_ms, i, ActionKind.KILL_CONTROLLER))
    return sorted(steps, key=lambda s: s.t_ms)


def cut_spans(faults: Sequence[FaultSpec]) -> dict[str, list[tuple[float, float]]]:
    """Each OFN's cut intervals [start, end), merged where they overlap."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for f in faults:
        if f.kind is FaultKind.CUT_OFN and f.node is not None:
            spans.setdefault(f.node, []).append((f.t_ms, f.end_ms))
    merged: dict[str, list[tuple[float, float]]] = {}
    for node, items in spans.items():
        out: list[tuple[float, float]] = []
        for a, b in sorted(items):
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        merged[node] = out
    return merged


def cut_changes(initial: list[bool], changes: Iterable[tuple[float, int, bool]],
                ofns: Sequence[str], faults: Sequence[FaultSpec]
                ) -> tuple[list[bool], Iterator[tuple[float, int, bool]]]:
    """The OFNs' availability with the cuts applied to the drawn churn: an OFN is
    available when the churn says so and no cut holds it away. Takes and gives the
    simulator's form (initial states, then (t, OFN index, new state) in time order);
    only real changes come out. Without cuts, the input is returned as it is."""
    spans = cut_spans(faults)
    if not spans:
        return initial, iter(changes)
    index = {name: k for k, name in enumerate(ofns)}
    unknown = sorted(set(spans) - set(index))
    if unknown:
        raise ValueError(f"cut_ofn: {', '.join(unknown)} is not an OFN")
    # the cuts' own edges, as (t, k, cut_now) events, merged with the drawn changes
    edges: list[tuple[float, int, bool]] = []
    for name, items in spans.items():
        for a, b in items:
            edges.append((a, index[name], True))
            if math.isfinite(b):
                edges.append((b, index[name], False))
    edges.sort(key=lambda e: e[0])
    drawn = list(initial)
    cut = [False] * len(initial)
    for t, k, on in edges:  # a cut from t = 0 holds the OFN away from the start
        if t == 0.0 and on:
            cut[k] = True
    start = [d and not c for d, c in zip(drawn, cut, strict=True)]

    def merged() -> Iterator[tuple[float, int, bool]]:
        shown = list(start)
        pending = [e for e in edges if not (e[0] == 0.0 and e[2])]
        j = 0
        for t, k, state in changes:
            while j < len(pending) and pending[j][0] <= t:
                yield from _edge(pending[j], drawn, cut, shown)
                j += 1
            drawn[k] = state
            now = state and not cut[k]
            if now != shown[k]:
                shown[k] = now
                yield t, k, now
        while j < len(pending):
            yield from _edge(pending[j], drawn, cut, shown)
            j += 1

    return start, merged()


def _edge(edge: tuple[float, int, bool], drawn: list[bool], cut: list[bool],
          shown: list[bool]) -> Iterator[tuple[float, int, bool]]:
    t, k, on = edge
    cut[k] = on
    now = drawn[k] and not on
    if now != shown[k]:
        shown[k] = now
        yield t, k, now


@dataclass(frozen=True)
class ServedRequest:
    """What the cost count reads of one trace row (model ms)."""

    cls: str
    t_send: float
    t_end: float  # when it was answered or given up on
    node: str
    outcome: str  # ok, blocked, timeout, lost


class FaultCost(TypedDict):
    """What one fault cost (`fault_cost`): counts, and model ms."""

    lost: int
    timed_out: int
    blocked: int
    rerouted: int
    window_ms: float
    recovery_ms: float | None


class FaultStep(TypedDict):
    """One step a live run applied: what it did, and when (model ms)."""

    step: str
    t_applied_ms: float


class FaultRecord(TypedDict):
    """One entry of summary.json's `faults`, from either engine (`fogsdn.sim.fault_rows`,
    `fogsdn.live.fault_schedule`); a live run's grows as its steps are applied."""

    fault: int  # the index in the scenario's `faults:` list
    kind: str
    node: str | None
    t_ms: float
    simulated: NotRequired[bool]  # whether the simulator's model has the kind
    cost: NotRequired[FaultCost]
    note: NotRequired[str]
    # live: the steps, a step's error, a killed process's death and outage (real ms)
    steps: NotRequired[list[FaultStep]]
    error: NotRequired[str]
    exit: NotRequired[str]
    t_died_model_ms: NotRequired[float]
    outage_ms: NotRequired[float]
    outage_model_ms: NotRequired[float]
    back_after_start_ms: NotRequired[float]


def fault_cost(fault: FaultSpec, requests: Sequence[ServedRequest], run_end_ms: float,
               measured_end_ms: float | None = None) -> FaultCost:
    """What one fault cost, from the trace. The fault's window runs from its start to its
    scheduled end (unbounded faults: to the run's end), or to `measured_end_ms` where the
    run measured it (a killed process restarted: until it served again). Counted:
    - lost, timed out, blocked: requests not answered that were in flight during the
      window and went to the fault's node (any node for the controller; a request whose
      node the client never learned counts toward each fault it overlaps);
    - rerouted: of the requests sent during the window and answered, how many more went
      elsewhere than the node's share of their class before the fault would send there
      (an estimate, rounded);
    - recovery_ms: from the fault's start until a request sent after the window's end was
      first answered by the node (any node for the controller); None if none was."""
    t0 = fault.t_ms
    if measured_end_ms is not None:  # a restarted process: until it served again
        t1 = min(max(t0, measured_end_ms), run_end_ms)
    elif fault.kind in (FaultKind.LINK_UP, FaultKind.KILL_CONTROLLER):
        t1 = t0
    else:
        t1 = min(fault.end_ms, run_end_ms)
    node = fault.node

    def at_node(r: ServedRequest) -> bool:
        return node is None or r.node == node

    def maybe_at_node(r: ServedRequest) -> bool:  # a lost request's node may be unknown
        return at_node(r) or not r.node

    lost = timed_out = blocked = 0
    before: dict[str, list[int]] = {}  # class -> [answered, answered at the node] before
    during: dict[str, list[int]] = {}  # the same for requests sent in the window
    first_back: float | None = None
    for r in requests:
        if r.t_send <= t1 and r.t_end >= t0 and maybe_at_node(r) and r.outcome != "ok":
            if r.outcome == "lost":
                lost += 1
            elif r.outcome == "timeout":
                timed_out += 1
            elif r.outcome == "blocked":
                blocked += 1
        if r.outcome == "ok":
            if r.t_end <= t0:
                tally = before.setdefault(r.cls, [0, 0])
            elif t0 <= r.t_send <= t1:
                tally = during.setdefault(r.cls, [0, 0])
            else:
                tally = [0, 0]
            tally[0] += 1
            tally[1] += r.node == node
            if r.t_send >= t1 and at_node(r) and (first_back is None or r.t_end < first_back):
                first_back = r.t_end
    # re-routed: answered elsewhere, beyond the node's usual share of the class
    rerouted = 0.0
    if node is not None:
        for cls, (n_ok, n_here) in during.items():
            done, here = before.get(cls, (0, 0))
            if done:
                rerouted += max(0.0, here / done * n_ok - n_here)
    return {"lost": lost, "timed_out": timed_out, "blocked": blocked,
            "rerouted": round(rerouted),
            "window_ms": round(t1 - t0, 3),
            "recovery_ms": None if first_back is None else round(first_back - t0, 3)}
