"""A finished run's view (issue 21, `scripts/view.py results/RUN`): the same page over
the run's folder, with a time slider. The folder is read once; the state at model time
t is computed from it. Writes are refused.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from fogsdn.controller.learner_reports import CURVE_FILE
from fogsdn.core.csv_rows import read_csv_rows
from fogsdn.core.scenario import Role, Scenario, load_scenario, scenario_graph
from fogsdn.core.summary import json_float, read_summary
from fogsdn.core.timebase import Timebase
from fogsdn.core.trace import Outcome, TraceRow, read_trace
from fogsdn.models.power_model import server_count
from fogsdn.view.state import (
    ClassRoutes,
    EpochTallies,
    NodeLive,
    RequestError,
    TopologyLink,
    TopologyNode,
    curve_points,
    event_lines,
    link_loads,
    run_timeline,
    state_document,
    topology_document,
)

CHART_POINTS = 120  # chart points over the whole run
RECENT_MS = 100.0
T = TypeVar("T")  # a node's load at t: requests it finished in the last RECENT_MS


def finished_at(r: TraceRow) -> float:
    """When a request's figure became known: its completion, or its send when blocked."""
    return r.t_send if r.outcome is Outcome.BLOCKED or not math.isfinite(r.t_done) else r.t_done


def up_at(availability: Sequence[Mapping[str, str]], node: str, t_ms: float) -> bool:
    """An OFN's drawn state at t (available before any row says otherwise)."""
    last = next((a for a in reversed(availability)
                 if a.get("node") == node and float(a["t"]) <= t_ms), None)
    return last is None or last.get("state") == "available"


def in_system_at(rows: Sequence[TraceRow], node: str, t_ms: float) -> int:
    """Requests at `node` at t: arrived (completion minus sojourn) and not yet done."""
    return sum(1 for r in rows if r.node == node and r.outcome is Outcome.OK
               and math.isfinite(r.node_ms) and r.t_done - r.node_ms <= t_ms < r.t_done)


def epoch_at(epochs: Sequence[Mapping[str, object]], t_ms: float
             ) -> Mapping[str, object] | None:
    return next((e for e in reversed(epochs) if _from_ms(e) <= t_ms), None)


class ReplayError(ValueError):
    """A run folder's file that the replay cannot show, named with the row."""


def _read(path: Path, reader: Callable[[Path], T]) -> T:
    """`reader(path)`, its failure one ReplayError naming `path`."""
    try:
        return reader(path)
    except ReplayError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        text = str(err).splitlines()[0] if str(err) else err.__class__.__name__
        raise ReplayError(f"{path}: {text}") from None


def _csv_rows(path: Path) -> list[dict[str, str]]:
    return read_csv_rows(path) if path.exists() else []


def _number(row: Mapping[str, object], key: str, where: str) -> float:
    try:
        x = json_float(row[key])
    except (KeyError, TypeError, ValueError):
        raise ReplayError(f"{where}: {key}: a number, got {row.get(key)!r}") from None
    if not math.isfinite(x):
        raise ReplayError(f"{where}: {key}: a finite number, got {row.get(key)!r}")
    return x


def _from_ms(epoch: Mapping[str, object]) -> float:
    """A policy epoch's start (checked by `_summary` as the file is read)."""
    return _number(epoch, "from_ms", "policy_epochs")


def _availability_rows(path: Path) -> list[dict[str, str]]:
    """availability.csv's rows, each with a node, a finite t and a known state."""
    rows = _csv_rows(path)
    for i, r in enumerate(rows, start=2):  # line 1 is the header
        where = f"{path}: line {i}"
        _number(r, "t", where)
        if not r.get("node") or r.get("state") not in ("available", "unavailable"):
            raise ReplayError(f"{where}: node and state (available/unavailable) needed, got "
                              f"node={r.get('node')!r} state={r.get('state')!r}")
    return rows


def _power_rows(path: Path) -> list[dict[str, str]]:
    rows = _csv_rows(path)
    for i, r in enumerate(rows, start=2):
        for key in ("t_s", "dt_s", "power_w"):
            _number(r, key, f"{path}: line {i}")
    return rows


def _prediction(d: Mapping[str, object], where: str) -> None:
    """ReplayError unless `predicted` is missing, null or an object."""
    if d.get("predicted") is not None and not isinstance(d.get("predicted"), dict):
        raise ReplayError(f"{where}: predicted: an object or null, got {d.get('predicted')!r}")


def _summary(path: Path) -> dict[str, object]:
    """summary.json, its `predicted` an object (or null) and its `policy_epochs` (what the
    slider shows per epoch) each an object with a finite `from_ms` (and such a
    `predicted`)."""
    d = read_summary(path)
    _prediction(d, str(path))
    epochs = d.get("policy_epochs")
    if epochs is not None:
        _policy_epochs(epochs, str(path))
    return d


def _policy_epochs(epochs: object, where: str) -> list[dict[str, object]]:
    """summary.json's `policy_epochs`: ReplayError unless a list of objects, each with a
    finite `from_ms`."""
    if not isinstance(epochs, list):
        raise ReplayError(f"{where}: policy_epochs: a list, got {type(epochs).__name__}")
    out: list[dict[str, object]] = []
    for i, e in enumerate(epochs):
        at = f"{where}: policy_epochs[{i}]"
        if not isinstance(e, dict):
            raise ReplayError(f"{at}: an object, got {type(e).__name__}")
        if isinstance(e.get("from_ms"), bool):
            raise ReplayError(f"{at}: from_ms: a number, got {e['from_ms']!r}")
        _number(e, "from_ms", at)
        _prediction(e, at)
        out.append(e)
    return out


def _controller_events(run_dir: Path, timebase: Timebase) -> list[dict[str, object]]:
    """The controller's events (a live run's), on the run's clock made model ms; none
    without the run's epoch, and an event whose `t` is not a finite number is skipped as
    a torn line is."""
    try:
        epoch = float((run_dir / "epoch").read_text())
        lines = (run_dir / "controller-events.jsonl").read_text().splitlines()
    except (OSError, ValueError):
        return []
    events, clock = [], timebase.started(epoch)
    for ev in event_lines(lines):
        t = ev.get("t", epoch)
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            continue
        ev["t_ms"] = t_ms = clock.model_ms_at(t)
        if math.isfinite(t_ms):
            events.append(ev)
    return events


@dataclass
class ReplaySource:
    """`ViewSource` over a finished run's folder."""

    sc: Scenario
    rows: list[TraceRow]  # in the order their figures became known
    availability: list[dict[str, str]]
    power: list[dict[str, str]]
    summary_json: dict[str, object]  # summary.json
    controller_events: list[dict[str, object]] = field(default_factory=list)  # with t_ms
    token: str = ""  # no writes to a finished run
    # shown whole at any t
    learning_curve: list[dict[str, str | int | float]] = field(default_factory=list)

    def _faults_until(self, t: float) -> list[dict[str, object]]:
        """The scheduled faults (summary.json `faults`) that began by model time t."""
        faults = self.summary_json.get("faults")
        if not isinstance(faults, list):
            return []
        return [f for f in faults if isinstance(f, dict) and isinstance(f.get("t_ms"), int | float)
                and not isinstance(f.get("t_ms"), bool) and f["t_ms"] <= t]

    @classmethod
    def of(cls, run_dir: Path) -> ReplaySource:
        """The run in `run_dir`, every file checked as it is read: ReplayError naming the
        file (and the row) that cannot be shown."""
        sc = _read(run_dir / "scenario.yaml", load_scenario)
        rows = sorted(_read(run_dir / "trace.csv", read_trace), key=finished_at)
        avail = _read(run_dir / "availability.csv", _availability_rows)
        power = _read(run_dir / "power.csv", _power_rows)
        summary = _read(run_dir / "summary.json", _summary)
        events = _controller_events(run_dir, sc.timebase)
        curve: list[dict[str, str | int | float]] = []
        if (run_dir / CURVE_FILE).exists():
            lines = (run_dir / CURVE_FILE).read_text().splitlines()
            curve = curve_points(lines[1:], lines[0].split(",")) if lines else []
        return cls(sc, rows, avail, power, summary, events, learning_curve=curve)

    def __post_init__(self) -> None:
        self._done = [finished_at(r) for r in self.rows]
        self._graph = scenario_graph(self.sc)
        given = self.summary_json.get("policy_epochs")
        self._epochs = _policy_epochs(given, "summary.json") if given else [
            {"policy": self.sc.policy.name, "from_ms": 0.0, "to_ms": self.sc.duration_ms,
             "predicted": self.summary_json.get("predicted")}]

    def _power_at(self, node: str, t_ms: float) -> float | None:
        scale = self.sc.time_scale
        for p in self.power:
            if p.get("element") != node:
                continue
            t0 = float(p["t_s"]) * 1000.0 / scale
            if t0 <= t_ms < t0 + float(p["dt_s"]) * 1000.0 / scale:
                return float(p["power_w"])
        return None

    def state(self, t_ms: float | None = None) -> dict[str, object]:
        end = self.sc.duration_ms
        t = end if t_ms is None else t_ms
        last = max(end, self._done[-1] if self._done else end)
        if not math.isfinite(t) or not 0 <= t <= last:
            raise RequestError(400, f"t: model ms in [0, {last:g}], got {t_ms}")
        tallies = EpochTallies(self.sc.warmup_ms)
        starts = [_from_ms(e) for e in self._epochs]
        grid = [end * (k + 1) / CHART_POINTS for k in range(CHART_POINTS)]
        g = 0
        upto = bisect.bisect_right(self._done, t)

        def advance(until: float) -> None:
            nonlocal g
            while g < len(grid) and grid[g] < until:
                while len(tallies.starts) < len(starts) and starts[len(tallies.starts)] <= grid[g]:
                    tallies.open(starts[len(tallies.starts)])
                tallies.mark(grid[g])
                g += 1

        tallies.open(starts[0] if starts else 0.0)
        for r, done in zip(self.rows[:upto], self._done[:upto], strict=True):
            advance(done)
            while len(tallies.starts) < len(starts) and starts[len(tallies.starts)] <= done:
                tallies.open(starts[len(tallies.starts)])
            tallies.add(r.cls, r.t_send, r.outcome.value, r.node_ms)
        advance(t)
        tallies.mark(t)
        nodes, load = [], {}
        recent = [r for r, d in zip(self.rows[:upto], self._done[:upto], strict=True)
                  if d > t - RECENT_MS and r.outcome is Outcome.OK]
        for n in self.sc.nodes:
            q = in_system_at(self.rows, n.name, t)
            per_ms = sum(1 for r in recent if r.node == n.name) / RECENT_MS
            load[n.name] = per_ms
            nodes.append(NodeLive(n.name, n.role.value,
                                  up_at(self.availability, n.name, t)
                                  if n.role is Role.OFN else True,
                                  n.capacity, q, min(q, server_count(n)) / server_count(n),
                                  self._power_at(n.name, t), per_ms))
        routes = ClassRoutes()
        for ev in self.controller_events:
            t_ev = ev["t_ms"]
            if isinstance(t_ev, float) and t_ev <= t:
                routes.apply(ev)
        epoch = epoch_at(self._epochs, t)
        shown = [e for e in self._epochs if _from_ms(e) <= t]
        return state_document(
            mode="replay", t_model_ms=t, duration_ms=end, running=False, nodes=nodes,
            tallies=tallies.current(), histories=tallies.histories(),
            prediction=(epoch or {}).get("predicted"),
            links=link_loads(self._graph, load),
            policy=str((epoch or {}).get("policy", self.sc.policy.name)),
            timeline=run_timeline([a for a in self.availability if float(a["t"]) <= t], shown,
                                  self._faults_until(t)),
            epochs=[{k: e[k] for k in ("policy", "from_ms", "to_ms", "predicted") if k in e}
                    for e in shown],
            sent=sum(1 for r in self.rows if r.t_send <= t),
            answered=sum(1 for r in self.rows[:upto] if r.outcome is Outcome.OK),
            routes=routes.document(), agent=routes.agent, learning_curve=self.learning_curve)

    def topology(self) -> dict[str, list[TopologyNode] | list[TopologyLink]]:
        return topology_document(self._graph)

    def summary(self) -> dict[str, object]:
        keys = ("measured", "predicted", "comparison", "policy_epochs", "power")
        return {k: self.summary_json[k] for k in keys if k in self.summary_json}

    def swap_policy(self, request: dict[str, object]) -> dict[str, object]:
        raise RequestError(405, "a finished run: its policy cannot be swapped")
