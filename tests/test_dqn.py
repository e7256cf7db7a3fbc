"""The DQN agent's plumbing (needs the `rl` extra, torch, which the test command installs
from the CPU wheel on disk; a developer without it gets a skip): the weight menu, a short
training run that logs episodes, and saved weights that load to the same decisions."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from conftest import scenario_dict
from test_agent_env import SCENARIO

from fogsdn.agents.env import SimRoutingEnv
from fogsdn.core.scenario import parse_scenario

# torch is imported by the tests themselves: collecting this file (in every pytest-xdist
# worker) then costs no torch import
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="the rl extra (torch) is not installed")


def test_weight_menu() -> None:
    from fogsdn.agents.dqn import weight_menu

    assert weight_menu(1) == ((1.0,),)
    assert weight_menu(2) == ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
    menu = weight_menu(3)
    assert len(menu) == 3 + 3 + 1 and len(set(menu)) == 7


def test_trains_logs_and_round_trips(tmp_path: Path) -> None:
    from fogsdn.agents.dqn import DqnAgent, DqnConfig, train_dqn
    from fogsdn.agents.env import EpisodeLog

    env = SimRoutingEnv(parse_scenario(scenario_dict(**SCENARIO)), epoch_requests=50,
                        epochs=20)
    config = DqnConfig(steps=80, warmup=32, batch=16, target_every=20,
                       epsilon_decay_steps=60)
    seen: list[EpisodeLog] = []
    agent = train_dqn(env, config, progress=seen.append)
    assert [log.episode for log in seen] == [0, 1, 2, 3] and seen == agent.curve
    assert all(log.steps == 20 and log.mean_reward > 0 for log in seen)
    path = tmp_path / "w" / "dqn.pt"
    agent.save(path, {"scenario": "envtest"})
    loaded = DqnAgent.load(path)
    obs, _ = env.reset(seed=9)
    for _ in range(5):
        assert np.array_equal(agent.action(obs), loaded.action(obs))
        obs, *_ = env.step(agent.action(obs))
    env.close()
    again = train_dqn(env, config)  # seeded: the same curve
    assert [c.mean_reward for c in again.curve] == [c.mean_reward for c in agent.curve]
    env.close()


def test_exported_network_decides_as_torch_does_in_the_controller_policy(
        tmp_path: Path) -> None:
    """The JSON export read by rl_dqn (numpy, no torch) gives torch's Q-values."""
    import torch

    from fogsdn.agents.dqn import DqnConfig, train_dqn
    from fogsdn.core.scenario import PolicySpec
    from fogsdn.policies import make_policy
    from fogsdn.policies.rl import RlDqn

    env = SimRoutingEnv(parse_scenario(scenario_dict(**SCENARIO)), epoch_requests=50,
                        epochs=5)
    config = DqnConfig(steps=20, warmup=8, batch=8, levels=(0.9,))
    agent = train_dqn(env, config)
    assert len(agent.menu) == 7 + 3  # the menu plus each node demoted to 0.9
    path = tmp_path / "dqn.json"
    agent.export(path, env.layout, 50, {})
    policy = make_policy(PolicySpec(name="rl_dqn", params={"weights": str(path)}))
    assert isinstance(policy, RlDqn)
    obs, _ = env.reset(seed=2)
    for _ in range(3):
        with torch.no_grad():
            q = agent.net(torch.as_tensor(obs).unsqueeze(0)).numpy()[0]
        assert np.allclose(policy.q_values(obs), q, atol=1e-5)
        assert policy.menu[policy.think(obs, {})] == tuple(agent.action(obs))
        obs, *_ = env.step(agent.action(obs))
    env.close()
