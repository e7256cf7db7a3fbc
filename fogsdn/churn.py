"""OFN availability over time: alternating exponential sojourns drawn from the seed (pure).

The emulator replays this schedule on the live network; it is drawn up front so
a run's churn is reproducible and can be logged before it happens.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fogsdn.scenario import Churn
from fogsdn.workload import client_seed


@dataclass(frozen=True)
class Transition:
    t_ms: float
    node: str
    available: bool


def initial_available(churn: Churn, rng: random.Random) -> bool:
    if churn.eta == 0:
        return churn.initial != "unavailable"
    if churn.initial == "stationary":
        return rng.random() < churn.xi / (churn.eta + churn.xi)
    return churn.initial == "available"


def churn_schedule(churn: Churn, ofns: list[str], until_ms: float, seed: int,
                   replication: int = 0) -> list[Transition]:
    """Every OFN's state at t=0, then each change before `until_ms`, in time order."""
    out: list[Transition] = []
    for name in ofns:
        rng = random.Random(client_seed(seed, f"churn/{name}", replication))
        up = initial_available(churn, rng)
        out.append(Transition(0.0, name, up))
        t = 0.0
        while True:
            rate = churn.eta if up else churn.xi
            if rate <= 0:
                break
            t += rng.expovariate(rate)
            if t >= until_ms:
                break
            up = not up
            out.append(Transition(t, name, up))
    out.sort(key=lambda tr: (tr.t_ms, tr.node))
    return out
