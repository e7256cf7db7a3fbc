"""The seed 000 figure scenarios' exact curves (`fogsdn.studies.sweep.exact_curves`, a
few points)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fogsdn.core.scenario import load_scenario
from fogsdn.studies.sweep import exact_curves, plan

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fig", ["4a", "4b", "5a", "5b", "6a", "6b"])
def test_figure_scenarios_load_and_curves_order(fig: str, tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / f"seed000_fig{fig}.yaml")
    assert sc.sweep is not None and len(sc.sweep.emulate_values) == 3
    short = sc.model_copy(update={"sweep": sc.sweep.model_copy(
        update={"values": sc.sweep.values[3:5]})})
    c = exact_curves(short, plan(short, tmp_path))
    xs = [float(v) for v in short.sweep.values]
    # every point of every curve is inside the model
    assert {k: [v for v, _, _ in pts] for k, pts in c.items()} == {
        (p, cls): xs for p in ("prioritized", "nodiff", "basic") for cls in ("hp", "lp")}
    for i in range(2):
        hp, lp = c[("prioritized", "hp")][i], c[("prioritized", "lp")][i]
        nodiff = c[("nodiff", "hp")][i]
        assert hp[1] < nodiff[1] and hp[1] < lp[1]  # W
        assert hp[2] < nodiff[2]  # outage
