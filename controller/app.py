"""os-ken adapter: OpenFlow events in, flow-mods and group-mods out, around pure policies.

Pipeline (OpenFlow 1.3 + OVS conntrack, measured: docs/architecture.md):
  table 0  IPv6 dropped; ARP for the service address to us (we answer); other ARP
           flooded; all IPv4 through ct(zone, nat) to table 1; table-miss to us.
  table 1  +new TCP to the service address: HP (DSCP 46) to select group 1, anything
           else (LP, and any other DSCP) to group 2; each bucket commits the
           connection with nat(dst=worker) and recirculates to table 2. Established
           and reply traffic follows its conntrack entry to table 2.
  table 2  forwarding by destination; replies (un-NATed to the service address) get
           the service MAC as source.
A cluster change rewrites only the two groups, so established connections keep their
worker (conntrack), and waits for the barrier reply before acknowledging.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
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
from controller.fabric import (
    CT_ZONE,
    GROUP_ID,
    TABLE_CLASSIFY,
    TABLE_DISPATCH,
    TABLE_FORWARD,
    bucket_weights,
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
)
from fogsdn.local_rpc import recv_line, send_json, unix_call
from fogsdn.scenario import Role, TaskClass, load_scenario

NX_NAT_F_DST = 1 << 1
NX_CT_F_COMMIT = 1 << 0
ETH_IPV4, ETH_ARP, ETH_IPV6 = 0x0800, 0x0806, 0x86DD
CT_NEW_TRK = (0x01 | 0x20, 0x01 | 0x20)  # +new+trk
DSCP_HP = 46
BARRIER_TIMEOUT_S = 2.0


class FogController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        conf = ControllerConfig.from_environment()
        self.fabric = conf.fabric
        scenario = load_scenario(conf.scenario)
        self.policy: Policy = make_policy(scenario.policy)
        self._per_request = is_per_request(self.policy)  # as the simulator decides it
        self.cluster = ClusterState.from_scenario(scenario, dict(conf.available))
        self.events_path = conf.events
        self.ready_path = conf.ready
        self.registration_path = conf.registration
        self.worker_sockets: dict[str, str] = dict(conf.workers)
        self._rng = random.Random(scenario.seed)
        self.dp: Any = None
        self._lock = threading.RLock()  # one cluster change and one xid at a time
        self._barriers: dict[int, threading.Event] = {}
        self._installed: dict[TaskClass, list[tuple[str, int]]] = {}
        self._events = open(self.events_path, "a")  # noqa: SIM115

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

    def _barrier(self) -> bool:
        """Send a barrier and wait for its reply: the switch has applied what came before."""
        parser = self.dp.ofproto_parser
        msg = parser.OFPBarrierRequest(self.dp)
        ev = threading.Event()
        with self._lock:
            xid = self.dp.set_xid(msg)
            self._barriers[xid] = ev
            self.dp.send_msg(msg)
        ok = ev.wait(BARRIER_TIMEOUT_S)
        self._barriers.pop(xid, None)
        return ok

    def _flow(self, table: int, priority: int, match: Any, inst: list[Any]) -> None:
        parser = self.dp.ofproto_parser
        self._send(parser.OFPFlowMod(self.dp, table_id=table, priority=priority, match=match,
                                     instructions=inst))

    def _apply(self, actions: list[Any]) -> list[Any]:
        ofp, parser = self.dp.ofproto, self.dp.ofproto_parser
        return [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]

    def _ct_nat_to(self, ip: str) -> Any:
        parser = self.dp.ofproto_parser
        return parser.NXActionCT(
            flags=NX_CT_F_COMMIT, zone_src="", zone_ofs_nbits=CT_ZONE,
            recirc_table=TABLE_FORWARD, alg=0,
            actions=[parser.NXActionNAT(flags=NX_NAT_F_DST, range_ipv4_min=ip,
                                        range_ipv4_max=ip)])

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

    # -- pipeline -------------------------------------------------------------
    def _install_base(self) -> None:
        ofp, parser = self.dp.ofproto, self.dp.ofproto_parser
        fab = self.fabric
        m = parser.OFPMatch
        # table 0
        self._flow(TABLE_CLASSIFY, 1000, m(eth_type=ETH_IPV6), [])
        self._flow(TABLE_CLASSIFY, 900, m(eth_type=ETH_ARP, arp_op=1, arp_tpa=fab.vip),
                   self._apply([parser.OFPActionOutput(ofp.OFPP_CONTROLLER,
                                                       ofp.OFPCML_NO_BUFFER)]))
        self._flow(TABLE_CLASSIFY, 800, m(eth_type=ETH_ARP),
                   self._apply([parser.OFPActionOutput(ofp.OFPP_FLOOD)]))
        untrack = parser.NXActionCT(flags=0, zone_src="", zone_ofs_nbits=CT_ZONE,
                                    recirc_table=TABLE_DISPATCH, alg=0,
                                    actions=[parser.NXActionNAT(flags=0)])
        self._flow(TABLE_CLASSIFY, 500, m(eth_type=ETH_IPV4), self._apply([untrack]))
        # table 1: new connections to the service go to the class's group
        new_svc = {"eth_type": ETH_IPV4, "ip_proto": 6, "ipv4_dst": fab.vip,
                   "tcp_dst": fab.service_port, "ct_state": CT_NEW_TRK}
        if not self._per_request:
            self._flow(TABLE_DISPATCH, 300, m(ip_dscp=DSCP_HP, **new_svc),
                       self._apply([parser.OFPActionGroup(GROUP_ID[TaskClass.HP])]))
            self._flow(TABLE_DISPATCH, 290, m(**new_svc),
                       self._apply([parser.OFPActionGroup(GROUP_ID[TaskClass.LP])]))
        else:
            # a per-request policy sees each new connection's first packet (the SYN)
            self._flow(TABLE_DISPATCH, 290, m(**new_svc),
                       self._apply([parser.OFPActionOutput(ofp.OFPP_CONTROLLER,
                                                           ofp.OFPCML_NO_BUFFER)]))
        self._flow(TABLE_DISPATCH, 1, m(), [parser.OFPInstructionGotoTable(TABLE_FORWARD)])
        # table 2: forwarding; replies leave with the service address's MAC
        for h in fab.hosts:
            out = parser.OFPActionOutput(h.port)
            self._flow(TABLE_FORWARD, 100, m(eth_type=ETH_IPV4, ipv4_dst=h.ip),
                       self._apply([parser.OFPActionSetField(eth_dst=h.mac), out]))
            if h.role == "client":
                self._flow(TABLE_FORWARD, 200, m(eth_type=ETH_IPV4, ipv4_src=fab.vip,
                                                 ipv4_dst=h.ip),
                           self._apply([parser.OFPActionSetField(eth_src=fab.vip_mac),
                                        parser.OFPActionSetField(eth_dst=h.mac), out]))
        # table-miss last: its presence tells the runner the pipeline is in
        self._flow(TABLE_CLASSIFY, 0, m(),
                   self._apply([parser.OFPActionOutput(ofp.OFPP_CONTROLLER,
                                                       ofp.OFPCML_NO_BUFFER)]))

    def _install_groups(self, initial: bool) -> dict[str, dict[str, int]]:
        """(Re)write each class's select group from the policy's route table."""
        ofp, parser = self.dp.ofproto, self.dp.ofproto_parser
        changed: dict[str, dict[str, int]] = {}
        if self._per_request:
            return changed
        table = self._routes(self.cluster.view())
        for cls, gid in GROUP_ID.items():
            buckets = bucket_weights(routes_for(table, cls))
            if not initial and self._installed.get(cls) == buckets:
                continue
            self._installed[cls] = buckets
            changed[str(cls)] = dict(buckets)
            of_buckets = [
                parser.OFPBucket(weight=w, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY,
                                 actions=[self._ct_nat_to(self.fabric.host(node).ip)])
                for node, w in buckets
            ]
            cmd = ofp.OFPGC_ADD if initial else ofp.OFPGC_MODIFY
            self._send(parser.OFPGroupMod(self.dp, cmd, ofp.OFPGT_SELECT, gid, of_buckets))
        return changed

    def _reconcile(self, node: str, up: bool, source: str, t_event: float) -> dict[str, Any]:
        """Apply one availability report; returns what was done (for the reporter)."""
        with self._lock:
            if not self.cluster.set_available(node, up):
                return {"changed": False}
            if self.dp is None:
                return {"changed": True, "installed": False}
            groups = self._install_groups(initial=False)
        ok = self._barrier()
        t_done = time.monotonic()
        self._event(event="availability", node=node, available=up, source=source,
                    t_event=t_event, t_installed=t_done, barrier_ok=ok, groups=groups)
        return {"changed": True, "installed": ok, "t_installed": t_done,
                "latency_ms": (t_done - t_event) * 1000.0}

    # -- OpenFlow events ---------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _on_features(self, ev: Any) -> None:
        self.dp = ev.msg.datapath
        hub.spawn(self._initialise)

    def _initialise(self) -> None:
        ofp, parser = self.dp.ofproto, self.dp.ofproto_parser
        with self._lock:
            # a restarted controller finds the previous one's groups (fail-mode secure keeps
            # them): clear them so that the ADDs below cannot fail; the flows that pointed
            # at them go too, and are re-added at once by _install_base
            self._installed.clear()
            self._send(parser.OFPGroupMod(self.dp, ofp.OFPGC_DELETE, 0, ofp.OFPG_ALL))
            groups = self._install_groups(initial=True)  # before the flows that use them
            self._install_base()
        ok = self._barrier()
        self._event(event="ready", barrier_ok=ok, groups=groups)
        self.ready_path.write_text("ready\n" if ok else "barrier timeout\n")

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _on_disconnect(self, ev: Any) -> None:
        if ev.datapath is self.dp:
            self.dp = None
            self.ready_path.unlink(missing_ok=True)
            self._event(event="switch_disconnected")

    @set_ev_cls(ofp_event.EventOFPBarrierReply, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _on_barrier(self, ev: Any) -> None:
        waiter = self._barriers.get(ev.msg.xid)
        if waiter is not None:
            waiter.set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _on_error(self, ev: Any) -> None:
        msg = ev.msg
        self.logger.error("OpenFlow error type=%s code=%s", msg.type, msg.code)
        self._event(event="of_error", type=msg.type, code=msg.code, data=msg.data.hex()[:200])

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _on_port_status(self, ev: Any) -> None:
        desc = ev.msg.desc
        ofp = ev.msg.datapath.ofproto
        host = self.fabric.by_port(desc.port_no)
        if host is None or host.role != Role.OFN.value:
            return
        down = bool(desc.state & ofp.OFPPS_LINK_DOWN) or bool(desc.config & ofp.OFPPC_PORT_DOWN)
        t = time.monotonic()
        hub.spawn(self._reconcile, host.name, not down, "port_status", t)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _on_packet_in(self, ev: Any) -> None:
        msg = ev.msg
        pkt = packet.Packet(msg.data)
        ip, seg = pkt.get_protocol(ipv4.ipv4), pkt.get_protocol(tcp.tcp)
        if ip is not None and seg is not None and ip.dst == self.fabric.vip:
            self._dispatch_connection(msg, ip, seg)
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
            load = None
            if path is not None:
                try:
                    load = int(unix_call(path, {"cmd": "stats"}, timeout=0.2)["in_system"])
                except (OSError, ValueError, KeyError, TypeError):
                    load = None
            nodes.append(replace(n, in_system=load))
        return ClusterView(tuple(nodes))

    def _dispatch_connection(self, msg: Any, ip: Any, seg: Any) -> None:
        """Decide one new connection, pin it with a 5-tuple rule, and re-inject its SYN."""
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        cls = TaskClass.HP if (ip.tos >> 2) == DSCP_HP else TaskClass.LP
        src = next((h.name for h in self.fabric.hosts if h.ip == ip.src), ip.src)
        view = self._live_view()
        # packet-ins are handled one at a time (os-ken's event thread): decide needs no lock
        node = self._decide(view, Request(cls, src))
        match = parser.OFPMatch(eth_type=ETH_IPV4, ip_proto=6, ipv4_src=ip.src,
                                tcp_src=seg.src_port, ipv4_dst=self.fabric.vip,
                                tcp_dst=seg.dst_port, ct_state=CT_NEW_TRK)
        self._send(parser.OFPFlowMod(dp, table_id=TABLE_DISPATCH, priority=400, match=match,
                                     idle_timeout=2, hard_timeout=10,
                                     instructions=self._apply(
                                         [self._ct_nat_to(self.fabric.host(node).ip)])))
        # The SYN is committed and NATed by the packet-out itself: re-injecting it into
        # table 0 would meet the datapath's cached "to controller" megaflow until OVS's
        # revalidators catch up with the new rule (seen here: 2-8 packet-ins per SYN).
        # The rule above catches a retransmitted SYN.
        self._send(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER,
                                       in_port=msg.match["in_port"],
                                       actions=[self._ct_nat_to(self.fabric.host(node).ip)],
                                       data=msg.data))
        self._event(event="decision", cls=str(cls), client=src, port=seg.src_port,
                    flags=seg.bits, node=node,
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
            try:
                send_json(conn, out)
            except OSError:
                pass
