"""OFN availability over time: alternating exponential sojourns (pure, seeded, lazy).

One implementation for every engine: the simulator consumes `churn_events` as it
goes, the emulator replays `churn_schedule` (the same events up to the run's end) on
the live network, drawn up front so that a run's churn is known before it happens.
Both draw from the effective seed's CHURN stream, so for one seed and replication the
live network and the simulator see the same OFN schedule.

Draw order (it fixes the stream's use): each OFN's initial state in scenario order
(one draw where `initial: stationary` and eta + xi > 0), then each OFN's first sojourn,
then, at each change in time order (ties: the OFN first in scenario order), the
changed OFN's next sojourn.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from fogsdn.scenario import Churn
from fogsdn.streams import Stream, python_stream, replication_seed


@dataclass(frozen=True)
class Transition:
    t_ms: float
    node: str
    available: bool


def initial_available(churn: Churn, rng: random.Random) -> bool:
    if churn.initial == "available":
        return True
    if churn.initial == "unavailable":
        return False
    total = churn.eta + churn.xi
    return True if total == 0 else rng.random() < churn.xi / total


def sojourn_ms(churn: Churn, up: bool, rng: random.Random) -> float:
    """How long an OFN stays in its state (inf where that state's rate is 0)."""
    rate = churn.eta if up else churn.xi
    # random.expovariate's own arithmetic, so that it is one draw of `rng`
    return -math.log(1.0 - rng.random()) / rate if rate > 0 else math.inf


def churn_events(churn: Churn, ofns: list[str], seed: int) -> Iterator[Transition]:
    """Every OFN's state at t = 0, then every change, in time order, for the effective
    seed (scenario seed + replication); ends only if no OFN changes again."""
    rng = python_stream(seed, Stream.CHURN)
    up = [initial_available(churn, rng) for _ in ofns]
    for name, state in zip(ofns, up, strict=True):
        yield Transition(0.0, name, state)
    next_change = [sojourn_ms(churn, state, rng) for state in up]
    while ofns:
        t = min(next_change)
        if t == math.inf:
            return
        k = next_change.index(t)
        up[k] = not up[k]
        next_change[k] = t + sojourn_ms(churn, up[k], rng)
        yield Transition(t, ofns[k], up[k])


def churn_schedule(churn: Churn, ofns: list[str], until_ms: float, seed: int,
                   replication: int = 0) -> list[Transition]:
    """Every OFN's state at t=0, then each change before `until_ms`, in time order."""
    out: list[Transition] = []
    for tr in churn_events(churn, ofns, replication_seed(seed, replication)):
        if tr.t_ms >= until_ms:
            break
        out.append(tr)
    return out
