"""One network over several servers, on Mininet's cluster edition
(`mininet.examples.cluster`, shipped with Debian's mininet): its remote hosts, switches and
links, subclassed where they do not fit us (docs/scale-out.md).

- **Access.** The cluster edition reaches servers as `sudo -u user ssh ...` and runs
  `sudo` there; we run as root on every server, reach them with the servers file's key
  and options, and every ssh of ours dies with this process (so the remote side of its
  session ends with it).
- **Cleanup.** The cluster edition registers `mn -c` on every server, which stops every
  Open vSwitch bridge and controller there, ours or not. Our remote nodes take their
  server back out of that list: a run removes only what it made, by name and PID.
- **Tunnels.** Its ssh tunnels name every tap `tap9` while they are made (two runs, or
  two links at once, collide) and its GRE tunnels need `gretap`, which this kernel
  lacks. A cross-server link here is a VXLAN pair (`VxlanLink`), one VNI per link, named
  with the run's tag until it is renamed into place.
"""

from __future__ import annotations

import base64
import itertools
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from mininet.examples.cluster import (
    ClusterCleanup,
    RemoteHost,
    RemoteLink,
    RemoteMixin,
    RemoteNode,
    RemoteOVSSwitch,
)
from mininet.link import TCIntf

from fogsdn.core.processes import hangup_default, own_group_dying_with_parent
from fogsdn.netem.hop_cost import TunnelCost, ping_rtts_ms

VXLAN_PORT = 4789  # IANA's; one UDP socket per server carries every link's VNI
# the inner frame must fit the LAN's frame with VXLAN's 50 bytes around it: hosts keep
# their 1500, so the LAN between servers needs an MTU of at least 1550
VXLAN_OVERHEAD = 50
LINK_MTU = 1500
RCMD_TIMEOUT_S = 30.0
_vni = itertools.count(1000)


class ClusterNetError(RuntimeError):
    """A remote step that failed: one line naming the server and the step."""


def ssh_options(key: str | None, port: int = 22, known_hosts: str | None = None) -> list[str]:
    """ssh's options for a server of ours: its key, no prompt; the servers' host keys
    from `known_hosts` where the servers file names one (pinned), else ssh's own store,
    a new server's key accepted on first sight."""
    opts = ["-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
            "-o", "StrictHostKeyChecking=" + ("yes" if known_hosts else "accept-new"),
            "-p", str(port)]
    if known_hosts is not None:
        opts += ["-o", f"UserKnownHostsFile={known_hosts}"]
    if key is not None:
        opts = ["-i", key, *opts]
    return opts


class FogRemoteMixin(RemoteMixin):
    """The cluster edition's RemoteMixin as we use it: root on both ends, our ssh
    options, ssh processes that die with us, and no `mn -c` for our servers."""

    def __init__(self, name: str, *args: Any, ssh_opts: Sequence[str] = (), **kwargs: Any
                 ) -> None:
        self.ssh_opts = list(ssh_opts)
        kwargs.setdefault("user", "root")
        super().__init__(name, *args, **kwargs)
        ClusterCleanup.serveruser.pop(self.server, None)  # never `mn -c` on our servers
        if self.isRemote:
            self.sshcmd = self._ssh(tt=True)

    def _ssh(self, tt: bool) -> list[str]:
        return ["ssh", *self.ssh_opts, *(["-tt"] if tt else []), f"{self.user}@{self.serverIP}"]

    def rcmd(self, *cmd: str, **opts: Any) -> str:
        """A command on the node's server, in its root namespace: its output. (The
        cluster edition's adds bytes to a str, as under Python 2.)"""
        proc = self.rpopen(*cmd, **opts)
        out, _ = proc.communicate(timeout=RCMD_TIMEOUT_S)
        return out.decode(errors="replace") if isinstance(out, bytes) else str(out or "")

    def _popen(self, cmd: str | list[str], sudo: bool = True, tt: bool = True,
               **params: Any) -> subprocess.Popen[bytes]:
        """A process on the node's server: over ssh (with `-tt` unless `tt` is false),
        never through sudo, dying with this process."""
        del sudo  # we are root on every server
        argv = cmd.split() if isinstance(cmd, str) else list(cmd)
        if self.isRemote:  # the shell starts inside Mininet's __init__: before `sshcmd`
            # ssh joins its words with spaces for the remote shell: a list is one command
            # whose words arrive as they are (JSON, spaces), a string a shell line
            argv = [*self._ssh(tt), cmd if isinstance(cmd, str) else shlex.join(argv)]
        elif isinstance(cmd, str):  # a node on this machine: a string is a shell line too
            argv = ["sh", "-c", cmd]
        if self.isRemote:
            params["preexec_fn"] = own_group_dying_with_parent
        else:  # a process group of its own would make `mnexec -d`'s setsid() fail
            params.setdefault("preexec_fn", hangup_default)
        proc: subprocess.Popen[bytes] = super(RemoteMixin, self)._popen(argv, **params)
        return proc



class FogRemoteHost(FogRemoteMixin, RemoteHost):
    """A host on a server (its own network namespace there)."""

    def start_process(self, argv: Sequence[str], env: dict[str, str],
                      clock_offset_s: float = 0.0, **params: Any) -> subprocess.Popen[Any]:
        """`argv` in this host's namespace on its server, under
        `fogsdn.netem.remote_child`: closing the returned process's stdin stops it
        there (SIGTERM, then SIGKILL), as does the end of its ssh (this process died).
        `env`: variables it gets (ssh carries none); `clock_offset_s`: what its monotonic
        clock reads ahead of the server's (the runner's clock, measured)."""
        clock = ["--clock-offset", repr(clock_offset_s)] if clock_offset_s else []
        words = ["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m",
                 "fogsdn.netem.remote_child", *clock, "--", *argv]
        params["stdin"] = subprocess.PIPE
        # no `mnexec -d`: sshd's command leads its own session already, so mnexec's
        # setsid() fails, and it would fork, its parent exiting at once (ssh with it)
        params["mncmd"] = ["mnexec", "-a", str(self.pid)]
        proc: subprocess.Popen[Any] = self.popen(words, **params)
        return proc


class FogRemoteNode(FogRemoteMixin, RemoteNode):
    """A bare node (a link element's, in its server's root namespace)."""


class FogRemoteOVSSwitch(FogRemoteMixin, RemoteOVSSwitch):
    """An Open vSwitch bridge on a server (that server's own ovs-vswitchd)."""


class VxlanLink(RemoteLink):
    """A link whose ends may be on two servers: a veth pair on one server, as Mininet's
    Link; across servers a VXLAN device on each, one VNI per link, over the servers'
    LAN. Made under a name with the run's tag, moved into the node's namespace, then
    renamed to the interface name Mininet gave it."""

    tag = "fz"  # the run's tag (`VxlanLink.for_run`)

    def __init__(self, node1: Any, node2: Any, **kwargs: Any) -> None:
        """Checksum offload off on both ends, as Mininet's TCULink does: a userspace
        switch's conntrack otherwise sees TCP segments whose checksum the sender left to
        a NIC that never computes it (`conntrack_l4csum_err`), and drops them."""
        kwargs.setdefault("cls1", TCIntf)
        kwargs.setdefault("cls2", TCIntf)
        kwargs.update(txo=False, rxo=False)
        super().__init__(node1, node2, **kwargs)

    @classmethod
    def for_run(cls, tag: str) -> type[VxlanLink]:
        return type(f"VxlanLink_{tag}", (cls,), {"tag": tag})

    def makeTunnel(self, node1: Any, node2: Any, intfname1: str, intfname2: str,  # noqa: N802
                   addr1: str | None = None, addr2: str | None = None) -> None:
        vni = next(_vni)
        for node, peer, name, addr in ((node1, node2, intfname1, addr1),
                                       (node2, node1, intfname2, addr2)):
            temp = f"{self.tag}x{vni}"[:15]
            made = node.rcmd(f"ip link add {temp} type vxlan id {vni} remote {peer.serverIP}"
                             f" local {node.serverIP} dstport {VXLAN_PORT}"
                             f" && ip link set {temp} mtu {LINK_MTU}")
            if made.strip():
                raise ClusterNetError(f"server {node.server}: vxlan {vni}: {_first(made)}")
            if node.inNamespace:
                self.moveIntf(temp, node)
            renamed = node.cmd(f"ip link set {temp} name {name}"
                               + (f" address {addr}" if addr else ""))
            if renamed.strip():
                raise ClusterNetError(f"server {node.server}: rename {temp}: {_first(renamed)}")
        self.tunnel = None  # nothing to stop but the two devices (`stop`)

    def stop(self) -> None:
        self.intf1.delete()
        self.intf2.delete()


def measure_tunnel(a: FogRemoteMixin, b: FogRemoteMixin, count: int = 20,
                   interval_s: float = 0.01, throughput_s: float | None = 0.5) -> TunnelCost:
    """The LAN between the servers of nodes `a` and `b`, as a cross-server link between
    them crosses it: pings from `a`'s server's root namespace to `b`'s server address,
    10 ms apart (iputils ping spins a core at shorter intervals, docs/links.md), then
    `throughput_s` seconds of one TCP stream (None: not measured)."""
    deadline_s = max(1, int(count * interval_s) + 2)
    out = a.rcmd(f"ping -n -c {count} -i {interval_s:g} -W 1 -w {deadline_s} {b.serverIP}")
    rtts = tuple(ping_rtts_ms(out))
    mbps = measure_throughput(a, b, throughput_s) if throughput_s is not None and rtts else None
    return TunnelCost((str(a.server), str(b.server)), count, rtts, mbps)


# the two ends of `measure_throughput`, run by the servers' own python3 (stdlib only)
_SINK = """
import socket, sys, time
s = socket.create_server((sys.argv[1], 0))
print(s.getsockname()[1], flush=True)
s.settimeout(15)
c, _ = s.accept()
c.settimeout(15)
n, t0 = 0, None
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    t0 = time.monotonic() if t0 is None else t0
    n += len(b)
print(n, time.monotonic() - t0 if t0 is not None else 0.0, flush=True)
"""
_SOURCE = """
import socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
buf, end = bytes(1 << 16), time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    c.sendall(buf)
c.close()
"""


def _python(code: str) -> str:
    """`python3 -c` of `code` as one word that a remote shell passes on unchanged."""
    packed = base64.b64encode(code.encode()).decode()
    return f"python3 -c 'exec(__import__(\"base64\").b64decode(\"{packed}\"))'"


def measure_throughput(a: FogRemoteMixin, b: FogRemoteMixin, seconds: float = 0.5
                       ) -> float | None:
    """Mb/s of one TCP stream from `a`'s server to `b`'s over their LAN (root
    namespaces; what a cross-server link's frames share), as `b` received it; None
    where nothing arrived."""
    sink = b.rpopen(f"{_python(_SINK)} {b.serverIP}", tt=False)
    try:
        assert sink.stdout is not None
        port = sink.stdout.readline().decode().strip()
        if not port.isdigit():
            raise ClusterNetError(f"server {b.server}: no throughput sink: {port or 'no output'}")
        sent = a.rcmd(f"{_python(_SOURCE)} {b.serverIP} {port} {seconds:g}", tt=False)
        out, _ = sink.communicate(timeout=RCMD_TIMEOUT_S)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.wait()
    text = out.decode(errors="replace")
    try:
        received_text, took_text = text.split()
        received, took_s = int(received_text), float(took_text)
    except ValueError:
        raise ClusterNetError(f"servers {a.server} and {b.server}: throughput not measured: "
                              f"{_first(sent) or _first(text) or 'no output'}") from None
    return received * 8 / took_s / 1e6 if received > 0 and took_s > 0 else None


def _first(text: str) -> str:
    lines = [x for x in re.split(r"[\r\n]+", text) if x.strip()]
    return lines[0].strip() if lines else ""
