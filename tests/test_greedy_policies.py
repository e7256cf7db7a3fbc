"""Issue 9's greedy baselines: each picks by its own measure, skips full and absent nodes,
and runs unchanged in the simulator."""

from __future__ import annotations

import random
import statistics
from collections import Counter
from typing import Any

import pytest
from conftest import merged, scenario_dict

from fogsdn.core.scenario import PolicySpec, Role, TaskClass, parse_scenario
from fogsdn.policies import (
    ClusterView,
    NodeView,
    PolicyError,
    Request,
    initial_view,
    is_per_request,
    make_policy,
)
from fogsdn.sim.engine import simulate
from fogsdn.sim.rows import OK

RNG = random.Random(0)
HP = Request(TaskClass.HP, "c1")


def decide(name: str, *nodes: NodeView) -> str:
    policy = make_policy(PolicySpec(name=name))
    view = ClusterView(nodes)
    chosen = policy.decide(view, HP, RNG)
    assert policy.routes(view)[TaskClass.LP] == {chosen: 1.0}  # routes agree with decide
    return chosen


def node(name: str, mu: float, held: int | None = 0, capacity: int = 10, **kw: Any) -> NodeView:
    return NodeView(name, Role.FN, kw.pop("available", True), capacity, mu, held, **kw)


def test_least_loaded_counts_requests_per_server() -> None:
    assert decide("least_loaded", node("a", 1.0, 3), node("b", 0.1, 2)) == "b"
    multi = node("m", 0.1, 4, capacity=8, multi_server=True)  # 4 held over 8 servers
    assert decide("least_loaded", node("a", 1.0, 1), multi) == "m"


def test_latency_greedy_adds_queue_and_network_time() -> None:
    fast, slow = node("fast", 1.0, 2), node("slow", 0.5, 0)  # 3 ms against 2 ms
    assert decide("latency_greedy", fast, slow) == "slow"
    far = node("slow", 0.5, 0, net_ms=1.5)  # 2 ms + 1.5 ms of network
    assert decide("latency_greedy", fast, far) == "fast"
    cloud = node("cloud", 0.5, 40, capacity=50, multi_server=True)  # no waiting: 2 ms
    assert decide("latency_greedy", node("fast", 1.0, 3), cloud) == "cloud"


def test_power_greedy_concentrates_on_the_lowest_marginal_energy() -> None:
    # dynamic watts per request: a: 100 / 1.0 = 100, b: 20 / 0.5 = 40
    a = node("a", 1.0, 0, power_idle_w=50.0, power_max_w=150.0)
    b = node("b", 0.5, 9, power_idle_w=60.0, power_max_w=80.0)
    assert decide("power_greedy", a, b) == "b"  # however loaded, while it has room
    full_b = node("b", 0.5, 10, power_idle_w=60.0, power_max_w=80.0)
    assert decide("power_greedy", a, full_b) == "a"
    # without power figures every node is the same machine: least service time per server
    assert decide("power_greedy", node("a", 1.0, 5), node("b", 2.0, 5)) == "b"


@pytest.mark.parametrize("name", ["least_loaded", "latency_greedy", "power_greedy"])
def test_absent_and_full_nodes(name: str) -> None:
    best = node("best", 100.0, 0, power_idle_w=0.0, power_max_w=1.0)
    assert decide(name, node("x", 1.0, 0), node("best", 100.0, available=False)) == "x"
    assert decide(name, node("x", 1.0, 5), node("best", 100.0, 10, capacity=10)) == "x"
    assert decide(name, node("x", 1.0, 1), best) == "best"
    # every node full: the best anyway (the engine records the loss)
    assert decide(name, node("x", 1.0, 10), node("best", 100.0, 5, capacity=5)) == "best"
    with pytest.raises(PolicyError, match="no node is available"):
        decide(name, node("x", 1.0, available=False))


def test_unknown_load_counts_as_empty() -> None:
    assert decide("latency_greedy", node("a", 1.0, None), node("b", 0.6, None)) == "a"


SIM: dict[str, Any] = {
    "name": "greedy", "seed": 3, "duration_ms": 1e9, "warmup_ms": 0, "timeout_ms": 1e6,
    "workload": {"clients": 2, "lambda_hp": 0.6, "lambda_lp": 0.6},
    "churn": {"eta": 0, "xi": 0},
    "nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
              {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10},
              {"name": "cloud", "role": "cloud", "mu": 0.5, "capacity": 50, "servers": "multi"}],
}


def run(name: str) -> tuple[float, Counter[int]]:
    sc = parse_scenario(merged(scenario_dict(**SIM), {"policy": {"name": name}}))
    assert initial_view(sc).node("cloud").multi_server
    rows: list[tuple[Any, ...]] = []
    result = simulate(sc, rows.extend, requests=20_000)
    assert result.per_request and is_per_request(make_policy(sc.policy))
    assert len(rows) == 20_000 and all(r[1] == OK for r in rows)
    return statistics.fmean(r[0] - r[6] for r in rows), Counter(r[7] for r in rows)


def test_they_run_unchanged_in_the_simulator() -> None:
    least, least_nodes = run("least_loaded")
    latency, latency_nodes = run("latency_greedy")
    _, power_nodes = run("power_greedy")
    assert latency < least  # its measure is the response time
    assert len(least_nodes) == 3 and 1 not in latency_nodes  # the slow OFN only pays off by load
    assert power_nodes == Counter({2: 20_000})  # the cloud's 50 servers: least energy per request
