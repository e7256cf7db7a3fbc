"""Each node's count as the controller keeps it for per-request policies (pure).

The controller decides every new connection, so it knows each arrival before the node
does: a decided connection counts at its node from the decision on, until the node's own
report says its request arrived (the node's count then holds it). The nodes report their
whole count at each change (`fogsdn.core.load_report`), so departures, blocks, drops and
handoffs reach the count without the controller asking anyone. A decision whose request
never reaches its node (the client gave up) stops counting after `expire_s`.

The model decides on the state a request meets when it reaches its node; live, the
decision comes one connection set-up earlier (SYN, SYN-ACK, then the request). So the
count is the node's at the instant this connection's request should reach it: now plus
the median of the node's recent decision-to-arrival times, less the held requests whose
scheduled end comes before then (the nodes report the earliest ends).

Each arrival's report also says what the node held just before it: against what the
policy saw at that connection's decision, that is the decision's staleness, kept as a
histogram (memory stays flat however long the run).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from fogsdn.core.load_report import LoadReport

Client = tuple[str, int]  # (ip, TCP source port) of a connection
LAG_SAMPLES = 32  # decision-to-arrival times kept per node
LOAD_FILE = "controller-load.json"  # the staleness histogram, beside the controller's events


@dataclass
class _NodeLoad:
    seq: int = -1
    in_system: int = 0
    busy_until: float = -math.inf
    pending: dict[Client, float] = field(default_factory=dict)  # decided, not yet arrived
    ends: tuple[float, ...] = ()  # the earliest held requests' scheduled ends
    lags: deque[float] = field(default_factory=lambda: deque(maxlen=LAG_SAMPLES))

    def lag_s(self) -> float:
        """The median of the recent decision-to-arrival times (0 before any)."""
        return statistics.median(self.lags) if self.lags else 0.0


@dataclass
class LoadLedger:
    """Counts per node (all start empty, as the workers do) and the staleness histogram."""

    nodes: dict[str, _NodeLoad]
    expire_s: float  # a decision not arrived after this long is dropped from the count
    ms_real: float  # real seconds per model ms
    seen: dict[Client, tuple[str, int]] = field(default_factory=dict)  # at each decision
    staleness: Counter[int] = field(default_factory=Counter)  # seen - held at arrival
    reports: int = 0
    expired: int = 0

    @classmethod
    def of(cls, names: Iterable[str], expire_s: float, ms_real: float) -> LoadLedger:
        return cls({n: _NodeLoad() for n in names}, expire_s, ms_real)

    def in_system(self, node: str, now: float) -> int | None:
        """What `node` will hold when a connection decided at `now` reaches it: its decided
        requests on their way included, the departures due before then excluded (None:
        not a node of the run)."""
        load = self.nodes.get(node)
        if load is None:
            return None
        self._expire(load, now)
        at = now + load.lag_s()
        leaving = sum(1 for e in load.ends if e <= at)
        return max(0, load.in_system - leaving) + len(load.pending)

    def work_left_ms(self, node: str, now: float) -> float | None:
        """Model ms of work `node` holds at `now` by its last report (its requests on their
        way not included: their sizes are the clients')."""
        load = self.nodes.get(node)
        if load is None:
            return None
        return max(0.0, load.busy_until - now) / self.ms_real

    def decided(self, node: str, client: Client, seen: int | None, now: float) -> None:
        """A connection from `client` was sent to `node`; the policy saw `seen` there."""
        load = self.nodes.get(node)
        if load is None:
            return
        load.pending[client] = now
        if seen is not None:
            self.seen[client] = (node, seen)

    def report(self, r: LoadReport) -> None:
        """One node's report: its count, if newer than the last; its arrival, if any."""
        load = self.nodes.get(r.node)
        if load is None:
            return
        self.reports += 1
        if r.arrival is not None:
            key = self._decision_of(load, r.arrival)
            decided_at = None if key is None else load.pending.pop(key)
            if decided_at is not None and r.arrived_at is not None:
                load.lags.append(max(0.0, r.arrived_at - decided_at))
            seen = None if key is None else self.seen.pop(key, None)
            if seen is not None and seen[0] == r.node and r.before is not None:
                self.staleness[seen[1] - r.before] += 1
        if r.seq > load.seq:
            load.seq, load.in_system, load.busy_until = r.seq, r.in_system, r.busy_until
            load.ends = r.ends

    @staticmethod
    def _decision_of(load: _NodeLoad, arrival: Client) -> Client | None:
        """The decision an arrival at `load`'s node answers: its own connection's, or else
        the oldest on its way there from the same client (the switch's connection tracking
        may give a reused port's connection another source port: the node then sees
        port + 1); None for an arrival nobody decided (a handoff, a stage restart)."""
        if arrival in load.pending:
            return arrival
        same = [(t, c) for c, t in load.pending.items() if c[0] == arrival[0]]
        return min(same)[1] if same else None

    def _expire(self, load: _NodeLoad, now: float) -> None:
        old = [c for c, t in load.pending.items() if now - t > self.expire_s]
        for c in old:
            del load.pending[c]
            self.seen.pop(c, None)
        self.expired += len(old)

    def staleness_summary(self) -> dict[str, float | int]:
        """The histogram of (count the policy saw - count the request met at its node)."""
        return staleness_summary(self.staleness, self.reports, self.expired)


def staleness_summary(hist: Counter[int], reports: int = 0, expired: int = 0
                      ) -> dict[str, float | int]:
    """Decisions judged, the share that saw the exact count, the mean error, its extremes
    and its 1st/99th percentiles (requests; + the policy saw more than was there)."""
    n = sum(hist.values())
    out: dict[str, float | int] = {"decisions": n, "reports": reports, "expired": expired}
    if not n:
        return out
    ordered = sorted(hist.items())

    def pct(q: float) -> int:
        k, rank = 0, q * (n - 1)
        for value, count in ordered:
            k += count
            if k > rank:
                return value
        return ordered[-1][0]

    return out | {"exact_share": hist.get(0, 0) / n,
                  "mean": sum(v * c for v, c in ordered) / n,
                  "min": ordered[0][0], "p1": pct(0.01), "p99": pct(0.99),
                  "max": ordered[-1][0]}


def read_staleness(text: str) -> Counter[int]:
    """The histogram in a `LOAD_FILE` (ValueError where it is not one)."""
    d = json.loads(text)
    hist = d.get("staleness") if isinstance(d, dict) else None
    if not isinstance(hist, dict):
        raise ValueError("no staleness histogram")
    return Counter({int(k): int(v) for k, v in hist.items()})
