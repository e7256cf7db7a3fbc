"""python -m sim --scenario FILE [--requests N] [--model-ms MS | --duration SECONDS] [--out DIR]
                 [--replications K] [--policy NAME] [--policy-module FILE]

Simulate a scenario without the testbed runner and print a per-class summary. Run it
inside the project's environment (`.venv/bin/python -m sim`, or `fogsdn-sim` once
fogsdn is installed); `scripts/run_testbed.py --engine simulate` sets that up first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from controller.policies import PolicyError
from controller.policies.resolve import resolve_scenario
from fogsdn.scenario import ScenarioError
from sim.runner import replicate, run_simulation


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim", description=__doc__.splitlines()[2])
    root = Path(__file__).resolve().parent.parent
    ap.add_argument("--scenario", default=str(root / "scenarios" / "default.yaml"))
    ap.add_argument("--requests", type=int, help="stop after N requests in total")
    span = ap.add_mutually_exclusive_group()
    span.add_argument("--model-ms", type=float, metavar="MS",
                      help="stop arrivals at this many model ms")
    span.add_argument("--duration", type=float, metavar="SECONDS",
                      help="the span SECONDS of live load would cover (SECONDS * 1000 / "
                           "time_scale model ms), as run_testbed.py --duration")
    ap.add_argument("--out", help="results directory (default results/<time>-<scenario>-sim)")
    ap.add_argument("--replications", type=int, default=1)
    ap.add_argument("--processes", type=int, default=1, help="replications in parallel")
    ap.add_argument("--policy", help="override policy.name")
    ap.add_argument("--policy-module", metavar="FILE_OR_MODULE",
                    help="your policy: a .py file or an importable module")
    ap.add_argument("--no-trace", action="store_true", help="write the summary only")
    a = ap.parse_args(argv)
    try:
        sc = resolve_scenario(a.scenario, a.policy, policy_module=a.policy_module)
    except (ScenarioError, PolicyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.requests is not None and a.requests < 1:
        print("error: --requests must be >= 1", file=sys.stderr)
        return 2
    if a.replications < 1:
        print("error: --replications must be >= 1", file=sys.stderr)
        return 2
    if (a.duration is not None and a.duration <= 0) or (a.model_ms is not None
                                                        and a.model_ms <= 0):
        print("error: --duration and --model-ms must be > 0", file=sys.stderr)
        return 2
    duration_ms = a.model_ms if a.duration is None else a.duration * 1000.0 / sc.time_scale
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(a.out) if a.out else Path("results") / f"{stamp}-{sc.name}-sim"
    if a.replications == 1:
        run_simulation(sc, out, requests=a.requests, duration_ms=duration_ms,
                       trace=not a.no_trace, verbose=True)
    else:
        replicate(sc, a.replications, out, requests=a.requests, duration_ms=duration_ms,
                  processes=a.processes, trace=not a.no_trace, verbose=True)
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
