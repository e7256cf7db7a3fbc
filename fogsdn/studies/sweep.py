"""A scenario's sweep as a study (`fogsdn.studies.study` runs it): every (value x policy x
replication) point, simulated or live, each appended to sweep.csv as it finishes (failed
ones to sweep_failures.csv), and mean W per policy and class beside the exact curves.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from fogsdn.core.csv_rows import write_csv_rows
from fogsdn.core.scenario import Scenario
from fogsdn.core.summary import class_figures, json_float, json_int
from fogsdn.measure.figures import CLASSES, Curves, draw_sweep
from fogsdn.measure.metrics import replications_ci
from fogsdn.studies.study import Engine, StudyError, run_live_point

MEASURED = ("count", "ok", "W", "W_ci95", "blocking", "lost_prob", "timeout_prob", "outage")
CSV_COLUMNS: tuple[str, ...] = ("index", "policy", "parameter", "value", "replication", "cls",
                                *MEASURED, "requests", "wall_s", "run_dir")
FAIL_COLUMNS: tuple[str, ...] = ("index", "policy", "parameter", "value", "replication", "error")


class SweepError(StudyError):
    """A sweep that cannot run at all (as opposed to one failed point)."""


class SweepRow(TypedDict):
    """One line of sweep.csv (`CSV_COLUMNS`): one class at one point, its `MEASURED`
    figures as the run's summary holds them (None: null, a live run's NaN)."""

    index: int
    policy: str
    parameter: str
    value: float
    replication: int
    cls: str
    count: int
    ok: int
    W: float | None
    W_ci95: float | None
    blocking: float | None
    lost_prob: float | None
    timeout_prob: float | None
    outage: float | None
    requests: int | str  # "" where the summary has none
    wall_s: float | str
    run_dir: str


class SweepFailure(TypedDict):
    """One line of sweep_failures.csv (`FAIL_COLUMNS`)."""

    index: int
    policy: str
    parameter: str
    value: float
    replication: int
    error: str


@dataclass(frozen=True)
class Point:
    index: int
    policy: str
    parameter: str
    value: float
    replication: int
    scenario: Scenario
    run_dir: Path

    def label(self) -> str:
        return f"{self.policy} {self.parameter}={self.value:g} rep {self.replication}"


def plan(scenario: Scenario, out_dir: Path, engine: Engine = "simulate") -> list[Point]:
    """Every point: sweep values (emulate_values for emulate, when given) x policies
    (the scenario's own when the sweep names none) x replications."""
    sw = scenario.sweep
    if sw is None:
        raise SweepError(f"scenario {scenario.name} has no sweep block")
    values = sw.emulate_values if (engine == "emulate" and sw.emulate_values) else sw.values
    policies = sw.policies or (scenario.policy.name,)
    points: list[Point] = []
    for value in values:
        for policy in policies:
            over: dict[str, float | str] = {sw.parameter: value}
            if policy != scenario.policy.name:
                over["policy.name"] = policy
            sc = scenario.with_overrides(over)
            for r in range(sw.replications):
                run_dir = out_dir / "points" / policy / f"{sw.parameter}={value:g}" / f"rep{r:03d}"
                points.append(Point(len(points), policy, sw.parameter, float(value), r, sc,
                                    run_dir))
    return points


def _figure(x: object) -> float | None:
    return None if x is None else json_float(x)


def _rows(point: Point, summary: Mapping[str, object]) -> list[SweepRow]:
    requests, wall_s = summary.get("requests"), summary.get("wall_s")
    rows: list[SweepRow] = []
    for cls in CLASSES:
        m = class_figures(summary, cls)
        rows.append({
            "index": point.index, "policy": point.policy, "parameter": point.parameter,
            "value": point.value, "replication": point.replication, "cls": cls,
            "count": json_int(m["count"]), "ok": json_int(m["ok"]), "W": _figure(m["W"]),
            "W_ci95": _figure(m["W_ci95"]), "blocking": _figure(m["blocking"]),
            "lost_prob": _figure(m["lost_prob"]), "timeout_prob": _figure(m["timeout_prob"]),
            "outage": _figure(m["outage"]),
            "requests": "" if requests is None else json_int(requests),
            "wall_s": "" if wall_s is None else json_float(wall_s),
            "run_dir": str(point.run_dir)})
    return rows


def run_point(
    point: Point, requests: int | None = None, duration_ms: float | None = None,
    trace: bool = True,
) -> list[SweepRow]:
    """Simulate one point (in whatever process or Ray worker runs it): sweep.csv rows."""
    from fogsdn.sim.runner import run_simulation

    summary = run_simulation(point.scenario, point.run_dir, requests=requests,
                             duration_ms=duration_ms, replication=point.replication,
                             trace=trace, compare=False)
    return _rows(point, summary)


def emulate_point(point: Point, duration_ms: float | None = None,
                  time_scale: float | None = None) -> list[SweepRow]:
    """Run one point live (root, Open vSwitch; one network at a time per host), here or
    in a Ray worker on the node that took the emulation resource."""
    sc = point.scenario
    over: dict[str, float] = {}
    if point.replication:
        over["seed"] = sc.seed + point.replication
    if duration_ms is not None:
        over["duration_ms"] = duration_ms
        if sc.warmup_ms >= duration_ms:
            over["warmup_ms"] = 0.0
    if time_scale is not None:
        over["time_scale"] = time_scale
    if over:
        sc = sc.with_overrides(over)
    summary = run_live_point(sc, point.run_dir)
    return _rows(point, summary)


class SweepStudy:
    """A scenario's sweep as a study (`fogsdn.studies.study`): sweep.csv written as points finish
    and the failed ones in sweep_failures.csv, then sweep.png."""

    name = "sweep"

    def __init__(self, scenario: Scenario, out_dir: Path, engine: Engine = "simulate",
                 requests: int | None = None, duration_ms: float | None = None,
                 trace: bool = True, figure: bool = True, time_scale: float | None = None,
                 optimum: bool = False) -> None:
        self.scenario, self.out_dir, self.engine, self.figure = scenario, out_dir, engine, figure
        self.optimum = optimum  # the figure's optimal curve (exact_curves)
        self.job: Callable[..., list[SweepRow]] = \
            emulate_point if engine == "emulate" else run_point
        self.live_summary: Path | None = None  # each live point has its own
        self.job_args: tuple[Any, ...] = (duration_ms, time_scale) if engine == "emulate" \
            else (requests, duration_ms, trace)
        self.points: list[Point] = []
        self.rows: list[SweepRow] = []
        self.failures: list[SweepFailure] = []
        self.figure_path: Path | None = None

    def plan(self) -> list[Point]:
        self.points = plan(self.scenario, self.out_dir, self.engine)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "scenario.yaml").write_text(self.scenario.to_yaml())
        write_csv_rows(self.out_dir / "sweep.csv", CSV_COLUMNS, [])
        return self.points

    def record(self, point: Point, rows: list[SweepRow]) -> str:
        self.rows += rows
        with open(self.out_dir / "sweep.csv", "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=CSV_COLUMNS).writerows(rows)
        return ", ".join(f"W {r['cls']} {json_float(r['W']):.3f}" for r in rows)

    def finish(self, rows: list[SweepRow], failures: list[tuple[Point, str]]
               ) -> list[Path]:
        self.failures = [{"index": p.index, "policy": p.policy, "parameter": p.parameter,
                          "value": p.value, "replication": p.replication, "error": error}
                         for p, error in failures]
        if self.failures:
            write_csv_rows(self.out_dir / "sweep_failures.csv", FAIL_COLUMNS, self.failures)
        out = [self.out_dir / "sweep.csv"]
        if self.figure and rows:
            self.figure_path = draw_sweep(
                self.scenario, aggregate(rows), self.out_dir / "sweep.png",
                exact_curves(self.scenario, self.points, self.optimum),
                "live" if self.engine == "emulate" else "sim")
            out.append(self.figure_path)
        return out


def aggregate(rows: Sequence[Mapping[str, object]]) -> list[dict[str, str | float]]:
    """Per (policy, value, class): mean W with a 95 % interval across replications (the
    batch-means interval of the single run when there is one), blocking and outage.
    `rows`: `SweepRow`s, or sweep.csv's lines as read back."""
    groups: dict[tuple[str, float, str], list[Mapping[str, object]]] = {}
    for r in rows:
        groups.setdefault((str(r["policy"]), json_float(r["value"]), str(r["cls"])),
                          []).append(r)
    out: list[dict[str, str | float]] = []  # fogsdn.measure.figures.draw_sweep's points
    for (policy, value, cls), rs in sorted(groups.items()):
        ws = [json_float(r["W"]) for r in rs]
        if len(rs) > 1:
            ci = replications_ci(ws)
            w, half = ci.mean, ci.half_width
        else:
            w, half = ws[0], json_float(rs[0]["W_ci95"])
        out.append({"policy": policy, "value": value, "cls": cls, "n": len(rs), "W": w,
                    "W_ci95": half, **{k: sum(json_float(r[k]) for r in rs) / len(rs)
                                       for k in ("blocking", "outage", "lost_prob")}})
    return out


def exact_curves(scenario: Scenario, points: Sequence[Point], optimum: bool = False
                 ) -> Curves:
    """(policy, class) -> [(value, exact W, exact outage)] at the swept values, for every
    policy the exact chain can take; `optimum` adds ("optimal", class), the best
    state-based dispatch for `fogsdn.exact.seed000_optimum`'s objective where it is found."""
    from fogsdn.exact.model_params import OutsideModel, exact_prediction
    from fogsdn.exact.optimal_policy import OptimizeError
    from fogsdn.exact.seed000_optimum import point_optimum

    out: Curves = {}
    seen: set[tuple[str, float]] = set()
    for p in points:
        if (p.policy, p.value) in seen:
            continue
        seen.add((p.policy, p.value))
        try:
            pred = exact_prediction(p.scenario)
            exact = {cls: (float(pred.cls(cls).W), float(pred.cls(cls).outage))
                     for cls in CLASSES}
        except OutsideModel:
            continue
        if optimum and ("optimal", p.value) not in seen:
            seen.add(("optimal", p.value))
            try:
                f = point_optimum(p.scenario, with_baselines=False).optimal
            except (OutsideModel, OptimizeError):
                continue
            for cls in CLASSES:
                out.setdefault(("optimal", cls), []).append(
                    (p.value, f[f"{cls}.W"], f[f"{cls}.outage"]))
        for cls, (w, outage) in exact.items():
            if math.isfinite(w):
                out.setdefault((p.policy, cls), []).append((p.value, w, outage))
    return {k: sorted(v) for k, v in out.items()}
