#!/usr/bin/env python3
"""Seed 003's comparison of fog-node selectors against the client/slot ratio.

    python scripts/reproduce_seed003.py --engine simulate [--ratios 0.1 0.2 ... 1.0]
        [--selectors optimal random vivaldi meridian load_aware] [--duration 60]
        [--seed 1] [--workers N] [--trace FILE.csv] [--out docs/figures]

Writes OUT/seed003-simulate.csv (one row per selector and ratio, columns as in
sim/city_study.py) and the figures OUT/seed003_fig4-simulate.png (per client: total
messages, lost messages, reconnections), fig5 (per fog node: in, out, total messages),
fig6 (optimal-selection rate, selection RMSE, unique selections per step) and fig7
(mean latency, connection error eq. 13). `--engine emulate` (root) runs the live scale
of `--study` (scenarios/city.yaml) on the emulated city and writes the same files with
`-emulate`; its per-point records go to OUT/seed003-emulate-runs/.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

_live = any(a in ("emulate", "--engine=emulate") for a in sys.argv[1:])
bootstrap.bootstrap(needs_network_stack=_live, extras="")

from nodes.ncs.selection import SELECTORS, SelectionError  # noqa: E402
from sim.city_output import draw, write_csv  # noqa: E402
from sim.city_study import StudyConfig, run_study  # noqa: E402
from topologies.city_layout import LayoutError, PositionTrace, parse_trace  # noqa: E402


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"reproduce_seed003.py: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def _one(job: tuple[StudyConfig, PositionTrace | None]) -> dict[str, Any]:
    return run_study(*job)


def _emulate(args: argparse.Namespace, ap: _Parser) -> int:
    """The study's live scale on the emulated city (root, Open vSwitch, the lock)."""
    import os

    from runner.city_cli import write_outputs
    from runner.city_live import run_city_live
    from runner.supervisor import exit_code, stop_on_signals
    from topologies.city_net import CityStudyError, load_city_study

    if os.geteuid() != 0:
        ap.error("--engine emulate: needs root (Mininet, Open vSwitch)")
    overrides: dict[str, Any] = {"selectors": args.selectors, "seed": args.seed}
    if args.ratios:
        overrides["ratios"] = args.ratios
    if args.duration:
        overrides["duration_s"] = args.duration
    if args.trace is not None:
        overrides["mobility"] = {"kind": "trace", "trace": str(args.trace.resolve())}
    try:
        study = load_city_study(args.study, overrides)
    except CityStudyError as err:
        ap.error(str(err))
    t0 = time.perf_counter()
    stop = threading.Event()
    stop_on_signals(stop)
    live = run_city_live(study, args.out / "seed003-emulate-runs", stop)
    rows = live.rows
    if rows:
        for p in write_outputs(rows, args.out, "emulate"):
            print(f"wrote {p}")
    print(f"{len(rows)} live points in {time.perf_counter() - t0:.0f} s")
    return exit_code(live.summary)


def _simulate_live_scale(args: argparse.Namespace, ap: _Parser) -> int:
    from runner.city_cli import live_scale, simulate_rows, write_outputs
    from topologies.city_net import CityStudyError, load_city_study

    try:
        study = live_scale(load_city_study(args.study, {"selectors": args.selectors,
                                                        "seed": args.seed}))
    except CityStudyError as err:
        ap.error(str(err))
    rows = simulate_rows(study, live_starts=True)
    for p in write_outputs(rows, args.out, "simulate-live-scale"):
        print(f"wrote {p}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", choices=["simulate", "emulate"], default="simulate")
    ap.add_argument("--ratios", type=float, nargs="+",
                    help="client/slot ratios (simulate: 0.1 ... 1.0; emulate: the study's)")
    ap.add_argument("--selectors", nargs="+", default=list(SELECTORS))
    ap.add_argument("--duration", type=float,
                    help="seconds per point (simulate: 60 simulated; emulate: the study's, live)")
    ap.add_argument("--study", type=Path, default=ROOT / "scenarios" / "city.yaml",
                    help="emulate: the city study file (its live scale)")
    ap.add_argument("--live-scale", action="store_true",
                    help="simulate: the study file's live scale (nodes, slots, ratios, "
                         "duration, starts), to set beside --engine emulate")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--trace", type=Path, default=None, help="position trace CSV")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    args = ap.parse_args(argv)
    if args.engine == "emulate":
        return _emulate(args, ap)
    if args.live_scale:
        return _simulate_live_scale(args, ap)
    ratios = args.ratios or [round(0.1 * i, 1) for i in range(1, 11)]
    duration = args.duration or 60.0
    trace = None
    try:
        if args.trace is not None:
            trace = parse_trace(args.trace.read_text().splitlines())
        jobs = [(StudyConfig(ratio=r, selector=s, seed=args.seed, duration_s=duration),
                 trace) for s in args.selectors for r in ratios]
    except (SelectionError, LayoutError, OSError) as err:
        ap.error(str(err))
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    if args.workers > 1:
        with ProcessPoolExecutor(args.workers) as pool:
            rows = list(pool.map(_one, jobs))
    else:
        for job in jobs:
            rows.append(_one(job))
            r = rows[-1]
            print(f"{r['selector']:>10} ratio {r['ratio']:.1f}: {r['clients']} clients, "
                  f"latency {r['mean_latency_ms']:.2f} ms, lost {r['client_lost']:.2f}, "
                  f"optimal {r['optimal_rate']:.1%}", flush=True)
    csv_path = args.out / f"seed003-{args.engine}.csv"
    write_csv(rows, csv_path)
    for p in [csv_path, *draw(rows, args.out, args.engine)]:
        print(f"wrote {p}")
    print(f"{len(rows)} runs in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
