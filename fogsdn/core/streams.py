"""Seeded random streams: the one source of a scenario's random inputs in every engine.

Each source of randomness (`Stream`) has its own stream from one seed, so runs that
differ only in policy see the same arrivals (common random numbers), live or simulated.
"""

from __future__ import annotations

import random
from enum import IntEnum

import numpy as np

from fogsdn.core.scenario import Scenario, SizeSpec, parse_scenario

BLOCK = 16_384  # draws per refill of a block stream; fixed, so traces do not depend on it


class Stream(IntEnum):
    INTERARRIVAL = 0
    CLASS = 1
    CLIENT = 2
    SIZE = 3
    ROUTING = 4
    CHURN = 5
    CAPACITY = 7


def replication_seed(seed: int, replication: int) -> int:
    """Replication r of a scenario with seed s runs as seed s + r (so it can be rerun alone)."""
    return seed + replication


def numpy_stream(seed: int, stream: Stream) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(stream,))))


def python_stream(seed: int, stream: Stream) -> random.Random:
    """A `random.Random` (what policies take) seeded from the same seed sequence."""
    state = np.random.SeedSequence(seed, spawn_key=(stream,)).generate_state(4, dtype=np.uint32)
    return random.Random(int.from_bytes(state.tobytes(), "little"))


def size_block(spec: SizeSpec, gen: np.random.Generator, n: int) -> list[float]:
    """`n` task sizes in work units (a node of rate mu serves size s in s/mu model ms);
    bounded Pareto on [low, high] with shape a by inverting its CDF."""
    if spec.distribution == "exponential":
        return gen.exponential(spec.mean, n).tolist()
    if spec.distribution == "deterministic":
        return [spec.mean] * n
    a, lo, hi = spec.shape, spec.low, spec.high
    assert a is not None and lo is not None and hi is not None
    u = gen.random(n)
    return (lo * (1.0 - u * (1.0 - (lo / hi) ** a)) ** (-1.0 / a)).tolist()


def draw_capacities(scenario: Scenario, replication: int) -> Scenario:
    """The scenario with each `capacity: {uniform: [lo, hi]}` drawn for this replication
    (its own stream, node by node in file order), so every engine runs the same draw;
    unchanged when nothing is drawn."""
    if not scenario.capacity_drawn:
        return scenario
    gen = numpy_stream(replication_seed(scenario.seed, replication), Stream.CAPACITY)
    data = scenario.to_dict()
    for node in data["nodes"]:
        if node.get("capacity_range") is not None:
            lo, hi = node["capacity_range"]
            node["capacity"] = int(gen.integers(lo, hi + 1))
            node["capacity_range"] = None
    return parse_scenario(data, source=f"{scenario.name}, replication {replication}")
