"""The live controller's policy side, without os-ken (fogsdn.controller.running_policy,
fogsdn.controller.learner_reports): one connection's decision, path rules and reports; a swap
starting a new policy epoch; the learning curve of each epoch kept apart; a learning
agent's state in some decision events, not in each."""

from __future__ import annotations

import csv
import io
import random
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.controller.flow_tables import bucket_weights
from fogsdn.controller.learner_reports import (
    CURVE_COLUMNS,
    DESCRIBE_EVERY,
    LearnerReports,
    curve_rows,
    curve_text,
    next_policy_epoch,
)
from fogsdn.controller.path_choice import path_router
from fogsdn.controller.pipeline import Topology, path_flows
from fogsdn.controller.running_policy import RunningPolicy
from fogsdn.core.scenario import Scenario, TaskClass, load_scenario, parse_scenario, scenario_graph
from fogsdn.policies import ClusterView, PolicySpec, Request, initial_view, make_policy
from fogsdn.policies.base import Epoch, Policy, RouteTable, routes_for

SC = parse_scenario(scenario_dict())
VIEW = initial_view(SC, True)


@dataclass
class FakeLearner(Policy):
    """A per-request learner: an epoch closes every `every` decisions; counts how often
    its state is asked."""

    name: ClassVar[str] = "fake_learner"
    proactive: ClassVar[bool] = False
    every: int = 3
    decisions: int = 0
    curve: list[Epoch] = field(default_factory=list)
    described: int = 0

    def routes(self, view: ClusterView) -> RouteTable:
        return {TaskClass.HP: {"fn": 1.0}, TaskClass.LP: {"fn": 1.0}}

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        self.decisions += 1
        if self.decisions % self.every == 0:
            self.curve.append(Epoch(self.decisions, f"rank {self.decisions % 2}", 2.0, 100.0,
                                    1.0))
        return "ofn1"

    def learning_curve(self) -> list[Epoch]:
        return self.curve

    def describe(self) -> dict[str, Any]:
        self.described += 1
        return {"choice": None, "decisions": self.decisions, "weights": {"fn": 1.0}}


def _connect(run: RunningPolicy, n: int, port: int = 40000) -> list[Any]:
    topo = Topology.of(scenario_graph(run.scenario))
    return [run.connection(VIEW, Request(TaskClass.HP, "c1"), port + i, topo, lambda: 0.0, 5)
            for i in range(n)]


def _never(call: str, line: str) -> None:
    raise AssertionError(f"{call}: {line}")


def test_a_swapped_in_learner_writes_its_own_curve_not_the_one_before() -> None:
    """Two learners in one run (a swap): each one's epochs are told apart in the file, and
    each reads as its own curve, decisions counted from its own start."""
    first = FakeLearner()
    run = RunningPolicy.start(SC, first, _never, policy_epoch=0)
    text = "".join(c.curve_rows for c in _connect(run, 7))  # epochs at 3 and 6
    second = FakeLearner(every=2)
    run = run.swapped(SC, second)
    text += "".join(c.curve_rows for c in _connect(run, 5))  # epochs at 2 and 4
    rows = list(csv.DictReader(io.StringIO(CURVE_COLUMNS + text)))
    curves: dict[str, list[int]] = {}
    for r in rows:
        curves.setdefault(r["policy_epoch"], []).append(int(r["decisions"]))
    assert curves == {"0": [3, 6], "1": [2, 4]}
    assert {r["policy"] for r in rows} == {"fake_learner"}
    assert float(rows[0]["goal"]) == 1.0 and rows[0]["action"] == "rank 1"
    # a controller restarted on this file starts the next policy epoch
    assert next_policy_epoch(CURVE_COLUMNS + text) == 2


def test_each_closed_epoch_is_written_once() -> None:
    reports = LearnerReports(4, "path_rnn")
    e1, e2 = Epoch(200, "rank 0", 3.5, 210.0, 1.0), Epoch(400, "a 0.5", 3.0, 200.0, 0.9)
    assert reports.new_rows([]) == ""
    assert reports.new_rows([e1]) == "4,path_rnn," + e1.csv_row()
    assert reports.new_rows([e1]) == ""
    assert reports.new_rows([e1, e2]) == "4,path_rnn," + e2.csv_row()


def test_curve_rows_quote_a_policy_name_with_a_comma() -> None:
    e = Epoch(1, "rank 0", 1.0, 2.0, 3.0)
    row = next(csv.DictReader(io.StringIO(CURVE_COLUMNS + curve_rows(2, "mine, v2", [e]))))
    assert (row["policy_epoch"], row["policy"], row["decisions"]) == ("2", "mine, v2", "1")


@pytest.mark.parametrize(("text", "expected"), [
    (None, 0),
    ("", 0),
    (CURVE_COLUMNS, 0),
    (CURVE_COLUMNS + "0,a,1,rank 0,1,1,1\n3,b,2,rank 1,1,1,1\n1,c,4,rank 0,1,1,1\n", 4),
    ("decisions,action,response_ms,network_w,goal\n200,rank 0,1,1,1\n", 0),  # older file
])
def test_a_restarted_controller_continues_after_the_last_policy_epoch(
        text: str | None, expected: int) -> None:
    assert next_policy_epoch(text) == expected


def test_the_simulators_curve_is_one_policy_epoch_in_the_same_columns() -> None:
    e = Epoch(100, "rank 2", 1.5, 150.0, 0.8)
    assert curve_text("path_rnn", []) == ""
    rows = list(csv.DictReader(io.StringIO(curve_text("path_rnn", [e, e]))))
    assert [(r["policy_epoch"], r["policy"], r["decisions"]) for r in rows] == [
        ("0", "path_rnn", "100")] * 2


def test_the_agents_state_goes_into_some_decisions_not_each() -> None:
    learner = FakeLearner()
    run = RunningPolicy.start(SC, learner, _never, policy_epoch=0)
    n = 2 * DESCRIBE_EVERY + 1
    agents = [c.agent for c in _connect(run, n)]
    shown = [i for i, a in enumerate(agents) if a is not None]
    assert shown == [0, DESCRIBE_EVERY, 2 * DESCRIBE_EVERY]
    assert learner.described == 3  # asked only when it goes into the event
    assert agents[DESCRIBE_EVERY] == {"choice": None, "decisions": DESCRIBE_EVERY + 1,
                                      "weights": {"fn": 1.0}}
    # a swap: the new learner's first decision shows its state at once
    after = run.swapped(SC, FakeLearner())
    assert _connect(after, 1)[0].agent is not None
    # a policy with no describe(): never
    plain = RunningPolicy.start(SC, make_policy(PolicySpec(name="prioritized")), _never, 0)
    assert {c.agent for c in _connect(plain, 3)} == {None}


def test_a_swap_starts_the_next_policy_epoch_with_the_new_policys_kind() -> None:
    run = RunningPolicy.start(SC, make_policy(PolicySpec(name="prioritized")), _never, 3)
    assert (run.per_request, run.router, run.reports.policy_epoch) == (False, None, 3)
    heard: list[str] = []
    run = RunningPolicy.start(SC, make_policy(PolicySpec(name="prioritized")),
                              lambda call, line: heard.append(call), 3)
    nxt = run.swapped(SC, FakeLearner())
    assert (nxt.per_request, nxt.reports.policy_epoch, nxt.reports.policy) == (
        True, 4, "fake_learner")
    assert nxt.policy.on_failure is run.policy.on_failure  # failures still reach the log
    assert (nxt.reports.written, nxt.reports.decisions) == (0, 0)


def test_select_groups_are_sent_where_the_routes_changed_them() -> None:
    run = RunningPolicy.start(SC, make_policy(PolicySpec(name="prioritized")), _never, 0)
    up, down = initial_view(SC, True), initial_view(SC, False)
    first = run.group_changes(up, {}, initial=True)
    assert first == {TaskClass.HP: [("fn", 1000)], TaskClass.LP: [("ofn1", 1000)]}
    assert run.group_changes(up, first, initial=False) == {}  # nothing changed
    assert run.group_changes(up, first, initial=True) == first  # a switch starting: all
    # the OFN leaves: only LP's group moves (to the FN)
    assert run.group_changes(down, first, initial=False) == {TaskClass.LP: [("fn", 1000)]}
    # a per-request policy's groups are its routes: the switches' fallback while the
    # controller is away
    per = run.swapped(SC, FakeLearner())
    assert per.group_changes(up, {}, initial=True) == {
        cls: bucket_weights(routes_for(FakeLearner().routes(up), cls)) for cls in TaskClass}


@pytest.fixture(scope="module")
def seed002a() -> Scenario:
    return load_scenario(ROOT / "scenarios" / "seed002a.yaml")


def test_a_connection_gets_its_own_path_far_switches_first(seed002a: Scenario) -> None:
    built = make_policy(PolicySpec(name="path_fewest_switches"), seed002a.workload)
    run = RunningPolicy.start(seed002a, built, _never, 0)
    assert run.router is not None and run.per_request
    topo = Topology.of(scenario_graph(seed002a))
    view = initial_view(seed002a, True)
    asked: list[float] = []

    def clock() -> float:
        asked.append(1.0)
        return 5.0

    c = run.connection(view, Request(TaskClass.HP, "c1"), 40000, topo, clock, 13)
    assert c.path == ["s1", "s6"]  # the direct link: the fewest switches
    assert asked == [1.0]  # the menu's clock, read once
    # the server's switch first, the client's edge last (just before the SYN's packet-out)
    assert [s for s, _ in c.path_flows] == ["s6", "s6", "s1"]
    assert c.path_flows == path_flows(topo, ("s1", "s6"), "c1", c.node, 40000, 13)[::-1]
    assert c.node in {"srv1", "srv2"} and c.decide_ms >= 0.0
    # a client the topology does not know (an address): no path of its own
    other = run.connection(view, Request(TaskClass.HP, "10.9.9.9"), 40002, topo, clock, 13)
    assert (other.path, other.path_flows) == (None, [])


def test_a_policy_that_does_not_choose_paths_gets_no_router(seed002a: Scenario) -> None:
    assert path_router(seed002a, make_policy(PolicySpec(name="prioritized"))) is None
    router = path_router(seed002a, make_policy(PolicySpec(name="path_shortest",
                                                          params={"k_paths": 2})))
    assert router is not None
    assert {len(opts) for opts in router.options.values()} == {2}


def test_a_retransmitted_syn_goes_where_its_first_went_and_a_reused_port_is_decided_again(
        ) -> None:
    """The same client port with the same initial sequence number is a retransmission;
    with another, a new connection (a client reuses ports within seconds)."""
    from fogsdn.controller.running_policy import DecidedSyns

    syns = DecidedSyns(keep_s=10.0)
    assert syns.retransmitted("10.0.0.101", 40000, 111, t=0.0) is None  # never decided
    syns.decided("10.0.0.101", 40000, 111, "10.0.0.1", t=0.0)
    assert syns.retransmitted("10.0.0.101", 40000, 111, t=1.0) == "10.0.0.1"  # TCP's retry
    assert syns.retransmitted("10.0.0.101", 40000, 999, t=1.5) is None  # port reused
    assert syns.retransmitted("10.0.0.102", 40000, 111, t=1.5) is None  # another client
    syns.decided("10.0.0.101", 40000, 999, "10.0.0.2", t=1.5)  # the reuse's own decision
    assert syns.retransmitted("10.0.0.101", 40000, 999, t=2.0) == "10.0.0.2"
    assert syns.retransmitted("10.0.0.101", 40000, 111, t=2.0) is None
    syns.decided("10.0.0.101", 40002, 5, "10.0.0.1", t=3.0)
    # forgotten after keep_s, oldest first
    assert syns.retransmitted("10.0.0.101", 40000, 999, t=11.6) is None
    assert syns.retransmitted("10.0.0.101", 40002, 5, t=11.6) == "10.0.0.1"
    assert syns.retransmitted("10.0.0.101", 40002, 5, t=13.1) is None
    with pytest.raises(ValueError, match="keep_s"):
        DecidedSyns(keep_s=0.0)
