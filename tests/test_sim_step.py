"""Stepping the simulator: any cut of a run into steps gives the whole run's rows, the run
waits where a step's limit falls and says where it stands, and a policy changed between
steps routes the rest of the run."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.scenario import Scenario, TaskClass, load_scenario, parse_scenario
from fogsdn.measure.size_compare import bounded_pareto, size_scenario
from fogsdn.policies import ClusterView, Policy, RouteTable
from fogsdn.sim.engine import SimResult, Simulator, simulate
from fogsdn.sim.rows import Row

REQUESTS = 3000


def _default(**over: Any) -> Scenario:
    return load_scenario(ROOT / "scenarios" / "default.yaml").with_overrides(over)


# what a run can be doing when a step ends: churn with each leave mode, class-ordered
# queues, multi-server nodes, a random split, per-request decisions that read the load,
# kills and restarts
CASES: dict[str, Callable[[], Scenario]] = {
    "churn_drain": _default,
    "random_split": lambda: parse_scenario(scenario_dict(  # basic: evenly over the FNs
        duration_ms=1e9, policy={"name": "basic"},
        nodes=[{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 5},
               {"name": "fn2", "role": "fn", "mu": 0.5, "capacity": 5},
               {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10}])),
    "churn_handoff": lambda: _default(**{"churn.leave": "handoff", "churn.eta": 1.0}),
    "churn_drop": lambda: _default(**{"churn.leave": "drop", "churn.eta": 1.0}),
    "preemptive_priority": lambda: load_scenario(
        ROOT / "scenarios" / "seed000_priority_preemptive.yaml"),
    "cloud": lambda: load_scenario(ROOT / "scenarios" / "seed000_cloud.yaml"),
    "reads_load": lambda: load_scenario(ROOT / "scenarios" / "multipath_power.yaml"),
    "tags": lambda: size_scenario("tags", 3, 0.4, bounded_pareto(1.5, 1.0, 100.0),
                                  params={"cutoffs": "2,10"}),
}


@dataclass
class Run:
    rows: list[Row]
    availability: list[tuple[float, str, bool]]
    sink_calls: int = 0

    def sink(self, rows: list[Row]) -> None:
        self.rows.extend(rows)
        self.sink_calls += 1

    def simulator(self, sc: Scenario, **kw: Any) -> Simulator:
        return Simulator(sc, self.sink, requests=REQUESTS,
                         availability=lambda t, n, up: self.availability.append((t, n, up)),
                         **kw)


def same(a: SimResult, b: SimResult) -> bool:
    return replace(a, wall_s=0.0) == replace(b, wall_s=0.0)


def whole(sc: Scenario, **kw: Any) -> tuple[Run, SimResult]:
    run = Run([], [])
    return run, run.simulator(sc, **kw).run()


@pytest.mark.parametrize("case", sorted(CASES))
def test_many_small_steps_give_the_whole_runs_rows(case: str) -> None:
    sc = CASES[case]()
    ref, result = whole(sc)
    run = Run([], [])
    sim = run.simulator(sc)
    # a step of about a third of a mean interarrival time: most steps see no arrival
    dt = 1.0 / (3.0 * (sc.workload.lambda_hp + sc.workload.lambda_lp))
    until, steps, drain_waits, arrivals = 0.0, 0, 0, 0
    while (got := sim.step(until)) is None:
        assert sim.next_arrival_ms >= until  # it waits before the first arrival at or after
        assert sim.arrivals >= arrivals and len(run.rows) <= sim.arrivals
        drain_waits += sim.next_arrival_ms == math.inf
        arrivals = sim.arrivals
        steps += 1
        until += dt
    assert steps > REQUESTS  # it did wait, all along the run
    assert drain_waits > 0  # also while the last requests finished
    assert run.sink_calls > ref.sink_calls  # the rows so far were handed over at each wait
    assert repr(run.rows) == repr(ref.rows)  # the same rows in the same order (NaN included)
    assert run.availability == ref.availability
    assert same(got, result) and got.requests == REQUESTS == len(run.rows)


def test_stepping_by_requests_waits_before_that_arrival() -> None:
    sc = CASES["churn_handoff"]()
    ref, result = whole(sc)
    run = Run([], [])
    sim = run.simulator(sc)
    previous = -1.0
    for n in (0, 1, 7, 500, 2999):
        assert sim.step(requests=n) is None
        assert sim.arrivals == n and previous <= sim.next_arrival_ms < math.inf
        previous = sim.next_arrival_ms
        rows = len(run.rows)
        assert sim.step(until=previous / 2, requests=n) is None  # limits already met: stays
        assert (sim.arrivals, sim.next_arrival_ms, len(run.rows)) == (n, previous, rows)
    # the next arrival's time is the one the whole run's request number 2999 was sent at
    assert previous in {r[6] for r in ref.rows}
    got = sim.step(requests=REQUESTS + 10)
    assert got is not None and same(got, result) and repr(run.rows) == repr(ref.rows)


def test_stepping_past_the_end_is_harmless() -> None:
    sc = CASES["churn_drain"]()
    ref, result = whole(sc)
    run = Run([], [])
    sim = run.simulator(sc)
    got = sim.step(1e15)
    assert got is not None and same(got, result)
    calls = run.sink_calls
    assert sim.step(2e15) is got and sim.run() is got and sim.step(requests=1) is got
    assert run.sink_calls == calls and repr(run.rows) == repr(ref.rows)
    assert sim.arrivals == REQUESTS and sim.next_arrival_ms == math.inf


def test_simulate_is_a_whole_simulator_run() -> None:
    sc = CASES["churn_handoff"]()
    ref, result = whole(sc, flush_rows=7)
    rows: list[Row] = []
    assert same(simulate(sc, rows.extend, requests=REQUESTS, flush_rows=7), result)
    assert repr(rows) == repr(ref.rows)


@dataclass
class _AllTo(Policy):
    """Every request to one node, which a caller may change."""

    name: ClassVar[str] = "all_to"
    node: str = "fn"

    def routes(self, view: ClusterView) -> RouteTable:
        return {TaskClass.HP: {self.node: 1.0}, TaskClass.LP: {self.node: 1.0}}


@pytest.mark.parametrize("told", [True, False])
def test_a_policy_changed_between_steps_routes_the_rest_once_told(told: bool) -> None:
    sc = parse_scenario(scenario_dict(duration_ms=1e9, timeout_ms=1e9,
                                      churn={"eta": 0, "xi": 0}))
    index = {n.name: k for k, n in enumerate(sc.nodes)}
    policy = _AllTo()
    rows: list[Row] = []
    sim = Simulator(sc, rows.extend, requests=400, policy=policy)
    assert sim.step(requests=200) is None
    cut = sim.next_arrival_ms
    policy.node = "ofn1"
    if told:
        sim.policy_changed()
    sim.run()
    before = {r[7] for r in rows if r[6] < cut}
    after = {r[7] for r in rows if r[6] >= cut}
    assert before == {index["fn"]}
    # the routes asked once per availability state are kept until the caller says
    assert after == ({index["ofn1"]} if told else {index["fn"]})
