"""summary.json, typed: one shape that every engine writes and every reader expects.

The keys every run has are required, each engine's own optional; mypy checks each
builder (`fogsdn.live.results`, `fogsdn.sim.runner`, `fogsdn.measure.compare`) against it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from fogsdn.core.scenario import PolicySpec

FALLBACK = "HP and LP to the FNs while the policy failed"


class PolicyReport(TypedDict):
    """The policy that ran, and how often it failed (a live controller then used the
    safe table; a simulation stops at the first failure, so it reports none)."""

    name: str
    module: str | None
    errors: int
    first_error: str | None
    fallback: str | None


class RunSummary(TypedDict):
    engine: Literal["emulate", "simulate"]
    scenario: str
    policy: PolicyReport
    requests: int
    measured: dict[str, Any]  # fogsdn.measure.metrics.measured_summary: per class and per node
    notes: NotRequired[list[str]]
    # models.power_model.power_block: mean W per node and switch, total, energy (both engines)
    power: NotRequired[dict[str, Any]]
    # emulate
    run: NotRequired[str]
    interrupted: NotRequired[bool]
    crashed: NotRequired[bool]
    incidents: NotRequired[list[dict[str, Any]]]
    failure: NotRequired[str | None]
    startup_s: NotRequired[dict[str, float]]
    rule_update_ms: NotRequired[dict[str, float]]
    churn_lag_ms: NotRequired[dict[str, float]]
    routing: NotRequired[dict[str, Any] | None]
    emulation_bias: NotRequired[dict[str, Any]]  # own artefacts large enough to mislead
    cpu_steal_share: NotRequired[float]  # CPU time a hypervisor took during the run
    cpu_idle_share: NotRequired[float]  # CPU time nobody used (near 0: the cores saturated)
    # per node: what the arrivals' timing added to an ideal node's sojourn, per class
    arrival_timing: NotRequired[dict[str, dict[str, float]]]
    # t_send against the drawn instants (fogsdn.measure.send_timing.send_lateness)
    send_lateness: NotRequired[dict[str, float]]
    # the traffic engines' processes, clients and CPU (fogsdn.measure.send_timing.engine_block)
    load_engine: NotRequired[dict[str, Any]]
    workers: NotRequired[dict[str, Any]]
    realtime_workers: NotRequired[dict[str, bool]]  # whether each worker got SCHED_FIFO
    realtime_switch: NotRequired[bool]  # whether ovs-vswitchd's threads ran SCHED_FIFO
    containers: NotRequired[dict[str, Any]]  # limits and cgroup accounting (docs/containers.md)
    cpu_work: NotRequired[dict[str, Any]]  # work: cpu calibration
    links: NotRequired[dict[str, Any]]  # the link element: {"mechanism", "shaped"}
    # the controller's SYN-to-FIN response time against the clients' (fogsdn.measure.rt_measurement)
    rt_measurement: NotRequired[dict[str, Any]]
    rt_measurement_error: NotRequired[float]  # the largest per-node relative gap
    # the policy of each span of a run whose policy was swapped live (issue 21)
    policy_epochs: NotRequired[list[dict[str, Any]]]
    # a per-request policy's decision path and staleness (fogsdn.measure.decisions)
    decisions: NotRequired[dict[str, Any]]
    # each class's W gap: the sample's (the simulator on the same draws) and the emulation's
    gap_split: NotRequired[dict[str, dict[str, float]]]
    # both engines: each scheduled fault, its steps and its cost (fogsdn.core.faults)
    faults: NotRequired[list[dict[str, Any]]]
    # simulate
    seed: NotRequired[int]
    replication: NotRequired[int]
    effective_seed: NotRequired[int]
    stop: NotRequired[dict[str, Any]]
    rows: NotRequired[int]
    outcomes: NotRequired[dict[str, int]]
    last_arrival_ms: NotRequired[float]
    end_ms: NotRequired[float]
    ofn_transitions: NotRequired[int]
    per_request_policy: NotRequired[bool]
    wall_s: NotRequired[float]
    requests_per_s: NotRequired[float]
    network: NotRequired[dict[str, Any]]  # each (client, node) path's fixed network time
    # added by fogsdn.measure.compare where a model applies
    predicted: NotRequired[dict[str, Any]]
    comparison: NotRequired[dict[str, Any]]
    power_comparison: NotRequired[dict[str, Any]]


def policy_report(spec: PolicySpec, errors: list[str] | None = None) -> PolicyReport:
    errors = errors or []
    return PolicyReport(name=spec.name, module=spec.module, errors=len(errors),
                        first_error=errors[0] if errors else None,
                        fallback=FALLBACK if errors else None)


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
