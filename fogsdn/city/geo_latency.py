"""Seed 003's latency model between a client and a fog node (eqs. 7-12), pure; all ms.

    L = D_trans + D_prop + D_proc + D_queue                                   (7)
    D_trans = slope * min(B_i, B_j) + intercept     (slope -0.008, intercept 0.088)  (8)
    B_i = min(1, max(sla, 1 - (1 - sla) * c_i / s_i))   in Gbps, c_i clients on s_i slots (9)
    D_prop = (d_i + d_j) * v                                                  (10)
    D_proc = h * c + E_network                                                (11)
    D_queue = min(E_qos, 1 / (2 * min(B_i, B_j)))                             (12)

A client's own bandwidth is the 1 Gbps maximum, so min(B_i, B_j) is the fog node's.
Eq. 10 is read along the backhaul path by default, and the defaults the seed does not
print are ours: docs/coordinates.md (Seed 003's study, simulated) says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Point = tuple[float, float]  # metres


class LatencyModelError(ValueError):
    """A parameter or input out of range; the message names it."""


@dataclass(frozen=True)
class LatencyParams:
    sla_gbps: float = 0.05
    max_bandwidth_gbps: float = 1.0
    trans_slope_ms_per_gbps: float = -0.008
    trans_intercept_ms: float = 0.088
    propagation_ms_per_km: float = 1.0
    hardware_factor: float = 1.0
    delay_factor_ms: float = 1.0
    network_error_ms: float = 0.5
    qos_max_ms: float = 5.0
    backhaul: bool = True

    def __post_init__(self) -> None:
        for name in ("max_bandwidth_gbps", "propagation_ms_per_km", "qos_max_ms"):
            if not getattr(self, name) > 0:
                raise LatencyModelError(f"{name}: must be > 0, got {getattr(self, name)!r}")
        if not 0 < self.sla_gbps <= self.max_bandwidth_gbps:
            raise LatencyModelError(f"sla_gbps: must be in (0, max_bandwidth_gbps], "
                                    f"got {self.sla_gbps!r}")
        for name in ("hardware_factor", "delay_factor_ms", "network_error_ms"):
            if getattr(self, name) < 0:
                raise LatencyModelError(f"{name}: must be >= 0, got {getattr(self, name)!r}")


def bandwidth_gbps(clients: int, slots: int, p: LatencyParams) -> float:
    """Eq. 9 (scaled to the maximum bandwidth): what each new client still gets."""
    if slots <= 0:
        raise LatencyModelError(f"slots: must be > 0, got {slots}")
    if clients < 0:
        raise LatencyModelError(f"clients: must be >= 0, got {clients}")
    share = 1.0 - (1.0 - p.sla_gbps / p.max_bandwidth_gbps) * clients / slots
    return p.max_bandwidth_gbps * min(1.0, max(p.sla_gbps / p.max_bandwidth_gbps, share))


def transmission_ms(bw_gbps: float, p: LatencyParams) -> float:
    """Eq. 8."""
    return p.trans_slope_ms_per_gbps * bw_gbps + p.trans_intercept_ms


def queueing_ms(bw_gbps: float, p: LatencyParams) -> float:
    """Eq. 12."""
    return min(p.qos_max_ms, 1.0 / (2.0 * bw_gbps))


def processing_ms(p: LatencyParams) -> float:
    """Eq. 11."""
    return p.hardware_factor * p.delay_factor_ms + p.network_error_ms


def nearest(point: Point, towers: Sequence[Point]) -> tuple[int, float]:
    """Index of and distance (m) to the nearest tower."""
    if not towers:
        raise LatencyModelError("towers: need at least one cell tower")
    best = min(range(len(towers)), key=lambda i: math.dist(point, towers[i]))
    return best, math.dist(point, towers[best])


def path_km(client: Point, node: Point, towers: Sequence[Point], p: LatencyParams) -> float:
    """Eq. 10's distance: both access legs, plus the backhaul between their towers."""
    ti, di = nearest(client, towers)
    tj, dj = nearest(node, towers)
    metres = di + dj + (math.dist(towers[ti], towers[tj]) if p.backhaul else 0.0)
    return metres / 1000.0


def static_ms(client: Point, node: Point, towers: Sequence[Point], p: LatencyParams) -> float:
    """The load-independent part: propagation plus processing (the 'network distance')."""
    return path_km(client, node, towers, p) * p.propagation_ms_per_km + processing_ms(p)


def latency_ms(client: Point, node: Point, node_clients: int, node_slots: int,
               towers: Sequence[Point], p: LatencyParams) -> float:
    """Eq. 7: the latency between a client and a fog node serving `node_clients` on
    `node_slots` slots."""
    return load_ms(node_clients, node_slots, p) + static_ms(client, node, towers, p)


def load_ms(node_clients: int, node_slots: int, p: LatencyParams) -> float:
    """The load-dependent part: transmission plus queueing at the node's bandwidth."""
    bw = bandwidth_gbps(node_clients, node_slots, p)
    return transmission_ms(bw, p) + queueing_ms(bw, p)


def pair_load_ms(load_a_ms: float, load_b_ms: float) -> float:
    """Eq. 7's load part between two fog nodes: transmission and queueing at the lower
    of their bandwidths (eqs. 8, 12 take min(B_i, B_j)). Both terms fall as bandwidth
    rises, so that is the larger of the two nodes' own load terms (`load_ms`)."""
    return max(load_a_ms, load_b_ms)
