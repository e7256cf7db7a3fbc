"""Seed 003's city as a study (`fogsdn.studies.study`): simulated, one point per selector and
ratio; live, one point for the whole study (`fogsdn.city.live_run` builds one network for
all). Both write `seed003-<engine>.csv` and the Figs. 4-7 PNGs (`fogsdn.city.sim_output`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fogsdn.city.event_model import run_study
from fogsdn.city.layout import PositionTrace, read_position_trace
from fogsdn.city.sim_output import write_csv
from fogsdn.city.study_spec import CityStudy
from fogsdn.measure.figures import draw_city
from fogsdn.studies.study import Engine, Row

if TYPE_CHECKING:
    from fogsdn.live.live_view import ViewConfig
    from fogsdn.netem.cluster_plan import ClusterSpec


@dataclass(frozen=True)
class CityPoint:
    study: CityStudy  # at the scale this point runs
    selector: str = ""  # "": the live study, every point on one network
    ratio: float = 0.0
    trace: PositionTrace | None = None

    def label(self) -> str:
        return f"{self.selector} ratio {self.ratio:g}" if self.selector else "live city"


def run_city_point(point: CityPoint, out: Path, stop: threading.Event | None,
                   view: ViewConfig | None = None, cluster: ClusterSpec | None = None
                   ) -> list[Row]:
    if not point.selector:
        from fogsdn.city.live_run import run_city_live

        return run_city_live(point.study, out, stop, show=True, view=view,
                             cluster=cluster).rows
    return [run_study(point.study, point.selector, point.ratio, point.trace)
            | {"engine": "simulate"}]


class CityStudyRun:
    """The study file's points in one engine; `live_scale`: simulate the live scale."""

    name = "city"

    def __init__(self, study: CityStudy, out: Path, engine: Engine = "simulate",
                 live_scale: bool = False, stop: threading.Event | None = None,
                 view: ViewConfig | None = None, cluster: ClusterSpec | None = None) -> None:
        self.study, self.out, self.engine, self.live_scale = study, out, engine, live_scale
        self.job = run_city_point
        # the stop event stays in this process: only the live point, run here, takes it
        self.job_args: tuple[Any, ...] = ((out, stop, view, cluster) if engine == "emulate"
                                          else (out, None))
        self.live_summary = out / "summary.json" if engine == "emulate" else None
        self.tag = "emulate" if engine == "emulate" else \
            "simulate-live-scale" if live_scale else "simulate"

    def plan(self) -> list[CityPoint]:
        st = self.study
        if self.engine == "emulate":
            return [CityPoint(st)]
        trace = None
        if st.mobility.kind == "trace" and st.mobility.trace is not None:
            # the square the live run checks too: a position outside it is refused in both
            trace = read_position_trace(Path(st.mobility.trace), st.layout().side_m)
        st = st.at_live_span() if self.live_scale else st.at_full_scale()
        return [CityPoint(st, sel, r, trace) for sel in st.selectors for r in st.ratios]

    def record(self, point: CityPoint, rows: list[Row]) -> str:
        return "; ".join(f"{r['clients']} clients, latency {r['mean_latency_ms']:.2f} ms, "
                         f"lost {r['client_lost']:.2f}, optimal {r['optimal_rate']:.0%}"
                         for r in rows)

    def finish(self, rows: list[Row], failures: list[tuple[Any, str]]) -> list[Path]:
        if not rows:
            return []
        self.out.mkdir(parents=True, exist_ok=True)
        csv_path = self.out / f"seed003-{self.tag}.csv"
        write_csv(rows, csv_path)
        return [csv_path, *draw_city(rows, self.out, self.tag)]
