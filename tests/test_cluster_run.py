"""A run over several servers, before any server is reached: what it refuses in one line
(fogsdn.live.live_network, fogsdn.live.queueing_run, the command line), where it puts the
network's nodes, and how it reaches the servers (fogsdn.live.cluster_site)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.core.network_spec import network_of
from fogsdn.core.scenario import parse_scenario
from fogsdn.live.cluster_site import ClusterSite, expected_traffic
from fogsdn.live.live_network import EmulationError, LiveNetwork, new_supervisor
from fogsdn.netem.cluster_net import ssh_options
from fogsdn.netem.cluster_plan import ClusterSpec, crossing_links

SPEC = ClusterSpec.model_validate({
    "servers": [{"name": "a", "address": "10.9.0.1"}, {"name": "b", "address": "10.9.0.2"}],
    "placement": {"fn": "a"}})


def _live(tmp_path: Path, **over: Any) -> LiveNetwork:
    sc = parse_scenario(scenario_dict(**over))
    return LiveNetwork(network_of(sc), tmp_path, new_supervisor(tmp_path, threading.Event()),
                       service=sc, cluster=SPEC)


def test_nodes_pinned_to_head_run_here_and_the_rest_on_the_servers(tmp_path: Path) -> None:
    spec = SPEC.model_copy(update={"placement": {"fn": "head", "s1": "a"}})
    sc = parse_scenario(scenario_dict(topology={"link": {"delay_ms": 1.0}}))
    live = LiveNetwork(network_of(sc), tmp_path, new_supervisor(tmp_path, threading.Event()),
                       service=sc, cluster=spec)
    site = live.cluster
    assert site is not None
    assert site.placement["fn"] == "head" and live.runs_here("fn")
    assert {site.placement[n] for n in ("ofn1", "c1", "c2")} <= {"a", "b"}
    assert live.server_name("s1") == "a" and not live.runs_here("s1")
    site.head = "10.9.0.100"  # found at start from the route to the first server
    assert site.mininet_params("fn") == {"server": "localhost", "serverIP": "10.9.0.100",
                                         "ssh_opts": []}
    # a shaped link's element runs here: fn-s1 has an end here, ofn1-s1 none
    with pytest.raises(EmulationError, match="ofn1-s1") as err:
        live._check_cluster()
    assert "fn-s1" not in str(err.value).replace("ofn1-s1", "")


def test_a_placement_naming_no_node_is_one_line(tmp_path: Path) -> None:
    spec = SPEC.model_copy(update={"placement": {"fx": "head"}})
    sc = parse_scenario(scenario_dict())
    with pytest.raises(EmulationError, match="placement.fx: no such host"):
        LiveNetwork(network_of(sc), tmp_path, new_supervisor(tmp_path, threading.Event()),
                    service=sc, cluster=spec)


def test_clients_and_the_busy_links_stay_with_the_switch(tmp_path: Path) -> None:
    live = _live(tmp_path)
    site = live.cluster
    assert site is not None
    # the FN pinned to a, the rest placed so that one access link crosses, the switch on
    # the side of the three hosts it serves
    assert set(site.placement) == {"fn", "ofn1", "c1", "c2", "s1"} and site.placement["fn"] == "a"
    assert len(crossing_links(live.graph, site.placement)) == 1
    params = site.mininet_params("fn")
    assert params["server"] == "a" and params["serverIP"] == "10.9.0.1"
    assert params["user"] == "root" and "-p" in params["ssh_opts"]


def test_expected_traffic_spreads_each_clients_load_over_the_fog_hosts() -> None:
    sc = parse_scenario(scenario_dict())
    g = network_of(sc).graph()
    load = expected_traffic(g, sc)
    total = sc.workload.peak_rate
    assert load[frozenset(("c1", "s1"))] == pytest.approx(total / 2)
    assert load[frozenset(("fn", "s1"))] == pytest.approx(total / 2)
    assert load[frozenset(("ofn1", "s1"))] == pytest.approx(total / 2)


@pytest.mark.parametrize(("over", "why"), [
    ({"topology": {"link": {"delay_ms": 1.0}}}, "shaped link with no end on this machine"),
    ({"nodes": [{"name": "fn", "role": "fn", "mu": 1.0, "capacity": 20, "cpu": 0.5},
                {"name": "ofn1", "role": "ofn", "mu": 0.3, "capacity": 10}]},
     "cpu or memory_mb limits"),
])
def test_what_a_cluster_run_does_not_take_is_one_line(tmp_path: Path, over: dict[str, Any],
                                                      why: str) -> None:
    with pytest.raises(EmulationError, match=why) as err:
        _live(tmp_path, **over)._check_cluster()
    assert "\n" not in str(err.value)


def test_ssh_options_pin_host_keys_when_a_file_names_them() -> None:
    pinned = ssh_options("/k", 2222, "/etc/fogsdn/known_hosts")
    assert pinned[:2] == ["-i", "/k"] and "StrictHostKeyChecking=yes" in pinned
    assert "UserKnownHostsFile=/etc/fogsdn/known_hosts" in pinned
    assert "StrictHostKeyChecking=accept-new" in ssh_options(None)


def test_session_commands_go_through_the_master_connection(tmp_path: Path) -> None:
    site = ClusterSite(SPEC, "fz0001", tmp_path / "run", tmp_path, _live(tmp_path).graph)
    s = site.sessions["b"]
    assert s.ssh[-1] == "root@10.9.0.2"
    assert s.via_master[:3] == ["ssh", "-S", str(tmp_path / "run" / "ssh-b")]
    assert s.via_master[3:] == s.ssh[1:]


def test_cluster_on_the_command_line_says_what_it_cannot_run(tmp_path: Path) -> None:
    f = tmp_path / "servers.yaml"
    f.write_text("servers:\n  - {name: a, address: 10.9.0.1}\n")
    for script, args, why in (
            ("run_testbed.py", ["--engine", "simulate"], "a live run only"),
            ("sweep.py", ["--scenario", str(ROOT / "scenarios" / "seed002b_alpha.yaml"),
                          "--engine", "emulate"], "one run (scripts/run_testbed.py) or the city"),
            ("sweep.py", ["--scenario", str(ROOT / "scenarios" / "city.yaml")],
             "the live study only")):
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--cluster",
                            str(f), *args], capture_output=True, text=True, timeout=120,
                           cwd=ROOT)
        assert r.returncode == 2 and why in r.stderr and r.stderr.count("\n") == 1, \
            (script, r.stderr)


def test_a_broken_servers_file_is_one_line_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "servers.yaml"
    f.write_text("servers:\n  - {name: a, address: 'not an address'}\n")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_testbed.py"), "--cluster",
                        str(f), "--duration", "1"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("error: --cluster:") and str(f) in r.stderr


class _Shaper:
    def __init__(self) -> None:
        self.delays: dict[str, float] = {}

    def update(self, link_id: str, params: Any) -> None:
        self.delays[link_id] = params.delay_ms


def test_a_tunnel_comes_off_its_links_element_delay_and_never_below_zero() -> None:
    import networkx as nx

    from fogsdn.netem.link_params import LinkParams
    from fogsdn.netem.mininet_net import Network

    shaper = _Shaper()
    net = Network(None, {}, nx.Graph(), 10.0, shaper=shaper,  # type: ignore[arg-type]
                  per_hop_ms=0.05,
                  configured={"sa-sb": LinkParams(delay_ms=20.0),
                              "sb-sc": LinkParams(delay_ms=0.01)})
    taken = net.set_tunnels({"sa-sb": 0.2, "sb-sc": 0.03, "unshaped": 0.1})
    assert taken == {"sa-sb": 0.2, "sb-sc": 0.01}
    assert shaper.delays["sa-sb"] == pytest.approx(20.0 - 0.2 - 0.05)
    assert shaper.delays["sb-sc"] == 0.0
    net.set_per_hop_ms(0.1)  # a new cost per hop keeps the tunnel's deduction
    assert shaper.delays["sa-sb"] == pytest.approx(20.0 - 0.2 - 0.1)


def test_load_reports_come_whole_off_a_stream() -> None:
    from fogsdn.core.load_report import MAX_REPORT_BYTES, LineFramer, LoadReport

    a = LoadReport("fn", 1, 2, 10.5).encode()
    b = LoadReport("fn", 2, 3, 11.0).encode()
    framer = LineFramer()
    assert framer.feed(a[:7]) == ([], 0)  # a report cut by the stream waits for its end
    assert framer.feed(a[7:] + b"\n" + b) == ([a], 0)
    assert framer.feed(b"\n") == ([b], 0)
    # an overlong line is dropped, also across reads, and the next report is whole
    assert framer.feed(b"x" * (MAX_REPORT_BYTES + 5)) == ([], 1)
    assert framer.feed(b"yy\n" + a + b"\n") == ([a], 0)
    assert framer.feed(b"z" * (MAX_REPORT_BYTES + 5) + b"\n" + b + b"\n") == ([b], 1)


def test_a_worker_reports_its_load_as_lines_on_a_stream(tmp_path: Path) -> None:
    from fogsdn.core.load_report import LineFramer, LoadReport
    from fogsdn.core.local_rpc import listen_stream
    from fogsdn.nodes.worker import LoadReporter

    path = tmp_path / "load-stream.sock"
    server = listen_stream(path)
    try:
        report = LoadReporter(str(path), stream=True)
        sent = [LoadReport("fn", k, k, 1.0 + k).encode() for k in range(3)]
        for data in sent:
            report(data)
        conn, _ = server.accept()
        conn.settimeout(5)
        got: list[bytes] = []
        framer = LineFramer()
        while len(got) < 3:
            got += framer.feed(conn.recv(4096))[0]
        assert got == sent
        conn.close()
    finally:
        server.close()


def test_a_points_client_engines_add_up_to_one() -> None:
    from fogsdn.city.live_run import merge_engine_stats
    from fogsdn.city.sim_output import turnaround_columns

    a = {"cpu_s": 1.5, "clients": 4, "threads": 6, "wall_s": 12.0, "max_rss_kb": 60000,
         "turnarounds": {"taken_off": {"count": 2, "total_ms": 0.4, "max_ms": 0.3}}}
    b = {"cpu_s": 0.5, "clients": 4, "threads": 6, "wall_s": 12.5, "max_rss_kb": 70000,
         "turnarounds": {"taken_off": {"count": 2, "total_ms": 0.6, "max_ms": 0.5}}}
    assert merge_engine_stats([a, b]) == {"cpu_s": 2.0, "clients": 8, "threads": 12,
                                          "wall_s": 12.5, "max_rss_kb": 70000}
    assert merge_engine_stats([a]) == a
    cols = turnaround_columns([a, b], {})
    assert cols == {"turnaround_real_ms_mean": 0.25, "turnaround_real_ms_max": 0.5}


def test_a_fault_schedule_is_refused_in_a_cluster_run(tmp_path: Path) -> None:
    from fogsdn.live.queueing_run import QueueingRun

    sc = parse_scenario(scenario_dict(faults=[{"kind": "kill_worker", "node": "fn",
                                               "t_ms": 50}]))
    run = QueueingRun(sc, tmp_path, threading.Event(), show_progress=False, cluster=SPEC)
    with pytest.raises(EmulationError, match="no fault schedule") as err:
        run.faults.check()
    assert "\n" not in str(err.value)
