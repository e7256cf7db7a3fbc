"""A worker's load report to the controller: one message each time what the node holds
changes (an arrival, admitted or blocked; a completion; a drop or handoff), so that a
per-request policy decides on the count at the decision instant, not on a round trip to
every worker (docs/policies.md, "What a per-request policy sees live").

Each report carries the whole count, not a delta: a lost or late message is corrected by
the next one, and `seq` keeps a late one from overriding a newer one. It also carries the
scheduled ends of the earliest requests held (an emulated node knows them: service is
drawn at admission), so that the controller can tell what the node will hold when a
connection it decides now reaches it. The messages go over a Unix SOCK_SEQPACKET
connection: datagrams are whole, and a burst is not cut at `net.unix.max_dgram_qlen`
(10 by default), which limits unconnected datagram sockets.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

LOAD_SOCKET_NAME = "controller-load.sock"  # beside the controller's registration socket
# the same reports as lines on a stream: what ssh forwards from workers on other servers
LOAD_STREAM_NAME = "controller-load-stream.sock"
MAX_REPORT_BYTES = 1024
MAX_ENDS = 8  # scheduled ends sent: the departures a connection's set-up could overlap


class LoadReportError(ValueError):
    """A datagram that is not a load report."""


class LineFramer:
    """Load reports off a byte stream, one per line (a stream has no message bounds): the
    whole lines received so far; a line longer than a report can be is an error, and
    what follows it up to the next newline is skipped, so the next report is whole."""

    def __init__(self) -> None:
        self._buf = b""
        self._skipping = False

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        """The whole lines in `data` and before it, and how many overlong ones were
        dropped."""
        lines = (self._buf + data).split(b"\n")
        self._buf = lines.pop()
        dropped = 0
        out: list[bytes] = []
        for line in lines:
            if self._skipping:
                self._skipping = False
                continue
            if len(line) > MAX_REPORT_BYTES:
                dropped += 1
            elif line:
                out.append(line)
        if len(self._buf) > MAX_REPORT_BYTES:
            self._buf, self._skipping = b"", True
            dropped += 1
        return out, dropped


@dataclass(frozen=True)
class LoadReport:
    node: str
    seq: int  # per worker, increasing with every snapshot it takes
    in_system: int  # what the node holds after the change (waiting plus in service)
    busy_until: float  # monotonic s at which the work it holds ends (<= now: idle)
    # the client (ip, port) whose request line just arrived, when (monotonic s), and what
    # the node held just before it: the state the request met, against which a decision's
    # view is judged
    arrival: tuple[str, int] | None = None
    before: int | None = None
    arrived_at: float | None = None
    # monotonic s at which the earliest held requests will leave, ascending (at most
    # MAX_ENDS; empty where not known ahead, e.g. real CPU work)
    ends: tuple[float, ...] = ()

    def encode(self) -> bytes:
        d: dict[str, object] = {"n": self.node, "s": self.seq, "q": self.in_system,
                                "b": round(self.busy_until, 6)}
        if self.arrival is not None:
            d["a"] = [self.arrival[0], self.arrival[1]]
            d["q0"] = self.before
            d["ta"] = None if self.arrived_at is None else round(self.arrived_at, 6)
        if self.ends:
            d["e"] = [round(e, 6) for e in self.ends]
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> LoadReport:
        """The report in `data`; LoadReportError naming what is wrong otherwise."""
        if len(data) > MAX_REPORT_BYTES:
            raise LoadReportError(f"load report of {len(data)} bytes (at most "
                                  f"{MAX_REPORT_BYTES})")
        try:
            d = json.loads(data)
            node, seq, held, busy = d["n"], d["s"], d["q"], d["b"]
            arrival, before, at, ends = d.get("a"), d.get("q0"), d.get("ta"), d.get("e", [])
        except (ValueError, TypeError, KeyError) as err:
            raise LoadReportError(f"load report not a JSON object with n, s, q, b: {err}"
                                  ) from None
        ints = [seq, held] + ([] if before is None else [before])
        times = [busy] + ([] if at is None else [at]) + (ends if isinstance(ends, list) else [])
        if (not isinstance(node, str) or any(type(v) is not int or v < 0 for v in ints)
                or not isinstance(ends, list) or len(ends) > MAX_ENDS
                or any(type(v) not in (int, float) or not math.isfinite(v) for v in times)):
            raise LoadReportError("load report fields out of type or range: "
                                  f"n={node!r} s={seq!r} q={held!r} b={busy!r} q0={before!r} "
                                  f"ta={at!r} e={ends!r}"[:300])
        key = None
        if arrival is not None:
            if (not isinstance(arrival, list) or len(arrival) != 2
                    or not isinstance(arrival[0], str) or type(arrival[1]) is not int):
                raise LoadReportError(f"load report arrival {arrival!r} is not [ip, port]")
            if before is None:
                raise LoadReportError("load report has an arrival without q0")
            key = (arrival[0], arrival[1])
        return cls(node, seq, held, float(busy), key, before,
                   None if at is None else float(at), tuple(float(e) for e in ends))
