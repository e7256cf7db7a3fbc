"""Faults on a schedule, the pure part (fogsdn.core.faults): the schema refuses what no
engine can apply, the steps come out in time order, a cut holds an OFN away whatever the
churn draws, and each fault's cost is counted from the trace once."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import scenario_dict

from fogsdn.core.churn import churn_schedule, scheduled_availability
from fogsdn.core.faults import (
    ActionKind,
    FaultKind,
    FaultSpec,
    ServedRequest,
    cut_changes,
    fault_actions,
    fault_cost,
)
from fogsdn.core.scenario import ScenarioError, parse_scenario
from fogsdn.sim.engine import simulate
from fogsdn.sim.rows import Row, node_names


def _with_faults(faults: list[dict[str, Any]], **kw: Any) -> Any:
    return parse_scenario(scenario_dict(faults=faults, **kw))


@pytest.mark.parametrize(("fault", "says"), [
    ({"t_ms": 10, "kind": "kill_controller", "node": "fn"}, "takes no node"),
    ({"t_ms": 10, "kind": "kill_worker"}, "needs a node"),
    ({"t_ms": 10, "kind": "loss_burst", "node": "fn"}, "loss_burst needs it"),
    ({"t_ms": 10, "kind": "link_down", "node": "fn", "loss": 0.5}, "loss"),
    ({"t_ms": 10, "kind": "loss_burst", "node": "fn", "loss": 1.0}, "loss"),
    ({"t_ms": 10, "kind": "kill_worker", "node": "fn", "duration_ms": 5}, "duration_ms"),
    ({"t_ms": 10, "kind": "link_up", "node": "fn", "restart_after_ms": 5}, "restart_after"),
    ({"t_ms": 10, "kind": "cut_ofn", "node": "fn"}, "needs an OFN"),
    ({"t_ms": 10, "kind": "link_down", "node": "nope"}, "is not a node"),
    ({"t_ms": 1e9, "kind": "link_down", "node": "fn"}, "before the run's end"),
    ({"t_ms": math.inf, "kind": "link_down", "node": "fn"}, "t_ms"),
    ({"t_ms": 10, "kind": "reboot", "node": "fn"}, "kind"),
])
def test_the_schema_refuses_a_fault_no_engine_can_apply(fault: dict[str, Any], says: str
                                                        ) -> None:
    with pytest.raises(ScenarioError) as err:
        _with_faults([fault])
    assert says in str(err.value) and "faults" in str(err.value)
    assert "\n" not in str(err.value).strip() or str(err.value).count("\n") < 3


def test_the_steps_come_in_time_order_with_their_ends() -> None:
    faults = [FaultSpec(t_ms=50, kind=FaultKind.LOSS_BURST, node="fn", loss=0.3,
                        duration_ms=20),
              FaultSpec(t_ms=10, kind=FaultKind.LINK_DOWN, node="ofn1", duration_ms=100),
              FaultSpec(t_ms=30, kind=FaultKind.KILL_WORKER, node="fn", restart_after_ms=5),
              FaultSpec(t_ms=40, kind=FaultKind.KILL_CONTROLLER),
              FaultSpec(t_ms=60, kind=FaultKind.CUT_OFN, node="ofn1", duration_ms=5)]
    steps = [(s.t_ms, s.kind, s.fault) for s in fault_actions(faults)]
    assert steps == [(10, ActionKind.LINK, 1), (30, ActionKind.KILL_WORKER, 2),
                     (35, ActionKind.START_WORKER, 2), (40, ActionKind.KILL_CONTROLLER, 3),
                     (50, ActionKind.LOSS, 0), (70, ActionKind.LOSS, 0),
                     (110, ActionKind.LINK, 1)]
    ends = fault_actions(faults)
    assert not ends[0].up and ends[-1].up and ends[4].loss == 0.3 and ends[5].loss == 0.0


def test_a_cut_holds_the_ofn_away_whatever_the_churn_draws() -> None:
    initial = [True, True]
    changes = [(5.0, 0, False), (20.0, 0, True), (25.0, 1, False), (40.0, 0, False)]
    cuts = [FaultSpec(t_ms=10, kind=FaultKind.CUT_OFN, node="a", duration_ms=20),
            FaultSpec(t_ms=0, kind=FaultKind.CUT_OFN, node="b", duration_ms=30)]
    start, merged = cut_changes(initial, changes, ["a", "b"], cuts)
    assert start == [True, False]  # b is cut from the start
    # a: down at 5 (drawn); the drawn return at 20 falls in its cut (10-30): back at 30;
    # b: the cut ends at 30 but b left at 25 (drawn), so it stays away
    assert list(merged) == [(5.0, 0, False), (30.0, 0, True), (40.0, 0, False)]
    same_start, same = cut_changes(initial, iter(changes), ["a", "b"], [])
    assert same_start == initial and list(same) == changes


def test_the_live_schedule_and_the_simulators_see_the_same_cut() -> None:
    sc = _with_faults([{"t_ms": 300, "kind": "cut_ofn", "node": "ofn1", "duration_ms": 400}],
                      duration_ms=2000, churn={"eta": 0.002, "xi": 0.002,
                                               "initial": "available"})
    drawn = churn_schedule(sc.churn, ["ofn1"], sc.duration_ms, sc.seed)
    cut = scheduled_availability(sc.churn, ["ofn1"], sc.duration_ms, sc.seed, sc.faults)
    assert cut != drawn
    state = {tr.node: tr.available for tr in cut if tr.t_ms == 0}
    for tr in cut:
        if 300 <= tr.t_ms < 700:
            assert not tr.available
        state[tr.node] = tr.available
    seen: list[tuple[float, str, bool]] = []
    simulate(sc, lambda rows: None, availability=lambda t, n, a: seen.append((t, n, a)))
    assert [(t, a) for t, n, a in seen if n == "ofn1" and t < sc.duration_ms] == [
        (tr.t_ms, tr.available) for tr in cut]


def test_the_simulated_ofn_serves_nothing_that_arrives_during_its_cut() -> None:
    sc = _with_faults([{"t_ms": 500, "kind": "cut_ofn", "node": "ofn1", "duration_ms": 1000}],
                      duration_ms=3000, churn={"eta": 0, "xi": 0, "initial": "available"})
    rows: list[Row] = []
    simulate(sc, rows.extend)
    ofn = node_names(sc).index("ofn1")
    # (t_done, outcome, seq, client, cls, size, t_send, node, ...): fogsdn.sim.rows
    served_in_cut = [r for r in rows if r[7] == ofn and 500 <= r[6] < 1500]
    served_outside = [r for r in rows if r[7] == ofn and r[6] >= 1600]
    assert not served_in_cut and served_outside


def _req(cls: str, t: float, end: float, node: str, outcome: str) -> ServedRequest:
    return ServedRequest(cls, t, end, node, outcome)


def test_a_faults_cost_counts_each_affected_request_once() -> None:
    kill = FaultSpec(t_ms=100, kind=FaultKind.KILL_WORKER, node="fn", restart_after_ms=50)
    rows = [_req("hp", 10, 12, "fn", "ok"), _req("hp", 20, 22, "fn", "ok"),
            _req("hp", 95, 101, "fn", "lost"),  # in flight at the kill
            _req("hp", 110, 160, "fn", "timeout"),
            _req("hp", 120, 121, "ofn1", "ok"),  # answered elsewhere: re-routed
            _req("lp", 130, 131, "ofn1", "ok"),  # lp was never the FN's: not re-routed
            _req("hp", 140, 140, "fn", "blocked"),
            _req("hp", 151, 153, "fn", "ok"),  # first answer after the restart
            _req("hp", 170, 171, "fn", "lost")]  # after the window: not this fault's
    cost = fault_cost(kill, rows, run_end_ms=1000)
    assert cost == {"lost": 1, "timed_out": 1, "blocked": 1, "rerouted": 1,
                    "window_ms": 50.0, "recovery_ms": 53.0}
    never = FaultSpec(t_ms=100, kind=FaultKind.KILL_WORKER, node="fn")
    assert fault_cost(never, rows[:5], run_end_ms=1000)["recovery_ms"] is None
    ctl = FaultSpec(t_ms=100, kind=FaultKind.KILL_CONTROLLER)
    c = fault_cost(ctl, rows, run_end_ms=1000, measured_end_ms=130)
    assert c["window_ms"] == 30 and c["rerouted"] == 0 and c["recovery_ms"] == 31.0


def test_the_simulated_run_reports_its_faults_and_the_replay_shows_them(tmp_path: Any
                                                                         ) -> None:
    """summary.json lists every fault (live-only kinds marked so, the cut with its cost),
    no exact model stands beside it, and the view's timeline shows each fault once begun."""
    from fogsdn.sim.runner import run_simulation
    from fogsdn.view.replay import ReplaySource

    sc = _with_faults([{"t_ms": 300, "kind": "kill_controller"},
                       {"t_ms": 500, "kind": "cut_ofn", "node": "ofn1", "duration_ms": 800}],
                      duration_ms=2000, churn={"eta": 0, "xi": 0, "initial": "available"})
    summary = run_simulation(sc, tmp_path / "run")
    ctl, cut = summary["faults"]
    assert ctl["simulated"] is False and "cost" not in ctl
    assert cut["simulated"] is True and cut["cost"]["rerouted"] > 0  # LP went to the FN
    assert cut["cost"]["recovery_ms"] is not None and cut["cost"]["recovery_ms"] >= 800
    assert summary["predicted"] is None and "faults" in summary["outside_model"]
    src = ReplaySource.of(tmp_path / "run")
    shown = [e for e in src.state(400)["timeline"] if e["kind"] == "fault"]
    assert shown == [{"t_ms": 300.0, "kind": "fault", "fault": "kill_controller", "node": ""}]
    assert len([e for e in src.state(1900)["timeline"] if e["kind"] == "fault"]) == 2


def test_a_lost_request_whose_node_is_unknown_counts_toward_the_fault_it_overlaps() -> None:
    kill = FaultSpec(t_ms=100, kind=FaultKind.KILL_WORKER, node="fn")
    rows = [_req("hp", 90, 590, "", "lost"), _req("hp", 20, 30, "", "lost")]
    assert fault_cost(kill, rows, run_end_ms=1000)["lost"] == 1
