"""Which live connections a per-request learner is waiting to hear about (pure).

A policy that `learns_per_request` (seed 002a's `path_cpn`) is told each request's
response time through `Policy.answered`, by every engine. The simulator knows it at the
request's end; live, the controller learns it when the connection's FIN pairs with its
SYN (`fogsdn.controller.rt_measure`). The book keeps each timed connection's decision
until then, and answers a connection that never completes with the client's timeout, as
the simulator does for a request that timed out: each decision is answered exactly once.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from fogsdn.models.network_power import PathOption

ConnKey = tuple[str, int]  # the client end of a connection: (address, port)
MAX_OPEN = 65536  # decisions kept at once; past it the oldest is answered as timed out


@dataclass(frozen=True)
class Answer:
    """What `Policy.answered` is told of one connection."""

    client: str
    node: str
    path: PathOption | None
    response_ms: float  # model ms: measured, or the timeout
    timed_out: bool


@dataclass
class _Waiting:
    client: str
    node: str
    path: PathOption | None
    opened: float  # the controller's clock, real s


class AnswerBook:
    """Decisions awaiting their response time, in the order they were made."""

    def __init__(self, timeout_ms: float, wait_s: float, max_open: int = MAX_OPEN) -> None:
        """`timeout_ms`: the client's timeout (model ms), what an unanswered decision is
        told; `wait_s`: how long (real s) a connection may stay open before it counts as
        timed out (longer than the timeout, so a late FIN is not cut short)."""
        if not timeout_ms > 0 or not wait_s > 0 or max_open < 1:
            raise ValueError(f"AnswerBook: timeout_ms > 0, wait_s > 0 and max_open >= 1, got "
                             f"{timeout_ms!r}, {wait_s!r}, {max_open!r}")
        self.timeout_ms = timeout_ms
        self.wait_s = wait_s
        self.max_open = max_open
        self._open: OrderedDict[ConnKey, _Waiting] = OrderedDict()
        self.measured_count = 0
        self.timed_out_count = 0

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, key: ConnKey, client: str, node: str, path: PathOption | None,
               t: float) -> list[Answer]:
        """One decided connection; what had to be answered to make room (or a reused
        client port's earlier connection), as timed out."""
        out = []
        if key in self._open:  # the port's earlier connection never completed
            out.append(self._timed_out(self._open.pop(key)))
        while len(self._open) >= self.max_open:
            out.append(self._timed_out(self._open.popitem(last=False)[1]))
        self._open[key] = _Waiting(client, node, path, t)
        return out

    def measured(self, key: ConnKey, response_ms: float) -> Answer | None:
        """The connection's measured response time (model ms); None when it is not one
        of the book's (not timed, or already answered)."""
        w = self._open.pop(key, None)
        if w is None:
            return None
        self.measured_count += 1
        return Answer(w.client, w.node, w.path, response_ms, False)

    def expired(self, t: float) -> list[Answer]:
        """Connections open longer than `wait_s` at `t`, answered as timed out."""
        out = []
        while self._open:
            key, w = next(iter(self._open.items()))
            if t - w.opened <= self.wait_s:
                break
            del self._open[key]
            out.append(self._timed_out(w))
        return out

    def clear(self) -> None:
        """Forget every waiting decision (a policy swap: they were the old policy's)."""
        self._open.clear()

    def _timed_out(self, w: _Waiting) -> Answer:
        self.timed_out_count += 1
        return Answer(w.client, w.node, w.path, self.timeout_ms, True)


__all__ = ["MAX_OPEN", "Answer", "AnswerBook", "ConnKey"]
