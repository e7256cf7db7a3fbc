from __future__ import annotations

import random
from collections import Counter

import pytest
from conftest import scenario_dict

from fogsdn.controller.cluster import ClusterState, LinkState
from fogsdn.controller.flow_tables import bucket_weights
from fogsdn.core.scenario import PolicySpec, TaskClass, parse_scenario
from fogsdn.policies import PolicyError, Request, initial_view, make_policy, routes_for

SC = parse_scenario(scenario_dict())


def test_prioritized_sends_hp_to_fn_and_lp_to_ofn_only_while_available() -> None:
    p = make_policy(PolicySpec(name="prioritized"))
    up, down = p.routes(initial_view(SC, True)), p.routes(initial_view(SC, False))
    assert dict(up[TaskClass.HP]) == {"fn": 1.0} and dict(up[TaskClass.LP]) == {"ofn1": 1.0}
    assert dict(down[TaskClass.HP]) == {"fn": 1.0} and dict(down[TaskClass.LP]) == {"fn": 1.0}


def test_nodiff_splits_alpha_beta_while_available() -> None:
    p = make_policy(PolicySpec(name="nodiff", alpha=0.7))
    up = p.routes(initial_view(SC, True))
    for cls in TaskClass:
        assert up[cls]["fn"] == pytest.approx(0.7) and up[cls]["ofn1"] == pytest.approx(0.3)
    assert dict(p.routes(initial_view(SC, False))[TaskClass.LP]) == {"fn": 1.0}
    rng = random.Random(1)
    picks = Counter(p.decide(initial_view(SC, True), Request(TaskClass.HP, "c1"), rng)
                    for _ in range(4000))
    assert abs(picks["fn"] / 4000 - 0.7) < 0.03


def test_basic_never_uses_the_ofn() -> None:
    p = make_policy(PolicySpec(name="basic"))
    for avail in (True, False):
        r = p.routes(initial_view(SC, avail))
        assert all(set(r[c]) == {"fn"} for c in TaskClass)


def test_unknown_policy_and_empty_route() -> None:
    with pytest.raises(PolicyError, match="policy.name: unknown policy 'nope'"):
        make_policy(PolicySpec(name="nope"))
    with pytest.raises(PolicyError):
        routes_for({TaskClass.HP: {"fn": 0.0}}, TaskClass.HP)


def test_bucket_weights_are_integer_and_proportional() -> None:
    assert bucket_weights({"fn": 0.75, "ofn1": 0.25}) == [("fn", 750), ("ofn1", 250)]
    assert bucket_weights({"fn": 1.0, "ofn1": 0.0}) == [("fn", 1000)]
    assert bucket_weights({}) == []


def test_link_state_fails_a_link_while_either_end_is_down_and_reports_transitions() -> None:
    links = LinkState()
    ends = {"s1": 2, "s2": 3}
    assert links.report("L1", ends, "s1", 2, down=True) is False  # failed
    assert links.report("L1", ends, "s1", 2, down=True) is None  # PortStatus repeats
    assert links.report("L1", ends, "s2", 3, down=True) is None  # the other end too
    assert links.report("L1", ends, "s1", 2, down=False) is None  # s2's end is still down
    assert links.failed == {"L1"}
    assert links.report("L1", ends, "s2", 3, down=False) is True  # both up: the link is up
    assert links.failed == set() and links.ports_down == set()
    assert links.report("L2", {"s1": 4, "s3": 1}, "s3", 1, down=False) is None  # up already


def test_cluster_state_acts_on_transitions_only() -> None:
    cs = ClusterState.from_scenario(SC, {"ofn1": True})
    assert cs.set_available("ofn1", True) is False  # a repeated PortStatus
    assert cs.set_available("ofn1", False) is True
    assert cs.set_available("ofn1", False) is False
    assert cs.set_available("fn", False) is False  # the static FN does not churn
    assert cs.set_available("ghost", False) is False
    assert cs.view().node("ofn1").available is False
