from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.scenario import (
    LeaveMode,
    ScenarioError,
    load_scenario,
    parse_scenario,
)


def test_default_scenario_is_seed000_fig4a() -> None:
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    assert sc.workload.lambda_hp == 0.3 and sc.workload.lambda_lp == 0.5
    fn, ofn = sc.node("fn"), sc.node("ofn1")
    assert (fn.mu, fn.capacity, ofn.mu, ofn.capacity) == (1.0, 20, 0.3, 10)
    assert sc.churn.eta == pytest.approx(1 / 3) and sc.churn.xi == pytest.approx(1 / 3)
    assert sc.churn.leave is LeaveMode.DRAIN and sc.policy.name == "prioritized"
    assert sc.deadline_ms == 30


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"duration_ms": -1}, "duration_ms"),
        ({"time_scale": 0}, "time_scale"),
        ({"workload": {"lambda_hp": -0.1, "lambda_lp": 0.5}}, "workload.lambda_hp"),
        ({"workload": {"lambda_hp": 0, "lambda_lp": 0}}, "workload"),
        ({"nodes": [{"name": "fn", "role": "fn", "mu": 1, "capacity": 0}]}, "nodes.0.capacity"),
        ({"nodes": [{"name": "x", "role": "ofn", "mu": 1, "capacity": 3}]}, "with role fn"),
        ({"nodes": [{"name": "fn", "role": "fog", "mu": 1, "capacity": 3}]}, "nodes.0.role"),
        ({"policy": {"alpha": 1.5}}, "policy.alpha"),
        ({"churn": {"eta": 1, "xi": 0}}, "never returns"),
        ({"warmup_ms": 500}, "warmup_ms"),
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_scenarios_get_one_line_errors_naming_the_field(change: dict, field: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario_dict(**change), source="s.yaml")
    msg = str(err.value)
    assert "\n" not in msg and field in msg and msg.startswith("s.yaml: ")


def test_broken_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodes: [\n")
    with pytest.raises(ScenarioError, match="bad.yaml: line"):
        load_scenario(bad)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n- 2\n")
    with pytest.raises(ScenarioError, match="expected a mapping"):
        load_scenario(top)


def test_overrides_revalidate() -> None:
    sc = parse_scenario(scenario_dict(sweep={"parameter": "workload.lambda_lp",
                                             "values": [0.1, 0.2]}))
    assert sc.with_overrides({"workload.lambda_lp": 0.2}).workload.lambda_lp == 0.2
    assert sc.with_overrides({"nodes.fn.mu": 2.0}).node("fn").mu == 2.0
    with pytest.raises(ScenarioError, match="workload.nope"):
        sc.with_overrides({"workload.nope": 1})
    with pytest.raises(ScenarioError, match="time_scale"):
        sc.with_overrides({"time_scale": -3})


def test_round_trip_through_yaml(tmp_path: Path) -> None:
    sc = parse_scenario(scenario_dict())
    f = tmp_path / "s.yaml"
    f.write_text(sc.to_yaml())
    assert load_scenario(f) == sc


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_scenario_file_loads(path: Path) -> None:
    """A file written by an older schema (seed002b_live.yaml kept a removed topology's
    keys) fails here rather than in front of a user."""
    from fogsdn.cli.study_command import declared_study

    if declared_study(str(path)) == "city":
        from fogsdn.city.study_spec import load_city_study

        load_city_study(str(path), {})
    else:
        load_scenario(path)
