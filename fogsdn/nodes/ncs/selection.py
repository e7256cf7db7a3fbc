"""Which fog node should a mobile client use? Seed 003's strategies plus ours (pure).

Each selector sees only what its strategy can know, passed in a `SelectionContext`
(docs/coordinates.md: `optimal` ignores capacity as the seed's baseline does; `meridian`
leaves full nodes out; `load_aware` is ours). Nodes in `excluded` (they refused this
client during this discovery step) are never returned; None when nothing is left.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypeVar

T = TypeVar("T")


class SelectionError(ValueError):
    """A selector asked for knowledge its context lacks, or a bad parameter."""


@dataclass(frozen=True)
class ProbeAnswer:
    """A fog node's answer to a selection probe."""

    rtt_ms: float
    free_slots: int
    join_cost_ms: float = 0.0  # one more client: added latency summed over its clients
    leave_gain_ms: float = 0.0  # one client fewer: latency the others save


@dataclass(frozen=True)
class SelectionContext:
    nodes: Sequence[str]
    slots: Mapping[str, int]
    current: str | None = None
    excluded: frozenset[str] = frozenset()
    true_latency_ms: Mapping[str, float] | None = None
    estimate_ms: Mapping[str, float] | None = None
    free_slots: Mapping[str, int] | None = None
    meridian: Callable[[Callable[[str], bool]], str | None] | None = None
    # probe(node) -> its answer now; each call is a counted round trip
    probe: Callable[[str], ProbeAnswer] | None = None

    def allowed(self) -> list[str]:
        return [n for n in self.nodes if n not in self.excluded]


class Selector(Protocol):
    name: ClassVar[str]

    def select(self, ctx: SelectionContext, rng: random.Random) -> str | None: ...


def _need(value: T | None, what: str, name: str) -> T:
    if value is None:
        raise SelectionError(f"{name}: the context lacks {what}")
    return value


@dataclass(frozen=True)
class Optimal:
    name: ClassVar[str] = "optimal"

    def select(self, ctx: SelectionContext, rng: random.Random) -> str | None:
        lat = _need(ctx.true_latency_ms, "true_latency_ms", self.name)
        return min(ctx.allowed(), key=lambda n: (lat[n], n), default=None)


@dataclass(frozen=True)
class RandomChoice:
    name: ClassVar[str] = "random"

    def select(self, ctx: SelectionContext, rng: random.Random) -> str | None:
        allowed = ctx.allowed()
        return rng.choice(allowed) if allowed else None


@dataclass(frozen=True)
class VivaldiNearest:
    name: ClassVar[str] = "vivaldi"

    def select(self, ctx: SelectionContext, rng: random.Random) -> str | None:
        est = _need(ctx.estimate_ms, "estimate_ms", self.name)
        return min(ctx.allowed(), key=lambda n: (est[n], n), default=None)


@dataclass(frozen=True)
class MeridianClosest:
    name: ClassVar[str] = "meridian"

    def select(self, ctx: SelectionContext, rng: random.Random) -> str | None:
        query = _need(ctx.meridian, "a meridian query", self.name)
        free = _need(ctx.free_slots, "free_slots", self.name)
        return query(lambda n: n not in ctx.excluded and free[n] > 0)


@dataclass(frozen=True)
class LoadAware:
    """Ours: coordinates for a shortlist within a latency bound, free slots for load,
    probes to confirm both."""

    bound_ms: float = 2.0
    shortlist: int = 8
    hysteresis_ms: float = 0.25
    name: ClassVar[str] = "load_aware"

    def __post_init__(self) -> None:
        if not self.bound_ms >= 0:
            raise SelectionError(f"bound_ms: must be >= 0, got {self.bound_ms!r}")
        if self.shortlist < 1:
            raise SelectionError(f"shortlist: must be >= 1, got {self.shortlist!r}")
        if not self.hysteresis_ms >= 0:
            raise SelectionError(f"hysteresis_ms: must be >= 0, got {self.hysteresis_ms!r}")

    def select(self, ctx: SelectionContext, rng: random.Random) -> str | None:
        est = _need(ctx.estimate_ms, "estimate_ms", self.name)
        free = _need(ctx.free_slots, "free_slots", self.name)
        probe = _need(ctx.probe, "a probe", self.name)
        allowed = ctx.allowed()
        open_nodes = [n for n in allowed if free[n] > 0 and n != ctx.current]
        if not open_nodes:
            return ctx.current if ctx.current in allowed else \
                min(allowed, key=lambda n: (est[n], n), default=None)
        best = min(est[n] for n in open_nodes)
        near = sorted((n for n in open_nodes if est[n] <= best + self.bound_ms),
                      key=lambda n: (est[n], n))[: self.shortlist]
        answers = {n: probe(n) for n in near}
        join = {n: a.rtt_ms + a.join_cost_ms for n, a in answers.items() if a.free_slots > 0}
        if not join:
            return ctx.current if ctx.current in allowed else None
        target = min(join, key=lambda n: (join[n], n))
        if ctx.current is not None and ctx.current in allowed:
            here = probe(ctx.current)
            # moving saves `leave_gain` for the others and our own RTT here, and costs
            # the target's RTT plus what we add to its clients
            if join[target] + self.hysteresis_ms >= here.rtt_ms + here.leave_gain_ms:
                return ctx.current
        return target


SELECTORS: dict[str, Callable[[], Selector]] = {
    "optimal": Optimal,
    "random": RandomChoice,
    "vivaldi": VivaldiNearest,
    "meridian": MeridianClosest,
    "load_aware": LoadAware,
}
