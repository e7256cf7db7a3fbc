"""Capacities drawn per replication (seed 000's simulation: C_F on 17-23, C_O on 7-13)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from fogsdn.core.scenario import ScenarioError, load_scenario
from fogsdn.core.streams import draw_capacities
from fogsdn.exact.ctmc import predict
from fogsdn.exact.model_params import (
    OutsideModel,
    capacity_mean_prediction,
    exact_prediction,
    model_params_from_scenario,
)
from fogsdn.sim.runner import replicate

ROOT = Path(__file__).resolve().parents[1]


def _drawn(fn: object = {"uniform": [17, 23]}, ofn: object = {"uniform": [7, 13]}):  # type: ignore[no-untyped-def]
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    return sc.with_overrides({"nodes.fn.capacity": fn, "nodes.ofn1.capacity": ofn})


def test_a_capacity_distribution_is_parsed_and_bad_ones_named() -> None:
    sc = _drawn()
    assert sc.node("fn").capacity_range == (17, 23) and sc.capacity_drawn
    assert sc.node("ofn1").capacity_range == (7, 13)
    assert not load_scenario(ROOT / "scenarios" / "default.yaml").capacity_drawn
    for bad, why in (({"uniform": [5, 3]}, "capacity.uniform"),
                     ({"uniform": [0, 3]}, "capacity.uniform"),
                     ({"normal": [5, 3]}, "capacity"),
                     ({"uniform": [1.5, 3]}, "capacity.uniform")):
        with pytest.raises(ScenarioError, match="capacity") as err:
            _drawn(fn=bad)
        assert why in str(err.value) and "\n" not in str(err.value)


def test_each_replication_draws_its_own_capacity_the_same_way_every_time() -> None:
    sc = _drawn()
    draws = [draw_capacities(sc, r) for r in range(700)]
    assert all(not d.capacity_drawn for d in draws)
    fn = Counter(d.node("fn").capacity for d in draws)
    ofn = Counter(d.node("ofn1").capacity for d in draws)
    assert set(fn) == set(range(17, 24)) and set(ofn) == set(range(7, 14))
    assert all(60 <= c <= 140 for c in (*fn.values(), *ofn.values()))  # 100 expected each
    assert draw_capacities(sc, 5) == draw_capacities(sc, 5)
    plain = load_scenario(ROOT / "scenarios" / "default.yaml")
    assert draw_capacities(plain, 3) is plain


def test_the_mean_prediction_averages_each_combination_solved_exactly() -> None:
    sc = _drawn(fn={"uniform": [19, 20]}, ofn=10)
    with pytest.raises(OutsideModel, match="drawn per replication"):
        exact_prediction(sc)
    mean = capacity_mean_prediction(sc)
    assert isinstance(mean, dict) and mean["combinations"] == 2
    base = model_params_from_scenario(load_scenario(ROOT / "scenarios" / "default.yaml"))
    w = [predict(replace(base, cap_f=c)).hp.W for c in (19, 20)]
    assert mean["hp"]["W"] == pytest.approx(sum(w) / 2, rel=1e-9)  # type: ignore[index]
    assert isinstance(capacity_mean_prediction(_drawn(fn={"uniform": [1, 3000]})), str)


def test_replications_run_at_their_draws_and_compare_with_the_mean(tmp_path: Path) -> None:
    sc = _drawn().with_overrides({"duration_ms": 2000})
    summary = replicate(sc, 3, tmp_path / "reps", trace=False)
    for r in range(3):
        ran = yaml.safe_load((tmp_path / "reps" / f"rep{r:03d}" / "scenario.yaml").read_text())
        caps = {n["name"]: n["capacity"] for n in ran["nodes"]}
        drawn = draw_capacities(sc, r)
        assert caps == {"fn": drawn.node("fn").capacity, "ofn1": drawn.node("ofn1").capacity}
    assert summary["predicted"]["combinations"] == 49
    assert summary["comparison"]["hp"]["W"]["predicted"] == pytest.approx(
        summary["predicted"]["hp"]["W"])
