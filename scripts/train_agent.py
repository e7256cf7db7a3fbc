"""Train a learning agent on the simulator env, in simulated time; save weights and a curve.

    python scripts/train_agent.py [--agent dqn|rnn] [--scenario scenarios/multipath_power.yaml]
        [--steps 3000] [--rt-weight A] [--epoch-requests 100] [--epochs 50] [--seed 0]
        [--out fogsdn/agents/weights/dqn_multipath_power.pt]
    python scripts/train_agent.py --agent path_rnn --scenario scenarios/seed002a.yaml
        [--runs 20] [--seed 0] [--out fogsdn/agents/weights/path_rnn_seed002a.json]

What it prints and writes: docs/reproduction.md; the agents: docs/learning.md.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import bootstrap  # first run: set-up; outside .venv: re-run inside it

bootstrap.bootstrap(needs_network_stack=False, extras="rl")
bootstrap.require("torch", "rl")

import numpy as np  # noqa: E402

from fogsdn.agents.dqn import DEMOTE_LEVELS, DqnConfig, EpisodeLog, train_dqn, weight_menu  # noqa: E402
from fogsdn.agents.env import Obs, SimRoutingEnv  # noqa: E402
from fogsdn.agents.train_rnn import train_path_learner, train_path_rnn, train_rnn  # noqa: E402
from fogsdn.controller.learner_reports import curve_text  # noqa: E402
from fogsdn.core.scenario import Scenario, ScenarioError, load_scenario  # noqa: E402
from fogsdn.policies.base import Epoch, PolicyError  # noqa: E402
from fogsdn.policies.path_budget import PathBudget, saved_path_budget  # noqa: E402
from fogsdn.policies.paths import (  # noqa: E402
    RT_REFS,
    RULES,
    PathRnn,
    saved_path_rnn,
    warm_start_file,
)

ROOT = Path(__file__).resolve().parents[1]
EVAL_SEEDS = (1000, 1001, 1002)
PATH_RNN_SEED_BASE = 10_000  # path_rnn's training runs: far from eval_agents' seeds 1, 2, ...


def mean_reward(env: SimRoutingEnv, act: Callable[[Obs], Obs]) -> float:
    """Mean reward per epoch of a policy (obs -> weights) over EVAL_SEEDS."""
    rewards = []
    for seed in EVAL_SEEDS:
        obs, _ = env.reset(seed=seed)
        truncated = False
        while not truncated:
            obs, reward, _, truncated, _ = env.step(act(obs))
            rewards.append(reward)
    return float(np.mean(rewards))


def constant(weights: tuple[float, ...]) -> Callable[[Obs], Obs]:
    fixed = np.asarray(weights, dtype=np.float32)
    return lambda _obs: fixed


def _meta(scenario: Scenario, seeds: list[int], curve: Sequence[object]) -> dict[str, object]:
    return {"scenario": scenario.name, "seeds": seeds, "epochs": len(curve),
            "duration_ms": scenario.duration_ms}


def save_learner(out: Path, saved: dict[str, object], name: str, curve: Sequence[Epoch]) -> Path:
    """A trained path learner to `out` (what its warm start loads), its curve beside it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(saved, indent=1) + "\n")
    curve_path = out.with_suffix(out.suffix + ".curve.csv")
    curve_path.write_text(curve_text(name, curve))
    return curve_path


def train_path(scenario: Scenario, params: dict[str, object], runs: int, seed: int,
               out: Path) -> int:
    """path_rnn through `runs` simulated runs; its weights to `out`, its rules per run printed."""
    if runs < 1:
        return bootstrap.fail(f"train_agent.py: --runs: must be at least 1, got {runs}")
    seeds = [PATH_RNN_SEED_BASE + seed + k for k in range(runs)]
    seen = 0

    def progress(run_seed: int, policy: PathRnn) -> None:
        nonlocal seen
        rules = [e.action for e in policy.curve[seen:]]
        seen = len(policy.curve)
        print(f"seed {run_seed}: {len(rules)} epochs, rules {' | '.join(rules)}; "
              f"most excited now: {RULES[policy.learner.best()]}", flush=True)

    with tempfile.TemporaryDirectory() as work:
        policy = train_path_rnn(scenario, params, seeds, Path(work), progress)
    curve = save_learner(out, saved_path_rnn(policy, _meta(scenario, seeds, policy.curve)),
                         policy.name, policy.curve)
    print(f"weights: {out} (most excited: {RULES[policy.learner.best()]})\ncurve: {curve}")
    return 0


def train_budget(scenario: Scenario, params: dict[str, object], runs: int, seed: int,
                 out: Path) -> int:
    """path_budget through `runs` simulated runs; what it learned to `out`."""
    if runs < 1:
        return bootstrap.fail(f"train_agent.py: --runs: must be at least 1, got {runs}")
    budget = params.get("budget")
    if not isinstance(budget, float) or not math.isfinite(budget):
        return bootstrap.fail(f"train_agent.py: --budget: a finite number, got {budget!r}")
    seeds = [PATH_RNN_SEED_BASE + seed + k for k in range(runs)]
    try:
        with tempfile.TemporaryDirectory() as work:
            policy = train_path_learner(scenario, "path_budget", params, seeds, Path(work))
    except PolicyError as err:
        return bootstrap.fail(f"train_agent.py: {err}")
    assert isinstance(policy, PathBudget)
    curve = save_learner(out, saved_path_budget(policy, _meta(scenario, seeds, policy.curve)),
                         policy.name, policy.curve)
    learned = ", ".join(f"{RULES[int(r)]} {w:.1f} W" for r, w in sorted(policy.power_w.items()))
    print(f"learned: {learned}; multiplier {policy.multiplier:.3f}\nweights: {out}\n"
          f"curve: {curve}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agent", choices=("dqn", "rnn", "path_rnn", "path_budget"), default="dqn")
    ap.add_argument("--scenario", type=Path, default=Path("scenarios/multipath_power.yaml"))
    ap.add_argument("--steps", type=int, default=3000, help="decision epochs to train")
    ap.add_argument("--rt-weight", type=float, default=None,
                    help="a in G (b = 1 - a); default: the scenario's goal.rt_weight")
    ap.add_argument("--epoch-requests", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=50, help="decision epochs per episode")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=20, help="path_rnn: simulated runs to train on")
    ap.add_argument("--rt-ref", choices=RT_REFS, default="shortest",
                    help="path_rnn: its reward's response-time reference (paths.py)")
    ap.add_argument("--budget", type=float, default=0.02,
                    help="path_budget: the response time allowed over the shortest path's, "
                    "as a share (0.02: +2 %%)")
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args(argv)
    try:
        scenario = load_scenario(ns.scenario)
    except (ScenarioError, OSError) as err:
        return bootstrap.fail(f"train_agent.py: {err}")
    if ns.agent == "path_budget":
        return train_budget(scenario, {"budget": ns.budget}, ns.runs, ns.seed,
                            ns.out or ROOT / warm_start_file(scenario.name, "path_budget"))
    if ns.agent == "path_rnn":
        params = {"rt_ref": ns.rt_ref} | (
            {} if ns.rt_weight is None else {"rt_weight": ns.rt_weight})
        return train_path(scenario, params, ns.runs, ns.seed,
                          ns.out or ROOT / warm_start_file(scenario.name))
    out = ns.out or Path("fogsdn/agents/weights") / f"{ns.agent}_{scenario.name}.pt"
    env = SimRoutingEnv(scenario, epoch_requests=ns.epoch_requests, epochs=ns.epochs,
                        rt_weight=ns.rt_weight)
    meta = {"scenario": scenario.name, "rt_weight": env.rt_weight,
            "epoch_requests": ns.epoch_requests, "steps": ns.steps, "seed": ns.seed}

    def progress(log: EpisodeLog) -> None:
        print(f"episode {log.episode:4d}  mean reward {log.mean_reward:8.4f}  "
              f"response {log.response_ms:8.3f} ms  power {log.power_w:7.1f} W", flush=True)

    act: Callable[[Obs], Obs]
    if ns.agent == "dqn":
        agent = train_dqn(env, DqnConfig(steps=ns.steps, seed=ns.seed, levels=DEMOTE_LEVELS,
                                         epsilon_decay_steps=max(1, 2 * ns.steps // 3)),
                          progress)
        agent.save(out, meta)
        agent.export(out.with_suffix(".json"), env.layout, ns.epoch_requests, meta)
        curve_log, act, label = agent.curve, agent.action, "dqn (greedy)"
    else:
        rnn = train_rnn(env, weight_menu(len(env.nodes), DEMOTE_LEVELS), ns.steps, ns.seed,
                        progress)
        out = out.with_suffix(".json")
        rnn.save(out, env.layout, ns.epoch_requests, env.rt_weight, meta)
        curve_log, act, label = rnn.curve, rnn.action, "rnn (best neuron)"
    curve = out.with_suffix(out.suffix + ".curve.csv")
    curve.write_text("episode,steps,mean_reward,response_ms,power_w\n" + "".join(
        f"{c.episode},{c.steps},{c.mean_reward:.6f},{c.response_ms:.6f},{c.power_w:.6f}\n"
        for c in curve_log))
    print(f"weights: {out}\ncurve: {curve}")
    print("mean reward per epoch on seeds", ", ".join(map(str, EVAL_SEEDS)))
    print(f"  {label:24s} {mean_reward(env, act):.4f}")
    for weights in weight_menu(len(env.nodes))[: len(env.nodes)] + (
            tuple(1.0 for _ in env.nodes),):
        label = "even" if all(weights) else "only " + env.nodes[weights.index(1.0)]
        print(f"  {label:24s} {mean_reward(env, constant(weights)):.4f}")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
