"""The star city (network: star): per-peer tables that give every client-node and
node-node pair the pair network's round trip, its shape within Mininet's limits, the
addresses past 10.0.0.249, the epoch file, and the run's memory figure (pure, or
reading /proc only)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from fogsdn.city.event_model import CitySimulation
from fogsdn.city.fog_daemon import CityConfig
from fogsdn.city.geo_latency import latency_ms, path_km, processing_ms
from fogsdn.city.live_run import city_network, start_positions
from fogsdn.city.study_spec import (
    STAR_CLIENTS_PER_SWITCH,
    STAR_PORTS_PER_SWITCH,
    CityStudy,
    client_fog_matrix,
    client_fog_ms,
    fog_pair_rtt_ms,
    load_city_study,
    star_peer_delays,
)
from fogsdn.core.topology import HostSpec, build_graph, host_address
from fogsdn.live.proc_memory import (
    MemoryPeak,
    descendants,
    parse_stat_cpu_ticks,
    parse_stat_ppid,
    parse_status_kb,
    process_kind,
    tree_memory_kb,
)
from fogsdn.netem.mininet_net import shaped_links

ROOT = Path(__file__).resolve().parent.parent


def _study(**over: object) -> CityStudy:
    base: dict[str, object] = {"study": "city", "name": "t", "network": "star",
                               "fog_nodes": 29, "total_slots": 318, "ratios": [0.63]}
    return CityStudy.model_validate(base | over)


def test_the_matrix_is_client_fog_ms() -> None:
    st = _study()
    lay = st.layout()
    pos = start_positions(st, lay, 200)
    m = client_fog_matrix(pos, lay, st.params())
    for k in (0, 57, 199):
        for i, s in enumerate(lay.fog_nodes):
            assert m[k, i] == pytest.approx(client_fog_ms(pos[k], s, lay, st.params()), abs=1e-12)


def test_tables_give_every_pair_its_round_trip() -> None:
    st = _study(fog_nodes=5, total_slots=30, ratios=[1.0])
    lay, p = st.layout(), st.params()
    pos = start_positions(st, lay, 30)
    fog_ips = [f"10.0.0.{i + 1}" for i in range(5)]
    client_ips = [host_address(101 + k) for k in range(30)]
    members = [3, 0, 6, 1, 2]
    tables = star_peer_delays(client_fog_matrix(pos, lay, p), lay, p, fog_ips, client_ips,
                              members)
    unloaded = star_peer_delays(client_fog_matrix(pos, lay, p), lay, p, fog_ips, client_ips,
                                [0] * 5)
    sites = lay.fog_nodes
    towers = lay.towers
    for i, s in enumerate(sites):
        assert len(tables[i]) == 30 + 4 and fog_ips[i] not in tables[i]
        for k in (0, 29):  # a client's round trip pays the table at the node's end alone
            rtt = 2 * tables[i][client_ips[k]]
            assert rtt == pytest.approx(latency_ms(pos[k], s.position, members[i], s.slots,
                                                  towers, p))
        for j, b in enumerate(sites):  # a node-node probe pays both ends, both ways
            if j != i:
                rtt = 2 * (tables[i][fog_ips[j]] + tables[j][fog_ips[i]])
                # eq. 7 between the two, written out: propagation along the path, one
                # processing term, transmission and queueing at the lower bandwidth
                bw = max(0.05, min(1 - 0.95 * members[i] / s.slots,
                                   1 - 0.95 * members[j] / b.slots))
                assert bw < 1
                eq7 = (path_km(s.position, b.position, towers, p) * p.propagation_ms_per_km
                       + processing_ms(p) + (-0.008 * bw + 0.088) + min(5.0, 1 / (2 * bw)))
                assert rtt == pytest.approx(eq7)
                # the loads are in the tables: idle nodes are nearer each other
                assert unloaded[i][fog_ips[j]] < tables[i][fog_ips[j]]


def test_the_star_has_one_element_per_node_and_fits_mininet() -> None:
    st = load_city_study(ROOT / "scenarios" / "city_paper.yaml")
    assert (st.fog_nodes, st.total_slots, st.max_clients) == (29, 318, 200)
    lay = st.layout()
    g = city_network(st, lay, start_positions(st, lay, 200), st.params()).graph()
    assert sorted(shaped_links(g)) == sorted(f"{s.name}-s0" for s in lay.fog_nodes)
    switches = [n for n, d in g.nodes(data=True) if d["kind"] == "switch"]
    assert len(switches) == 1 + -(-200 // STAR_CLIENTS_PER_SWITCH)
    assert max(g.degree(s) for s in switches) <= STAR_PORTS_PER_SWITCH
    ips = [d["ip"] for _, d in g.nodes(data=True) if d["kind"] == "host"]
    assert len(set(ips)) == 229 and g.nodes["c150"]["ip"] == "10.0.1.1"


def test_host_addresses_past_the_first_block() -> None:
    assert [host_address(i) for i in (1, 249, 250, 498, 499)] == \
        ["10.0.0.1", "10.0.0.249", "10.0.1.1", "10.0.1.249", "10.0.2.1"]
    hosts = [HostSpec("f", "fn")] + [HostSpec(f"c{k}", "client") for k in range(1, 201)]
    from fogsdn.core.topology import TopologySpec
    spec = TopologySpec(kind="graph", switches=("s0", "s1", "s2", "s3", "s4", "s5", "s6"),
                        links=tuple({"a": "s0", "b": f"s{j}"} for j in range(1, 7)),
                        hosts={"f": "s0"} | {f"c{k}": f"s{1 + (k - 1) // 40}"
                                             for k in range(1, 201)})
    g = build_graph(spec, hosts)
    assert g.nodes["c149"]["ip"] == "10.0.0.249" and g.nodes["c200"]["ip"] == "10.0.1.51"
    assert g.nodes["c200"]["mac"] == "02:00:00:00:01:2c"  # host number 300


def test_study_limits_by_network() -> None:
    with pytest.raises(ValueError, match="holds 99"):
        _study(network="pairs", fog_nodes=4, total_slots=318)
    with pytest.raises(ValueError, match="pair network holds 29"):
        _study(network="pairs", fog_nodes=30, total_slots=40, ratios=[0.5])
    with pytest.raises(ValueError, match="fog_nodes"):
        _study(fog_nodes=37, total_slots=318)
    assert _study().max_clients == 200


def test_the_epoch_comes_from_its_file_once_written(tmp_path: Path) -> None:
    cfg = CityConfig(fogs={}, clients={}, time_scale=10, state_dir=tmp_path, epoch=0.0,
                     duration_live_s=1, seed=1, epoch_file=tmp_path / "epoch")
    path = cfg.write(tmp_path / "city.json")
    timer = threading.Timer(0.2, lambda: (tmp_path / "epoch").write_text("1234.5"))
    timer.start()
    t0 = time.monotonic()
    got = CityConfig.read(path)
    assert got.epoch == 1234.5 and got.epoch_file is None and time.monotonic() - t0 >= 0.15
    with pytest.raises(RuntimeError, match="no epoch"):
        (tmp_path / "epoch").unlink()
        CityConfig.read(path, wait_s=0.1)


def test_memory_of_a_process_tree() -> None:
    assert parse_stat_ppid("12 (a) b) c) S 7 12 12 0") == 7
    assert parse_status_kb("Name:\tx\nVmRSS:\t  2048 kB\n", "VmRSS") == 2048
    assert parse_status_kb("Name:\tx\n", "VmRSS") == 0
    assert sorted(descendants(1, {2: 1, 3: 2, 4: 1, 5: 9})) == [1, 2, 3, 4]
    rss, _pss, n = tree_memory_kb(os.getpid())
    assert rss > 10_000 and n >= 1
    line = "9 (x y) S 1 9 9 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 1 0 5 0 0"
    assert parse_stat_cpu_ticks(line) == 281
    assert process_kind("python -m fogsdn.city.client_engine --clients c1=4") == "clients"
    assert process_kind("build/linkem/linkem_relay ctl a b") == "link relays"
    assert process_kind("bash --norc") == "runner and other"
    peak = MemoryPeak(os.getpid())
    peak.sample()
    sum(i * i for i in range(300_000))  # some CPU of our own
    peak.sample()
    cpu = peak.summary()["cpu_s"]
    assert cpu["runner and other"] > 0 and peak.peak_mb > 10


def test_the_simulator_and_the_star_agree_on_node_to_node_rtts() -> None:
    """Vivaldi's and Meridian's node probes: the simulator's RTT between two loaded fog
    nodes is the one the star's tables give (eq. 7 between them, `fog_pair_rtt_ms`)."""
    st = _study(fog_nodes=6, total_slots=40, ratios=[0.5])
    sim = CitySimulation(st, "meridian", 0.5)
    lay, p = sim.layout, sim.p
    sim.load.update({s.name: i for i, s in enumerate(lay.fog_nodes)})
    for a in lay.fog_nodes:
        for b in lay.fog_nodes:
            if a is not b:
                want = fog_pair_rtt_ms(a, sim.load[a.name], b, sim.load[b.name], lay, p)
                assert sim._measure(a.name, b.name) == pytest.approx(want)


def test_a_study_simulated_at_its_live_scale_starts_its_clients_as_live() -> None:
    """A city file whose `full_scale` is its live scale is there to compare the engines:
    the simulator must start the clients when the live run does (city_paper.yaml's
    reference once started them at U(3, 10) model s against the live U(0.5, 2), and every
    live figure was compared with the wrong run), and take a step's round trips."""
    checked = 0
    for path in sorted((ROOT / "scenarios").glob("city*.yaml")):
        st = load_city_study(path)
        full = st.at_full_scale()
        if (full.fog_nodes, full.total_slots) == (st.fog_nodes, st.total_slots):
            assert full.start_s == st.start_s, path.name
            # and its simulated steps take their round trips, as the live ones do
            assert full.step_time == "messages", path.name
            checked += 1
    assert checked >= 2  # city_paper.yaml and city_live_max.yaml
