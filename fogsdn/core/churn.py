"""OFN availability over time: alternating exponential sojourns (pure, seeded, lazy).

The simulator consumes `churn_events` as it goes and the emulator replays
`churn_schedule`, both from the seed's CHURN stream, so both see the same OFN schedule.
The draw order fixes the stream's use (docs/architecture.md, "Churn draws").
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Iterator, Sequence
from itertools import takewhile
from typing import NamedTuple

from fogsdn.core.faults import FaultKind, FaultSpec, cut_changes
from fogsdn.core.scenario import Churn
from fogsdn.core.streams import Stream, python_stream, replication_seed


class Transition(NamedTuple):  # a tuple: the simulator makes one per OFN event
    t_ms: float
    node: str
    available: bool


def initial_available(churn: Churn, rng: random.Random) -> bool:
    if churn.initial != "stationary":
        return churn.initial == "available"
    total = churn.eta + churn.xi
    return total == 0 or rng.random() < churn.xi / total


def sojourn_ms(churn: Churn, up: bool, rng: random.Random) -> float:
    """How long an OFN stays in its state (inf where that state's rate is 0)."""
    rate = churn.eta if up else churn.xi
    # random.expovariate's own arithmetic, so that it is one draw of `rng`
    return -math.log(1.0 - rng.random()) / rate if rate > 0 else math.inf


def ofn_changes(churn: Churn, n: int, seed: int
                ) -> tuple[list[bool], Iterator[tuple[float, int, bool]]]:
    """The n OFNs' initial states, and then their changes (t, OFN index, new state) in
    time order, for the effective seed (scenario seed + replication). Plain tuples: the
    simulator takes one per OFN event, often as often as arrivals."""
    rng = python_stream(seed, Stream.CHURN)
    up = [initial_available(churn, rng) for _ in range(n)]

    def changes() -> Iterator[tuple[float, int, bool]]:
        rnd, log, inf = rng.random, math.log, math.inf  # sojourn_ms, inlined
        eta, xi = churn.eta, churn.xi
        state = list(up)
        next_change = [sojourn_ms(churn, s, rng) for s in state]
        if n == 1:  # the common case, without the search for the next OFN
            s, t = state[0], next_change[0]
            while t != inf:
                s = not s
                yield t, 0, s
                rate = eta if s else xi
                t = t + (-log(1.0 - rnd()) / rate if rate > 0 else inf)
            return
        while n:
            t = min(next_change)
            if t == inf:
                return
            k = next_change.index(t)
            s = state[k] = not state[k]
            rate = eta if s else xi
            next_change[k] = t + (-log(1.0 - rnd()) / rate if rate > 0 else inf)
            yield t, k, s

    return up, changes()


def churn_events(churn: Churn, ofns: list[str], seed: int) -> Iterator[Transition]:
    """Every OFN's state at t = 0, then every change, in time order, for the effective
    seed (scenario seed + replication); ends only if no OFN changes again."""
    initial, changes = ofn_changes(churn, len(ofns), seed)
    for name, state in zip(ofns, initial, strict=True):
        yield Transition(0.0, name, state)
    for t, k, state in changes:
        yield Transition(t, ofns[k], state)


def churn_schedule(churn: Churn, ofns: list[str], until_ms: float, seed: int,
                   replication: int = 0) -> list[Transition]:
    """Every OFN's state at t=0, then each change before `until_ms`, in time order."""
    return list(takewhile(lambda tr: tr.t_ms < until_ms,
                          churn_events(churn, ofns, replication_seed(seed, replication))))


def scheduled_availability(churn: Churn, ofns: list[str], until_ms: float, seed: int,
                           faults: Sequence[FaultSpec] = ()) -> list[Transition]:
    """`churn_schedule` with the scenario's scheduled cuts applied (`cut_ofn`: an OFN is
    available when the churn says so and no cut holds it away), as the simulator sees it."""
    drawn = churn_schedule(churn, ofns, until_ms, seed)
    if not any(f.kind is FaultKind.CUT_OFN for f in faults):
        return drawn
    index = {name: k for k, name in enumerate(ofns)}
    initial = [tr.available for tr in drawn if tr.t_ms == 0.0]
    changes = ((tr.t_ms, index[tr.node], tr.available) for tr in drawn if tr.t_ms > 0.0)
    start, merged = cut_changes(initial, changes, ofns, faults)
    return [*(Transition(0.0, n, s) for n, s in zip(ofns, start, strict=True)),
            *(Transition(t, ofns[k], s) for t, k, s in merged if t < until_ms)]


class ReactionLead:
    """How early the live runner issues each drawn OFN change, so that the data plane
    follows it at the drawn instant rather than one reaction time later: the median of
    the last `window` measured reactions (call to barrier reply), at most `cap_s`
    (docs/emulation.md, "The network's reaction to churn")."""

    def __init__(self, window: int = 31, cap_s: float = 0.005, enabled: bool = True) -> None:
        if window < 1 or not 0.0 <= cap_s <= 1.0:
            raise ValueError(f"ReactionLead: window >= 1 and 0 <= cap_s <= 1 s, got "
                             f"{window}, {cap_s}")
        self.enabled = enabled
        self.window, self.cap_s = window, cap_s
        self._recent: list[float] = []
        self.lead_s = 0.0  # set once per observation: the replay loop reads it often

    def observe(self, reaction_s: float) -> None:
        if not (self.enabled and math.isfinite(reaction_s) and reaction_s >= 0.0):
            return
        self._recent = [*self._recent[-(self.window - 1):], reaction_s]
        self.lead_s = min(self.cap_s, statistics.median(self._recent))
