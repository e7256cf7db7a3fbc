"""Mininet glue: a topology graph in, a started network of OVS userspace switches out.

The workarounds for this machine kind are in docs/architecture.md. A link with delay,
jitter, loss or a rate gets a link element: u--v becomes u--dK-eth0 and dK-eth1--v,
dK a bare root-namespace node whose interfaces a `fogsdn.netem.linkem` shaper splices.
Model ms become real ms (x time_scale) and a rate becomes rate / time_scale.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import networkx as nx
from mininet.link import TCULink
from mininet.net import Mininet
from mininet.node import Host, Node, OVSSwitch, RemoteController

from fogsdn.core.processes import hangup_default, stop_signals_deferred
from fogsdn.core.topology import HOST_PREFIX_LEN, LinkSpec, link_params
from fogsdn.netem.hop_cost import Deduction, deduct, deduct_peers
from fogsdn.netem.link_params import LinkParams
from fogsdn.netem.linkem import LinkShaper, make_shaper


class HangsUpMixin:
    """A Mininet node whose shell (and every process it starts through Mininet) ends at
    the SIGHUP with which Mininet stops it, even when the runner ignores SIGHUP
    (`fogsdn.core.processes.hangup_default`)."""

    def _popen(self, cmd: list[str], **params: Any) -> Any:
        params.setdefault("preexec_fn", hangup_default)
        return super()._popen(cmd, **params)  # type: ignore[misc]


class FogHost(HangsUpMixin, Host):
    """Mininet's Host, stopped by SIGHUP under nohup too."""


class ElementNode(HangsUpMixin, Node):
    """A link element's bare root-namespace node, stopped by SIGHUP under nohup too."""


class DirectOVSSwitch(HangsUpMixin, OVSSwitch):
    """Mininet's OVSSwitch, its ovs-vsctl run as a process of ours, not typed into the
    switch's shell: that shell reads through a pty, whose line holds 4,095 characters,
    and Mininet creates a bridge and all its ports in one ovs-vsctl line (about 80
    characters a port). From about 48 ports the line was cut, the bridge never came,
    and the run timed out waiting for its rules. The switch lives in the root namespace
    (datapath user), as this process does, so nothing else changes."""

    def vsctl(self, *args: Any, **kwargs: Any) -> str:
        if self.batch:
            return str(super().vsctl(*args, **kwargs))
        line = " ".join(str(a) for a in args)
        done = subprocess.run(f"ovs-vsctl {line}", shell=True, capture_output=True,
                              text=True, check=False)
        return done.stdout + done.stderr


class PlainRemoteController(HangsUpMixin, RemoteController):
    """RemoteController whose listening check is a plain TCP connect, and whose `stop`
    ends its shell (Mininet's does nothing: one shell was left per network built, for as
    long as the process that built it lived)."""

    def stop(self) -> None:
        self.terminate()

    def checkListening(self) -> None:  # noqa: N802 (Mininet's name)
        try:
            with socket.create_connection((self.ip, self.port), timeout=1.0):
                pass
        except OSError:
            raise RuntimeError(f"no controller listening on {self.ip}:{self.port}") from None


_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sH22x")


def set_interface_up(name: str, up: bool) -> None:
    """`ip link set NAME up|down` in the root namespace, as one ioctl."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = _IFREQ.pack(name.encode(), 0)
        flags = _IFREQ.unpack(fcntl.ioctl(s.fileno(), _SIOCGIFFLAGS, req))[1]
        flags = flags | _IFF_UP if up else flags & ~_IFF_UP
        fcntl.ioctl(s.fileno(), _SIOCSIFFLAGS, _IFREQ.pack(name.encode(), flags))


def real_params(link: LinkSpec, time_scale: float) -> LinkParams:
    """A link's model figures as the element's real ones."""
    return LinkParams(delay_ms=link.delay_ms * time_scale, jitter_ms=link.jitter_ms * time_scale,
                      loss=link.loss,
                      bw_mbps=None if link.bw_mbps is None else link.bw_mbps / time_scale)


@dataclass
class Network:
    """A started network and what the runner must know to drive and remove it."""

    net: Any
    bridges: dict[str, str]  # graph switch -> bridge name
    graph: nx.Graph
    time_scale: float
    shaper: LinkShaper | None = None
    elements: dict[str, Any] = field(default_factory=dict)  # link id -> root-namespace node
    per_hop_ms: float = 0.0  # real ms each element leaves out of its delay (hop_cost)
    configured: dict[str, LinkParams] = field(default_factory=dict)  # link id -> real, as asked
    # link id -> its per-peer table (peer IPv4 -> real one-way ms), as asked
    peer_tables: dict[str, dict[str, float]] = field(default_factory=dict)
    # link id -> real one-way ms its tunnel between servers adds (a run over servers)
    tunnel_ms: dict[str, float] = field(default_factory=dict)

    def set_link(self, link_id: str, up: bool) -> None:
        """Take one link down or up (carrier loss: the switch reports PortStatus)."""
        u, v, d = next((a, b, d) for a, b, d in self.graph.edges(data=True)
                       if d["id"] == link_id)
        if link_id in self.elements and self.shaper is not None:
            self.shaper.set_up(link_id, up)
            return
        if all(self.graph.nodes[n]["kind"] == "switch" for n in (u, v)):
            # both ends are switch ports in the root namespace: flip them at once
            # (microseconds), so that the failure starts when the caller says it does
            for n in (u, v):
                set_interface_up(f"{self.bridges[n]}-eth{d['ports'][n]}", up)
            return
        self.net.configLinkStatus(self._name(u), self._name(v), "up" if up else "down")

    def update_link(self, link_id: str, link: LinkSpec) -> None:
        """New delay, jitter, loss or rate on a shaped link, without restarting anything."""
        if self.shaper is None or link_id not in self.elements:
            raise ValueError(f"link {link_id} has no link element (it was built unshaped)")
        self.configured[link_id] = real_params(link, self.time_scale)
        self._shape(link_id)

    def _shape(self, link_id: str) -> None:
        assert self.shaper is not None
        params = self.configured[link_id]
        # what the element must add: the configured delay less the tunnel's, then less
        # the cost per hop (each at least 0)
        own = max(0.0, params.delay_ms - self.tunnel_ms.get(link_id, 0.0))
        self.shaper.update(link_id, deduct({link_id: own}, self.per_hop_ms).params(
            link_id, replace(params, delay_ms=own)))

    def set_tunnels(self, one_way_ms: Mapping[str, float]) -> dict[str, float]:
        """The measured one-way time of each shaped link's tunnel (real ms), taken off its
        element's delay from now on; what each could take off (the rest stays on the
        path: the link runs slower than configured by it)."""
        taken: dict[str, float] = {}
        for link_id, ms in one_way_ms.items():
            if self.shaper is None or link_id not in self.configured:
                continue
            self.tunnel_ms[link_id] = ms
            taken[link_id] = min(ms, self.configured[link_id].delay_ms)
            self._shape(link_id)
        return taken

    def set_per_hop_ms(self, per_hop_ms: float) -> None:
        """A new cost per hop to deduct: every shaped link's delay again, as asked less it."""
        if self.shaper is None or per_hop_ms == self.per_hop_ms:
            return
        self.per_hop_ms = per_hop_ms
        for link_id in self.configured:
            self._shape(link_id)
        for link_id in self.peer_tables:
            self._shape_peers(link_id)

    def update_peers(self, link_id: str, delays_ms: Mapping[str, float]) -> None:
        """A host link's whole per-peer table (peer IPv4 address -> model one-way ms); the
        cost per hop its element's own delay cannot absorb comes off each entry."""
        if self.shaper is None or link_id not in self.elements:
            raise ValueError(f"link {link_id} has no link element (it was built unshaped)")
        scale = self.time_scale
        self.peer_tables[link_id] = {ip: ms * scale for ip, ms in delays_ms.items()}
        self._shape_peers(link_id)

    def _shape_peers(self, link_id: str) -> None:
        assert self.shaper is not None
        base = self.configured[link_id].delay_ms if link_id in self.configured else 0.0
        self.shaper.update_peers(link_id, deduct_peers(self.peer_tables[link_id], base,
                                                       self.per_hop_ms))

    def host_link(self, host: str) -> str:
        return str(self.graph.edges[host, self.graph.nodes[host]["switch"]]["id"])

    def _name(self, node: str) -> str:
        return self.bridges.get(node, node)

    def host_pids(self) -> dict[str, int]:
        return {h.name: h.pid for h in self.net.hosts}

    def element_pids(self) -> dict[str, int]:
        return {n.name: n.pid for n in self.elements.values()}

    def root_interfaces(self, here: set[str] | None = None) -> list[str]:
        """Switch ports and link-element interfaces: everything in the root namespace
        (of this machine: switches named in `here` only, where given)."""
        out = [i.name for sw in self.net.switches for i in sw.intfList()
               if i.name != "lo" and (here is None or sw.name in here)]
        out += [i.name for n in self.elements.values() for i in n.intfList() if i.name != "lo"]
        return out

    def stop(self) -> None:
        if self.shaper is not None:
            self.shaper.close()
            self.shaper = None
        self.net.stop()
        for n in self.elements.values():
            n.terminate()
        self.elements.clear()


def build_network(g: nx.Graph, controller_port: int, prefix: str, time_scale: float = 1.0,
                  mechanism: str | None = None, state_dir: Path | None = None,
                  seed: int = 0, peer_tables: Mapping[str, int] | None = None,
                  deduction: Deduction | None = None, controller_ip: str = "127.0.0.1",
                  servers: Mapping[str, Mapping[str, Any]] | None = None) -> Network:
    """Build and start; bridges, elements and veths get `prefix` so they are ours alone.

    `mechanism` ("netem" or "userspace") is needed only when some link is shaped.
    `deduction`: the delays the elements add, less the emulator's cost per hop.
    `peer_tables`: host link id -> addresses its element's per-peer table holds (the
    userspace relay only; the host is the element's side a).
    `servers`: graph node -> where it runs (Mininet's cluster edition parameters,
    fogsdn.live.cluster_site): every node on a server, links across servers as VXLAN
    (fogsdn.netem.cluster_net); unshaped links only. None: all on this machine."""
    # Mininet forks a shell per node as it adds it: a Ctrl-C then would hang it, not
    # stop the run (fogsdn.core.processes.stop_signals_deferred)
    with stop_signals_deferred():
        kinds: tuple[type, type, type] = (FogHost, DirectOVSSwitch, TCULink)
        element_kind: type = ElementNode
        element_at: dict[str, Any] = {}
        if servers is not None:
            from fogsdn.netem.cluster_net import (
                FogRemoteHost,
                FogRemoteNode,
                FogRemoteOVSSwitch,
                VxlanLink,
            )

            here = [str(d["id"]) for u, v, d in g.edges(data=True)
                    if link_params(g, u, v).shaped
                    and "localhost" not in (servers[u].get("server"), servers[v].get("server"))]
            if here:
                raise ValueError("a shaped link's element runs on this machine: an end of "
                                 f"{', '.join(here)} must be here")
            kinds = (FogRemoteHost, FogRemoteOVSSwitch, VxlanLink.for_run(prefix))
            element_kind = FogRemoteNode
            element_at = next((dict(w) for w in servers.values()
                               if w.get("server") == "localhost"), {})
        where: Mapping[str, Mapping[str, Any]] = servers or {}
        net = Mininet(topo=None, host=kinds[0], switch=kinds[1], link=kinds[2],
                      controller=None,
                      autoSetMacs=False, autoStaticArp=False, build=False, waitConnected=False)
        net.addController("c0", controller=PlainRemoteController, ip=controller_ip,
                          port=controller_port)
        bridges: dict[str, str] = {}
        for n, d in g.nodes(data=True):
            if d["kind"] == "switch":
                bridges[n] = f"{prefix}{n}"
                net.addSwitch(bridges[n], dpid=f"{d['dpid']:016x}", datapath="user",
                              protocols="OpenFlow13", failMode="secure", **where.get(n, {}))
        for n, d in g.nodes(data=True):
            if d["kind"] == "host":
                net.addHost(n, ip=f"{d['ip']}/{HOST_PREFIX_LEN}", mac=d["mac"],
                            **where.get(n, {}))
        shaped: list[tuple[str, LinkSpec]] = []
        network = Network(net, bridges, g, time_scale)
        for u, v, d in g.edges(data=True):
            if g.nodes[v]["kind"] == "host" or (g.nodes[u]["kind"] == "switch" and u > v):
                u, v = v, u  # a host first (as Mininet names it <host>-eth0); switches in order
            a, b = bridges.get(u, u), bridges[v]
            pa, pb = d["ports"].get(u), d["ports"][v]
            link = link_params(g, u, v)
            if not link.shaped:
                net.addLink(a, b, port1=pa, port2=pb)
                continue
            element = element_kind(f"{prefix}d{len(shaped) + 1}", inNamespace=False,
                                   **element_at)
            network.elements[d["id"]] = element
            net.addLink(a, element, port1=pa, port2=0)  # element-eth0 towards u
            net.addLink(element, b, port1=1, port2=pb)  # element-eth1 towards v
            shaped.append((d["id"], link))
        net.build()
        net.start()
        for h in net.hosts:
            # Mininet hosts emit IPv6 solicitations; the fog network is IPv4 only
            h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
                  "net.ipv6.conf.default.disable_ipv6=1")
        for sw in net.switches:  # so do the switches' own port interfaces, which would
            # wake a port that carries no connection (docs/power.md, port_hold_s)
            ports = [i for i in sw.intfNames() if i != "lo"]
            if ports:
                sw.cmd("sysctl -qw " + " ".join(f"net.ipv6.conf.{i}.disable_ipv6=1"
                                                 for i in ports))
    if shaped:
        if mechanism is None or state_dir is None:
            raise ValueError("shaped links need a link mechanism and a state folder")
        network.shaper = make_shaper(mechanism, state_dir, seed)
        if deduction is not None:
            network.per_hop_ms = deduction.per_hop_ms
        for link_id, link in shaped:
            el = network.elements[link_id]
            params = network.configured[link_id] = real_params(link, time_scale)
            if deduction is not None:
                params = deduction.params(link_id, params)
            network.shaper.attach(link_id, el.intfNames()[0], el.intfNames()[1], params,
                                  peers=(peer_tables or {}).get(link_id, 0))
    return network


def shaped_links(g: nx.Graph) -> list[str]:
    return [str(d["id"]) for u, v, d in g.edges(data=True) if link_params(g, u, v).shaped]


def configured_delays_ms(g: nx.Graph, time_scale: float) -> dict[str, float]:
    """Each shaped link's configured one-way delay, real ms."""
    return {str(d["id"]): link_params(g, u, v).delay_ms * time_scale
            for u, v, d in g.edges(data=True) if link_params(g, u, v).shaped}
