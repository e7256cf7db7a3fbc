"""Estimated power of fog servers and switches, the same arithmetic in every engine (pure).

Servers: the linear model of CloudSim, LEAF and EdgeSimPy; switches: chassis plus
ports plus traffic (docs/power.md). The engines only supply the inputs. Intervals are
real seconds (a simulated model ms lasts `time_scale` real ms), so energy compares
across engines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import networkx as nx

from fogsdn.core.scenario import NodeSpec, Scenario, ServerPower, Servers, SwitchPower
from fogsdn.core.summary import PowerBlock

Kind = Literal["server", "switch"]

POWER_CSV_COLUMNS: tuple[str, ...] = (
    "t_s", "dt_s", "element", "kind", "utilization", "active_ports", "ports",
    "bytes_per_s", "power_w",
)

# Bytes one request puts through a switch, measured live (docs/power.md): how the
# simulator and the prediction, which have no packets, turn requests into traffic.
BYTES_PER_REQUEST = 916.0

# a utilisation measured from two polls can exceed 1 by the polls' jitter
_U_SLACK = 0.05


class PowerError(ValueError):
    """An input no power figure can be computed from; the message names it."""


def server_power_w(spec: ServerPower, utilization: float) -> float:
    """P = idle + (max - idle) * u; u slightly outside [0, 1] (poll jitter) is clamped."""
    if not math.isfinite(utilization) or not -_U_SLACK <= utilization <= 1.0 + _U_SLACK:
        raise PowerError(f"utilization must be in [0, 1], got {utilization!r}")
    u = min(1.0, max(0.0, utilization))
    return spec.idle_w + (spec.max_w - spec.idle_w) * u


def switch_power_w(spec: SwitchPower, active_ports: int, ports: int, bytes_per_s: float) -> float:
    """The chassis-plus-ports model of docs/power.md; `active_ports` are the awake ones
    (`awake_ports`), and every port awake at capacity draws `peak_w`."""
    if ports < 0 or not 0 <= active_ports <= ports:
        raise PowerError(f"need 0 <= active_ports <= ports, got {active_ports} of {ports}")
    if not math.isfinite(bytes_per_s) or bytes_per_s < 0:
        raise PowerError(f"bytes_per_s must be >= 0, got {bytes_per_s!r}")
    if active_ports == 0 and spec.sleep_w is not None:
        return spec.sleep_w
    load = min(1.0, bytes_per_s * 8.0 / (spec.capacity_mbps * 1e6))
    traffic_w = max(0.0, spec.peak_w - spec.idle_w - spec.port_w * ports)
    return (spec.idle_w + spec.port_w * active_ports
            + spec.port_idle_w * (ports - active_ports) + traffic_w * load)


def hold_intervals(spec: SwitchPower, interval_s: float) -> int:
    """How many earlier intervals keep a port awake: `port_hold_s` in whole intervals
    (rounded up), the granularity at which every engine sees traffic."""
    if interval_s <= 0:
        raise PowerError(f"interval_s must be > 0, got {interval_s!r}")
    return math.ceil(spec.port_hold_s / interval_s - 1e-9)


def awake_ports(recent_active: Sequence[Iterable[str]]) -> int:
    """Ports awake in the newest interval: those that carried traffic in it or in the
    earlier intervals given (oldest first, the newest last; `hold_intervals` of them)."""
    return len({p for ports in recent_active for p in ports})


def server_count(node: NodeSpec) -> int:
    """How many tasks the node serves at once: 1, or its capacity with `servers: multi`."""
    return node.capacity if node.servers is Servers.MULTI else 1


def busy_fraction(p_n: Sequence[float], servers: int) -> float:
    """Mean share of busy servers from the distribution of the number in system: P(n > 0)
    for one server, E[n] / C for C servers with no waiting."""
    total = math.fsum(p_n)
    if not p_n or not math.isclose(total, 1.0, rel_tol=1e-6, abs_tol=1e-9):
        raise PowerError(f"p_n must be a probability distribution (sums to {total!r})")
    if servers == 1:
        return max(0.0, 1.0 - p_n[0])
    return math.fsum(k * p for k, p in enumerate(p_n)) / servers


@dataclass(frozen=True)
class PowerSample:
    """One element's power over one interval [t_s, t_s + dt_s) of real seconds."""

    t_s: float
    dt_s: float
    element: str
    kind: Kind
    power_w: float
    utilization: float = math.nan  # servers
    active_ports: int = 0  # switches
    ports: int = 0
    bytes_per_s: float = math.nan

    def csv_line(self) -> str:
        def num(x: float) -> str:
            return "" if math.isnan(x) else f"{x:.6f}"

        ports = f"{self.active_ports},{self.ports}" if self.kind == "switch" else ","
        return (f"{self.t_s:.3f},{self.dt_s:.6f},{self.element},{self.kind},"
                f"{num(self.utilization)},{ports},{num(self.bytes_per_s)},{self.power_w:.6f}")


def power_csv_text(samples: Iterable[PowerSample]) -> str:
    """power.csv: one row per interval per node and per switch, in time order."""
    rows = sorted(samples, key=lambda s: (s.t_s, s.kind, s.element))
    return "\n".join([",".join(POWER_CSV_COLUMNS), *(s.csv_line() for s in rows)]) + "\n"


def _totals(nodes: dict[str, float], switches: dict[str, float]) -> dict[str, object]:
    """Each server's and switch's mean W, their total and the servers' alone."""
    return {"nodes": nodes, "switches": switches,
            "total_W": math.fsum(nodes.values()) + math.fsum(switches.values()),
            "servers_W": math.fsum(nodes.values())}


def power_block(samples: Iterable[PowerSample], answered: int) -> PowerBlock:
    """summary.json's `power` block: each element's time-weighted mean W, their total,
    the energy in joules and the energy per answered request."""
    energy: dict[tuple[Kind, str], float] = {}
    span: dict[tuple[Kind, str], float] = {}
    busy: dict[str, float] = {}
    for s in samples:
        key = (s.kind, s.element)
        energy[key] = energy.get(key, 0.0) + s.power_w * s.dt_s
        span[key] = span.get(key, 0.0) + s.dt_s
        if s.kind == "server" and not math.isnan(s.utilization):
            busy[s.element] = busy.get(s.element, 0.0) + s.utilization * s.dt_s
    mean = {k: energy[k] / span[k] for k in energy if span[k] > 0}
    nodes = {name: w for (kind, name), w in sorted(mean.items()) if kind == "server"}
    switches = {name: w for (kind, name), w in sorted(mean.items()) if kind == "switch"}
    total_j = math.fsum(energy.values())
    servers_w = math.fsum(nodes.values())
    return {  # `_totals`' keys first, as predicted_power's
        "nodes": nodes, "switches": switches,
        "total_W": servers_w + math.fsum(switches.values()), "servers_W": servers_w,
        "energy_J": total_j,
        "energy_per_request_J": total_j / answered if answered > 0 else math.nan,
        "duration_s": max(span.values(), default=0.0),
        "utilization": {name: busy.get(name, 0.0) / span[("server", name)] for name in nodes},
    }


def switch_ports(graph: nx.Graph) -> dict[str, int]:
    """Each switch of the topology graph and how many links (ports) it has."""
    return {str(n): int(graph.degree(n)) for n, d in graph.nodes(data=True)
            if d.get("kind") == "switch"}


def predicted_power(scenario: Scenario, busy: Mapping[str, float],
                    switch_ports: Mapping[str, int], requests_per_model_ms: float
                    ) -> dict[str, object]:
    """The exact mean power of each server from its busy fraction, and each switch's
    from the expected traffic (every port taken as active: at the loads the model
    describes each port carries packets every second)."""
    nodes = {n.name: server_power_w(n.power, busy[n.name]) for n in scenario.nodes}
    bytes_per_s = (scenario.timebase.real_rate_per_s(requests_per_model_ms)
                   * BYTES_PER_REQUEST)
    switches = {name: switch_power_w(scenario.switch_power, ports, ports, bytes_per_s)
                for name, ports in sorted(switch_ports.items())}
    return _totals(nodes, switches) | {
        "utilization": dict(busy),
        "basis": "servers exact from busy probabilities; switches from the expected traffic",
    }


def server_power_gap(measured: Mapping[str, object], predicted: Mapping[str, object]) -> float:
    """Relative gap of measured mean server power (all servers) against predicted."""
    m, p = measured.get("servers_W"), predicted.get("servers_W")
    if not isinstance(m, (int, float)) or not isinstance(p, (int, float)) or p == 0:
        return math.nan
    return (float(m) - float(p)) / float(p)


__all__ = ["BYTES_PER_REQUEST", "POWER_CSV_COLUMNS", "PowerError", "PowerSample", "busy_fraction",
           "power_block", "power_csv_text", "predicted_power", "server_count", "server_power_gap",
           "server_power_w", "switch_ports", "switch_power_w", "awake_ports", "hold_intervals"]
