"""The pipeline's messages (`fogsdn.controller.pipeline`) as os-ken OpenFlow 1.3 objects.

Builds, sends nothing, so it is tested with a stand-in datapath and os-ken's own parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from os_ken.lib.packet import arp, ethernet, packet

from fogsdn.controller.pipeline import (
    ETH_ARP,
    Action,
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
)

NX_NAT_F_DST = 1 << 1
NX_HASH_FIELDS_SYMMETRIC_L4 = 1
NX_MP_ALG_HRW = 2
NX_CT_F_COMMIT = 1 << 0


def of_action(dp: Any, a: Action) -> Any:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    if isinstance(a, Output):
        return parser.OFPActionOutput(a.port)
    if isinstance(a, Flood):
        return parser.OFPActionOutput(ofp.OFPP_FLOOD)
    if isinstance(a, ToController):
        return parser.OFPActionOutput(ofp.OFPP_CONTROLLER, a.max_len or ofp.OFPCML_NO_BUFFER)
    if isinstance(a, SetField):
        return parser.OFPActionSetField(**{a.name: a.value})
    if isinstance(a, Group):
        return parser.OFPActionGroup(a.group_id)
    if isinstance(a, PerConnection):  # multipath(symmetric_l4, 0, hrw, 1 link, 0, reg7[0])
        return parser.NXActionMultipath(fields=NX_HASH_FIELDS_SYMMETRIC_L4, basis=0,
                                        algorithm=NX_MP_ALG_HRW, max_link=0, arg=0,
                                        ofs_nbits=0, dst="reg7")
    if isinstance(a, Conntrack):
        nat = (parser.NXActionNAT(flags=NX_NAT_F_DST, range_ipv4_min=a.nat_dst,
                                  range_ipv4_max=a.nat_dst, range_proto_min=a.nat_port,
                                  range_proto_max=a.nat_port)
               if a.nat_dst is not None else parser.NXActionNAT(flags=0))
        return parser.NXActionCT(flags=NX_CT_F_COMMIT if a.commit else 0, zone_src="",
                                 zone_ofs_nbits=a.zone, recirc_table=a.recirc_table,
                                 alg=0, actions=[nat])
    raise TypeError(f"unknown pipeline action {a!r}")


def of_actions(dp: Any, actions: Sequence[Action]) -> list[Any]:
    """The actions in order; AnswerArp is several OpenFlow actions."""
    out: list[Any] = []
    for a in actions:
        if isinstance(a, AnswerArp):
            out += _answer_arp(dp, a)
        else:
            out.append(of_action(dp, a))
    return out


def _answer_arp(dp: Any, a: AnswerArp) -> list[Any]:
    """The request made the reply in place, out of the port it came in on."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return [parser.NXActionRegMove(src_field="eth_src", dst_field="eth_dst", n_bits=48),
            parser.OFPActionSetField(eth_src=a.mac),
            parser.OFPActionSetField(arp_op=2),
            parser.NXActionRegMove(src_field="arp_sha", dst_field="arp_tha", n_bits=48),
            parser.NXActionRegMove(src_field="arp_spa", dst_field="arp_tpa", n_bits=32),
            parser.OFPActionSetField(arp_sha=a.mac),
            parser.OFPActionSetField(arp_spa=a.ip),
            parser.OFPActionOutput(ofp.OFPP_IN_PORT)]


def flow_mod(dp: Any, f: Flow) -> Any:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    inst: list[Any] = []
    if f.actions:
        inst.append(parser.OFPInstructionActions(
            ofp.OFPIT_APPLY_ACTIONS, of_actions(dp, f.actions)))
    if f.goto is not None:
        inst.append(parser.OFPInstructionGotoTable(f.goto))
    return parser.OFPFlowMod(dp, table_id=f.table, priority=f.priority,
                             match=parser.OFPMatch(**f.match_dict()), instructions=inst,
                             idle_timeout=f.idle_timeout, cookie=f.cookie)


def flow_delete_strict(dp: Any, f: Flow) -> Any:
    """Remove the one entry with `f`'s table, priority and match."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPFlowMod(dp, table_id=f.table, priority=f.priority,
                             command=ofp.OFPFC_DELETE_STRICT, out_port=ofp.OFPP_ANY,
                             out_group=ofp.OFPG_ANY, match=parser.OFPMatch(**f.match_dict()))


def group_mod(dp: Any, g: GroupMod) -> Any:
    ofp, parser = dp.ofproto, dp.ofproto_parser
    cmd = ofp.OFPGC_ADD if g.add else ofp.OFPGC_MODIFY
    failover, single = g.kind == "fast_failover", len(g.buckets) == 1
    watch = g.watch_ports if failover else [ofp.OFPP_ANY] * len(g.buckets)
    buckets = [parser.OFPBucket(weight=0 if failover or single else w, watch_port=port,
                                watch_group=ofp.OFPG_ANY, actions=of_actions(dp, acts))
               for port, (w, acts) in zip(watch, g.buckets, strict=True)]
    # one bucket: an indirect group, no stale cached hash pass (docs/architecture.md);
    # OVS changes a group's type on MODIFY
    kind = ofp.OFPGT_FF if failover else ofp.OFPGT_INDIRECT if single else ofp.OFPGT_SELECT
    return parser.OFPGroupMod(dp, cmd, kind, g.group_id, buckets)


def delete_all_groups(dp: Any) -> Any:
    """What a restarted controller sends first (the flows that use the groups go too)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, 0, ofp.OFPG_ALL)


def packet_out(dp: Any, actions: Sequence[Action], data: bytes, in_port: int | None = None) -> Any:
    """`data` sent through `actions`, as if from `in_port` (None: the controller)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    return parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                               in_port=ofp.OFPP_CONTROLLER if in_port is None else in_port,
                               actions=of_actions(dp, actions), data=data)


def arp_reply(request: arp.arp, vip: str, vip_mac: str) -> bytes:
    """The frame that answers an ARP request for the service address with its MAC."""
    reply = packet.Packet()
    reply.add_protocol(ethernet.ethernet(dst=request.src_mac, src=vip_mac, ethertype=ETH_ARP))
    reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=vip_mac, src_ip=vip,
                               dst_mac=request.src_mac, dst_ip=request.src_ip))
    reply.serialize()
    return bytes(reply.data)
