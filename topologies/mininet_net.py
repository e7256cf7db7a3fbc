"""Mininet glue: a topology graph in, a started network of OVS userspace switches out.

Facts of this machine kind (docs/architecture.md): no kernel OVS module (datapath='user'), TCP needs
TX checksum offload off (TCULink), RemoteController.checkListening can die on a
UnicodeDecodeError (we check with a plain connect), and waitConnected polls OVSDB
every 5 s (the runner waits for the controller's table-miss rule instead).
"""

from __future__ import annotations

import socket

import networkx as nx
from mininet.link import TCULink
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController


class PlainRemoteController(RemoteController):
    """RemoteController whose listening check is a plain TCP connect."""

    def checkListening(self) -> None:  # noqa: N802 (Mininet's name)
        try:
            with socket.create_connection((self.ip, self.port), timeout=1.0):
                pass
        except OSError:
            raise RuntimeError(f"no controller listening on {self.ip}:{self.port}") from None


def build_network(g: nx.Graph, controller_port: int, prefix: str) -> tuple[Mininet, dict[str, str]]:
    """Build and start; switch names get `prefix` so bridges and veths are ours alone.

    Returns the network and a map from graph switch name to bridge name.
    """
    net = Mininet(topo=None, switch=OVSSwitch, link=TCULink, controller=None,
                  autoSetMacs=False, autoStaticArp=False, build=False, waitConnected=False)
    net.addController("c0", controller=PlainRemoteController, ip="127.0.0.1",
                      port=controller_port)
    bridges: dict[str, str] = {}
    for n, d in g.nodes(data=True):
        if d["kind"] == "switch":
            bridges[n] = f"{prefix}{n}"
            net.addSwitch(bridges[n], dpid=f"{d['dpid']:016x}", datapath="user",
                          protocols="OpenFlow13", failMode="secure")
    for n, d in g.nodes(data=True):
        if d["kind"] == "host":
            net.addHost(n, ip=f"{d['ip']}/24", mac=d["mac"])
    for u, v, d in g.edges(data=True):
        host, sw = (u, v) if g.nodes[u]["kind"] == "host" else (v, u)
        net.addLink(host, bridges[sw], port2=d["port"])
    net.build()
    net.start()
    for h in net.hosts:
        # Mininet hosts emit IPv6 solicitations; the fog network is IPv4 only
        h.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1")
    return net, bridges


def host_pids(net: Mininet) -> dict[str, int]:
    return {h.name: h.pid for h in net.hosts}


def switch_interfaces(net: Mininet) -> list[str]:
    return [i.name for sw in net.switches for i in sw.intfList() if i.name != "lo"]


def link_status(net: Mininet, host: str, switch: str, up: bool) -> None:
    net.configLinkStatus(host, switch, "up" if up else "down")
