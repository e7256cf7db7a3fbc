"""The OpenFlow pipeline for one datapath, as plain data (pure; no os-ken, no I/O).

As Faucet's valve modules do, this returns the messages and the os-ken app only sends
them, so the pipeline is tested against a fake flow table without root. The three
tables are described in docs/architecture.md. On many switches, only IPv4 that concerns
a local client goes through ct() to table 1 (the userspace datapath's bridges share one
conntrack table), other IPv4 straight to table 2, which forwards along the shortest-by-
delay tree or a pinned path, through a fast-failover group where a backup port exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypedDict

import networkx as nx

from fogsdn.controller.flow_tables import (
    CT_ZONE,
    GROUP_ID,
    TABLE_CLASSIFY,
    TABLE_DISPATCH,
    TABLE_FORWARD,
)
from fogsdn.core.routing import NextHops
from fogsdn.core.scenario import TaskClass
from fogsdn.core.topology import link_params

ETH_IPV4, ETH_ARP, ETH_IPV6 = 0x0800, 0x0806, 0x86DD
CT_NEW_TRK = (0x01 | 0x20, 0x01 | 0x20)  # +new+trk
DSCP_HP = 46
PRIO_PINNED = 150
PRIO_ARP_ANSWER = 870  # under the service address's (900), over forwarding (850)
FAILOVER_GROUP_BASE = 1000  # + the host's index: its fast-failover group on each switch


# -- actions and messages, as data -------------------------------------------------------
@dataclass(frozen=True)
class Output:
    port: int


@dataclass(frozen=True)
class Flood:
    pass


@dataclass(frozen=True)
class ToController:
    max_len: int | None = None  # bytes of the packet sent; None: all of it


OBSERVE_MAX_LEN = 128  # a copy for the controller's timer: headers only (rt_measure)
TCP_FLAGS_FIN = (0x001, 0x001)
TCP_FLAGS_CLIENT_SYN = (0x002, 0x012)  # SYN set, ACK clear
TCP_FLAGS_SYNACK = (0x012, 0x012)
TCP_FLAGS_PURE_ACK = (0x010, 0x01F)  # ACK, no FIN/SYN/RST/PSH
# one client port in 16 also shows its handshake (bit 0 skipped: connect() ports are even)
LEG_SAMPLE_MASK = 0x1E
PRIO_OBSERVE = 520  # above every IPv4 rule of table 0


@dataclass(frozen=True)
class SetField:
    name: str  # an OXM field name: eth_src, eth_dst
    value: str


@dataclass(frozen=True)
class Group:
    group_id: int


@dataclass(frozen=True)
class Conntrack:
    """ct(zone=CT_ZONE, [commit], nat[(dst=nat_dst)], table=recirc_table)."""

    recirc_table: int
    commit: bool = False
    nat_dst: str | None = None
    zone: int = CT_ZONE
    nat_port: int | None = None  # also rewrite the TCP destination port (size stages)


@dataclass(frozen=True)
class PerConnection:
    """A one-link multipath hash that changes nothing but keys OVS's cached flow per
    connection, so no stale cached dispatch outlives a change (docs/emulation.md)."""


@dataclass(frozen=True)
class AnswerArp:
    """The switch answers an ARP request for (`ip`, `mac`) itself, out of its in-port:
    the request wakes no switch on the way (seed 002a's network power)."""

    mac: str
    ip: str


Action = Output | Flood | ToController | SetField | Group | Conntrack | PerConnection | AnswerArp
# an OXM field's value in a match: a number, an address, or (value, mask)
MatchValue = int | str | tuple[int, int]
# what makes two flows the same entry to the switch: table, priority, match
FlowEntry = tuple[int, int, tuple[tuple[str, MatchValue], ...]]


class Match(TypedDict, total=False):
    """The OXM fields this pipeline matches on, for a match built ahead of its `flow`."""

    eth_type: int
    in_port: int
    ip_proto: int
    ip_dscp: int
    ipv4_src: str
    ipv4_dst: str
    tcp_src: int | tuple[int, int]
    tcp_dst: int | tuple[int, int]
    tcp_flags: tuple[int, int]
    ct_state: tuple[int, int]
    arp_op: int
    arp_tpa: str


@dataclass(frozen=True)
class Flow:
    table: int
    priority: int
    match: tuple[tuple[str, MatchValue], ...]
    actions: tuple[Action, ...] = ()
    goto: int | None = None
    idle_timeout: int = 0
    cookie: int = 0  # DECIDE_COOKIE: the rule the runner removes when the controller dies

    def match_dict(self) -> dict[str, MatchValue]:
        return dict(self.match)

    @property
    def entry(self) -> FlowEntry:
        """What makes two flows the same entry to the switch (a flow-mod replaces it)."""
        return (self.table, self.priority, self.match)


@dataclass(frozen=True)
class GroupMod:
    group_id: int
    buckets: tuple[tuple[int, tuple[Action, ...]], ...]  # (weight, actions)
    add: bool  # add (first install) or modify
    kind: Literal["select", "fast_failover"] = "select"
    watch_ports: tuple[int, ...] = ()  # fast failover: the live port each bucket needs


def flow(table: int, priority: int, actions: Sequence[Action] = (), goto: int | None = None,
         cookie: int = 0, **match: MatchValue) -> Flow:
    return Flow(table, priority, tuple(match.items()), tuple(actions), goto, cookie=cookie)


# -- the datapath's view of the network ----------------------------------------------------
@dataclass(frozen=True)
class Topology:
    """What the pipeline needs of the graph, for every switch."""

    graph: nx.Graph
    vip: str
    vip_mac: str
    service_port: int
    pinned: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, g: nx.Graph) -> Topology:
        return cls(g, g.graph["vip"], g.graph["vip_mac"], int(g.graph["service_port"]))

    def switches(self) -> list[str]:
        return [n for n, d in self.graph.nodes(data=True) if d["kind"] == "switch"]

    def hosts(self) -> list[tuple[str, dict[str, Any]]]:
        return [(n, d) for n, d in self.graph.nodes(data=True) if d["kind"] == "host"]

    def clients(self) -> list[tuple[str, dict[str, Any]]]:
        return [(n, d) for n, d in self.hosts() if d["role"] == "client"]

    def local_clients(self, switch: str) -> list[tuple[str, dict[str, Any]]]:
        return [(n, d) for n, d in self.clients() if d["switch"] == switch]

    def single(self) -> bool:
        return len(self.switches()) == 1

    def switch_of_dpid(self, dpid: int) -> str | None:
        """On a one-switch topology any datapath is that switch (the benchmark's fakes)."""
        name = next((n for n in self.switches() if self.graph.nodes[n]["dpid"] == dpid), None)
        return self.switches()[0] if name is None and self.single() else name

    def peer(self, switch: str, port: int) -> str | None:
        """The node at the other end of `switch`'s `port` (None: no link there)."""
        g = self.graph
        return next((n for n in g.neighbors(switch)
                     if g.edges[switch, n]["ports"].get(switch) == port), None)


@dataclass
class SwitchTables:
    """What one datapath holds of table 2 and its fast-failover groups, so that a change
    sends only what differs."""

    forwarding: dict[FlowEntry, Flow] = field(default_factory=dict)
    failover: dict[int, GroupMod] = field(default_factory=dict)

    @classmethod
    def installed(cls, groups: Sequence[GroupMod], flows: Sequence[Flow]) -> SwitchTables:
        """A switch just sent `groups` (added) and `flows`."""
        return cls({f.entry: f for f in flows}, {g.group_id: replace(g, add=False) for g in groups})

    def changes(self, groups: Sequence[GroupMod], flows: Sequence[Flow]
                ) -> tuple[list[GroupMod], list[Flow]]:
        """What brings the switch to `groups` (built with add=False) and `flows`, as sent."""
        send_groups = []
        for g in groups:
            if self.failover.get(g.group_id) != g:
                send_groups.append(replace(g, add=g.group_id not in self.failover))
                self.failover[g.group_id] = g
        send_flows = []
        for f in flows:
            if self.forwarding.get(f.entry) != f:
                send_flows.append(f)
                self.forwarding[f.entry] = f
        return send_groups, send_flows


# -- the pipeline -------------------------------------------------------------------------------
def base_flows(topo: Topology, switch: str, hops: NextHops, proactive: bool,
               measure_rt: int = 0) -> list[Flow]:
    """Everything a switch needs at start, table-miss last (its presence says 'ready');
    with `measure_rt` N > 0, `observe_flows` for one connection in N."""
    out: list[Flow] = [flow(TABLE_CLASSIFY, 1000, eth_type=ETH_IPV6)]
    clients = topo.local_clients(switch)
    edge = bool(clients) or topo.single()
    if edge:
        out.append(flow(TABLE_CLASSIFY, 900, [ToController()], eth_type=ETH_ARP, arp_op=1,
                        arp_tpa=topo.vip))
    if topo.single():
        out.append(flow(TABLE_CLASSIFY, 800, [Flood()], eth_type=ETH_ARP))
        out.append(flow(TABLE_CLASSIFY, 500, [Conntrack(TABLE_DISPATCH)], eth_type=ETH_IPV4))
    else:  # ARP towards its target comes with forward_flows
        out.append(flow(TABLE_CLASSIFY, 800, eth_type=ETH_ARP))  # unknown target: drop
        for _, c in clients:
            out.append(flow(TABLE_CLASSIFY, 510, [Conntrack(TABLE_DISPATCH)], eth_type=ETH_IPV4,
                            in_port=int(c["port"])))
            out.append(flow(TABLE_CLASSIFY, 500, [Conntrack(TABLE_DISPATCH)], eth_type=ETH_IPV4,
                            ipv4_dst=c["ip"]))
        out.append(flow(TABLE_CLASSIFY, 400, goto=TABLE_FORWARD, eth_type=ETH_IPV4))
    if edge:
        new_svc: Match = {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_dst": topo.vip,
                          "tcp_dst": topo.service_port, "ct_state": CT_NEW_TRK}
        # the policy's routes as select groups: the whole dispatch of a proactive policy,
        # and a per-request policy's fallback while its controller is away
        pin = [PerConnection()]  # each SYN translated afresh (PerConnection)
        out.append(flow(TABLE_DISPATCH, 300, [*pin, Group(GROUP_ID[TaskClass.HP])],
                        ip_dscp=DSCP_HP, **new_svc))
        out.append(flow(TABLE_DISPATCH, 290, [*pin, Group(GROUP_ID[TaskClass.LP])], **new_svc))
        if not proactive:  # a per-request policy sees each new connection's first packet
            out.append(flow(TABLE_DISPATCH, PRIO_DECIDE, [ToController()],
                            cookie=DECIDE_COOKIE, **new_svc))
        out.append(flow(TABLE_DISPATCH, 1, goto=TABLE_FORWARD))
    out += forward_flows(topo, switch, hops)  # its groups: failover_groups, sent first
    if measure_rt:
        out += observe_flows(topo, switch, proactive, sample_mask(measure_rt))
    out.append(flow(TABLE_CLASSIFY, 0, [ToController()]))
    return out


# a per-request policy's rule, above the select groups: the runner deletes it by its
# cookie the moment the controller dies, so that new connections fall back to the groups
# (the policy's own routes) until a restarted controller puts it back
PRIO_DECIDE = 310
DECIDE_COOKIE = 0xF065D0


def sample_mask(one_in: int) -> int:
    """The client-port bits (from bit 1: connect() ports are even) that must be 0 for a
    connection to be timed, one in `one_in` (a power of two)."""
    if one_in < 1 or one_in & (one_in - 1):
        raise ValueError(f"measure_rt: one connection in N needs N a power of two, got {one_in}")
    return (one_in - 1) << 1


def observe_flows(topo: Topology, switch: str, proactive: bool, mask: int = 0) -> list[Flow]:
    """At a client's edge switch, header copies to the controller's timer of client SYNs,
    server FINs and a sample's handshake (docs/learning.md, "Response time measured by
    the controller"); `mask`: only client ports with these bits 0 are copied."""
    if switch not in edge_switches(topo):
        return []
    def copy(**match: MatchValue) -> Flow:  # flow(..., eth_type=ETH_IPV4, ip_proto=6, **match)
        return Flow(TABLE_CLASSIFY, PRIO_OBSERVE,
                    (("eth_type", ETH_IPV4), ("ip_proto", 6), *match.items()),
                    (ToController(OBSERVE_MAX_LEN), Conntrack(TABLE_DISPATCH)))

    from_sampled: dict[str, MatchValue] = {"tcp_src": (0, mask)} if mask else {}
    to_sampled: dict[str, MatchValue] = {"tcp_dst": (0, mask)} if mask else {}
    out = []
    if proactive:  # a per-request policy's SYN comes up anyway
        out.append(copy(ipv4_dst=topo.vip, tcp_flags=TCP_FLAGS_CLIENT_SYN, **from_sampled))
    out.append(copy(ipv4_dst=topo.vip, tcp_src=(0, LEG_SAMPLE_MASK | mask),
                    tcp_flags=TCP_FLAGS_PURE_ACK))
    for _, c in topo.clients() if topo.single() else topo.local_clients(switch):
        out.append(copy(ipv4_dst=c["ip"], tcp_src=topo.service_port, tcp_flags=TCP_FLAGS_FIN,
                        **to_sampled))
        out.append(copy(ipv4_dst=c["ip"], tcp_src=topo.service_port,
                        tcp_dst=(0, LEG_SAMPLE_MASK | mask), tcp_flags=TCP_FLAGS_SYNACK))
    return out


def arp_flows(topo: Topology, switch: str, hops: NextHops) -> list[Flow]:
    """Many switches: a request for a host is answered by the first switch (AnswerArp)
    unless the host's own link is emulated (the exchange then pays its cost); other ARP
    goes towards its target, never flooded over loops."""
    out = []
    for h, d in topo.hosts():
        if not link_params(topo.graph, h, d["switch"]).shaped:
            out.append(flow(TABLE_CLASSIFY, PRIO_ARP_ANSWER, [AnswerArp(d["mac"], d["ip"])],
                            eth_type=ETH_ARP, arp_op=1, arp_tpa=d["ip"]))
        port = hops.towards(switch, h)
        if port is not None:
            out.append(flow(TABLE_CLASSIFY, 850, [Output(port)], eth_type=ETH_ARP, arp_tpa=d["ip"]))
    return out


def failover_groups(topo: Topology, switch: str, hops: NextHops, add: bool) -> list[GroupMod]:
    """A fast-failover group (primary, then loop-free backup port) per host that has a
    backup here: the switch moves traffic before the controller hears of a failure."""
    out = []
    for i, (h, d) in enumerate(topo.hosts()):
        port, backup = hops.towards(switch, h), hops.backup_towards(switch, h)
        if port is None or backup is None:
            continue
        out.append(GroupMod(FAILOVER_GROUP_BASE + i, tuple(
            (0, (SetField("eth_dst", d["mac"]), Output(p))) for p in (port, backup)),
            add, "fast_failover", (port, backup)))
    return out


def forward_flows(topo: Topology, switch: str, hops: NextHops) -> list[Flow]:
    """Table 2 (and, on many switches, the ARP rules), rewritten on a re-route."""
    out: list[Flow] = []
    for i, (h, d) in enumerate(topo.hosts()):
        port = hops.towards(switch, h)
        acts: list[Action] = []  # cut off: drop rather than fall to the controller
        if port is not None and hops.backup_towards(switch, h) is not None:
            acts = [Group(FAILOVER_GROUP_BASE + i)]
        elif port is not None:
            acts = [SetField("eth_dst", d["mac"]), Output(port)]
        out.append(flow(TABLE_FORWARD, 100, acts, eth_type=ETH_IPV4, ipv4_dst=d["ip"]))
        if port is not None and d["role"] == "client" and d["switch"] == switch:
            out.append(flow(TABLE_FORWARD, 200, [SetField("eth_src", topo.vip_mac),
                                                 SetField("eth_dst", d["mac"]), Output(port)],
                            eth_type=ETH_IPV4, ipv4_src=topo.vip, ipv4_dst=d["ip"]))
    out += pinned_flows(topo, switch)
    if not topo.single():
        out += arp_flows(topo, switch, hops)
    return out


def pinned_flows(topo: Topology, switch: str) -> list[Flow]:
    """A policy's own path for (client, node), both ways, where it passes this switch."""
    g = topo.graph
    out = []
    for (client, node), path in sorted(topo.pinned.items()):
        full = [client, *path, node]
        if switch not in path:
            continue
        i = full.index(switch)
        for src, dst, nxt in ((client, node, full[i + 1]), (node, client, full[i - 1])):
            port = int(g.edges[switch, nxt]["ports"][switch])
            out.append(flow(TABLE_FORWARD, PRIO_PINNED,
                            [SetField("eth_dst", g.nodes[dst]["mac"]), Output(port)],
                            eth_type=ETH_IPV4, ipv4_src=g.nodes[src]["ip"],
                            ipv4_dst=g.nodes[dst]["ip"]))
    return out


def group_mods(buckets: Mapping[TaskClass, Sequence[tuple[str, int]]],
               worker_ip: Mapping[str, str], add: bool) -> list[GroupMod]:
    """Each class's select group: one bucket per serving node, NAT to it, on to table 2."""
    return [
        GroupMod(GROUP_ID[cls], tuple(
            (w, (Conntrack(TABLE_FORWARD, commit=True, nat_dst=worker_ip[node]),))
            for node, w in buckets[cls]), add)
        for cls in GROUP_ID if cls in buckets
    ]


def edge_switches(topo: Topology) -> list[str]:
    """Switches that dispatch: those with clients (the one switch of a star)."""
    if topo.single():
        return topo.switches()
    return sorted({d["switch"] for _, d in topo.clients()})


def stage_flows(topo: Topology, switch: str, stage_ips: Sequence[str]) -> list[Flow]:
    """Size-based dispatch (seed 002b): a new connection to port service + 1 + i is NATed
    to stage i's worker at the service port, with no packet-in."""
    if switch not in edge_switches(topo):
        return []
    out = []
    for i, ip in enumerate(stage_ips):
        out.append(flow(TABLE_DISPATCH, 310,
                        [Conntrack(TABLE_FORWARD, commit=True, nat_dst=ip,
                                   nat_port=topo.service_port)],
                        eth_type=ETH_IPV4, ip_proto=6, ipv4_dst=topo.vip,
                        tcp_dst=topo.service_port + 1 + i, ct_state=CT_NEW_TRK))
    return out


def switch_start(topo: Topology, switch: str, hops: NextHops, proactive: bool, measure_rt: int,
                 stage_ips: Sequence[str]) -> tuple[list[GroupMod], list[Flow], SwitchTables]:
    """What a switch is sent as it connects (groups, then flows) and what it then holds."""
    groups = failover_groups(topo, switch, hops, add=True)
    flows = base_flows(topo, switch, hops, proactive, measure_rt) + stage_flows(
        topo, switch, stage_ips)
    return groups, flows, SwitchTables.installed(groups, forward_flows(topo, switch, hops))


def connection_actions(worker_ip: str) -> tuple[Action, ...]:
    """A per-request decision: commit this connection with NAT to the worker."""
    return (Conntrack(TABLE_FORWARD, commit=True, nat_dst=worker_ip),)


PRIO_CONNECTION_PATH = 160  # above a policy's pinned (client, node) paths


def path_flows(topo: Topology, switches: Sequence[str], client: str, node: str,
               client_port: int, idle_s: int) -> list[tuple[str, Flow]]:
    """One connection's own path (seed 002a) as (switch, table 2 rule) both ways, matched
    after the edge's NAT and expiring `idle_s` after its last packet; the client's edge
    needs none back (its conntrack and client rule deliver the reply)."""
    g = topo.graph
    full = [client, *switches, node]
    c, n = g.nodes[client], g.nodes[node]
    fwd = {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_src": c["ip"], "tcp_src": client_port,
           "ipv4_dst": n["ip"], "tcp_dst": topo.service_port}
    back = {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_src": n["ip"],
            "tcp_src": topo.service_port, "ipv4_dst": c["ip"], "tcp_dst": client_port}
    out = []
    for i, switch in enumerate(full[1:-1], start=1):
        legs = [(fwd, node, full[i + 1])]
        if switch != c["switch"]:
            legs.append((back, client, full[i - 1]))
        for match, dst, nxt in legs:
            port = int(g.edges[switch, nxt]["ports"][switch])
            out.append((switch, Flow(TABLE_FORWARD, PRIO_CONNECTION_PATH, tuple(match.items()),
                                     (SetField("eth_dst", g.nodes[dst]["mac"]), Output(port)),
                                     idle_timeout=idle_s)))
    return out
