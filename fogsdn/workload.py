"""Task sizes and Poisson arrival schedules (pure, seeded), shared by clients and tests."""

from __future__ import annotations

import random
from dataclasses import dataclass

from fogsdn.scenario import SizeSpec, TaskClass


def sample_size(spec: SizeSpec, rng: random.Random) -> float:
    """One task size in work units (a node of rate mu serves it in size/mu model ms)."""
    if spec.distribution == "exponential":
        return rng.expovariate(1.0 / spec.mean)
    if spec.distribution == "deterministic":
        return spec.mean
    # bounded Pareto on [low, high] with shape a, by inverting its CDF
    a, lo, hi = spec.shape, spec.low, spec.high
    assert a is not None and lo is not None and hi is not None
    u = rng.random()
    ratio = (lo / hi) ** a
    return lo * (1.0 - u * (1.0 - ratio)) ** (-1.0 / a)


# an exponential size above this many means has probability e^-50 (about 2e-22)
EXPONENTIAL_MAX_MEANS = 50.0


def max_task_size(spec: SizeSpec) -> float:
    """The largest size the scenario's distribution can draw in practice; a worker refuses
    anything larger, so that one absurd request cannot hold a node for the rest of a run."""
    if spec.distribution == "exponential":
        return spec.mean * EXPONENTIAL_MAX_MEANS
    if spec.distribution == "deterministic":
        return spec.mean
    assert spec.high is not None
    return spec.high


@dataclass(frozen=True)
class Arrival:
    t_ms: float  # model ms from the run's epoch
    cls: TaskClass
    size: float


def poisson_arrivals(
    rates: dict[TaskClass, float], until_ms: float, size: SizeSpec, rng: random.Random
) -> list[Arrival]:
    """Independent Poisson streams per class, merged in time order."""
    out: list[Arrival] = []
    for cls, rate in sorted(rates.items()):
        if rate <= 0:
            continue
        t = rng.expovariate(rate)
        while t < until_ms:
            out.append(Arrival(t, cls, sample_size(size, rng)))
            t += rng.expovariate(rate)
    out.sort(key=lambda a: a.t_ms)
    return out


def client_seed(scenario_seed: int, client: str, replication: int = 0) -> int:
    """A stable per-client seed (string hashing in Python is salted, so derive it here)."""
    h = 1469598103934665603
    for ch in f"{scenario_seed}/{replication}/{client}".encode():
        h = ((h ^ ch) * 1099511628211) % (1 << 64)
    return h


__all__ = ["Arrival", "client_seed", "max_task_size", "poisson_arrivals", "sample_size"]
