"""The OpenFlow pipeline against a fake flow table: packet in, port and rewrite out (no root)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest
from conftest import scenario_dict
from fake_flow_table import FakeNetwork

from fogsdn.controller.flow_tables import GROUP_ID
from fogsdn.controller.pipeline import (
    DSCP_HP,
    ETH_ARP,
    ETH_IPV4,
    LEG_SAMPLE_MASK,
    PRIO_OBSERVE,
    Flood,
    SwitchTables,
    Topology,
    base_flows,
    edge_switches,
    failover_groups,
    forward_flows,
    group_mods,
    sample_mask,
    stage_flows,
    switch_start,
)
from fogsdn.core.routing import next_hops, shortest_path
from fogsdn.core.scenario import TaskClass, parse_scenario, scenario_graph

SYN = {"eth_type": ETH_IPV4, "ip_proto": 6, "tcp_src": 40000, "tcp_dst": 9000}


def _net(topology: dict[str, Any], proactive: bool = True,
         buckets: dict[TaskClass, list[tuple[str, int]]] | None = None,
         measure_rt: bool = False, **over: Any) -> tuple[nx.Graph, Topology, FakeNetwork]:
    g = scenario_graph(parse_scenario(scenario_dict(topology=topology, **over)))
    topo = Topology.of(g)
    hops = next_hops(g)
    flows = {s: base_flows(topo, s, hops, proactive, measure_rt) for s in topo.switches()}
    ips = {n: d["ip"] for n, d in topo.hosts()}
    b = buckets or {TaskClass.HP: [("fn", 1000)], TaskClass.LP: [("ofn1", 1000)]}
    groups = {s: failover_groups(topo, s, hops, add=True)
              + (group_mods(b, ips, add=True) if s in edge_switches(topo) else [])
              for s in topo.switches()}
    return g, topo, FakeNetwork(g, flows, groups)


def _request(g: nx.Graph, client: str, dscp: int, port: int = 40000) -> dict[str, Any]:
    c = g.nodes[client]
    return {**SYN, "ipv4_src": c["ip"], "eth_src": c["mac"], "ipv4_dst": g.graph["vip"],
            "eth_dst": g.graph["vip_mac"], "ip_dscp": dscp, "tcp_src": port}


def _reply(g: nx.Graph, worker: str, client: str, port: int = 40000) -> dict[str, Any]:
    w, c = g.nodes[worker], g.nodes[client]
    return {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_src": w["ip"], "eth_src": w["mac"],
            "ipv4_dst": c["ip"], "eth_dst": c["mac"], "tcp_src": 9000, "tcp_dst": port}


@pytest.mark.parametrize("topology", [{"kind": "star"}, {"kind": "line", "length": 3},
                                      {"kind": "multipath"}, {"kind": "fat_tree", "k": 4},
                                      {"kind": "tree", "depth": 2, "fanout": 2}])
def test_classes_reach_their_node_rewritten_and_replies_come_from_the_service(
        topology: dict[str, Any]) -> None:
    g, _, net = _net(topology)
    for client in ("c1", "c2"):
        hp = net.send(client, _request(g, client, DSCP_HP))
        assert hp.host == "fn"
        assert hp.packet["ipv4_dst"] == g.nodes["fn"]["ip"]
        assert hp.packet["eth_dst"] == g.nodes["fn"]["mac"]
        lp = net.send(client, _request(g, client, 0, port=40001))
        assert lp.host == "ofn1" and lp.packet["ipv4_dst"] == g.nodes["ofn1"]["ip"]
        back = net.send("fn", _reply(g, "fn", client))
        assert back.host == client
        assert back.packet["ipv4_src"] == g.graph["vip"]
        assert back.packet["eth_src"] == g.graph["vip_mac"]
        # an established connection keeps its worker (conntrack), not the group's choice
        again = net.send(client, _request(g, client, DSCP_HP))
        assert again.host == "fn"


def test_star_pipeline_is_seed000s() -> None:
    g, topo, _ = _net({"kind": "star"})
    flows = base_flows(topo, "s1", next_hops(g), proactive=True)
    assert any(f.actions == (Flood(),) and f.match_dict() == {"eth_type": ETH_ARP}
               for f in flows)
    ipv4 = [f for f in flows if f.table == 0 and f.match_dict().get("eth_type") == ETH_IPV4]
    assert len(ipv4) == 1 and ipv4[0].match_dict() == {"eth_type": ETH_IPV4}  # all IPv4 via ct
    assert flows[-1].priority == 0 and flows[-1].match == ()  # table-miss last
    assert edge_switches(topo) == ["s1"]


def test_packets_take_the_shortest_path_by_delay() -> None:
    g, _, net = _net({"kind": "multipath"})
    d = net.send("c1", _request(g, "c1", DSCP_HP))
    assert d.switches == ["s1", "s2", "s5"]
    # make the short path slow: delay, not hop count, decides
    g2, _, net2 = _net({"kind": "graph", "switches": ["s1", "s2", "s3", "s4"],
                        "links": [{"a": "s1", "b": "s2", "delay_ms": 10},
                                  {"a": "s2", "b": "s4"}, {"a": "s1", "b": "s3"},
                                  {"a": "s3", "b": "s4"}],
                        "hosts": {"fn": "s4", "ofn1": "s4", "c1": "s1", "c2": "s1"}})
    assert net2.send("c1", _request(g2, "c1", DSCP_HP)).switches == ["s1", "s3", "s4"]


def test_reroute_after_a_link_failure_keeps_the_connection() -> None:
    g, topo, net = _net({"kind": "multipath"})
    first = net.send("c1", _request(g, "c1", DSCP_HP))
    assert first.switches == ["s1", "s2", "s5"]
    failed = {g.edges["s1", "s2"]["id"]}
    net.down |= failed
    # before the controller knows: s1's fast-failover group already takes the backup
    quick = net.send("c1", _request(g, "c1", DSCP_HP))
    assert quick.host == "fn" and quick.switches == ["s1", "s3", "s4", "s5"]
    hops = next_hops(g, failed)
    for s in topo.switches():
        net.install_groups(s, failover_groups(topo, s, hops, add=False))
        net.install(s, forward_flows(topo, s, hops))
    moved = net.send("c1", _request(g, "c1", DSCP_HP))
    assert moved.host == "fn" and moved.switches == ["s1", "s3", "s4", "s5"]
    assert len(net.conntrack) == 1  # the same connection, not a new one
    back = net.send("fn", _reply(g, "fn", "c1"))
    assert back.host == "c1" and back.switches == ["s5", "s4", "s3", "s1"]
    assert back.packet["ipv4_src"] == g.graph["vip"]
    assert shortest_path(g, "c1", "fn", failed)[1:-1] == ["s1", "s3", "s4", "s5"]


def test_a_reroute_sends_only_what_changed_and_routes_as_the_full_tables_do() -> None:
    g, topo, net = _net({"kind": "multipath"})
    hops = next_hops(g)
    held = {s: SwitchTables.installed(failover_groups(topo, s, hops, add=True),
                                      forward_flows(topo, s, hops)) for s in topo.switches()}
    assert all(held[s].changes(failover_groups(topo, s, hops, add=False),
                               forward_flows(topo, s, hops)) == ([], [])
               for s in topo.switches())  # nothing changed: nothing to send
    link = g.edges["s1", "s2"]["id"]
    for failed in ({link}, set()):  # the link fails, then comes back
        net.down = set(failed)
        hops = next_hops(g, failed)
        sent = 0
        for s in topo.switches():
            before = set(held[s].failover)
            groups, flows = held[s].changes(failover_groups(topo, s, hops, add=False),
                                            forward_flows(topo, s, hops))
            assert all(m.add == (m.group_id not in before) for m in groups)  # else modified
            sent += len(flows)
            net.install_groups(s, groups)
            net.install(s, flows)
            assert held[s].changes(failover_groups(topo, s, hops, add=False),
                                   forward_flows(topo, s, hops)) == ([], [])
        assert 0 < sent < sum(len(forward_flows(topo, s, hops)) for s in topo.switches())
        path = net.send("c1", _request(g, "c1", DSCP_HP, port=40000 + len(failed)))
        assert path.host == "fn"
        assert path.switches == shortest_path(g, "c1", "fn", failed)[1:-1]


def test_a_new_failover_group_is_added_and_a_port_names_its_peer() -> None:
    g, topo, _ = _net({"kind": "multipath"})
    hops = next_hops(g)
    wanted = failover_groups(topo, "s1", hops, add=False)
    groups, _ = SwitchTables().changes(wanted, [])
    assert groups and all(m.add for m in groups)  # not held before: added
    for n in g.neighbors("s1"):
        assert topo.peer("s1", g.edges["s1", n]["ports"]["s1"]) == n
    assert topo.peer("s1", 999) is None


def test_backups_are_loop_free_and_only_where_they_exist() -> None:
    g, topo, net = _net({"kind": "line", "length": 3})
    assert all(failover_groups(topo, s, next_hops(g), add=True) == [] for s in topo.switches())
    g, topo, net = _net({"kind": "multipath"})
    hops = next_hops(g)
    # every backup port leads to a neighbour whose own route does not come back
    for (s, h), port in hops.backup.items():
        n = next(n for n in g.neighbors(s) if g.edges[s, n]["ports"].get(s) == port)
        assert hops.towards(n, h) != g.edges[s, n]["ports"][n], (s, h)
    assert hops.backup_towards("s1", "fn") == g.edges["s1", "s3"]["ports"]["s1"]
    assert hops.backup_towards("s5", "c1") == g.edges["s5", "s4"]["ports"]["s5"]


def test_a_pinned_path_overrides_the_shortest() -> None:
    g = scenario_graph(parse_scenario(scenario_dict(topology={"kind": "multipath"})))
    topo = Topology(g, g.graph["vip"], g.graph["vip_mac"], 9000,
                    pinned={("c1", "fn"): ("s1", "s3", "s4", "s5")})
    hops = next_hops(g)
    ips = {n: d["ip"] for n, d in topo.hosts()}
    groups = {s: failover_groups(topo, s, hops, add=True) for s in topo.switches()}
    groups["s1"] += group_mods({TaskClass.HP: [("fn", 1)]}, ips, add=True)
    net = FakeNetwork(g, {s: base_flows(topo, s, hops, True) for s in topo.switches()}, groups)
    assert net.send("c1", _request(g, "c1", DSCP_HP)).switches == ["s1", "s3", "s4", "s5"]
    assert net.send("fn", _reply(g, "fn", "c1")).switches == ["s5", "s4", "s3", "s1"]
    assert net.send("c2", _request(g, "c2", DSCP_HP)).switches == ["s1", "s2", "s5"]


def test_arp_for_the_service_goes_up_a_host_is_answered_at_once_other_arp_to_its_target(
        ) -> None:
    g, _, net = _net({"kind": "line", "length": 3})
    c1, fn = g.nodes["c1"], g.nodes["fn"]
    vip = net.send("c1", {"eth_type": ETH_ARP, "arp_op": 1, "arp_tpa": g.graph["vip"]})
    assert vip.host is None and vip.to_controller == "s1"
    # the server asks for a client: its own switch answers, nothing crosses a link
    who = net.send("fn", {"eth_type": ETH_ARP, "arp_op": 1, "eth_src": fn["mac"],
                          "arp_sha": fn["mac"], "arp_spa": fn["ip"], "arp_tpa": c1["ip"]})
    assert who.host == "fn" and who.switches == ["s3"]
    assert who.packet["arp_op"] == 2 and who.packet["eth_dst"] == fn["mac"]
    assert (who.packet["arp_sha"], who.packet["arp_spa"]) == (c1["mac"], c1["ip"])
    assert (who.packet["arp_tha"], who.packet["arp_tpa"]) == (fn["mac"], fn["ip"])
    # a reply (or anything else that is not a request) goes on towards its target
    ans = net.send("c1", {"eth_type": ETH_ARP, "arp_op": 2, "arp_tpa": fn["ip"]})
    assert ans.host == "fn" and ans.switches == ["s1", "s2", "s3"]


def test_per_request_policy_sends_the_syn_up_at_the_clients_edge() -> None:
    g, _, net = _net({"kind": "line", "length": 3}, proactive=False)
    d = net.send("c1", _request(g, "c1", 0))
    assert d.host is None and d.to_controller == "s1"


def test_groups_only_at_switches_with_clients() -> None:
    g, topo, _ = _net({"kind": "fat_tree", "k": 4}, workload={"clients": 3})
    edges = edge_switches(topo)
    assert edges == sorted({g.nodes[c]["switch"] for c in ("c1", "c2", "c3")})
    mods = group_mods({TaskClass.HP: [("fn", 600), ("ofn1", 400)]},
                      {"fn": "10.0.0.1", "ofn1": "10.0.0.2"}, add=False)
    assert [m.group_id for m in mods] == [GROUP_ID[TaskClass.HP]]
    assert [b[0] for b in mods[0].buckets] == [600, 400] and not mods[0].add


@pytest.mark.parametrize("topology", [{"kind": "star"}, {"kind": "line", "length": 3},
                                      {"kind": "fat_tree", "k": 4}])
def test_measuring_copies_the_syn_and_the_servers_fin_and_forwards_both(
        topology: dict[str, Any]) -> None:
    g, topo, net = _net(topology, measure_rt=True)
    port = 40002  # not a sampled port: no handshake copies
    for client in ("c1", "c2"):
        edge = g.nodes[client]["switch"]
        net.copies.clear()
        syn = net.send(client, {**_request(g, client, DSCP_HP, port), "tcp_flags": 0x002})
        assert syn.host == "fn"  # forwarded as without the copy, NATed to the worker
        assert [(s, p["ipv4_dst"], p["tcp_src"]) for s, p in net.copies] == [
            (edge, g.graph["vip"], port)]
        net.copies.clear()
        synack = net.send("fn", {**_reply(g, "fn", client, port), "tcp_flags": 0x012})
        data = net.send("fn", {**_reply(g, "fn", client, port), "tcp_flags": 0x018})  # PSH ACK
        assert synack.host == data.host == client and not net.copies
        fin = net.send("fn", {**_reply(g, "fn", client, port), "tcp_flags": 0x011})  # FIN ACK
        assert fin.host == client and fin.packet["ipv4_src"] == g.graph["vip"]
        # the copy is taken before conntrack undoes the NAT: its source is the worker
        assert [(s, p["ipv4_src"], p["tcp_dst"]) for s, p in net.copies] == [
            (edge, g.nodes["fn"]["ip"], port)]
        net.copies.clear()
        ack = net.send(client, {**_request(g, client, DSCP_HP, port), "tcp_flags": 0x010})
        client_fin = net.send(client, {**_request(g, client, DSCP_HP, port), "tcp_flags": 0x011})
        assert ack.host == client_fin.host == "fn" and not net.copies
    copying = [s for s in topo.switches()
               if any(f.priority == PRIO_OBSERVE for f in base_flows(
                   topo, s, next_hops(g), True, measure_rt=True))]
    assert copying == edge_switches(topo)


@pytest.mark.parametrize("topology", [{"kind": "star"}, {"kind": "line", "length": 3}])
def test_a_sampled_port_also_shows_its_handshake(topology: dict[str, Any]) -> None:
    g, _, net = _net(topology, measure_rt=True)
    port = 40000  # & LEG_SAMPLE_MASK == 0
    assert port & LEG_SAMPLE_MASK == 0
    edge = g.nodes["c1"]["switch"]
    net.send("c1", {**_request(g, "c1", DSCP_HP, port), "tcp_flags": 0x002})
    net.copies.clear()
    synack = net.send("fn", {**_reply(g, "fn", "c1", port), "tcp_flags": 0x012})
    ack = net.send("c1", {**_request(g, "c1", DSCP_HP, port), "tcp_flags": 0x010})
    data = net.send("c1", {**_request(g, "c1", DSCP_HP, port), "tcp_flags": 0x018})
    assert synack.host == "c1" and ack.host == data.host == "fn"
    assert [(s, p["tcp_flags"]) for s, p in net.copies] == [(edge, 0x012), (edge, 0x010)]


def test_measuring_a_per_request_policy_adds_no_second_syn_copy() -> None:
    g, _, net = _net({"kind": "line", "length": 3}, proactive=False, measure_rt=True)
    d = net.send("c1", {**_request(g, "c1", 0), "tcp_flags": 0x002})
    assert d.to_controller == "s1" and not net.copies  # the decision's packet-in is the SYN


def test_measuring_one_connection_in_n_copies_only_its_ports() -> None:
    g, _, net = _net({"kind": "star"}, measure_rt=4)  # ports with bits 1-2 zero
    for port, timed in ((40000, True), (40001, True), (40002, False), (40004, False),
                        (40008, True)):
        net.copies.clear()
        syn = net.send("c1", {**_request(g, "c1", DSCP_HP, port), "tcp_flags": 0x002})
        fin = net.send("fn", {**_reply(g, "fn", "c1", port), "tcp_flags": 0x011})
        assert syn.host == "fn" and fin.host == "c1"
        assert len(net.copies) == (2 if timed else 0), port
    assert sample_mask(1) == 0 and sample_mask(8) == 0b1110
    with pytest.raises(ValueError, match="power of two"):
        sample_mask(6)


def test_a_connecting_switch_gets_its_groups_then_base_then_stage_flows() -> None:
    g = scenario_graph(parse_scenario(scenario_dict()))
    topo, hops = Topology.of(g), next_hops(g)
    (edge,) = edge_switches(topo)
    ips = ["10.0.0.1", "10.0.0.2"]
    groups, flows, tables = switch_start(topo, edge, hops, True, 0, ips)
    assert groups == failover_groups(topo, edge, hops, add=True)
    assert flows == base_flows(topo, edge, hops, True, 0) + stage_flows(topo, edge, ips)
    assert len(stage_flows(topo, edge, ips)) == 2  # one per stage, on the edge switch
    # it then holds table 2 as sent: a re-route along the same paths changes nothing
    assert tables.changes(failover_groups(topo, edge, hops, add=False),
                          forward_flows(topo, edge, hops)) == ([], [])
    assert switch_start(topo, edge, hops, False, 0, [])[1] == base_flows(topo, edge, hops,
                                                                         False, 0)


def test_a_host_behind_a_link_element_answers_its_own_arp() -> None:
    """The switch does not answer for a host whose own link is emulated: the exchange
    crosses the element (its delay, its per-peer table) as the host's other frames do."""
    g = scenario_graph(parse_scenario(scenario_dict(topology={"kind": "line", "length": 3})))
    fn, c1 = g.nodes["fn"], g.nodes["c1"]
    g.edges["fn", fn["switch"]]["delay_ms"] = 0.5
    topo, hops = Topology.of(g), next_hops(g)
    net = FakeNetwork(g, {s: base_flows(topo, s, hops, True) for s in topo.switches()},
                      {s: failover_groups(topo, s, hops, add=True) for s in topo.switches()})
    ask = {"eth_type": ETH_ARP, "arp_op": 1, "eth_src": c1["mac"], "arp_sha": c1["mac"],
           "arp_spa": c1["ip"]}
    to_fn = net.send("c1", {**ask, "arp_tpa": fn["ip"]})
    assert to_fn.host == "fn" and to_fn.packet["arp_op"] == 1  # forwarded, not answered
    ofn = g.nodes["ofn1"]
    to_ofn = net.send("c1", {**ask, "arp_tpa": ofn["ip"]})  # its link is not emulated
    assert to_ofn.host == "c1" and to_ofn.packet["arp_op"] == 2
