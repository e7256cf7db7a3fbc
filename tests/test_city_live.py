"""Seed 003's live city without a network: the graph and its delays, the study file, the
fog node's and the client's logic over a fake network, mobility, and the metrics."""

from __future__ import annotations

import json
import math
import random
import threading
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from fogsdn.city.fog_daemon import (
    MERIDIAN_PORT,
    CityConfig,
    FogDaemon,
    FogInfo,
    FogNode,
    MemberBoard,
    member_board_path,
)
from fogsdn.city.geo_latency import LatencyParams, latency_ms, load_ms, processing_ms
from fogsdn.city.live_run import Mobility, city_network, start_positions
from fogsdn.city.meridian_node import Ping, query_message
from fogsdn.city.mobile_client import CityClient, UdpTransport
from fogsdn.city.sim_output import live_metrics
from fogsdn.city.study_spec import (
    CityStudy,
    CityStudyError,
    fog_access_ms,
    load_city_study,
)
from fogsdn.cli.study_command import declared_study
from fogsdn.cli.study_command import main as study_main
from fogsdn.core.routing import path_links, shortest_path
from fogsdn.nodes.ncs.vivaldi import Coordinate

P = LatencyParams()


def _study(**kw: Any) -> CityStudy:
    return CityStudy.model_validate({"study": "city", "name": "t", **kw})


def test_round_trip_over_the_city_graph_is_the_latency_model() -> None:
    """Every client's shortest path to every fog node is its own direct link, and twice
    its delay is eq. 7 for an idle node; fog nodes reach each other directly too."""
    st = _study(fog_nodes=5, total_slots=20, ratios=[0.5])
    lay = st.layout()
    pos = start_positions(st, lay, 10)
    g = city_network(st, lay, pos, P).graph()
    for k in range(10):
        for i, s in enumerate(lay.fog_nodes):
            path = shortest_path(g, f"c{k + 1}", s.name)
            assert path == [f"c{k + 1}", f"a{k + 1}", f"f{i + 1}", s.name]
            assert 2 * sum(d["delay_ms"] for d in path_links(g, path)) == pytest.approx(
                latency_ms(pos[k], s.position, 0, s.slots, lay.towers, P), rel=1e-9)
    names = [s.name for s in lay.fog_nodes]
    for a in names:
        for b in names:
            if a != b:
                assert len(shortest_path(g, a, b)) == 4  # fog, its switch, the other's, fog


def test_the_city_network_is_its_sites_and_clients_without_a_workload() -> None:
    st = _study(fog_nodes=3, total_slots=6, ratios=[1.0])
    lay = st.layout()
    pos = start_positions(st, lay, 6)
    net = city_network(st, lay, pos, P)
    assert [h.name for h in net.fog_hosts] == [s.name for s in lay.fog_nodes]
    assert net.clients == 6 and net.time_scale == st.time_scale
    assert not hasattr(net, "workload")


def test_fog_access_delay_carries_processing_and_load() -> None:
    st = _study()
    site = st.layout().fog_nodes[1]
    idle, full = fog_access_ms(0, site, P), fog_access_ms(site.slots, site, P)
    assert 2 * idle == pytest.approx(processing_ms(P) + load_ms(0, site.slots, P))
    assert full > idle and 2 * (full - idle) <= P.qos_max_ms + 0.1


def test_the_shipped_study_file_validates() -> None:
    path = ROOT / "scenarios" / "city.yaml"
    assert declared_study(path) == "city"
    assert declared_study(ROOT / "scenarios" / "default.yaml") is None
    assert declared_study(ROOT / "scenarios" / "seed000_fig4a.yaml") == "sweep"
    assert declared_study(ROOT / "scenarios" / "seed002b_load.yaml") == "size_based"
    st = load_city_study(path)
    assert st.selectors == ("optimal", "random", "vivaldi", "meridian", "load_aware")
    assert st.full_scale.fog_nodes == 29 and st.full_scale.total_slots == 318
    assert st.max_clients <= 99


@pytest.mark.parametrize(("change", "field"), [
    ({"selectors": ["nearest"]}, "selectors"),
    ({"ratios": [20]}, "ratios"),
    ({"total_slots": 2, "fog_nodes": 4}, "total_slots"),
    ({"latency": {"sla_gbps": 5}}, "sla_gbps"),
    ({"mobility": {"kind": "trace"}}, "mobility.trace"),
    ({"fog_count": 3}, "fog_count"),
])
def test_bad_study_fields_are_named(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    import yaml

    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"study": "city", "name": "x", **change}))
    with pytest.raises(CityStudyError, match=field) as err:
        load_city_study(f)
    assert "\n" not in str(err.value)


# -- the fog node -----------------------------------------------------------------------
def _config(slots: dict[str, int]) -> CityConfig:
    fogs = {n: FogInfo(n, f"10.0.0.{i + 1}", s, tuple(load_ms(c, s, P) for c in range(s + 2)))
            for i, (n, s) in enumerate(slots.items())}
    return CityConfig(fogs=fogs, clients={"c1": "10.0.0.101", "c2": "10.0.0.102"},
                      time_scale=5.0, state_dir=Path("/nonexistent"),
                      epoch=0.0, duration_live_s=10.0, seed=1)



def test_the_point_file_every_process_reads_round_trips(tmp_path: Path) -> None:
    cfg = _config({"x": 2, "y": 3})
    back = CityConfig.read(cfg.write(tmp_path / "city.json"))
    assert back == cfg and back.fogs["y"].load(9) == cfg.fogs["y"].load_ms[-1]

def test_fog_node_gives_slots_until_full_and_answers_only_its_clients() -> None:
    cfg = _config({"f": 2})
    node = FogNode(cfg.fogs["f"], cfg)
    assert node.op({"op": "join", "client": "c1"}) == {"op": "joined", "ok": True}
    assert node.op({"op": "join", "client": "c1"}) == {"op": "joined", "ok": True}  # again
    assert node.op({"op": "join", "client": "c2"}) == {"op": "joined", "ok": True}
    assert node.op({"op": "join", "client": "c3"}) == {"op": "joined", "ok": False}
    assert node.refused == 1 and node.free == 0
    done = node.op({"op": "task", "client": "c1", "seq": 4})
    assert done is not None and done["seq"] == 4 and "coord" in done["state"]
    assert node.op({"op": "task", "client": "c3"}) is None  # no slot here: lost
    assert node.op({"op": "leave", "client": "c2"}) is None and node.free == 1
    assert set(node.op({"op": "view"})["nodes"]) == {"f"}  # type: ignore[index]


def test_a_view_of_the_seeds_scale_reaches_the_client_whole_over_udp(tmp_path: Path) -> None:
    """A node's view lists every node (4.1 KB at the seed's 29): it crosses a real UDP
    socket from the daemon's ops port to the client's whole. A 4 KB buffer cut it, so
    paper-scale clients lost 97 % of their views and ranked by their own probes alone."""
    names = [f"fog{i}" for i in range(60)]
    fogs = {n: FogInfo(n, f"127.0.7.{i + 1}", 11, tuple(load_ms(c, 11, P) for c in range(13)))
            for i, n in enumerate(names)}
    cfg = CityConfig(fogs=fogs, clients={"c1": "127.0.7.200"}, time_scale=5.0,
                     state_dir=tmp_path, epoch=0.0, duration_live_s=10.0, seed=1)
    MemberBoard.create(member_board_path(tmp_path), len(names))
    node = FogNode(fogs["fog0"], cfg)
    for n in names[1:]:
        peer = FogNode(fogs[n], cfg)
        peer.vivaldi.update("x", peer.vivaldi.coord, 3.3333333)  # long decimals, as live
        node.peer_echo(n, 12.345678, json.dumps(peer.state()).encode())
    daemon = FogDaemon(node)
    net = UdpTransport(cfg, "c1", tmp_path / "truth.json")
    server = threading.Thread(target=daemon._ops_in)
    server.start()
    try:
        reply = net.op("fog0", {"op": "view", "client": "c1"}, want_reply=True)
    finally:
        server.join(timeout=5)
        for sock in (daemon.probe_sock, daemon.ops_sock, daemon.peer_sock,
                     daemon.meridian_sock, net.sock):
            sock.close()
        net.prober.close()
        daemon.board.close()
    assert reply is not None and set(reply["nodes"]) == set(names)
    assert len(json.dumps(reply)) > 4096
    assert net.undecodable == 0


def test_fog_node_prices_a_join_and_a_leave_as_the_simulator_does() -> None:
    cfg = _config({"f": 4})
    node = FogNode(cfg.fogs["f"], cfg)
    for c in ("a", "b"):
        node.op({"op": "join", "client": c})
    st = node.state()
    here = load_ms(2, 4, P)
    assert st["join"] == pytest.approx(2 * (load_ms(3, 4, P) - here))
    assert st["leave"] == pytest.approx(1 * (here - load_ms(1, 4, P)))
    assert st["free"] == 2


def test_fog_node_folds_a_peer_echo_into_its_view_and_coordinate() -> None:
    cfg = _config({"f": 2, "g": 2})
    f, g = FogNode(cfg.fogs["f"], cfg), FogNode(cfg.fogs["g"], cfg)

    for _ in range(30):
        f.next_round()  # one peer: g, every round
        f.peer_echo("g", 20.0, json.dumps(g.state()).encode())  # 20 real ms = 4 model ms
    assert f.peer_rtt_ms["g"] == pytest.approx(4.0)
    assert f.vivaldi.coord.distance_to(g.vivaldi.coord) == pytest.approx(4.0, rel=0.2)
    f.peer_echo("g", 20.0, b"not json")  # ignored
    assert set(f.view) == {"g"}


def test_a_round_moves_the_coordinate_by_one_peer_and_every_echo_feeds_the_view() -> None:
    """Each round every peer's echo reaches the view and the rings, but one peer, drawn
    at random, moves the coordinate (the simulated node probes one peer a round)."""

    cfg = _config({"f": 2, "g": 2, "h": 2, "k": 2})
    f = FogNode(cfg.fogs["f"], cfg)
    peers = {n: FogNode(cfg.fogs[n], cfg) for n in ("g", "h", "k")}
    drawn = []
    moved = []
    update = f.vivaldi.update
    f.vivaldi.update = lambda peer, c, rtt: moved.append(peer) or update(peer, c, rtt)  # type: ignore[method-assign]
    for _ in range(30):
        f.next_round()
        drawn.append(f.coordinate_peer)
        for n, p in peers.items():
            f.peer_echo(n, 20.0, json.dumps(p.state()).encode())
    assert set(drawn) == {"g", "h", "k"} and set(f.view) == {"g", "h", "k"}
    assert moved == drawn  # one sample a round, from the drawn peer: 30, not 90


def test_a_vivaldi_clients_task_moves_its_nodes_coordinate() -> None:
    cfg = _config({"f": 2})
    f = FogNode(cfg.fogs["f"], cfg)
    f.op({"op": "join", "client": "c1"})
    before = f.vivaldi.coord
    far = {"vec": [30.0, 0.0], "error": 0.1, "height": 0.0}
    assert f.op({"op": "task", "client": "c1", "coord": far, "rtt": None})  # a first task
    assert f.vivaldi.coord == before
    there = Coordinate.from_dict(far, 2)
    d0 = before.distance_to(there)  # 30 ms apart at first; the client says 5
    for _ in range(20):
        assert f.op({"op": "task", "client": "c1", "coord": far, "rtt": 5.0})
    assert abs(f.vivaldi.coord.distance_to(there) - 5.0) < abs(d0 - 5.0) / 4
    assert f.op({"op": "task", "client": "c1", "coord": "junk", "rtt": 5.0})  # answered


# -- the client over a fake network ----------------------------------------------------------
class FakeCity:
    """Three fog nodes at fixed RTTs (model ms) with real FogNode logic behind them."""

    reply_at = None  # the client times a task by its own clock
    undecodable = 0

    def held_s(self, reply: dict[str, Any]) -> float:
        return 0.0  # the fake nodes answer at once

    def __init__(self, rtt: dict[str, float], slots: dict[str, int]) -> None:
        self.cfg = _config(slots)
        self.rtt = rtt
        self.nodes = {n: FogNode(self.cfg.fogs[n], self.cfg) for n in slots}
        self.pings = 0

    def ping(self, fog: str) -> tuple[float | None, dict[str, Any] | None]:
        self.pings += 1
        return self.rtt[fog], self.nodes[fog].state()

    def op(self, fog: str, msg: dict[str, Any], want_reply: bool) -> dict[str, Any] | None:
        reply = self.nodes[fog].op(msg)
        return reply if want_reply else None

    def members(self) -> dict[str, int]:
        return {n: len(f.members) for n, f in self.nodes.items()}

    def truth(self) -> dict[str, Any]:
        """`rtt` is each node's load-free RTT here; the client adds the load term."""
        return {"static": dict(self.rtt)}

    def meridian(self, fog: str, qid: str, eligible: list[str]) -> dict[str, Any] | None:
        """The nodes' Meridian agents, datagrams delivered in order, probes from the table."""
        by_addr = {(f.ip, MERIDIAN_PORT): n for n, f in self.cfg.fogs.items()}
        reply = ("10.0.0.101", 5000)
        msg = query_message(qid, "c1", ("10.0.0.101", 7000), reply, eligible)
        queue = deque((fog, a) for a in self.nodes[fog].meridian.message(msg, 0.0))
        while queue:
            at, action = queue.popleft()
            agent = self.nodes[at].meridian
            if isinstance(action, Ping):
                self.pings += 1
                queue += [(at, a) for a in agent.client_rtt(action.token, self.rtt[at], 0.0)]
            elif action.dest == reply:
                return action.msg
            else:
                to = by_addr[action.dest]
                queue += [(to, a) for a in self.nodes[to].meridian.message(action.msg, 0.0)]
        return None


def _client(city: FakeCity, selector: str, name: str = "c1") -> CityClient:
    return CityClient(name, city.cfg, selector, city, random.Random(3), city.members)


def test_optimal_client_takes_the_nearest_node_and_reconnects_when_it_is_full() -> None:
    """x stays the nearest even full (2 + its full load term, under y's 8 + idle term):
    the omniscient baseline picks it, x refuses, the task is lost, the client takes y."""
    city = FakeCity({"x": 2.0, "y": 8.0, "z": 9.0}, {"x": 1, "y": 2, "z": 2})
    first = _client(city, "optimal", "c1")
    first.step(0.0)
    assert first.node == "x" and first.result.delivered == 1
    second = _client(city, "optimal", "c2")
    second.step(0.0)
    r = second.result
    assert second.node == "y" and r.lost == 1 and r.reconnections == 1
    assert r.selections == 2 and r.optimal_hits == 1
    x_full, y_idle = 2.0 + load_ms(1, 1, P), 8.0 + load_ms(0, 2, P)
    assert r.sq_sel_err == pytest.approx((y_idle - x_full) ** 2)
    assert r.counts.sent["join"] == 2 and r.counts.received["join"] == 2
    assert r.counts.sent["task"] == 1 and r.delivered == 1


def test_optimal_client_sees_the_loads_of_the_instant() -> None:
    """y (3 ms) beats x (2 ms) once x holds its one client: the second client reads x's
    new count at once (the member board) and goes to y without a refusal, as the
    simulator's baseline does; a load-agnostic baseline still picks x and is refused."""
    city = FakeCity({"x": 2.0, "y": 3.0, "z": 5.0}, {"x": 1, "y": 2, "z": 2})
    _client(city, "optimal", "c1").step(0.0)
    second = _client(city, "optimal", "c2")
    second.step(0.0)
    assert second.node == "y" and second.result.lost == 0
    assert second.result.optimal_hits == second.result.selections == 1

    static = FakeCity({"x": 2.0, "y": 3.0, "z": 5.0}, {"x": 1, "y": 2, "z": 2})
    static.cfg = replace(static.cfg, optimal_reference="static")
    _client(static, "optimal", "c1").step(0.0)
    agnostic = _client(static, "optimal", "c2")
    agnostic.step(0.0)
    assert agnostic.node == "y" and agnostic.result.lost == 1
    # scored against the distance alone: y is 1 ms off the (full) x
    assert agnostic.result.sq_sel_err == pytest.approx(1.0)


def test_load_aware_client_probes_and_avoids_full_nodes() -> None:
    city = FakeCity({"x": 2.0, "y": 3.0, "z": 5.0}, {"x": 1, "y": 2, "z": 2})
    city.nodes["x"].op({"op": "join", "client": "other"})  # x is full
    c = _client(city, "load_aware")
    for t in range(5):
        c.step(float(t))
    assert c.node == "y" and c.result.lost == 0
    assert c.result.counts.sent["probe"] > 0 and c.result.counts.sent["view"] == 5
    assert city.pings == c.result.counts.sent["probe"]  # every probe counted


def test_vivaldi_client_learns_coordinates_from_its_probes() -> None:
    """The nodes' coordinates put the client's true place at (20, 0): x 10 ms away, y 6,
    z 2. From the origin, where a client's coordinate starts, y looks nearest, and x comes
    first by name: only a client that learned its coordinate from its probes picks z."""
    city = FakeCity({"x": 10.0, "y": 6.0, "z": 2.0}, {"x": 5, "y": 5, "z": 5})
    where = {"x": (30.0, 0.0), "y": (20.0, 6.0), "z": (22.0, 0.0)}
    for n, node in city.nodes.items():  # as the daemons' probes among themselves place them
        node.vivaldi.coord = Coordinate(where[n], 0.05, 0.0)
        # held there: what moves here is the client's (its tasks would move the nodes)
        node.vivaldi.update = lambda *a: None  # type: ignore[method-assign,assignment,return-value]
    c = _client(city, "vivaldi")
    assert c.vivaldi is not None and c.vivaldi.coord.vec == (0.0, 0.0)
    for t in range(60):
        c.step(float(t))
    assert math.dist(c.vivaldi.coord.vec, (20.0, 0.0)) < 3.0, c.vivaldi.coord
    errors = c.coordinate_errors()
    assert set(errors) == {"x", "y", "z"}
    # (z's estimate is pulled in by the task replies, which take no time in this fake)
    assert errors["x"] < 0.3 and errors["y"] < 0.3, errors
    assert c.node == "z"  # the nearest node by the learned estimate


def test_meridian_client_queries_the_fog_nodes_and_they_answer() -> None:
    city = FakeCity({"x": 2.0, "y": 3.0, "z": 5.0}, {"x": 1, "y": 2, "z": 2})
    between = {"x": {"y": 1.5, "z": 4.0}, "y": {"x": 1.5, "z": 3.0}, "z": {"x": 4.0, "y": 3.0}}
    for n, node in city.nodes.items():  # the rings, as the daemons' own probes fill them
        node.meridian.known = set(between[n])
        for peer, rtt in between[n].items():
            node.meridian.measured(peer, rtt)
    c = CityClient("c1", city.cfg, "meridian", city, random.Random(3), city.members)
    c.step(0.0)
    assert c.node == "x" and c.result.lost == 0
    assert c.result.counts.sent["m_query"] == 1 and c.result.counts.received["m_result"] == 1
    assert city.pings >= 2  # the entry node probed the client, and so did a member
    sent = sum(f.counts.sent["m_ask"] for f in city.nodes.values())
    assert sent >= 1 and sent == sum(f.counts.received["m_ask"] for f in city.nodes.values())
    assert c.result.meridian_hops == [0]  # from this seed's entry no forward was needed


# -- mobility and metrics ----------------------------------------------------------------
def test_waypoint_mobility_is_seeded_and_trace_mobility_replays(tmp_path: Path) -> None:
    st = _study()
    lay = st.layout()
    a, b = Mobility(st, lay, 3), Mobility(st, lay, 3)
    pa = [a.positions(t * 0.1, 0.1) for t in range(1, 50)]
    assert pa == [b.positions(t * 0.1, 0.1) for t in range(1, 50)]
    assert pa[0] != pa[-1]
    trace = tmp_path / "walk.csv"
    trace.write_text("t_s,client,x_m,y_m\n0,p,0,0\n10,p,100,0\n0,q,5,5\n")
    tr = Mobility(_study(mobility={"kind": "trace", "trace": str(trace)}), lay, 2)
    assert tr.positions(5.0, 0.1) == [(50.0, 0.0), (5.0, 5.0)]
    with pytest.raises(ValueError, match="mobility.trace"):
        Mobility(_study(mobility={"kind": "trace", "trace": str(trace)}), lay, 3)


def test_live_metrics_give_the_simulators_columns() -> None:
    def counts(i: int, o: int) -> dict[str, Any]:
        return {"in": i, "out": o, "sent": {"probe": o}, "received": {"probe": i}}

    clients = {
        "c1": {"lost": 1, "reconnections": 1, "handovers": 0, "selections": 2,
               "optimal_hits": 1, "sq_sel_err": 4.0, "sq_conn_err": 2.0, "delivered": 2,
               "latencies": [3.0, 5.0], "excess": [0.1, 0.3], "picks": [[1, "x"], [1, "y"]],
               "step_ms": [40.0, 10.0, 30.0],
               "counts": counts(10, 12) | {"sent": {"probe": 12, "m_query": 3}},
               "coordinate_errors": {"x": 0.1}},
        "c2": {"lost": 0, "reconnections": 0, "handovers": 2, "selections": 2,
               "optimal_hits": 2, "sq_sel_err": 0.0, "sq_conn_err": 0.0, "delivered": 1,
               "latencies": [4.0], "excess": [0.2], "picks": [[2, "x"], [1, "x"]],
               "counts": counts(6, 6), "coordinate_errors": {"x": 0.3}},
    }
    x_sent = {"probe": 18, "m_ask": 2, "m_answer": 1, "m_result": 3, "m_probe": 5,
              "m_gossip": 4, "m_ring": 2, "m_report": 1}
    x_counts = counts(20, 18) | {"sent": x_sent, "received": {"probe": 20, "m_probe": 5}}
    fogs: dict[str, dict[str, Any]] = {
        "x": {"counts": x_counts, "meridian_hops": [0, 1, 1]}, "y": {"counts": counts(4, 4)}}
    m = live_metrics(clients, fogs)
    assert m["client_messages"] == 17 and m["client_lost"] == 0.5
    assert m["node_in"] == (20 + 4) / 2 and m["node_out"] == (18 + 4) / 2
    assert m["optimal_rate"] == 0.75 and m["selection_rmse_ms"] == pytest.approx(1.0)
    assert m["unique_per_step"] == 1.5  # second 1: {x, y}; second 2: {x}
    assert m["mean_latency_ms"] == 4.0 and m["delivered"] == 3
    assert m["connection_error_ms"] == pytest.approx((1.0 + 0.0) / 2)
    assert m["rtt_excess_ms"] == pytest.approx(0.2)
    assert m["coord_median_rel_error"] == pytest.approx(0.2)
    assert m["probe_messages"] == 22 + 12 + 38 + 8 + 5 + 5
    # Meridian per query: 3 queries, 2 asks, 1 answer, 3 results, 5 probes each way
    assert m["meridian_queries"] == 3
    assert m["meridian_messages_per_query"] == pytest.approx((3 + 2 + 1 + 3 + 10) / 3)
    assert m["meridian_probes_per_query"] == pytest.approx(5 / 3)
    assert m["meridian_hops_per_query"] == pytest.approx(2 / 3)
    assert m["meridian_upkeep_messages"] == 4 + 2 + 1
    assert m["replies_missing"] == 0 and m["replies_undecodable"] == 0
    assert m["step_ms"] == 30.0 and m["step_ms_p90"] == 30.0  # c2 kept none


def test_live_metrics_count_the_replies_that_never_came_or_could_not_be_read() -> None:
    """A view answered by a datagram the client could not read is a request unanswered
    (views cut at 4 KB went unnoticed this way at the seed's scale)."""
    sent = {"view": 10, "join": 5, "task": 4, "leave": 3, "probe": 4}
    received = {"view": 2, "join": 5, "task": 3, "probe": 4, "malformed": 8}
    client = {"lost": 1, "reconnections": 0, "handovers": 0, "selections": 10,
              "optimal_hits": 1, "sq_sel_err": 0.0, "sq_conn_err": 0.0, "delivered": 3,
              "latencies": [3.0, 3.0, 3.0], "picks": [],
              "counts": {"in": 22, "out": 26, "sent": sent, "received": received}}
    m = live_metrics({"c1": client}, {"x": {"counts": {"in": 0, "out": 0, "sent": {},
                                                       "received": {}}}})
    assert m["replies_missing"] == 8 + 1  # the leaves are never answered
    assert m["replies_undecodable"] == 8


def test_simulate_engine_runs_the_study_at_its_full_scale(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("study: city\nname: small\nselectors: [optimal, load_aware]\n"
                 "full_scale: {fog_nodes: 5, total_slots: 30, duration_model_s: 15,"
                 " ratios: [0.5]}\n")
    assert study_main(["--scenario", str(f), "--out", str(tmp_path / "out"),
                       "--executor", "serial"]) == 0
    lines = (tmp_path / "out" / "seed003-simulate.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[1].startswith("optimal,0.5,15,30")
    assert (tmp_path / "out" / "seed003_fig7-simulate.png").stat().st_size > 1000
    assert not math.isnan(float(lines[2].split(",")[16]))


@pytest.mark.parametrize("entry", ["run_testbed", "sweep"])
def test_the_clis_recognise_a_city_study(tmp_path: Path, entry: str) -> None:
    """`run_testbed.py` and `sweep.py` hand a `study: city` file to the city study."""
    f = tmp_path / "c.yaml"
    f.write_text("study: city\nname: small\nselectors: [random]\n"
                 "full_scale: {fog_nodes: 4, total_slots: 12, duration_model_s: 10,"
                 " ratios: [0.5]}\n")
    out = tmp_path / "out"
    if entry == "run_testbed":
        from fogsdn.cli.run_command import main as cli_main

        rc = cli_main(["--scenario", str(f), "--engine", "simulate", "--out", str(out),
                       "--quiet"])
    else:
        rc = study_main(["--scenario", str(f), "--engine", "simulate", "--out", str(out),
                         "--workers", "2"])
    assert rc == 0
    assert (out / "seed003-simulate.csv").read_text().splitlines()[1].startswith("random,0.5,6")


def test_a_bad_study_is_one_line_from_the_cli(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from fogsdn.cli.run_command import main as cli_main

    f = tmp_path / "c.yaml"
    f.write_text("study: city\nname: bad\nratios: [0]\n")
    assert cli_main(["--scenario", str(f), "--engine", "simulate"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "ratios" in err and "\n" not in err


def test_the_member_board_shows_each_daemons_count_to_every_reader(tmp_path: Path) -> None:
    path = MemberBoard.create(tmp_path / "members.bin", 3)
    writer = MemberBoard(path, ["z", "x", "y"])  # names in any order: the board sorts them
    reader = MemberBoard(path, ["x", "y", "z"])
    assert reader.read() == {"x": 0, "y": 0, "z": 0}
    writer.write("y", 7)
    writer.write("z", 2)
    writer.write("y", 6)
    assert reader.read() == {"x": 0, "y": 6, "z": 2}
    assert path.stat().st_size == 12
    writer.close()
    reader.close()


def test_live_and_simulated_clients_walk_the_same_streets() -> None:
    """The live runner moves every client each tick; the simulator moves one at its own
    steps, between other clients' draws: each client's walk has its own draws, so where
    it is at a given time is the same in both (and in every selector's run)."""
    from fogsdn.city.event_model import CitySimulation

    st = _study(fog_nodes=4, total_slots=20, ratios=[0.5], mobility={"kind": "waypoint"})
    live = Mobility(st, st.layout(), 10)
    sims = [CitySimulation(st, kind, 0.5) for kind in ("random", "optimal")]
    t = 0.0
    for _ in range(150):  # 30 s in ticks of 0.2 s: several waypoints and pauses each
        t += 0.2
        at_live = live.positions(t, 0.2)
    for sim in sims:
        for i, c in enumerate(sim.clients):
            sim.rng.random()  # other clients' and the selector's draws in between
            sim._move(c, t / 2)
            sim._move(c, t)
            assert c.position == pytest.approx(at_live[i], abs=1e-6)
    assert at_live != [w.position for w in Mobility(st, st.layout(), 10).walkers]


def test_a_live_point_spans_duration_over_time_scale_model_seconds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every time of the study runs at time_scale live: 200 live s at 10 are 20 model s,
    what the simulator runs at the live scale; a point too short for the clients' start
    is refused in one line naming the field."""
    st = _study(duration_live_s=200, time_scale=10, start_s=[0.5, 2.0])
    assert st.model_span_s() == 20.0 and st.at_live_span().duration_model_s == 20.0
    st.check_live_span()
    with pytest.raises(CityStudyError, match=r"duration_live_s: 15 live s at time_scale 10 span "
                                             r"1.5 model s.*start up to 2 model s"):
        _study(duration_live_s=15, time_scale=10, start_s=[0.5, 2.0]).check_live_span()
    f = tmp_path / "c.yaml"
    f.write_text("study: city\nname: t\ntime_scale: 10\nduration_live_s: 15\n")
    rc = study_main(["--scenario", str(f), "--engine", "emulate", "--out", str(tmp_path / "o")])
    assert rc == 2 and "duration_live_s: 15 live s" in capsys.readouterr().err


def test_the_old_duration_keys_are_read_for_one_release_with_a_warning(
        tmp_path: Path) -> None:
    """`duration_s` meant live seconds at the top and model seconds under `full_scale`;
    each is read as its new name (the unit in it) with a FutureWarning, and a live run
    refuses the simulator's `duration_model_s`."""
    f = tmp_path / "old.yaml"
    f.write_text("study: city\nname: t\ntime_scale: 10\nduration_s: 30\n"
                 "full_scale: {duration_s: 7}\n")
    with pytest.warns(FutureWarning, match="duration_s is now "):
        st = load_city_study(f)
    assert st.duration_live_s == 30.0 and st.full_scale.duration_model_s == 7.0
    assert st.at_full_scale().simulated_span_model_s == 7.0
    assert st.at_live_span().simulated_span_model_s == 3.0
    with pytest.raises(CityStudyError, match="duration_model_s: 3 is the simulator's"):
        st.at_live_span().check_live_choices()
