"""Task sizes and the arrival stream (pure, seeded, lazy): one implementation that the
simulator and the live clients both draw from (docs/simulator.md).

Client k's requests are the arrivals whose client is k: a Poisson stream of rate
lambda / clients, as the scenario means.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from fogsdn.core.scenario import Scenario, SizeSpec, TaskClass, Workload
from fogsdn.core.streams import BLOCK, Stream, numpy_stream, size_block

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
    client: int = 0  # index of the client that sends it (c1 is 0)


@dataclass(frozen=True)
class ArrivalBlock:
    """BLOCK consecutive draws of each arrival stream (the simulator's inner loop reads
    these lists directly)."""

    interarrival: list[float]
    class_u: list[float]  # HP when below P(HP)
    client: list[int]
    size: list[float]


def arrival_blocks(workload: Workload, seed: int) -> Iterator[ArrivalBlock]:
    """The arrival streams for the effective seed (scenario seed + replication), forever.
    Under `workload.profile` the base stream's instants are time-changed
    (`RateProfile.warp`); the other streams are the stationary run's."""
    lam = workload.lambda_hp + workload.lambda_lp
    gen_ia = numpy_stream(seed, Stream.INTERARRIVAL)
    gen_cls = numpy_stream(seed, Stream.CLASS)
    gen_cl = numpy_stream(seed, Stream.CLIENT)
    gen_sz = numpy_stream(seed, Stream.SIZE)
    n = workload.clients
    profile = workload.rate_profile()
    u_last = t_last = 0.0
    while True:
        gaps = gen_ia.exponential(1.0 / lam, BLOCK)
        if profile is not None:
            u = u_last + np.cumsum(gaps)
            t = profile.warp(u)
            gaps = np.diff(t, prepend=t_last)
            u_last, t_last = float(u[-1]), float(t[-1])
        yield ArrivalBlock(gaps.tolist(), gen_cls.random(BLOCK).tolist(),
                           gen_cl.integers(0, n, BLOCK).tolist() if n > 1 else [0] * BLOCK,
                           size_block(workload.size, gen_sz, BLOCK))


def hp_share(workload: Workload) -> float:
    return workload.lambda_hp / (workload.lambda_hp + workload.lambda_lp)


def arrivals(workload: Workload, seed: int, until_ms: float = math.inf) -> Iterator[Arrival]:
    """Every client's arrivals before `until_ms`, in time order, lazily."""
    p_hp = hp_share(workload)
    t = 0.0
    for block in arrival_blocks(workload, seed):
        for ia, u, c, size in zip(block.interarrival, block.class_u, block.client, block.size,
                                  strict=True):
            t += ia
            if t >= until_ms:
                return
            yield Arrival(t, TaskClass.HP if u < p_hp else TaskClass.LP, size, c)


def client_arrivals(workload: Workload, seed: int, client: int,
                    until_ms: float = math.inf) -> Iterator[Arrival]:
    """Client `client`'s arrivals: the same requests, with the same ids, as the
    simulator's client `client` for this seed."""
    return (a for a in arrivals(workload, seed, until_ms) if a.client == client)


def client_names(scenario: Scenario) -> tuple[str, ...]:
    """Client host names, as the testbed names them (c1, c2, ...): client k is index k-1."""
    return tuple(f"c{i + 1}" for i in range(scenario.workload.clients))


def request_id(client: str, seq: int) -> str:
    """A request's id: its client's name and its index among that client's arrivals."""
    return f"{client}-{seq:07d}"


def drawn_instants(scenario: Scenario, seed: int) -> dict[str, float]:
    """Every request's drawn arrival instant (model ms) by id, for seed `seed` (the
    replication's): when the model says it arrives, whatever the live run made of it."""
    names = client_names(scenario)
    counts = [0] * len(names)
    out: dict[str, float] = {}
    for a in arrivals(scenario.workload, seed, scenario.duration_ms):
        out[request_id(names[a.client], counts[a.client])] = a.t_ms
        counts[a.client] += 1
    return out
