"""The network's share of a request in the simulator and the model (no root)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.latency import FRAME_BYTES, ROUND_TRIPS, PathTiming, request_network
from fogsdn.core.scenario import load_scenario, parse_scenario
from fogsdn.exact.network import network_share
from fogsdn.sim.engine import simulate
from fogsdn.sim.output import TraceCsvSink


def _trace(sc: Any, tmp: Path, network: bool = True, requests: int = 4000) -> list[dict[str, str]]:
    path = tmp / "trace.csv"
    with TraceCsvSink(path, sc, None, request_network(sc) if network else None, seed=5) as sink:
        simulate(sc, sink, requests=requests)
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _ok_network_ms(rows: list[dict[str, str]]) -> np.ndarray:
    ok = [r for r in rows if r["outcome"] == "ok"]
    return np.array([float(r["response_ms"]) - float(r["node_ms"]) for r in ok])


def test_default_delay_adds_two_round_trips_exactly(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "default_delay.yaml")
    extra = _ok_network_ms(_trace(sc, tmp_path))
    assert len(extra) > 1000
    assert extra == pytest.approx(2 * ROUND_TRIPS * 2 * 2.0)  # 2 links of 2 ms, 2 RTTs
    assert network_share(sc).fixed_ms == pytest.approx(16.0)


def test_no_topology_means_no_network_and_the_same_trace(tmp_path: Path) -> None:
    sc = load_scenario(ROOT / "scenarios" / "default.yaml")
    with_net, without = tmp_path / "a", tmp_path / "b"
    with_net.mkdir()
    without.mkdir()
    _trace(sc, with_net, network=True)
    _trace(sc, without, network=False)
    assert (with_net / "trace.csv").read_bytes() == (without / "trace.csv").read_bytes()
    assert network_share(sc).fixed_ms == 0.0


def test_node_sojourn_does_not_depend_on_the_network(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    plain = _trace(parse_scenario(scenario_dict()), tmp_path / "x")
    slow = parse_scenario(scenario_dict(topology={"kind": "line", "length": 3,
                                                  "link": {"delay_ms": 1.5}}))
    (tmp_path / "y").mkdir()
    delayed = _trace(slow, tmp_path / "y")
    assert [r["node_ms"] for r in plain] == [r["node_ms"] for r in delayed]
    assert _ok_network_ms(delayed) == pytest.approx(2 * ROUND_TRIPS * 4 * 1.5)


def test_jitter_spreads_but_keeps_the_mean(tmp_path: Path) -> None:
    sc = parse_scenario(scenario_dict(topology={"link": {"delay_ms": 2.0, "jitter_ms": 1.0}}))
    extra = _ok_network_ms(_trace(sc, tmp_path, requests=20000))
    assert extra.std() > 0.5
    assert extra.mean() == pytest.approx(16.0, abs=0.05)
    assert extra.min() >= 8.0 - 1e-9  # every link at least delay - jitter


def test_loss_costs_retransmission_timeouts(tmp_path: Path) -> None:
    sc = parse_scenario(scenario_dict(time_scale=10, timeout_ms=1000,
                                      topology={"link": {"delay_ms": 1.0, "loss": 0.02}}))
    extra = _ok_network_ms(_trace(sc, tmp_path, requests=20000))
    slow = extra > 8.0 + 1e-6
    p_traversal = 1 - 0.98 ** 2
    expected = 1 - (1 - p_traversal) ** len(FRAME_BYTES)
    assert slow.mean() == pytest.approx(expected, rel=0.15)
    # a lost SYN waits 1 s real = 100 model ms at time scale 10
    assert np.any(np.isclose(extra, 8.0 + 100.0))
    share = network_share(sc)
    assert share.fixed_ms is None and "loss" in share.why


def test_a_response_past_the_timeout_is_a_timeout(tmp_path: Path) -> None:
    sc = parse_scenario(scenario_dict(timeout_ms=20, topology={"link": {"delay_ms": 3.0}}))
    rows = _trace(sc, tmp_path, requests=500)
    assert {r["outcome"] for r in rows} <= {"timeout", "blocked"}
    assert any("network" in r["error"] for r in rows)


def test_transmission_at_the_link_rate() -> None:
    p = PathTiming(delay_ms=(0.0,), jitter_ms=(0.0,), loss=(0.0,), bw_mbps=(1.0,))
    # 1 Mbit/s = 1000 bit per model ms
    assert p.fixed_ms() == pytest.approx(sum(b * 8 / 1000 for b in FRAME_BYTES))


def test_model_gives_no_number_where_it_does_not_apply() -> None:
    far = parse_scenario(scenario_dict(topology={
        "kind": "graph", "switches": ["s1", "s2"],
        "links": [{"a": "s1", "b": "s2", "delay_ms": 5}],
        "hosts": {"fn": "s1", "ofn1": "s2", "c1": "s1", "c2": "s1"}}))
    share = network_share(far)
    assert share.fixed_ms is None and "different network distances" in share.why
    busy = parse_scenario(scenario_dict(topology={"link": {"bw_mbps": 0.005}}))
    assert "busy" in network_share(busy).why
    fine = parse_scenario(scenario_dict(topology={"link": {"delay_ms": 1, "jitter_ms": 0.5,
                                                           "bw_mbps": 100}}))
    got = network_share(fine).fixed_ms
    assert got is not None and got > 8.0
