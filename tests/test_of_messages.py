"""The pipeline's messages as os-ken objects (fogsdn.controller.of_messages), against os-ken's own
OpenFlow 1.3 parser and a stand-in datapath: no switch, no root."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from conftest import scenario_dict
from os_ken.lib.packet import arp, ethernet, packet
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from fogsdn.controller.flow_tables import TABLE_DISPATCH, TABLE_FORWARD
from fogsdn.controller.of_messages import (
    NX_CT_F_COMMIT,
    NX_NAT_F_DST,
    arp_reply,
    delete_all_groups,
    flow_mod,
    group_mod,
    of_action,
    packet_out,
)
from fogsdn.controller.pipeline import (
    AnswerArp,
    Conntrack,
    Flood,
    Flow,
    Group,
    GroupMod,
    Output,
    PerConnection,
    SetField,
    ToController,
    Topology,
    base_flows,
    connection_actions,
    failover_groups,
    forward_flows,
)
from fogsdn.core.routing import next_hops
from fogsdn.core.scenario import parse_scenario, scenario_graph

DP = SimpleNamespace(ofproto=ofp, ofproto_parser=parser, id=1)


def _wire(msg: Any) -> bytes:
    msg.xid = 7
    msg.serialize()
    return bytes(msg.buf)


def _parsed(msg: Any) -> Any:
    """The message as a switch would read it off the wire."""
    buf = _wire(msg)
    return parser.msg_parser(DP, ofp.OFP_VERSION, msg.msg_type, len(buf), 7, buf)


def test_a_connections_decision_commits_and_nats_to_the_worker_in_a_rule_too() -> None:
    match = (("eth_type", 0x0800), ("ip_proto", 6), ("ipv4_src", "10.0.0.11"),
             ("tcp_src", 40000), ("ct_state", (0x21, 0x21)))
    f = Flow(TABLE_DISPATCH, 400, match, connection_actions("10.0.0.2"), idle_timeout=2)
    got = _parsed(flow_mod(DP, f))
    assert (got.table_id, got.priority, got.idle_timeout) == (TABLE_DISPATCH, 400, 2)
    assert dict(got.match.items()) == dict(match)
    (apply,) = got.instructions
    (ct,) = apply.actions
    assert (ct.flags, ct.recirc_table) == (NX_CT_F_COMMIT, TABLE_FORWARD)
    (nat,) = ct.actions
    assert (nat.flags, nat.range_ipv4_min, nat.range_ipv4_max) == (
        NX_NAT_F_DST, "10.0.0.2", "10.0.0.2")


@pytest.mark.parametrize("topology", [{"kind": "star"}, {"kind": "multipath"}])
def test_every_message_of_a_switch_reads_back_as_it_was_built(topology: dict[str, Any]) -> None:
    g = scenario_graph(parse_scenario(scenario_dict(topology=topology)))
    topo, hops = Topology.of(g), next_hops(g)
    for switch in topo.switches():
        for f in (base_flows(topo, switch, hops, True, 16)
                  + base_flows(topo, switch, hops, False) + forward_flows(topo, switch, hops)):
            got = _parsed(flow_mod(DP, f))
            assert (got.table_id, got.priority) == (f.table, f.priority)
            assert dict(got.match.items()) == f.match_dict()
            kinds = [type(i).__name__ for i in got.instructions]
            assert kinds == (["OFPInstructionActions"] if f.actions else []) + (
                ["OFPInstructionGotoTable"] if f.goto is not None else [])
            if f.actions:  # AnswerArp is eight OpenFlow actions, the others one each
                assert len(got.instructions[0].actions) == sum(
                    8 if isinstance(a, AnswerArp) else 1 for a in f.actions)


def test_actions_translate_one_for_one() -> None:
    assert of_action(DP, Output(3)).port == 3
    assert of_action(DP, Flood()).port == ofp.OFPP_FLOOD
    whole = of_action(DP, ToController())
    assert (whole.port, whole.max_len) == (ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
    assert of_action(DP, ToController(128)).max_len == 128
    assert of_action(DP, SetField("eth_dst", "02:00:00:00:00:01")).value == "02:00:00:00:00:01"
    assert of_action(DP, Group(1001)).group_id == 1001
    ct = of_action(DP, Conntrack(TABLE_DISPATCH))  # no commit, NAT undone
    assert (ct.flags, ct.recirc_table, ct.actions[0].flags) == (0, TABLE_DISPATCH, 0)
    staged = of_action(DP, Conntrack(TABLE_FORWARD, True, "10.0.0.3", nat_port=9000))
    assert (staged.actions[0].range_proto_min, staged.actions[0].range_proto_max) == (9000, 9000)
    with pytest.raises(TypeError, match="unknown pipeline action"):
        of_action(DP, "drop")  # type: ignore[arg-type]


def test_select_and_fast_failover_groups() -> None:
    sel = group_mod(DP, GroupMod(1, ((700, (Output(1),)), (300, (Output(2),))), add=True))
    assert (sel.command, sel.type, sel.group_id) == (ofp.OFPGC_ADD, ofp.OFPGT_SELECT, 1)
    assert [(b.weight, b.watch_port) for b in sel.buckets] == [(700, ofp.OFPP_ANY),
                                                             (300, ofp.OFPP_ANY)]
    g = scenario_graph(parse_scenario(scenario_dict(topology={"kind": "multipath"})))
    topo, hops = Topology.of(g), next_hops(g)
    ff = next(m for s in topo.switches() for m in failover_groups(topo, s, hops, add=False))
    got = group_mod(DP, ff)
    assert (got.command, got.type) == (ofp.OFPGC_MODIFY, ofp.OFPGT_FF)
    assert [(b.weight, b.watch_port) for b in got.buckets] == [(0, p) for p in ff.watch_ports]
    for msg in (sel, got, delete_all_groups(DP)):
        assert _wire(msg)  # serialises
    assert (delete_all_groups(DP).command, delete_all_groups(DP).group_id) == (
        ofp.OFPGC_DELETE, ofp.OFPG_ALL)


def test_a_one_bucket_group_is_indirect_and_changes_type_with_its_buckets() -> None:
    # a select group would hash in the datapath and recirculate into a cached flow that
    # keeps the old bucket until OVS revalidates it; one bucket needs no choice
    one = group_mod(DP, GroupMod(2, ((1000, (Output(1),)),), add=False))
    assert (one.command, one.type) == (ofp.OFPGC_MODIFY, ofp.OFPGT_INDIRECT)
    assert [b.weight for b in one.buckets] == [0]  # weights belong to select groups
    two = group_mod(DP, GroupMod(2, ((600, (Output(1),)), (400, (Output(2),))), add=False))
    assert (two.type, [b.weight for b in two.buckets]) == (ofp.OFPGT_SELECT, [600, 400])
    none = group_mod(DP, GroupMod(2, (), add=False))
    assert none.type == ofp.OFPGT_SELECT and not none.buckets  # no serving node: drop
    for msg in (one, two, none):
        assert _wire(msg)


def test_per_connection_is_a_one_link_multipath_over_the_5_tuple() -> None:
    a = of_action(DP, PerConnection())
    assert isinstance(a, parser.NXActionMultipath)
    assert (a.fields, a.max_link, a.dst, a.ofs_nbits) == (1, 0, "reg7", 0)  # symmetric_l4
    g = scenario_graph(parse_scenario(scenario_dict()))
    proactive = base_flows(Topology.of(g), "s1", next_hops(g), proactive=True)
    dispatch = [f for f in proactive if any(isinstance(x, Group) for x in f.actions)]
    assert dispatch and all(f.actions[0] == PerConnection() for f in dispatch)
    assert _wire(flow_mod(DP, dispatch[0]))


def test_answer_arp_rewrites_the_request_into_the_reply_and_sends_it_back() -> None:
    topo, switch, hops = _line_topo()
    answer = [x for x in base_flows(topo, switch, hops, proactive=True)
              if any(isinstance(a, AnswerArp) for a in x.actions)]
    assert len(answer) == len(topo.hosts())  # one per host, at every switch
    msg = _parsed(flow_mod(DP, answer[0]))  # what the switch reads off the wire
    acts = msg.instructions[0].actions
    moves = [(a.src_field, a.dst_field, a.n_bits) for a in acts
             if isinstance(a, parser.NXActionRegMove)]
    assert moves == [("eth_src", "eth_dst", 48), ("arp_sha", "arp_tha", 48),
                     ("arp_spa", "arp_tpa", 32)]
    sets = {a.key: a.value for a in acts if isinstance(a, parser.OFPActionSetField)}
    mac, ip = answer[0].actions[0].mac, answer[0].actions[0].ip
    assert sets == {"eth_src": mac, "arp_op": 2, "arp_sha": mac, "arp_spa": ip}
    assert acts[-1].port == ofp.OFPP_IN_PORT
    assert msg.match["arp_tpa"] == ip and msg.match["arp_op"] == 1


def _line_topo() -> tuple[Topology, str, Any]:
    g = scenario_graph(parse_scenario(scenario_dict(topology={"kind": "line", "length": 3})))
    return Topology.of(g), "s1", next_hops(g)


def test_packet_out_from_a_port_or_from_the_controller() -> None:
    syn = packet_out(DP, connection_actions("10.0.0.2"), b"\x00" * 60, in_port=4)
    assert (syn.in_port, syn.buffer_id, syn.data) == (4, ofp.OFP_NO_BUFFER, b"\x00" * 60)
    assert syn.actions[0].recirc_table == TABLE_FORWARD
    own = packet_out(DP, [Output(4)], b"\x01" * 42)
    assert own.in_port == ofp.OFPP_CONTROLLER and own.actions[0].port == 4
    assert _wire(syn) and _wire(own)


def test_arp_reply_answers_the_requester_with_the_service_mac() -> None:
    req = arp.arp(opcode=arp.ARP_REQUEST, src_mac="02:00:00:00:00:0b", src_ip="10.0.0.11",
                  dst_mac="00:00:00:00:00:00", dst_ip="10.0.0.250")
    pkt = packet.Packet(arp_reply(req, "10.0.0.250", "02:00:00:00:00:fa"))
    eth, rep = pkt.get_protocol(ethernet.ethernet), pkt.get_protocol(arp.arp)
    assert (eth.src, eth.dst) == ("02:00:00:00:00:fa", "02:00:00:00:00:0b")
    assert (rep.opcode, rep.src_mac, rep.src_ip, rep.dst_mac, rep.dst_ip) == (
        arp.ARP_REPLY, "02:00:00:00:00:fa", "10.0.0.250", "02:00:00:00:00:0b", "10.0.0.11")
