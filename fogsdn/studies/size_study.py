"""Seed 002b's size-based study (`fogsdn.studies.study`): simulated points beside the model
curves (exact, or approximate for TAGS), drawn by `fogsdn.measure.figures`.

A sweep over the size distribution (`shape`, `high`) holds the base load: lambda is
rescaled to load * sum(mu) / E[X] at every point, since E[X] changes with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fogsdn.core.csv_rows import read_csv_rows, write_csv_rows
from fogsdn.core.scenario import Scenario
from fogsdn.core.summary import class_figures, json_float, json_object
from fogsdn.measure.figures import (
    RATIO_LOADS,
    SIZE_FIGURES,
    FigurePoint,
    curves,
    draw_size,
    draw_size_live,
    draw_size_ratio,
    point,
    predicted,
    read_size_csv,
    write_size_csv,
    x_of,
)
from fogsdn.measure.size_compare import SizeStats, replicated
from fogsdn.studies.study import Engine, run_live_point


@dataclass(frozen=True)
class SizeRun:
    """One replication of one policy at one sweep value."""

    policy: str
    x: float
    replication: int
    requests: int
    scenario: Scenario

    def label(self) -> str:
        return f"{self.policy} x={self.x:.4g} rep {self.replication}"


def simulate_run(run: SizeRun) -> list[dict[str, object]]:
    """One replication's means (its row: policy, x, replication, requests, and `summary`,
    `SizeStats.summary`); NaN where the policy cannot run (TAGS with no stable cutoffs at
    that load)."""
    from fogsdn.policies import PolicyError
    from fogsdn.sim.engine import simulate

    stats = SizeStats(run.scenario)
    summary: dict[str, object]
    try:
        simulate(run.scenario, stats, requests=run.requests, replication=run.replication)
        summary = stats.summary()
    except PolicyError:
        summary = {"overall": {"W": math.nan, "wait": math.nan, "slowdown": math.nan,
                               "count": 0}}
    return [{"policy": run.policy, "x": run.x, "replication": run.replication,
             "requests": run.requests, "summary": summary}]


LIVE_COLUMNS = ("policy", "load", "answered", "other", "W_live", "W_live_ci95", "W_model",
                "wait_live", "wait_model", "slowdown_live", "slowdown_model", "model")


def emulate_run(run: SizeRun, runs: Path) -> list[dict[str, object]]:
    """One point live (root, Open vSwitch): the workers' measured means beside the model
    (its row: `LIVE_COLUMNS`)."""
    out = runs / f"{run.policy}-{run.x:g}"
    summary = run_live_point(run.scenario, out)
    sb = json_object(summary.get("size_based") or json.loads(
        (out / "summary.json").read_text())["size_based"], "size_based")
    measured = json_object(sb["measured"], "size_based.measured")
    m = json_object(measured["overall"], "size_based.measured.overall")
    predicted = json_object(sb.get("predicted") or {}, "size_based.predicted")
    p = json_object(predicted.get("overall", {}), "size_based.predicted.overall")
    return [{"policy": run.policy, "load": run.x, "answered": m["count"],
             "other": measured["other_outcomes"], "W_live": m["W"],
             "W_live_ci95": class_figures(summary, "lp")["W_ci95"], "W_model": p.get("W"),
             "wait_live": m["wait"], "wait_model": p.get("wait"),
             "slowdown_live": m["slowdown"], "slowdown_model": p.get("slowdown"),
             "model": "none" if not p else "exact" if predicted["exact"] else "approx"}]


class SizeStudy:
    """Seed 002b's figure for a scenario whose sweep says `study: size_based`: every
    (sweep value, policy) simulated `replications` times beside the model, or once live
    (the live means over the model's curves); writes OUT/<scenario>.csv and .png
    (`plot_only`: redraw from that csv), live runs under OUT/<scenario>-runs/."""

    name = "size"

    def __init__(self, base: Scenario, out: Path, requests: int = 100_000,
                 replications: int | None = None, plot_only: bool = False,
                 engine: Engine = "simulate", duration_ms: float | None = None,
                 time_scale: float | None = None) -> None:
        assert base.sweep is not None
        over: dict[str, float] = {} if time_scale is None else {"time_scale": time_scale}
        if duration_ms is not None:
            over |= {"duration_ms": duration_ms, "warmup_ms": min(base.warmup_ms,
                                                                   duration_ms / 10)}
        self.base = base.with_overrides(over) if over else base
        self.out, self.requests, self.plot_only, self.engine = out, requests, plot_only, engine
        self.live = engine == "emulate"
        self.replications = 1 if self.live else replications or base.sweep.replications
        self.job: Callable[..., list[dict[str, object]]] = \
            emulate_run if self.live else simulate_run
        self.live_summary: Path | None = None  # each live point has its own
        self.job_args: tuple[Any, ...] = (out / f"{base.name}-runs",) if self.live else ()

    def _grid(self) -> list[tuple[str, float, Scenario]]:
        """(policy, x, scenario) at every sweep value, for every policy."""
        sw = self.base.sweep
        assert sw is not None
        return [(pol, x_of(sc, sw.parameter), sc) for v in sw.values for pol in sw.policies
                for sc in [point(self.base, v, pol)]]

    def plan(self) -> list[SizeRun]:
        if self.plot_only:
            return []
        return [SizeRun(pol, x, r, self.requests, sc) for pol, x, sc in self._grid()
                for r in range(self.replications)]

    def record(self, run: SizeRun, rows: list[dict[str, object]]) -> str:
        if self.live:
            return f"W {rows[0]['W_live']:.4g} (model {rows[0]['W_model']})"
        o = json_object(json_object(rows[0]["summary"], "summary")["overall"], "overall")
        return f"wait {o['wait']:.4g}, slowdown {o['slowdown']:.4g}"

    def points(self, rows: list[dict[str, object]]) -> list[FigurePoint]:
        reps: dict[tuple[str, float], list[dict[str, object]]] = {}
        for r in rows:
            reps.setdefault((str(r["policy"]), json_float(r["x"])), []).append(
                json_object(r["summary"], "summary"))
        return [FigurePoint(pol, x, predicted(sc), replicated(reps[pol, x]), self.requests)
                for pol, x, sc in self._grid() if (pol, x) in reps]

    def finish(self, rows: list[dict[str, object]], failures: list[tuple[Any, str]]
               ) -> list[Path]:
        assert self.base.sweep is not None
        self.out.mkdir(parents=True, exist_ok=True)
        csv_path, png = self.out / f"{self.base.name}.csv", self.out / f"{self.base.name}.png"
        if self.live:
            if not self.plot_only:
                write_csv_rows(csv_path, LIVE_COLUMNS, rows)
            # drawn from the table as written, as `plot_only` redraws it
            draw_size_live(png, read_csv_rows(csv_path), self.base.workload.size,
                           len(self.base.nodes))
            return [png] if self.plot_only else [csv_path, png]
        pts = read_size_csv(csv_path) if self.plot_only else self.points(rows)
        if not pts:
            return []
        metrics, xlabel, logx = SIZE_FIGURES[self.base.sweep.parameter]
        if self.base.sweep.parameter == "workload.size.high":
            draw_size_ratio(png, self.base, pts, RATIO_LOADS)
        else:
            model = curves(self.base, [p for p in self.base.sweep.policies
                                       if p != "least_work_left"])
            draw_size(png, self.base, pts, model, metrics, xlabel, logx)
        if self.plot_only:
            return [png]
        write_size_csv(csv_path, pts)
        return [csv_path, png]
