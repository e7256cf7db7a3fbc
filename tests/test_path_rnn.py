"""Seed 002a's learner, path_rnn: its reward's response-time reference, and the warm start
from weights trained in the simulator (fogsdn/policies/paths.py, fogsdn/agents/train_rnn.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT

from fogsdn.agents.train_rnn import train_path_rnn
from fogsdn.core.scenario import Scenario, TaskClass, load_scenario
from fogsdn.models.network_power import PathMenu, PathOption
from fogsdn.policies import ClusterView, PolicyError, PolicySpec, Request, make_policy, node_view
from fogsdn.policies.paths import RULES, PathRnn, saved_path_rnn
from fogsdn.sim.runner import run_simulation
from fogsdn.studies.agent_study import default_policies, read_figures


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(ROOT / "scenarios" / "seed002a.yaml")


def _view(scenario: Scenario, in_system: int, measured_rt_ms: float | None) -> ClusterView:
    return ClusterView(tuple(replace(node_view(n, True, in_system=in_system),
                                     measured_rt_ms=measured_rt_ms) for n in scenario.nodes))


def _rnn(params: dict[str, object]) -> PathRnn:
    policy = make_policy(PolicySpec(name="path_rnn", params=params))
    assert isinstance(policy, PathRnn)
    return policy


MENU = PathMenu((PathOption(("s1", "s3", "s6"), (), 0.0, 0.0),
                 PathOption(("s1", "s6"), (), 0.0, 0.0)), 100.0)


@pytest.mark.parametrize(("rt_ref", "second_goal"), [
    # the load doubled the sojourn (1 -> 2 ms, mu 1) and the measured time (2 -> 4 ms):
    # against the first epoch that reads as G = 4 / 2; against the shortest path's
    # expected time under the same load it is (4 / 2) / (2 / 1) = 1, the same as before
    ("first", 2.0),
    ("shortest", 1.0),
])
def test_the_reward_reads_the_load_through_its_reference(scenario: Scenario, rt_ref: str,
                                                         second_goal: float) -> None:
    policy = _rnn({"epoch_requests": 2, "rt_weight": 1.0, "explore": 0.0, "rt_ref": rt_ref})
    req = Request(TaskClass.HP, "c1")
    # decisions 1-2 at an empty node; the 3rd closes epoch 1 (measured 2 ms), decisions
    # 3-4 with one request held; the 5th closes epoch 2 (measured 4 ms)
    for in_system, measured in [(0, None), (0, None), (1, 2.0), (1, 2.0), (1, 4.0)]:
        policy.choose_path(_view(scenario, in_system, measured), req, "srv1", MENU)
    assert [e.goal for e in policy.curve] == pytest.approx([1.0, second_goal])
    assert [e.response_ms for e in policy.curve] == pytest.approx([2.0, 4.0])


def test_a_bad_reference_is_refused_by_name() -> None:
    with pytest.raises(PolicyError, match="policy.params.rt_ref: one of first, shortest"):
        _rnn({"rt_ref": "last"})


@pytest.mark.parametrize("warm", [False, True])
def test_a_bad_exploration_rate_is_a_policy_error_warm_or_not(tmp_path: Path, warm: bool) -> None:
    params: dict[str, object] = {"explore": 1.5}
    if warm:
        params["weights"] = _saved(tmp_path)
    with pytest.raises(PolicyError, match=r"policy.params.explore: must be in \[0, 1\], got 1.5"):
        _rnn(params)


def test_trained_in_the_simulator_it_starts_where_training_left_it(scenario: Scenario,
                                                                  tmp_path: Path) -> None:
    trained = train_path_rnn(scenario, {"rt_ref": "shortest"}, range(10_000, 10_010), tmp_path)
    saved = tmp_path / "w.json"
    saved.write_text(json.dumps(saved_path_rnn(trained, {"runs": 10})))
    warm = _rnn({"weights": str(saved), "explore": 0.0})
    assert warm.learner.w_plus.tolist() == trained.learner.w_plus.tolist()
    assert warm.learner.w_minus.tolist() == trained.learner.w_minus.tolist()
    assert warm.learner.threshold is None  # the run's own first epoch sets it
    assert warm.choice == trained.learner.best() and warm.rt_ref == "shortest"
    assert _rnn({"weights": str(saved), "rt_ref": "first"}).rt_ref == "first"  # params win
    # what it learned, checked by running it: a fresh simulated run (a seed training never
    # saw) from the saved weights, against shortest-path routing on the same draws
    figures = {}
    for label, spec in [("shortest", PolicySpec(name="path_shortest")),
                        ("warm", PolicySpec(name="path_rnn", params={"weights": str(saved)}))]:
        run = scenario.model_copy(update={"policy": spec, "seed": 7})
        run_simulation(run, tmp_path / label, compare=False)
        figures[label] = read_figures(tmp_path / label, run.warmup_ms)
    warm_w, shortest_w = (figures[k].network_power_W for k in ("warm", "shortest"))
    assert warm_w is not None and shortest_w is not None
    saving = 1.0 - warm_w.mean / shortest_w.mean
    assert saving > 0.15, f"{RULES[trained.learner.best()]} saves {saving:.1%}"


def _saved(tmp_path: Path, **change: object) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(saved_path_rnn(_rnn({}), {}) | change))
    return str(path)


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "rnn"}, "is not a saved path_rnn agent"),
    ({"rules": ["rank 0", "rank 1"]}, "are not path_rnn's"),
    ({"learner": {"n": 3}}, "bad learner"),
    ({"learner": "weights"}, "bad learner"),
])
def test_a_bad_weights_file_is_one_line_naming_the_param(tmp_path: Path, change: dict[str, object],
                                                         message: str) -> None:
    with pytest.raises(PolicyError, match=message) as err:
        _rnn({"weights": _saved(tmp_path, **change)})
    assert str(err.value).startswith("policy.params.weights: ") and "\n" not in str(err.value)


def test_a_missing_weights_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="policy.params.weights: cannot read"):
        _rnn({"weights": str(tmp_path / "none.json")})


def test_the_warm_learner_is_a_default_only_where_it_was_trained(scenario: Scenario) -> None:
    assert default_policies(scenario)[-1] == "path_rnn_warm"  # agents/weights/: seed002a's
    assert "path_rnn_warm" not in default_policies(scenario.model_copy(update={"name": "x"}))
