"""Training the seed's learner (fogsdn/models/rnn_learner.py) in the simulator: `train_rnn` for
`rl_rnn` (one neuron per weight-menu entry, issue 9), `train_path_rnn` for seed 002a's
`path_rnn` through whole simulated runs (a live warm start, issue 20).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fogsdn.agents.env import EpisodeLog, SimRoutingEnv
from fogsdn.core.scenario import PolicySpec, Scenario
from fogsdn.models.rnn_learner import RnnLearner, learner_to_json
from fogsdn.policies import make_policy
from fogsdn.policies.base import Policy
from fogsdn.policies.observe import Obs, ObservationLayout
from fogsdn.policies.paths import PathRnn
from fogsdn.sim.runner import run_simulation


@dataclass
class RnnAgent:
    menu: tuple[tuple[float, ...], ...]
    learner: RnnLearner
    curve: list[EpisodeLog] = field(default_factory=list)

    def action(self, obs: Obs) -> Obs:
        """The weights of the most excited neuron (no exploration)."""
        return np.asarray(self.menu[self.learner.best()], dtype=np.float32)

    def save(self, path: Path, layout: ObservationLayout, epoch_requests: int, rt_weight: float,
             meta: dict[str, object]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"kind": "rnn", "menu": [list(w) for w in self.menu],
                                    "learner": learner_to_json(self.learner),
                                    "layout": layout.to_json(), "rt_weight": rt_weight,
                                    "epoch_requests": epoch_requests, "meta": meta}))


def train_rnn(env: SimRoutingEnv, menu: tuple[tuple[float, ...], ...], steps: int, seed: int,
              progress: Callable[[EpisodeLog], None] | None = None, explore: float = 0.1
              ) -> RnnAgent:
    """`steps` decision epochs; episodes reseed from `seed`. Live it explores no more."""
    learner = RnnLearner(len(menu), seed=seed, explore=explore)
    agent = RnnAgent(menu, learner)
    rewards, infos = [], []
    env.reset(seed=seed)
    for _ in range(steps):
        k = learner.choose()
        _, reward, _, truncated, info = env.step(np.asarray(menu[k], dtype=np.float32))
        learner.learn(k, reward)
        rewards.append(reward)
        infos.append(info)
        if truncated:
            EpisodeLog.record(agent.curve, rewards, infos, progress)
            env.reset(seed=seed + len(agent.curve))
    learner.explore = 0.0
    return agent


def train_path_learner(scenario: Scenario, name: str, params: Mapping[str, Any],
                       seeds: Sequence[int], work_dir: Path) -> Policy:
    """One untrained path learner `name` (path_rnn, path_budget) with `params`, learning on
    through one simulated run of the scenario per seed, in that order."""
    policy = make_policy(PolicySpec(name=name, params=dict(params)), scenario.workload)
    for seed in seeds:
        run = scenario.model_copy(update={"seed": seed})
        run_simulation(run, work_dir / f"seed{seed}", trace=False, compare=False, policy=policy)
    return policy


def train_path_rnn(scenario: Scenario, params: Mapping[str, Any], seeds: Sequence[int],
                   work_dir: Path, progress: Callable[[int, PathRnn], None] | None = None
                   ) -> PathRnn:
    """One untrained `path_rnn` with `params` learning on through one simulated run of the
    scenario per seed, in that order."""
    policy = make_policy(PolicySpec(name="path_rnn", params=dict(params)), scenario.workload)
    if not isinstance(policy, PathRnn):
        raise TypeError(f"path_rnn is {type(policy).__name__} here")
    for seed in seeds:
        run = scenario.model_copy(update={"seed": seed})
        run_simulation(run, work_dir / f"seed{seed}", trace=False, compare=False, policy=policy)
        if progress is not None:
            progress(seed, policy)
    policy.learner.explore = 0.0
    return policy
