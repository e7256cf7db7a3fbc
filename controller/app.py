"""os-ken adapter: OpenFlow events in, the pure pipeline's messages out, around pure policies.

`controller.pipeline` says what each switch holds (tables 0-2, conntrack-NAT dispatch
at the clients' edge switches, forwarding along shortest-by-delay paths); this app
translates those messages into os-ken objects, sends them to every switch of the
topology, and turns OpenFlow events into cluster and link changes. A cluster change
rewrites only the select groups, so established connections keep their worker
(conntrack); a link failure (PortStatus on a switch-to-switch port) rewrites only the
forwarding table along new paths. Each change waits for the barrier replies before it
is acknowledged.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from contextlib import suppress
from dataclasses import replace
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.lib import hub
from os_ken.lib.packet import arp, ethernet, ipv4, packet, tcp
from os_ken.ofproto import ofproto_v1_3

from controller.cluster import ClusterState
from controller.config import ControllerConfig
from controller.flow_tables import GROUP_ID, TABLE_CLASSIFY, bucket_weights
from controller.pipeline import (
    DSCP_HP,
    ETH_ARP,
    Action,
    Conntrack,
    Flood,
    Flow,
    Group,
    GroupMod,
    Output,
    SetField,
    ToController,
    Topology,
    base_flows,
    connection_actions,
    connection_flow,
    edge_switches,
    failover_groups,
    forward_flows,
    group_mods,
    sample_mask,
    stage_flows,
)
from controller.policies import (
    ClusterView,
    Policy,
    PolicyError,
    Request,
    RouteTable,
    is_per_request,
    make_policy,
    policy_failure,
    route_problems,
    routes_for,
    safe_routes,
    stage_plan,
)
from controller.rt_measure import ConnectionTimer, Measurement, PathStats, Segment, parse_segment
from fogsdn.latency import node_net_ms
from fogsdn.local_rpc import recv_line, send_json, unix_call
from fogsdn.routing import next_hops
from fogsdn.scenario import Role, TaskClass, load_scenario
from fogsdn.stages import StagePlan

NX_NAT_F_DST = 1 << 1
NX_CT_F_COMMIT = 1 << 0
BARRIER_TIMEOUT_S = 2.0
# controller-rt.csv, one row per timed connection (docs/learning.md)
RT_COLUMNS = "client,client_port,node,t_syn,t_fin,rt_ms,span_ms,leg_ms\n"
EXPIRE_EVERY_S = 1.0


def _key(f: Flow) -> tuple[Any, ...]:
    """What makes two flow entries the same entry to the switch."""
    return (f.table, f.priority, f.match)


class FogController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        conf = ControllerConfig.from_environment()
        self.fabric = conf.fabric
        scenario = load_scenario(conf.scenario)
        self.policy: Policy = make_policy(scenario.policy, scenario.workload)
        try:  # size-based stages (seed 002b), by TCP destination port
            self.stages = stage_plan(scenario)
        except PolicyError as err:  # e.g. TAGS with no stable cutoffs: no stage rules
            self.stages = StagePlan("none")
            self.logger.error("no size-based stage rules: %s", err)
        self._per_request = is_per_request(self.policy)  # as the simulator decides it
        self.events_path = conf.events
        self.ready_path = conf.ready
        self.registration_path = conf.registration
        self.worker_sockets: dict[str, str] = dict(conf.workers)
        self._rng = random.Random(scenario.seed)
        graph = self.fabric.topology()
        self.topo = replace(Topology.of(graph), pinned=self._pinned_paths(graph))
        # each node's path time in the view (latency-aware policies, issue 9)
        self.cluster = ClusterState.from_scenario(scenario, dict(conf.available),
                                                  node_net_ms(scenario, self.topo.pinned))
        self.failed: set[str] = set()  # link ids with an end reported down
        self.ports_down: set[tuple[str, int]] = set()  # (switch, port) reported down
        self.hops = next_hops(graph)
        self._forwarding: dict[int, dict[tuple[Any, ...], Flow]] = {}  # what each dpid holds
        self._failover: dict[int, dict[int, GroupMod]] = {}  # and its fast-failover groups
        self.edges = edge_switches(self.topo)
        self.dps: dict[int, Any] = {}  # dpid -> datapath
        self.names: dict[int, str] = {}  # dpid -> the topology's switch it is
        self.ready: set[str] = set()
        self._lock = threading.RLock()  # one cluster change and one xid at a time
        self._barriers: dict[tuple[int, int], threading.Event] = {}
        self._installed: dict[TaskClass, list[tuple[str, int]]] = {}
        self._events = open(self.events_path, "a")  # noqa: SIM115
        # response time as the network sees it: SYN to the server's FIN (controller.rt_measure)
        self.measure_rt = conf.measure_rt  # 0: off; N: one connection in N is timed
        self._rt_mask = sample_mask(self.measure_rt) if self.measure_rt else 0
        self.rt_timer = ConnectionTimer(scenario.time_scale / 1000.0,
                                        max_open_s=max(2.0, 2 * scenario.timeout_ms
                                                       * scenario.time_scale / 1000.0))
        self.rt_stats = PathStats()
        self._rt_expired = time.monotonic()
        self._wall_minus_mono = time.time() - time.monotonic()  # os-ken stamps events in wall time
        self._node_of_ip = {h.ip: h.name for h in self.fabric.hosts}
        self._rt_file = None
        if self.measure_rt:
            path = self.events_path.with_name("controller-rt.csv")
            fresh = not path.exists() or path.stat().st_size == 0
            self._rt_file = open(path, "a")  # noqa: SIM115 (a restarted controller appends)
            if fresh:
                self._rt_file.write(RT_COLUMNS)

    def _switch_name(self, dpid: int) -> str | None:
        """The topology's switch a datapath is; on a one-switch topology any datapath is
        that switch (several may connect, as the controller benchmark's fake switches do)."""
        name = self.topo.switch_of_dpid(dpid)
        if name is None and self.topo.single():
            return self.topo.switches()[0]
        return name

    def _datapaths(self, switches: list[str] | None = None) -> list[tuple[int, Any]]:
        """Connected datapaths (dpid, dp) of `switches` (all by default)."""
        return [(i, dp) for i, dp in list(self.dps.items())
                if switches is None or self.names.get(i) in switches]

    # -- helpers --------------------------------------------------------------
    def _event(self, **rec: object) -> None:
        self._events.write(json.dumps({"t": time.monotonic(), **rec}) + "\n")
        self._events.flush()

    def _send(self, msg: Any) -> int:
        dp = msg.datapath  # the switch the message was built for
        with self._lock:
            xid = dp.set_xid(msg)
            dp.send_msg(msg)
            return xid

    def _barrier(self, switches: list[str] | None = None) -> bool:
        """Barriers to `switches` (all connected ones by default), waiting for every reply:
        each switch has applied what came before."""
        waits = []
        with self._lock:
            for _, dp in self._datapaths(switches):
                msg = dp.ofproto_parser.OFPBarrierRequest(dp)
                ev = threading.Event()
                xid = dp.set_xid(msg)
                self._barriers[(dp.id, xid)] = ev
                dp.send_msg(msg)
                waits.append(((dp.id, xid), ev))
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        ok = True
        for key, ev in waits:
            ok = ev.wait(max(0.0, deadline - time.monotonic())) and ok
            self._barriers.pop(key, None)
        return ok

    # -- the policy, guarded: a failing policy never takes the controller down ------
    def _policy_failed(self, call: str, error: str) -> None:
        self.logger.error("policy failed, falling back to the FNs: %s", error)
        self._event(event="policy_error", call=call, error=error)

    def _routes(self, view: ClusterView) -> RouteTable:
        """The policy's table, or the safe one (HP and LP to the FNs) when it fails."""
        try:
            table = self.policy.routes(view)
        except Exception as err:
            self._policy_failed("routes", policy_failure(self.policy, "routes", err))
            return safe_routes(view)
        problems = route_problems(table, view)
        if problems:
            self._policy_failed("routes", f"policy {self.policy.name!r}: routes: {problems[0]}")
            return safe_routes(view)
        return table

    def _decide(self, view: ClusterView, request: Request) -> str:
        """The policy's node for one request, or one of the FNs when it fails."""
        try:
            node = self.policy.decide(view, request, self._rng)
            if node not in self.cluster.nodes:
                raise PolicyError(f"chose {node!r}, not a node of the cluster")
            return node
        except Exception as err:
            self._policy_failed("decide", policy_failure(self.policy, "decide", err))
        weights = routes_for(safe_routes(view), request.cls)
        return self._rng.choices(list(weights), weights=list(weights.values()))[0]

    def _pinned_paths(self, graph: Any) -> dict[tuple[str, str], tuple[str, ...]]:
        """The policy's own paths, or none (shortest by delay) when asking it fails."""
        try:
            return {k: tuple(v) for k, v in self.policy.paths(graph).items()}
        except Exception as err:
            self._policy_failed("paths", policy_failure(self.policy, "paths", err))
            return {}

    # -- pipeline messages to os-ken objects -------------------------------------
    def _action(self, dp: Any, a: Action) -> Any:
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
        if isinstance(a, Conntrack):
            nat = (parser.NXActionNAT(flags=NX_NAT_F_DST, range_ipv4_min=a.nat_dst,
                                      range_ipv4_max=a.nat_dst, range_proto_min=a.nat_port,
                                      range_proto_max=a.nat_port)
                   if a.nat_dst is not None else parser.NXActionNAT(flags=0))
            return parser.NXActionCT(flags=NX_CT_F_COMMIT if a.commit else 0, zone_src="",
                                     zone_ofs_nbits=a.zone, recirc_table=a.recirc_table,
                                     alg=0, actions=[nat])
        raise TypeError(f"unknown pipeline action {a!r}")

    def _flow_mod(self, dp: Any, f: Flow) -> Any:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        inst: list[Any] = []
        if f.actions:
            inst.append(parser.OFPInstructionActions(
                ofp.OFPIT_APPLY_ACTIONS, [self._action(dp, a) for a in f.actions]))
        if f.goto is not None:
            inst.append(parser.OFPInstructionGotoTable(f.goto))
        return parser.OFPFlowMod(dp, table_id=f.table, priority=f.priority,
                                 match=parser.OFPMatch(**f.match_dict()), instructions=inst,
                                 idle_timeout=f.idle_timeout, hard_timeout=f.hard_timeout)

    def _group_mod(self, dp: Any, g: GroupMod) -> Any:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        buckets = [parser.OFPBucket(weight=w, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                    actions=[self._action(dp, a) for a in acts])
                   for w, acts in g.buckets]
        cmd = ofp.OFPGC_ADD if g.add else ofp.OFPGC_MODIFY
        if g.kind == "fast_failover":
            buckets = [parser.OFPBucket(weight=0, watch_port=port, watch_group=ofp.OFPG_ANY,
                                        actions=[self._action(dp, a) for a in acts])
                       for port, (_, acts) in zip(g.watch_ports, g.buckets, strict=True)]
            return parser.OFPGroupMod(dp, cmd, ofp.OFPGT_FF, g.group_id, buckets)
        return parser.OFPGroupMod(dp, cmd, ofp.OFPGT_SELECT, g.group_id, buckets)

    # -- pipeline -------------------------------------------------------------
    def _install_base(self, dpid: int) -> None:
        dp, switch = self.dps[dpid], self.names[dpid]
        groups = failover_groups(self.topo, switch, self.hops, add=True)
        for g in groups:
            self._send(self._group_mod(dp, g))
        self._failover[dpid] = {g.group_id: replace(g, add=False) for g in groups}
        for f in base_flows(self.topo, switch, self.hops, not self._per_request,
                            self.measure_rt):
            self._send(self._flow_mod(dp, f))
        stage_ips = [self.fabric.host(n).ip for n in self.stages.hosts]
        for f in stage_flows(self.topo, switch, stage_ips):  # size-based (seed 002b)
            self._send(self._flow_mod(dp, f))
        self._forwarding[dpid] = {_key(f): f for f in
                                  forward_flows(self.topo, switch, self.hops)}

    def _group_table(self) -> dict[TaskClass, list[tuple[str, int]]]:
        table = self._routes(self.cluster.view())
        return {cls: bucket_weights(routes_for(table, cls)) for cls in GROUP_ID}

    def _install_groups(self, initial: bool, only: int | None = None) -> dict[str, dict[str, int]]:
        """(Re)write each class's select group, at every edge switch, from the route table."""
        changed: dict[str, dict[str, int]] = {}
        if self._per_request:
            return changed
        wanted = self._group_table()
        send = {cls: b for cls, b in wanted.items()
                if initial or self._installed.get(cls) != b}
        self._installed.update(send)
        changed = {str(cls): dict(b) for cls, b in send.items()}
        if not send:
            return changed
        ips = {h.name: h.ip for h in self.fabric.hosts}
        targets = ([(only, self.dps[only])] if only is not None
                   else self._datapaths(self.edges))
        for _, dp in targets:
            for g in group_mods(send, ips, add=initial):
                self._send(self._group_mod(dp, g))
        return changed

    def _reconcile(self, node: str, up: bool, source: str, t_event: float) -> dict[str, Any]:
        """Apply one availability report; returns what was done (for the reporter)."""
        with self._lock:
            if not self.cluster.set_available(node, up):
                return {"changed": False}
            if not self.dps:
                return {"changed": True, "installed": False}
            groups = self._install_groups(initial=False)
        ok = self._barrier(self.edges)
        t_done = time.monotonic()
        self._event(event="availability", node=node, available=up, source=source,
                    t_event=t_event, t_installed=t_done, barrier_ok=ok, groups=groups)
        return {"changed": True, "installed": ok, "t_installed": t_done,
                "latency_ms": (t_done - t_event) * 1000.0}

    def _reroute(self, link: str, up: bool, t_event: float) -> None:
        """A switch-to-switch link went down or up: forwarding along the new paths. Only
        the rules that change are rewritten (same match and priority: replaced in place),
        and only the switches that got one are asked for a barrier."""
        with self._lock:
            self.hops = next_hops(self.topo.graph, self.failed)
            touched = []
            for dpid, dp in self._datapaths():
                switch = self.names[dpid]
                groups = self._failover.setdefault(dpid, {})
                for g in failover_groups(self.topo, switch, self.hops, add=False):
                    if groups.get(g.group_id) != g:  # new groups are added, others modified
                        self._send(self._group_mod(dp, replace(g, add=g.group_id not in groups)))
                        groups[g.group_id] = g
                        if switch not in touched:
                            touched.append(switch)
                held = self._forwarding.setdefault(dpid, {})
                for f in forward_flows(self.topo, switch, self.hops):
                    if held.get(_key(f)) != f:
                        self._send(self._flow_mod(dp, f))
                        held[_key(f)] = f
                        if switch not in touched:
                            touched.append(switch)
        ok = self._barrier(touched)
        t_done = time.monotonic()
        self._event(event="reroute", link=link, up=up, t_event=t_event, t_installed=t_done,
                    barrier_ok=ok, failed=sorted(self.failed), switches=touched)

    # -- OpenFlow events ---------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _on_features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        dpid = int(dp.id)
        switch = self._switch_name(dpid)
        if switch is None:
            self._event(event="unknown_switch", dpid=dpid)
            return
        self.dps[dpid], self.names[dpid] = dp, switch
        hub.spawn(self._initialise, dpid)

    def _initialise(self, dpid: int) -> None:
        dp, switch = self.dps[dpid], self.names[dpid]
        ofp, parser = dp.ofproto, dp.ofproto_parser
        with self._lock:
            groups: dict[str, dict[str, int]] = {}
            # a restarted controller finds the previous one's groups (fail-mode secure keeps
            # them): clear them so that the ADDs below cannot fail; the flows that pointed
            # at them go too, and are re-added at once by _install_base
            self._send(parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, 0, ofp.OFPG_ALL))
            if switch in self.edges:  # groups before the flows that use them
                groups = self._install_groups(initial=True, only=dpid)
            self._install_base(dpid)
        ok = self._barrier([switch])
        if ok:
            self.ready.add(switch)
        self._event(event="ready", switch=switch, barrier_ok=ok, groups=groups)
        if not ok:
            self.ready_path.write_text("barrier timeout\n")
        elif self.ready >= set(self.topo.switches()):
            self.ready_path.write_text("ready\n")

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _on_disconnect(self, ev: Any) -> None:
        for dpid, dp in list(self.dps.items()):
            if dp is ev.datapath:
                del self.dps[dpid]
                name = self.names.pop(dpid)
                if name not in self.names.values():
                    self.ready.discard(name)
                    self.ready_path.unlink(missing_ok=True)
                self._event(event="switch_disconnected", switch=name, dpid=dpid)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _on_barrier(self, ev: Any) -> None:
        waiter = self._barriers.get((ev.msg.datapath.id, ev.msg.xid))
        if waiter is not None:
            waiter.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _on_error(self, ev: Any) -> None:
        msg = ev.msg
        self.logger.error("OpenFlow error type=%s code=%s", msg.type, msg.code)
        self._event(event="of_error", type=msg.type, code=msg.code, data=msg.data.hex()[:200])

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _on_port_status(self, ev: Any) -> None:
        t = time.monotonic()
        desc = ev.msg.desc
        ofp = ev.msg.datapath.ofproto
        switch = self.names.get(int(ev.msg.datapath.id))
        if switch is None:
            return
        down = bool(desc.state & ofp.OFPPS_LINK_DOWN) or bool(desc.config & ofp.OFPPC_PORT_DOWN)
        g = self.topo.graph
        peer = next((n for n in g.neighbors(switch)
                     if g.edges[switch, n]["ports"].get(switch) == desc.port_no), None)
        if peer is None:
            return
        if g.nodes[peer]["kind"] == "switch":
            # a link has failed while either of its ends is down; the state is updated
            # here, in event order, and each transition re-routes once
            end = (switch, int(desc.port_no))
            if down:
                self.ports_down.add(end)
            else:
                self.ports_down.discard(end)
            ports = g.edges[switch, peer]["ports"]
            link = str(g.edges[switch, peer]["id"])
            failed = any((s, int(p)) in self.ports_down for s, p in ports.items())
            if failed != (link in self.failed):
                (self.failed.add if failed else self.failed.discard)(link)
                hub.spawn(self._reroute, link, not failed, t)
        elif g.nodes[peer]["role"] == Role.OFN.value:
            hub.spawn(self._reconcile, peer, not down, "port_status", t)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _on_packet_in(self, ev: Any) -> None:
        # when os-ken read it off the switch's connection, before it waited in the app's
        # event queue (the response-time timer's clock: monotonic, as every stamp here)
        t = ev.timestamp - self._wall_minus_mono
        msg = ev.msg
        if (self.measure_rt and msg.table_id == TABLE_CLASSIFY
                and msg.reason == msg.datapath.ofproto.OFPR_ACTION):
            copy = parse_segment(msg.data)  # a header copy from observe_flows
            if copy is not None:
                self._observe(copy, t)
                return
        pkt = packet.Packet(msg.data)
        ip, seg = pkt.get_protocol(ipv4.ipv4), pkt.get_protocol(tcp.tcp)
        if ip is not None and seg is not None and ip.dst == self.fabric.vip:
            self._dispatch_connection(msg, ip, seg, t)
            return
        req = pkt.get_protocol(arp.arp)
        if req is None or req.opcode != arp.ARP_REQUEST or req.dst_ip != self.fabric.vip:
            return
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        reply = packet.Packet()
        reply.add_protocol(ethernet.ethernet(dst=req.src_mac, src=self.fabric.vip_mac,
                                             ethertype=ETH_ARP))
        reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=self.fabric.vip_mac,
                                   src_ip=self.fabric.vip, dst_mac=req.src_mac,
                                   dst_ip=req.src_ip))
        reply.serialize()
        in_port = msg.match["in_port"]
        self._send(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                       actions=[parser.OFPActionOutput(in_port)],
                                       data=reply.data))
        self._event(event="arp_reply", to=req.src_ip)

    # -- per-request policies ---------------------------------------------------------
    def _live_view(self) -> ClusterView:
        """The cluster view with each worker's current load, asked over its control socket."""
        with self._lock:  # a consistent snapshot; the workers are asked outside the lock
            view = self.cluster.view()
        nodes = []
        for n in view.nodes:
            path = self.worker_sockets.get(n.name)
            load, work = None, None
            if path is not None:
                try:
                    stats = unix_call(path, {"cmd": "stats"}, timeout=0.2)
                    load = int(stats["in_system"])
                    work = float(stats["work_left_ms"])
                except (OSError, ValueError, KeyError, TypeError):
                    pass
            nodes.append(replace(n, in_system=load, work_left=work,
                                 measured_rt_ms=self.rt_stats.recent(n.name)))
        return ClusterView(tuple(nodes))

    # -- response time as the network sees it (controller.rt_measure) ---------------
    def _observe(self, seg: Segment, t: float, node: str | None = None) -> None:
        """One SYN or server FIN: pair it, record what pairs (the os-ken event thread
        handles packet-ins one at a time, so the timer needs no lock)."""
        m: Measurement | None = None
        if seg.client_syn and seg.dst_ip == self.fabric.vip:
            m = self.rt_timer.syn((seg.src_ip, seg.src_port), seg.seq, t, node)
        elif seg.fin:
            m = self.rt_timer.fin((seg.dst_ip, seg.dst_port), t, self._node_of_ip.get(seg.src_ip))
        elif seg.synack:
            self.rt_timer.synack((seg.dst_ip, seg.dst_port), t)
        elif seg.pure_ack:
            self.rt_timer.ack((seg.src_ip, seg.src_port), t)
        if m is not None:
            self.rt_stats.add(m.node, m.rt_ms)
            if self._rt_file is not None:
                client = self._node_of_ip.get(m.client_ip, m.client_ip)
                self._rt_file.write(f"{client},{m.client_port},{m.node},{m.t_syn:.6f},"
                                    f"{m.t_fin:.6f},{m.rt_ms:.6f},{m.span_ms:.6f},"
                                    f"{m.leg_ms:.6f}\n")
                self._rt_file.flush()
        if t - self._rt_expired > EXPIRE_EVERY_S:
            self._rt_expired = t
            self.rt_timer.expire(t)
            self._wall_minus_mono = time.time() - time.monotonic()  # follows clock slewing

    def _dispatch_connection(self, msg: Any, ip: Any, seg: Any, t_in: float) -> None:
        """Decide one new connection, pin it with a 5-tuple rule, and re-inject its SYN."""
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        cls = TaskClass.HP if (ip.tos >> 2) == DSCP_HP else TaskClass.LP
        src = next((h.name for h in self.fabric.hosts if h.ip == ip.src), ip.src)
        view = self._live_view()
        # packet-ins are handled one at a time (os-ken's event thread): decide needs no lock
        t0 = time.perf_counter()
        node = self._decide(view, Request(cls, src))
        decide_ms = (time.perf_counter() - t0) * 1000.0  # the policy's own time (issue 9)
        worker_ip = self.fabric.host(node).ip
        self._send(self._flow_mod(dp, connection_flow(ip.src, seg.src_port, self.fabric.vip,
                                                      seg.dst_port, worker_ip)))
        # The SYN is committed and NATed by the packet-out itself: re-injecting it into
        # table 0 would meet the datapath's cached "to controller" megaflow until OVS's
        # revalidators catch up with the new rule (seen here: 2-8 packet-ins per SYN).
        # The rule above catches a retransmitted SYN.
        self._send(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                                       in_port=msg.match["in_port"],
                                       actions=[self._action(dp, a)
                                                for a in connection_actions(worker_ip)],
                                       data=msg.data))
        if self.measure_rt and not seg.src_port & self._rt_mask:  # the decision's SYN
            self._observe(Segment(ip.src, seg.src_port, ip.dst, seg.dst_port, seg.seq,
                                  seg.bits), t_in, node)
        self._event(event="decision", cls=str(cls), client=src, port=seg.src_port,
                    flags=seg.bits, node=node, decide_ms=round(decide_ms, 4),
                    load={n.name: n.in_system for n in view.nodes})

    # -- registrations (OFN join/leave, from the mobility model) ---------------------
    def start(self) -> Any:
        thread = super().start()
        hub.spawn(self._registration_server)
        return thread

    def _registration_server(self) -> None:
        path = self.registration_path
        path.unlink(missing_ok=True)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(path))
        srv.listen(16)
        while True:
            conn, _ = srv.accept()
            hub.spawn(self._registration, conn)

    def _registration(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5.0)
                msg = json.loads(recv_line(conn).decode())
                node, state = str(msg["node"]), str(msg["state"])
                if state not in ("available", "unavailable"):
                    raise ValueError(f"state: must be available or unavailable, got {state!r}")
                if node not in self.cluster.nodes:
                    raise ValueError(f"node: unknown node {node!r}")
                t = float(msg.get("t", time.monotonic()))
                out = self._reconcile(node, state == "available", "registration", t)
            except (OSError, ValueError, KeyError, TypeError) as err:
                out = {"error": str(err)}
            with suppress(OSError):
                send_json(conn, out)
