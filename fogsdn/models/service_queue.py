"""Admission and completion times of one node, against absolute deadlines (pure).

Ends come from the schedule (a FIFO task ends `service` after max(arrival, previous
departure)), not from when the process woke, so timer overshoot never accumulates
(docs/architecture.md). A `multi` node has `capacity` servers and no waiting; a non-FIFO
single node is a `ClassQueue`, shared by the worker and the simulator. Times: seconds.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from fogsdn.core.scenario import Discipline, Servers


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
        while self._ends and self._ends[0] <= now:  # tasks whose scheduled end has passed
            heapq.heappop(self._ends)
        if len(self._ends) >= self.capacity:
            return None
        start = max(now, self._last_end) if self.servers is Servers.SINGLE else now
        end = start + service
        self._last_end = max(self._last_end, end)
        heapq.heappush(self._ends, end)
        return Admission(start, end)

    def clear(self, now: float) -> int:
        """Drop everything held (an OFN that left with `drop`); returns how many."""
        n = len(self._ends)
        self._ends.clear()
        self._last_end = now
        return n


# -- a single server that picks by class: round robin, priority --------------------------
P = TypeVar("P")


@dataclass(slots=True)
class Job(Generic[P]):
    """One request held by a `ClassQueue`. Times are the caller's (seconds live, model
    ms in the simulator). `work` is the service still owed when it last started (or, while
    waiting, now); `served` what earlier stints gave it (preempt-resume)."""

    hp: bool
    work: float
    payload: P
    arrival: float
    served: float = 0.0
    start: float = math.nan  # start of its current stint; NaN while waiting
    end: float = math.nan  # scheduled end of its current stint; NaN while waiting

    def left(self, now: float) -> float:
        """Service still owed at `now`."""
        if self.start == self.start:  # in service
            return max(0.0, self.end - max(now, self.start))
        return self.work


class ClassQueue(Generic[P]):
    """One server, `capacity` held in all (both classes), a FIFO queue per class, and a
    discipline that says which head goes next (`fogsdn.core.scenario.Discipline`).

    Ends are known only when a request starts, so the owner moves the clock with
    `advance(t)` (absolute schedule) and takes the finished from `done`; an arrival
    stamped before the clock counts as arriving at it. Preemption is preempt-resume.
    """

    def __init__(self, capacity: int, discipline: Discipline = Discipline.FIFO) -> None:
        self.capacity = capacity
        self.discipline = discipline
        self.preemptive = discipline is Discipline.PRIORITY_PREEMPTIVE
        self.in_service: Job[P] | None = None
        self.waiting: tuple[deque[Job[P]], deque[Job[P]]] = (deque(), deque())  # HP, LP
        self.done: list[Job[P]] = []
        self.clock = 0.0
        self.busy_done = 0.0  # server time of stints that have ended
        self._last_hp = False  # round robin: the class that started last

    def __len__(self) -> int:
        return (self.in_service is not None) + len(self.waiting[0]) + len(self.waiting[1])

    def next_end(self) -> float | None:
        """When the request in service ends (None: the server is idle)."""
        return self.in_service.end if self.in_service is not None else None

    def _pick(self) -> Job[P] | None:
        hpq, lpq = self.waiting
        if not hpq and not lpq:
            return None
        if not lpq:
            return hpq.popleft()
        if not hpq:
            return lpq.popleft()
        d = self.discipline
        if d is Discipline.ROUND_ROBIN:
            return lpq.popleft() if self._last_hp else hpq.popleft()
        if d is Discipline.FIFO:
            return hpq.popleft() if hpq[0].arrival <= lpq[0].arrival else lpq.popleft()
        return hpq.popleft()  # priority, either kind

    def _start(self, job: Job[P], t: float) -> None:
        job.start = t
        job.end = t + job.work
        self.in_service = job
        self._last_hp = job.hp

    def advance(self, t: float) -> None:
        """Finish every request that ends by `t` (into `done`), starting each next one at
        its predecessor's end; the clock is then `t` (it never goes back)."""
        s = self.in_service
        while s is not None and s.end <= t:
            self.busy_done += s.end - s.start
            self.done.append(s)
            self.clock = s.end
            self.in_service = None
            nxt = self._pick()
            if nxt is not None:
                self._start(nxt, s.end)
            s = self.in_service
        if t > self.clock:
            self.clock = t

    def take_done(self) -> list[Job[P]]:
        out, self.done = self.done, []
        return out

    def admit(self, now: float, hp: bool, work: float, payload: P) -> Job[P] | None:
        """Hold a request arriving at `now` that needs `work` of service, or None when the
        node is full (blocked)."""
        now = max(now, self.clock)
        self.advance(now)
        if len(self) >= self.capacity:
            return None
        job = Job(hp, work, payload, now)
        s = self.in_service
        if s is None:
            self._start(job, now)
        elif self.preemptive and hp and not s.hp:
            self._cut(s, now)
            self.waiting[1].appendleft(s)
            self._start(job, now)
        else:
            self.waiting[0 if hp else 1].append(job)
        return job

    def _cut(self, s: Job[P], now: float) -> None:
        """End `s`'s stint at `now` (preempted or taken away); it keeps what it owes."""
        ran = max(0.0, now - s.start)
        self.busy_done += ran
        s.served += ran
        s.work = max(0.0, s.end - now)
        s.start = s.end = math.nan
        self.in_service = None

    def clear(self, now: float) -> list[Job[P]]:
        """Take away everything held at `now` (an OFN that leaves): the request in
        service first, with the work it has left, then the waiting ones in the order
        the discipline would serve them. What ended by `now` stays in `done`."""
        now = max(now, self.clock)
        self.advance(now)
        out: list[Job[P]] = []
        if self.in_service is not None:
            s = self.in_service
            self._cut(s, now)
            out.append(s)
        while (job := self._pick()) is not None:
            self._last_hp = job.hp
            out.append(job)
        return out

    def work_left(self, now: float) -> float:
        """Service still owed by everything held, at `now` (after `advance(now)`)."""
        s = self.in_service
        return ((s.left(now) if s is not None else 0.0)
                + sum(j.work for j in self.waiting[0]) + sum(j.work for j in self.waiting[1]))

    def last_end(self) -> float:
        """When the server empties if nothing more arrives (it never idles while it holds
        work, whatever the order)."""
        s = self.in_service
        if s is None:
            return self.clock
        return s.end + sum(j.work for j in self.waiting[0]) + sum(j.work for j in self.waiting[1])

    def busy_s(self, now: float) -> float:
        """Server time so far, the stint in progress included (power)."""
        s = self.in_service
        ran = min(now, s.end) - s.start if s is not None and s.start < now else 0.0
        return self.busy_done + ran
