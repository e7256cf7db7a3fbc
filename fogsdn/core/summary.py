"""summary.json, typed: one shape that every engine writes and every reader expects.

The keys every run has are required, each engine's own optional; mypy checks each
builder (`fogsdn.live.results`, `fogsdn.sim.runner`, `fogsdn.measure.compare`) against it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, SupportsFloat, SupportsInt, TypedDict

from fogsdn.core.scenario import PolicySpec

if TYPE_CHECKING:
    from fogsdn.core.faults import FaultRecord

FALLBACK = "HP and LP to the FNs while the policy failed"


class PolicyReport(TypedDict):
    """The policy that ran, and how often it failed (a live controller then used the
    safe table; a simulation stops at the first failure, so it reports none)."""

    name: str
    module: str | None
    errors: int
    first_error: str | None
    fallback: str | None


class PowerBlock(TypedDict):
    """`power` (fogsdn.models.power_model.power_block, both engines): each server's and
    switch's time-weighted mean W, their total, the energy in J."""

    nodes: dict[str, float]
    switches: dict[str, float]
    total_W: float
    servers_W: float
    energy_J: float
    energy_per_request_J: float
    duration_s: float
    utilization: dict[str, float]  # each server's busy share
    errors: NotRequired[list[str]]  # a live run's meter: the readings it could not take


class Incident(TypedDict):
    """One of `incidents`: a watched child's death (fogsdn.live.supervisor)."""

    process: str  # the child's label
    pid: int
    exit: str  # fogsdn.live.supervisor.exit_description
    t_model_ms: float
    t_real_s: float
    action: str  # what the run did about it
    cause: NotRequired[str]
    outage_ms: NotRequired[float]  # a restarted child: until it served again (real ms)


class RunOutcome(TypedDict):
    """How a live run went (fogsdn.live.supervisor.Supervisor.summary_fields)."""

    run: str
    interrupted: bool
    crashed: bool
    incidents: list[Incident]
    failure: str | None


class RoutingBlock(TypedDict):
    """`routing` (fogsdn.live.results): requests the data plane routed against the drawn
    OFN availability (fogsdn.measure.fidelity.routing_against_schedule), model ms."""

    checked: int
    against: int
    share: float
    late_p50_ms: float
    late_p99_ms: float
    early: int
    early_p50_ms: float
    early_p99_ms: float


class ContainerLimits(TypedDict):
    cpu: float | None  # cores
    memory_mb: int | None


class Containers(TypedDict):
    """`containers` (fogsdn.live.results): whether the nodes ran in containers, each
    node's limits, and each one's cgroup accounting at teardown (fogsdn.live.live_network)."""

    enabled: bool
    limits: dict[str, ContainerLimits]
    accounting: dict[str, ContainerStats]


class LinksReport(TypedDict):
    """`links` (fogsdn.live.live_network): the link element chosen, how many links it
    shapes, and the emulator's own cost per hop (fogsdn.live.hop_floor) where measured."""

    mechanism: str
    shaped: int
    hop_cost: NotRequired[dict[str, object]]


class ContainerStats(TypedDict):
    """A node's cgroup accounting at teardown (`containers.accounting`)."""

    cpu_s: float
    oom_kills: int
    memory_failcnt: int


class CpuWork(TypedDict):
    """`cpu_work` (workload `work: cpu`): the calibration the workers used."""

    bytes_per_cpu_ms: float
    kernel: str


class StopBlock(TypedDict):
    """`stop` (fogsdn.sim.runner): what bounded a simulated run (None: not that)."""

    requests: int | None
    duration_ms: float | None


class NetworkBlock(TypedDict):
    """`network` (fogsdn.sim.runner): each (client, node) path's fixed ms, and whether
    any path adds a random part (fogsdn.core.latency)."""

    paths: dict[str, float]
    random: bool


class RunSummary(TypedDict):
    engine: Literal["emulate", "simulate"]
    scenario: str
    policy: PolicyReport
    requests: int
    # fogsdn.measure.metrics.measured_summary: per class, and "nodes" (per node service)
    measured: dict[str, object]
    notes: NotRequired[list[str]]
    # models.power_model.power_block: mean W per node and switch, total, energy (both engines)
    power: NotRequired[PowerBlock]
    # emulate
    run: NotRequired[str]
    interrupted: NotRequired[bool]
    crashed: NotRequired[bool]
    incidents: NotRequired[list[Incident]]
    failure: NotRequired[str | None]
    startup_s: NotRequired[dict[str, float]]
    rule_update_ms: NotRequired[dict[str, float]]
    churn_lag_ms: NotRequired[dict[str, float]]
    routing: NotRequired[RoutingBlock | None]
    # own artefacts large enough to mislead (fogsdn.measure.fidelity.emulation_bias)
    emulation_bias: NotRequired[Mapping[str, object]]
    cpu_steal_share: NotRequired[float]  # CPU time a hypervisor took during the run
    cpu_idle_share: NotRequired[float]  # CPU time nobody used (near 0: the cores saturated)
    # per node: what the arrivals' timing added to an ideal node's sojourn, per class
    arrival_timing: NotRequired[dict[str, dict[str, float]]]
    # t_send against the drawn instants (fogsdn.measure.send_timing.send_lateness)
    send_lateness: NotRequired[dict[str, float]]
    # the traffic engines' processes, clients and CPU (fogsdn.measure.send_timing.engine_block)
    load_engine: NotRequired[Mapping[str, object]]
    workers: NotRequired[Mapping[str, object]]  # each worker's stats at the end (its own)
    realtime_workers: NotRequired[dict[str, bool]]  # whether each worker got SCHED_FIFO
    realtime_switch: NotRequired[bool]  # whether ovs-vswitchd's threads ran SCHED_FIFO
    containers: NotRequired[Containers]  # limits and cgroup accounting (docs/containers.md)
    cpu_work: NotRequired[CpuWork]  # work: cpu calibration
    links: NotRequired[LinksReport]  # the link element and its cost per hop
    # the controller's SYN-to-FIN response time against the clients' (fogsdn.measure.rt_measurement)
    rt_measurement: NotRequired[Mapping[str, object]]
    rt_measurement_error: NotRequired[float]  # the largest per-node relative gap
    # the policy of each span of a run whose policy was swapped live (issue 21;
    # fogsdn.measure.policy_epochs)
    policy_epochs: NotRequired[Sequence[Mapping[str, object]]]
    # a per-request policy's decision path and staleness (fogsdn.measure.decisions)
    decisions: NotRequired[Mapping[str, object]]
    # each class's W gap: the sample's (the simulator on the same draws) and the emulation's
    gap_split: NotRequired[dict[str, dict[str, float]]]
    # both engines: each scheduled fault, its steps and its cost (fogsdn.core.faults)
    faults: NotRequired[list[FaultRecord]]
    # a run over several servers: each node's server, each crossing link's measured LAN
    # (fogsdn.live.cluster_site.ClusterSite.report)
    cluster: NotRequired[Mapping[str, object]]
    # simulate
    seed: NotRequired[int]
    replication: NotRequired[int]
    effective_seed: NotRequired[int]
    stop: NotRequired[StopBlock]
    rows: NotRequired[int]
    outcomes: NotRequired[dict[str, int]]
    last_arrival_ms: NotRequired[float]
    end_ms: NotRequired[float]
    ofn_transitions: NotRequired[int]
    per_request_policy: NotRequired[bool]
    wall_s: NotRequired[float]
    requests_per_s: NotRequired[float]
    network: NotRequired[NetworkBlock]  # each (client, node) path's fixed network time
    # added by fogsdn.measure.compare where a model applies (its own blocks)
    predicted: NotRequired[Mapping[str, object]]
    comparison: NotRequired[Mapping[str, object]]
    power_comparison: NotRequired[Mapping[str, object]]


def policy_report(spec: PolicySpec, errors: list[str] | None = None) -> PolicyReport:
    errors = errors or []
    return PolicyReport(name=spec.name, module=spec.module, errors=len(errors),
                        first_error=errors[0] if errors else None,
                        fallback=FALLBACK if errors else None)


def json_object(x: object, what: str) -> dict[str, object]:
    """`x`, read from JSON (summary.json, an event log, a reply), where it is a JSON
    object; else TypeError naming `what`."""
    if isinstance(x, dict):
        return x
    raise TypeError(f"{what}: a JSON object expected, got {type(x).__name__}")


def read_summary(path: Path) -> dict[str, object]:
    """A run folder's summary.json as an object, {} where none was written yet; a
    ValueError naming the file where it is not JSON or not an object."""
    if not path.exists():
        return {}
    try:
        obj = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as err:
        text = str(err).splitlines()[0] if str(err) else err.__class__.__name__
        raise ValueError(f"{path}: not readable as JSON: {text}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: a JSON object expected, got {type(obj).__name__}")
    return obj


def json_list(x: object, what: str) -> list[object]:
    """`x`, read from JSON, where it is a JSON array; else TypeError naming `what`."""
    if isinstance(x, list):
        return x
    raise TypeError(f"{what}: a JSON array expected, got {type(x).__name__}")


def json_float(x: object) -> float:
    """`float(x)` of a value read from JSON: what float() takes (a number, a numeric
    string) and nothing else (TypeError, ValueError, as float() raises)."""
    if isinstance(x, str | SupportsFloat):
        return float(x)
    raise TypeError(f"a number expected, got {type(x).__name__}")


def json_int(x: object) -> int:
    """`int(x)` of a value read from JSON, as `json_float` is float's."""
    if isinstance(x, str | SupportsInt):
        return int(x)
    raise TypeError(f"an integer expected, got {type(x).__name__}")


def class_figures(summary: Mapping[str, object], cls: str) -> dict[str, object]:
    """A summary's `measured` figures of one class (`fogsdn.measure.metrics.ClassMetrics`);
    KeyError where it has none, TypeError where they are not JSON objects."""
    return json_object(json_object(summary["measured"], "measured")[cls], f"measured.{cls}")


def json_safe(x: Any) -> Any:
    """`x` for strict JSON: NaN and infinity, anywhere inside, become null."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_summary(path: Path, summary: Any) -> None:
    """Write `summary` to `path` as summary.json is written: strict JSON, indent 1."""
    path.write_text(json.dumps(json_safe(summary), indent=1, default=str))
