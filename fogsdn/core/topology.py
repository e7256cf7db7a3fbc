"""A scenario's network: its `topology:` section and the one networkx graph made of it (pure).

The graph is the topology layer's currency: Mininet is built from it, the controller
routes on it, the simulator and the model read path delays from it. Its schema and the
generators: docs/topologies.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fogsdn.core.fabric import Fabric, HostPort

SWITCH_NAME = r"^[a-z][a-z0-9]{0,2}$"  # bridge and veth names must fit IFNAMSIZ
Position = tuple[float, float]


class FrozenModel(BaseModel):
    """Scenario and study sections: immutable once validated, unknown keys refused, every
    number finite (`.inf` and `.nan` refused: no engine runs them) and never a boolean
    (YAML's `true` would otherwise be read as 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_numbers(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name) if isinstance(name, str) else None
                if isinstance(value, bool) and field is not None and \
                        _numbers_only(field.annotation):
                    raise ValueError(f"{name}: {str(value).lower()} is a boolean, not a "
                                     "number")
        return data


def _numbers_only(annotation: Any) -> bool:
    """Whether a field takes numbers and nothing else (None aside): int, float, a union
    of them, or one of those under Annotated."""
    if annotation in (int, float):
        return True
    if get_origin(annotation) is Annotated:
        return _numbers_only(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return bool(args) and all(_numbers_only(a) for a in args)
    return False


class LinkSpec(FrozenModel):
    """One link's figures; also the defaults every link of a topology starts from."""

    delay_ms: float = Field(0.0, ge=0, description="one-way propagation delay, model ms")
    jitter_ms: float = Field(0.0, ge=0, description="delay spread (uniform +-), model ms")
    loss: float = Field(0.0, ge=0, lt=1, description="drop probability per packet, each way")
    bw_mbps: float | None = Field(None, gt=0, description="link rate; none = unshaped")

    @property
    def shaped(self) -> bool:
        """Whether the link needs an emulation element at all."""
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss > 0 or self.bw_mbps is not None


class LinkOverride(FrozenModel):
    """Per-link figures in an explicit graph; unset fields keep the topology's defaults."""

    delay_ms: float | None = Field(None, ge=0)
    jitter_ms: float | None = Field(None, ge=0)
    loss: float | None = Field(None, ge=0, lt=1)
    bw_mbps: float | None = Field(None, gt=0)

    def over(self, base: LinkSpec) -> LinkSpec:
        return base.model_copy(update=self.model_dump(exclude_none=True))


class EdgeSpec(LinkOverride):
    """A switch-to-switch link of an explicit graph."""

    a: str
    b: str


class HostAttach(LinkOverride):
    """Where a host attaches, with its access link's figures."""

    switch: str


class TopologySpec(FrozenModel):
    kind: Literal["star", "line", "tree", "fat_tree", "multipath", "graph"] = "star"
    link: LinkSpec = LinkSpec()
    access: LinkOverride | None = None  # hosts' links, where they differ from `link`
    hop_cost: Literal["deduct", "keep"] = Field(
        "deduct", description="live: measure the emulator's own cost per hop at start and "
        "deduct it from each delayed link (deduct), or only report it (keep)")
    hop_cost_every_s: float = Field(
        10.0, ge=0, le=3600, description="live: real seconds between measurements of the "
        "cost per hop under the run's own load (0: only the start's)")
    length: int = Field(3, ge=1, le=99, description="line: switches in the chain")
    depth: int = Field(2, ge=1, le=4, description="tree: levels below the root")
    fanout: int = Field(2, ge=1, le=8, description="tree: children per switch")
    k: int = Field(4, ge=2, le=8, description="fat_tree: ports per switch (even)")
    # explicit graph
    switches: tuple[str, ...] = ()
    links: tuple[EdgeSpec, ...] = ()
    hosts: dict[str, str | HostAttach] = Field(default_factory=dict)
    positions: dict[str, Position] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shape(self) -> TopologySpec:
        if self.kind == "fat_tree" and self.k % 2:
            raise ValueError(f"k: a fat tree needs an even k, got {self.k}")
        explicit = bool(self.switches or self.links)
        if self.kind == "graph" and not self.switches:
            raise ValueError("switches: an explicit graph needs at least one switch")
        if self.kind != "graph" and explicit:
            raise ValueError(f"switches/links: only for kind graph, not {self.kind}")
        return self


# -- the graph ----------------------------------------------------------------------
SUBNET_PREFIX = "10.0.0."
VIP = "10.0.0.250"
VIP_MAC = "02:00:00:00:00:fa"
SERVICE_PORT = 9000
MAX_PORTS = 99  # switch veths are named <bridge>-ethNN and must fit IFNAMSIZ
MAX_SWITCHES = 99
HOST_PREFIX_LEN = 16  # hosts' netmask: 10.0.0.0/16 holds the clients past 10.0.0.249
MAX_CLIENTS = 149 + 249 * 4


def host_address(idx: int) -> str:
    """Host number `idx` (fog nodes 1.., clients 101..) as an address: 10.0.0.idx up to
    .249 (the service address is .250), then 10.0.1.1-249, 10.0.2.1-249, ..."""
    if idx <= 249:
        return f"{SUBNET_PREFIX}{idx}"
    over = idx - 250
    return f"10.0.{1 + over // 249}.{1 + over % 249}"


class TopologyError(ValueError):
    """A topology that cannot be built; the message is one line naming the field."""


@dataclass(frozen=True)
class HostSpec:
    """A host the scenario needs on the network: a fog node, the cloud or a client."""

    name: str
    role: str  # fn | ofn | cloud | client


def client_hosts(n: int) -> list[HostSpec]:
    """Clients c1..cN, as every engine names them (client k is index k-1)."""
    return [HostSpec(f"c{k}", "client") for k in range(1, n + 1)]


@dataclass(frozen=True)
class _Layout:
    switches: list[str]
    links: list[tuple[str, str, LinkSpec]]
    place: dict[str, str]  # host -> switch


def _mac(i: int) -> str:
    return f"02:00:00:00:{i >> 8:02x}:{i & 0xFF:02x}"


# -- generators: switches, switch links, where each host goes ------------------------
def _names(n: int) -> list[str]:
    return [f"s{i}" for i in range(1, n + 1)]


def _by_role(hosts: Sequence[HostSpec]) -> tuple[list[str], list[str], list[str]]:
    fog = [h.name for h in hosts if h.role in ("fn", "ofn")]
    cloud = [h.name for h in hosts if h.role == "cloud"]
    clients = [h.name for h in hosts if h.role == "client"]
    return fog, cloud, clients


def _round_robin(names: Sequence[str], onto: Sequence[str]) -> dict[str, str]:
    return {n: onto[i % len(onto)] for i, n in enumerate(names)}


def _star(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    return _Layout(["s1"], [], {h.name: "s1" for h in hosts})


def _line(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    sw = _names(spec.length)
    fog, cloud, clients = _by_role(hosts)
    place = {c: sw[0] for c in clients} | {n: sw[-1] for n in fog + cloud}
    return _Layout(sw, [(a, b, spec.link) for a, b in zip(sw, sw[1:], strict=False)], place)


def _tree(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    levels = [["s1"]]
    links = []
    for _ in range(spec.depth):  # switches numbered level by level; child i of parent i // fanout
        first = sum(map(len, levels)) + 1
        nxt = [f"s{first + i}" for i in range(len(levels[-1]) * spec.fanout)]
        links += [(levels[-1][i // spec.fanout], c, spec.link) for i, c in enumerate(nxt)]
        levels.append(nxt)
    fog, cloud, clients = _by_role(hosts)
    place = _round_robin(clients, levels[-1]) | {n: "s1" for n in fog + cloud}
    return _Layout([s for lv in levels for s in lv], links, place)


def _fat_tree(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    half = spec.k // 2
    n_core = half * half
    core = _names(n_core)
    switches = list(core)
    links = []
    pods_edge: list[list[str]] = []
    idx = n_core
    for _pod in range(spec.k):
        agg = [f"s{idx + i + 1}" for i in range(half)]
        edge = [f"s{idx + half + i + 1}" for i in range(half)]
        idx += 2 * half
        switches += agg + edge
        for i, a in enumerate(agg):
            links += [(a, core[i * half + j], spec.link) for j in range(half)]
            links += [(e, a, spec.link) for e in edge]
        pods_edge.append(edge)
    fog, cloud, clients = _by_role(hosts)
    client_edges = [e for pod in pods_edge[:-1] for e in pod]
    place = _round_robin(clients, client_edges) | _round_robin(fog + cloud, pods_edge[-1])
    return _Layout(switches, links, place)


def _multipath(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    """A fog campus: clients' edge s1 reaches the fog switch s5 and the cloud switch s6
    over two switch-disjoint paths, a short one through s2 and a long one through s3-s4."""
    sw = _names(6)
    pairs = [("s1", "s2"), ("s2", "s5"), ("s1", "s3"), ("s3", "s4"), ("s4", "s5"),
             ("s2", "s6"), ("s4", "s6")]
    fog, cloud, clients = _by_role(hosts)
    place = {c: "s1" for c in clients} | {n: "s5" for n in fog} | {n: "s6" for n in cloud}
    return _Layout(sw, [(a, b, spec.link) for a, b in pairs], place)


def _explicit(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    sw = list(spec.switches)
    known = set(sw)
    host_names = {h.name for h in hosts}
    links = []
    for i, e in enumerate(spec.links):
        for end in ("a", "b"):
            n = getattr(e, end)
            if n in host_names:
                raise TopologyError(f"topology.links.{i}.{end}: {n!r} is a host; hosts attach "
                                    "through topology.hosts")
            if n not in known:
                raise TopologyError(f"topology.links.{i}.{end}: unknown node {n!r}")
        if e.a == e.b:
            raise TopologyError(f"topology.links.{i}: a link from {e.a!r} to itself")
        links.append((e.a, e.b, e.over(spec.link)))
    missing = [h.name for h in hosts if h.name not in spec.hosts]
    if missing:
        raise TopologyError(f"topology.hosts: {', '.join(missing)} not attached to any switch")
    return _Layout(sw, links, {})


def _generate(spec: TopologySpec, hosts: Sequence[HostSpec]) -> _Layout:
    gen = {"star": _star, "line": _line, "tree": _tree, "fat_tree": _fat_tree,
           "multipath": _multipath, "graph": _explicit}[spec.kind]
    return gen(spec, hosts)


# -- assembly -------------------------------------------------------------------------------
def build_graph(spec: TopologySpec, hosts: Sequence[HostSpec], name: str = "fog") -> nx.Graph:
    """The graph for `spec` with `hosts` (fog nodes first, then clients) attached.

    Fog nodes get 10.0.0.1, .2, ... and clients 10.0.0.101, ... in the order given
    (`host_address`), and each switch numbers its ports in the order hosts, then links,
    attach, so the star is exactly seed 000's fog star (hosts on ports 1..n)."""
    layout = _generate(spec, hosts)
    if len(layout.switches) > MAX_SWITCHES:
        raise TopologyError(f"topology: {len(layout.switches)} switches (at most {MAX_SWITCHES})")
    g = nx.Graph(name=f"{spec.kind}-{name}", kind=spec.kind, vip=VIP, vip_mac=VIP_MAC,
                 service_port=SERVICE_PORT)
    for dpid, s in enumerate(layout.switches, start=1):
        if not re.match(SWITCH_NAME, s):
            raise TopologyError(f"topology.switches: bad switch name {s!r} (a letter, then at "
                                "most 2 letters or digits)")
        if s in g:
            raise TopologyError(f"topology.switches: {s!r} given twice")
        g.add_node(s, kind="switch", dpid=dpid)
    host_names = {h.name for h in hosts}
    for attached in spec.hosts:
        if attached not in host_names:
            raise TopologyError(f"topology.hosts.{attached}: unknown host (hosts: "
                                f"{', '.join(sorted(host_names))})")
    next_port = dict.fromkeys(layout.switches, 0)

    def port_on(s: str) -> int:
        next_port[s] += 1
        if next_port[s] > MAX_PORTS:
            raise TopologyError(f"topology: switch {s} needs more than {MAX_PORTS} ports")
        return next_port[s]

    n_fog = n_client = 0
    for h in hosts:
        attach = spec.hosts.get(h.name)
        link = spec.access.over(spec.link) if spec.access is not None else spec.link
        if isinstance(attach, HostAttach):
            sw, link = attach.switch, attach.over(link)
        else:
            sw = attach if attach is not None else layout.place[h.name]
        if sw in host_names:
            raise TopologyError(f"topology.hosts.{h.name}: attached to host {sw!r}, "
                                "must be a switch")
        if sw not in g:
            raise TopologyError(f"topology.hosts.{h.name}: unknown switch {sw!r}")
        if h.role == "client":
            n_client += 1
            idx = 100 + n_client
        else:
            n_fog += 1
            idx = n_fog
            if idx > 100:
                raise TopologyError("topology: more than 100 fog nodes and cloud hosts")
        if n_client > MAX_CLIENTS:
            raise TopologyError(f"topology: more than {MAX_CLIENTS} clients")
        port = port_on(sw)
        g.add_node(h.name, kind="host", role=h.role, ip=host_address(idx), mac=_mac(idx),
                   port=port, switch=sw)
        g.add_edge(h.name, sw, id=f"{h.name}-{sw}", port=port, ports={sw: port},
                   **link.model_dump())
    for a, b, link in layout.links:
        if g.has_edge(a, b):
            raise TopologyError(f"topology.links: {a}-{b} given twice")
        g.add_edge(a, b, id=f"{a}-{b}", ports={a: port_on(a), b: port_on(b)},
                   **link.model_dump())
    for n, p in spec.positions.items():
        if n not in g:
            raise TopologyError(f"topology.positions.{n}: unknown node")
        g.nodes[n]["pos"] = p
    for h in hosts:  # a host without a position stands at its switch's
        sw = g.nodes[h.name]["switch"]
        if "pos" not in g.nodes[h.name] and "pos" in g.nodes[sw]:
            g.nodes[h.name]["pos"] = g.nodes[sw]["pos"]
    if not nx.is_connected(g):
        parts = sorted((sorted(c) for c in nx.connected_components(g)), key=len)
        raise TopologyError(f"topology: disconnected graph ({', '.join(parts[0][:5])} "
                            "cannot reach the rest)")
    return g


# -- views ------------------------------------------------------------------------------------
def link_params(g: nx.Graph, a: str, b: str) -> LinkSpec:
    return LinkSpec(**{k: g.edges[a, b][k] for k in LinkSpec.model_fields})


def fabric_of(g: nx.Graph) -> Fabric:
    """The controller's view: service address, hosts and, for many switches, the graph."""
    hosts = tuple(HostPort(n, d["ip"], d["mac"], d["port"], d["role"], d["switch"])
                  for n, d in g.nodes(data=True) if d["kind"] == "host")
    return Fabric(vip=g.graph["vip"], vip_mac=g.graph["vip_mac"],
                  service_port=g.graph["service_port"], hosts=hosts,
                  graph=nx.node_link_data(g, edges="links"))
