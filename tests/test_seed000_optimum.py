"""The optimum at seed 000's figure points (fogsdn/exact/seed000_optimum.py): it keeps HP
within the proposed scheme's W, is no worse than any built-in meeting that bound, and
the sweep's figure data gains its curve only when asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.scenario import PolicySpec, load_scenario, parse_scenario
from fogsdn.exact.model_params import exact_prediction
from fogsdn.exact.optimal_policy import prediction_figures
from fogsdn.exact.seed000_optimum import point_optimum
from fogsdn.studies.sweep import exact_curves, plan

SMALL = [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 6},
         {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 4}]


def test_the_optimum_keeps_hp_and_beats_every_built_in_meeting_the_bound() -> None:
    sc = parse_scenario(scenario_dict(nodes=SMALL, policy={"name": "basic"}))
    o = point_optimum(sc)
    proposed_sc = sc.model_copy(update={"policy": PolicySpec(name="prioritized")})
    proposed = prediction_figures(proposed_sc, exact_prediction(proposed_sc))
    assert o.bound == pytest.approx(proposed["hp.W"], rel=1e-12)  # basic's own is ignored
    assert o.optimal["hp.W"] <= o.bound * (1 + 1e-9)
    assert o.best is not None and o.best.feasible
    assert o.value <= o.best.value <= proposed["all.W"] * (1 + 1e-12)
    assert o.gain == pytest.approx((o.best.value - o.value) / o.best.value)
    assert o.n_states == 7 * 5 * 2


def test_fig_4a_at_half_lp_load_matches_the_optimiser_run_by_hand() -> None:
    """docs/policies.md's Fig. 4a row (scripts/optimize_policy.py with the bound typed in):
    proposed all.W 6.210, optimal 3.670, 40.9 % below."""
    sc = load_scenario(ROOT / "scenarios" / "seed000_fig4a.yaml")
    o = point_optimum(sc.with_overrides({"workload.lambda_lp": 0.5}))
    assert o.bound == pytest.approx(2.363, abs=5e-4)
    assert o.best is not None and o.best.label == "prioritized"
    assert o.best.value == pytest.approx(6.210, abs=5e-4)
    assert o.value == pytest.approx(3.670, abs=5e-4)
    assert o.gain == pytest.approx(0.409, abs=5e-4)


def test_sweep_curves_gain_the_optimum_on_request(tmp_path: Path) -> None:
    sc = parse_scenario(scenario_dict(
        name="opt", nodes=SMALL,
        sweep={"parameter": "workload.lambda_lp", "values": [0.2, 0.6],
               "policies": ["prioritized", "basic"]}))
    points = plan(sc, tmp_path)
    assert ("optimal", "hp") not in exact_curves(sc, points)
    curves = exact_curves(sc, points, optimum=True)
    for cls in ("hp", "lp"):
        assert [v for v, _, _ in curves[("optimal", cls)]] == [0.2, 0.6]
    for (_, w_opt, _), (_, w_prop, _) in zip(curves[("optimal", "hp")],
                                              curves[("prioritized", "hp")], strict=True):
        assert w_opt <= w_prop * (1 + 1e-9)
    # the LP gains: the proposed scheme parks LP on the slow OFN
    for (_, w_opt, _), (_, w_prop, _) in zip(curves[("optimal", "lp")],
                                              curves[("prioritized", "lp")], strict=True):
        assert w_opt < w_prop
