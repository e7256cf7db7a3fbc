"""Vivaldi network coordinates (Dabek et al. 2004) with the refinements serf uses (pure).

A point in Euclidean space plus a height (the access link); the RTT estimate is the
distance between two coordinates. The refinements are in docs/coordinates.md (Vivaldi).
All times are ms: serf's defaults in seconds become 0.01 ms minimum height and a
gravity rho of 150 000 ms.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace


class VivaldiError(ValueError):
    """An RTT sample or a peer coordinate the update refuses; the message says why."""


@dataclass(frozen=True)
class VivaldiConfig:
    """Tuning knobs; the defaults are serf's (see the module docstring for units)."""

    dimensions: int = 8
    error_max: float = 1.5
    ce: float = 0.25
    cc: float = 0.25
    adjustment_window: int = 20
    height_min_ms: float = 0.01
    latency_filter_size: int = 3
    gravity_rho_ms: float = 150_000.0
    max_rtt_ms: float = 10_000.0
    zero_threshold_ms: float = 1e-6
    gravity: bool = True  # False: no pull toward the origin (plain Vivaldi)

    def __post_init__(self) -> None:
        checks = {
            "dimensions": self.dimensions >= 1,
            "error_max": self.error_max > 0,
            "ce": 0 < self.ce <= 1,
            "cc": 0 < self.cc <= 1,
            "adjustment_window": self.adjustment_window >= 0,
            "height_min_ms": self.height_min_ms >= 0,
            "latency_filter_size": self.latency_filter_size >= 1,
            "gravity_rho_ms": self.gravity_rho_ms > 0,
            "max_rtt_ms": self.max_rtt_ms > 0,
        }
        for name, ok in checks.items():
            if not ok:
                raise VivaldiError(f"{name}: out of range ({getattr(self, name)!r})")


@dataclass(frozen=True)
class Coordinate:
    """A point, its height, its adjustment and how wrong its owner thinks it is."""

    vec: tuple[float, ...]
    error: float
    height: float
    adjustment: float = 0.0

    @staticmethod
    def origin(config: VivaldiConfig) -> Coordinate:
        return Coordinate((0.0,) * config.dimensions, config.error_max, config.height_min_ms)

    def is_valid(self) -> bool:
        parts = (*self.vec, self.error, self.height, self.adjustment)
        return all(math.isfinite(x) for x in parts)

    def to_dict(self) -> dict[str, object]:
        return {"vec": list(self.vec), "error": self.error, "height": self.height,
                "adjustment": self.adjustment}

    @staticmethod
    def from_dict(obj: object, dimensions: int) -> Coordinate:
        """A coordinate received from a peer (say in a probe echo); VivaldiError names
        the field that is missing, of the wrong type or not finite."""
        if not isinstance(obj, dict):
            raise VivaldiError("coordinate: must be an object")
        vec = obj.get("vec")
        if not isinstance(vec, list) or len(vec) != dimensions:
            raise VivaldiError(f"coordinate.vec: must be a list of {dimensions} numbers")
        values: list[float] = []
        for name, raw in [*(("vec", x) for x in vec), ("error", obj.get("error")),
                          ("height", obj.get("height")),
                          ("adjustment", obj.get("adjustment", 0.0))]:
            if isinstance(raw, bool) or not isinstance(raw, int | float) \
                    or not math.isfinite(raw):
                raise VivaldiError(f"coordinate.{name}: must be a finite number")
            values.append(float(raw))
        *v, error, height, adjustment = values
        if error < 0 or height < 0:
            raise VivaldiError("coordinate: error and height must be >= 0")
        return Coordinate(tuple(v), error, height, adjustment)

    def raw_distance_to(self, other: Coordinate) -> float:
        """Euclidean distance plus both heights, in ms (what the springs act on)."""
        return math.dist(self.vec, other.vec) + self.height + other.height

    def distance_to(self, other: Coordinate) -> float:
        """The RTT estimate in ms: the raw distance plus both adjustments when that stays
        positive (a negative estimate would be meaningless)."""
        raw = self.raw_distance_to(other)
        adjusted = raw + self.adjustment + other.adjustment
        return adjusted if adjusted > 0 else raw


def _norm(v: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


@dataclass
class VivaldiStats:
    updates: int = 0
    rejected: int = 0
    resets: int = 0


@dataclass
class VivaldiNode:
    """One participant's Vivaldi state. `update` consumes one RTT sample to a peer."""

    config: VivaldiConfig = field(default_factory=VivaldiConfig)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    coord: Coordinate = field(init=False)
    stats: VivaldiStats = field(default_factory=VivaldiStats)
    _filters: dict[str, deque[float]] = field(default_factory=dict, init=False)
    _residuals: list[float] = field(default_factory=list, init=False)
    _residual_index: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.coord = Coordinate.origin(self.config)
        self._residuals = [0.0] * self.config.adjustment_window

    def reset(self) -> None:
        """Back to the origin with maximal error, forgetting filters and residuals."""
        self.coord = Coordinate.origin(self.config)
        self._filters.clear()
        self._residuals = [0.0] * self.config.adjustment_window
        self._residual_index = 0

    def update(self, peer: str, peer_coord: Coordinate, rtt_ms: float) -> Coordinate:
        """Fold one RTT sample (ms) to `peer` at `peer_coord` into ours; VivaldiError (state
        unchanged) for an invalid RTT or an unusable peer coordinate."""
        self._check(peer_coord, rtt_ms)
        samples = self._filters.setdefault(peer, deque(maxlen=self.config.latency_filter_size))
        samples.append(rtt_ms)
        rtt = statistics.median(samples)
        self._spring_step(peer_coord, rtt)
        self._update_adjustment(peer_coord, rtt)
        self._apply_gravity()
        if not self.coord.is_valid():
            self.stats.resets += 1
            self.reset()
        self.stats.updates += 1
        return self.coord

    def _check(self, peer_coord: Coordinate, rtt_ms: float) -> None:
        why = None
        if isinstance(rtt_ms, bool) or not isinstance(rtt_ms, int | float):
            why = f"rtt_ms: not a number ({rtt_ms!r})"
        elif not math.isfinite(rtt_ms) or rtt_ms <= 0:
            why = f"rtt_ms: must be finite and > 0, got {rtt_ms!r}"
        elif rtt_ms > self.config.max_rtt_ms:
            why = f"rtt_ms: {rtt_ms} exceeds max_rtt_ms {self.config.max_rtt_ms}"
        elif len(peer_coord.vec) != self.config.dimensions:
            why = (f"peer coordinate: {len(peer_coord.vec)} dimensions, "
                   f"expected {self.config.dimensions}")
        elif not peer_coord.is_valid():
            why = "peer coordinate: not finite"
        if why is not None:
            self.stats.rejected += 1
            raise VivaldiError(why)

    def _spring_step(self, peer: Coordinate, rtt: float) -> None:
        cfg = self.config
        dist = self.coord.raw_distance_to(peer)
        wrongness = abs(dist - rtt) / rtt
        total_error = self.coord.error + peer.error
        if total_error < cfg.zero_threshold_ms:
            total_error = cfg.zero_threshold_ms
        weight = self.coord.error / total_error
        error = cfg.ce * weight * wrongness + self.coord.error * (1.0 - cfg.ce * weight)
        self.coord = replace(self.coord, error=min(error, cfg.error_max))
        self._apply_force(peer, cfg.cc * weight * (rtt - dist))

    def _apply_force(self, other: Coordinate, force: float) -> None:
        """Move along the unit vector from `other` to us by `force` ms (negative: toward
        it); the height takes its share of the move in proportion to its part of the
        distance."""
        cfg = self.config
        diff = tuple(x - y for x, y in zip(self.coord.vec, other.vec, strict=True))
        mag = _norm(diff)
        height = self.coord.height
        if mag > cfg.zero_threshold_ms:
            unit = tuple(x / mag for x in diff)
            height = max((height + other.height) * force / mag + height, cfg.height_min_ms)
        else:
            unit = self._random_unit()
        vec = tuple(x + u * force for x, u in zip(self.coord.vec, unit, strict=True))
        self.coord = replace(self.coord, vec=vec, height=height)

    def _random_unit(self) -> tuple[float, ...]:
        while True:
            v = tuple(self.rng.uniform(-1.0, 1.0) for _ in range(self.config.dimensions))
            n = _norm(v)
            if n > self.config.zero_threshold_ms:
                return tuple(x / n for x in v)

    def _update_adjustment(self, peer: Coordinate, rtt: float) -> None:
        window = self.config.adjustment_window
        if window == 0:
            return
        self._residuals[self._residual_index] = rtt - self.coord.raw_distance_to(peer)
        self._residual_index = (self._residual_index + 1) % window
        self.coord = replace(self.coord, adjustment=sum(self._residuals) / (2.0 * window))

    def _apply_gravity(self) -> None:
        if not self.config.gravity:
            return
        origin = Coordinate.origin(self.config)
        dist = self.coord.raw_distance_to(origin)
        self._apply_force(origin, -((dist / self.config.gravity_rho_ms) ** 2))


def plain_config(dimensions: int, initial_error: float = 10.0) -> VivaldiConfig:
    """Vivaldi as Dabek et al. (and seed 003) describe it: adaptive timestep and error
    weighting only, the error starting at `initial_error` (docs/coordinates.md)."""
    return VivaldiConfig(dimensions=dimensions, error_max=initial_error, latency_filter_size=1,
                         adjustment_window=0, gravity=False)


def relative_errors(coords: Sequence[Coordinate], truth: Sequence[Sequence[float]]) -> list[float]:
    """|estimate - truth| / truth for every ordered pair i != j whose truth is finite and > 0."""
    out: list[float] = []
    for i, ci in enumerate(coords):
        for j, cj in enumerate(coords):
            t = truth[i][j]
            if i != j and math.isfinite(t) and t > 0:
                out.append(abs(ci.distance_to(cj) - t) / t)
    return out


def simulate(nodes: Sequence[VivaldiNode], truth: Sequence[Sequence[float]], cycles: int,
             rng: random.Random) -> None:
    """Each cycle, every node measures one random peer with a known truth and updates."""
    n = len(nodes)
    known = [[j for j in range(n) if j != i and math.isfinite(truth[i][j]) and truth[i][j] > 0]
             for i in range(n)]
    for _ in range(cycles):
        for i, node in enumerate(nodes):
            if known[i]:
                j = rng.choice(known[i])
                node.update(str(j), nodes[j].coord, truth[i][j])
