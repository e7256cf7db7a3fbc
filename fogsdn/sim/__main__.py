"""python -m fogsdn.sim --scenario FILE [--requests N] [--model-ms MS | --duration SECONDS]
                      [--out DIR]
                 [--replications K] [--policy NAME] [--policy-module FILE]

Simulate a scenario without the testbed runner and print a per-class summary. Run it
inside the project's environment (`.venv/bin/python -m fogsdn.sim`, or `fogsdn-sim` once
fogsdn is installed); `scripts/run_testbed.py --engine simulate` sets that up first.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from fogsdn.core.cli_args import add_span_arguments, require_count, span_ms
from fogsdn.policies.resolve import resolve_scenario
from fogsdn.sim.runner import replicate, run_simulation


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fogsdn.sim", description=__doc__.splitlines()[2])
    root = Path(__file__).resolve().parents[2]
    ap.add_argument("--scenario", default=str(root / "scenarios" / "default.yaml"))
    ap.add_argument("--requests", type=int, help="stop after N requests in total")
    add_span_arguments(ap)
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
        require_count("--requests", a.requests)
        require_count("--replications", a.replications)
        duration_ms = span_ms(a, sc.time_scale)
    except ValueError as err:  # ScenarioError, PolicyError, a bad count or span
        print(f"error: {err}", file=sys.stderr)
        return 2
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
