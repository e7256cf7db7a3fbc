"""One source of random inputs: live clients and the churn schedule draw exactly what the
simulator draws for the same seed and replication, lazily."""

from __future__ import annotations

import itertools

from conftest import scenario_dict

from fogsdn.core.churn import churn_schedule
from fogsdn.core.scenario import parse_scenario
from fogsdn.core.streams import replication_seed
from fogsdn.core.workload import arrivals, client_arrivals
from fogsdn.sim.engine import simulate
from fogsdn.sim.rows import CLASSES


def test_each_live_client_sends_the_simulated_clients_requests() -> None:
    sc = parse_scenario(scenario_dict(duration_ms=1500, workload={"clients": 3}))
    for rep in (0, 2):
        rows: list[tuple] = []
        simulate(sc, rows.extend, replication=rep)
        simulated = sorted((r[3], r[2], r[6], r[4], r[5]) for r in rows)  # client, seq, t, ...
        live = [(c, seq, a.t_ms, CLASSES.index(a.cls), a.size)
                for c in range(3)
                for seq, a in enumerate(client_arrivals(
                    sc.workload, replication_seed(sc.seed, rep), c, sc.duration_ms))]
        assert len(live) > 1000 and sorted(live) == simulated


def test_the_live_churn_schedule_is_the_simulators() -> None:
    sc = parse_scenario(scenario_dict(duration_ms=3000, nodes=[
        {"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20},
        {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10},
        {"name": "ofn2", "role": "ofn", "mu": 0.5, "capacity": 10}]))
    for rep in (0, 1):
        seen: list[tuple[float, str, bool]] = []

        def record(t: float, node: str, up: bool, into: list = seen) -> None:
            into.append((t, node, up))

        simulate(sc, lambda rows: None, replication=rep, availability=record)
        sim_changes = [(t, n, u) for t, n, u in seen if n != "fn" and t < sc.duration_ms]
        schedule = churn_schedule(sc.churn, ["ofn1", "ofn2"], sc.duration_ms, sc.seed, rep)
        assert len(schedule) > 50
        assert [(tr.t_ms, tr.node, tr.available) for tr in schedule] == sim_changes


def test_arrivals_are_drawn_lazily_whatever_the_rate() -> None:
    sc = parse_scenario(scenario_dict(workload={"lambda_hp": 1e6, "lambda_lp": 1e6}))
    first = list(itertools.islice(arrivals(sc.workload, 1, until_ms=1e12), 10))
    assert len(first) == 10 and first == sorted(first, key=lambda a: a.t_ms)
    # (a schedule built in full would be 2e18 requests: this would never return)
