"""os-ken adapter: OpenFlow events in, the pure pipeline's messages out, around pure policies.

A cluster change rewrites only the select groups (connections keep their worker), a link
failure only table 2; each change is acknowledged after the barrier replies.
"""

from __future__ import annotations

import json
import math
import select
import socket
import threading
import time
from contextlib import suppress
from dataclasses import replace
from typing import Any, NotRequired, TypedDict

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import (
    CONFIG_DISPATCHER,
    DEAD_DISPATCHER,
    MAIN_DISPATCHER,
    set_ev_cls,
)
from os_ken.lib import hub
from os_ken.lib.packet import arp, ipv4, packet, tcp
from os_ken.ofproto import ofproto_v1_3

from fogsdn.controller import of_messages as of
from fogsdn.controller.answer_book import Answer, AnswerBook
from fogsdn.controller.cluster import ClusterState, LinkState, loaded_view, port_change
from fogsdn.controller.config import ControllerConfig
from fogsdn.controller.flow_tables import TABLE_CLASSIFY
from fogsdn.controller.learner_reports import CURVE_COLUMNS, CURVE_FILE, next_policy_epoch
from fogsdn.controller.load_ledger import LOAD_FILE, LoadLedger, read_staleness
from fogsdn.controller.pipeline import (
    DSCP_HP,
    Output,
    SwitchTables,
    Topology,
    connection_actions,
    edge_switches,
    failover_groups,
    forward_flows,
    group_mods,
    sample_mask,
    switch_start,
)
from fogsdn.controller.policy_swap import (
    SWAPPED_POLICY_FILE,
    SwapError,
    build_swap,
    dispatch_changes,
    live_stages,
    restarted_scenario,
)
from fogsdn.controller.registration import availability_request
from fogsdn.controller.rt_measure import RT_COLUMNS, RtRecorder, Segment, parse_segment
from fogsdn.controller.running_policy import Buckets, DecidedSyns, RunningPolicy
from fogsdn.core.latency import node_net_ms
from fogsdn.core.load_report import MAX_REPORT_BYTES, LineFramer, LoadReport, LoadReportError
from fogsdn.core.local_rpc import (
    answer_one,
    listen_packets,
    listen_stream,
    serve_unix,
    write_json_atomic,
)
from fogsdn.core.routing import next_hops
from fogsdn.core.scenario import PolicySpec, TaskClass, load_scenario
from fogsdn.policies import ClusterView, Request, make_policy

BARRIER_TIMEOUT_S = 2.0


class Reconciled(TypedDict):
    """The answer to an OFN's registration (`fogsdn.controller.registration.register`):
    whether its state changed and, once the switches' groups are in, when."""

    changed: bool
    installed: NotRequired[bool]  # the barriers came back
    t_installed: NotRequired[float]  # the controller's monotonic clock
    latency_ms: NotRequired[float]  # from the event to the rules being in


class Swapped(TypedDict):
    """The answer to a policy swap done (`fogsdn.controller.registration.swap_policy`)."""

    ok: bool
    policy: str
    per_request: bool
    installed: bool  # the barriers came back
    t_installed: float
    groups: dict[str, dict[str, int]]  # each class's select group now: node -> weight


class SwapRefused(TypedDict):
    """The new policy could not be built: nothing changed."""

    error: str


class FogController(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        conf = ControllerConfig.from_environment()
        self.fabric = conf.fabric
        scenario = load_scenario(conf.scenario)
        swapped = conf.registration.with_name(SWAPPED_POLICY_FILE)
        try:  # a restarted controller runs the policy last swapped in (issue 21)
            scenario = restarted_scenario(
                scenario, swapped.read_text() if swapped.exists() else None)
        except SwapError as err:
            self.logger.error("%s", err)
        self.events_path = conf.events
        self._curve_path = self.events_path.with_name(CURVE_FILE)  # a restart appends
        self.running = RunningPolicy.start(  # a swap replaces it whole
            scenario, make_policy(scenario.policy, scenario.workload), self._policy_failed,
            next_policy_epoch(self._curve_path.read_text() if self._curve_path.exists()
                              else None))
        self.stages, why_none = live_stages(scenario)  # by TCP destination port
        if why_none is not None:
            self.logger.error("no size-based stage rules: %s", why_none)
        self._model_ms_per_s = scenario.timebase.model_ms(1.0)
        self._path_idle_s = math.ceil(scenario.timebase.real_s(scenario.timeout_ms)) + 1
        self._syns = DecidedSyns()  # packet-ins are handled one at a time: no lock
        self.ready_path = conf.ready
        self.registration_path = conf.registration
        # each node's count for per-request policies, kept from decisions and the workers'
        # reports (fogsdn.controller.load_ledger); the reader thread and a decision take
        # the lock, and only under it is the report socket read
        self.loads = LoadLedger.of(
            (n.name for n in scenario.nodes),
            scenario.timebase.real_s(scenario.timeout_ms) + 1.0,
            scenario.timebase.real_s_per_model_ms)
        self._loads_lock = threading.Lock()
        self._load_file = self.events_path.with_name(LOAD_FILE)
        with suppress(OSError, ValueError):  # a restarted controller adds to what was judged
            self.loads.staleness.update(read_staleness(self._load_file.read_text()))
        self._load_listener = (None if conf.load_reports is None
                               else listen_packets(conf.load_reports))
        self._stream_listener = (None if conf.load_stream is None
                                 else listen_stream(conf.load_stream))
        self._load_conns: list[socket.socket] = []  # one per worker
        self._framers: dict[socket.socket, LineFramer] = {}  # the stream connections
        self._events = open(self.events_path, "a")  # noqa: SIM115 (policy_error may come next)
        graph = self.fabric.topology()
        self.topo = replace(Topology.of(graph), pinned=self.running.policy.paths(graph))
        self.cluster = ClusterState.from_scenario(scenario, dict(conf.available),
                                                  node_net_ms(scenario, self.topo.pinned))
        self.links = LinkState()  # switch-to-switch links and ports reported down
        self.hops = next_hops(graph)
        self._tables: dict[int, SwitchTables] = {}  # what each dpid holds of table 2 and groups
        self.edges = edge_switches(self.topo)
        self.dps: dict[int, Any] = {}  # dpid -> datapath
        self.names: dict[int, str] = {}  # dpid -> the topology's switch it is
        self.ready: set[str] = set()
        self._lock = threading.RLock()  # one cluster change and one xid at a time
        self._barriers: dict[tuple[int, int], threading.Event] = {}
        self._installed: dict[TaskClass, Buckets] = {}  # each select group's, as sent
        self.measure_rt = conf.measure_rt  # 0: off; N: one connection in N is timed
        if self.measure_rt and self.running.learns_per_request:
            self.measure_rt = 1  # a per-request learner is told every connection's time
        self.rt = RtRecorder.of_run(
            scenario.time_scale, scenario.timeout_ms, self.fabric.vip,
            {h.ip: h.name for h in self.fabric.hosts},
            sample_mask(self.measure_rt) if self.measure_rt else 0, time.monotonic())
        self._wall_minus_mono = time.time() - time.monotonic()  # os-ken stamps events in wall time
        # a per-request learner's timed connections, answered once each (`Policy.answered`):
        # measured, or the client's timeout once the recorder would have given up on them
        self.answers = AnswerBook(scenario.timeout_ms, self.rt.timer.max_open_s)
        self._follow_learner()
        self._rt_file = None
        if self.measure_rt:
            path = self.events_path.with_name("controller-rt.csv")
            fresh = not path.exists() or path.stat().st_size == 0
            self._rt_file = open(path, "a")  # noqa: SIM115 (a restarted controller appends)
            if fresh:
                self._rt_file.write(RT_COLUMNS)

    def _datapaths(self, switches: list[str] | None = None) -> list[tuple[int, Any]]:
        """Connected datapaths (dpid, dp) of `switches` (all by default)."""
        return [(i, dp) for i, dp in list(self.dps.items())
                if switches is None or self.names.get(i) in switches]

    # -- helpers --------------------------------------------------------------
    def _event(self, **rec: object) -> None:
        self._events.write(json.dumps({"t": time.monotonic(), **rec}) + "\n")
        self._events.flush()

    def _policy_failed(self, call: str, error: str) -> None:
        self.logger.error("policy failed, falling back to the FNs: %s", error)
        self._event(event="policy_error", call=call, error=error)

    def _send(self, msg: Any) -> None:
        dp = msg.datapath  # the switch the message was built for
        with self._lock:
            dp.set_xid(msg)
            dp.send_msg(msg)

    def _barrier(self, switches: list[str] | None = None) -> bool:
        """Barriers to `switches` (default all connected), waiting for every reply."""
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

    # -- pipeline ---------------------------------------------------------------------
    def _install_base(self, dpid: int) -> None:
        dp, switch = self.dps[dpid], self.names[dpid]
        groups, flows, self._tables[dpid] = switch_start(  # stages: size-based (seed 002b)
            self.topo, switch, self.hops, not self.running.per_request, self.measure_rt,
            [self.fabric.host(n).ip for n in self.stages.hosts])
        for g in groups:
            self._send(of.group_mod(dp, g))
        for f in flows:
            self._send(of.flow_mod(dp, f))

    def _install_groups(self, initial: bool, only: int | None = None) -> dict[str, dict[str, int]]:
        """(Re)write each class's select group, at every edge switch, from the route table."""
        send = self.running.group_changes(self.cluster.view(), self._installed, initial)
        self._installed.update(send)
        if send:
            ips = {h.name: h.ip for h in self.fabric.hosts}
            for _, dp in ([(only, self.dps[only])] if only is not None
                          else self._datapaths(self.edges)):
                for g in group_mods(send, ips, add=initial):
                    self._send(of.group_mod(dp, g))
        return {str(cls): dict(b) for cls, b in send.items()}

    def _reconcile(self, node: str, up: bool, source: str, t_event: float) -> Reconciled:
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
        """A switch-to-switch link went down or up: only the rules that change are
        rewritten, and only their switches asked for a barrier."""
        with self._lock:
            self.hops = next_hops(self.topo.graph, self.links.failed)
            touched = []
            for dpid, dp in self._datapaths():
                switch = self.names[dpid]
                groups, flows = self._tables.setdefault(dpid, SwitchTables()).changes(
                    failover_groups(self.topo, switch, self.hops, add=False),
                    forward_flows(self.topo, switch, self.hops))
                for g in groups:  # before the flows that use them
                    self._send(of.group_mod(dp, g))
                for f in flows:
                    self._send(of.flow_mod(dp, f))
                if (groups or flows) and switch not in touched:
                    touched.append(switch)
        ok = self._barrier(touched)
        t_done = time.monotonic()
        self._event(event="reroute", link=link, up=up, t_event=t_event, t_installed=t_done,
                    barrier_ok=ok, failed=sorted(self.links.failed), switches=touched)

    # -- OpenFlow events ---------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _on_features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        dpid = int(dp.id)
        switch = self.topo.switch_of_dpid(dpid)
        if switch is None:
            self._event(event="unknown_switch", dpid=dpid)
            return
        self.dps[dpid], self.names[dpid] = dp, switch
        hub.spawn(self._initialise, dpid)

    def _initialise(self, dpid: int) -> None:
        dp, switch = self.dps[dpid], self.names[dpid]
        with self._lock:
            groups: dict[str, dict[str, int]] = {}
            # a restarted controller finds the previous one's groups (fail-mode secure):
            # clear them so the ADDs cannot fail; _install_base re-adds their flows
            self._send(of.delete_all_groups(dp))
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
        desc, ofp = ev.msg.desc, ev.msg.datapath.ofproto
        switch = self.names.get(int(ev.msg.datapath.id))
        if switch is None:
            return
        down = bool(desc.state & ofp.OFPPS_LINK_DOWN) or bool(desc.config & ofp.OFPPC_PORT_DOWN)
        # the link state is updated here, in event order; an OFN's port is its availability
        change = port_change(self.topo, self.links, switch, int(desc.port_no), down)
        if change is not None and change[0] == "link":
            hub.spawn(self._reroute, change[1], change[2], t)
        elif change is not None:
            hub.spawn(self._reconcile, change[1], change[2], "port_status", t)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _on_packet_in(self, ev: Any) -> None:
        # when os-ken read it, before the app's event queue; monotonic, as every stamp here
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
        self._send(of.packet_out(msg.datapath, [Output(msg.match["in_port"])],
                                 of.arp_reply(req, self.fabric.vip, self.fabric.vip_mac)))
        self._event(event="arp_reply", to=req.src_ip)

    # -- per-request policies ---------------------------------------------------------
    def _live_view(self, view: ClusterView) -> ClusterView:
        """The cluster `view` with each node's count now: the controller's own, after every
        report already sent (the caller holds `_loads_lock`, and not `_lock`: a cluster
        change takes `_lock`, then `_loads_lock`)."""
        self._drain_load_reports()
        now = time.monotonic()
        return loaded_view(view, lambda n: self.loads.in_system(n, now),
                           lambda n: self.loads.work_left_ms(n, now), self.rt.stats.recent)

    def _drain_load_reports(self) -> int:
        """Apply every report waiting from the workers (the caller holds `_loads_lock`)."""
        n = 0
        for conn in list(self._load_conns):
            framer = self._framers.get(conn)
            while True:
                try:
                    data = conn.recv(MAX_REPORT_BYTES + 1 if framer is None else 1 << 16,
                                     socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                except OSError:
                    data = b""
                if not data:  # the worker is gone
                    self._load_conns.remove(conn)
                    self._framers.pop(conn, None)
                    conn.close()
                    break
                reports, dropped = framer.feed(data) if framer is not None else ([data], 0)
                if dropped:
                    self._event(event="bad_load_report",
                                error=f"{dropped} line(s) longer than {MAX_REPORT_BYTES} bytes")
                for report in reports:
                    try:
                        self.loads.report(LoadReport.decode(report))
                    except LoadReportError as err:
                        self._event(event="bad_load_report", error=str(err))
                    n += 1
        return n

    def _read_load_reports(self) -> None:
        """Take the workers' connections and keep their reports applied between
        decisions; write the staleness histogram a moment after the reports stop (a
        run's end) or every quarter second."""
        written, dirty = time.monotonic(), False
        listeners = [ls for ls in (self._load_listener, self._stream_listener) if ls is not None]
        if not listeners:
            return
        while True:
            # a proactive policy decides nothing: its reports wait in the sockets (a full
            # one drops new reports at the worker), read on a swap to a per-request one
            watched = [*listeners, *self._load_conns] if self.running.per_request else listeners
            ready, _, _ = select.select(watched, [], [], 0.1)
            with self._loads_lock:
                for listener in listeners:
                    if listener in ready:
                        with suppress(OSError):
                            conn = listener.accept()[0]
                            self._load_conns.append(conn)
                            if listener is self._stream_listener:
                                self._framers[conn] = LineFramer()
                if self.running.per_request:
                    dirty = self._drain_load_reports() > 0 or dirty
                if dirty and (not ready or time.monotonic() - written > 0.25):
                    write_json_atomic(self._load_file, {
                        "staleness": {str(k): v for k, v in self.loads.staleness.items()},
                        **self.loads.staleness_summary()})
                    written, dirty = time.monotonic(), False

    def _observe(self, seg: Segment, t: float, node: str | None = None) -> None:
        """One copied segment to the recorder; a completed pairing to controller-rt.csv,
        and to a per-request learner waiting for it."""
        m = self.rt.observe(seg, t, node)
        if m is not None and self._rt_file is not None:
            self._rt_file.write(self.rt.row(m))
            self._rt_file.flush()
        if m is not None and self.answers:
            answer = self.answers.measured((m.client_ip, m.client_port), m.rt_ms)
            if answer is not None:
                self._tell([answer])
        if self.rt.expire_due(t):
            self._wall_minus_mono = time.time() - time.monotonic()  # follows clock slewing
            self._tell(self.answers.expired(t))

    def _follow_learner(self) -> None:
        """Start the running policy's answers afresh. A per-request learner that runs from
        the start is told every connection's time (the switches copy them all); one swapped
        in later, the connections timed (one in `measure_rt`); with the measurement off,
        none, which the run's events say."""
        self.answers.clear()  # what was waiting was the previous policy's
        if not self.measure_rt and self.running.learns_per_request:
            self._event(event="learner_untold", policy=self.running.policy.policy.name,
                        why="response times are not measured (--no-measure-rt)")

    def _tell(self, answers: list[Answer]) -> None:
        """Hand answers to the running policy (its failures are reported as any call's)."""
        for a in answers:
            self.running.policy.answered(a.client, a.node, a.path, a.response_ms)

    def _dispatch_connection(self, msg: Any, ip: Any, seg: Any, t_in: float) -> None:
        """Decide one new connection and send its SYN on to the chosen worker."""
        dp = msg.datapath
        again = self._syns.retransmitted(ip.src, seg.src_port, seg.seq, t_in)
        if again is not None:
            self._send(of.packet_out(dp, connection_actions(again), msg.data,
                                     in_port=msg.match["in_port"]))
            return
        cls = TaskClass.HP if (ip.tos >> 2) == DSCP_HP else TaskClass.LP
        src = next((h.name for h in self.fabric.hosts if h.ip == ip.src), ip.src)
        with self._lock:
            cluster = self.cluster.view()
        with self._loads_lock:  # no report applied between the view and the count
            view = self._live_view(cluster)
            # its own path's rules, far switches first
            c = self.running.connection(view, Request(cls, src), seg.src_port, self.topo,
                                        lambda: time.monotonic() * self._model_ms_per_s,
                                        self._path_idle_s)
            seen = view.node(c.node).in_system
            self.loads.decided(c.node, (ip.src, seg.src_port), seen, time.monotonic())
        dps = {self.names[i]: d for i, d in self._datapaths(c.path)} if c.path else {}
        edge = self.names.get(int(dp.id))
        at_edge = []
        for switch, f in c.path_flows:
            if switch == edge:
                at_edge.append(f)
            elif switch in dps:
                self._send(of.flow_mod(dps[switch], f))
        if c.curve_rows:  # an online learner's epochs as they close (learner_reports)
            head = "" if self._curve_path.exists() else CURVE_COLUMNS
            with open(self._curve_path, "a") as fh:
                fh.write(head + c.curve_rows)
        for f in at_edge:  # the edge's last, just before the SYN goes on
            self._send(of.flow_mod(dp, f))
        worker_ip = self.fabric.host(c.node).ip
        self._syns.decided(ip.src, seg.src_port, seg.seq, worker_ip, t_in)
        # NATed by the packet-out itself, not re-injected (docs/architecture.md); the far
        # switches' rules are not waited for (docs/learning.md, "Seed 002a")
        self._send(of.packet_out(dp, connection_actions(worker_ip), msg.data,
                                 in_port=msg.match["in_port"]))
        path_ms = (time.monotonic() - t_in) * 1000.0  # packet-in read to packet-out queued
        if self.measure_rt and self.rt.sampled(seg.src_port):  # the decision's SYN
            if self.running.learns_per_request:
                self._tell(self.answers.opened((ip.src, seg.src_port), src, c.node, c.option,
                                               t_in))
            self._observe(Segment(ip.src, seg.src_port, ip.dst, seg.dst_port, seg.seq,
                                  seg.bits), t_in, c.node)
        self._event(event="decision", cls=str(cls), client=src, port=seg.src_port,
                    flags=seg.bits, node=c.node, decide_ms=round(c.decide_ms, 4),
                    path_ms=round(path_ms, 4), seen=seen,
                    load={n.name: n.in_system for n in view.nodes}, path=c.path,
                    **({"agent": c.agent} if c.agent is not None else {}))

    # -- registrations (OFN join/leave, from the mobility model) ---------------------
    def start(self) -> Any:
        thread = super().start()
        hub.spawn(self._read_load_reports)
        hub.spawn(serve_unix, self.registration_path, lambda conn: answer_one(
            conn, self._registration, 5.0,
            (OSError, ValueError, KeyError, TypeError, AttributeError)), hub.spawn)
        return thread

    def _registration(self, msg: Any) -> Reconciled | Swapped | SwapRefused:
        if msg.get("cmd") == "policy":  # a policy swap (issue 21)
            return self._swap_policy(msg["spec"])
        node, up, t = availability_request(msg, self.cluster.nodes, time.monotonic())
        return self._reconcile(node, up, "registration", t)

    # -- policy swap (issue 21) -----------------------------------------------------------
    def _swap_policy(self, spec: Any) -> Swapped | SwapRefused:
        """Build the new policy (nothing changes if that fails), swap it in under the lock,
        bring every edge's groups and dispatch rules to it; answer after the barriers."""
        t_event = time.monotonic()
        try:
            sc, built = build_swap(self.running.scenario, PolicySpec.model_validate(spec))
            run = self.running.swapped(sc, built)
        except (SwapError, ValueError) as err:
            return {"error": str(err).splitlines()[0]}
        with self._lock:
            was, self.running = self.running, run
            self._follow_learner()
            groups = self._install_groups(initial=not self._installed)
            for dpid, dp in self._datapaths(self.edges):
                gone, send = dispatch_changes(self.topo, self.names[dpid], self.hops,
                                              not was.per_request, not run.per_request,
                                              self.measure_rt)
                for f in send:  # the new rules first: no new connection finds none
                    self._send(of.flow_mod(dp, f))
                for f in gone:
                    self._send(of.flow_delete_strict(dp, f))
        ok = self._barrier(self.edges)
        t_done = time.monotonic()
        self._event(event="policy_swap", policy=built.name, spec=sc.policy.model_dump(),
                    per_request=run.per_request, t_event=t_event, t_installed=t_done,
                    barrier_ok=ok, groups=groups)
        return {"ok": True, "policy": built.name, "per_request": run.per_request,
                "installed": ok, "t_installed": t_done, "groups": groups}
