#!/usr/bin/env python3
"""Every policy on the same seeds: mean and p95 response time, mean power, energy per request.

    python scripts/eval_agents.py --engine simulate [--scenario FILE] [--seeds 1 2 3 4 5]
        [--policies ...] [--sweep A ...] [--json FILE] [--executor {process,ray,serial}]
    sudo python scripts/eval_agents.py --engine emulate --seeds 1 --duration 15 [...]

The study `fogsdn.studies.agent_study` on the study driver, one point per (policy, seed); a
failed run is reported and the others go on (exit 1). Its JSON: docs/reproduction.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

_ENGINE = "emulate" if "emulate" in sys.argv else "simulate"
_RAY = any(a in ("ray", "--executor=ray") for a in sys.argv[1:])
bootstrap.bootstrap(needs_network_stack=_ENGINE == "emulate", extras="sweep" if _RAY else "")
ROOT = bootstrap.ROOT

from fogsdn.core.scenario import ScenarioError, load_scenario  # noqa: E402
from fogsdn.studies.agent_study import POLICIES, AgentStudy, default_policies  # noqa: E402
from fogsdn.studies.study import StudyError, run_study  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("emulate", "simulate"), default="simulate")
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/multipath_power.yaml")
    ap.add_argument("--policies", nargs="*",
                    help="default: the path policies on a scenario whose policy chooses "
                         "paths (seed 002a; path_rnn_warm where its weights were trained), "
                         "else " + " ".join(POLICIES))
    ap.add_argument("--sweep", nargs="*", type=float, default=[],
                    help="goal weights a of the trained rl_dqn_a<A> agents to add")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    ap.add_argument("--requests", type=int, default=20000, help="simulate: per run")
    ap.add_argument("--duration", type=float, default=15.0, help="emulate: seconds per run")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "eval_agents")
    ap.add_argument("--json", type=Path, help="write the figures as JSON here")
    ap.add_argument("--executor", choices=("process", "ray", "serial"), default="process")
    ap.add_argument("--workers", type=int, help="parallel runs (default: CPUs)")
    ap.add_argument("--ray-address", help="join this Ray cluster instead of a local one")
    ns = ap.parse_args(argv)
    try:
        base = load_scenario(ns.scenario)
    except (ScenarioError, OSError) as err:
        return bootstrap.fail(f"eval_agents.py: {err}")
    labels = list(ns.policies or default_policies(base)) + [f"rl_dqn_a{a:g}" for a in ns.sweep]
    study = AgentStudy(base, labels, ns.seeds, ns.out, ns.engine, ns.requests, ns.duration, ns.json)
    try:
        res = run_study(study, study.runs_dir, executor=ns.executor, workers=ns.workers,
                        ray_address=ns.ray_address)
    except StudyError as err:
        return bootstrap.fail(f"eval_agents.py: {err}")
    return 1 if res.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
