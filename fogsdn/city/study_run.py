"""Seed 003's city as a study (`fogsdn.studies.study`): simulated, one point per selector and
ratio; live, one point for the whole study (`fogsdn.city.live_run` builds one network for
all). Both write `seed003-<engine>.csv` and the Figs. 4-7 PNGs (`fogsdn.city.sim_output`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fogsdn.city.event_model import (
    SPREAD_DRAWS,
    SpreadVerdict,
    draw_spread,
    judge_live,
    run_study,
)
from fogsdn.city.layout import PositionTrace, read_position_trace
from fogsdn.city.sim_output import read_live_points, write_csv
from fogsdn.city.study_spec import CityStudy
from fogsdn.core.summary import json_safe
from fogsdn.measure.figures import draw_city
from fogsdn.studies.study import Engine, Row

if TYPE_CHECKING:
    from fogsdn.live.live_view import ViewConfig
    from fogsdn.netem.cluster_plan import ClusterSpec


VERDICT_FILE = "against-simulated.json"  # a live comparison run's verdict, in its folder


def compares_engines(study: CityStudy) -> bool:
    """Whether the file simulates its live scale at `full_scale` (city_paper.yaml,
    city_live_max.yaml): a live run of it is judged against the simulator."""
    full = study.at_full_scale()
    return (full.fog_nodes, full.total_slots) == (study.fog_nodes, study.total_slots)


def judgement_gap(study: CityStudy) -> str | None:
    """Why a live run of a file that `compares_engines` cannot be judged against its
    simulation (its start or span differ: a --duration given, say); None when it can."""
    full = study.at_full_scale()
    if full.start_s != study.start_s:
        return f"the live start {study.start_s} is not the simulated {full.start_s}"
    if abs(full.simulated_span_model_s - study.model_span_s()) > 1e-9:
        return (f"the live point spans {study.model_span_s():g} model s, the simulated "
                f"one {full.simulated_span_model_s:g}")
    return None


def judge_live_run(study: CityStudy, run_dir: Path, draws: int = SPREAD_DRAWS
                   ) -> list[SpreadVerdict]:
    """The live run in `run_dir` of a file that `compares_engines`, at its full scale's
    first ratio, against `draws` simulated draws per selector it ran; ValueError naming
    the file and cause where it is no measurement (`read_live_points`)."""
    full = study.at_full_scale()
    ratio = full.ratios[0]
    live = read_live_points(run_dir, ratio, full.clients_at(ratio), full.fog_nodes,
                            full.total_slots)
    return judge_live(live, {sel: draw_spread(full, sel, ratio, draws)
                             for sel in full.selectors if sel in live})


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
        judged = self._judge() if self.engine == "emulate" and not failures else []
        return [csv_path, *judged, *draw_city(rows, self.out, self.tag)]

    def _judge(self) -> list[Path]:
        """A live run of a file that `compares_engines`: each selector's latency and
        optimal rate against the simulator's spread, printed and written to
        `VERDICT_FILE` (none where the run is no measurement: it says why)."""
        if not compares_engines(self.study):
            return []
        t0 = time.perf_counter()
        try:
            if (gap := judgement_gap(self.study)) is not None:
                raise ValueError(gap)
            verdicts = judge_live_run(self.study, self.out)
        except ValueError as err:
            print(f"[city] no verdict against the simulator: {err}")
            return []
        print(f"[city] against the simulator ({SPREAD_DRAWS} draws, "
              f"{time.perf_counter() - t0:.0f} s): within 10 % of its mean or two sd")
        for v in verdicts:
            print(f"[city]   {v.line()}")
        path = self.out / VERDICT_FILE
        path.write_text(json.dumps(json_safe(
            {"draws": SPREAD_DRAWS, "verdicts": [asdict(v) | {"holds": v.holds}
                                                 for v in verdicts]}), indent=1))
        return [path]
