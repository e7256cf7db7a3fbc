#!/usr/bin/env python3
"""Seed 002a's claims table, as the paper measured it (--preset seed) or as we run it
(--preset ours): both presets and the one-switch ablation between them are simulated
every time; --preset picks the verdict column. With --preset seed it also scans traffic:
the saving the paper's switch model gives against traffic as a share of link capacity.
The study: fogsdn/measure/seed002a_claims.py (claims),
fogsdn/studies/seed002a_study.py (runs); docs/seed002a-claims.md.

    python scripts/reproduce_seed002a.py --preset seed|ours [--engine simulate] [--json F]
        [--markdown F] [--requests N] [--seeds N] [--traffic L1,L2,...|none]
        [--scenario FILE]
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import bootstrap

if importlib.util.find_spec("networkx") is None:  # first run: set-up, then inside .venv
    bootstrap.bootstrap(needs_network_stack=False, extras="")
ROOT = bootstrap.ROOT
sys.path.insert(0, str(ROOT))

from fogsdn.core.scenario import ScenarioError, load_scenario  # noqa: E402
from fogsdn.core.summary import json_safe  # noqa: E402
from fogsdn.measure.seed002a_claims import (  # noqa: E402
    PRESETS,
    PresetError,
    claims_table,
    counts,
    headline,
    markdown,
    preset,
    traffic_markdown,
)
from fogsdn.models.request_goal import MS_PER_MJ, PAPER_SWITCH_POWER  # noqa: E402
from fogsdn.studies.seed002a_study import Plan, run_all, traffic_scan  # noqa: E402

PROG = "reproduce_seed002a.py"
TRAFFIC = "0.01,0.03,0.09,0.28,0.5,0.7,1.0"


def parse(argv: list[str]) -> Any:
    ap = bootstrap.OneLineParser(prog=PROG, description="seed 002a's claims table (simulated)")
    ap.add_argument("--preset", required=True, help="seed or ours: whose verdicts to report")
    ap.add_argument("--engine", default="simulate", help="simulate (the only one)")
    ap.add_argument("--json", type=Path, default=None, help="write the table and figures here")
    ap.add_argument("--markdown", type=Path, default=None, help="write the tables as markdown")
    ap.add_argument("--requests", type=int, default=5000, help="requests per run")
    ap.add_argument("--seeds", type=int, default=5, help="replications per configuration")
    ap.add_argument("--traffic", default=None,
                    help=f"traffic levels to scan, shares of capacity (default with --preset "
                         f"seed: {TRAFFIC}; 'none': no scan)")
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios" / "seed002a.yaml")
    return ap.parse_args(argv)


def levels(text: str | None, chosen: str) -> tuple[float, ...]:
    if text is None:
        text = TRAFFIC if chosen == "seed" else "none"
    if text.strip().lower() == "none":
        return ()
    try:
        out = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--traffic: want numbers like {TRAFFIC}, got {text!r}") from None
    if any(not (math.isfinite(x) and 0 < x <= 1) for x in out):
        raise ValueError("--traffic: each level must be in (0, 1]")
    return out


def main(argv: list[str]) -> int:
    a = parse(argv)
    try:
        preset(a.preset)
        if a.engine != "simulate":
            raise ValueError(f"--engine: the claims table is simulated only, got {a.engine!r}")
        if a.requests < 1000:
            raise ValueError(f"--requests: at least 1000 (5 epochs of 200), got {a.requests}")
        if a.seeds < 2:
            raise ValueError(f"--seeds: at least 2 (for an interval), got {a.seeds}")
        scan = levels(a.traffic, a.preset)
        base = load_scenario(a.scenario)
    except (ValueError, PresetError, ScenarioError, OSError) as err:
        return bootstrap.fail(f"{PROG}: {str(err).splitlines()[0]}")
    plan = Plan(a.requests, a.seeds)
    t0 = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[seed002a {time.perf_counter() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)

    results = run_all(base, plan, say)
    table = claims_table(results, a.preset)
    scanned = traffic_scan(base, scan, plan, say) if scan else []
    doc = {"preset": a.preset, "claims": table,
           "counts": {p: counts(table, p) for p in PRESETS},
           "headline": {name: headline(r) for name, r in results.items()},
           "traffic_scan": scanned,
           "presets": {p: vars(c) for p, c in PRESETS.items()},
           "assumptions": {"paper_switch_power": PAPER_SWITCH_POWER.model_dump(),
                           "peak_at": "the full load of one 1 Gb/s port (our mapping)",
                           "goal_ms_per_mJ": MS_PER_MJ},
           "run": {"scenario": str(a.scenario.name), "requests": a.requests,
                   "seeds": a.seeds, "seconds": round(time.perf_counter() - t0, 1)}}
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(json_safe(doc), indent=1) + "\n")
        say(f"wrote {a.json}")
    if a.markdown is not None:
        a.markdown.parent.mkdir(parents=True, exist_ok=True)
        a.markdown.write_text(markdown(table) + ("\n" + traffic_markdown(scanned) if scanned
                                                 else ""))
        say(f"wrote {a.markdown}")
    for e in table:
        print(f"{e['verdict']:<10} seed {e['seed']['verdict']:<10} ours "
              f"{e['ours']['verdict']:<10} {e['id']:<20} [{e['deciding_choice'] or '-'}]")
    for p in PRESETS:
        c = doc["counts"][p]
        print(f"{p}: {c['reproduced']} reproduced, {c['partly']} partly, {c['not']} not")
    if scanned:
        print(traffic_markdown(scanned), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
