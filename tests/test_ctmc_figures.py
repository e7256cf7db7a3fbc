"""exact_curves on the seed 000 figure scenarios (a few points, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.figures import exact_curves
from fogsdn.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fig", ["4a", "4b", "5a", "5b", "6a", "6b"])
def test_figure_scenarios_load_and_curves_order(fig: str) -> None:
    sc = load_scenario(ROOT / "scenarios" / f"seed000_fig{fig}.yaml")
    assert sc.sweep is not None and len(sc.sweep.emulate_values) == 3
    short = sc.model_copy(update={"sweep": sc.sweep.model_copy(
        update={"values": sc.sweep.values[3:5]})})
    r = exact_curves(short)
    c = r["curves"]
    assert len(r["x"]) == 2 and r["outside_model"] == [None, None]
    for i in range(2):
        assert c["proposed_hp"]["W"][i] < c["nodiff"]["W"][i]
        assert c["proposed_hp"]["W"][i] < c["proposed_lp"]["W"][i]
        assert c["proposed_hp"]["outage"][i] < c["nodiff"]["outage"][i]
