"""One live run over several servers (docs/scale-out.md): where each host and switch of
the network runs, the ssh sessions that reach each server, and what a cluster run
measures and writes about them.

The runner and the controller stay on this machine (the head); every host and switch
of the network runs on a server (`fogsdn.netem.cluster_plan.place`), or here where the
servers file pins it to `head`. Per server the run holds:

- a guard (`fogsdn.netem.cluster_guard`) that removes the run's bridges, interfaces and
  socket folder there however the run ends;
- one master ssh connection that carries the run's control channels: the Unix socket of
  each worker there is forwarded to the same path here (`-L`), so the runner's control
  calls are unchanged, the workers' load reports come back to the controller's stream
  socket (`-R`), and every short command (ovs-ofctl, a ping) reuses it;
- its clock against this machine's: the run's processes there run in a time namespace
  that cancels the difference (`fogsdn.netem.remote_child --clock-offset`), since send
  and completion instants from different machines are compared directly.

A run refuses to start, with one line, where it could not measure truly: a server that
does not see this machine's results folder (traces and the epoch are files there), or
whose clock a corrected process still reads more than 1 ms off.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from fogsdn.core.load_report import LOAD_STREAM_NAME
from fogsdn.core.processes import own_group_dying_with_parent
from fogsdn.core.scenario import Scenario
from fogsdn.netem.cluster_guard import GuardSession
from fogsdn.netem.cluster_net import measure_tunnel, ssh_options
from fogsdn.netem.cluster_plan import (
    HEAD,
    ClusterError,
    ClusterSpec,
    ServerSpec,
    crossing_links,
    path_traffic,
    place,
)

CLOCK_TOLERANCE_S = 0.001  # a send and a completion compared across servers
ROOT = Path(__file__).resolve().parents[2]  # this checkout, at the same path on servers
# what a process of the run on a server gets (ssh carries no environment)
REMOTE_ENV = {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
SHARED_CLOCK_S = 1e-4  # a server this close reads this machine's clock: nothing to correct
SSH_TIMEOUT_S = 30.0


def remote_command(argv: Sequence[str]) -> list[str]:
    """`argv` with the run's environment (`REMOTE_ENV`), as words for a server's shell."""
    return ["env", *(f"{k}={v}" for k, v in REMOTE_ENV.items()), *argv]


class ClusterRunError(RuntimeError):
    """A cluster run that cannot start: one line naming the server and the cause."""


@dataclass
class ServerSession:
    """The run's hold on one server: its guard and its master ssh connection."""

    spec: ServerSpec
    ssh: list[str]  # ssh [options] user@address: a fresh connection
    control_path: Path
    guard: GuardSession | None = None
    master: subprocess.Popen[bytes] | None = None
    log: Path | None = None  # the master connection's messages
    clock_offset_s: float | None = None  # its monotonic clock less this machine's
    clock_correction_s: float = 0.0  # what its processes of the run add (remote_child)
    clock_error_s: float | None = None  # half the fastest clock exchange: the bound
    residual_s: float | None = None  # a corrected process's clock less ours, at start
    residual_end_s: float | None = None  # the same at the end (the drift over the run)

    @property
    def via_master(self) -> list[str]:
        """ssh through the master connection (no new log-in)."""
        return ["ssh", "-S", str(self.control_path), *self.ssh[1:]]

    def run(self, command: str, timeout: float = SSH_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """A shell line on the server (one that does not end in `timeout` s: status 124)."""
        argv = [*self.via_master, command]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 124, "", f"server {self.spec.name}: "
                                               f"no answer in {timeout:g} s")


@dataclass
class ClusterSite:
    """The servers of one run and where each graph node goes on them."""

    spec: ClusterSpec
    tag: str
    sock_dir: Path
    out_dir: Path
    graph: nx.Graph
    traffic: Mapping[frozenset[str], float] = field(default_factory=dict)
    sessions: dict[str, ServerSession] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)  # graph node -> server name
    head: str = ""  # this machine's address on the servers' LAN
    tunnels: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        on_head = {n for n, where in self.spec.placement.items() if where == HEAD}
        unknown = sorted(on_head - set(self.graph.nodes))
        if unknown:
            raise ClusterError(f"placement.{unknown[0]}: no such host or switch in the network")
        rest = self.graph.subgraph(n for n in self.graph.nodes if n not in on_head)
        pinned = {n: where for n, where in self.spec.placement.items() if where != HEAD}
        self.placement = {**place(rest, self.spec.names, self.traffic, pinned),
                          **dict.fromkeys(on_head, HEAD)}
        spec = self.spec
        for s in spec.servers:
            ssh = ["ssh", *ssh_options(s.key, s.port, spec.known_hosts),
                   f"{s.user}@{s.address}"]
            self.sessions[s.name] = ServerSession(s, ssh, self.sock_dir / f"ssh-{s.name}")

    # -- start ------------------------------------------------------------------------
    def start(self) -> None:
        """Reach every server, check it can take part, start its guard and master."""
        self.sock_dir.mkdir(parents=True, exist_ok=True)
        probe = self.out_dir.resolve() / f".cluster-{self.tag}"
        probe.write_text(self.tag)
        try:
            for name, s in self.sessions.items():
                s.guard = self._guard(s)
                # its messages (a forwarded socket not listening yet, say) to a log, not
                # a pipe nobody reads, which would fill and stop it
                s.log = self.out_dir.resolve() / f"ssh-{name}.log"
                with open(s.log, "ab") as log:
                    s.master = subprocess.Popen(
                        [*s.ssh[:1], "-M", "-S", str(s.control_path), "-N",
                         "-o", "ExitOnForwardFailure=yes", "-o", "ServerAliveInterval=5",
                         *s.ssh[1:]],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        preexec_fn=own_group_dying_with_parent)
                self._wait_master(s)
                seen = s.run(f"cat {shlex.quote(str(probe))}").stdout.strip()
                if seen != self.tag:
                    raise ClusterRunError(
                        f"server {name}: does not see this machine's results folder "
                        f"{self.out_dir.resolve()} (a cluster run needs it shared, as on NFS)")
                self._correct_clock(s)
                made = s.run(f"mkdir -p {shlex.quote(str(self.sock_dir))}")
                if made.returncode != 0:
                    raise ClusterRunError(f"server {name}: {self.sock_dir}: "
                                          f"{made.stderr.strip() or 'not made'}")
                # the workers' load reports there: to the controller's stream socket here
                stream = self.sock_dir / LOAD_STREAM_NAME
                self._forward(s, "-R", f"{stream}:{stream}")
            self.head = self._head_address()
        finally:
            probe.unlink(missing_ok=True)

    def _guard(self, s: ServerSession) -> GuardSession:
        try:
            return GuardSession(s.ssh, self.tag, sys.executable,
                                remove_dirs=(str(self.sock_dir),))
        except (RuntimeError, OSError) as err:
            raise ClusterRunError(f"server {s.spec.name} ({s.spec.address}): {err}") from None

    @staticmethod
    def _wait_master(s: ServerSession) -> None:
        deadline = time.monotonic() + SSH_TIMEOUT_S
        assert s.master is not None
        while time.monotonic() < deadline:
            if s.master.poll() is not None:
                err = s.log.read_text(errors="replace").strip() if s.log else ""
                raise ClusterRunError(f"server {s.spec.name} ({s.spec.address}): ssh: "
                                      f"{err.splitlines()[-1] if err else 'exited'}")
            check = subprocess.run([*s.via_master[:3], "-O", "check", *s.ssh[1:]],
                                   capture_output=True, stdin=subprocess.DEVNULL)
            if check.returncode == 0:
                return
            time.sleep(0.05)
        raise ClusterRunError(f"server {s.spec.name} ({s.spec.address}): no ssh connection "
                              f"in {SSH_TIMEOUT_S:g} s")

    def _correct_clock(self, s: ServerSession) -> None:
        """Measure the server's monotonic clock against this machine's; where it differs,
        the run's processes there get a time namespace that cancels the difference
        (`fogsdn.netem.remote_child --clock-offset`), checked by measuring a process so
        corrected. One line where it cannot be: every instant of the run is compared
        across machines."""
        name = s.spec.name
        s.clock_offset_s, s.clock_error_s = self._clock_offset(s)
        if abs(s.clock_offset_s) <= SHARED_CLOCK_S:
            s.residual_s = s.clock_offset_s  # one clock already (one kernel)
            return
        s.clock_correction_s = -s.clock_offset_s
        s.residual_s, _ = self._clock_offset(s, s.clock_correction_s)
        if abs(s.residual_s) > CLOCK_TOLERANCE_S:
            raise ClusterRunError(
                f"server {name}: its monotonic clock is {s.clock_offset_s:+.6f} s off this "
                f"machine's, and a corrected process still reads {s.residual_s * 1e3:+.3f} ms "
                f"off (more than {CLOCK_TOLERANCE_S * 1e3:g} ms): the run compares instants "
                "from both")

    def measure_drift(self) -> None:
        """Each corrected server's residual again, at the run's end: what its clock
        drifted from this machine's meanwhile (stated beside the results)."""
        for s in self.sessions.values():
            if s.master is not None and s.master.poll() is None and s.residual_s is not None:
                try:
                    s.residual_end_s, _ = self._clock_offset(s, s.clock_correction_s)
                except (ClusterRunError, OSError, subprocess.SubprocessError):
                    s.residual_end_s = None

    @staticmethod
    def _clock_offset(s: ServerSession, correction_s: float = 0.0, exchanges: int = 10
                      ) -> tuple[float, float]:
        """The monotonic clock of a process on the server (corrected by `correction_s`)
        less this machine's, and its error bound: one process there answers each line
        with its clock; the fastest exchange's middle is taken as the instant it read it
        (the error is at most half that exchange)."""
        answer = ("import sys, time\nfor _ in sys.stdin: "
                  "print(repr(time.monotonic()), flush=True)")
        words = ["python3", "-u", "-c", answer]
        if correction_s:
            words = [sys.executable, "-m", "fogsdn.netem.remote_child", "--pass-stdin",
                     "--clock-offset", repr(correction_s), "--", *words]
        proc = subprocess.Popen([*s.via_master, shlex.join(remote_command(words))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdin is not None and proc.stdout is not None
        best: tuple[float, float] | None = None
        try:
            for _ in range(exchanges):
                t0 = time.monotonic()
                proc.stdin.write("\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                t1 = time.monotonic()
                try:
                    there = float(line)
                except ValueError:
                    raise ClusterRunError(f"server {s.spec.name}: no clock reading: "
                                          f"{line.strip() or 'no output'}") from None
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, there - (t0 + t1) / 2)
        finally:
            proc.stdin.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        assert best is not None
        return best[1], best[0] / 2

    def _head_address(self) -> str:
        """This machine's address towards the first server: where switches reach the
        controller."""
        first = self.spec.servers[0].address
        r = subprocess.run(["ip", "-o", "route", "get", first], capture_output=True,
                           text=True)
        words = r.stdout.split()
        if r.returncode != 0 or "src" not in words:
            raise ClusterRunError(f"no route from this machine to server "
                                  f"{self.spec.servers[0].name} ({first})")
        return words[words.index("src") + 1]

    # -- during the run -----------------------------------------------------------------
    def on_head(self, node: str) -> bool:
        return self.placement[node] == HEAD

    def server_of(self, node: str) -> ServerSession:
        """The session of `node`'s server (KeyError for a node on the head)."""
        return self.sessions[self.placement[node]]

    def mininet_params(self, node: str) -> dict[str, Any]:
        """What Mininet's cluster edition needs to put `node` on its server (on the head:
        a local node whose tunnels start from the head's LAN address)."""
        if self.on_head(node):
            return {"server": "localhost", "serverIP": self.head, "ssh_opts": []}
        s = self.server_of(node).spec
        return {"server": s.name, "serverIP": s.address, "user": s.user,
                "ssh_opts": ssh_options(s.key, s.port, self.spec.known_hosts)}

    def forward_socket(self, node: str, path: Path) -> None:
        """The Unix socket `path` on `node`'s server, at the same path here."""
        self._forward(self.server_of(node), "-L", f"{path}:{path}")

    @staticmethod
    def _forward(s: ServerSession, way: str, spec: str) -> None:
        """A Unix socket forwarded over the master connection (`-L`: there to here,
        `-R`: here to there)."""
        r = subprocess.run([*s.via_master[:3], "-O", "forward", "-o",
                            "StreamLocalBindUnlink=yes", way, spec, *s.ssh[1:]],
                           capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=SSH_TIMEOUT_S)
        if r.returncode != 0:
            raise ClusterRunError(f"server {s.spec.name}: forwarding {spec}: "
                                  f"{r.stderr.strip() or 'refused'}")

    def ovs(self, node: str, argv: Sequence[str], timeout: float = 10.0
            ) -> subprocess.CompletedProcess[str]:
        """An ovs-ofctl or ovs-vsctl command for switch `node`, on its server."""
        return self.server_of(node).run(shlex.join(argv), timeout=timeout)

    def measure_tunnels(self, nodes: Mapping[str, Any], time_scale: float) -> None:
        """Each link that crosses servers: the LAN it crosses, measured once per pair of
        servers; what an unshaped link cannot take off its delay is said in `notes`."""
        measured: dict[frozenset[str], dict[str, Any]] = {}
        for u, v in crossing_links(self.graph, self.placement):
            pair = frozenset((self.placement[u], self.placement[v]))
            if pair not in measured:
                measured[pair] = dict(measure_tunnel(nodes[u], nodes[v]).to_dict())
            cost = measured[pair]
            d = self.graph.edges[u, v]
            one_way_ms = float(cost.get("one_way_real_ms") or 0.0)
            row = {"link": str(d["id"]), "ends": [u, v], **cost,
                   "servers": [self.placement[u], self.placement[v]],
                   "configured_delay_model_ms": float(d.get("delay_ms", 0.0)),
                   "tunnel_model_ms": round(one_way_ms / time_scale, 6)}
            self.tunnels.append(row)
            if float(d.get("delay_ms", 0.0)) * time_scale < one_way_ms:
                self.notes.append(
                    f"link {d['id']} (between {u} and {v}) crosses servers {row['servers'][0]} "
                    f"and {row['servers'][1]}: its tunnel adds {one_way_ms:.3f} real ms "
                    f"({row['tunnel_model_ms']:.4f} model ms) each way, more than its "
                    "configured delay, which its element (if any) takes off: the path runs "
                    "slower than configured by the rest")

    def report(self) -> dict[str, Any]:
        """summary.json's `cluster` block."""
        return {
            "head": self.head,
            "servers": {n: {"address": s.spec.address, **_clock_report(s)}
                        for n, s in self.sessions.items()},
            "placement": dict(sorted(self.placement.items())),
            "crossing_links": self.tunnels,
        }

    # -- end ------------------------------------------------------------------------------
    def clock_correction(self, node: str) -> float:
        """What a process of the run on `node`'s machine adds to its monotonic clock."""
        return 0.0 if self.on_head(node) else self.server_of(node).clock_correction_s

    def close(self) -> list[str]:
        """Each server's master ssh ended and its guard's clean-up done; what the guards
        said they removed."""
        said: list[str] = []
        for name, s in self.sessions.items():
            if s.master is not None and s.master.poll() is None:
                subprocess.run([*s.via_master[:3], "-O", "exit", *s.ssh[1:]],
                               capture_output=True, stdin=subprocess.DEVNULL, timeout=10)
                try:
                    s.master.wait(5)
                except subprocess.TimeoutExpired:
                    s.master.kill()
                    s.master.wait()
            if s.guard is not None:
                said.append(f"{name}: {s.guard.close()}")
                s.guard = None
        return said


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e3, 4)


def _clock_report(s: ServerSession) -> dict[str, Any]:
    """A server's clock against this machine's, ms: its offset, the correction its
    processes ran with, the bound of the measurement, and a corrected process's residual
    at the start and the end (the drift)."""
    return {"clock_offset_ms": _ms(s.clock_offset_s),
            "clock_correction_ms": _ms(s.clock_correction_s),
            "clock_error_ms": _ms(s.clock_error_s),
            "clock_residual_ms": _ms(s.residual_s),
            "clock_residual_end_ms": _ms(s.residual_end_s)}


def expected_traffic(graph: nx.Graph, scenario: Scenario) -> dict[frozenset[str], float]:
    """The traffic per link a placement should keep off the LAN: every client's share of
    the offered load (per model ms) to every fog host, shared evenly among them (which
    node serves a request is the policy's, known only at run time)."""
    clients = [n for n, r in graph.nodes(data="role") if r == "client"]
    fogs = [n for n, r in graph.nodes(data="role") if r in ("fn", "ofn")]
    if not clients or not fogs:
        return {}
    rate = scenario.workload.peak_rate / len(clients) / len(fogs)
    return path_traffic(graph, [(c, f, rate) for c in clients for f in fogs])
