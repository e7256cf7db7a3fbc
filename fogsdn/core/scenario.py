"""Scenario files: YAML validated once, at the edge, into frozen typed objects.

Every engine (emulate, simulate, predict) takes a `Scenario`; nothing downstream
re-reads YAML or re-validates. Times are in model milliseconds unless a name says
otherwise; `time_scale` says how many real milliseconds one model millisecond lasts.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import networkx as nx
import yaml
from pydantic import Field, ValidationError, model_validator

from fogsdn.core.errors import validation_line
from fogsdn.core.faults import FaultKind, FaultSpec
from fogsdn.core.rate_profile import ProfileError, RateProfile
from fogsdn.core.scenario_yaml import YamlFileError, read_yaml_file
from fogsdn.core.timebase import Timebase
from fogsdn.core.topology import FrozenModel, HostSpec, TopologySpec, build_graph, client_hosts
from fogsdn.core.topology_files import TopologyFileError, expand_topology_file


class ScenarioError(ValueError):
    """A scenario that cannot be used; the message is one line naming the field."""


class TaskClass(StrEnum):
    HP = "hp"
    LP = "lp"


class Role(StrEnum):
    FN = "fn"
    OFN = "ofn"
    CLOUD = "cloud"


class LeaveMode(StrEnum):
    DRAIN = "drain"
    HANDOFF = "handoff"
    DROP = "drop"


class Servers(StrEnum):
    SINGLE = "single"
    MULTI = "multi"


class Discipline(StrEnum):
    """Which waiting request a single-server node serves next; each order is defined in
    docs/simulator.md (priority_preemptive: preempt-resume)."""

    FIFO = "fifo"
    ROUND_ROBIN = "round_robin"
    PRIORITY = "priority"
    PRIORITY_PREEMPTIVE = "priority_preemptive"


class SizeSpec(FrozenModel):
    """Task size in work units; a node of rate mu serves a task of size s in s/mu model ms."""

    distribution: Literal["exponential", "deterministic", "bounded_pareto"] = "exponential"
    mean: float = Field(1.0, gt=0, le=1e9)
    # bounded Pareto only (seed 002b): shape alpha on [low, high]
    shape: float | None = Field(None, gt=0)
    low: float | None = Field(None, gt=0)
    high: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _pareto_bounds(self) -> SizeSpec:
        if self.distribution == "bounded_pareto":
            if self.shape is None or self.low is None or self.high is None:
                raise ValueError("bounded_pareto needs shape, low and high")
            if not self.low < self.high:
                raise ValueError("bounded_pareto needs low < high")
        return self


class ProfilePhase(FrozenModel):
    duration_ms: float = Field(gt=0, description="model ms the phase lasts")
    factor: float = Field(ge=0, description="both classes' rates times this in the phase")


class ProfileSpec(FrozenModel):
    """A time-varying arrival rate (fogsdn/core/rate_profile.py): phases, cycled with repeat."""

    phases: list[ProfilePhase] = Field(min_length=1)
    repeat: bool = True

    def profile(self) -> RateProfile:
        return RateProfile(tuple(p.duration_ms for p in self.phases),
                           tuple(p.factor for p in self.phases), self.repeat)

    @model_validator(mode="after")
    def _some_rate(self) -> ProfileSpec:
        try:
            self.profile()
        except ProfileError as err:
            raise ValueError(str(err).removeprefix("workload.profile")
                             .removeprefix(": ")) from None
        return self


class Workload(FrozenModel):
    lambda_hp: float = Field(ge=0, le=1e12,
                       description="HP arrivals per model ms, all clients together")
    lambda_lp: float = Field(ge=0, le=1e12,
                       description="LP arrivals per model ms, all clients together")
    clients: int = Field(2, ge=1, le=200, description="IoT client hosts; rates are split evenly")
    size: SizeSpec = SizeSpec()
    # model: service is size/mu against deadlines (what the exact model predicts);
    # cpu: each task does real CPU work in proportion (live only; docs/containers.md)
    work: Literal["model", "cpu"] = "model"
    # None: stationary Poisson at the rates above; else they are the base rates, scaled
    profile: ProfileSpec | None = None

    @model_validator(mode="after")
    def _some_load(self) -> Workload:
        if self.lambda_hp + self.lambda_lp <= 0:
            raise ValueError("lambda_hp + lambda_lp must be positive")
        return self

    def rate_profile(self) -> RateProfile | None:
        return self.profile.profile() if self.profile is not None else None

    @property
    def peak_rate(self) -> float:
        """Arrivals per model ms at the busiest phase (both classes)."""
        lam = self.lambda_hp + self.lambda_lp
        return lam * (self.profile.profile().peak if self.profile is not None else 1.0)


class ServerPower(FrozenModel):
    """A server's linear power model, P = idle_w + (max_w - idle_w) * u; the defaults are
    EdgeSimPy's Intel Xeon E5645 (docs/power.md)."""

    idle_w: float = Field(63.1, ge=0, description="watts at zero utilisation")
    max_w: float = Field(200.0, gt=0, description="watts at full utilisation")

    @model_validator(mode="after")
    def _max_above_idle(self) -> ServerPower:
        if self.max_w < self.idle_w:
            raise ValueError("power.max_w must be >= power.idle_w")
        return self


class SwitchPower(FrozenModel):
    """Every switch's power: idle + per active port + traffic share (docs/power.md); the
    defaults are our assumption, not the seed's."""

    idle_w: float = Field(20.0, ge=0, description="watts with no port carrying traffic")
    peak_w: float = Field(30.0, gt=0, description="watts with every port active at capacity")
    port_w: float = Field(0.5, ge=0, description="watts per awake port")
    capacity_mbps: float = Field(1000.0, gt=0,
                                 description="forwarded traffic at which the traffic term is full")
    # idle ports and sleeping switches (docs/power.md); the defaults keep the plain model
    port_hold_s: float = Field(0.0, ge=0, description="seconds a port stays awake after "
                               "it last carried traffic, before it goes low-power idle")
    port_idle_w: float = Field(0.0, ge=0, description="watts of a port in low-power idle")
    sleep_w: float | None = Field(None, ge=0, description="watts of the whole switch while "
                                  "no port is awake (None: it never sleeps)")

    @model_validator(mode="after")
    def _peak_above_idle(self) -> SwitchPower:
        if self.peak_w < self.idle_w:
            raise ValueError("switch_power.peak_w must be >= switch_power.idle_w")
        if self.port_idle_w > self.port_w:
            raise ValueError("switch_power.port_idle_w must be <= switch_power.port_w")
        if self.sleep_w is not None and self.sleep_w > self.idle_w:
            raise ValueError("switch_power.sleep_w must be <= switch_power.idle_w")
        return self


class NodeSpec(FrozenModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,7}$")
    role: Role
    mu: float = Field(ge=1e-9, le=1e9,
                      description="service rate per model ms for a task of size 1")
    capacity: int = Field(ge=1, le=100_000, description="in service plus waiting")
    # `capacity: {uniform: [lo, hi]}` in a file: drawn once per replication, every
    # integer of [lo, hi] alike (seed 000's simulation draws C_F on 17-23, C_O on 7-13);
    # `capacity` then holds the midpoint until an engine draws (fogsdn.core.streams)
    capacity_range: tuple[int, int] | None = None
    servers: Servers = Servers.SINGLE
    # which waiting request the server takes next; anything but fifo needs one server
    discipline: Discipline = Discipline.FIFO
    power: ServerPower = ServerPower()
    # live only: the node's container (docs/containers.md); None leaves it unlimited
    cpu: float | None = Field(None, gt=0, le=1024, description="CPU limit in cores (CFS quota)")
    memory_mb: int | None = Field(None, ge=16, description="memory limit; above it, OOM kill")

    @model_validator(mode="before")
    @classmethod
    def _capacity_distribution(cls, data: Any) -> Any:
        cap = data.get("capacity") if isinstance(data, Mapping) else None
        if not isinstance(cap, Mapping):
            return data
        if set(cap) != {"uniform"}:
            raise ValueError("capacity: an integer or {uniform: [lo, hi]}")
        bounds = cap["uniform"]
        if (not isinstance(bounds, (list, tuple)) or len(bounds) != 2
                or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
                or not 1 <= bounds[0] <= bounds[1]):
            raise ValueError("capacity.uniform: two integers [lo, hi] with 1 <= lo <= hi")
        return {**data, "capacity": (bounds[0] + bounds[1]) // 2,
                "capacity_range": (bounds[0], bounds[1])}

    @model_validator(mode="after")
    def _capacity_in_range(self) -> NodeSpec:
        r = self.capacity_range
        if r is not None and not 1 <= r[0] <= self.capacity <= r[1]:
            raise ValueError("capacity_range: [lo, hi] with 1 <= lo <= capacity <= hi")
        if self.discipline is not Discipline.FIFO and self.servers is Servers.MULTI:
            raise ValueError(f"discipline: {self.discipline.value} needs servers: single "
                             "(a multi node serves everything it holds at once)")
        return self


class Churn(FrozenModel):
    eta: float = Field(ge=0, le=1e6,
                       description="rate at which an OFN leaves (A to U), per model ms")
    xi: float = Field(ge=0, le=1e6,
                      description="rate at which an OFN returns (U to A), per model ms")
    leave: LeaveMode = LeaveMode.DRAIN
    initial: Literal["available", "unavailable", "stationary"] = "stationary"

    @model_validator(mode="after")
    def _can_return(self) -> Churn:
        if self.eta > 0 and self.xi == 0:
            raise ValueError("xi = 0 with eta > 0 means an OFN that leaves never returns")
        return self


class PolicySpec(FrozenModel):
    name: str = "prioritized"
    alpha: float = Field(0.5, ge=0, le=1, description="NoDiff share to the FN while an OFN is up")
    params: dict[str, float | int | str | bool] = Field(default_factory=dict)
    module: str | None = Field(
        None, min_length=1,
        description="the user's policy: a .py file (relative to the scenario file) or an "
                    "importable module name; name then picks one of its policies")

    @model_validator(mode="before")
    @classmethod
    def _module_names_the_policy(cls, data: Any) -> Any:
        # with a module and no name, the module's one policy ("" until it is loaded)
        if isinstance(data, Mapping) and data.get("module") and "name" not in data:
            return {**data, "name": ""}
        return data


class Sweep(FrozenModel):
    parameter: str = Field(description="dotted path, e.g. workload.lambda_lp")
    values: tuple[float, ...] = Field(min_length=1)
    policies: tuple[str, ...] = ()
    replications: int = Field(1, ge=1)
    emulate_values: tuple[float, ...] = ()
    # what the study driver (fogsdn/studies/study.py) draws: W per policy, or seed 002b's figures
    study: Literal["sweep", "size_based"] = "sweep"


class Goal(FrozenModel):
    """Seed 002a's composite goal for learning controllers (fogsdn/agents/env.py; docs/learning.md):
    G = rt_weight * RT / rt_ref_ms + (1 - rt_weight) * P / p_ref_w, reward 1 / G."""

    rt_weight: float = Field(0.5, ge=0, le=1, description="a: the response time's weight")
    rt_ref_ms: float | None = Field(None, gt=0, description="RT_ref, model ms")
    p_ref_w: float | None = Field(None, gt=0, description="P_ref, watts")


MAX_MEAN_SERVICE_MS = 1e7  # model ms: 10,000 model s for one mean request


class Scenario(FrozenModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    seed: int = Field(1, ge=0)
    duration_ms: float = Field(gt=0, le=1e12, description="model ms of load, warm-up included")
    warmup_ms: float = Field(0.0, ge=0)
    # 5: the smallest scale at which live means stay within 3 % of exact (docs/emulation.md)
    time_scale: float = Field(5.0, gt=0, le=10_000, description="real ms per model ms")
    # 1e12 is a study's "no deadline" / "never gives up" (seed 002b); 1e15 is the bound
    deadline_ms: float = Field(30.0, gt=0, le=1e15, description="delay constraint for outage")
    timeout_ms: float = Field(500.0, gt=0, le=1e15,
                              description="client gives up after this, model ms")
    workload: Workload
    nodes: tuple[NodeSpec, ...] = Field(min_length=1)
    churn: Churn = Churn(eta=0.0, xi=0.0)
    policy: PolicySpec = PolicySpec()
    topology: TopologySpec = TopologySpec()
    sweep: Sweep | None = None
    switch_power: SwitchPower = SwitchPower()
    goal: Goal = Goal()
    # live: each worker in its own container (namespaces and a cgroup); false: a plain
    # process in its Mininet host's network namespace, as before
    containers: bool = True
    # faults on a schedule (fogsdn.core.faults; docs/reliability.md)
    faults: tuple[FaultSpec, ...] = ()

    @property
    def timebase(self) -> Timebase:
        """Model time against real time for this scenario (`time_scale`)."""
        return Timebase(self.time_scale)

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        if self.warmup_ms >= self.duration_ms:
            raise ValueError("warmup_ms must be smaller than duration_ms")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique, got {names}")
        if not any(n.role is Role.FN for n in self.nodes):
            raise ValueError("nodes need at least one node with role fn")
        for i, n in enumerate(self.nodes):  # a run must be able to drain what it holds
            service = self.workload.size.mean / n.mu
            if service > MAX_MEAN_SERVICE_MS:
                raise ValueError(f"nodes.{i}.mu: workload.size.mean / mu = {service:.3g} model "
                                 f"ms of mean service at {n.name}; at most "
                                 f"{MAX_MEAN_SERVICE_MS:.0e} (a run could never drain it)")
        if self.workload.work == "cpu":
            for n in self.nodes:
                if n.discipline is not Discipline.FIFO:
                    raise ValueError(f"nodes.{n.name}.discipline: {n.discipline.value} needs "
                                     "workload.work model (cpu work is served in arrival order)")
        if self.workload.work == "cpu" and self.churn.leave is LeaveMode.HANDOFF:
            raise ValueError("workload.work cpu cannot hand off a task in service: "
                             "use churn.leave drain or drop")
        scenario_graph(self)  # raises TopologyError (a ValueError) naming the field
        self._check_faults(names)
        return self

    def _check_faults(self, names: list[str]) -> None:
        for i, f in enumerate(self.faults):
            if f.t_ms >= self.duration_ms:
                raise ValueError(f"faults.{i}.t_ms: {f.t_ms:g} is not before the run's end "
                                 f"(duration_ms {self.duration_ms:g})")
            if f.node is not None and f.node not in names:
                raise ValueError(f"faults.{i}.node: {f.node!r} is not a node ({', '.join(names)})")
            if f.kind is FaultKind.CUT_OFN and self.node(f.node or "").role is not Role.OFN:
                raise ValueError(f"faults.{i}.node: cut_ofn needs an OFN, {f.node} is "
                                 f"{self.node(f.node or '').role.value}")

    # -- convenience views -------------------------------------------------
    @property
    def capacity_drawn(self) -> bool:
        """Whether a node's capacity is drawn per replication (`fogsdn.core.streams`)."""
        return any(n.capacity_range is not None for n in self.nodes)

    def nodes_with(self, role: Role) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.nodes if n.role is role)

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def expected_requests(self, duration_ms: float | None = None) -> float:
        """Mean number of requests over `duration_ms` (the scenario's by default)."""
        span = self.duration_ms if duration_ms is None else duration_ms
        lam = self.workload.lambda_hp + self.workload.lambda_lp
        profile = self.workload.rate_profile()
        if profile is None:
            return lam * span
        return lam * sum(f * d for f, d in zip(profile.factors, profile.exposure_ms(0.0, span),
                                               strict=True))

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json())

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Scenario:
        """A copy with dotted-path fields replaced (`workload.lambda_lp`), re-validated."""
        data = self.to_dict()
        for path, value in overrides.items():
            set_dotted(data, path, value)
        return parse_scenario(data, source=f"{self.name} with {dict(overrides)}")


def set_dotted(data: dict[str, Any], path: str, value: Any) -> None:
    """Set `a.b.c` (or `nodes.fn.mu`, indexing a node list by name) in nested dicts."""
    parts = path.split(".")
    cur: Any = data
    for i, key in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(cur, list):
            cur = next((x for x in cur if isinstance(x, dict) and x.get("name") == key), None)
            if cur is None:
                raise ScenarioError(f"{path}: no list item named {key!r}")
            if last:
                raise ScenarioError(f"{path}: cannot replace a whole list item")
        elif not isinstance(cur, dict) or key not in cur:
            raise ScenarioError(f"{path}: no field {key!r}")
        elif last:
            cur[key] = value
        elif cur[key] is None:
            raise ScenarioError(f"{path}: {key!r} is not set")
        else:
            cur = cur[key]


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, Mapping):
        got = type(data).__name__
        raise ScenarioError(f"{source}: expected a mapping at the top level, got {got}")
    try:
        return Scenario.model_validate(copy.deepcopy(dict(data)))
    except ValidationError as err:
        raise ScenarioError(validation_line(err, source)) from None


def is_policy_path(ref: str) -> bool:
    """A policy module given as a file (`my_policy.py`, `dir/x.py`), not a module name."""
    return ref.endswith(".py") or "/" in ref


def absolute_policy_module(ref: str, base: Path) -> str:
    """A policy file made absolute against `base`, once at loading, so that every process
    that later builds the policy finds the same file; a module name unchanged."""
    if not is_policy_path(ref):
        return ref
    p = Path(ref).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def _resolve_paths(data: Any, base: Path) -> Any:
    policy = data.get("policy") if isinstance(data, Mapping) else None
    if isinstance(policy, Mapping) and isinstance(policy.get("module"), str) and policy["module"]:
        module = absolute_policy_module(policy["module"], base)
        return {**data, "policy": {**policy, "module": module}}
    return data


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    try:
        data = read_yaml_file(p)
    except YamlFileError as err:
        raise ScenarioError(str(err)) from None
    base = p.resolve().parent
    data = _resolve_paths(data, base)
    if isinstance(data, Mapping) and isinstance(data.get("topology"), Mapping):
        try:
            data = {**data, "topology": expand_topology_file(data["topology"], base)}
        except TopologyFileError as err:
            raise ScenarioError(f"{p}: {err}") from None
    return parse_scenario(data, source=str(p))


# -- a scenario's network ----------------------------------------------------------------
def scenario_hosts(scenario: Scenario) -> list[HostSpec]:
    """Fog nodes and cloud in the scenario's order, then clients c1..cN."""
    return ([HostSpec(n.name, n.role.value) for n in scenario.nodes]
            + client_hosts(scenario.workload.clients))


def scenario_graph(scenario: Scenario) -> nx.Graph:
    """The scenario's network graph (`fogsdn.core.topology` builds it; TopologyError names the
    field that makes it impossible)."""
    return build_graph(scenario.topology, scenario_hosts(scenario), scenario.name)
