"""Seed 002a as the paper measured it: the paper's switch power model, its per-request goal,
the per-path RNN (path_cpn) with the simulator's per-request completions, the claims table
builder and the CLI's one-line errors (fogsdn/models/request_goal.py,
fogsdn/policies/path_cpn.py, fogsdn/measure/seed002a_claims.py,
fogsdn/studies/seed002a_study.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from conftest import ROOT

from fogsdn.core.scenario import PolicySpec, Scenario, TaskClass, load_scenario
from fogsdn.measure.claim_stats import Stat
from fogsdn.measure.seed002a_claims import (
    CLAIMS,
    PRESETS,
    Choices,
    ConfigResult,
    RunFigures,
    claims_table,
    configurations,
    counts,
    power_outcome,
    rt_outcome,
    switch_spec,
)
from fogsdn.models.network_power import PathMenu, PathOption
from fogsdn.models.power_model import switch_power_w
from fogsdn.models.request_goal import (
    PAPER_SWITCH_POWER,
    GoalError,
    RequestGoal,
    request_goal,
    traffic_mj,
)
from fogsdn.policies import ClusterView, PolicyError, Request, make_policy, node_view
from fogsdn.policies.path_cpn import PathCpn
from fogsdn.policies.paths import PathRnn
from fogsdn.studies.seed002a_study import Plan, run_config

GBIT_BYTES = 1e9 / 8.0


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(ROOT / "scenarios" / "seed002a.yaml")


# -- the paper's switch power model ----------------------------------------------------------


def test_the_paper_switch_draws_20_w_idle_and_30_w_at_a_full_gigabit_port() -> None:
    p = PAPER_SWITCH_POWER
    assert switch_power_w(p, 4, 4, 0.0) == pytest.approx(20.0)
    assert switch_power_w(p, 4, 4, GBIT_BYTES) == pytest.approx(30.0)
    assert switch_power_w(p, 4, 4, GBIT_BYTES / 2) == pytest.approx(25.0)  # linear
    assert switch_power_w(p, 4, 4, 3 * GBIT_BYTES) == pytest.approx(30.0)  # capped at peak


def test_the_paper_switch_has_no_sleep_state_and_no_port_term() -> None:
    p = PAPER_SWITCH_POWER
    assert switch_power_w(p, 0, 7, 0.0) == pytest.approx(20.0)  # nothing awake: still idle
    assert switch_power_w(p, 7, 7, 0.0) == switch_power_w(p, 1, 7, 0.0)


def test_the_presets_switch_power(scenario: Scenario) -> None:
    ours = scenario.switch_power
    assert switch_spec(PRESETS["seed"], ours) == PAPER_SWITCH_POWER.model_copy(
        update={"port_hold_s": ours.port_hold_s})
    assert switch_spec(PRESETS["ours"], ours) == ours
    # the paper's figures with our 4 W sleep: the combination the ablation runs
    both = switch_spec(replace(PRESETS["seed"], sleep="ours"), ours)
    assert (both.idle_w, both.sleep_w) == (20.0, ours.sleep_w)


# -- the per-request goal ---------------------------------------------------------------------


def test_a_requests_own_energy_is_its_bytes_on_the_switches_it_crosses() -> None:
    # 1 Gb in one second at 10 W above idle is 10 J; 1000 bytes are 8e-6 of that
    assert traffic_mj(PAPER_SWITCH_POWER, 4, GBIT_BYTES) == pytest.approx(10_000.0)
    assert traffic_mj(PAPER_SWITCH_POWER, 4, 1000.0) == pytest.approx(0.08)
    goal = request_goal(PAPER_SWITCH_POWER, {"s1": 3, "s3": 2, "s6": 5}, 24.0, 1000.0)
    three = PathOption(("s1", "s3", "s6"), (), 0.02)
    two = PathOption(("s1", "s6"), (), 0.04)
    assert goal.energy_mj(three) == pytest.approx(0.24)
    assert goal.energy_mj(two) == pytest.approx(0.16)
    # G_r: response time in real ms (model ms x time scale) + 1 ms per mJ
    assert goal.value(2.0, goal.energy_mj(three)) == pytest.approx(48.24)


def test_what_a_request_keeps_awake_counts_where_switches_sleep() -> None:
    goal = RequestGoal(24.0, {"s1": 0.1}, hold_s=1.0)
    option = PathOption(("s1",), (), 0.0, wake_w=2.0)  # 2 W more for one 1 s hold
    assert goal.energy_mj(option) == pytest.approx(0.1 + 2000.0)


def test_the_goal_round_trips_through_policy_params() -> None:
    goal = RequestGoal(24.0, {"s1": 0.07, "s6": 0.05}, 1.0, 2.0)
    assert RequestGoal.from_params(goal.to_params()) == goal
    with pytest.raises(GoalError, match="mj_per_switch"):
        RequestGoal.from_params({"mj_per_switch": "s1:0.1"})
    with pytest.raises(GoalError, match="time_scale"):
        RequestGoal(0.0)


# -- the per-path RNN ------------------------------------------------------------------------


MENU = PathMenu((PathOption(("s1", "s3", "s6"), (), 0.02),
                 PathOption(("s1", "s5", "s6"), (), 0.025),
                 PathOption(("s1", "s6"), (), 0.04)), 120.0)


def _cpn(params: dict[str, float | int | str | bool]) -> PathCpn:
    policy = make_policy(PolicySpec(name="path_cpn", params=params))
    assert isinstance(policy, PathCpn)
    return policy


def _view(scenario: Scenario) -> ClusterView:
    return ClusterView(tuple(node_view(n, True) for n in scenario.nodes))


def test_path_cpn_has_one_neuron_per_path_per_edge_and_node(scenario: Scenario) -> None:
    policy = _cpn({"explore": 0.0})
    view, req = _view(scenario), Request(TaskClass.HP, "c1")
    policy.choose_path(view, req, "srv1", MENU)
    policy.choose_path(view, req, "srv2", MENU)
    assert set(policy.learners) == {("s1", "srv1"), ("s1", "srv2")}
    assert all(learner.n == 3 for learner in policy.learners.values())


def test_path_cpn_learns_per_request_which_path_answers_best(scenario: Scenario) -> None:
    """Path 2 answers in 1 ms, the others in 5: the reward 1 / G_r of every request
    moves the chosen neuron, and the RNN comes to prefer path 2."""
    policy = _cpn({"explore": 0.2, "seed": 3, "time_scale": 1.0})
    view, req = _view(scenario), Request(TaskClass.HP, "c1")
    picks = []
    for _ in range(400):
        menu = PathMenu(tuple(PathOption(o.switches, o.hops, o.delay_ms) for o in MENU.options),
                        MENU.network_w)
        i = policy.choose_path(view, req, "srv1", menu)
        picks.append(i)
        policy.answered("c1", "srv1", menu.options[i], 1.0 if i == 2 else 5.0)
    assert policy.learners[("s1", "srv1")].best() == 2
    assert picks[-200:].count(2) > 120  # explore 0.2: at most about 87 % on it


def test_path_cpn_ignores_an_answer_it_did_not_decide(scenario: Scenario) -> None:
    policy = _cpn({})
    policy.answered("c1", "srv1", MENU.options[0], 1.0)
    policy.answered("c1", "srv1", None, 1.0)
    assert policy.learners == {}


def test_path_cpn_rejects_bad_params() -> None:
    with pytest.raises(PolicyError, match="policy.params.goal"):
        _cpn({"goal": "fastest"})
    with pytest.raises(PolicyError, match="policy.params.explore"):
        _cpn({"explore": 2.0})
    with pytest.raises(PolicyError, match="mj_per_switch"):
        _cpn({"mj_per_switch": "s1"})


def test_the_simulator_reports_every_answered_request(scenario: Scenario) -> None:
    from fogsdn.sim.engine import simulate

    sc = scenario.model_copy(update={"switch_power": PAPER_SWITCH_POWER})
    policy = _cpn({"seed": 1})
    heard: list[float] = []
    answered = policy.answered

    def spy(client: str, node: str, path: PathOption | None, response_ms: float) -> None:
        heard.append(response_ms)
        answered(client, node, path, response_ms)

    policy.answered = spy  # type: ignore[method-assign]
    rows: list[tuple[object, ...]] = []
    simulate(sc, rows.extend, requests=600, policy=policy, paths={})
    ok = [r for r in rows if r[1] == 0]
    # every request answered before the last decision is heard (the rest settle at the end)
    assert len(ok) - 30 <= len(heard) <= len(ok)
    assert len(policy.curve) == 2  # an epoch of 200 decisions: after 200 and 400


def test_path_rnn_can_take_the_papers_goal_on_epoch_means(scenario: Scenario) -> None:
    policy = make_policy(PolicySpec(name="path_rnn", params={
        "goal": "rt_plus_energy", "epoch_requests": 2, "explore": 0.0, "time_scale": 10.0,
        "mj_per_switch": "s1=1;s3=1;s6=1"}))
    assert isinstance(policy, PathRnn)
    req = Request(TaskClass.HP, "c1")
    for measured in (None, None, 2.0):
        view = ClusterView(tuple(replace(node_view(n, True), measured_rt_ms=measured)
                                 for n in scenario.nodes))
        policy.choose_path(view, req, "srv1", MENU)
    # rank 0 on both connections: 3 switches, 3 mJ each; 2 model ms = 20 real ms
    assert policy.curve[0].goal == pytest.approx(23.0)
    with pytest.raises(PolicyError, match="policy.params.goal"):
        make_policy(PolicySpec(name="path_rnn", params={"goal": "x"}))


# -- the claims table ------------------------------------------------------------------------


def _figs(network_w: float, response_ms: float, **kw: object) -> RunFigures:
    base = {"phase_response_ms": (response_ms,) * 3, "phase_network_w": (network_w,) * 3,
            "switch_w": {"s1": 20.0}, "traffic_share": 0.001, "slope_w": 10.0,
            "energy_mj": 0.2, "estimate_w": network_w, "learner_rt_ms": response_ms,
            "chosen_share": 1.0, "settled_share": 0.9, "ranks_used": 2,
            "rank_share": (0.1, 0.0, 0.9)}
    return RunFigures(response_ms=response_ms, network_w=network_w, **(base | kw))  # type: ignore[arg-type]


def _result(choices: Choices, saving: float, rt_cost: float) -> ConfigResult:
    res = ConfigResult(choices, RequestGoal(24.0))
    res.static = {r: [_figs(100.0, 2.0 + 0.01 * r), _figs(100.0, 2.2 + 0.01 * r)]
                  for r in (0, 1, 2)}
    res.learner = [_figs(100.0 * (1 - saving), 2.0 * (1 + rt_cost)),
                   _figs(100.0 * (1 - saving), 2.2 * (1 + rt_cost))]
    return res


def test_the_power_and_response_time_verdicts_flip_at_their_thresholds() -> None:
    def st(m: float, half: float = 0.0) -> Stat:
        return Stat(m, m - half, m + half, 5)

    assert power_outcome(st(-0.15)) == "holds"
    assert power_outcome(st(-0.21)) == "partly"
    assert power_outcome(st(-0.04)) == "fails"
    assert rt_outcome(st(0.019, 0.0005)) == "holds"
    assert rt_outcome(st(0.019, 0.005)) == "partly"  # the interval crosses 2 %
    assert rt_outcome(st(0.021)) == "fails"


def test_a_table_row_flips_verdict_when_its_input_crosses_the_threshold() -> None:
    configs = configurations()
    assert set(configs) == {"seed", "ours", "ours+switch_power", "ours+sleep", "ours+goal",
                            "ours+learner"}

    def table(ours_saving: float, sleep_saving: float) -> dict[str, dict[str, Any]]:
        res = {name: _result(c, ours_saving, 0.01) for name, c in configs.items()}
        res["seed"] = _result(configs["seed"], 0.0, 0.0)
        res["ours+sleep"] = _result(configs["ours+sleep"], sleep_saving, 0.01)
        return {e["id"]: e for e in claims_table(res, "ours")}

    near = table(0.149, 0.0)["power-15"]
    assert near["verdict"] == "reproduced"
    assert near["seed"]["verdict"] == "not"
    # only taking our sleep state away gives the seed's outcome: the deciding choice
    assert near["deciding_choice"] == "sleep"
    assert near["ablation"]["sleep"] == "not" and near["ablation"]["goal"] == "reproduced"
    far = table(0.049, 0.0)["power-15"]
    assert far["verdict"] == "not" and far["deciding_choice"] is None  # both presets miss
    assert table(0.30, 0.30)["power-15"]["verdict"] == "partly"


def test_every_claim_has_a_verdict_and_counts_add_up() -> None:
    res = {name: _result(c, 0.15, 0.01) for name, c in configurations().items()}
    table = claims_table(res, "seed")
    assert len(table) == len(CLAIMS) >= 10
    assert {e["verdict"] for e in table} <= {"reproduced", "partly", "not"}
    for p in PRESETS:
        assert sum(counts(table, p).values()) == len(table)
    for e in table:  # a deciding choice exactly where the presets disagree
        assert (e["deciding_choice"] is None) == (e["seed"]["verdict"] == e["ours"]["verdict"])


def test_a_small_seed_preset_run_saves_almost_nothing(scenario: Scenario) -> None:
    """The paper's model at our traffic: the switches idle at 20 W whatever the path."""
    res = run_config(scenario, PRESETS["seed"], Plan(requests=1000, seeds=2))
    assert all(abs(f.network_w - 120.0) < 0.05 for f in res.learner)
    assert all(f.chosen_share == 1.0 for f in res.learner)


def test_the_cli_answers_bad_input_in_one_line() -> None:
    for args, needle in ((["--preset", "x"], "--preset: unknown 'x'"),
                         (["--preset", "seed", "--engine", "emulate"], "--engine"),
                         (["--preset", "seed", "--traffic", "2"], "--traffic"),
                         (["--preset", "seed", "--requests", "z"], "--requests")):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce_seed002a.py"),
                              *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2
        assert len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr
