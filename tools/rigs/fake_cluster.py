"""Self-contained servers on one machine, for testing one emulation over several servers
(fogsdn.netem.cluster_plan; docs/scale-out.md) where there is only one machine.

Each server is a set of namespaces of its own (mount, PID, UTS, network) with its own
/run, its own Open vSwitch (ovsdb-server and ovs-vswitchd, userspace datapath) and its
own sshd, joined by a LAN (a Linux bridge in a network namespace of its own, with a veth
to this machine), as Mininet's 2018 `fakecluster.py` did. The file system is shared, so
the project and its virtual environment are at the same path on every server, as a
cluster's shared home would put them. A server may also get a time namespace whose
monotonic clock reads ahead of this machine's (`clock_offsets_s`), as a separate
machine's would: the run must then measure and correct it. Root only; such servers
share the machine's cores: they prove correctness, not speed.

Nothing a cluster makes outlives the process that made it, even SIGKILLed: each server's
first process and the LAN's are killed with their parent; a server's init takes its PID
namespace along, and a veth goes with the namespace of either end. `close` does the same
at once and removes the keys.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from fogsdn.core.processes import killed_with_parent

LAN_PREFIX = "10.252.0"  # the servers' LAN: .1 is this machine's side, .10+ the servers
START_TIMEOUT_S = 20.0
# a jumbo LAN, as a cluster's should be: a tunnel's frame carries a 1500-byte one inside
LAN_MTU = "9000"
SSH_OPTIONS = ("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5")

# the first process of a server: its own /run and Open vSwitch state, its name, its
# loopback; then it waits for its LAN port (moved in by the parent), starts Open vSwitch
# and sshd, and stays, as the PID namespace's init, until killed
_SERVER_INIT = r"""
set -eu
mount -t tmpfs -o mode=755 fzrun /run
mkdir -p /run/openvswitch /run/sshd
mount -t tmpfs -o mode=755 fzovsetc /etc/openvswitch
mount -t tmpfs -o mode=755 fzovslog /var/log/openvswitch
hostname "$FZ_NAME"
ip link set lo up
for _ in $(seq 200); do ip link show "$FZ_PORT" >/dev/null 2>&1 && break; sleep 0.05; done
ip addr add "$FZ_ADDRESS/24" dev "$FZ_PORT"
ip link set "$FZ_PORT" up
ovsdb-tool create /etc/openvswitch/conf.db /usr/share/openvswitch/vswitch.ovsschema
ovsdb-server /etc/openvswitch/conf.db --remote=punix:/run/openvswitch/db.sock \
    --pidfile --detach --log-file
ovs-vsctl --no-wait init
ovs-vswitchd --pidfile --detach --log-file
/usr/sbin/sshd -f "$FZ_DIR/sshd_config"
touch "$FZ_DIR/ready"
while :; do sleep 3600; done
"""


class FakeClusterError(RuntimeError):
    """A server that did not come up: one line saying which and why."""


@dataclass
class FakeServer:
    name: str
    address: str
    port: str  # its LAN interface inside its network namespace
    state_dir: Path  # sshd config, host key, its log
    process: subprocess.Popen[bytes] | None = None

    @property
    def init_pid(self) -> int:
        """PID 1 of its PID namespace, as this machine sees it."""
        assert self.process is not None
        return _only_child(self.process.pid)

    def enter(self, *cmd: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        """`cmd` inside the server's namespaces, without ssh (for set-up and checks)."""
        return subprocess.run(["nsenter", "-t", str(self.init_pid), "-m", "-u", "-n", "-p",
                               "--", *cmd], capture_output=True, text=True, timeout=timeout)


@dataclass
class FakeCluster:
    """`n` self-contained servers on a LAN, with one ssh key that logs in as root on all."""

    n: int = 2
    # each server's monotonic clock ahead of this machine's, whole seconds (a time
    # namespace of its own): servers that, like separate machines, do not share a clock
    clock_offsets_s: tuple[int, ...] = ()
    tag: str = field(default_factory=lambda: "fc" + secrets.token_hex(2))
    servers: list[FakeServer] = field(default_factory=list)
    home: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fogsdn-cluster-")))

    lan: subprocess.Popen[bytes] | None = None  # holds the LAN's network namespace

    @property
    def key(self) -> Path:
        return self.home / "id_ed25519"

    def ssh_command(self, server: FakeServer, *cmd: str) -> list[str]:
        return ["ssh", "-i", str(self.key), *SSH_OPTIONS, f"root@{server.address}", *cmd]

    def ssh(self, server: FakeServer, *cmd: str, timeout: float = 30.0
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.ssh_command(server, *cmd), capture_output=True, text=True,
                              timeout=timeout)

    # -- up and down ------------------------------------------------------------------
    def start(self) -> FakeCluster:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        self.lan = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"],
                                    preexec_fn=killed_with_parent)
        _wait_own_net(self.lan.pid)
        self._in_lan("ip", "link", "add", "lan", "type", "bridge")
        self._in_lan("ip", "link", "set", "lan", "up")
        here, there = f"{self.tag}v0", f"{self.tag}l0"
        _run("ip", "link", "add", here, "mtu", LAN_MTU, "type", "veth", "peer", "name", there,
             "mtu", LAN_MTU)
        _run("ip", "link", "set", there, "netns", str(self.lan.pid))
        self._in_lan("ip", "link", "set", there, "master", "lan", "up")
        _run("ip", "addr", "add", f"{LAN_PREFIX}.1/24", "dev", here)
        _run("ip", "link", "set", here, "up")
        for i in range(self.n):
            self.servers.append(self._start_server(i))
        deadline = time.monotonic() + START_TIMEOUT_S
        for s in self.servers:
            while not (s.state_dir / "ready").exists():
                if s.process is not None and s.process.poll() is not None:
                    raise FakeClusterError(f"server {s.name} exited at start: "
                                           f"{_tail(s.state_dir / 'init.log')}")
                if time.monotonic() > deadline:
                    raise FakeClusterError(f"server {s.name} not up in {START_TIMEOUT_S:g} s: "
                                           f"{_tail(s.state_dir / 'init.log')}")
                time.sleep(0.05)
            while self.ssh(s, "true", timeout=10).returncode != 0:
                if time.monotonic() > deadline:
                    raise FakeClusterError(f"server {s.name}: no ssh in {START_TIMEOUT_S:g} s")
                time.sleep(0.1)

    def _start_server(self, i: int) -> FakeServer:
        name = f"{self.tag}s{i + 1}"
        d = self.home / name
        d.mkdir()
        server = FakeServer(name, f"{LAN_PREFIX}.{10 + i}", "lan0", d)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
        shutil.copy(self.key.with_suffix(".pub"), d / "authorized_keys")
        (d / "sshd_config").write_text(
            f"ListenAddress {server.address}\nPort 22\nHostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
            f"StrictModes no\nPidFile /run/sshd.pid\nAcceptEnv no\n")
        env = dict(os.environ, FZ_NAME=name, FZ_ADDRESS=server.address, FZ_PORT=server.port,
                   FZ_DIR=str(d))
        with open(d / "init.log", "wb") as log:
            offset = self.clock_offsets_s[i] if i < len(self.clock_offsets_s) else 0
            clock = ["--time", "--monotonic", str(offset)] if offset else []
            server.process = subprocess.Popen(
                ["unshare", *clock, "--mount", "--uts", "--net", "--pid", "--fork",
                 "--mount-proc",
                 "--propagation", "private", "--kill-child=SIGKILL",
                 "bash", "-c", _SERVER_INIT], env=env, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=killed_with_parent)
        pid = _wait_child(server.process)
        self._in_lan("ip", "link", "add", f"s{i + 1}", "mtu", LAN_MTU, "type", "veth",
                     "peer", "name", "peer", "mtu", LAN_MTU)
        self._in_lan("ip", "link", "set", f"s{i + 1}", "master", "lan", "up")
        self._in_lan("ip", "link", "set", "peer", "netns", str(pid), "name", server.port)
        return server

    def _in_lan(self, *cmd: str) -> None:
        assert self.lan is not None
        _run("nsenter", "-t", str(self.lan.pid), "-n", "--", *cmd)

    def close(self) -> None:
        """Every server's namespaces (their init killed, and with it everything in them),
        the LAN, the keys. Safe to call twice."""
        for s in self.servers:
            if s.process is not None and s.process.poll() is None:
                s.process.send_signal(signal.SIGKILL)  # --kill-child takes the init along
                try:
                    s.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        if self.lan is not None and self.lan.poll() is None:
            self.lan.kill()  # the LAN's namespace, and with it every veth into it
            self.lan.wait(timeout=5)
        deadline = time.monotonic() + 10.0  # the kernel removes a dead namespace's links later
        while leftover_links(self.tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        shutil.rmtree(self.home, ignore_errors=True)

    def servers_file(self, placement: dict[str, int] | None = None) -> Path:
        """A servers file for `run_testbed.py --cluster` naming these servers, their key
        and their host keys (pinned); `placement`: graph node -> server index."""
        known = self.home / "known_hosts"
        known.write_text("".join(
            f"{s.address} {(s.state_dir / 'host_key.pub').read_text().split()[0]} "
            f"{(s.state_dir / 'host_key.pub').read_text().split()[1]}\n"
            for s in self.servers))
        lines = ["servers:"] + [f"  - {{name: {s.name}, address: {s.address}, key: {self.key}}}"
                                for s in self.servers]
        if placement:
            lines.append("placement: {" + ", ".join(
                f"{n}: {self.servers[i].name}" for n, i in placement.items()) + "}")
        lines.append(f"known_hosts: {known}")
        path = self.home / "servers.yaml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def leftover_links(tag: str) -> list[str]:
    """This machine's interfaces named with a cluster's tag (none once it is gone)."""
    return [n.name for n in Path("/sys/class/net").iterdir() if n.name.startswith(tag)]


def _run(*cmd: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise FakeClusterError(f"{' '.join(cmd)}: {(r.stderr or r.stdout).strip()}")


def _wait_own_net(pid: int) -> None:
    """Until `pid` is in a network namespace other than ours (unshare has run)."""
    ours = os.readlink("/proc/self/ns/net")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") != ours:
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise FakeClusterError("the LAN's namespace did not come up")


def _only_child(pid: int) -> int:
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    if len(kids) != 1:
        raise FakeClusterError(f"unshare {pid}: {len(kids)} children, expected its init")
    return int(kids[0])


def _wait_child(proc: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise FakeClusterError(f"unshare exited with {proc.returncode}")
        try:
            return _only_child(proc.pid)
        except (FakeClusterError, OSError):
            time.sleep(0.01)
    raise FakeClusterError("unshare: no init process")


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "empty log"
