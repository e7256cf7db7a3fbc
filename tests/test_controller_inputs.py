"""What the os-ken adapter reads, without os-ken: the switch a datapath is
(fogsdn.controller.pipeline.Topology.switch_of_dpid), a PortStatus made a link or node change
(fogsdn.controller.cluster.port_change), the workers' answers made the live view
(fogsdn.controller.cluster.loaded_view), a registration request read
(fogsdn.controller.registration.availability_request) and answered over its Unix socket
(fogsdn.core.local_rpc.serve_unix, answer_one)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, scenario_dict

from fogsdn.controller.cluster import LinkState, loaded_view, port_change
from fogsdn.controller.pipeline import Topology
from fogsdn.controller.registration import availability_request
from fogsdn.core.local_rpc import answer_one, serve_unix, unix_call
from fogsdn.core.scenario import load_scenario, parse_scenario, scenario_graph
from fogsdn.policies import initial_view

SC = parse_scenario(scenario_dict())


def _port(topo: Topology, switch: str, peer: str) -> int:
    return int(topo.graph.edges[switch, peer]["ports"][switch])


def test_a_datapath_is_its_switch_or_on_one_switch_any_is_that_one() -> None:
    topo = Topology.of(scenario_graph(load_scenario(ROOT / "scenarios" / "seed002a.yaml")))
    dpids = {topo.graph.nodes[s]["dpid"]: s for s in topo.switches()}
    assert {d: topo.switch_of_dpid(d) for d in dpids} == dpids
    assert topo.switch_of_dpid(max(dpids) + 100) is None
    one = Topology.of(scenario_graph(SC))
    assert one.single()
    assert one.switch_of_dpid(123456) == one.switches()[0]  # e.g. the benchmark's fakes


def test_a_switch_links_port_turns_the_link_once_per_transition() -> None:
    topo = Topology.of(scenario_graph(load_scenario(ROOT / "scenarios" / "seed002a.yaml")))
    links = LinkState()
    link = str(topo.graph.edges["s1", "s3"]["id"])
    s1, s3 = _port(topo, "s1", "s3"), _port(topo, "s3", "s1")
    assert port_change(topo, links, "s1", s1, down=True) == ("link", link, False)
    assert port_change(topo, links, "s1", s1, down=True) is None  # PortStatus repeats
    assert port_change(topo, links, "s3", s3, down=True) is None  # the other end: still down
    assert port_change(topo, links, "s1", s1, down=False) is None  # s3's end is down
    assert links.failed == {link}
    assert port_change(topo, links, "s3", s3, down=False) == ("link", link, True)
    assert links.failed == set()


def test_an_ofns_port_is_its_availability_and_other_ports_change_nothing() -> None:
    topo = Topology.of(scenario_graph(SC))
    links = LinkState()
    g = topo.graph
    ofn_switch = next(n for n in g.neighbors("ofn1"))
    fn_switch = next(n for n in g.neighbors("fn"))
    port = _port(topo, ofn_switch, "ofn1")
    assert port_change(topo, links, ofn_switch, port, down=True) == ("node", "ofn1", False)
    assert port_change(topo, links, ofn_switch, port, down=False) == ("node", "ofn1", True)
    # the FN's port (not churned by PortStatus) and a port with no link: nothing
    assert port_change(topo, links, fn_switch, _port(topo, fn_switch, "fn"), True) is None
    assert port_change(topo, links, ofn_switch, 999, down=True) is None
    assert links.failed == set() and links.ports_down == set()


def test_the_live_view_carries_the_controllers_counts_or_none() -> None:
    view = initial_view(SC, True)
    counts, work = {"fn": 3}, {"fn": 7.5}
    out = loaded_view(view, counts.get, work.get, {"fn": 4.0}.get)
    fn, ofn = out.node("fn"), out.node("ofn1")
    assert (fn.in_system, fn.work_left, fn.measured_rt_ms) == (3, 7.5, 4.0)
    assert (ofn.in_system, ofn.work_left, ofn.measured_rt_ms) == (None, None, None)
    assert [n.name for n in out.nodes] == [n.name for n in view.nodes]
    assert out.node("ofn1").available == view.node("ofn1").available


def test_a_registration_names_a_known_node_and_a_state() -> None:
    nodes = {"fn", "ofn1"}
    assert availability_request({"node": "ofn1", "state": "unavailable", "t": 12.5},
                                nodes, 99.0) == ("ofn1", False, 12.5)
    assert availability_request({"node": "ofn1", "state": "available"},
                                nodes, 99.0) == ("ofn1", True, 99.0)
    with pytest.raises(ValueError, match="state: must be available or unavailable"):
        availability_request({"node": "ofn1", "state": "gone"}, nodes, 0.0)
    with pytest.raises(ValueError, match="unknown node 'ghost'"):
        availability_request({"node": "ghost", "state": "available"}, nodes, 0.0)
    with pytest.raises(KeyError):
        availability_request({"state": "available"}, nodes, 0.0)


def test_the_registration_socket_answers_each_request_or_says_what_was_wrong(
        tmp_path: Path) -> None:
    path = tmp_path / "reg.sock"
    path.write_text("a stale socket file")  # a restarted controller's predecessor's

    def answer(msg: Any) -> dict[str, Any]:
        node, up, t = availability_request(msg, {"ofn1"}, 1.0)
        return {"node": node, "up": up, "t": t}

    def handle(conn: Any) -> None:
        answer_one(conn, answer, 2.0, (ValueError, KeyError, TypeError))

    def spawn(fn: Any, *args: Any) -> None:
        threading.Thread(target=fn, args=args, daemon=True).start()

    spawn(serve_unix, path, handle, spawn)
    for _ in range(200):  # until it listens
        try:
            first = unix_call(path, {"node": "ofn1", "state": "available"}, 2.0)
            break
        except OSError:
            threading.Event().wait(0.01)
    assert first == {"node": "ofn1", "up": True, "t": 1.0}
    assert unix_call(path, {"node": "ghost", "state": "available"}) == {
        "error": "node: unknown node 'ghost'"}
    assert unix_call(path, {"state": "available"}) == {"error": "'node'"}  # a KeyError
    assert "error" in unix_call(path, ["not", "an", "object"])  # type: ignore[arg-type]
