"""Seed 003's city as a live network: the city study's file, its graph, and the link
delays that make measured round trips follow the latency model (eqs. 7-12), pure.

Two shapes: `pairs` (a switch per fog node and per client, a delayed link per pair)
and `star` (one element per fog host holding a per-peer delay table); both give every
round trip eq. 7 with the node's current clients (docs/coordinates.md, The network and
Largest live scale). Figures are model ms; the live elements multiply by `time_scale`.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError, model_validator

from fogsdn.city.geo_latency import (
    LatencyParams,
    load_ms,
    pair_load_ms,
    path_km,
    processing_ms,
)
from fogsdn.city.layout import CityLayout, FogSite, make_city
from fogsdn.core.errors import validation_line
from fogsdn.core.scenario_yaml import YamlFileError, read_yaml_file
from fogsdn.core.timebase import Timebase
from fogsdn.core.topology import EdgeSpec, FrozenModel, HostAttach, Position, TopologySpec
from fogsdn.nodes.ncs.discovery import ClientParams

SELECTOR_NAMES = ("optimal", "random", "vivaldi", "meridian", "load_aware")
MIN_LINK_MS = 0.001  # a link with no delay has no element and cannot change later
PAIRS_MAX_CLIENTS = 99  # a switch per client, N links each: 99 ports on a fog switch
STAR_MAX_CLIENTS = 300
# Mininet adds a bridge's ports in one ovs-vsctl line typed into the switch's shell, and
# a terminal line holds 4095 bytes: some 85 bytes a port with our names, so at most 44
# ports; more and the line is cut, the command fails and the bridge is never made
STAR_PORTS_PER_SWITCH = 44
STAR_CLIENTS_PER_SWITCH = 40  # and the link to s0
STAR_MAX_FOG_NODES = STAR_PORTS_PER_SWITCH - -(-STAR_MAX_CLIENTS // STAR_CLIENTS_PER_SWITCH)
NetworkShape = Literal["pairs", "star"]


def renamed_keys(data: Any, renames: Mapping[str, str], where: str) -> Any:
    """A study file's old key read as its new name (one release), with a warning; the
    new name wins where a file (or an override) gives both."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for old, new in renames.items():
        if old in out:
            value = out.pop(old)
            warnings.warn(f"{where}{old} is now {where}{new} (the unit in its name); "
                          f"{where}{old} will stop being read", FutureWarning, stacklevel=2)
            out.setdefault(new, value)
    return out


class CityStudyError(ValueError):
    """A bad study file or parameter; the message names the field."""


class MobilitySpec(FrozenModel):
    """How the study's clients move (the live runner's `Mobility` plays it)."""

    kind: Literal["waypoint", "trace", "static"] = "waypoint"
    speed_mps: tuple[float, float] = (0.5, 15.0)
    pause_s: tuple[float, float] = (0.0, 10.0)
    trace: str | None = None  # a position trace CSV (fogsdn/city/layout.py format)

    @model_validator(mode="after")
    def _trace(self) -> MobilitySpec:
        if self.kind == "trace" and not self.trace:
            raise ValueError("mobility.trace: kind trace needs a trace file")
        if not 0 < self.speed_mps[0] <= self.speed_mps[1]:
            raise ValueError(f"mobility.speed_mps: need 0 < min <= max, got {self.speed_mps}")
        if not 0 <= self.pause_s[0] <= self.pause_s[1]:
            raise ValueError(f"mobility.pause_s: need 0 <= min <= max, got {self.pause_s}")
        return self


class FullScale(FrozenModel):
    """The seed's scale, run in the simulator with the same latency model."""

    fog_nodes: int = Field(29, ge=1, le=200)
    total_slots: int = Field(318, ge=1)
    duration_model_s: float = Field(60.0, gt=0, description="model seconds per point")
    ratios: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0)
    # clients start after U(a, b) s: the seed's U(3, 10); a comparison with a live run
    # at the same scale sets the live start
    start_s: tuple[float, float] = (3.0, 10.0)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed_keys(data, {"duration_s": "duration_model_s"}, "full_scale.")

    @model_validator(mode="after")
    def _check(self) -> FullScale:
        if not 0 <= self.start_s[0] <= self.start_s[1]:
            raise ValueError(f"start_s: need 0 <= min <= max, got {self.start_s}")
        return self


class CityStudy(FrozenModel):
    """Seed 003's study: live at a scale this machine holds, full scale simulated."""

    study: Literal["city"]
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    seed: int = Field(1, ge=0)
    fog_nodes: int = Field(4, ge=1, le=STAR_MAX_FOG_NODES)
    network: NetworkShape = Field("pairs", description="pairs: a link element per client-"
                                  "node pair; star: one per fog node, with a per-peer table")
    total_slots: int = Field(16, ge=1)
    area_km2: float = Field(2.25, gt=0)
    ratios: tuple[float, ...] = Field((0.5,), min_length=1)
    selectors: tuple[str, ...] = SELECTOR_NAMES
    duration_live_s: float = Field(200.0, gt=0, le=36000, description="live seconds per "
                                   "point: duration_live_s / time_scale model seconds")
    # the simulator's point length; None: a live point's span. Set by `at_full_scale`,
    # `at_live_span` and the presets, never read by a live run (which refuses it)
    duration_model_s: float | None = Field(None, gt=0)
    time_scale: float = Field(10.0, gt=0, le=100, description="real ms per model ms, and "
                              "real s per model s: every time below runs at this scale live")
    period_s: tuple[float, float] = (0.5, 1.0)  # model seconds, as every time below
    start_s: tuple[float, float] = (0.5, 2.0)
    max_attempts: int = Field(3, ge=1)
    timeout_ms: float = Field(100.0, gt=0, description="a task's reply deadline, model ms")
    vivaldi_dimensions: int = Field(2, ge=1, le=8)
    load_aware_bound_ms: float = Field(2.0, ge=0)
    tick_s: float = Field(0.1, gt=0, le=5, description="mobility and truth period")
    node_probe_s: float = Field(1.0, gt=0, le=60, description="how often each fog node "
                                "probes its peers for its coordinate (model s)")
    # live: fog daemons and clients run SCHED_FIFO (as the link relays do), so that a
    # loaded machine delays the probes' timing less
    realtime: bool = True
    mobility: MobilitySpec = MobilitySpec()
    latency: dict[str, float | bool] = Field(default_factory=dict)
    # the simulator's modelling choices (fogsdn/city/presets.py; docs/coordinates.md has
    # each value's meaning); the live run keeps the defaults
    optimal_reference: Literal["current", "static"] = "current"
    vivaldi: Literal["serf", "plain"] = "serf"
    meridian_termination: Literal["wong", "seed"] = "wong"
    # the omniscient baseline's discovery: free (it knows), or counted as a probe of
    # every fog node per query; simulator only (the live run refuses `counted`)
    baseline_discovery: Literal["free", "counted"] = "free"
    # the optimal-selection rate: a pick whose RTT ties the best counts as optimal, or
    # only the reference node itself does (the lowest RTT, the first name among equals)
    optimal_ties: Literal["counted", "uncounted"] = "counted"
    tower_share: float = Field(0.5, ge=0, le=1, description="the share of fog nodes "
                               "standing at their cell tower (the rest drawn in the area)")
    # what the coordinate systems measure: the whole latency of eq. 7, a node's load
    # term included (seen), or the network distance alone, eqs. 10-11 (unseen: they
    # locate nodes, and only tasks meet the load); simulator only (live, a probe crosses
    # the access link that carries the load term, so the live run refuses `unseen`)
    probe_load: Literal["seen", "unseen"] = "seen"
    # the fog nodes' Vivaldi probe rounds: each node at a phase of its own, ranking by
    # its own view (staggered, as live daemons do), or every node at once, all views one
    # snapshot (synchronous: a round-based simulator's; simulated only)
    vivaldi_rounds: Literal["staggered", "synchronous"] = "staggered"
    # how long a simulated client's step takes: none (instant: every message at the
    # step's instant, the joins and leaves at once), or its messages' round trips
    # (messages: its join and leave land when the messages before them are done, as a
    # live step's do); a live step always takes its round trips
    step_time: Literal["instant", "messages"] = "instant"
    full_scale: FullScale = FullScale()

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed_keys(data, {"duration_s": "duration_live_s"}, "")

    @model_validator(mode="after")
    def _check(self) -> CityStudy:
        for s in self.selectors:
            if s not in SELECTOR_NAMES:
                raise ValueError(f"selectors: unknown {s!r} (known: {', '.join(SELECTOR_NAMES)})")
        for r in self.ratios:
            if not 0 < r <= 10:
                raise ValueError(f"ratios: each must be in (0, 10], got {r}")
        if self.total_slots < self.fog_nodes:
            raise ValueError("total_slots: need at least one slot per fog node")
        most = PAIRS_MAX_CLIENTS if self.network == "pairs" else STAR_MAX_CLIENTS
        if self.max_clients > most:
            raise ValueError(f"ratios: {self.max_clients} clients; the live city "
                             f"(network: {self.network}) holds {most}")
        if self.network == "pairs" and self.fog_nodes > 29:
            raise ValueError("fog_nodes: the pair network holds 29 (network: star holds "
                             f"{STAR_MAX_FOG_NODES})")
        if not 0 < self.period_s[0] <= self.period_s[1]:
            raise ValueError(f"period_s: need 0 < min <= max, got {self.period_s}")
        if not 0 <= self.start_s[0] <= self.start_s[1]:
            raise ValueError(f"start_s: need 0 <= min <= max, got {self.start_s}")
        self.params()  # raises LatencyModelError naming the field
        return self

    @property
    def timebase(self) -> Timebase:
        """Model time against real time for a live point (`time_scale`)."""
        return Timebase(self.time_scale)

    def model_span_s(self) -> float:
        """The model seconds a live point spans."""
        return self.timebase.model_ms(self.duration_live_s) / 1000.0

    @property
    def simulated_span_model_s(self) -> float:
        """The model seconds the simulator runs a point: `duration_model_s`, else the
        live point's span."""
        return self.model_span_s() if self.duration_model_s is None else self.duration_model_s

    def check_live_span(self) -> None:
        """A live point must outlast its clients' start (asked only of a live run)."""
        if self.model_span_s() <= self.start_s[1]:
            raise CityStudyError(
                f"duration_live_s: {self.duration_live_s:g} live s at time_scale "
                f"{self.time_scale:g} span {self.model_span_s():g} model s, and clients start "
                f"up to {self.start_s[1]:g} model s in (start_s)")

    def check_live_choices(self) -> None:
        """The live run cannot count the baseline's discovery (its clients read the truth
        from the runner), and its points last `duration_live_s`: refuse what it would
        otherwise ignore."""
        if self.duration_model_s is not None:
            raise CityStudyError(
                f"duration_model_s: {self.duration_model_s:g} is the simulator's point "
                "length; a live point lasts duration_live_s")
        if self.probe_load != "seen":
            raise CityStudyError(
                f"probe_load: {self.probe_load!r} is simulated only; live, a probe crosses "
                "the node's access link, which carries its load (set it to 'seen')")
        if self.vivaldi_rounds != "staggered":
            raise CityStudyError(
                f"vivaldi_rounds: {self.vivaldi_rounds!r} is simulated only; live, each fog "
                "daemon probes at its own phase (set it to 'staggered')")
        if self.baseline_discovery != "free":
            raise CityStudyError(
                f"baseline_discovery: {self.baseline_discovery!r} is simulated only; the live "
                "run's baseline reads the truth for free (set it to 'free')")

    def at_live_span(self) -> CityStudy:
        """The live scale for the simulator: the live point's model span."""
        return self.model_copy(update={"duration_model_s": self.model_span_s()})

    def params(self) -> LatencyParams:
        try:
            return LatencyParams(**self.latency)  # type: ignore[arg-type]
        except TypeError as err:
            raise ValueError(f"latency: {err}") from None

    def client_params(self) -> ClientParams:
        """The study's client knobs, for either engine (the one place they are copied)."""
        return ClientParams(period_s=self.period_s, start_s=self.start_s,
                            max_attempts=self.max_attempts, timeout_ms=self.timeout_ms,
                            dimensions=self.vivaldi_dimensions,
                            bound_ms=self.load_aware_bound_ms, optimal_ties=self.optimal_ties)

    def clients_at(self, ratio: float) -> int:
        return max(1, round(self.total_slots * ratio))

    @property
    def max_clients(self) -> int:
        return max(self.clients_at(r) for r in self.ratios)

    def at_full_scale(self) -> CityStudy:
        """The seed's scale (`full_scale:`), what the simulator runs; not validated again,
        as the live limits do not apply to it."""
        fs = self.full_scale
        return self.model_copy(update={
            "fog_nodes": fs.fog_nodes, "total_slots": fs.total_slots, "ratios": fs.ratios,
            "duration_model_s": fs.duration_model_s, "start_s": fs.start_s})

    def layout(self) -> CityLayout:
        """The live city: the same draw as the simulator's for this seed and size."""
        return make_city(random.Random(f"city-{self.seed}"), self.fog_nodes, self.total_slots,
                         self.area_km2, self.tower_share)


def load_city_study(path: str | Path, overrides: Mapping[str, Any] | None = None) -> CityStudy:
    """Read and validate a study file, `overrides` by dotted field (`full_scale.ratios`);
    CityStudyError is one line naming the field."""
    p = Path(path)
    try:
        data = read_yaml_file(p)
    except YamlFileError as err:
        raise CityStudyError(str(err)) from None
    if not isinstance(data, dict):
        raise CityStudyError(f"{p}: must be a mapping")
    for key, value in (overrides or {}).items():
        *parents, leaf = key.split(".")
        at = data
        for k in parents:
            at[k] = dict(at.get(k) or {})
            at = at[k]
        at[leaf] = value
    try:
        study = CityStudy.model_validate(data)
    except ValidationError as err:
        raise CityStudyError(validation_line(err, str(p))) from None
    except ValueError as err:
        raise CityStudyError(f"{p}: {err}") from None
    if study.mobility.kind == "trace" and study.mobility.trace is not None:
        trace = str(p.parent / study.mobility.trace)  # an absolute one is kept as it is
        study = study.model_copy(update={"mobility": study.mobility.model_copy(
            update={"trace": trace})})
    return study


# -- delays (model ms, one way) -----------------------------------------------------------
def client_fog_ms(client: Position, site: FogSite, layout: CityLayout, p: LatencyParams
                  ) -> float:
    """One way on the client-switch to fog-switch link: half of eq. 10's propagation
    (client to its nearest tower, backhaul, the node's tower to the node)."""
    km = path_km(client, site.position, layout.towers, p)
    return max(MIN_LINK_MS, km * p.propagation_ms_per_km / 2.0)


def fog_fog_ms(a: FogSite, b: FogSite, layout: CityLayout, p: LatencyParams) -> float:
    return client_fog_ms(a.position, b, layout, p)


def client_fog_matrix(positions: Sequence[Position], layout: CityLayout, p: LatencyParams
                      ) -> np.ndarray:
    """`client_fog_ms` for every client (rows) and fog node (columns) at once."""
    towers = np.asarray(layout.towers, dtype=np.float64)
    sites = np.asarray([s.position for s in layout.fog_nodes], dtype=np.float64)
    pos = np.asarray(positions, dtype=np.float64).reshape(-1, 2)

    def nearest_tower(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d = np.hypot(pts[:, None, 0] - towers[None, :, 0], pts[:, None, 1] - towers[None, :, 1])
        i = np.argmin(d, axis=1)  # the first of equals, as `nearest`'s min()
        return i, d[np.arange(len(pts)), i]

    ti, di = nearest_tower(pos)
    tj, dj = nearest_tower(sites)
    back = np.zeros((len(pos), len(sites)))
    if p.backhaul:
        a, b = towers[ti], towers[tj]
        back = np.hypot(a[:, None, 0] - b[None, :, 0], a[:, None, 1] - b[None, :, 1])
    ms = (di[:, None] + back + dj[None, :]) / 1000.0 * p.propagation_ms_per_km / 2.0
    return np.maximum(MIN_LINK_MS, ms)


def star_peer_delays(cf: np.ndarray, layout: CityLayout, p: LatencyParams,
                     fog_ips: Sequence[str], client_ips: Sequence[str],
                     members: Sequence[int]) -> list[dict[str, float]]:
    """Each fog node's per-peer table in the star (address -> model one-way ms), clients
    where `cf` has them and `members[i]` on node i: per client `client_fog_ms` plus
    `fog_access_ms`, per other node a quarter of `fog_pair_rtt_ms` (a round trip pays
    four entries)."""
    sites = layout.fog_nodes
    access = [fog_access_ms(c, s, p) for c, s in zip(members, sites, strict=True)]
    out: list[dict[str, float]] = []
    for i, a in enumerate(sites):
        table = {ip: float(cf[k, i]) + access[i] for k, ip in enumerate(client_ips)}
        out.append(table | {fog_ips[j]: fog_pair_rtt_ms(a, members[i], b, members[j],
                                                        layout, p) / 4.0
                            for j, b in enumerate(sites) if j != i})
    return out


def fog_pair_rtt_ms(a: FogSite, clients_a: int, b: FogSite, clients_b: int,
                    layout: CityLayout, p: LatencyParams) -> float:
    """Eq. 7 between two fog nodes (what their probes to each other measure): the
    propagation both ways, one processing term, the load term at the lower bandwidth."""
    return (2.0 * fog_fog_ms(a, b, layout, p) + processing_ms(p)
            + pair_load_ms(load_ms(clients_a, a.slots, p), load_ms(clients_b, b.slots, p)))


def fog_access_ms(clients: int, site: FogSite, p: LatencyParams) -> float:
    """One way between a client and the fog node, at the node's end: half of processing
    (eq. 11) plus load (transmission and queueing at the node's bandwidth, eqs. 8, 9,
    12). The pair graph puts it on the host's access link, the star in its table."""
    return max(MIN_LINK_MS, (processing_ms(p) + load_ms(clients, site.slots, p)) / 2.0)


# -- the graph ----------------------------------------------------------------------------
def fog_switch(i: int) -> str:
    return f"f{i + 1}"


def client_switch(k: int) -> str:
    return f"a{k + 1}"


def client_name(k: int) -> str:
    return f"c{k + 1}"


def star_switch(k: int) -> str:
    """The star's switch of client k (`s1`, `s2`, ...; the fog hosts are on `s0`)."""
    return f"s{1 + k // STAR_CLIENTS_PER_SWITCH}"


def link_id(a: str, b: str) -> str:
    """The graph's id of the switch link a-b (as `build_graph` names it)."""
    return f"{a}-{b}"


def city_topology(layout: CityLayout, positions: Sequence[Position], p: LatencyParams
                  ) -> TopologySpec:
    """The explicit graph for `layout` with clients at `positions` (metres)."""
    sites = layout.fog_nodes
    switches = [fog_switch(i) for i in range(len(sites))] + \
        [client_switch(k) for k in range(len(positions))]
    links = [EdgeSpec(a=client_switch(k), b=fog_switch(i),
                      delay_ms=client_fog_ms(pos, s, layout, p) + fog_access_ms(0, s, p))
             for k, pos in enumerate(positions) for i, s in enumerate(sites)]
    links += [EdgeSpec(a=fog_switch(i), b=fog_switch(j),
                       delay_ms=fog_pair_rtt_ms(a, 0, sites[j], 0, layout, p) / 2.0)
              for i, a in enumerate(sites) for j in range(i + 1, len(sites))]
    hosts: dict[str, str | HostAttach] = {
        s.name: fog_switch(i)
        for i, s in enumerate(sites)}
    hosts |= {client_name(k): client_switch(k) for k in range(len(positions))}
    km = {fog_switch(i): (s.position[0] / 1000, s.position[1] / 1000)
          for i, s in enumerate(sites)}
    km |= {client_switch(k): (x / 1000, y / 1000) for k, (x, y) in enumerate(positions)}
    return TopologySpec(kind="graph", switches=tuple(switches), links=tuple(links),
                        hosts=hosts, positions=km)


def city_star_topology(layout: CityLayout, clients: int) -> TopologySpec:
    """The star for `layout` and `clients` clients (docs/coordinates.md): every delay is
    in the fog hosts' per-peer tables, which come at run time."""
    sites = layout.fog_nodes
    edge = sorted({star_switch(k) for k in range(clients)}, key=lambda n: int(n[1:]))
    links = tuple(EdgeSpec(a="s0", b=sw) for sw in edge)
    hosts: dict[str, str | HostAttach] = {
        s.name: HostAttach(switch="s0", delay_ms=MIN_LINK_MS) for s in sites}
    hosts |= {client_name(k): star_switch(k) for k in range(clients)}
    return TopologySpec(kind="graph", switches=("s0", *edge), links=links, hosts=hosts)
