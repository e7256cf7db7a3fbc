"""`run_testbed.py --scenario scenarios/city.yaml`: seed 003's study in either engine.

emulate: the study's live scale on the emulated city (`runner.city_live`); simulate: the
seed's full scale (`full_scale:`) in the simulator with the same latency model. Both
write `seed003-<engine>.csv` and the Figs. 4-7 PNGs into the results folder.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from sim.city_output import draw, write_csv
from sim.city_study import run_study, study_point
from topologies.city_layout import LayoutError, parse_trace
from topologies.city_net import CityStudy, CityStudyError, load_city_study


def simulate_rows(study: CityStudy, show: bool = True, live_scale: bool = False
                  ) -> list[dict[str, Any]]:
    """Every selector at every ratio in the simulator: the full scale's (`full_scale:`),
    or with `live_scale` the study's live scale, to set beside the live run."""
    trace = None
    if study.mobility.kind == "trace" and study.mobility.trace is not None:
        trace = parse_trace(Path(study.mobility.trace).read_text().splitlines())
    rows = []
    for sel in study.selectors:
        for ratio in study.ratios if live_scale else study.full_scale.ratios:
            row = run_study(study_point(study, sel, ratio, live_scale), trace) \
                | {"engine": "simulate"}
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
    if args.engine == "simulate":
        rows = simulate_rows(study, show)
    else:
        if os.geteuid() != 0:
            print("error: the emulate engine needs root (Mininet, Open vSwitch): use sudo",
                  file=sys.stderr)
            return 2
        from runner.city_live import run_city_live

        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda s, f: stop.set())
        signal.signal(signal.SIGTERM, lambda s, f: stop.set())
        rows = run_city_live(study, out, stop, show)
    for p in write_outputs(rows, out, args.engine):
        print(f"wrote {p}")
    return 0
