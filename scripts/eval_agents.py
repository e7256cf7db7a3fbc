#!/usr/bin/env python3
"""Every policy on the same seeds: mean and p95 response time, mean power, energy per request.

    python scripts/eval_agents.py --engine simulate [--scenario scenarios/multipath_power.yaml]
        [--policies latency_greedy power_greedy ... rl_dqn rl_rnn] [--seeds 1 2 3 4 5]
        [--requests 20000] [--sweep 0.2 0.5 0.8] [--json FILE] [--out DIR]
        [--executor {process,ray,serial}] [--workers N] [--ray-address ADDR]
    sudo python scripts/eval_agents.py --engine emulate --seeds 1 --duration 15 [...]

The study `runner.agent_study` run on the study driver (`runner.study`): each (policy,
seed) run is one point, on a process pool by default, on Ray, or in this process; live
points run one at a time, each holding the emulation lock (/tmp/fogsdn-emulation.lock)
for its run only, so other users of the machine get it between runs. `--sweep A...`
adds the DQN agents trained with goal weight a = A (`agents/weights/dqn_<scenario>_a<A>.json`,
from `scripts/train_agent.py --rt-weight A --out agents/weights/dqn_<scenario>_a<A>.pt`)
as `rl_dqn_a<A>`: the Pareto front. Intervals: across seeds (t, 95 %) when there are
several, else batch means within the run. Prints a table; `--json FILE` writes
`{policy: {"response_ms", "response_ms_ci95", "p95_ms", "p95_ms_ci95", "power_W",
"power_W_ci95", "energy_per_request_J", "energy_per_request_J_ci95", "runs",
"decide_ms_p50", "decide_ms_p99", ...}}`, and with switches in the scenario
`network_power_W` (the switches' share) with its interval, `response_ms_ci` and
`network_power_W_ci` (the same 95 % half-widths under the issue's names) and
`rt_measurement_error` (live: the worst run's controller-measured against the clients'
response time, relative; simulated: 0 by construction, the simulator's controller
measures the very span the client sees). On seed 002a (`--scenario
scenarios/seed002a.yaml`) the policies default to the path policies, the table's
changes are against `path_shortest`. Decision times: live, the controller's own
time in the policy's `decide` per new flow (controller-events.jsonl); simulated, the
same call timed on 5000 views with random queue lengths (`--executor serial` times them
with no other point running). A failed run is reported and the others go on (exit 1).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

_ENGINE = "emulate" if "emulate" in sys.argv else "simulate"
_RAY = any(a in ("ray", "--executor=ray") for a in sys.argv[1:])
bootstrap.bootstrap(needs_network_stack=_ENGINE == "emulate", extras="sweep" if _RAY else "")
ROOT = bootstrap.ROOT

from fogsdn.scenario import ScenarioError, load_scenario  # noqa: E402
from runner.agent_study import POLICIES, AgentStudy, default_policies  # noqa: E402
from runner.study import StudyError, run_study  # noqa: E402


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
        print(f"eval_agents.py: {err}", file=sys.stderr)
        return 2
    labels = list(ns.policies or default_policies(base)) + [f"rl_dqn_a{a:g}" for a in ns.sweep]
    study = AgentStudy(base, labels, ns.seeds, ns.out, ns.engine, ns.requests, ns.duration,
                       ns.json)
    if ns.engine == "emulate":
        def _term(signum: int, frame: object) -> None:
            raise KeyboardInterrupt  # the live run tears down; the finished runs are kept

        signal.signal(signal.SIGTERM, _term)
    try:
        res = run_study(study, study.runs_dir, executor=ns.executor, workers=ns.workers,
                        ray_address=ns.ray_address)
    except StudyError as err:
        print(f"eval_agents.py: {err}", file=sys.stderr)
        return 2
    return 1 if res.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
