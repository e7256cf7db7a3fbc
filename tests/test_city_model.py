"""Seed 003's latency model (eqs. 7-12) and the city layout, mobility and traces."""

from __future__ import annotations

import math
import random

import pytest

from fogsdn.city.geo_latency import (
    LatencyModelError,
    LatencyParams,
    bandwidth_gbps,
    latency_ms,
    load_ms,
    path_km,
    queueing_ms,
    static_ms,
    transmission_ms,
)
from fogsdn.city.layout import (
    LayoutError,
    WaypointParams,
    advance,
    make_city,
    parse_trace,
    split_slots,
    start_walker,
)

P = LatencyParams()


def test_bandwidth_falls_linearly_to_the_sla_floor() -> None:
    assert bandwidth_gbps(0, 10, P) == 1.0
    assert bandwidth_gbps(5, 10, P) == pytest.approx(1 - 0.95 * 0.5)
    assert bandwidth_gbps(10, 10, P) == pytest.approx(0.05)
    assert bandwidth_gbps(30, 10, P) == pytest.approx(0.05)  # over capacity: the floor


def test_transmission_and_queueing_terms() -> None:
    assert transmission_ms(1.0, P) == pytest.approx(0.080)
    assert transmission_ms(0.05, P) == pytest.approx(0.0876)
    assert queueing_ms(1.0, P) == pytest.approx(0.5)
    assert queueing_ms(0.05, P) == P.qos_max_ms  # 1/(2*0.05) = 10 ms, capped by E_qos
    assert load_ms(10, 10, P) - load_ms(0, 10, P) == pytest.approx(4.5 + 0.0076)


def test_propagation_with_and_without_backhaul() -> None:
    towers = [(0.0, 0.0), (1000.0, 0.0)]
    client, node = (0.0, 100.0), (1000.0, 0.0)
    assert path_km(client, node, towers, P) == pytest.approx(0.1 + 0.0 + 1.0)
    literal = LatencyParams(backhaul=False)
    assert path_km(client, node, towers, literal) == pytest.approx(0.1)
    expected = 1.1 * P.propagation_ms_per_km + P.hardware_factor * P.delay_factor_ms \
        + P.network_error_ms
    assert static_ms(client, node, towers, P) == pytest.approx(expected)
    assert latency_ms(client, node, 0, 4, towers, P) == pytest.approx(expected + 0.58)


def test_latency_model_rejects_bad_parameters() -> None:
    with pytest.raises(LatencyModelError, match="sla_gbps"):
        LatencyParams(sla_gbps=2.0)
    with pytest.raises(LatencyModelError, match="slots"):
        bandwidth_gbps(1, 0, P)
    with pytest.raises(LatencyModelError, match="towers"):
        path_km((0, 0), (1, 1), [], P)


def test_city_at_the_seed_scale() -> None:
    city = make_city(random.Random(1))
    assert len(city.fog_nodes) == 29 and city.total_slots == 318
    assert city.side_m == pytest.approx(1500.0)
    assert all(n.slots >= 1 for n in city.fog_nodes)
    at_tower = sum(n.position in city.towers for n in city.fog_nodes)
    assert 5 <= at_tower <= 24
    assert make_city(random.Random(1)) == city  # seeded


def test_split_slots() -> None:
    parts = split_slots(10, 4, random.Random(2))
    assert sum(parts) == 10 and len(parts) == 4 and min(parts) >= 1
    with pytest.raises(LayoutError, match="slots"):
        split_slots(3, 4, random.Random(2))


def test_random_waypoint_stays_inside_and_moves_at_its_speed() -> None:
    p = WaypointParams(side_m=1500.0, speed_mps=(2.0, 2.0), pause_s=(0.0, 0.0))
    rng = random.Random(3)
    w = start_walker((750.0, 750.0), p, rng)
    for _ in range(500):
        before = w.position
        w = advance(w, 0.5, p, rng)
        assert 0 <= w.position[0] <= 1500 and 0 <= w.position[1] <= 1500
        assert math.dist(before, w.position) <= 1.0 + 1e-9  # 2 m/s for 0.5 s, at most


def test_random_waypoint_pauses() -> None:
    p = WaypointParams(side_m=100.0, speed_mps=(50.0, 50.0), pause_s=(5.0, 5.0))
    rng = random.Random(4)
    w = advance(start_walker((50.0, 50.0), p, rng), 3.0, p, rng)  # reached, now resting
    assert w.pause_left_s > 0
    assert advance(w, 1.0, p, rng).position == w.position


def test_trace_replay_interpolates() -> None:
    trace = parse_trace(["t_s,client,x_m,y_m", "0,c0,0,0", "10,c0,100,50", "# note", "",
                         "5,c1,7,7"], side_m=1500)
    assert trace.clients() == ["c0", "c1"]
    assert trace.at("c0", -1) == (0.0, 0.0)
    assert trace.at("c0", 5) == (50.0, 25.0)
    assert trace.at("c0", 99) == (100.0, 50.0)
    assert trace.at("c1", 0) == (7.0, 7.0)


@pytest.mark.parametrize("lines, why", [
    (["t,client,x,y"], "line 1: header"),
    (["t_s,client,x_m,y_m", "0,c0,1"], "line 2: expected 4 fields"),
    (["t_s,client,x_m,y_m", "0,c0,a,1"], "line 2: t_s, x_m and y_m must be numbers"),
    (["t_s,client,x_m,y_m", "0,c0,1,1", "0,c0,2,2"], "line 3: second fix"),
    (["t_s,client,x_m,y_m", "0,c0,9999,1"], "line 2: position outside"),
    (["t_s,client,x_m,y_m"], "no fixes"),
])
def test_trace_errors_name_the_line(lines: list[str], why: str) -> None:
    with pytest.raises(LayoutError, match=why):
        parse_trace(lines, side_m=1500)
