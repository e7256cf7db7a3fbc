"""Paths as the action (seed 002a): candidates, wake costs, the path policies, the
per-connection rules and the simulator's timing and pricing of the chosen path."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
from conftest import ROOT
from fake_flow_table import FakeNetwork, decided_connection

from fogsdn.controller.path_choice import PathRouter, candidate_paths
from fogsdn.controller.pipeline import (
    ETH_IPV4,
    Topology,
    base_flows,
    failover_groups,
    path_flows,
)
from fogsdn.controller.policy_guard import GuardedPolicy
from fogsdn.core.routing import k_shortest_paths, next_hops
from fogsdn.core.scenario import Scenario, TaskClass, load_scenario, scenario_graph
from fogsdn.models.network_power import PathMenu, PathOption
from fogsdn.policies import ClusterView, PolicySpec, Request, make_policy, node_view
from fogsdn.policies.base import Epoch, Policy, RouteTable
from fogsdn.sim.runner import run_simulation

SCENARIO = ROOT / "scenarios" / "seed002a.yaml"


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(SCENARIO)


def _view(scenario: Scenario) -> ClusterView:
    return ClusterView(tuple(node_view(n, True, in_system=0) for n in scenario.nodes))


def test_three_candidates_shortest_first_with_two_round_trips_of_delay(scenario: Scenario) -> None:
    g = scenario_graph(scenario)
    assert [p[1:-1] for p in k_shortest_paths(g, "c1", "srv1", 3)] == [
        ["s1", "s3", "s6"], ["s1", "s5", "s6"], ["s1", "s6"]]
    opts = candidate_paths(g, "c3", "srv2", 3)
    assert [o.switches for o in opts] == [("s2", "s4", "s6"), ("s2", "s5", "s6"), ("s2", "s6")]
    # 2 round trips = 4 traversals of the one-way delay (hand-summed from the yaml)
    assert [o.delay_ms for o in opts] == pytest.approx([4 * 0.02, 4 * 0.025, 4 * 0.04])
    assert opts[2].hops == (("s2", "c3", "s6"), ("s6", "s2", "srv2"))


def test_wake_cost_is_what_sleeps_and_shrinks_with_recent_use(scenario: Scenario) -> None:
    router = PathRouter.of(scenario)
    sp = scenario.switch_power
    menu = router.menu("c1", "srv1", 0.0)
    assert menu.network_w == pytest.approx(6 * sp.sleep_w)  # every switch asleep
    # the direct path wakes s1 (5 ports) and s6 (7 ports) and two ports on each
    chassis = (sp.idle_w + 5 * sp.port_idle_w - sp.sleep_w) + (sp.idle_w + 7 * sp.port_idle_w
                                                               - sp.sleep_w)
    assert menu.options[2].wake_w == pytest.approx(chassis + 4 * (sp.port_w - sp.port_idle_w))
    router.choose(lambda m: 2, "c1", "srv1", 0.0)
    hold_ms = sp.port_hold_s * 1000.0 / scenario.time_scale
    assert router.menu("c1", "srv1", 0.0).options[2].wake_w == pytest.approx(0.0)
    assert router.menu("c1", "srv1", hold_ms / 2).options[2].wake_w == pytest.approx(
        menu.options[2].wake_w / 2)
    # s1 and s6 awake (2 ports each), the rest asleep
    awake = 2 * (sp.idle_w + 2 * sp.port_w) + sp.port_idle_w * (3 + 5) + 4 * sp.sleep_w
    assert router.menu("c1", "srv1", 1.0).network_w == pytest.approx(awake)
    with pytest.raises(ValueError, match="choose_path"):
        router.choose(lambda m: 3, "c1", "srv1", 0.0)


def _menu(*wake_delay: tuple[float, float, int]) -> PathMenu:
    return PathMenu(tuple(PathOption(tuple(f"s{i}" for i in range(n)), (), d, w)
                          for w, d, n in wake_delay), 100.0)


@pytest.mark.parametrize(("name", "params", "expected"), [
    ("path_shortest", {}, 0),
    ("path_rank", {"rank": 1}, 1),
    ("path_rank", {"rank": 5}, 2),  # the last there is
    ("path_fewest_switches", {}, 2),  # least wake cost, then fewer switches
    ("path_goal", {"rt_weight": 1.0}, 0),  # response time only
    ("path_goal", {"rt_weight": 0.0}, 1),  # power only: least wake (ties to the first)
    # a = 0.5: 0.5 (1 + 0.5) + 0.5 (100 + 0) / 100 = 1.25 against 1 + 0.5 * 0.3 = 1.15
    ("path_goal", {"rt_weight": 0.5}, 0),
])
def test_each_path_policy_picks_by_its_rule(scenario: Scenario, name: str,
                                            params: dict[str, float], expected: int) -> None:
    policy = make_policy(PolicySpec(name=name, params=params))
    assert policy.chooses_paths
    # sojourn 1 ms at an empty node (mu 1); options: (wake W, delay ms, switches)
    menu = _menu((30.0, 1.0, 3), (0.0, 2.5, 3), (0.0, 2.5, 2))
    view = _view(scenario)
    assert policy.choose_path(view, Request(TaskClass.HP, "c1"), "srv1", menu) == expected


def test_a_failing_choice_falls_back_to_the_shortest(scenario: Scenario) -> None:
    class Broken(Policy):
        name = "broken"
        chooses_paths = True

        def routes(self, view: ClusterView) -> RouteTable:
            return {}

        def choose_path(self, view: ClusterView, request: Request, node: str,
                        menu: PathMenu) -> int:
            return 7

    heard: list[str] = []
    guard = GuardedPolicy(Broken(), random.Random(0), lambda call, line: heard.append(call))
    menu = _menu((0.0, 1.0, 3), (0.0, 2.0, 2))
    assert guard.choose_path(_view(scenario), Request(TaskClass.HP, "c1"), "srv1", menu) == 0
    assert heard == ["choose_path"]


def test_a_connections_own_path_both_ways_and_others_keep_the_shortest(
        scenario: Scenario) -> None:
    g = scenario_graph(scenario)
    topo = Topology.of(g)
    hops = next_hops(g)
    net = FakeNetwork(g, {s: base_flows(topo, s, hops, False) for s in topo.switches()},
                      {s: failover_groups(topo, s, hops, add=True) for s in topo.switches()})
    c1, srv1 = g.nodes["c1"], g.nodes["srv1"]
    # the controller's decision for two connections: NAT to srv1 at the edge; the
    # first also gets the direct path s1-s6
    for port in (40000, 40002):
        net.install("s1", [decided_connection(c1["ip"], port, topo.vip, topo.service_port,
                                              srv1["ip"])])
    rules = path_flows(topo, ("s1", "s6"), "c1", "srv1", 40000, idle_s=13)
    assert {s for s, _ in rules} == {"s1", "s6"}
    assert all(f.idle_timeout == 13 for _, f in rules)
    for switch, f in rules:
        net.install(switch, [f])

    def syn(port: int) -> dict[str, object]:
        return {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_src": c1["ip"], "tcp_src": port,
                "ipv4_dst": topo.vip, "tcp_dst": topo.service_port, "eth_src": c1["mac"]}

    def reply(port: int) -> dict[str, object]:
        return {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_src": srv1["ip"],
                "tcp_src": topo.service_port, "ipv4_dst": c1["ip"], "tcp_dst": port}

    chosen = net.send("c1", syn(40000))
    assert (chosen.host, chosen.switches) == ("srv1", ["s1", "s6"])
    back = net.send("srv1", reply(40000))
    assert (back.host, back.switches, back.packet["ipv4_src"]) == ("c1", ["s6", "s1"], topo.vip)
    other = net.send("c1", syn(40002))
    assert (other.host, other.switches) == ("srv1", ["s1", "s3", "s6"])
    assert net.send("srv1", reply(40002)).switches == ["s6", "s3", "s1"]


def _run(scenario: Scenario, name: str, tmp: Path
         ) -> tuple[list[dict[str, str]], dict[str, float]]:
    sc = scenario.model_copy(update={"policy": PolicySpec(name=name)})
    summary = run_simulation(sc, tmp / name, requests=3000, compare=False)
    with open(tmp / name / "trace.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["outcome"] == "ok"]
    return rows, summary["power"]["switches"]


def test_the_simulator_times_and_prices_the_chosen_path(scenario: Scenario,
                                                      tmp_path: Path) -> None:
    short_rows, short_w = _run(scenario, "path_shortest", tmp_path)
    greedy_rows, greedy_w = _run(scenario, "path_fewest_switches", tmp_path)
    # the same arrivals and node choices (least loaded): only the network's share differs,
    # the path's two round trips: 0.08 ms on the shortest, 0.16 on the direct link
    assert [r["node_ms"] for r in short_rows] == [r["node_ms"] for r in greedy_rows]
    for rows, net in ((short_rows, 0.08), (greedy_rows, 0.16)):
        gaps = {round(float(r["response_ms"]) - float(r["node_ms"]), 5) for r in rows}
        assert gaps == {net}
    sleep = scenario.switch_power.sleep_w
    # shortest keeps the own aggregation switches awake and lets s5 sleep; the direct
    # links let all three sleep
    assert short_w["s5"] == pytest.approx(sleep) and short_w["s3"] > 40.0
    assert greedy_w["s3"] == greedy_w["s4"] == greedy_w["s5"] == pytest.approx(sleep)
    assert greedy_w["s1"] == pytest.approx(short_w["s1"])


def test_the_rnn_learns_online_and_keeps_a_curve(scenario: Scenario, tmp_path: Path) -> None:
    sc = scenario.model_copy(update={"policy": PolicySpec(
        name="path_rnn", params={"epoch_requests": 100})})
    run_simulation(sc, tmp_path, requests=3000, compare=False)
    with open(tmp_path / "learning_curve.csv") as fh:
        rows = list(csv.DictReader(fh))
    # one learner, one policy epoch: the live controller's columns (learner_reports)
    assert {(r["policy_epoch"], r["policy"]) for r in rows} == {("0", "path_rnn")}
    curve = [Epoch(int(r["decisions"]), r["action"], float(r["response_ms"]),
                   float(r["network_w"]), float(r["goal"])) for r in rows]
    # an epoch closes at the first connection after every 100th: 100, 200, ..., 2900
    assert [e.decisions for e in curve] == list(range(100, 3000, 100))
    assert curve[0].goal == pytest.approx(1.0)  # the first epoch is the reference
    assert all(e.goal > 0 and e.network_w > 0 and e.response_ms > 0 for e in curve)
    assert len({e.action for e in curve}) > 1  # it tried more than one weighting


def test_live_times_every_connection_for_a_learner_that_reads_the_measurement(
        scenario: Scenario) -> None:
    """The simulator measures every request; live, the controller times one connection in
    16 unless the policy learns from the figure, which then gets every one (or none, when
    the user turned timing off)."""
    from fogsdn.live.queueing_run import LiveOptions, timing_for

    def timed(policy: str, one_in: int) -> int:
        sc = scenario.with_overrides({"policy.name": policy})
        return timing_for(sc, LiveOptions(measure_rt=one_in)).measure_rt

    assert timed("path_rnn", 16) == 1 and timed("path_rnn", 0) == 0
    assert timed("path_shortest", 16) == 16 and timed("path_goal", 4) == 4
