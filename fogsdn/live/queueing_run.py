"""The emulate engine's queueing run (seeds 000 and 002b): one scenario's workload on a
live network (docs/architecture.md, "A live run, step by step").

Whatever happens (normal end, Ctrl-C, SIGTERM, an exception), the teardown removes what
the run created and keeps what it collected.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from fogsdn.controller.pipeline import sample_mask
from fogsdn.controller.rt_measure import RT_SAMPLE_DEFAULT
from fogsdn.core.churn import ReactionLead, Transition, scheduled_availability
from fogsdn.core.local_rpc import write_json_atomic
from fogsdn.core.network_spec import network_of
from fogsdn.core.realtime import go_realtime
from fogsdn.core.scenario import LeaveMode, NodeSpec, Role, Scenario, ScenarioError
from fogsdn.core.stages import StagePlan
from fogsdn.core.streams import draw_capacities
from fogsdn.core.workload import max_task_size
from fogsdn.live.cleanup import stop_pid
from fogsdn.live.cpu_steal import idle_share, read_cpu_times, steal_share
from fogsdn.live.fault_schedule import LiveFaults
from fogsdn.live.live_network import (
    STARTUP_TIMEOUT_S,
    EmulationError,
    LiveNetwork,
    new_supervisor,
    wait_for,
)
from fogsdn.live.live_view import ViewConfig, read_client_counts
from fogsdn.live.power_meter import LivePowerMeter
from fogsdn.live.results import finish_results
from fogsdn.live.supervisor import exit_description
from fogsdn.models.power_model import server_count
from fogsdn.netem.cluster_plan import ClusterSpec
from fogsdn.nodes.cpu_work import calibrate
from fogsdn.nodes.worker import control_request
from fogsdn.policies import policy_class, stage_plan

# one TCP connection per request through Python clients, OVS userspace and Python workers
# on two cores: well above the default load (160/s), well below what saturates the machine
MAX_LIVE_REQUESTS_PER_S = 2000.0
MAX_LIVE_REQUESTS = 5e6  # about 40 minutes at that rate
CHURN_SPIN_S = 0.0005  # the churn replay wakes this early and spins to a change's instant


@dataclass
class Progress:
    sent: int = 0
    answered: int = 0
    ofn_state: dict[str, bool] = field(default_factory=dict)
    per_client: dict[str, tuple[int, int]] = field(default_factory=dict)  # sent, answered


@dataclass(frozen=True)
class LiveOptions:
    """The live run's switches; the defaults are what a run should use, the others
    measure what each costs or buys (scripts/bench_fidelity.py, docs/emulation.md)."""

    churn_lead: bool = True  # issue each OFN change early (fogsdn.core.churn.ReactionLead)
    # the controller times one connection in N, SYN to FIN (0: none; a power of two)
    measure_rt: int = RT_SAMPLE_DEFAULT
    meter_power: bool = True  # off: no power polling (and no power figures)
    realtime: bool = True  # off: workers, controller and churn replay not SCHED_FIFO
    # one traffic engine process per client (the old design) instead of one for all
    client_processes: bool = False
    engine_realtime: bool = True  # the traffic engine SCHED_FIFO too (with realtime)


class QueueingRun:
    def __init__(self, scenario: Scenario, out_dir: Path, stop: threading.Event,
                 show_progress: bool = True, options: LiveOptions = LiveOptions(),
                 view: ViewConfig | None = None, cluster: ClusterSpec | None = None) -> None:
        self.sc = scenario
        self.view_config = view  # the browser view and REST API (fogsdn.live.live_view)
        self.policy_epochs: list[dict[str, Any]] = []
        self.meter_power = options.meter_power
        self.realtime = options.realtime
        self.out = out_dir
        self.stop = stop
        self.show_progress = show_progress
        self.supervisor = new_supervisor(out_dir, stop)
        self.live = LiveNetwork(network_of(scenario), out_dir, self.supervisor, show_progress,
                                measure_rt=options.measure_rt, realtime=options.realtime,
                                service=scenario, cluster=cluster)
        self.workers: dict[str, subprocess.Popen[Any]] = {}
        self.stages = StagePlan("none")  # size-based dispatch (seed 002b), set with the workers
        self.clients: list[str] = []  # client names
        # the traffic engines by tag: one ("engine"), or one per client (client_processes)
        self.load_procs: dict[str, subprocess.Popen[Any]] = {}
        self.client_processes = options.client_processes
        self.engine_realtime = options.engine_realtime
        self.availability: list[dict[str, Any]] = []
        self.update_latency_ms: list[float] = []
        self.progress = Progress()
        self.lead = ReactionLead(enabled=options.churn_lead)
        self.epoch = math.nan
        self.cpu_steal: float | None = None  # the hypervisor's share while the clients ran
        self.cpu_idle: float | None = None  # the share no process used meanwhile
        self.churn: list[Transition] = []
        self.power: LivePowerMeter | None = None
        self.bytes_per_ms = math.nan  # work: cpu calibration (bytes hashed per CPU-ms)
        self._worker_work: list[str] = []  # the workers' work arguments (cpu calibration)
        self.faults = LiveFaults(self)  # the scenario's fault schedule (fogsdn.core.faults)

    # -- set-up -------------------------------------------------------------
    def _start_workers(self) -> None:
        self.stages = stage_plan(self.sc)  # TAGS: each stage but the last kills at its cutoff
        work: list[str] = []
        if self.sc.workload.work == "cpu":
            t0 = time.monotonic()
            self.bytes_per_ms = calibrate()
            self.live.timings["calibration_s"] = time.monotonic() - t0
            work = ["--bytes-per-ms", repr(self.bytes_per_ms)]
        self._worker_work = work
        for node in self.sc.nodes:
            self._start_worker(node)
        sock_dir = self.live.sock_dir

        def all_up() -> bool:
            for name, p in self.workers.items():
                if p.poll() is not None:
                    raise EmulationError(f"worker {name} exited at start; see worker-{name}.log")
                try:
                    control_request(sock_dir / f"{name}.sock", "stats", timeout=0.5)
                except (OSError, ValueError):  # not listening yet (ValueError: forwarded
                    return False  # from a server, where the far end closed unanswered)
            return True

        wait_for(all_up, STARTUP_TIMEOUT_S, "the workers", self.stop)

    def _start_worker(self, node: NodeSpec) -> None:
        """One node's worker in its host (also a scheduled fault's restart of it)."""
        sock_dir = self.live.sock_dir
        kill = self.stages.kill_after(node.name)
        ctl = sock_dir / f"{node.name}.sock"
        if str(ctl) not in self.supervisor.record.paths:
            self.supervisor.record.paths.append(str(ctl))
            self.live.reach_socket(node.name, ctl)
        work = self._worker_work
        argv = ["fogsdn.nodes.worker", "--name", node.name, "--port", "9000",
                "--mu", repr(node.mu), "--capacity", str(node.capacity),
                "--servers", node.servers.value, "--discipline", node.discipline.value,
                "--time-scale", repr(self.sc.time_scale),
                "--control", str(ctl),
                *self.live.load_report_args(node.name),
                "--events", str(self.out.resolve() / f"worker-{node.name}.jsonl"),
                "--max-size", repr(max_task_size(self.sc.workload.size)), *work,
                *(["--kill-after", repr(kill)] if kill is not None else []),
                # real work (cpu) runs as ordinary threads: hashing at SCHED_FIFO
                # would spend the group's real-time budget and be throttled
                *(["--realtime"] if self.realtime and not work else [])]
        self.workers[node.name] = self.live.start_in_host(
            node.name, f"worker {node.name}", argv, self.out / f"worker-{node.name}.log",
            action="its requests are lost; the run goes on and exits non-zero",
            node=node.name, cause=partial(self.live.out_of_memory, node.name))

    def _start_clients(self) -> None:
        """The run's clients as logical clients of one traffic engine (in the first
        client's host, making each client's sockets in its own), or, with the option
        `client_processes`, one engine per client in its host (the old design, kept to
        measure against: scripts/bench_load.py)."""
        graph = self.live.graph
        service = f"{graph.graph['vip']}:{graph.graph['service_port']}"
        epoch_file = self.out / "epoch"
        stages = ["--stages", self.stages.to_json()] if self.stages.kind != "none" else []
        self.clients = [f"c{k}" for k in range(1, self.sc.workload.clients + 1)]
        by_machine: dict[str, list[str]] = {}  # one engine per machine (it enters hosts there)
        for n in self.clients:
            by_machine.setdefault(self.live.server_name(n), []).append(n)
        groups = ([[n] for n in self.clients] if self.client_processes
                  else list(by_machine.values()))
        for group in groups:
            tag = (group[0] if self.client_processes else "engine" if len(groups) == 1
                   else f"engine-{self.live.server_name(group[0])}")
            hosts = ",".join(f"{n}={self.live.host(n).pid}" for n in group)
            self.load_procs[tag] = self.live.start_in_host(
                group[0], f"clients {tag}",
                ["fogsdn.nodes.traffic_engine", "--clients", hosts, "--tag", tag,
                 "--scenario", str(self.out / "scenario.yaml"),
                 "--service", service, "--epoch-file", str(epoch_file),
                 "--trace-dir", str(self.out), "--stats", str(self.out / f"load-{tag}.json"),
                 *stages, *(["--realtime"] if self.realtime and self.engine_realtime else [])],
                self.out / f"load-{tag}.log",
                action="its clients' traces end here; the run goes on and exits non-zero",
                exit_zero_ends=True)

        def all_ready() -> bool:
            for tag, p in self.load_procs.items():
                if p.poll() is not None:
                    raise EmulationError(f"traffic engine {tag} exited at start; see "
                                         f"load-{tag}.log")
            return all(Path(f"{epoch_file}.{t}.ready").exists() for t in self.load_procs)

        wait_for(all_ready, STARTUP_TIMEOUT_S, "the clients", self.stop)
        self.epoch = time.monotonic() + 0.05
        self.supervisor.epoch, self.supervisor.timebase = self.epoch, self.sc.timebase
        write_json_atomic(epoch_file, self.epoch)  # a float: JSON is its repr
        self._start_power()

    def _start_power(self) -> None:
        """Poll busy time and port counters once a second from the start instant on."""
        if not self.meter_power:
            self.live.notes.append("power not metered (meter_power off)")
            return
        cgroups = self.live.cgroups

        def busy(name: str) -> tuple[float, float]:
            cg = cgroups.get(name)
            if self.sc.workload.work == "cpu" and cg is not None:
                # real work: what the container's processes used of the CPU
                return time.monotonic(), cg.cpu_usage_s()
            st = control_request(self.live.sock_dir / f"{name}.sock", "stats", timeout=0.5)
            return float(st["t"]), float(st["busy_s"])

        if self.sc.workload.work == "cpu" and not cgroups:
            self.live.notes.append("work cpu without cgroups: power from the workers' busy time")

        self.power = LivePowerMeter(
            {n.name: (n, server_count(n)) for n in self.sc.nodes}, self.live.bridges,
            self.sc.switch_power, busy, self.epoch, read_ports=self.live.read_ports)
        self.power.start()

    def _stop_power(self) -> None:
        if self.power is not None:
            self.power.stop()

    # -- churn --------------------------------------------------------------
    def _apply_transition(self, tr: Transition) -> None:
        t_call = time.monotonic()
        lead_s = self.lead.lead_s
        ms_real = self.sc.timebase.real_s_per_model_ms
        drop = self.sc.churn.leave is LeaveMode.DROP
        reply = self.live.register(tr.node, tr.available)
        installed = reply.get("t_installed")
        t_inst = float(installed) if isinstance(installed, int | float) else None
        if t_inst is not None:
            self.lead.observe(t_inst - t_call)
        ctl = self.live.sock_dir / f"{tr.node}.sock"
        dropped: int | str = ""
        moved: int | str = ""
        if self.sc.churn.leave is LeaveMode.HANDOFF and not tr.available:
            fn = self.sc.nodes_with(Role.FN)[0].name  # the model hands off to the FN
            to = f"{self.live.ip(fn)}:{self.live.graph.graph['service_port']}"
            moved = int(control_request(ctl, "handoff", to=to)["handed_off"])
        elif drop and not tr.available:
            self.live.set_host_link(tr.node, up=False)
            dropped = int(control_request(ctl, "drop")["dropped"])
        elif drop and tr.available:
            self.live.set_host_link(tr.node, up=True)
        latency_ms = reply.get("latency_ms")
        if isinstance(latency_ms, int | float):
            self.update_latency_ms.append(float(latency_ms))
        self.availability.append({
            "t": tr.t_ms, "node": tr.node,
            "state": "available" if tr.available else "unavailable",
            "t_applied": round((t_call - self.epoch) / ms_real, 6),
            "t_installed": "" if t_inst is None else round((t_inst - self.epoch) / ms_real, 6),
            "dropped": dropped, "handed_off": moved, "lead": round(lead_s / ms_real, 6),
            "error": str(reply.get("error", ""))})
        self.progress.ofn_state[tr.node] = tr.available

    # -- main loop ------------------------------------------------------------
    def _read_progress(self) -> None:
        read_client_counts(self.out, self.clients, self.progress.per_client)
        counts = self.progress.per_client.values()
        self.progress.sent = sum(s for s, _ in counts)
        self.progress.answered = sum(a for _, a in counts)

    def _print_progress(self, final: bool = False) -> None:
        if not self.show_progress:
            return
        self._read_progress()
        ms_real = self.sc.timebase.real_s_per_model_ms
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
        """Replay the churn and show progress until every client ended or the run stops
        (Ctrl-C, SIGTERM, or the supervisor after the controller kept crashing)."""
        pending = [tr for tr in self.churn if tr.t_ms > 0]
        # the replay thread runs SCHED_FIFO while it replays (the drawn instants are the
        # measurement's), and as an ordinary thread again for the analysis after it
        if self.realtime and not go_realtime():
            self.live.notes.append("the churn replay ran without real-time scheduling")
        try:
            self._replay_loop(pending)
        finally:
            if self.realtime:
                with suppress(OSError):
                    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))

    def _replay_loop(self, pending: list[Transition]) -> None:
        ms_real = self.sc.timebase.real_s_per_model_ms
        next_print = time.monotonic()
        print_every = 1.0 if sys.stdout.isatty() else 5.0

        def due(tr: Transition) -> float:  # issued one reaction time early (ReactionLead)
            return self.epoch + tr.t_ms * ms_real - self.lead.lead_s

        while not self.stop.is_set():
            now = time.monotonic()
            if pending and now < (t_due := due(pending[0])) <= now + CHURN_SPIN_S:
                while time.monotonic() < t_due:  # a timed wait wakes late
                    pass
                now = time.monotonic()
            while pending and due(pending[0]) <= now:
                self._apply_transition(pending.pop(0))
            if self.faults.pending or self.faults.coming_back:
                self.faults.apply_due((now - self.epoch) / ms_real)
                self.faults.poll()
            if all(p.poll() is not None for p in self.load_procs.values()):
                break
            if now >= next_print:
                self._print_progress()
                next_print = now + print_every
            wake = next_print
            if pending:
                wake = min(wake, due(pending[0]) - CHURN_SPIN_S)
            wake = min(wake, self.epoch + self.faults.next_due_ms() * ms_real)
            self.stop.wait(max(0.0, min(0.05, wake - time.monotonic())))
        if self.stop.is_set() and self.supervisor.failure is None:
            self.supervisor.interrupted = True
        self._print_progress(final=True)

    # -- teardown -------------------------------------------------------------
    def _stop_clients(self) -> None:
        for p in self.load_procs.values():
            if p.poll() is None:  # the engine records its outstanding requests and flushes
                self.live.stop_process(p)
        for tag, p in self.load_procs.items():
            try:
                p.wait(timeout=8)
            except subprocess.TimeoutExpired:
                pid, start = self.supervisor.record.pids[f"clients {tag}"]
                stop_pid(pid, start, grace_s=0.5)

    def _stop_workers(self) -> dict[str, Any]:
        stats: dict[str, Any] = {}
        for name in self.workers:
            try:
                stats[name] = control_request(self.live.sock_dir / f"{name}.sock", "stats")
            except (OSError, ValueError) as err:
                how = exit_description(self.workers[name].poll())
                stats[name] = {"error": f"no stats: {err.__class__.__name__} (worker {how})"}
        for name, p in self.workers.items():
            if p in self.live.remote:  # on a server: its wrapper there stops it
                self.live.stop_process(p)
                continue
            pid, start = self.supervisor.record.pids[f"worker {name}"]
            stop_pid(pid, start)
        for p in self.workers.values():
            with suppress(subprocess.TimeoutExpired):
                p.wait(timeout=2)
        return stats

    # -- the run ----------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        sc = self.sc
        ofns = [n.name for n in sc.nodes_with(Role.OFN)]
        # the drawn churn with the scheduled cuts (cut_ofn) applied, as the simulator has it
        self.churn = scheduled_availability(sc.churn, ofns, sc.duration_ms, sc.seed, sc.faults)
        initial = {tr.node: tr.available for tr in self.churn if tr.t_ms == 0}
        stats: dict[str, Any] = {}
        t0 = time.monotonic()
        setup_error: EmulationError | None = None
        view = None
        if self.view_config is not None:
            from fogsdn.live.live_view import start_live_view

            view = start_live_view(self, self.view_config)
        try:
            self.faults.check()  # before anything starts: a schedule this network refuses
            self.live.start(initial, t0)
            self._start_workers()
            self.live.timings["workers_s"] = time.monotonic() - t0
            if sc.churn.leave is LeaveMode.DROP:
                for name, up in initial.items():
                    if not up:
                        self.live.set_host_link(name, up=False)
            for name, up in initial.items():
                self.availability.append({"t": 0.0, "node": name,
                                          "state": "available" if up else "unavailable",
                                          "t_applied": 0.0, "t_installed": 0.0, "dropped": "",
                                          "handed_off": "", "error": ""})
                self.progress.ofn_state[name] = up
            self._start_clients()
            startup_s = self.live.timings["startup_s"] = time.monotonic() - t0
            if self.show_progress:
                print(f"[run] {self.supervisor.tag}: network up in {startup_s:.2f} s; "
                      f"{len(self.clients)} clients, results in {self.out}", flush=True)
            cpu0 = read_cpu_times()
            try:
                self._drive()
            finally:
                cpu1 = read_cpu_times()
                self.cpu_steal, self.cpu_idle = steal_share(cpu0, cpu1), idle_share(cpu0, cpu1)
        except KeyboardInterrupt:
            self.supervisor.interrupted = True
        except EmulationError as err:
            setup_error = err
        except Exception as err:  # whatever failed, what was collected is merged and kept
            self.supervisor.failure = f"{err.__class__.__name__}: {err}"
            print(f"\n[run] FAILED: {self.supervisor.failure}; keeping what was collected",
                  file=sys.stderr, flush=True)
        finally:
            if view is not None:
                view[0].stop()
                view[1].stop()
                self.policy_epochs = view[0].policy_epochs()
            self.live.teardown([
                ("clients", self._stop_clients),
                ("power", self._stop_power),
                ("workers", lambda: stats.update(self._stop_workers())),
            ])
        if setup_error is not None and not self.load_procs:
            raise setup_error  # nothing was collected: the set-up error is the whole story
        if setup_error is not None:
            self.supervisor.failure = str(setup_error)
        return finish_results(self.out, sc, self, stats)


def check_live_limits(sc: Scenario) -> None:
    """Refuse, before anything starts, a load no live run here can generate."""
    per_s = sc.timebase.real_rate_per_s(sc.workload.peak_rate)
    if sc.expected_requests() > MAX_LIVE_REQUESTS:
        raise ScenarioError(
            f"workload: (lambda_hp + lambda_lp) x duration_ms expects "
            f"{sc.expected_requests():.3g} requests; a live run takes at most "
            f"{MAX_LIVE_REQUESTS:.0e} (shorten duration_ms or lower the rates)")
    if per_s > MAX_LIVE_REQUESTS_PER_S:
        raise ScenarioError(
            f"workload: {per_s:.3g} requests per real second (busiest phase) at time_scale "
            f"{sc.time_scale:g} is more than a live run generates (at most "
            f"{MAX_LIVE_REQUESTS_PER_S:.0f}/s); raise time_scale or lower the rates")


def timing_for(scenario: Scenario, options: LiveOptions) -> LiveOptions:
    """Every connection timed where the policy learns from the measured response time:
    the simulator measures every request, and a learner compares epochs whose figures a
    one-in-N sample would leave to lag behind (docs/learning.md). Timing off stays off."""
    if options.measure_rt > 1 and policy_class(scenario.policy).learns_from_measured_rt:
        return replace(options, measure_rt=1)
    return options


def run_emulation(scenario: Scenario, out_dir: Path, stop: threading.Event | None = None,
                  show_progress: bool = True,
                  options: LiveOptions = LiveOptions(),
                  view: ViewConfig | None = None,
                  cluster: ClusterSpec | None = None) -> dict[str, Any]:
    """Run one scenario live with the switches in `options`; returns summary.json's
    content. `view`: serve the browser view and REST API meanwhile (docs/view.md).
    `cluster`: run the network on these servers (docs/scale-out.md)."""
    check_live_limits(scenario)
    scenario = draw_capacities(scenario, 0)  # a drawn capacity: the first replication's
    options = timing_for(scenario, options)
    if options.measure_rt:
        # a power of two, or a one-line error before anything starts
        sample_mask(options.measure_rt)
    return QueueingRun(scenario, out_dir, stop or threading.Event(), show_progress,
                       options, view, cluster).run()
