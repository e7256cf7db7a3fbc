#!/usr/bin/env python3
"""Seed 003's comparison of fog-node selectors against the client/slot ratio.

Without --preset: the study driver on scenarios/city.yaml (all of scripts/sweep.py's
options apply), writing seed003-<engine>.csv and the Figs. 4-7 PNGs into --out
(default results/seed003; --out docs/figures refreshes the documentation's figures).
With --preset seed|ours: the claims table, simulated only. The commands:
docs/coordinates.md.

    python scripts/reproduce_seed003.py [--engine simulate] [--live-scale] [--set KEY=VALUE]
                                        [--out DIR]
    python scripts/reproduce_seed003.py --preset seed|ours --engine simulate [--json FILE]
                                        [--figures DIR] [--ratios R1,R2,...]
                                        [--replications N] [--duration-cap S|none]
                                        [--seed N] [--workers N] [--scenario FILE]
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def claims_main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from fogsdn.city.claims_run import (
        ClaimsRun,
        claims_table,
        inert_switches,
        run_claims,
        write_outputs,
    )
    from fogsdn.city.presets import PRESETS
    from fogsdn.city.study_spec import CityStudyError, load_city_study

    ap = argparse.ArgumentParser(description="seed 003 claims table (simulate only)")
    ap.add_argument("--preset", required=True)
    ap.add_argument("--engine", default="simulate")
    ap.add_argument("--json", type=Path, default=None, help="write the claims table here")
    ap.add_argument("--figures", type=Path, default=None,
                    help="write the table (markdown), CSVs and both presets' figures here")
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "city.yaml")
    ap.add_argument("--ratios", default="0.1,0.5,1.0")
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--duration-cap", default="30",
                    help="simulated seconds per point at most ('none': the presets' own)")
    ap.add_argument("--seed", type=int, default=None, help="first replication's seed")
    ap.add_argument("--workers", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        if a.preset not in PRESETS:
            raise ValueError(f"--preset: unknown {a.preset!r} (known: {', '.join(PRESETS)})")
        if a.engine != "simulate":
            raise ValueError(f"--engine: the claims table is simulated only, got {a.engine!r}")
        ratios = tuple(float(x) for x in a.ratios.split(","))
        if len(ratios) < 2 or any(not 0 < r <= 10 for r in ratios):
            raise ValueError("--ratios: at least two, each in (0, 10]")
        if a.replications < 1:
            raise ValueError("--replications: must be >= 1")
        cap = None if a.duration_cap.lower() == "none" else float(a.duration_cap)
        if cap is not None and not cap > 0:
            raise ValueError("--duration-cap: must be > 0 or 'none'")
        study = load_city_study(a.scenario)
    except (ValueError, CityStudyError) as err:
        print(f"reproduce_seed003: {err}", file=sys.stderr)
        return 2
    if a.seed is not None:
        study = study.model_copy(update={"seed": a.seed})
    run = ClaimsRun(ratios=tuple(sorted(ratios)), replications=a.replications, duration_cap_s=cap)
    t0 = time.perf_counter()
    rows = run_claims(study, run, workers=a.workers)
    table = claims_table(rows, a.preset, inert_switches(run))
    for path in write_outputs(rows, table, a.preset, run, a.json, a.figures,
                              time.perf_counter() - t0):
        print(f"wrote {path}", file=sys.stderr)
    for e in table:
        print(f"{e['figure']:>3} {e['verdict']:<10} seed {e['seed']['verdict']:<10} "
              f"ours {e['ours']['verdict']:<10} {e['claim']}  [{e['deciding_choice'] or '-'}]")
    return 0


def sweep_main(argv: list[str]) -> int:
    """The study driver on the city study; its own --help after this script's."""
    sweep = [sys.executable, str(ROOT / "scripts" / "sweep.py"), "--scenario",
             str(ROOT / "scenarios" / "city.yaml")]
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        print("scripts/sweep.py's options, which apply without --preset:\n", flush=True)
        return subprocess.call([*sweep, "--help"])
    if not any(x == "--out" or x.startswith("--out=") for x in argv):
        argv = ["--out", str(ROOT / "results" / "seed003"), *argv]  # never tracked files
    return subprocess.call([*sweep, *argv])


if __name__ == "__main__":
    if any(x == "--preset" or x.startswith("--preset=") for x in sys.argv[1:]):
        import bootstrap  # the figures need the sweep extra (matplotlib): the set-up first

        bootstrap.bootstrap(needs_network_stack=False, extras="sweep")
        sys.exit(claims_main(sys.argv[1:]))
    sys.exit(sweep_main(sys.argv[1:]))
