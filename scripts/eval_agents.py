#!/usr/bin/env python3
"""Every policy on the same seeds: mean and p95 response time, mean power, energy per request.

    python scripts/eval_agents.py --engine simulate [--scenario scenarios/multipath_power.yaml]
        [--policies latency_greedy power_greedy ... rl_dqn rl_rnn] [--seeds 1 2 3 4 5]
        [--requests 20000] [--sweep 0.2 0.5 0.8] [--json FILE] [--out DIR]
    sudo python scripts/eval_agents.py --engine emulate --seeds 1 --duration 15 [...]

Live (`emulate`) runs take the emulation lock (/tmp/fogsdn-emulation.lock) for each run
only, so other users of the machine get it between runs. `--sweep A...` adds the DQN
agents trained with goal weight a = A (`agents/weights/dqn_<scenario>_a<A>.json`, from
`scripts/train_agent.py --rt-weight A --out agents/weights/dqn_<scenario>_a<A>.pt`) as
`rl_dqn_a<A>`: the Pareto front. Intervals: across seeds (t, 95 %) when there are
several, else batch means within the run. Prints a table; `--json FILE` writes
`{policy: {"response_ms", "response_ms_ci95", "p95_ms", "p95_ms_ci95", "power_W",
"power_W_ci95", "energy_per_request_J", "energy_per_request_J_ci95", "runs",
"decide_ms_p50", "decide_ms_p99", ...}}`. Decision times: live, the controller's own
time in the policy's `decide` per new flow (controller-events.jsonl); simulated, the
same call timed on 5000 views with random queue lengths.
"""

from __future__ import annotations

import argparse
import csv
import fcntl
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

_ENGINE = "emulate" if "emulate" in sys.argv else "simulate"
bootstrap.bootstrap(needs_network_stack=_ENGINE == "emulate", extras="")

import numpy as np  # noqa: E402

from analysis.agent_eval import RunFigures, combine, relative_to, run_figures  # noqa: E402
from fogsdn.scenario import PolicySpec, Scenario, ScenarioError, load_scenario  # noqa: E402
from fogsdn.trace import Outcome, read_trace  # noqa: E402

LOCK = Path("/tmp/fogsdn-emulation.lock")
POLICIES = ("latency_greedy", "power_greedy", "least_loaded", "round_robin", "random",
            "rl_dqn", "rl_rnn")


@contextmanager
def emulation_lock() -> Iterator[None]:
    """The machine's emulation lock (flock), held for one live run."""
    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def policy_spec(label: str, scenario: Scenario) -> PolicySpec:
    """`rl_dqn_a0.5` is rl_dqn with the weights trained for a = 0.5; others by name."""
    if label.startswith("rl_dqn_a"):
        a = label[len("rl_dqn_a"):]
        return PolicySpec(name="rl_dqn", params={
            "weights": f"agents/weights/dqn_{scenario.name}_a{a}.json"})
    return PolicySpec(name=label)


def figures(run_dir: Path, warmup_ms: float) -> RunFigures:
    """One run's figures from its trace.csv and power.csv (the same files in both engines)."""
    rows = sorted((r for r in read_trace(run_dir / "trace.csv") if r.t_send >= warmup_ms),
                  key=lambda r: r.t_send)
    answered = [r.response_ms for r in rows if r.outcome is Outcome.OK]
    # each element has one sample per (about one) second, live each with its own
    # timestamps: the k-th interval's total is the sum of every element's k-th sample
    series: dict[str, list[tuple[float, float, float]]] = {}
    with open(run_dir / "power.csv") as fh:
        for rec in csv.DictReader(fh):
            series.setdefault(rec["element"], []).append(
                (float(rec["t_s"]), float(rec["power_w"]), float(rec["dt_s"])))
    n = min((len(v) for v in series.values()), default=0)
    ordered = [sorted(v) for v in series.values()]
    totals = [math.fsum(v[k][1] for v in ordered) for k in range(n)]
    spans = [sum(v[k][2] for v in ordered) / len(ordered) for k in range(n)]
    return run_figures(answered, len(rows) - len(answered), totals, spans)


def decide_ms_simulated(scenario: Scenario, calls: int = 5000) -> list[float]:
    """Each `decide` call's time (ms) on views with random queue lengths: the policy's
    own cost per flow, epochs' forward passes included (the simulator runs it the same)."""
    import random
    import time

    from controller.policies import make_policy, node_view
    from controller.policies.base import ClusterView, Request
    from fogsdn.latency import node_net_ms
    from fogsdn.scenario import TaskClass

    policy = make_policy(scenario.policy, scenario.workload)
    net = node_net_ms(scenario)
    rng = random.Random(0)
    views = [ClusterView(tuple(node_view(n, True, net[n.name], rng.randrange(6))
                               for n in scenario.nodes)) for _ in range(64)]
    request = Request(TaskClass.HP, "c1")
    out = []
    for i in range(calls):
        t0 = time.perf_counter()
        policy.decide(views[i % len(views)], request, rng)
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def decide_ms_live(run_dir: Path) -> list[float]:
    """The controller's own time in `decide` per new flow (controller-events.jsonl)."""
    out = []
    with open(run_dir / "controller-events.jsonl") as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("event") == "decision" and "decide_ms" in rec:
                out.append(float(rec["decide_ms"]))
    return out


def run_one(scenario: Scenario, engine: str, run_dir: Path, requests: int,
            duration_s: float) -> tuple[RunFigures, list[float]]:
    """One run's figures and its per-flow decision times (ms)."""
    if engine == "simulate":
        from sim.runner import run_simulation

        run_simulation(scenario, run_dir, requests=requests, compare=False)
        decide = decide_ms_simulated(scenario)
    else:
        from runner.queueing_run import run_emulation

        model_ms = duration_s * 1000.0 / scenario.time_scale
        live = scenario.model_copy(update={"duration_ms": model_ms})
        with emulation_lock():
            run_emulation(live, run_dir, show_progress=False)
        decide = decide_ms_live(run_dir)
    return figures(run_dir, scenario.warmup_ms), decide


def table(results: dict[str, dict[str, Any]], base: str = "latency_greedy") -> str:
    head = (f"{'policy':22s} {'mean ms':>16s} {'p95 ms':>16s} {'power W':>15s} "
            f"{'J/request':>15s} {'dRT':>7s} {'dP':>7s} {'decide p99 ms':>13s}")
    lines = [head]
    for name, e in results.items():
        d_rt, d_p = relative_to(e, results[base]) if base in results else (math.nan, math.nan)
        lines.append(
            f"{name:22s} {e['response_ms']:8.3f} ±{e['response_ms_ci95']:6.3f} "
            f"{e['p95_ms']:8.3f} ±{e['p95_ms_ci95']:6.3f} {e['power_W']:7.1f} ±"
            f"{e['power_W_ci95']:5.1f} {e['energy_per_request_J']:7.3f} ±"
            f"{e['energy_per_request_J_ci95']:5.3f} {100 * d_rt:+6.1f}% {100 * d_p:+6.1f}% "
            f"{e.get('decide_ms_p99', math.nan):13.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("emulate", "simulate"), default="simulate")
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/multipath_power.yaml")
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--sweep", nargs="*", type=float, default=[],
                    help="goal weights a of the trained rl_dqn_a<A> agents to add")
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    ap.add_argument("--requests", type=int, default=20000, help="simulate: per run")
    ap.add_argument("--duration", type=float, default=15.0, help="emulate: seconds per run")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "eval_agents")
    ap.add_argument("--json", type=Path, help="write the figures as JSON here")
    ns = ap.parse_args(argv)
    try:
        base = load_scenario(ns.scenario)
    except (ScenarioError, OSError) as err:
        print(f"eval_agents.py: {err}", file=sys.stderr)
        return 2
    labels = list(ns.policies) + [f"rl_dqn_a{a:g}" for a in ns.sweep]
    results: dict[str, dict[str, Any]] = {}
    for label in labels:
        runs, decide = [], []
        for seed in ns.seeds:
            sc = base.model_copy(update={"policy": policy_spec(label, base), "seed": seed})
            run_dir = ns.out / ns.engine / f"{label}-seed{seed}"
            print(f"[eval] {ns.engine} {label} seed {seed} -> {run_dir}", flush=True)
            figs, times = run_one(sc, ns.engine, run_dir, ns.requests, ns.duration)
            runs.append(figs)
            decide += times
        results[label] = combine(runs)
        if decide:
            results[label]["decide_ms_p50"] = float(np.percentile(decide, 50))
            results[label]["decide_ms_p99"] = float(np.percentile(decide, 99))
    print(table(results))
    if ns.json is not None:
        ns.json.parent.mkdir(parents=True, exist_ok=True)
        ns.json.write_text(json.dumps(results, indent=1, default=float) + "\n")
        print(f"[eval] wrote {ns.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
