"""The Gymnasium env over the simulator: the checker passes, an episode is a function of
the seed and the actions, and the weights steer where requests go."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, scenario_dict
from gymnasium.utils.env_checker import check_env

from fogsdn.agents.env import SimRoutingEnv, _EpochPolicy
from fogsdn.core.scenario import parse_scenario
from fogsdn.models.rnn_learner import RnnLearner
from fogsdn.policies import ClusterView, Request
from fogsdn.policies.observe import EpochObserver
from fogsdn.sim.engine import simulate
from fogsdn.sim.rows import Row

SCENARIO: dict[str, Any] = {
    "name": "envtest", "seed": 3, "duration_ms": 1e9, "warmup_ms": 0, "timeout_ms": 50,
    "workload": {"clients": 2, "lambda_hp": 0.6, "lambda_lp": 0.6},
    "churn": {"eta": 0, "xi": 0},
    "nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
              {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10},
              {"name": "cloud", "role": "cloud", "mu": 0.5, "capacity": 50, "servers": "multi"}],
}


def make_env(**kw: Any) -> SimRoutingEnv:
    return SimRoutingEnv(parse_scenario(scenario_dict(**SCENARIO)), epoch_requests=100,
                         epochs=10, **kw)


def episode(env: SimRoutingEnv, seed: int, action: list[float]
            ) -> tuple[list[np.ndarray], list[float], list[dict[str, Any]]]:
    obs, _ = env.reset(seed=seed)
    observations, rewards, infos = [obs], [], []
    truncated = False
    while not truncated:
        obs, reward, terminated, truncated, info = env.step(np.array(action, dtype=np.float32))
        assert not terminated and env.observation_space.contains(obs)
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
    return observations, rewards, infos


def test_env_checker_passes() -> None:
    env = make_env()
    check_env(env, skip_render_check=True)
    env.close()


def test_deterministic_for_a_seed() -> None:
    env = make_env()
    a = episode(env, 4, [0.7, 0.2, 0.5])
    b = episode(env, 4, [0.7, 0.2, 0.5])
    c = episode(env, 5, [0.7, 0.2, 0.5])
    env.close()
    assert all(np.array_equal(x, y) for x, y in zip(a[0], b[0], strict=True))
    assert a[1] == b[1] and len(a[1]) == 10
    assert a[1] != c[1]


def test_weights_steer_the_requests_and_the_reward() -> None:
    env = make_env(rt_weight=1.0)  # response time only
    obs, rewards_slow, infos_slow = episode(env, 1, [0.0, 1.0, 0.0])  # the slow OFN
    # ofn1 is up and full nearly all the time; only its overflow goes elsewhere
    assert obs[-1][5] == 1.0 and obs[-1][5 + 1] > 0.8
    _, rewards_fast, infos_fast = episode(env, 1, [0.0, 0.0, 1.0])  # the cloud, no waiting
    env.close()
    slow_rt = np.mean([i["response_ms"] for i in infos_slow])
    fast_rt = np.mean([i["response_ms"] for i in infos_fast])
    assert fast_rt < 3.0 < 5.0 < slow_rt  # 1/mu = 2 ms at the cloud; ofn1 is full (10 held)
    assert sum(rewards_fast) > sum(rewards_slow)


def test_power_follows_where_the_work_goes() -> None:
    env = make_env(rt_weight=0.0)  # power only

    def mean_power(action: list[float]) -> float:
        return float(np.mean([i["power_w"] for i in episode(env, 2, action)[2]]))

    slow, spread, cloud = mean_power([0.0, 1.0, 0.0]), mean_power([1.0, 1.0, 1.0]), \
        mean_power([0.0, 0.0, 1.0])
    env.close()
    # the slow OFN turns the most busy time into watts; the cloud's 50 servers the least
    # per request (one busy server of 50 is 1/50 of its dynamic range)
    assert slow > spread > cloud


def test_reset_mid_episode_starts_a_fresh_run_and_close_ends_it() -> None:
    env = make_env()
    first = env.reset(seed=0)[0]
    env.step(np.ones(3, dtype=np.float32))
    again = env.reset(seed=0)[0]
    assert np.array_equal(first, again)
    fresh = episode(make_env(), 6, [0.3, 0.9, 0.1])
    assert episode(env, 6, [0.3, 0.9, 0.1])[1] == fresh[1]  # nothing left of the first run
    env.close()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.ones(3, dtype=np.float32))


def test_epochs_are_a_whole_run_cut_at_every_epoch_requests_th_arrival() -> None:
    """The env's episode is the run a policy makes that takes each new action at the
    arrival that begins an epoch: the rows settled before that arrival are the epoch's,
    and the observation is what the policy observed until then."""
    # ofn1 leaves and returns often, dropping what it holds: rows between two arrivals,
    # some of them between an epoch's last arrival and the next epoch's first
    churn = {"eta": 0.3, "xi": 0.3, "leave": "drop"}
    env = SimRoutingEnv(parse_scenario(scenario_dict(**{**SCENARIO, "churn": churn})),
                        epoch_requests=4, epochs=50)
    # mostly to ofn1, so that it holds requests when it leaves
    actions = (np.random.default_rng(1).random((env.epochs, 3)) * [0.1, 1.0, 0.1]
               ).astype(np.float32)
    obs, _ = env.reset(seed=8)
    got = [(obs, 0)] + [(o, i["completed"]) for o, _, _, _, i in (env.step(a) for a in actions)]
    env.close()

    rows: list[Row] = []
    cuts: list[tuple[np.ndarray, int]] = []

    @dataclass
    class Switching(_EpochPolicy):
        count: int = 0

        def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
            if self.count % env.epoch_requests == 0:
                assert self.observer is not None
                cuts.append((self.observer.close()[0], len(rows)))
                if len(cuts) <= len(actions):  # the run's last arrival needs none
                    self.weights = actions[len(cuts) - 1].astype(np.float64)
            self.count += 1
            return super().decide(view, request, rng)

    policy = Switching(node_names=env.nodes, weights=np.ones(3), sent=[0, 0, 0],
                       observer=EpochObserver(env.layout))
    simulate(env.scenario.model_copy(update={"seed": 8}), rows.extend,
             requests=env.epoch_requests * env.epochs + 1, policy=policy, flush_rows=1)
    settled = [n for _, n in cuts]
    want = [(o, n - m) for (o, n), m in zip(cuts, [0, *settled[:-1]], strict=True)]
    assert len(got) == len(want) == env.epochs + 1
    for (o, n), (o2, n2) in zip(got, want, strict=True):
        assert np.array_equal(o, o2) and n == n2


def test_the_seeds_learner_finds_the_best_node_through_the_env() -> None:
    env = SimRoutingEnv(parse_scenario(scenario_dict(**SCENARIO)), epoch_requests=100,
                        epochs=300, rt_weight=1.0)
    learner, picks, truncated = RnnLearner(3, seed=0, explore=0.1), [], False
    env.reset(seed=0)
    while not truncated:
        k = learner.choose()
        action = np.zeros(3, dtype=np.float32)
        action[k] = 1.0
        _, reward, _, truncated, _ = env.step(action)
        learner.learn(k, reward)
        picks.append(k)
    env.close()
    late = Counter(picks[-100:])
    assert late.most_common(1)[0][0] == 2 and late[2] > 50  # the cloud: 2 ms, no waiting


def test_reward_is_one_over_the_goal_and_the_observation_carries_power_and_paths() -> None:
    from fogsdn.core.scenario import load_scenario

    env = SimRoutingEnv(load_scenario(ROOT / "scenarios" / "multipath_power.yaml"),
                        epoch_requests=100, epochs=3)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.shape == (3 * 5 + 6 + 2,)  # 3 nodes, 6 switches
    obs, reward, _, _, info = env.step(np.array([0.0, 1.0, 0.0], dtype=np.float32))
    a, lay = env.rt_weight, env.layout
    g = a * info["response_ms"] / lay.rt_ref_ms + (1 - a) * info["power_w"] / lay.p_ref_w
    assert reward == pytest.approx(1.0 / g)
    assert info["response_ms"] > 8.0  # the path's 2 round trips of 2 ms are in it
    assert obs[5 + 3] == pytest.approx(8.2 / lay.rt_ref_ms)  # eco: 8 + 2 round trips x 2 x 0.05
    assert obs[5 + 4] == 1.0 and obs[4] == 0.0  # all flows took eco's path
    switches = dict(zip(env.layout.switch_ports, obs[15:21], strict=True))
    assert switches["s3"] == 1.0 and switches["s5"] == 0.0 and switches["s2"] == 0.0
    assert obs[-1] == pytest.approx(info["estimate"]["power_w"] / lay.p_ref_w)
    env.close()
