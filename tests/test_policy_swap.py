"""A live policy swap's pure part (fogsdn.controller.policy_swap): the request made a spec, the
spec built and checked, and the OpenFlow entries a change of dispatch kind touches."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import scenario_dict
from user_policies import HP_AWAY

from fogsdn.controller.pipeline import Topology, base_flows, edge_switches
from fogsdn.controller.policy_swap import (
    SwapError,
    build_swap,
    checked_swap,
    dispatch_changes,
    flow_changes,
    live_stages,
    swap_spec,
)
from fogsdn.core.routing import next_hops
from fogsdn.core.scenario import PolicySpec, parse_scenario, scenario_graph

BROKEN_ROUTES = '''
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, RouteTable
from fogsdn.core.scenario import TaskClass


@dataclass
class NoLp(Policy):
    name: ClassVar[str] = "no_lp"

    def routes(self, view: ClusterView) -> RouteTable:
        return {TaskClass.HP: {"fn": 1.0}}
'''


NO_CUTOFFS = '''
from dataclasses import dataclass
from typing import ClassVar

from fogsdn.policies.base import ClusterView, Policy, RouteTable
from fogsdn.core.scenario import TaskClass
from fogsdn.core.stages import StagePlan


@dataclass
class NoCutoffs(Policy):
    name: ClassVar[str] = "no_cutoffs"

    def routes(self, view: ClusterView) -> RouteTable:
        return {TaskClass.HP: {"fn": 1.0}, TaskClass.LP: {"fn": 1.0}}

    def stages(self, view: ClusterView) -> StagePlan:
        raise ValueError("no cutoffs here")
'''


def _sc(**over: object):  # noqa: ANN202 (a Scenario)
    return parse_scenario(scenario_dict(**over))


def test_spec_by_name_keeps_alpha_and_merges_params() -> None:
    cur = PolicySpec(name="prioritized", alpha=0.3, params={"k": 1})
    spec = swap_spec(cur, {"name": "nodiff", "params": {"j": 2.5}}, Path("/"))
    assert (spec.name, spec.alpha, spec.module) == ("nodiff", 0.3, None)
    assert spec.params == {"k": 1, "j": 2.5}


def test_spec_module_made_absolute(tmp_path: Path) -> None:
    spec = swap_spec(PolicySpec(), {"module": "mine.py"}, tmp_path)
    assert spec.module == str(tmp_path / "mine.py") and spec.name == ""


@pytest.mark.parametrize("request_, where", [
    ({}, "name or module"),
    ({"name": ""}, "name"),
    ({"name": 3}, "name"),
    ({"name": "nodiff", "colour": "red"}, "unknown field 'colour'"),
    ({"name": "nodiff", "params": [1]}, "params"),
    ({"name": "nodiff", "params": {"x": [1]}}, "params.x"),
    ({"name": "nodiff", "params": {"x": float("nan")}}, "params.x"),
    ({"name": "nodiff", "alpha": 2}, "alpha"),
])
def test_bad_requests_are_one_line_errors(request_: dict, where: str) -> None:
    with pytest.raises(SwapError) as err:
        swap_spec(PolicySpec(), request_, Path("/"))
    assert where in str(err.value) and "\n" not in str(err.value)


def test_build_swap_names_the_policy_and_changes_only_the_policy() -> None:
    sc = _sc()
    new_sc, built = build_swap(sc, PolicySpec(name="nodiff", alpha=0.7))
    assert built.name == "nodiff" and new_sc.policy.name == "nodiff"
    assert new_sc.policy.alpha == 0.7
    assert new_sc.nodes == sc.nodes and new_sc.workload == sc.workload
    assert sc.policy.name == "prioritized"  # the running scenario is untouched


def test_user_file_swap(tmp_path: Path) -> None:
    f = tmp_path / "away.py"
    f.write_text(HP_AWAY)
    new_sc, built = checked_swap(_sc(), swap_spec(PolicySpec(), {"module": str(f)}, tmp_path))
    assert built.name == "hp_away" and new_sc.policy.module == str(f)


def test_unknown_policy_refused() -> None:
    with pytest.raises(SwapError, match="unknown policy 'nope'"):
        build_swap(_sc(), PolicySpec(name="nope"))


def test_policy_failing_the_probe_refused(tmp_path: Path) -> None:
    f = tmp_path / "nolp.py"
    f.write_text(BROKEN_ROUTES)
    with pytest.raises(SwapError, match="no weights for class lp"):
        checked_swap(_sc(), PolicySpec(name="", module=str(f)))


def test_size_based_stages_not_swappable() -> None:
    # SITA-E sets up stage rules with the workers: swapping to it live is refused
    sc = _sc(workload={"size": {"distribution": "bounded_pareto", "shape": 1.5,
                                "low": 0.5, "high": 50.0}},
             nodes=[{"name": "h1", "role": "fn", "mu": 1.0, "capacity": 20},
                    {"name": "h2", "role": "fn", "mu": 1.0, "capacity": 20}],
             churn={"eta": 0.0, "xi": 0.0})
    with pytest.raises(SwapError, match="stages"):
        build_swap(sc, PolicySpec(name="sita_e"))


def _dispatch(proactive: bool) -> list:
    sc = _sc()
    g = scenario_graph(sc)
    topo = Topology.of(g)
    sw = edge_switches(topo)[0]
    return base_flows(topo, sw, next_hops(g), proactive, 16)


def test_flow_changes_between_dispatch_kinds() -> None:
    pro, per = _dispatch(True), _dispatch(False)
    gone, send = flow_changes(pro, per)
    assert gone and send  # the group rules go, the to-controller rule comes
    assert all(f.entry not in {x.entry for x in per} for f in gone)
    sent = {f.entry for f in send}
    # applying the change gives exactly the per-request pipeline
    after = {f.entry: f for f in pro if f.entry not in {g.entry for g in gone}}
    after.update({f.entry: f for f in send})
    assert after == {f.entry: f for f in per}
    assert sent <= {f.entry for f in per}
    assert flow_changes(pro, pro) == ([], [])


def test_dispatch_changes_at_an_edge_switch_only_where_the_kind_changes() -> None:
    sc = _sc()
    g = scenario_graph(sc)
    topo = Topology.of(g)
    sw, hops = edge_switches(topo)[0], next_hops(g)
    pro, per = _dispatch(True), _dispatch(False)
    assert dispatch_changes(topo, sw, hops, True, False, 16) == flow_changes(pro, per)
    assert dispatch_changes(topo, sw, hops, False, True, 16) == flow_changes(per, pro)
    for kind in (True, False):
        assert dispatch_changes(topo, sw, hops, kind, kind, 16) == ([], [])


def test_live_stages_none_with_the_reason_where_the_policy_cannot_say(tmp_path: Path) -> None:
    plan, why = live_stages(_sc())  # prioritized: no stages, nothing wrong
    assert (plan.kind, why) == ("none", None)
    f = tmp_path / "no_cutoffs.py"
    f.write_text(NO_CUTOFFS)
    plan, why = live_stages(_sc(policy={"name": "", "module": str(f)}))
    assert plan.kind == "none" and why is not None and "no cutoffs here" in why
    sized = _sc(workload={"size": {"distribution": "bounded_pareto", "shape": 1.5,
                                   "low": 0.5, "high": 50.0}},
                nodes=[{"name": "h1", "role": "fn", "mu": 1.0, "capacity": 20},
                       {"name": "h2", "role": "fn", "mu": 1.0, "capacity": 20}],
                churn={"eta": 0.0, "xi": 0.0}, policy={"name": "sita_e"})
    plan, why = live_stages(sized)
    assert (plan.kind, plan.hosts, why) == ("sita", ("h1", "h2"), None)


def test_restarted_controller_runs_the_swapped_policy() -> None:
    from fogsdn.controller.policy_swap import restarted_scenario

    sc = _sc()
    assert restarted_scenario(sc, None) is sc
    spec = PolicySpec(name="nodiff", alpha=0.2).model_dump_json(exclude_none=True)
    again = restarted_scenario(sc, spec)
    assert again.policy.name == "nodiff" and again.policy.alpha == 0.2
    with pytest.raises(SwapError, match="not restored"):
        restarted_scenario(sc, '{"name": "nodi')
