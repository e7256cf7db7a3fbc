"""The emulate engine: one scenario on a live Mininet network under our controller.

scenario -> graph -> controller process -> network (OVS userspace, OpenFlow 1.3) ->
workers in FN/OFN hosts -> clients in client hosts -> churn replayed on the live
network -> traces merged -> summary. Whatever happens (normal end, Ctrl-C, SIGTERM,
an exception), the `finally` removes what the run created and keeps what it collected.

The runner watches its children for the whole run: a worker or client that dies is an
incident (said at once in one line, written into summary.json, and the run exits
non-zero); a controller that dies is restarted with the current cluster state (the
switch keeps its proactive rules meanwhile) and its outage is measured. Every child
gets a parent-death signal, so a SIGKILLed runner takes its emulation with it, and a
new run first removes what dead runs left behind.
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.power import server_count
from controller.config import ControllerConfig
from controller.launch import start_controller
from controller.policies import stage_plan
from controller.registration import register
from fogsdn.churn import Transition, churn_schedule
from fogsdn.fabric import Fabric
from fogsdn.scenario import LeaveMode, Role, Scenario, ScenarioError
from fogsdn.stages import StagePlan
from fogsdn.topology import fabric_of, scenario_graph
from fogsdn.workload import max_task_size
from nodes.cpu_work import calibrate
from nodes.worker import control_request
from runner.cgroups import CgroupError, Layout, NodeCgroup, remove_cgroup
from runner.cleanup import (
    RunRecord,
    clean_all,
    die_with_parent,
    exit_description,
    proc_start_time,
    remove_leftovers,
    stop_pid,
)
from runner.power_meter import LivePowerMeter
from runner.results import finish_results
from topologies.linkem import choose_mechanism
from topologies.mininet_net import Network, build_network, shaped_links

ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_S = 20.0
MAX_CONTROLLER_RESTARTS = 3
# one TCP connection per request through Python clients, OVS userspace and Python workers
# on two cores: well above the default load (160/s), well below what saturates the machine
MAX_LIVE_REQUESTS_PER_S = 2000.0
MAX_LIVE_REQUESTS = 5e6  # about 40 minutes at that rate


class EmulationError(RuntimeError):
    """The emulation could not be set up; the message says which step."""


@dataclass
class Progress:
    sent: int = 0
    answered: int = 0
    ofn_state: dict[str, bool] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(cond: Callable[[], bool], timeout: float, what: str, stop: threading.Event) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stop.is_set():
            raise KeyboardInterrupt
        if cond():
            return
        time.sleep(0.02)
    raise EmulationError(f"timed out after {timeout:.0f} s waiting for {what}")


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _table_miss_installed(bridge: str) -> bool:
    r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge, "table=0"],
                       capture_output=True, text=True)
    return any("priority=0" in ln and "CONTROLLER" in ln for ln in r.stdout.splitlines())


def _dump(bridges: list[str], what: str, path: Path) -> None:
    """One bridge's table as ovs-ofctl prints it; several under a `## bridge` line each."""
    parts = []
    for bridge in bridges:
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", what, bridge],
                           capture_output=True, text=True)
        head = f"## {bridge}\n" if len(bridges) > 1 else ""
        parts.append(head + r.stdout + r.stderr)
    path.write_text("".join(parts))


class Emulation:
    def __init__(self, scenario: Scenario, out_dir: Path, stop: threading.Event,
                 show_progress: bool = True) -> None:
        self.sc = scenario
        self.out = out_dir
        self.stop = stop
        self.show_progress = show_progress
        self.tag = "fz" + secrets.token_hex(2)
        self.rec = RunRecord(self.tag, str(out_dir))
        self.sock_dir = Path("/run/fogsdn") / self.tag
        self.py = sys.executable
        self.net: Any = None
        self.network: Network | None = None
        self.bridges: dict[str, str] = {}  # graph switch name -> OVS bridge
        self.links: dict[str, Any] = {"mechanism": "none", "shaped": 0}
        self.controller: subprocess.Popen[bytes] | None = None
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.stages = StagePlan("none")  # size-based dispatch (seed 002b), set with the workers
        self.clients: dict[str, subprocess.Popen[bytes]] = {}
        self.availability: list[dict[str, Any]] = []
        self.update_latency_ms: list[float] = []
        self.progress = Progress()
        self.epoch = math.nan
        self.timings: dict[str, float] = {}
        self.interrupted = False
        self.churn: list[Transition] = []
        self.incidents: list[dict[str, Any]] = []  # children that died during the run
        self.failure: str | None = None  # an error that ended the run early
        self.controller_port = 0
        self._controller_down_since: float | None = None
        self._fabric: dict[str, Any] = {}
        self.power: LivePowerMeter | None = None
        self.cgroups: dict[str, NodeCgroup] = {}  # node -> its container's cgroup
        self.notes: list[str] = []
        self.container_stats: dict[str, dict[str, Any]] = {}
        self.bytes_per_ms = math.nan  # work: cpu calibration (bytes hashed per CPU-ms)

    # -- set-up -------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")

    def _start_controller(self, fabric: dict[str, Any], available: dict[str, bool]) -> int:
        self._fabric = fabric
        self.controller_port = _free_port()
        self._launch_controller(available)

        def up() -> bool:
            if self.controller is not None and self.controller.poll() is not None:
                raise EmulationError("controller exited at start; see controller.log")
            return _listening(self.controller_port)

        _wait(up, STARTUP_TIMEOUT_S, "the controller to listen", self.stop)
        return self.controller_port

    def _launch_controller(self, available: dict[str, bool]) -> None:
        """Start the controller process (again, after a crash) with this cluster state."""
        conf = ControllerConfig(
            fabric=Fabric.from_dict(self._fabric),
            scenario=self.out / "scenario.yaml",
            available=available,
            events=self.out / "controller-events.jsonl",
            ready=self.sock_dir / "controller.ready",
            registration=self.sock_dir / "controller.sock",
            workers={n.name: str(self.sock_dir / f"{n.name}.sock") for n in self.sc.nodes},
        )
        self.controller = start_controller(
            conf, self.out / "controller.json", self.controller_port,
            self.out / "controller.log", env=self._env(), python=self.py,
            preexec_fn=die_with_parent)
        self.rec.add_pid("controller", self.controller.pid)
        for path in (str(conf.ready), str(conf.registration)):
            if path not in self.rec.paths:
                self.rec.paths.append(path)
        self.rec.save()

    def _choose_links(self, graph: Any) -> str | None:
        """The link element for this run (once), printed and kept for summary.json."""
        shaped = shaped_links(graph)
        if not shaped:
            return None
        mechanism = choose_mechanism(os.environ.get("FOGSDN_LINKS", "auto"))
        self.links = {"mechanism": mechanism, "shaped": len(shaped)}
        if self.show_progress:
            why = "kernel netem" if mechanism == "netem" else "our relay (no netem here)"
            print(f"[run] links: {len(shaped)} shaped by {mechanism} ({why})", flush=True)
        return mechanism

    def _start_network(self, graph: Any, port: int) -> None:
        self.rec.bridges = [f"{self.tag}{n}" for n, d in graph.nodes(data=True)
                            if d["kind"] == "switch"]
        self.rec.save()
        mechanism = self._choose_links(graph)
        self.network = build_network(graph, port, self.tag, self.sc.time_scale, mechanism,
                                     self.sock_dir, self.sc.seed)
        self.net, self.bridges = self.network.net, self.network.bridges
        for name, pid in self.network.host_pids().items():
            self.rec.add_pid(f"host {name}", pid)
        for name, pid in self.network.element_pids().items():
            self.rec.add_pid(f"element {name}", pid)
        if self.network.shaper is not None:
            made = self.network.shaper.created()
            for label, (pid, start) in made.pids.items():
                self.rec.pids[label] = (pid, start)
            self.rec.paths += made.paths
        self.rec.interfaces = self.network.root_interfaces()
        self.rec.save()
        ready = self.sock_dir / "controller.ready"
        _wait(lambda: ready.exists() and all(_table_miss_installed(b)
                                             for b in self.bridges.values()),
              STARTUP_TIMEOUT_S, "the controller's table-miss rules", self.stop)
        if ready.read_text().strip() != "ready":
            raise EmulationError(f"controller: {ready.read_text().strip()}")

    def _cgroup_layout(self) -> Layout | None:
        """The machine's cgroups; None (and a note) where there are none and no node
        asks for limits; an EmulationError where limits were asked for."""
        try:
            return Layout.detect()
        except (CgroupError, OSError) as err:
            limited = [n.name for n in self.sc.nodes if n.cpu or n.memory_mb]
            if limited:
                raise EmulationError(f"nodes {', '.join(limited)} have cpu/memory_mb limits "
                                     f"but: {err}") from None
            self.notes.append(f"containers without cgroups (no accounting): {err}")
            return None

    def _containerize(self, node: Any, cmd: list[str], layout: Layout | None) -> list[str]:
        """Wrap a worker command in its container (nodes/container.py), its cgroup
        created first and recorded for cleanup before it exists."""
        joins: list[str] = []
        if layout is not None:
            cg = NodeCgroup(layout, f"fogsdn-{self.tag}-{node.name}")
            for d in dict.fromkeys((cg.cpu_dir, cg.acct_dir, cg.mem_dir)):
                self.rec.cgroups.append(str(d))
            self.rec.save()
            try:
                cg.create(node.cpu, node.memory_mb)
            except CgroupError as err:
                raise EmulationError(f"node {node.name}: {err}") from None
            self.cgroups[node.name] = cg
            # the host's own /sys hides the cgroups: the runner moves the launcher in
            joins = ["--await-cgroup", cg.name, "--await-lines", str(len(cg.procs_files()))]
        return [self.py, "-m", "nodes.container", "--name", node.name, *joins,
                "--keep", str(self.sock_dir), "--keep", str(self.out.resolve()), "--", *cmd]

    def set_host_link(self, host: str, up: bool) -> None:
        assert self.network is not None
        self.network.set_link(self.network.host_link(host), up)

    def _start_workers(self) -> None:
        self.stages = stage_plan(self.sc)  # TAGS: each stage but the last kills at its cutoff
        layout = self._cgroup_layout() if self.sc.containers else None
        work: list[str] = []
        if self.sc.workload.work == "cpu":
            t0 = time.monotonic()
            self.bytes_per_ms = calibrate()
            self.timings["calibration_s"] = time.monotonic() - t0
            work = ["--bytes-per-ms", repr(self.bytes_per_ms)]
        for node in self.sc.nodes:
            kill = self.stages.kill_after(node.name)
            host = self.net.get(node.name)
            ctl = self.sock_dir / f"{node.name}.sock"
            self.rec.paths.append(str(ctl))
            log = open(self.out / f"worker-{node.name}.log", "wb")  # noqa: SIM115
            cmd = [self.py, "-m", "nodes.worker", "--name", node.name, "--port", "9000",
                   "--mu", repr(node.mu), "--capacity", str(node.capacity),
                   "--servers", node.servers.value, "--time-scale", repr(self.sc.time_scale),
                   "--control", str(ctl),
                   "--events", str(self.out.resolve() / f"worker-{node.name}.jsonl"),
                   "--max-size", repr(max_task_size(self.sc.workload.size)), *work,
                   *(["--kill-after", repr(kill)] if kill is not None else [])]
            if self.sc.containers:
                cmd = self._containerize(node, cmd, layout)
            p = host.popen(
                cmd,
                cwd=str(ROOT), env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent)
            log.close()
            self.workers[node.name] = p
            self.rec.add_pid(f"worker {node.name}", p.pid)
            if node.name in self.cgroups:
                try:
                    self.cgroups[node.name].add_process(p.pid)
                except CgroupError as err:
                    raise EmulationError(f"node {node.name}: {err}") from None

        def all_up() -> bool:
            for name, p in self.workers.items():
                if p.poll() is not None:
                    raise EmulationError(f"worker {name} exited at start; see worker-{name}.log")
                try:
                    control_request(self.sock_dir / f"{name}.sock", "stats", timeout=0.5)
                except OSError:
                    return False
            return True

        _wait(all_up, STARTUP_TIMEOUT_S, "the workers", self.stop)

    def _start_clients(self) -> None:
        fab_vip = self.graph.graph["vip"]
        port = self.graph.graph["service_port"]
        epoch_file = self.out / "epoch"
        for k in range(1, self.sc.workload.clients + 1):
            name = f"c{k}"
            log = open(self.out / f"client-{name}.log", "wb")  # noqa: SIM115
            p = self.net.get(name).popen(
                [self.py, "-m", "nodes.client", "--name", name,
                 "--scenario", str(self.out / "scenario.yaml"),
                 "--service", f"{fab_vip}:{port}", "--epoch-file", str(epoch_file),
                 "--trace", str(self.out / f"trace-{name}.csv"),
                 *(["--stages", self.stages.to_json()] if self.stages.kind != "none" else [])],
                cwd=str(ROOT), env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent)
            log.close()
            self.clients[name] = p
            self.rec.add_pid(f"client {name}", p.pid)

        def all_ready() -> bool:
            for name, p in self.clients.items():
                if p.poll() is not None:
                    raise EmulationError(f"client {name} exited at start; see client-{name}.log")
            return all(Path(f"{epoch_file}.{n}.ready").exists() for n in self.clients)

        _wait(all_ready, STARTUP_TIMEOUT_S, "the clients", self.stop)
        self.epoch = time.monotonic() + 0.05
        tmp = epoch_file.with_suffix(".tmp")
        tmp.write_text(repr(self.epoch))
        tmp.replace(epoch_file)
        self._start_power()

    def _start_power(self) -> None:
        """Poll busy time and port counters once a second from the start instant on."""
        def busy(name: str) -> tuple[float, float]:
            cg = self.cgroups.get(name)
            if self.sc.workload.work == "cpu" and cg is not None:
                # real work: what the container's processes used of the CPU
                return time.monotonic(), cg.cpu_usage_s()
            st = control_request(self.sock_dir / f"{name}.sock", "stats", timeout=0.5)
            return float(st["t"]), float(st["busy_s"])

        if self.sc.workload.work == "cpu" and not self.cgroups:
            self.notes.append("work cpu without cgroups: power from the workers' busy time")

        self.power = LivePowerMeter(
            {n.name: (n, server_count(n)) for n in self.sc.nodes}, self.bridges,
            self.sc.switch_power, busy, self.epoch)
        self.power.start()

    def _stop_power(self) -> None:
        if self.power is not None:
            self.power.stop()

    # -- churn --------------------------------------------------------------
    def _apply_transition(self, tr: Transition) -> None:
        t_model = (time.monotonic() - self.epoch) / (self.sc.time_scale / 1000.0)
        drop = self.sc.churn.leave is LeaveMode.DROP
        try:
            reply = register(self.sock_dir / "controller.sock", tr.node, tr.available)
        except (OSError, ValueError) as err:
            # the controller is down: a restarted one starts from the current state
            reply = {"error": f"registration failed: {err.__class__.__name__}: {err}"}
        dropped: int | str = ""
        moved: int | str = ""
        if self.sc.churn.leave is LeaveMode.HANDOFF and not tr.available:
            fn = self.sc.nodes_with(Role.FN)[0].name  # the model hands off to the FN
            to = f"{self.graph.nodes[fn]['ip']}:{self.graph.graph['service_port']}"
            moved = int(control_request(self.sock_dir / f"{tr.node}.sock", "handoff",
                                        to=to)["handed_off"])
        elif drop and not tr.available:
            self.set_host_link(tr.node, up=False)
            dropped = int(control_request(self.sock_dir / f"{tr.node}.sock", "drop")["dropped"])
        elif drop and tr.available:
            self.set_host_link(tr.node, up=True)
        if "latency_ms" in reply:
            self.update_latency_ms.append(float(reply["latency_ms"]))
        t_inst = reply.get("t_installed")
        self.availability.append({
            "t": tr.t_ms, "node": tr.node,
            "state": "available" if tr.available else "unavailable",
            "t_applied": round(t_model, 6),
            "t_installed": "" if t_inst is None
            else round((float(t_inst) - self.epoch) / (self.sc.time_scale / 1000.0), 6),
            "dropped": dropped,
            "handed_off": moved,
            "error": str(reply.get("error", "")),
        })
        self.progress.ofn_state[tr.node] = tr.available

    # -- watching the children ----------------------------------------------------
    def _model_now(self) -> float:
        if math.isnan(self.epoch):
            return math.nan
        return (time.monotonic() - self.epoch) / (self.sc.time_scale / 1000.0)

    def _worker_death_cause(self, name: str) -> str | None:
        """Why a worker died, where its cgroup knows: the kernel's OOM killer."""
        cg = self.cgroups.get(name)
        if cg is not None and cg.oom_kills() > 0:
            node = self.sc.node(name)
            return f"out of memory (memory_mb {node.memory_mb})"
        return None

    def _incident(self, label: str, p: subprocess.Popen[bytes], action: str,
                  cause: str | None = None) -> None:
        how = exit_description(p.returncode)
        t = self._model_now()
        rec = {"process": label, "pid": p.pid, "exit": how, "t_model_ms": round(t, 3),
               "t_real_s": round(time.monotonic() - self.epoch, 3), "action": action}
        if cause is not None:
            rec["cause"] = cause
            how = f"{how}: {cause}"
        self.incidents.append(rec)
        print(f"\n[run] CRASH: {label} (pid {p.pid}) {how} at model t={t:.1f} ms; {action}",
              file=sys.stderr, flush=True)

    def _watch_children(self) -> None:
        """Notice every death at once (called from the drive loop every few ms)."""
        for name, p in self.workers.items():
            if p.poll() is not None and not any(i["pid"] == p.pid for i in self.incidents):
                self._incident(f"worker {name}", p,
                               "its requests are lost; the run goes on and exits non-zero",
                               self._worker_death_cause(name))
        for name, p in self.clients.items():
            if p.poll() not in (None, 0) and not any(i["pid"] == p.pid for i in self.incidents):
                self._incident(f"client {name}", p,
                               "its trace ends here; the run goes on and exits non-zero")
        shaper = self.network.shaper if self.network is not None else None
        for link_id, p in (shaper.processes().items() if shaper is not None else ()):
            if p.poll() is not None and not any(i["pid"] == p.pid for i in self.incidents):
                self._incident(f"link relay {link_id}", p, "the link carries nothing from "
                               "now on; the run goes on and exits non-zero")
        ctl = self.controller
        if ctl is not None and ctl.poll() is not None:
            restarts = sum(1 for i in self.incidents if i["process"] == "controller")
            if restarts >= MAX_CONTROLLER_RESTARTS:
                if not any(i["pid"] == ctl.pid for i in self.incidents):
                    self._incident("controller", ctl, "not restarted again "
                                   f"(already {restarts} times); the run stops")
                    self.failure = "the controller kept crashing"
                    self.stop.set()
                return
            self._incident("controller", ctl, "restarting it with the current cluster state")
            self._controller_down_since = time.monotonic()
            (self.sock_dir / "controller.ready").unlink(missing_ok=True)
            self._launch_controller(dict(self.progress.ofn_state))
        if self._controller_down_since is not None:
            ready = self.sock_dir / "controller.ready"
            try:
                is_ready = ready.read_text().strip() == "ready"
            except OSError:
                is_ready = False
            if is_ready and all(_table_miss_installed(b) for b in self.bridges.values()):
                outage = time.monotonic() - self._controller_down_since
                last = [i for i in self.incidents if i["process"] == "controller"][-1]
                last["outage_ms"] = round(outage * 1000.0, 1)
                print(f"[run] controller back after {outage * 1000.0:.0f} ms "
                      "(switch reconnected, rules re-installed)", file=sys.stderr, flush=True)
                self._controller_down_since = None

    # -- main loop ------------------------------------------------------------
    def _read_progress(self) -> None:
        sent = answered = 0
        for name in self.clients:
            f = self.out / f"trace-{name}.progress"
            try:
                s, a = f.read_text().split()
                sent, answered = sent + int(s), answered + int(a)
            except (OSError, ValueError):
                pass
        self.progress.sent, self.progress.answered = sent, answered

    def _print_progress(self, final: bool = False) -> None:
        if not self.show_progress:
            return
        self._read_progress()
        ms_real = self.sc.time_scale / 1000.0
        elapsed = max(0.0, time.monotonic() - self.epoch)
        total = self.sc.duration_ms * ms_real
        ofn = " ".join(f"{n}:{'A' if up else 'U'}" for n, up in
                       sorted(self.progress.ofn_state.items())) or "no OFN"
        line = (f"[{elapsed:6.1f}/{total:.1f} s real | model {elapsed / ms_real:8.1f} ms] "
                f"sent {self.progress.sent:6d}  answered {self.progress.answered:6d}  {ofn}")
        if self.power is not None and math.isfinite(self.power.last_total_w):
            line += f"  power {self.power.last_total_w:6.1f} W"
        if sys.stdout.isatty():
            print("\r" + line, end="\n" if final else "", flush=True)
        else:
            print(line, flush=True)

    def _drive(self) -> None:
        pending = [tr for tr in self.churn if tr.t_ms > 0]
        ms_real = self.sc.time_scale / 1000.0
        next_print = time.monotonic()
        print_every = 1.0 if sys.stdout.isatty() else 5.0
        while not self.stop.is_set():
            now = time.monotonic()
            self._watch_children()
            while pending and self.epoch + pending[0].t_ms * ms_real <= now:
                self._apply_transition(pending.pop(0))
            if all(p.poll() is not None for p in self.clients.values()):
                break
            if now >= next_print:
                self._print_progress()
                next_print = now + print_every
            wake = next_print
            if pending:
                wake = min(wake, self.epoch + pending[0].t_ms * ms_real)
            self.stop.wait(max(0.0, min(0.05, wake - time.monotonic())))
        if self.stop.is_set() and self.failure is None:
            self.interrupted = True
        self._print_progress(final=True)

    # -- teardown -------------------------------------------------------------
    def _stop_clients(self) -> None:
        for p in self.clients.values():
            if p.poll() is None:
                p.terminate()  # the client records its outstanding requests and flushes
        for label, p in self.clients.items():
            try:
                p.wait(timeout=8)
            except subprocess.TimeoutExpired:
                pid, start = self.rec.pids[f"client {label}"]
                stop_pid(pid, start, grace_s=0.5)

    def _stop_workers(self) -> dict[str, Any]:
        stats: dict[str, Any] = {}
        for name in self.workers:
            try:
                stats[name] = control_request(self.sock_dir / f"{name}.sock", "stats")
            except (OSError, ValueError) as err:
                how = exit_description(self.workers[name].poll())
                stats[name] = {"error": f"no stats: {err.__class__.__name__} (worker {how})"}
        for name in self.workers:
            pid, start = self.rec.pids[f"worker {name}"]
            stop_pid(pid, start)
        for p in self.workers.values():
            try:
                p.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        return stats

    def teardown(self) -> dict[str, Any]:
        stats: dict[str, Any] = {}
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("clients", self._stop_clients),
            ("power", self._stop_power),
            ("workers", lambda: stats.update(self._stop_workers())),
            ("cgroups", self._remove_cgroups),
            ("flows", self._dump_tables),
            ("network", self._stop_network),
            ("controller", self._stop_controller),
        ]
        for what, step in steps:
            try:
                step()
            except Exception as err:  # keep tearing down whatever failed
                print(f"[teardown] {what}: {err}", file=sys.stderr)
        leftovers = remove_leftovers(self.rec)
        if leftovers:
            print(f"[teardown] removed leftovers: {', '.join(leftovers)}", file=sys.stderr)
        try:
            self.sock_dir.rmdir()
        except OSError:
            pass
        return stats

    def _remove_cgroups(self) -> None:
        """Keep each node's CPU figures, then remove its groups (what is still in
        them is killed first)."""
        for name, cg in self.cgroups.items():
            try:
                self.container_stats[name] = {
                    "cpu_s": cg.cpu_usage_s(), "oom_kills": cg.oom_kills(),
                    "memory_failcnt": cg.memory_failcnt()}
            except (OSError, ValueError, CgroupError):
                pass
        for d in self.rec.cgroups:
            remove_cgroup(d)
        self.rec.cgroups = []
        self.rec.save()

    def _dump_tables(self) -> None:
        if self.net is not None and self.bridges:
            for what, name in (("dump-flows", "flows.txt"), ("dump-groups", "groups.txt")):
                _dump(list(self.bridges.values()), what, self.out / name)

    def _stop_network(self) -> None:
        if self.network is not None:
            self.network.stop()
            self.network = None
            self.net = None

    def _stop_controller(self) -> None:
        if self.controller is not None:
            pid, start = self.rec.pids["controller"]
            stop_pid(pid, start)
            try:
                self.controller.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass

    # -- the run ----------------------------------------------------------------
    def _prepare(self) -> dict[str, bool]:
        """Results folder, resolved scenario, run record, churn draws, graph; the OFNs'
        initial availability."""
        sc = self.sc
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "scenario.yaml").write_text(sc.to_yaml())
        leftovers = clean_all()
        if leftovers:
            print(f"[run] removed what dead runs left behind: {', '.join(leftovers)}",
                  file=sys.stderr, flush=True)
        self.sock_dir.mkdir(parents=True, exist_ok=True)
        start = proc_start_time(os.getpid())
        self.rec.owner = (os.getpid(), start) if start is not None else None
        self.rec.save()
        ofns = [n.name for n in sc.nodes_with(Role.OFN)]
        self.churn = churn_schedule(sc.churn, ofns, sc.duration_ms, sc.seed)
        self.graph = scenario_graph(sc)
        return {tr.node: tr.available for tr in self.churn if tr.t_ms == 0}

    def _start_fabric(self, initial: dict[str, bool], t0: float) -> None:
        """The controller, then the network under it, ready to forward."""
        port = self._start_controller(fabric_of(self.graph).to_dict(), initial)
        self.timings["controller_s"] = time.monotonic() - t0
        self._start_network(self.graph, port)
        self.timings["network_s"] = time.monotonic() - t0

    def run(self) -> dict[str, Any]:
        sc = self.sc
        initial = self._prepare()
        stats: dict[str, Any] = {}
        t0 = time.monotonic()
        setup_error: EmulationError | None = None
        try:
            self._start_fabric(initial, t0)
            self._start_workers()
            self.timings["workers_s"] = time.monotonic() - t0
            if sc.churn.leave is LeaveMode.DROP:
                for name, up in initial.items():
                    if not up:
                        self.set_host_link(name, up=False)
            for name, up in initial.items():
                self.availability.append({"t": 0.0, "node": name,
                                          "state": "available" if up else "unavailable",
                                          "t_applied": 0.0, "t_installed": 0.0, "dropped": "",
                                          "handed_off": "", "error": ""})
                self.progress.ofn_state[name] = up
            self._start_clients()
            self.timings["startup_s"] = time.monotonic() - t0
            if self.show_progress:
                print(f"[run] {self.tag}: network up in {self.timings['startup_s']:.2f} s; "
                      f"{len(self.clients)} clients, results in {self.out}", flush=True)
            self._drive()
        except KeyboardInterrupt:
            self.interrupted = True
        except EmulationError as err:
            setup_error = err
        except Exception as err:  # whatever failed, what was collected is merged and kept
            self.failure = f"{err.__class__.__name__}: {err}"
            print(f"\n[run] FAILED: {self.failure}; keeping what was collected",
                  file=sys.stderr, flush=True)
        finally:
            stats = self.teardown()
        if setup_error is not None and not self.clients:
            raise setup_error  # nothing was collected: the set-up error is the whole story
        if setup_error is not None:
            self.failure = str(setup_error)
        return finish_results(self.out, sc, self, stats)


def check_live_limits(sc: Scenario) -> None:
    """Refuse, before anything starts, a load no live run here can generate."""
    per_s = (sc.workload.lambda_hp + sc.workload.lambda_lp) * 1000.0 / sc.time_scale
    if sc.expected_requests() > MAX_LIVE_REQUESTS:
        raise ScenarioError(
            f"workload: (lambda_hp + lambda_lp) x duration_ms expects "
            f"{sc.expected_requests():.3g} requests; a live run takes at most "
            f"{MAX_LIVE_REQUESTS:.0e} (shorten duration_ms or lower the rates)")
    if per_s > MAX_LIVE_REQUESTS_PER_S:
        raise ScenarioError(
            f"workload: {per_s:.3g} requests per real second at time_scale "
            f"{sc.time_scale:g} is more than a live run generates (at most "
            f"{MAX_LIVE_REQUESTS_PER_S:.0f}/s); raise time_scale or lower the rates")


def run_emulation(scenario: Scenario, out_dir: Path, stop: threading.Event | None = None,
                  show_progress: bool = True) -> dict[str, Any]:
    """Run one scenario live; returns summary.json's content."""
    check_live_limits(scenario)
    return Emulation(scenario, out_dir, stop or threading.Event(), show_progress).run()


@contextmanager
def live_network(scenario: Scenario, out_dir: Path) -> Iterator[Emulation]:
    """The scenario's network and controller, up and forwarding, without workers or
    clients (OFNs all available): for tests and benchmarks that probe the network
    itself. Everything it created is removed on exit."""
    emu = Emulation(scenario, out_dir, threading.Event(), show_progress=False)
    emu._prepare()
    try:
        emu._start_fabric({n.name: True for n in scenario.nodes_with(Role.OFN)},
                          time.monotonic())
        yield emu
    finally:
        emu.teardown()
