"""The learned agent decides live inside the controller (emulation: root and Open vSwitch).

A DQN file whose network always picks "eco alone" makes the effect visible: the first
epoch runs with even weights (latency-greedy, mostly the fast fn); from the second on
the controller sends every new connection to eco while it has room."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT
from test_rl_policies import MENU

from fogsdn.core.scenario import PolicySpec, load_scenario
from fogsdn.core.trace import Outcome, read_trace
from fogsdn.live.queueing_run import run_emulation
from fogsdn.policies.observe import layout_of

pytestmark = pytest.mark.emulation
EPOCH = 30


def test_rl_dqn_decides_live_in_the_controller(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "multipath_power.yaml")
    layout = layout_of(scenario)
    bias = [0.0, 0.0, 1.0]  # MENU[2]: eco alone
    weights = tmp_path / "dqn.json"
    weights.write_text(json.dumps({
        "kind": "dqn", "menu": MENU, "epoch_requests": EPOCH, "layout": layout.to_json(),
        "layers": [{"w": [[0.0] * layout.size for _ in MENU], "b": bias}]}))
    sc = scenario.model_copy(update={
        "duration_ms": 200.0, "seed": 3,
        "policy": PolicySpec(name="rl_dqn", params={"weights": str(weights)})})
    summary = run_emulation(sc, tmp_path / "live", show_progress=False)
    assert summary["policy"]["name"] == "rl_dqn" and summary["policy"]["errors"] == 0
    events = [json.loads(x) for x in (tmp_path / "live" / "controller-events.jsonl")
              .read_text().splitlines()]
    decisions = [e for e in events if e["event"] == "decision"]
    assert len(decisions) > 3 * EPOCH
    first, later = decisions[:EPOCH], decisions[EPOCH:]
    # even weights: latency-greedy, at least half on the fast fn (on a loaded machine its
    # load reports lag, and it has been seen to send exactly half there)
    assert sum(d["node"] == "fn" for d in first) >= EPOCH // 2
    full = [d for d in later if d["load"]["eco"] is not None and d["load"]["eco"] >= 20]
    assert all(d["node"] == "eco" for d in later if d not in full)
    # decided inline, not blocking the controller: the typical decision (one slow one is
    # a figure of the machine's load, not of the agent; bench_controller measures it)
    assert sorted(d["decide_ms"] for d in decisions)[len(decisions) // 2] < 50
    rows = [r for r in read_trace(tmp_path / "live" / "trace.csv") if r.outcome is Outcome.OK]
    assert {r.node for r in rows} >= {"eco"}
