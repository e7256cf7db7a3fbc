"""A network (`NetworkSpec`), live: our controller (restarted when it dies), the Mininet
network under it with its link elements, and the processes a run starts in its hosts.

Every process is supervised and every bridge, interface, socket and cgroup recorded
before it exists, so that the run (or a later one, or `--clean`) removes exactly that.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from fogsdn.controller.config import ControllerConfig
from fogsdn.controller.launch import start_controller
from fogsdn.controller.pipeline import DECIDE_COOKIE
from fogsdn.controller.registration import register
from fogsdn.controller.rt_measure import RT_SAMPLE_DEFAULT
from fogsdn.core.fabric import Fabric
from fogsdn.core.load_report import LOAD_SOCKET_NAME, LOAD_STREAM_NAME
from fogsdn.core.network_spec import NetworkSpec, idle_service, network_of
from fogsdn.core.processes import die_with_parent, own_group_dying_with_parent
from fogsdn.core.scenario import Role, Scenario
from fogsdn.core.summary import ContainerStats, LinksReport
from fogsdn.core.topology import LinkSpec, fabric_of
from fogsdn.live.cgroups import CgroupError, Layout, NodeCgroup, remove_cgroup, rt_share
from fogsdn.live.cleanup import stop_pid
from fogsdn.live.cluster_site import (
    REMOTE_ENV,
    ClusterRunError,
    ClusterSite,
    expected_traffic,
    remote_command,
)
from fogsdn.live.hop_floor import HopFloor, load_started_at
from fogsdn.live.power_meter import PortCounters, dump_ports, parse_dump_ports
from fogsdn.live.supervisor import Restart, Supervisor, free_port
from fogsdn.live.switch_tuning import SwitchTuning
from fogsdn.netem.cluster_net import ClusterNetError
from fogsdn.netem.cluster_plan import ClusterError, ClusterSpec
from fogsdn.netem.linkem import choose_mechanism
from fogsdn.netem.mininet_net import Network, build_network, shaped_links

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 20.0
# A switch that holds no rule while others hold the controller's, and no switch has got
# its rules for this long, connects again, once (docs/architecture.md, "A stalled handshake")
HANDSHAKE_GRACE_S = 5.0
SOCKETS = Path("/run/fogsdn")


class EmulationError(RuntimeError):
    """The emulation could not be set up; the message says which step."""


def wait_for(cond: Callable[[], bool], timeout: float, what: str, stop: threading.Event
             ) -> None:
    """Poll `cond` until it holds; KeyboardInterrupt once `stop` is set, EmulationError
    naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stop.is_set():
            raise KeyboardInterrupt
        if cond():
            return
        time.sleep(0.02)
    raise EmulationError(f"timed out after {timeout:.0f} s waiting for {what}")


OvsRun = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def local_ovs(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """An ovs-ofctl or ovs-vsctl command on this machine (one that hangs is a failed one,
    status 124, as `timeout` says)."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"{argv[0]}: no answer in 10 s")


def _listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _flows(bridge: str, *match: str, run: OvsRun = local_ovs) -> list[str]:
    r = run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge, *match])
    return [ln for ln in r.stdout.splitlines() if "priority=" in ln]


def _fall_back_to_groups(bridge: str, run: OvsRun = local_ovs) -> None:
    """Remove a per-request policy's rule that sends new connections to the controller
    (fogsdn.controller.pipeline.DECIDE_COOKIE): the policy's select groups take them."""
    run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", bridge, f"cookie={DECIDE_COOKIE:#x}/-1"])


def _table_miss_installed(bridge: str, run: OvsRun = local_ovs) -> bool:
    return any("priority=0" in ln and "CONTROLLER" in ln
               for ln in _flows(bridge, "table=0", run=run))


def _reconnect(bridge: str, run: OvsRun = local_ovs) -> None:
    """A new Controller record with the same target and settings: OVS keeps a connection
    whose handshake stalled, so only a new one starts it again."""
    r = run(["ovs-vsctl", "get", "Bridge", bridge, "controller"])
    uuids = [u.strip() for u in r.stdout.strip().strip("[]").split(",") if u.strip()]
    r = run(["ovs-vsctl", "--format=json", "--columns=target,max_backoff",
             "list", "Controller", *uuids])
    rows = json.loads(r.stdout or "{}").get("data", []) if r.returncode == 0 else []
    cmd = ["ovs-vsctl"]
    refs = []
    for i, (target, backoff) in enumerate(rows):
        extra = [f"max_backoff={backoff}"] if isinstance(backoff, int) else []
        cmd += ["--", f"--id=@c{i}", "create", "Controller", f"target={json.dumps(target)}",
                *extra]
        refs.append(f"@c{i}")
    if refs:
        run([*cmd, "--", "set", "Bridge", bridge, f"controller=[{','.join(refs)}]"])


def child_env() -> dict[str, str]:
    """The environment of every process a run starts: this checkout first on the path."""
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")


class LiveNetwork:
    """The controller and one network (`NetworkSpec`), and the processes in its hosts."""

    def __init__(self, spec: NetworkSpec, out_dir: Path, supervisor: Supervisor,
                 show_progress: bool = False, peer_tables: dict[str, int] | None = None,
                 measure_rt: int = RT_SAMPLE_DEFAULT, realtime: bool = True,
                 service: Scenario | None = None, cluster: ClusterSpec | None = None) -> None:
        """`peer_tables`: host link id -> size of its element's per-peer delay table
        (`update_peers`; these need the userspace relay, chosen then). `measure_rt`: the
        controller times one connection in N (0: none; fogsdn.controller.rt_measure).
        `realtime`: the controller runs SCHED_FIFO (docs/emulation.md, fidelity).
        `service`: the queueing scenario whose requests the controller dispatches at the
        service address (None: the network carries none, `idle_service`).
        `cluster`: the servers the network runs on (docs/scale-out.md); None: this
        machine."""
        self.realtime = realtime
        self.spec = spec
        self.service = service if service is not None else idle_service(spec)
        self.peer_tables = dict(peer_tables or {})
        self.measure_rt = measure_rt
        self.out = out_dir
        self.supervisor = supervisor
        self.show_progress = show_progress
        self.tag = supervisor.tag
        self.sock_dir = SOCKETS / self.tag  # this run's sockets, markers and state files
        self.graph = spec.graph()
        self.network: Network | None = None
        self.bridges: dict[str, str] = {}  # graph switch name -> OVS bridge
        self.links = LinksReport(mechanism="none", shaped=0)
        self.available: dict[str, bool] = {}  # the OFN availability the controller has
        self.timings: dict[str, float] = {}
        self.notes: list[str] = []
        self.cgroups: dict[str, NodeCgroup] = {}  # node -> its container's cgroup
        self.container_stats: dict[str, ContainerStats] = {}
        self.controller_port = 0
        self.switch = SwitchTuning()
        self.cluster: ClusterSite | None = None
        if cluster is not None:
            try:
                self.cluster = ClusterSite(cluster, self.tag, self.sock_dir, out_dir,
                                           self.graph, expected_traffic(self.graph, self.service))
            except ClusterError as err:
                raise EmulationError(f"cluster: {err}") from None
        self.remote: set[subprocess.Popen[Any]] = set()  # processes on a server, over ssh
        self.hop_floor = HopFloor(self.graph, spec.time_scale, spec.topology.hop_cost,
                                  tabled=self.peer_tables,
                                  every_s=spec.topology.hop_cost_every_s)

    # -- start ------------------------------------------------------------------------
    def start(self, available: dict[str, bool], t0: float | None = None) -> None:
        """Results folder and the controller's service, the run's record (removing what dead
        runs left), the controller, then the network under it, ready to forward; from
        then on the supervisor watches. `timings` counts from `t0`."""
        t0 = time.monotonic() if t0 is None else t0
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "scenario.yaml").write_text(self.service.to_yaml())
        self.supervisor.claim()
        self.sock_dir.mkdir(parents=True, exist_ok=True)
        self.available = dict(available)
        if self.cluster is not None:
            self._check_cluster()
            try:
                self.cluster.start()
            except ClusterRunError as err:
                raise EmulationError(str(err)) from None
            for name, session in self.cluster.sessions.items():
                assert session.master is not None and session.guard is not None
                self.supervisor.watch(f"ssh {name}", session.master,
                                      "the run's commands and control channels to that "
                                      "server are gone; the run goes on and exits non-zero")
                self.supervisor.watch(f"guard {name}", session.guard.proc,
                                      "nothing cleans up that server if the run dies; the "
                                      "run goes on and exits non-zero")
            self.timings["cluster_s"] = time.monotonic() - t0
        self._start_controller(fabric_of(self.graph))
        self.timings["controller_s"] = time.monotonic() - t0
        self._start_network()
        self.timings["network_s"] = time.monotonic() - t0
        if self.cluster is None or any(map(self.runs_here, self.bridges)):
            self.switch.apply(self.realtime)  # given back at teardown (switch_tuning)
            self.notes += self.switch.notes
        if self.cluster is not None:
            self.notes.append("the servers' Open vSwitch ran as it was (not tuned: "
                              "fogsdn.live.switch_tuning acts on this machine's alone)")
        self.supervisor.start_watching()

    def _check_cluster(self) -> None:
        """What a run over several servers does not take yet: one line, before anything
        starts (docs/scale-out.md, what is missing)."""
        g = self.graph
        ends = {str(d["id"]): (u, v) for u, v, d in g.edges(data=True)}
        here = {link: [self.runs_here(n) for n in uv] for link, uv in ends.items()}
        away = [link for link in shaped_links(g) if not any(here[link])]
        away += [link for link in self.peer_tables if not all(here[link])]
        limited = [h.name for h in self.spec.fog_hosts if h.cpu or h.memory_mb]
        why = ("shaped link with no end on this machine (link elements run here only, yet; "
               "pin an end to head, both for a per-peer table): " + ", ".join(away)
               if away else
               "cpu or memory_mb limits (a cluster run makes no cgroups, yet): "
               + ", ".join(limited) if limited and self.spec.containers else None)
        if why is not None:
            raise EmulationError(f"cluster: a run over several servers takes no {why}")

    def runs_here(self, node: str) -> bool:
        """Whether graph node `node` runs on this machine (every node, without servers)."""
        return self.cluster is None or self.cluster.on_head(node)

    def server_name(self, node: str) -> str:
        """Where graph node `node` runs: a server's name, or `head` (this machine)."""
        return "head" if self.cluster is None else self.cluster.placement[node]

    def start_on_server(self, server: str, label: str, argv: list[str], log: Path, *,
                        action: str) -> subprocess.Popen[Any]:
        """`python -m argv...` in a server's root namespace, over its master connection,
        its stdin held: a process that ends at the end of its stdin (`stop_process`, or
        the runner's death); watched under `label`, its death an incident saying
        `action`."""
        assert self.cluster is not None
        session = self.cluster.sessions[server]
        words = remote_command([sys.executable, "-m", *argv])
        with open(log, "ab") as out:
            proc = subprocess.Popen([*session.via_master, shlex.join(words)],
                                    stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                    text=True, preexec_fn=own_group_dying_with_parent)
        self.remote.add(proc)
        self.supervisor.watch(label, proc, action)
        return proc

    @property
    def controller_host(self) -> str:
        """Where the controller listens: loopback, or this machine's LAN address when
        switches on servers reach it."""
        return self.cluster.head if self.cluster is not None else "127.0.0.1"

    def ovs_runner(self, node: str) -> OvsRun:
        """How to run ovs-ofctl/ovs-vsctl for graph switch `node`: here, or on its server."""
        site = self.cluster
        if site is None or site.on_head(node):
            return local_ovs
        return lambda argv: site.ovs(node, argv)

    def _bridge_runs(self) -> list[tuple[str, OvsRun]]:
        return [(b, self.ovs_runner(n)) for n, b in self.bridges.items()]

    def _start_controller(self, fabric: Fabric) -> None:
        self.controller_port = free_port()
        conf = ControllerConfig(
            fabric=fabric,
            scenario=self.out / "scenario.yaml",
            available=self.available,
            events=self.out / "controller-events.jsonl",
            ready=self.sock_dir / "controller.ready",
            registration=self.sock_dir / "controller.sock",
            measure_rt=self.measure_rt,
            load_reports=self.sock_dir / LOAD_SOCKET_NAME,
            # workers on servers report through ssh, which forwards stream sockets only
            load_stream=self.sock_dir / LOAD_STREAM_NAME if self.cluster is not None else None,
        )
        self.supervisor.record.paths += [str(conf.ready), str(conf.registration),
                                         str(conf.load_reports),
                                         *([str(conf.load_stream)] if conf.load_stream else [])]

        def launch() -> subprocess.Popen[bytes]:
            """The controller; also its restart after a crash, from the last cluster state."""
            conf.ready.unlink(missing_ok=True)
            return start_controller(
                replace(conf, available=dict(self.available)), self.out / "controller.json",
                self.controller_port, self.out / "controller.log", env=child_env(),
                python=sys.executable, preexec_fn=die_with_parent, realtime=self.realtime,
                host=self.controller_host)

        def relaunch() -> subprocess.Popen[bytes]:
            """A dead controller's switches fall back to its groups first, then it restarts."""
            for bridge, run in self._bridge_runs():
                _fall_back_to_groups(bridge, run)
            return launch()

        first = launch()
        self.supervisor.watch("controller", first,
                              "restarting it with the current cluster state; new connections "
                              "meanwhile go by the policy's own routes",
                              restart=Restart(relaunch, self._controller_ready,
                                              "switch reconnected, rules re-installed"))

        def up() -> bool:
            if first.poll() is not None:
                raise EmulationError("controller exited at start; see controller.log")
            return _listening(self.controller_port, self.controller_host)

        wait_for(up, STARTUP_TIMEOUT_S, "the controller to listen", self.supervisor.stop)

    def _controller_ready(self) -> bool:
        """The controller says ready and its table-miss rule is in every switch."""
        try:
            ready = (self.sock_dir / "controller.ready").read_text().strip() == "ready"
        except OSError:
            return False
        return ready and all(_table_miss_installed(b, run) for b, run in self._bridge_runs())

    def _choose_links(self) -> str | None:
        """The link element for this run (once), printed and kept for summary.json."""
        shaped = shaped_links(self.graph)
        if not shaped:
            return None
        prefer = os.environ.get("FOGSDN_LINKS", "auto")
        if self.peer_tables and prefer == "auto":
            prefer = "userspace"  # per-peer tables are the relay's alone
        mechanism = choose_mechanism(prefer)
        self.links = LinksReport(mechanism=mechanism, shaped=len(shaped))
        if self.show_progress:
            why = "kernel netem" if mechanism == "netem" else "our relay (no netem here)"
            print(f"[run] links: {len(shaped)} shaped by {mechanism} ({why})", flush=True)
        return mechanism

    def _start_network(self) -> None:
        rec = self.supervisor.record
        rec.bridges = [f"{self.tag}{n}" for n, d in self.graph.nodes(data=True)
                       if d["kind"] == "switch" and self.runs_here(n)]
        rec.save()
        mechanism = self._choose_links()
        floor = self.hop_floor  # the emulator's cost per hop (fogsdn.live.hop_floor)
        if mechanism is not None and floor.wanted:
            floor.measure_at_start(mechanism, self.tag, self.sock_dir, rec)
            self.links["hop_cost"] = floor.report
            if self.show_progress:
                print(f"[run] {floor.line()}", flush=True)
        try:
            self.network = build_network(self.graph, self.controller_port, self.tag,
                                         self.spec.time_scale, mechanism, self.sock_dir,
                                         self.spec.seed, self.peer_tables, floor.deduction,
                                         controller_ip=self.controller_host,
                                         servers=self._servers())
        except ClusterNetError as err:
            raise EmulationError(f"cluster: {err}") from None
        floor.follow(self.network, load_started_at(lambda: self.supervisor.epoch),
                     self.supervisor.stop)
        self.bridges = self.network.bridges
        if self.spec.static_neighbours:
            self._set_neighbours()
        if self.cluster is not None:  # their shells end with their ssh; the guards stay
            self._measure_tunnels()
        for name, pid in self.network.host_pids().items():
            if self.runs_here(name):  # a server's PIDs are not this machine's
                self.supervisor.track(f"host {name}", pid)
        for name, pid in self.network.element_pids().items():
            self.supervisor.track(f"element {name}", pid)
        if self.network.shaper is not None:
            made = self.network.shaper.created()
            rec.pids.update(made.pids)
            rec.paths += made.paths
            for link_id, p in self.network.shaper.processes().items():
                self.supervisor.watch(f"link relay {link_id}", p, "the link carries nothing "
                                      "from now on; the run goes on and exits non-zero")
        here = {self.bridges.get(n, n) for n in self.graph.nodes if self.runs_here(n)}
        rec.interfaces = self.network.root_interfaces(here)
        rec.save()
        ready = self.sock_dir / "controller.ready"
        progress = [time.monotonic(), len(self.bridges)]  # last change, switches missing
        reconnected: set[str] = set()

        def rules_in() -> bool:
            missing = [n for n, b in self.bridges.items()
                       if not _table_miss_installed(b, self.ovs_runner(n))]
            if not missing:
                return ready.exists()
            now = time.monotonic()
            if len(missing) != progress[1]:  # the controller is still getting through them
                progress[:] = [now, len(missing)]
            if now - progress[0] > HANDSHAKE_GRACE_S and len(missing) < len(self.bridges):
                for n in missing:
                    run = self.ovs_runner(n)
                    if n not in reconnected and not _flows(self.bridges[n], run=run):
                        reconnected.add(n)
                        _reconnect(self.bridges[n], run)
                        note = (f"switch {n}: no OpenFlow rule while the others had theirs, "
                                f"none new for {HANDSHAKE_GRACE_S:.0f} s (a stalled "
                                "handshake); it connected again before the load began")
                        self.notes.append(note)
                        if self.show_progress:
                            print(f"[run] {note}", flush=True)
            return False

        try:
            wait_for(rules_in, STARTUP_TIMEOUT_S, "the controller's table-miss rules",
                     self.supervisor.stop)
        except EmulationError as err:
            missing = sorted(n for n, b in self.bridges.items()
                             if not _table_miss_installed(b, self.ovs_runner(n)))
            ctl = self.controller
            if ctl is not None and ctl.poll() is None:
                with suppress(OSError):  # its threads' stacks into controller.log
                    os.kill(ctl.pid, signal.SIGUSR1)
                    time.sleep(0.5)
            raise EmulationError(f"{err} (none in {', '.join(missing) or 'no switch'}; "
                                 "the controller's thread stacks are in controller.log)"
                                 ) from None
        if ready.read_text().strip() != "ready":
            raise EmulationError(f"controller: {ready.read_text().strip()}")

    def _servers(self) -> dict[str, dict[str, Any]] | None:
        """Graph node (its bridge name for a switch) -> its server's Mininet parameters."""
        site = self.cluster
        if site is None:
            return None
        return {n: site.mininet_params(n) for n in self.graph.nodes}

    def _measure_tunnels(self) -> None:
        assert self.cluster is not None and self.network is not None
        net = self.network.net
        nodes = {n: net.get(self.bridges.get(n, n)) for n in self.graph.nodes}
        try:
            self.cluster.measure_tunnels(nodes, self.spec.time_scale)
        except (RuntimeError, ValueError, subprocess.SubprocessError) as err:
            raise EmulationError(f"cluster: tunnel not measured: {err}") from None
        taken = self.network.set_tunnels({t["link"]: float(t["one_way_real_ms"])
                                          for t in self.cluster.tunnels})
        for t in self.cluster.tunnels:  # what each element took off its delay
            t["deducted_real_ms"] = round(taken.get(t["link"], 0.0), 5)
        self.notes += self.cluster.notes
        if self.show_progress:
            for t in self.cluster.tunnels:
                print(f"[run] link {t['link']} crosses servers "
                      f"{t['servers'][0]}-{t['servers'][1]}: LAN round trip p50 "
                      f"{t['rtt_real_ms_p50']:.3f} real ms, "
                      f"{t['throughput_mbps']} Mb/s", flush=True)

    def _set_neighbours(self) -> None:
        """Each host's peers as permanent neighbour entries (`NetworkSpec.neighbours`),
        one `ip -batch` per host; a refused entry is an EmulationError naming the host."""
        t0 = time.monotonic()
        for name, peers in self.spec.neighbours(self.graph).items():
            host = self.host(name)
            dev = host.defaultIntf().name
            # a host on a server reads it from the shared results folder
            batch = (self.sock_dir if self.runs_here(name) else self.out) / f"neigh-{name}.batch"
            batch.write_text("".join(f"neigh replace {ip} lladdr {mac} dev {dev} nud permanent\n"
                                     for ip, mac in peers))
            out = host.cmd(f"ip -batch {batch}").strip()
            batch.unlink()
            if out:
                raise EmulationError(f"host {name}: static neighbours: {out.splitlines()[0]}")
        self.timings["neighbours_s"] = round(time.monotonic() - t0, 2)

    # -- the controller -----------------------------------------------------------------
    @property
    def controller(self) -> subprocess.Popen[Any] | None:
        """The controller process now (a new one after a restart)."""
        return self.supervisor.process("controller")

    def register(self, node: str, available: bool) -> dict[str, object]:
        """An OFN joins or leaves: the controller's reply, or an `error` while it is down
        (a restarted one starts from `available`)."""
        self.available[node] = available
        try:
            return dict(register(self.sock_dir / "controller.sock", node, available))
        except (OSError, ValueError) as err:
            return {"error": f"registration failed: {err.__class__.__name__}: {err}"}

    # -- hosts and links ----------------------------------------------------------------
    def host(self, name: str) -> Any:
        """The Mininet host of a graph node (its `cmd`, `popen`, its namespace)."""
        assert self.network is not None, "the network is not up"
        return self.network.net.get(name)

    def ip(self, name: str) -> str:
        return str(self.graph.nodes[name]["ip"])

    def host_link(self, host: str) -> str:
        """The id of the link between a host and its switch."""
        return str(self.graph.edges[host, self.graph.nodes[host]["switch"]]["id"])

    def set_link(self, link_id: str, up: bool) -> None:
        """Take one link down or up (the switches report PortStatus)."""
        assert self.network is not None, "the network is not up"
        self.network.set_link(link_id, up)

    def set_host_link(self, host: str, up: bool) -> None:
        self.set_link(self.host_link(host), up)

    def update_link(self, link_id: str, link: LinkSpec) -> None:
        """New delay, jitter, loss or rate (model units) on a shaped link, at once."""
        assert self.network is not None, "the network is not up"
        self.network.update_link(link_id, link)

    def update_peers(self, link_id: str, delays_ms: dict[str, float]) -> None:
        """A host link's per-peer table (peer address -> model one-way ms), at once."""
        assert self.network is not None, "the network is not up"
        self.network.update_peers(link_id, delays_ms)

    def link_delays_ms(self) -> dict[str, float]:
        """Every link's configured delay (model ms) by link id."""
        return {str(d["id"]): float(d["delay_ms"]) for _, _, d in self.graph.edges(data=True)}

    @property
    def link_elements(self) -> int:
        return len(self.network.elements) if self.network is not None else 0

    # -- processes in hosts -------------------------------------------------------------
    def start_in_host(self, host: str, label: str, argv: list[str], log: Path | None, *,
                      action: str | None = None, node: str | None = None,
                      exit_zero_ends: bool = False,
                      cause: Callable[[], str | None] | None = None) -> subprocess.Popen[Any]:
        """`python -m argv...` in `host`, output to `log` (None: a text pipe), with a
        parent-death signal; in fog host `node`'s container when `node` is given and the
        network asks for containers. Recorded under `label`; watched (its death an
        incident saying `action`) unless `action` is None. Call from the main thread."""
        cmd = [sys.executable, "-m", *argv]
        if node is not None and self.spec.containers:
            cmd = self._containerize(node, cmd)
        out: Any = open(log, "ab") if log is not None else subprocess.PIPE  # noqa: SIM115
        try:
            if not self.runs_here(host):  # over ssh, under fogsdn.netem.remote_child
                assert self.cluster is not None
                proc = self.host(host).start_process(
                    cmd, REMOTE_ENV, self.cluster.clock_correction(host), stdout=out,
                    stderr=subprocess.STDOUT, text=log is None)
                self.remote.add(proc)
            else:
                proc = self.host(host).popen(
                    cmd, cwd=str(ROOT), env=child_env(), stdout=out, stderr=subprocess.STDOUT,
                    text=log is None, preexec_fn=die_with_parent)
        finally:
            if log is not None:
                out.close()
        if action is None:
            self.supervisor.track(label, proc.pid)
        else:
            self.supervisor.watch(label, proc, action, exit_zero_ends=exit_zero_ends,
                                  cause=cause)
        if node is not None and node in self.cgroups:
            try:
                self.cgroups[node].add_process(proc.pid)
            except CgroupError as err:
                raise EmulationError(f"node {node}: {err}") from None
        return proc

    def reach_socket(self, host: str, path: Path) -> None:
        """A Unix socket that a process in `host` listens on, reachable at `path` here:
        nothing to do on one machine; forwarded from the host's server in a cluster."""
        if not self.runs_here(host):
            assert self.cluster is not None
            try:
                self.cluster.forward_socket(host, path)
            except (ClusterRunError, subprocess.SubprocessError) as err:
                raise EmulationError(str(err)) from None

    def load_report_args(self, host: str) -> list[str]:
        """A worker's arguments to report its load to the controller: its Unix socket
        here; from a server, the stream socket there that ssh forwards to the
        controller's (`ClusterSite.start`)."""
        if self.runs_here(host):
            return ["--load-report", str(self.sock_dir / LOAD_SOCKET_NAME)]
        return ["--load-report", str(self.sock_dir / LOAD_STREAM_NAME), "--load-report-stream"]

    def stop_process(self, proc: subprocess.Popen[Any]) -> None:
        """Ask a process of the run to end (SIGTERM; on a server, by closing its stdin,
        which `fogsdn.netem.remote_child` turns into SIGTERM there, so that `wait`
        returns once it has really ended)."""
        if proc in self.remote and proc.stdin is not None:
            with suppress(OSError):
                proc.stdin.close()
        elif proc.poll() is None:
            proc.terminate()

    def read_ports(self, bridge: str) -> dict[str, PortCounters]:
        """A bridge's port counters, read where it runs."""
        node = next(n for n, b in self.bridges.items() if b == bridge)
        if self.cluster is None or self.runs_here(node):
            return dump_ports(bridge)
        r = self.cluster.ovs(node, ["ovs-ofctl", "-O", "OpenFlow13", "--no-names",
                                    "dump-ports", bridge], timeout=5)
        if r.returncode != 0:
            raise OSError(f"ovs-ofctl dump-ports {bridge}: {r.stderr.strip()}")
        return parse_dump_ports(r.stdout)

    @cached_property
    def _cgroup_layout(self) -> Layout | None:
        """The machine's cgroups; None (and a note) where there are none and no node asks
        for limits; an EmulationError where limits were asked for."""
        if self.cluster is not None:  # a server's cgroups are not this machine's (and
            # fog hosts on this machine run without them too: one rule for a run)
            self.notes.append("containers in a cluster run without cgroups (no CPU "
                              "accounting)")
            return None
        try:
            return Layout.detect()
        except (CgroupError, OSError) as err:
            limited = [h.name for h in self.spec.fog_hosts if h.cpu or h.memory_mb]
            if limited:
                raise EmulationError(f"nodes {', '.join(limited)} have cpu/memory_mb limits "
                                     f"but: {err}") from None
            self.notes.append(f"containers without cgroups (no accounting): {err}")
            return None

    def _containerize(self, name: str, cmd: list[str]) -> list[str]:
        """Wrap a command in fog host `name`'s container (fogsdn/nodes/container.py), its
        cgroup created first and recorded for cleanup before it exists."""
        node = self.spec.fog_host(name)
        joins: list[str] = []
        layout = self._cgroup_layout
        if layout is not None:
            cg = NodeCgroup(layout, f"fogsdn-{self.tag}-{node.name}")
            rec = self.supervisor.record
            rec.cgroups += [str(d) for d in dict.fromkeys((cg.cpu_dir, cg.acct_dir, cg.mem_dir))]
            rec.save()
            try:
                cg.create(node.cpu, node.memory_mb, rt_share(len(self.spec.fog_hosts)))
            except CgroupError as err:
                raise EmulationError(f"node {node.name}: {err}") from None
            self.cgroups[node.name] = cg
            # the host's own /sys hides the cgroups: the runner moves the launcher in
            joins = ["--await-cgroup", cg.name, "--await-lines", str(len(cg.procs_files()))]
        return [sys.executable, "-m", "fogsdn.nodes.container", "--name", node.name, *joins,
                "--keep", str(self.sock_dir), "--keep", str(self.out.resolve()), "--", *cmd]

    def out_of_memory(self, name: str) -> str | None:
        """Why a node's process died, where its cgroup knows: the kernel's OOM killer."""
        cg = self.cgroups.get(name)
        if cg is not None and cg.oom_kills() > 0:
            return f"out of memory (memory_mb {self.spec.fog_host(name).memory_mb})"
        return None

    # -- teardown -------------------------------------------------------------------------
    def teardown(self, first: Sequence[tuple[str, Callable[[], Any]]] = ()) -> None:
        """Stop the run's own processes (`first`, in order), then the steps below, then
        remove whatever the record still names; every step runs whatever failed before."""
        self.supervisor.quiet()
        steps = [*first, ("hop probe", self.hop_floor.close),
                 ("cgroups", self._remove_cgroups), ("flows", self._dump_tables),
                 ("network", self._stop_network), ("servers", self._close_cluster),
                 ("controller", self._stop_controller),
                 ("switch settings", self.switch.restore)]
        for what, step in steps:
            try:
                step()
            except Exception as err:  # keep tearing down whatever failed
                print(f"[teardown] {what}: {err}", file=sys.stderr)
        leftovers = self.supervisor.close()
        if leftovers:
            print(f"[teardown] removed leftovers: {', '.join(leftovers)}", file=sys.stderr)
        # this run's alone (its tag): sockets, markers, what its processes kept there
        shutil.rmtree(self.sock_dir, ignore_errors=True)

    def _remove_cgroups(self) -> None:
        for name, cg in self.cgroups.items():
            with suppress(OSError, ValueError, CgroupError):
                self.container_stats[name] = ContainerStats(
                    cpu_s=cg.cpu_usage_s(), oom_kills=cg.oom_kills(),
                    memory_failcnt=cg.memory_failcnt())
        rec = self.supervisor.record
        for d in rec.cgroups:
            remove_cgroup(d)
        rec.cgroups = []
        rec.save()

    def _dump_tables(self) -> None:
        """Flows and groups as ovs-ofctl prints them; several bridges under a `## bridge`
        line each."""
        if self.network is None or not self.bridges:
            return
        for what, name in (("dump-flows", "flows.txt"), ("dump-groups", "groups.txt")):
            parts = []
            for bridge, run in self._bridge_runs():
                r = run(["ovs-ofctl", "-O", "OpenFlow13", what, bridge])
                head = f"## {bridge}\n" if len(self.bridges) > 1 else ""
                parts.append(head + r.stdout + r.stderr)
            (self.out / name).write_text("".join(parts))

    def _close_cluster(self) -> None:
        if self.cluster is not None:
            self.cluster.measure_drift()
            for line in self.cluster.close():
                if self.show_progress:
                    print(f"[teardown] server {line}", file=sys.stderr)

    def _stop_network(self) -> None:
        if self.network is not None:
            self.network.stop()
            self.network = None

    def _stop_controller(self) -> None:
        p = self.controller
        if p is not None and "controller" in self.supervisor.record.pids:
            pid, start = self.supervisor.record.pids["controller"]
            stop_pid(pid, start)
            with suppress(subprocess.TimeoutExpired):
                p.wait(timeout=2)


def new_supervisor(out_dir: Path, stop: threading.Event | None = None) -> Supervisor:
    """A supervisor for a new run, under a fresh tag (its bridges' and sockets' prefix)."""
    return Supervisor("fz" + secrets.token_hex(2), out_dir, stop or threading.Event())


@contextmanager
def live_network(scenario: Scenario, out_dir: Path, stop: threading.Event | None = None,
                 available: dict[str, bool] | None = None, show_progress: bool = False
                 ) -> Iterator[LiveNetwork]:
    """The scenario's network and controller, up and forwarding and supervised, without
    workers or clients (OFNs all available by default); removed on exit."""
    live = LiveNetwork(network_of(scenario), out_dir, new_supervisor(out_dir, stop),
                       show_progress, service=scenario)
    if available is None:
        available = {n.name: True for n in scenario.nodes_with(Role.OFN)}
    try:
        live.start(available)
        yield live
    finally:
        live.teardown()
