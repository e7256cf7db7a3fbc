"""The live env's protocol without root: registration, and stepping a fake run that drives
the exchange policy (fogsdn/agents/live_policy.py) with views, as the controller would."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import ROOT
from test_rl_policies import view

from fogsdn.agents.live_env import LiveRoutingEnv
from fogsdn.core.scenario import Scenario, TaskClass, load_scenario
from fogsdn.policies import make_policy
from fogsdn.policies.base import Request
from fogsdn.policies.rl import goal

SCENARIO = ROOT / "scenarios" / "multipath_power.yaml"


def fake_run(scenario: Scenario, out: Path, stop: threading.Event) -> None:
    """What the controller does with the scenario's policy: build it, decide per flow."""
    policy = make_policy(scenario.policy, scenario.workload)
    rng, req = random.Random(0), Request(TaskClass.HP, "c1")
    while not stop.is_set():
        policy.decide(view((1, 0, 0)), req, rng)
        time.sleep(0.0005)


def test_both_envs_are_registered_and_the_live_one_is_nondeterministic() -> None:
    assert gym.spec("fogsdn/LiveRouting-v0").nondeterministic is True
    assert gym.spec("fogsdn/SimRouting-v0").nondeterministic is False
    env: Any = gym.make("fogsdn/SimRouting-v0", scenario=load_scenario(SCENARIO),
                        epoch_requests=20, epochs=2)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (23,)
    env.close()


def test_live_env_steps_a_run_through_the_exchange_policy(tmp_path: Path) -> None:
    env = LiveRoutingEnv(load_scenario(SCENARIO), epoch_requests=20, epochs=3,
                         folder=tmp_path, step_timeout_s=10, runner=fake_run)
    sc = env.live_scenario()
    assert sc.policy.name == "rl_live" and sc.policy.module == "fogsdn.agents.live_policy"
    obs, info = env.reset(seed=4)
    assert obs.shape == env.observation_space.shape and "run" in info
    truncated, shares = False, []
    while not truncated:
        obs, reward, terminated, truncated, est = env.step(np.array([0, 1, 0], np.float32))
        assert not terminated
        assert reward == pytest.approx(1.0 / goal(env.rt_weight, est["response_ms"],
                                                  est["power_w"], env.layout))
        shares.append(obs[5 + 4])  # eco's share of the epoch's flows
    env.close()
    # the weights apply from the epoch after they arrive: by the last step, eco only
    assert shares[-1] == 1.0
    assert env._thread is None


def test_live_env_reports_a_run_that_fails(tmp_path: Path) -> None:
    def broken(scenario: Scenario, out: Path, stop: threading.Event) -> None:
        raise OSError("no Open vSwitch here")

    env = LiveRoutingEnv(load_scenario(SCENARIO), folder=tmp_path, step_timeout_s=5,
                         runner=broken)
    with pytest.raises(RuntimeError, match="no Open vSwitch"):
        env.reset()
    env.close()
