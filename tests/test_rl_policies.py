"""Learned agents as policies (issue 9): the per-flow rule, the observer, rl_dqn / rl_rnn
with fake weights, and both deciding in the simulator on multipath_power."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

from fogsdn.core.scenario import (
    PolicySpec,
    Role,
    ServerPower,
    SwitchPower,
    TaskClass,
    load_scenario,
)
from fogsdn.models.power_model import server_power_w, switch_power_w
from fogsdn.models.rnn_learner import RnnLearner, learner_from_json, learner_to_json
from fogsdn.policies import PolicyError, make_policy
from fogsdn.policies.base import ClusterView, NodeView, Request
from fogsdn.policies.observe import EpochObserver, ObservationLayout, layout_of, weighted_choice
from fogsdn.policies.rl import RlDqn, RlRnn, goal
from fogsdn.sim.engine import simulate

SCENARIO = ROOT / "scenarios" / "multipath_power.yaml"


def view(held: tuple[int, int, int], up: tuple[bool, bool, bool] = (True, True, True)
         ) -> ClusterView:
    """fn (mu 2, a server), eco (mu 1.9, frugal, 0.2 ms farther), cloud (mu 5, 16 ms
    farther), as the scenario."""
    return ClusterView((
        NodeView("fn", Role.FN, up[0], 20, 2.0, held[0], power_idle_w=30.0,
                 power_max_w=250.0, net_ms=8.0),
        NodeView("eco", Role.FN, up[1], 20, 1.9, held[1], power_idle_w=8.0, power_max_w=24.0,
                 net_ms=8.2),
        NodeView("cloud", Role.CLOUD, up[2], 100, 5.0, held[2], power_idle_w=30.0,
                 power_max_w=250.0, net_ms=24.0)))


LAYOUT = ObservationLayout(("fn", "eco", "cloud"),
                {"fn": {"s1": frozenset({"c1", "s2"}), "s2": frozenset({"s1", "s5"})},
                 "eco": {"s1": frozenset({"c1", "s3"}), "s3": frozenset({"s1", "s4"})},
                 "cloud": {"s1": frozenset({"c1", "s2"}), "s2": frozenset({"s1", "s6"})}},
                {"s1": 4, "s2": 3, "s3": 2}, SwitchPower(idle_w=5, peak_w=30, port_w=2),
                rt_ref_ms=8.5, p_ref_w=600.0)
MENU = [[1.0, 1.0, 1.0], [0.9, 1.0, 1.0], [0.0, 1.0, 0.0]]


def test_weighted_choice_is_latency_greedy_at_equal_weights_and_demotes_by_weight() -> None:
    v = view((1, 0, 0))  # fn: 2 held / 2 = 1.0 + 8; eco: 1 / 1.9 + 8.2
    assert weighted_choice(v, [1, 1, 1]) == 1
    assert weighted_choice(view((0, 0, 0)), [1, 1, 1]) == 0  # fn 8.5 < eco 8.73
    assert weighted_choice(view((0, 0, 0)), [0.9, 1, 1]) == 1  # 8.5 / 0.9 > 8.73
    assert weighted_choice(view((0, 0, 0)), [1, 0, 0]) == 0
    assert weighted_choice(view((0, 20, 0)), [0, 1, 0]) != 1  # eco full: passed over
    assert weighted_choice(view((0, 0, 0), up=(True, False, True)), [0, 1, 0]) == 0
    assert weighted_choice(view((0, 0, 0)), [0, 0, 0]) == 0  # no preference: greedy
    with pytest.raises(PolicyError, match="no node"):
        weighted_choice(view((0, 0, 0), up=(False, False, False)), [1, 1, 1])


def test_observer_estimates_utilisation_power_and_path_activity() -> None:
    obs = EpochObserver(LAYOUT)
    obs.record(view((1, 0, 0)), 1)  # fn busy, flow to eco
    obs.record(view((0, 0, 0)), 0)  # fn idle, flow to fn
    x, est = obs.close()
    assert x.shape == (LAYOUT.size,) and x.dtype == np.float32
    u = [x[2], x[5 + 2], x[10 + 2]]
    assert u == pytest.approx([0.5, 0.0, 0.0])  # PASTA: half the flows found fn busy
    assert [x[4], x[5 + 4], x[10 + 4]] == pytest.approx([0.5, 0.5, 0.0])  # path loads
    assert x[3] == pytest.approx(8.0 / 8.5) and x[13] == pytest.approx(24.0 / 8.5)
    # switches: s1 has c1, s2, s3 active (3 of 4); s2 s1+s5 (2 of 3); s3 both
    assert list(x[15:18]) == pytest.approx([0.75, 2 / 3, 1.0])
    expected_w = (server_power_w(ServerPower(idle_w=30.0, max_w=250.0), 0.5)
                  + server_power_w(ServerPower(idle_w=8.0, max_w=24.0), 0.0)
                  + server_power_w(ServerPower(idle_w=30.0, max_w=250.0), 0.0)
                  + switch_power_w(LAYOUT.switch_power, 3, 4, 0.0)
                  + switch_power_w(LAYOUT.switch_power, 2, 3, 0.0)
                  + switch_power_w(LAYOUT.switch_power, 2, 2, 0.0))
    assert est["power_w"] == pytest.approx(expected_w)
    assert x[-1] == pytest.approx(expected_w / 600.0)
    # estimated RT: the chosen nodes' expected response, (0+1)/1.9 + 8.2 and (0+1)/2 + 8
    assert est["response_ms"] == pytest.approx((1 / 1.9 + 8.2 + 0.5 + 8) / 2)
    assert est["flows"] == 2
    assert obs.close()[1]["flows"] == 0  # the next epoch starts empty


def test_layout_of_the_scenario_round_trips_through_json() -> None:
    layout = layout_of(load_scenario(SCENARIO))
    assert layout.nodes == ("fn", "eco", "cloud")
    assert set(layout.node_ports["eco"]) == {"s1", "s3", "s4"}  # the long path
    assert set(layout.node_ports["fn"]) == {"s1", "s2", "s5"}
    assert ObservationLayout.from_json(json.loads(json.dumps(layout.to_json()))) == layout
    with pytest.raises(PolicyError, match="layout"):
        ObservationLayout.from_json({"nodes": ["fn"]})


def fake_dqn(tmp_path: Path, favourite: int, epoch: int = 4) -> Path:
    """A one-layer 'network' whose output is its bias: always picks `favourite`."""
    bias = [0.0] * len(MENU)
    bias[favourite] = 1.0
    data = {"kind": "dqn", "menu": MENU, "epoch_requests": epoch,
            "layout": LAYOUT.to_json(),
            "layers": [{"w": np.zeros((len(MENU), LAYOUT.size)).tolist(), "b": bias}]}
    path = tmp_path / "dqn.json"
    path.write_text(json.dumps(data))
    return path


def test_rl_dqn_decides_per_flow_and_switches_weights_per_epoch(tmp_path: Path) -> None:
    spec = PolicySpec(name="rl_dqn", params={"weights": str(fake_dqn(tmp_path, 2))})
    policy = make_policy(spec)
    assert isinstance(policy, RlDqn) and not policy.proactive
    rng = random.Random(0)
    req = Request(TaskClass.HP, "c1")
    picks = [policy.decide(view((0, 0, 0)), req, rng) for _ in range(8)]
    # first epoch: even weights (latency-greedy: the fn); then the network's favourite,
    # eco alone
    assert picks == ["fn"] * 4 + ["eco"] * 4
    assert policy.epochs == [(4, (0.0, 1.0, 0.0))]
    # what the run view shows of the agent: its menu entry and each node's weight now
    d = policy.describe()
    assert policy.menu[d["choice"]] == (0.0, 1.0, 0.0) and d["decisions"] == 8
    assert list(d["weights"].values()) == [0.0, 1.0, 0.0]
    assert list(d["weights"]) == list(LAYOUT.nodes)


def test_rl_dqn_rejects_bad_weight_files(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="policy.params.weights: cannot read"):
        make_policy(PolicySpec(name="rl_dqn", params={"weights": str(tmp_path / "none")}))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "rnn"}))
    with pytest.raises(PolicyError, match="not a saved dqn agent"):
        make_policy(PolicySpec(name="rl_dqn", params={"weights": str(bad)}))
    data = json.loads(fake_dqn(tmp_path, 0).read_text())
    data["layers"][0]["w"] = [[0.0]]
    bad.write_text(json.dumps(data))
    with pytest.raises(PolicyError, match="shape"):
        make_policy(PolicySpec(name="rl_dqn", params={"weights": str(bad)}))
    policy = make_policy(PolicySpec(name="rl_dqn", params={"weights": str(
        fake_dqn(tmp_path, 0))}))
    other = ClusterView(view((0, 0, 0)).nodes[:2])
    with pytest.raises(PolicyError, match="trained on nodes"):
        policy.decide(other, Request(TaskClass.HP, "c1"), random.Random(0))


def fake_rnn(tmp_path: Path, epoch: int = 5) -> Path:
    learner = RnnLearner(len(MENU), seed=0)
    data = {"kind": "rnn", "menu": MENU, "epoch_requests": epoch, "rt_weight": 0.5,
            "layout": LAYOUT.to_json(), "learner": learner_to_json(learner)}
    path = tmp_path / "rnn.json"
    path.write_text(json.dumps(data))
    return path


def test_rnn_learner_round_trips() -> None:
    learner = RnnLearner(4, seed=3, explore=0.2)
    for k, r in [(0, 1.0), (1, 2.0), (2, 0.5), (1, 1.5)]:
        learner.learn(k, r)
    again = learner_from_json(json.loads(json.dumps(learner_to_json(learner))), 4)
    assert np.allclose(again.q, learner.q) and again.threshold == learner.threshold
    with pytest.raises(ValueError, match="neurons"):
        learner_from_json(learner_to_json(learner), 3)


def test_rl_rnn_goes_on_learning_from_the_estimated_goal(tmp_path: Path) -> None:
    policy = make_policy(PolicySpec(name="rl_rnn", params={"weights": str(fake_rnn(tmp_path))}))
    assert isinstance(policy, RlRnn)
    rng, req = random.Random(0), Request(TaskClass.LP, "c2")
    for _ in range(5 * 6):
        policy.decide(view((1, 0, 0)), req, rng)
    assert len(policy.epochs) == 5
    # the first epoch's reward only set the threshold; later ones moved weights
    assert policy.learner.threshold is not None
    assert not np.allclose(policy.learner.w_plus, RnnLearner(len(MENU), seed=0).w_plus)
    assert goal(1.0, 8.5, 123.0, LAYOUT) == pytest.approx(1.0)
    assert goal(0.0, 8.5, 300.0, LAYOUT) == pytest.approx(0.5)


def _shares(name: str, requests: int = 3000) -> dict[int, float]:
    """Each node's share (by index: fn, eco, cloud) of `requests` under policy `name` in
    the simulator on multipath_power."""
    scenario = load_scenario(SCENARIO)
    scenario = scenario.model_copy(update={"policy": PolicySpec(name=name)})
    rows: list[Any] = []
    res = simulate(scenario, rows.extend, requests=requests)
    assert res.per_request and len(rows) == requests
    count = Counter(r[7] for r in rows)
    assert set(count) <= {0, 1, 2}
    return {k: count[k] / requests for k in (0, 1, 2)}


@pytest.mark.parametrize("name", ["rl_dqn", "rl_rnn"])
def test_trained_agents_trade_latency_for_power_in_the_simulator(name: str) -> None:
    """The committed weights, trained on multipath_power's goal (response time and
    power), send clearly more work to the frugal eco than latency-greedy does (the
    weights ignored), yet keep the fast fn (not power-greedy's all on eco): a policy that
    ignored its weights, chose at random or always one node would not."""
    greedy, agent = _shares("latency_greedy"), _shares(name)
    assert agent[1] >= greedy[1] + 0.15, (agent, greedy)
    assert agent[0] >= 0.05, agent  # power-greedy would send nothing to fn
    assert _shares("power_greedy")[1] == 1.0  # the other end of the trade-off
