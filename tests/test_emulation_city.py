"""Seed 003's city live, briefly: probes over the emulated links, coordinates, mobility
and selections (root, Open vSwitch; run under the emulation lock)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.city_live import run_city_live
from topologies.city_net import CityStudy

pytestmark = pytest.mark.emulation


def test_city_runs_live_with_probes_coordinates_and_mobility(tmp_path: Path) -> None:
    study = CityStudy.model_validate({
        "study": "city", "name": "citytest", "fog_nodes": 3, "total_slots": 8,
        "ratios": [0.5], "selectors": ["load_aware", "meridian"], "duration_s": 12,
        "time_scale": 10,
        "mobility": {"kind": "waypoint", "speed_mps": [10, 15], "pause_s": [0, 0]}})
    rows = run_city_live(study, tmp_path, show=False)
    assert [r["selector"] for r in rows] == ["load_aware", "meridian"]
    for row in rows:
        assert row["clients_reporting"] == 4
        assert row["probe_messages"] > 100  # clients' and nodes' probes, both ways
        assert row["delivered"] > 4 * 8  # about one task per client per 0.75 s
        assert 0 <= row["optimal_rate"] <= 1 and row["unique_per_step"] >= 1
        assert row["link_updates"] > 4 * 3  # the clients moved, their links followed
        # measured task RTTs are the configured ones plus the processes' own time
        assert -0.1 < row["rtt_excess_ms"] < 1.0
        point = tmp_path / f"{row['selector']}-0.5"
        fogs = json.loads((point / "fogs.json").read_text())
        assert all(f["counts"]["received"]["probe"] > 0 for f in fogs.values())
        for c in range(1, 5):
            r = json.loads((point / f"c{c}.json").read_text())
            # ours probes the nodes; Meridian's nodes probe the client, which echoes
            probes = r["counts"]["sent"].get("probe", 0) + r["counts"]["sent"].get("m_probe", 0)
            assert probes > 0 and r["selections"] > 0
    # Vivaldi: the client's estimates against the configured RTTs
    assert rows[0]["coord_median_rel_error"] < 0.5
    # Meridian between the daemons: queries answered, one crossed at least one daemon
    # hop, every kind of Meridian message counted where it was sent and received
    meridian = rows[1]
    assert meridian["meridian_queries"] > 4 * 8
    assert meridian["meridian_messages_per_query"] >= 4  # query, probe both ways, result
    assert meridian["meridian_upkeep_messages"] > 0
    fogs = json.loads((tmp_path / "meridian-0.5" / "fogs.json").read_text())
    hops = [h for f in fogs.values() for h in f["meridian_hops"]]
    assert max(hops) >= 1
    sent = {k: sum(f["counts"]["sent"].get(k, 0) for f in fogs.values())
            for k in ("m_query", "m_ask", "m_answer", "m_result", "m_gossip", "m_probe")}
    received = {k: sum(f["counts"]["received"].get(k, 0) for f in fogs.values())
                for k in ("m_query", "m_ask", "m_gossip", "m_probe")}
    assert sent["m_query"] >= 1 and sent["m_ask"] >= 1 and sent["m_gossip"] > 0
    assert received["m_ask"] >= sent["m_ask"] - 2 and received["m_gossip"] > 0
    assert received["m_query"] >= meridian["meridian_queries"]  # the clients' and forwards
    assert received["m_probe"] > 0.9 * sent["m_probe"]  # the clients answered the probes
    # ours runs no Meridian: no query columns
    assert "meridian_queries" not in rows[0]
