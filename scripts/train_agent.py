"""Train the DQN agent on the simulator env, in simulated time; save weights and a curve.

    python scripts/train_agent.py --scenario scenarios/default.yaml --steps 3000 \
        [--rt-weight 0.5] [--epoch-requests 100] [--epochs 50] [--seed 0] \
        [--out agents/weights/dqn_default.pt]

Prints one line per episode (mean reward, response time, power), then the trained
agent's greedy returns beside every one-node and the all-even weights on fresh seeds.
Writes the weights and `<out>.curve.csv` (episode, steps, mean_reward, response_ms,
power_w). Needs the `rl` extra (installed on first run: torch 2.13.0, CPU build).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

bootstrap.bootstrap(needs_network_stack=False, extras="rl")

import numpy as np  # noqa: E402

from agents.dqn import DqnConfig, EpisodeLog, train_dqn, weight_menu  # noqa: E402
from agents.env import Obs, SimRoutingEnv  # noqa: E402
from fogsdn.scenario import ScenarioError, load_scenario  # noqa: E402

EVAL_SEEDS = (1000, 1001, 1002)


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", type=Path, default=Path("scenarios/default.yaml"))
    ap.add_argument("--steps", type=int, default=3000, help="decision epochs to train")
    ap.add_argument("--rt-weight", type=float, default=0.5, help="a in G (b = 1 - a)")
    ap.add_argument("--epoch-requests", type=int, default=100)
    ap.add_argument("--epochs", type=int, default=50, help="decision epochs per episode")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ns = ap.parse_args(argv)
    try:
        scenario = load_scenario(ns.scenario)
    except (ScenarioError, OSError) as err:
        print(f"train_agent.py: {err}", file=sys.stderr)
        return 2
    out = ns.out or Path("agents/weights") / f"dqn_{scenario.name}.pt"
    env = SimRoutingEnv(scenario, epoch_requests=ns.epoch_requests, epochs=ns.epochs,
                        rt_weight=ns.rt_weight)

    def progress(log: EpisodeLog) -> None:
        print(f"episode {log.episode:4d}  mean reward {log.mean_reward:8.4f}  "
              f"response {log.response_ms:8.3f} ms  power {log.power_w:7.1f} W", flush=True)

    agent = train_dqn(env, DqnConfig(steps=ns.steps, seed=ns.seed,
                                     epsilon_decay_steps=max(1, 2 * ns.steps // 3)), progress)
    agent.save(out, {"scenario": scenario.name, "rt_weight": ns.rt_weight,
                     "epoch_requests": ns.epoch_requests, "steps": ns.steps, "seed": ns.seed})
    curve = out.with_suffix(out.suffix + ".curve.csv")
    curve.write_text("episode,steps,mean_reward,response_ms,power_w\n" + "".join(
        f"{c.episode},{c.steps},{c.mean_reward:.6f},{c.response_ms:.6f},{c.power_w:.6f}\n"
        for c in agent.curve))
    print(f"weights: {out}\ncurve: {curve}")
    print("mean reward per epoch on seeds", ", ".join(map(str, EVAL_SEEDS)))
    print(f"  {'dqn (greedy)':24s} {mean_reward(env, agent.action):.4f}")
    for weights in weight_menu(len(env.nodes))[: len(env.nodes)] + (
            tuple(1.0 for _ in env.nodes),):
        label = "even" if all(weights) else "only " + env.nodes[weights.index(1.0)]
        print(f"  {label:24s} {mean_reward(env, constant(weights)):.4f}")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
