"""One emulated link's parameters and what they become for netem; which mechanism a run
uses. Pure: no I/O (`fogsdn.netem.linkem` applies them; docs/links.md).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Literal

Mechanism = Literal["netem", "userspace"]
PREFERENCES = ("auto", "netem", "userspace")


@dataclass(frozen=True)
class LinkParams:
    """One link's emulated properties, in real milliseconds (callers apply time_scale)."""

    delay_ms: float = 0.0  # one-way
    jitter_ms: float = 0.0
    loss: float = 0.0  # probability per frame, 0..1
    bw_mbps: float | None = None
    queue_pkts: int = 1000  # frames waiting for the rate limit (only with bw_mbps)

    def __post_init__(self) -> None:
        for name in ("delay_ms", "jitter_ms"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or v != v or v < 0 or v == float("inf"):
                raise ValueError(f"link {name} must be a finite number >= 0, got {v!r}")
        if not isinstance(self.loss, int | float) or not 0.0 <= self.loss <= 1.0:
            raise ValueError(f"link loss must be a probability in [0, 1], got {self.loss!r}")
        if self.bw_mbps is not None and (
            not isinstance(self.bw_mbps, int | float) or not 0 < self.bw_mbps < float("inf")
        ):
            raise ValueError(f"link bw_mbps must be > 0 (or absent), got {self.bw_mbps!r}")
        if isinstance(self.queue_pkts, bool) or not isinstance(self.queue_pkts, int) \
                or self.queue_pkts < 1:
            raise ValueError(f"link queue_pkts must be an integer >= 1, got {self.queue_pkts!r}")


def decide_mechanism(prefer: str, netem_ok: bool) -> Mechanism:
    """auto: netem where the kernel has it, else ours; an explicit choice is obeyed or fails."""
    if prefer not in PREFERENCES:
        raise ValueError(f"link mechanism must be one of {', '.join(PREFERENCES)}, got {prefer!r}")
    if prefer == "userspace":
        return "userspace"
    if prefer == "netem" and not netem_ok:
        raise ValueError("link mechanism 'netem' asked for, but this kernel has no netem qdisc")
    return "netem" if netem_ok else "userspace"


def _tc_time(ms: float) -> str:
    return f"{round(ms * 1000)}us"


def netem_qdisc_args(params: LinkParams) -> list[str]:
    """The netem options for one direction (after `tc qdisc add|change dev X root netem`)."""
    args = ["limit", str(params.queue_pkts), "delay", _tc_time(params.delay_ms)]
    if params.jitter_ms > 0:
        args += [_tc_time(params.jitter_ms)]
    args += ["loss", "random", f"{params.loss * 100:.6g}%"]
    if params.bw_mbps is not None:
        args += ["rate", f"{round(params.bw_mbps * 1000)}kbit"]
    return args


def link_seed(seed: int, link_id: str) -> int:
    """Each link's own loss/jitter stream, fixed by the run seed and the link's name."""
    return (seed * 1_000_003 + zlib.crc32(link_id.encode())) % 2**63
