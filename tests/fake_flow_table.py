"""A small fake of OVS's tables for the pipeline's unit tests: packets in, ports out.

It interprets `fogsdn.controller.pipeline` flows the way OVS does for what the pipeline uses:
highest-priority match per table, apply-actions in order, goto forward, select groups,
and one conntrack table shared by every bridge (as in OVS's userspace datapath) with
commit + dst-NAT and the reverse NAT of replies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from fogsdn.controller.flow_tables import TABLE_DISPATCH
from fogsdn.controller.pipeline import (
    CT_NEW_TRK,
    ETH_IPV4,
    AnswerArp,
    Conntrack,
    Flood,
    Flow,
    Group,
    GroupMod,
    Output,
    SetField,
    ToController,
    connection_actions,
)

IN_PORT = -2  # back out of the port the packet came in on (OFPP_IN_PORT)

CT_NEW, CT_EST, CT_RPL, CT_TRK = 0x01, 0x02, 0x08, 0x20
Packet = dict[str, Any]
Key = tuple[str, int, str, int]


def decided_connection(client_ip: str, client_port: int, vip: str, service_port: int,
                       worker_ip: str) -> Flow:
    """The controller's decision for one connection as a rule the fake network can hold:
    live, the decided SYN leaves by a packet-out with `connection_actions`, which a
    FakeNetwork cannot receive, so the test installs this 5-tuple rule in its stead."""
    return Flow(TABLE_DISPATCH, 400,
                tuple({"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_src": client_ip,
                       "tcp_src": client_port, "ipv4_dst": vip, "tcp_dst": service_port,
                       "ct_state": CT_NEW_TRK}.items()),
                connection_actions(worker_ip))


@dataclass
class Delivery:
    host: str | None  # where the packet left the network (None: dropped or to controller)
    packet: Packet
    switches: list[str] = field(default_factory=list)
    to_controller: str | None = None  # the switch that sent it up


def _matches(match: Mapping[str, Any], pkt: Packet) -> bool:
    for k, v in match.items():
        if isinstance(v, tuple):  # masked: (value, mask)
            value, mask = v
            if pkt.get(k, 0) & mask != value:
                return False
        elif pkt.get(k) != v:
            return False
    return True


class FakeNetwork:
    def __init__(self, g: nx.Graph, flows: Mapping[str, Sequence[Flow]],
                 groups: Mapping[str, Sequence[GroupMod]] | None = None,
                 pick: Callable[[Sequence[int]], int] | None = None) -> None:
        self.g = g
        self.tables: dict[str, list[Flow]] = {}
        self.groups: dict[str, dict[int, GroupMod]] = {}
        for s, fl in flows.items():
            self.install(s, fl)
        for s, gm in (groups or {}).items():
            self.install_groups(s, gm)
        self.pick = pick or (lambda weights: 0)
        self.conntrack: list[tuple[Key, Key, str]] = []  # (original, reply, nat dst)
        self.down: set[str] = set()  # link ids
        self.copies: list[tuple[str, Packet]] = []  # header copies sent up (switch, packet)

    def install(self, switch: str, flows: Sequence[Flow]) -> None:
        """Add or replace (same table, priority and match), as OFPFC_ADD does."""
        table = self.tables.setdefault(switch, [])
        for f in flows:
            table[:] = [x for x in table if (x.table, x.priority, x.match)
                        != (f.table, f.priority, f.match)]
            table.append(f)

    def install_groups(self, switch: str, mods: Sequence[GroupMod]) -> None:
        for m in mods:
            self.groups.setdefault(switch, {})[m.group_id] = m

    # -- conntrack --------------------------------------------------------------
    def _ct(self, pkt: Packet, action: Conntrack) -> None:
        key: Key = (pkt["ipv4_src"], pkt.get("tcp_src", 0), pkt["ipv4_dst"], pkt.get("tcp_dst", 0))
        if action.commit:
            if pkt.get("ct_state", 0) & CT_NEW and action.nat_dst is not None:
                reply: Key = (action.nat_dst, key[3], key[0], key[1])
                self.conntrack.append((key, reply, action.nat_dst))
                pkt["ipv4_dst"] = action.nat_dst
            return
        for orig, reply, nat in self.conntrack:
            if key == orig:
                pkt["ct_state"] = CT_TRK | CT_EST
                pkt["ipv4_dst"] = nat
                return
            if key == reply:
                pkt["ct_state"] = CT_TRK | CT_EST | CT_RPL
                pkt["ipv4_src"] = orig[2]  # un-NAT: the reply comes from the service address
                return
        pkt["ct_state"] = CT_TRK | CT_NEW

    # -- one switch -------------------------------------------------------------------
    def _run(self, switch: str, pkt: Packet, table: int) -> tuple[list[int], bool]:
        """Ports out (OFPP_FLOOD expanded by the caller as -1) and whether sent up."""
        ports: list[int] = []
        while True:
            cands = [f for f in self.tables.get(switch, []) if f.table == table
                     and _matches(f.match_dict(), pkt)]
            if not cands:
                return ports, False
            f = max(cands, key=lambda x: x.priority)
            nxt: int | None = f.goto
            for a in f.actions:
                if isinstance(a, SetField):
                    pkt[a.name] = a.value
                elif isinstance(a, Output):
                    ports.append(a.port)
                elif isinstance(a, Flood):
                    ports.append(-1)
                elif isinstance(a, AnswerArp):  # the request becomes the reply, sent back
                    pkt.update(eth_dst=pkt.get("eth_src"), eth_src=a.mac, arp_op=2,
                               arp_tha=pkt.get("arp_sha"), arp_tpa=pkt.get("arp_spa"),
                               arp_sha=a.mac, arp_spa=a.ip)
                    ports.append(IN_PORT)
                elif isinstance(a, ToController) and a.max_len is not None:
                    self.copies.append((switch, dict(pkt)))  # a copy; the packet goes on
                elif isinstance(a, ToController):
                    return ports, True
                elif isinstance(a, Group):
                    mod = self.groups[switch][a.group_id]
                    if mod.kind == "fast_failover":  # the first bucket whose port is live
                        live = [i for i, p in enumerate(mod.watch_ports)
                                if self._live(switch, p)]
                        if not live:
                            return ports, False
                        acts = mod.buckets[live[0]][1]
                    elif not mod.buckets:
                        return ports, False
                    else:
                        acts = mod.buckets[self.pick([b[0] for b in mod.buckets])][1]
                    for b in acts:
                        if isinstance(b, SetField):
                            pkt[b.name] = b.value
                        elif isinstance(b, Output):
                            ports.append(b.port)
                        else:
                            assert isinstance(b, Conntrack)
                            self._ct(pkt, b)
                            nxt = b.recirc_table
                elif isinstance(a, Conntrack):
                    self._ct(pkt, a)
                    nxt = a.recirc_table
            if nxt is None:
                return ports, False
            assert nxt >= table or any(isinstance(a, Conntrack) for a in f.actions), "goto back"
            table = nxt

    def _live(self, switch: str, port: int) -> bool:
        try:
            self._peer(switch, port)
        except LookupError:
            return False
        return True

    def _peer(self, switch: str, port: int) -> tuple[str, int | None]:
        for n in self.g.neighbors(switch):
            d = self.g.edges[switch, n]
            if d["ports"].get(switch) == port and d["id"] not in self.down:
                return n, d["ports"].get(n)
        raise LookupError(f"{switch} has no live port {port}")

    # -- the network -------------------------------------------------------------------
    def send(self, host: str, pkt: Packet) -> Delivery:
        """Inject a packet from `host`; follow it to the host it reaches (one copy)."""
        pkt = dict(pkt)
        d = self.g.nodes[host]
        switch, in_port = d["switch"], d["port"]
        visited: list[str] = []
        for _ in range(32):
            visited.append(switch)
            pkt["in_port"] = in_port
            pkt.pop("ct_state", None)
            ports, up = self._run(switch, pkt, 0)
            if up:
                return Delivery(None, pkt, visited, switch)
            if -1 in ports:  # flood: the copy that reaches a host other than the sender
                ports = [p for s, n in self.g.edges(switch)
                         for p in [self.g.edges[s, n]["ports"][switch]] if p != in_port]
            out = [in_port] if IN_PORT in ports else [p for p in ports if p != in_port]
            if not out:
                return Delivery(None, pkt, visited)
            try:
                peer, peer_port = self._peer(switch, out[0])
            except LookupError:
                return Delivery(None, pkt, visited)
            if self.g.nodes[peer]["kind"] == "host":
                return Delivery(peer, pkt, visited)
            switch, in_port = peer, peer_port
        raise AssertionError(f"forwarding loop: {visited}")
