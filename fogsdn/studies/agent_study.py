"""The learning evaluation as a study (`fogsdn.studies.study`, command `scripts/eval_agents.py`):
every policy on the same seeds, one (policy, seed) run per point, simulated or live,
and the table of response time, power and energy per request (`fogsdn.measure.agent_eval`).

Each row also carries the policy's per-flow decision times (docs/learning.md); a live
point holds the machine's emulation lock for its own run only (`fogsdn.studies.study`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fogsdn.core.csv_rows import read_csv_rows
from fogsdn.core.scenario import PolicySpec, Scenario
from fogsdn.core.summary import json_float
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.measure.agent_eval import RunFigures, policy_entry, run_figures, table
from fogsdn.measure.metrics import replications_ci
from fogsdn.studies.study import Engine, Row, run_live_point

POLICIES = ("latency_greedy", "power_greedy", "least_loaded", "round_robin", "random",
            "rl_dqn", "rl_rnn")
# seed 002a's: the node by least load, the path by each rule (fogsdn/policies/paths.py)
PATH_POLICIES = ("path_shortest", "path_fewest_switches", "path_goal", "path_rnn")


def default_policies(scenario: Scenario) -> tuple[str, ...]:
    """The path policies where the scenario's own policy chooses paths (with
    `path_rnn_warm` where weights were trained for the scenario), else the rest."""
    from fogsdn.policies import policy_class
    from fogsdn.policies.paths import warm_start_file
    from fogsdn.policies.rl import weights_path

    if not policy_class(scenario.policy).chooses_paths:
        return POLICIES
    trained = weights_path(warm_start_file(scenario.name)).is_file()
    return PATH_POLICIES + (("path_rnn_warm",) if trained else ())


def policy_spec(label: str, scenario: Scenario) -> PolicySpec:
    """A label's policy: `rl_dqn_a0.5` rl_dqn with the weights trained for a = 0.5,
    `path_rnn_warm` path_rnn from this scenario's simulator-trained weights; the rest below."""
    if label.startswith("rl_dqn_a"):
        a = label[len("rl_dqn_a"):]
        return PolicySpec(name="rl_dqn", params={
            "weights": f"fogsdn/agents/weights/dqn_{scenario.name}_a{a}.json"})
    if label in ("path_rnn_warm", "path_budget_warm"):
        from fogsdn.policies.paths import warm_start_file

        name = label.removesuffix("_warm")
        return PolicySpec(name=name, params={"weights": warm_start_file(scenario.name, name)})
    for name in ("path_goal", "path_rnn"):  # `path_rnn_a0.9`: its goal weight a = 0.9
        if label.startswith(f"{name}_a"):
            return PolicySpec(name=name, params={"rt_weight": float(label[len(name) + 2:])})
    if label.startswith("path_rank_"):  # `path_rank_1`: every connection on its 2nd path
        return PolicySpec(name="path_rank", params={"rank": int(label[len("path_rank_"):])})
    return PolicySpec(name=label)


def _power_series(run_dir: Path) -> tuple[dict[str, list[tuple[float, float, float]]], set[str]]:
    """power.csv's (t_s, dt_s, power_w) samples per element in time order, and which
    elements are switches. Each element has one sample per (about one) second, live each
    with its own timestamps: the k-th interval is every element's k-th sample."""
    series: dict[str, list[tuple[float, float, float]]] = {}
    switches: set[str] = set()
    for rec in read_csv_rows(run_dir / "power.csv"):
        series.setdefault(rec["element"], []).append(
            (float(rec["t_s"]), float(rec["dt_s"]), float(rec["power_w"])))
        if rec["kind"] == "switch":
            switches.add(rec["element"])
    return {e: sorted(v) for e, v in series.items()}, switches


def read_figures(run_dir: Path, warmup_ms: float, rt_measurement_error: float = math.nan
                 ) -> RunFigures:
    """One run's figures from its trace.csv and power.csv (the same files in both engines),
    the switches' share of power apart (`network_power_W`)."""
    rows = sorted((r for r in read_trace(run_dir / "trace.csv") if r.t_send >= warmup_ms),
                  key=lambda r: r.t_send)
    answered = [r.response_ms for r in rows if r.outcome is Outcome.OK]
    ordered, switches = _power_series(run_dir)
    n = min((len(v) for v in ordered.values()), default=0)
    totals = [math.fsum(v[k][2] for v in ordered.values()) for k in range(n)]
    network = [math.fsum(ordered[e][k][2] for e in switches) for k in range(n)]
    spans = [sum(v[k][1] for v in ordered.values()) / len(ordered) for k in range(n)]
    return run_figures(answered, len(rows) - len(answered), totals, spans, network,
                       rt_measurement_error)


def read_phases(run_dir: Path, scenario: Scenario) -> list[dict[str, float]]:
    """Under a time-varying workload (`workload.profile`), each phase's mean response time
    (answered requests sent in it, after warm-up) and network power (power.csv intervals
    whose middle falls in it): what the profile does to a policy. Empty without a profile."""
    profile = scenario.workload.rate_profile()
    if profile is None:
        return []
    n = len(profile.factors)
    ok = [(r.t_send, r.response_ms) for r in read_trace(run_dir / "trace.csv")
          if r.outcome is Outcome.OK and r.t_send >= scenario.warmup_ms]
    rt: list[list[float]] = [[] for _ in range(n)]
    for (_, resp), i in zip(ok, profile.phases_at(np.asarray([t for t, _ in ok])), strict=True):
        rt[int(i)].append(resp)
    # the k-th interval of every switch: its middle in model ms and the switches' watts
    series, switches = _power_series(run_dir)
    per = [v for e, v in series.items() if e in switches]
    k_max = min((len(v) for v in per), default=0)
    mids = [float(np.mean([scenario.timebase.model_ms(v[k][0] + v[k][1] / 2)
                           for v in per])) for k in range(k_max)]
    totals = [math.fsum(v[k][2] for v in per) for k in range(k_max)]
    where = profile.phases_at(np.asarray(mids)) if mids else np.asarray([], dtype=int)
    watts: list[list[float]] = [[] for _ in range(n)]
    for total, i in zip(totals, where, strict=True):
        watts[int(i)].append(total)
    return [{"factor": f, "response_ms": float(np.mean(rt[i])) if rt[i] else math.nan,
             "network_power_W": float(np.mean(watts[i])) if watts[i] else math.nan}
            for i, f in enumerate(profile.factors)]


def decide_ms_simulated(scenario: Scenario, calls: int = 5000) -> list[float]:
    """Each `decide` call's time (ms) on views with random queue lengths: the policy's
    own cost per flow, epochs' forward passes included (the simulator runs it the same)."""
    import random
    import time

    from fogsdn.core.latency import node_net_ms
    from fogsdn.core.scenario import TaskClass
    from fogsdn.policies import make_policy, node_view
    from fogsdn.policies.base import ClusterView, Request

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
    with open(run_dir / "controller-events.jsonl") as fh:
        recs = [json.loads(line) for line in fh]
    return [float(r["decide_ms"]) for r in recs
            if r.get("event") == "decision" and "decide_ms" in r]


@dataclass(frozen=True)
class AgentRun:
    """One policy (by its label, `policy_spec`) on one seed."""

    policy: str
    seed: int

    def label(self) -> str:
        return f"{self.policy} seed {self.seed}"


def run_agent(run: AgentRun, base: Scenario, engine: Engine, out: Path, requests: int,
              duration_s: float) -> list[Row]:
    """One run in `engine`: its row has the run's figures and its decision times (ms)."""
    scenario = base.model_copy(update={"policy": policy_spec(run.policy, base),
                                       "seed": run.seed})
    run_dir = out / f"{run.policy}-seed{run.seed}"
    if engine == "simulate":
        from fogsdn.sim.runner import run_simulation

        run_simulation(scenario, run_dir, requests=requests, compare=False)
        decide = decide_ms_simulated(scenario)
        # the simulator's controller measures the same span the client sees: 0 by construction
        rt_error = 0.0
    else:
        model_ms = scenario.timebase.model_ms(duration_s)
        live = scenario.model_copy(update={"duration_ms": model_ms})
        summary = run_live_point(live, run_dir)
        decide = decide_ms_live(run_dir)
        rt_error = json_float(summary.get("rt_measurement_error", math.nan))
    return [{"policy": run.policy, "seed": run.seed, "run_dir": str(run_dir),
             "figures": read_figures(run_dir, scenario.warmup_ms, rt_error),
             "phases": read_phases(run_dir, scenario), "decide_ms": decide}]


class AgentStudy:
    """Every policy label on every seed in one engine (runs under OUT/<engine>/); prints
    the table and, with `json_path`, writes `{policy: entry}` there, policies in the
    order given and each one's seeds combined (`fogsdn.measure.agent_eval.policy_entry`)."""

    name = "agents"

    def __init__(self, base: Scenario, labels: Sequence[str], seeds: Sequence[int],
                 out: Path, engine: Engine = "simulate", requests: int = 20000,
                 duration_s: float = 15.0, json_path: Path | None = None) -> None:
        self.labels, self.seeds = list(labels), list(seeds)
        self.engine, self.json_path = engine, json_path
        self.runs_dir = out / engine
        self.job = run_agent
        self.job_args: tuple[Any, ...] = (base, engine, self.runs_dir, requests, duration_s)
        self.live_summary: Path | None = None  # each live run has its own
        self.results: dict[str, dict[str, Any]] = {}

    def plan(self) -> list[AgentRun]:
        """Seed by seed, every policy within each, so that a machine whose load drifts
        during a long live evaluation weighs on every policy alike (docs/learning.md)."""
        return [AgentRun(label, seed) for seed in self.seeds for label in self.labels]

    def record(self, run: AgentRun, rows: list[Row]) -> str:
        figs: RunFigures = rows[0]["figures"]
        return (f"mean {figs.response_ms.mean:.3f} ms, power {figs.power_W.mean:.1f} W "
                f"-> {rows[0]['run_dir']}")

    def _paired_changes(self, by_run: dict[tuple[str, int], Row], base: str) -> None:
        """Each policy's relative change against `base`, seed by seed (the same arrivals:
        paired), with its 95 % interval across the seeds: `response_ms_change`,
        `network_power_W_change` (fractions) and their `_ci`."""
        for label, entry in self.results.items():
            pairs = [(by_run[label, s]["figures"], by_run[base, s]["figures"])
                     for s in self.seeds if (label, s) in by_run and (base, s) in by_run]
            if label == base or not pairs:
                continue
            for key, get in (("response_ms", lambda f: f.response_ms),
                             ("network_power_W", lambda f: f.network_power_W)):
                if any(get(f) is None for pair in pairs for f in pair):
                    continue
                ci = replications_ci([get(f).mean / get(b).mean - 1.0 for f, b in pairs])
                entry[f"{key}_change"], entry[f"{key}_change_ci"] = ci.mean, ci.half_width

    def finish(self, rows: list[Row], failures: list[tuple[Any, str]]) -> list[Path]:
        # the points finish in any order: each policy's runs in the order of the seeds
        by_run = {(r["policy"], r["seed"]): r for r in rows}
        self.results = {}
        for label in self.labels:
            mine = [by_run[label, s] for s in self.seeds if (label, s) in by_run]
            if mine:
                self.results[label] = policy_entry(
                    [r["figures"] for r in mine], [t for r in mine for t in r["decide_ms"]])
                phases = [r.get("phases") or [] for r in mine]
                if all(phases):  # each phase's figures, averaged over the runs
                    self.results[label]["phases"] = [
                        {k: float(np.nanmean([p[i][k] for p in phases])) for k in phases[0][i]}
                        for i in range(len(phases[0]))]
        if not self.results:
            return []
        base = next((b for b in ("latency_greedy", "path_shortest") if b in self.results),
                    "latency_greedy")
        self._paired_changes(by_run, base)
        print(table(self.results, base), flush=True)
        for label, e in self.results.items():
            if "network_power_W_change" in e:
                print(f"{label:22s} against {base}, paired by seed: response time "
                      f"{100 * e['response_ms_change']:+.2f} ± "
                      f"{100 * e['response_ms_change_ci']:.2f} %, network power "
                      f"{100 * e['network_power_W_change']:+.2f} ± "
                      f"{100 * e['network_power_W_change_ci']:.2f} %", flush=True)
            if "phases" in e:
                print(f"{label:22s} by phase: " + "; ".join(
                    f"x{p['factor']:g} {p['response_ms']:.3f} ms {p['network_power_W']:.1f} W"
                    for p in e["phases"]), flush=True)
        if self.json_path is None:
            return []
        self.json_path.parent.mkdir(parents=True, exist_ok=True)
        self.json_path.write_text(json.dumps(self.results, indent=1, default=float) + "\n")
        return [self.json_path]


__all__ = ["PATH_POLICIES", "POLICIES", "AgentRun", "AgentStudy", "decide_ms_live",
           "decide_ms_simulated", "default_policies", "policy_spec",
           "read_figures", "run_agent"]
