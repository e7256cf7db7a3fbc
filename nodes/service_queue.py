"""Admission and completion times of one node, against absolute deadlines (pure).

A `single` node is one FIFO server: a task starts at max(its arrival, the previous
departure) and ends `service` later. Computing ends from the schedule rather than
from when the process actually woke up keeps timer overshoot from accumulating
(docs/architecture.md: 0.11-0.16 ms per sleep here). A `multi` node has `capacity` servers and no
waiting. Times are seconds on any monotonic clock.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from fogsdn.scenario import Servers


@dataclass(frozen=True)
class Admission:
    start: float
    end: float


@dataclass
class ServiceQueue:
    capacity: int
    servers: Servers = Servers.SINGLE
    _ends: list[float] = field(default_factory=list)  # min-heap of scheduled ends held now
    _last_end: float = 0.0

    @property
    def in_system(self) -> int:
        return len(self._ends)

    def admit(self, now: float, service: float) -> Admission | None:
        """Schedule a task arriving at `now`, or None when the node is full (blocked)."""
        self.release_until(now)
        if len(self._ends) >= self.capacity:
            return None
        if self.servers is Servers.SINGLE:
            start = max(now, self._last_end)
        else:
            start = now
        end = start + service
        self._last_end = max(self._last_end, end)
        heapq.heappush(self._ends, end)
        return Admission(start, end)

    def release_until(self, now: float) -> int:
        """Forget tasks whose scheduled end has passed; returns how many."""
        n = 0
        while self._ends and self._ends[0] <= now:
            heapq.heappop(self._ends)
            n += 1
        return n

    def clear(self, now: float) -> int:
        """Drop everything held (an OFN that left with `drop`); returns how many."""
        n = len(self._ends)
        self._ends.clear()
        self._last_end = now
        return n
