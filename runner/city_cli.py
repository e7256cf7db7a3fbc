"""`run_testbed.py --scenario scenarios/city.yaml`: seed 003's study in either engine.

emulate: the study's live scale on the emulated city (`runner.city_live`); simulate: the
seed's full scale (`full_scale:`) in the simulator with the same latency model. Both
write `seed003-<engine>.csv` and the Figs. 4-7 PNGs into the results folder.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sim.city_output import draw, write_csv
from sim.city_study import StudyConfig, run_study
from topologies.city_layout import LayoutError, parse_trace
from topologies.city_net import CityStudy, CityStudyError, load_city_study


def live_scale(study: CityStudy) -> CityStudy:
    """The study with its live scale as the simulator's (to set live beside simulated)."""
    fs = study.full_scale.model_copy(update={
        "fog_nodes": study.fog_nodes, "total_slots": study.total_slots,
        "duration_s": study.duration_s, "ratios": study.ratios})
    return study.model_copy(update={"full_scale": fs})


def simulate_rows(study: CityStudy, show: bool = True, live_starts: bool = False
                  ) -> list[dict[str, Any]]:
    """The full-scale points: every selector at every `full_scale.ratios`; clients start
    after the seed's U(3, 10) s, or the study's live `start_s` with `live_starts`."""
    fs = study.full_scale
    starts = study.start_s if live_starts else StudyConfig.start_s
    trace = None
    if study.mobility.kind == "trace" and study.mobility.trace is not None:
        trace = parse_trace(Path(study.mobility.trace).read_text().splitlines())
    rows = []
    for sel in study.selectors:
        for ratio in fs.ratios:
            cfg = StudyConfig(ratio=ratio, selector=sel, seed=study.seed,
                              duration_s=fs.duration_s, fog_nodes=fs.fog_nodes,
                              total_slots=fs.total_slots, area_km2=study.area_km2,
                              period_s=study.period_s, max_attempts=study.max_attempts,
                              timeout_ms=study.timeout_ms,
                              vivaldi_dimensions=study.vivaldi_dimensions,
                              load_aware_bound_ms=study.load_aware_bound_ms,
                              latency=study.params(), speed_mps=study.mobility.speed_mps,
                              pause_s=study.mobility.pause_s, start_s=starts)
            row = run_study(cfg, trace) | {"engine": "simulate"}
            rows.append(row)
            if show:
                print(f"[city] {sel:>10} ratio {ratio:g}: {row['clients']} clients, latency "
                      f"{row['mean_latency_ms']:.2f} ms, lost {row['client_lost']:.2f}, "
                      f"optimal {row['optimal_rate']:.0%}", flush=True)
    return rows


def write_outputs(rows: list[dict[str, Any]], out: Path, engine: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv_path = out / f"seed003-{engine}.csv"
    write_csv(rows, csv_path)
    return [csv_path, *draw(rows, out, engine)]


def run_city_study(args: argparse.Namespace, root: Path) -> int:
    overrides: dict[str, Any] = {}
    if args.duration is not None:
        overrides["duration_s"] = args.duration
    try:
        study = load_city_study(args.scenario, overrides)
    except (CityStudyError, LayoutError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else root / "results" / f"{stamp}-{study.name}"
    show = not args.quiet
    code = 0
    if args.engine == "simulate":
        rows = simulate_rows(study, show)
    else:
        if os.geteuid() != 0:
            print("error: the emulate engine needs root (Mininet, Open vSwitch): use sudo",
                  file=sys.stderr)
            return 2
        from runner.city_live import run_city_live
        from runner.supervisor import exit_code, stop_on_signals

        stop = threading.Event()
        stop_on_signals(stop)
        live = run_city_live(study, out, stop, show)
        rows, code = live.rows, exit_code(live.summary)
    if rows:
        for p in write_outputs(rows, out, args.engine):
            print(f"wrote {p}")
    return code
