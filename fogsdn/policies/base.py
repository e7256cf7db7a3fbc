"""The policy contract shared by the controller, the simulator and the RL env
(docs/policies.md): a pure object asked for a `RouteTable` per cluster change, or per
request (`decide`) where it says so.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fogsdn.core.scenario import NodeSpec, PolicySpec, Role, Servers, TaskClass, Workload
from fogsdn.core.stages import StagePlan
from fogsdn.models.network_power import PathMenu, PathOption

# class -> {node name: weight}; weights are non-negative and need not sum to 1.
RouteTable = Mapping[TaskClass, Mapping[str, float]]


# what a user's policy code may raise into ours: any error, `sys.exit()` (SystemExit),
# which would otherwise end the checker, the simulator or the controller silently with
# its status, and the other built-in non-errors a careless policy raises (GeneratorExit,
# an ExceptionGroup of them), which would end them with a traceback; KeyboardInterrupt
# (and a user's own BaseException subclass, which says "do not catch me") still stops
# the program
USER_CODE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit, GeneratorExit,
                                                      BaseExceptionGroup)


class PolicyError(ValueError):
    """A policy that cannot be built from its spec (unknown name, bad parameter)."""


@dataclass(frozen=True)
class NodeView:
    name: str
    role: Role
    available: bool
    capacity: int
    mu: float
    in_system: int | None = None  # requests held now, where the engine knows it
    # the fields below are set where the engine knows them (issue 9's learning policies)
    multi_server: bool = False  # `servers: multi`: up to `capacity` in service, no waiting
    power_idle_w: float | None = None  # linear server power model (docs/power.md)
    power_max_w: float | None = None
    net_ms: float | None = None  # mean network time a request to it spends on its path
    work_left: float | None = None  # model ms of work it holds now, where the engine knows it
    measured_rt_ms: float | None = None  # recent mean, client SYN to server FIN


def node_view(spec: NodeSpec, available: bool, net_ms: float | None = None,
              in_system: int | None = None) -> NodeView:
    """The one place that turns a `NodeSpec` into a view entry."""
    return NodeView(spec.name, spec.role, available, spec.capacity, spec.mu, in_system,
                    multi_server=spec.servers is Servers.MULTI,
                    power_idle_w=spec.power.idle_w, power_max_w=spec.power.max_w,
                    net_ms=net_ms)


@dataclass(frozen=True)
class ClusterView:
    nodes: tuple[NodeView, ...]

    def up(self, role: Role) -> tuple[NodeView, ...]:
        return tuple(n for n in self.nodes if n.role is role and n.available)

    def node(self, name: str) -> NodeView:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


@dataclass(frozen=True)
class Request:
    cls: TaskClass
    client: str
    size: float | None = None  # known only to size-aware policies
    t_ms: float | None = None  # arrival time (model ms), where the engine gives it


@dataclass(frozen=True)
class Epoch:
    """One point of an online learner's curve: its rule (no commas), response time (model
    ms), network power (W) and goal G (lower is better) after `decisions` connections."""

    decisions: int
    action: str
    response_ms: float
    network_w: float
    goal: float

    COLUMNS: ClassVar[str] = "decisions,action,response_ms,network_w,goal\n"

    def csv_row(self) -> str:
        return (f"{self.decisions},{self.action},{self.response_ms:.6f},"
                f"{self.network_w:.6f},{self.goal:.6f}\n")


@dataclass
class Policy(ABC):
    name: ClassVar[str]
    proactive: ClassVar[bool] = True
    # whether it answers from the exact chain's state alone (None: the chain probes it)
    state_based: ClassVar[bool | None] = None
    needs_size: ClassVar[bool] = False  # decide() reads request.size
    needs_work_left: ClassVar[bool] = False  # decide() reads NodeView.work_left
    # False: decide() never reads the load, so an engine may reuse one view (much faster)
    reads_load: ClassVar[bool] = True
    chooses_paths: ClassVar[bool] = False  # `choose_path` per connection (seed 002a)
    # live, every connection is then timed, as the simulator measures every request
    learns_from_measured_rt: ClassVar[bool] = False
    # `answered` per request as each completes (seed 002a's per-request learner; the
    # simulator calls it, the live controller does not yet)
    learns_per_request: ClassVar[bool] = False
    spec: PolicySpec = field(default_factory=PolicySpec)
    workload: Workload | None = None  # for parameters that depend on it (size-based)

    @abstractmethod
    def routes(self, view: ClusterView) -> RouteTable:
        """Where each class goes in this cluster state (weights per node)."""

    def decide(self, view: ClusterView, request: Request, rng: random.Random) -> str:
        weights = routes_for(self.routes(view), request.cls)
        return rng.choices(list(weights), weights=list(weights.values()))[0]

    def paths(self, graph: Any) -> Mapping[tuple[str, str], tuple[str, ...]]:
        """Switch paths pinned for (client, node) pairs on a networkx topology graph;
        others take the shortest path by delay."""
        return {}

    def choose_path(self, view: ClusterView, request: Request, node: str, menu: PathMenu) -> int:
        """For a policy that `chooses_paths`: which of `menu.options` (shortest first) the
        request to `node` takes, asked after `decide` by every engine."""
        return 0

    def answered(self, client: str, node: str, path: PathOption | None,
                 response_ms: float) -> None:
        """For a policy that `learns_per_request`: one request from `client` to `node`
        came back after `response_ms` (model ms, network included; the client's timeout
        for one that timed out), over `path` (the option its `choose_path` named, None
        for a policy that does not choose paths). Default: nothing."""
        return None

    def learning_curve(self) -> Sequence[Epoch]:
        """An online learner's epochs so far (the run's learning_curve.csv)."""
        return ()

    def stages(self, view: ClusterView) -> StagePlan:
        """Size-based stages over this view's hosts, "sita" or "tags" (docs/policies.md);
        every engine asks this one method. Default: none."""
        return StagePlan("none")


def is_per_request(policy: Policy) -> bool:
    """Whether engines must call `decide` per request rather than realise `routes`."""
    return ((not policy.proactive) or type(policy).decide is not Policy.decide
            or policy.chooses_paths)


def routes_for(table: RouteTable, cls: TaskClass) -> Mapping[str, float]:
    weights = {n: w for n, w in table.get(cls, {}).items() if w > 0}
    if not weights:
        raise PolicyError(f"route table has no node with positive weight for class {cls}")
    return weights


def safe_routes(view: ClusterView) -> RouteTable:
    """When a policy fails: both classes to the FNs (every scenario has them, they never
    leave), those up where any is."""
    fns = view.up(Role.FN) or tuple(n for n in view.nodes if n.role is Role.FN)
    return {TaskClass.HP: even(fns), TaskClass.LP: even(fns)}


def even(nodes: tuple[NodeView, ...], share: float = 1.0) -> dict[str, float]:
    return {n.name: share / len(nodes) for n in nodes} if nodes else {}
