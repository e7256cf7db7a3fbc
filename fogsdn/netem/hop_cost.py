"""The emulator's own cost per hop, and its deduction from the links' configured delays.

Every hop of an emulated path (a link element and the Open vSwitch bridge behind it) costs
real time of its own, before any configured delay. Where that cost is a sizeable part of a
link's configured delay (seed 002a's links at time scale 24), paths that differ by a few
hops differ by the emulator, not by the scenario. So the run measures the cost per hop on
a chain of bridges (`fogsdn.netem.hop_probe`) and each link element delays by its
configured delay less that cost; a link configured below the cost keeps 0 and is named.
Pure: no I/O (docs/links.md, "The cost of a hop").
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NotRequired, TypedDict

from fogsdn.netem.link_params import LinkParams

HopCostMode = Literal["deduct", "keep"]
_PING_TIME = re.compile(r"time=([0-9.]+) ms")


def ping_rtts_ms(text: str) -> list[float]:
    """The round trips (ms) in iputils ping's output, one per reply line."""
    return [float(m) for m in _PING_TIME.findall(text)]


class HopCostError(ValueError):
    """The probes cannot give a cost per hop (too few hop counts, or no replies)."""


class HopCostDict(TypedDict):
    """`HopCost.to_dict` (summary.json `links.hop_cost`), real ms; hop counts as strings."""

    per_hop_real_ms: float
    rtt_real_ms_p50_by_hops: dict[str, float]
    replies_by_hops: dict[str, int]


class DeductionDict(TypedDict):
    """`Deduction.to_dict` (summary.json `links.hop_cost`): model ms, by link id."""

    per_hop_model_ms: float
    applied_model_ms: dict[str, float]
    below_floor_model_ms: dict[str, float]
    from_peer_tables_model_ms: NotRequired[dict[str, float]]


@dataclass(frozen=True)
class HopCost:
    """One-way real ms that one more hop adds, fitted over chains of several hop counts."""

    per_hop_ms: float
    rtt_ms_p50: dict[int, float]  # hops -> median round trip over that chain
    replies: dict[int, int]  # hops -> probes answered

    def to_dict(self) -> HopCostDict:
        return {"per_hop_real_ms": round(self.per_hop_ms, 5),
                "rtt_real_ms_p50_by_hops": {str(h): round(v, 5)
                                            for h, v in sorted(self.rtt_ms_p50.items())},
                "replies_by_hops": {str(h): n for h, n in sorted(self.replies.items())}}


def fit_hop_cost(rtts_by_hops: Mapping[int, Sequence[float]]) -> HopCost:
    """The least-squares slope of the median round trip over the hop count, halved (one
    way); the median, because a probe that waited for a core is the machine, not a hop."""
    medians: dict[int, float] = {}
    replies: dict[int, int] = {}
    for hops, rtts in rtts_by_hops.items():
        good = [r for r in rtts if math.isfinite(r) and r >= 0]
        if isinstance(hops, bool) or not isinstance(hops, int) or hops < 0:
            raise HopCostError(f"hop count must be an integer >= 0, got {hops!r}")
        if not good:
            raise HopCostError(f"no probe answered over the chain of {hops} hops")
        medians[hops], replies[hops] = statistics.median(good), len(good)
    if len(medians) < 2:
        raise HopCostError(f"a cost per hop needs chains of two hop counts at least, "
                           f"got {sorted(medians)}")
    xs, ys = list(medians), [medians[h] for h in medians]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)
    return HopCost(per_hop_ms=max(0.0, slope / 2.0), rtt_ms_p50=medians, replies=replies)


@dataclass(frozen=True)
class Deduction:
    """What each shaped link delays by once the cost per hop is deducted, and which links
    are configured below that cost (their paths run slower than configured)."""

    per_hop_ms: float
    applied_ms: dict[str, float]  # link id -> real one-way ms the element now adds
    below_floor: dict[str, float] = field(default_factory=dict)  # link id -> real ms short
    # link id -> real ms its per-peer table takes off each entry (`deduct_peers`)
    from_tables: dict[str, float] = field(default_factory=dict)

    def params(self, link_id: str, params: LinkParams) -> LinkParams:
        """A link's element parameters with its deducted delay."""
        return LinkParams(delay_ms=self.applied_ms.get(link_id, params.delay_ms),
                          jitter_ms=params.jitter_ms, loss=params.loss,
                          bw_mbps=params.bw_mbps, queue_pkts=params.queue_pkts)

    def to_dict(self, time_scale: float) -> DeductionDict:
        """For summary.json: model ms, as a scenario states its links."""
        out: DeductionDict = {
            "per_hop_model_ms": round(self.per_hop_ms / time_scale, 6),
            "applied_model_ms": {k: round(v / time_scale, 6)
                                 for k, v in sorted(self.applied_ms.items())},
            "below_floor_model_ms": {k: round(v / time_scale, 6)
                                     for k, v in sorted(self.below_floor.items())}}
        if self.from_tables:
            out["from_peer_tables_model_ms"] = {k: round(v / time_scale, 6)
                                                for k, v in sorted(self.from_tables.items())}
        return out


def deduct(configured_ms: Mapping[str, float], per_hop_ms: float,
           tabled: Collection[str] = ()) -> Deduction:
    """Each link's configured real one-way delay less the cost per hop, at least 0. A
    link configured with no delay keeps none and is not named: it asked for no delay. A
    `tabled` link (its element has a per-peer table) configured below the cost is not
    short: its table takes the rest (`from_tables`)."""
    if not math.isfinite(per_hop_ms) or per_hop_ms < 0:
        raise HopCostError(f"cost per hop must be a finite number >= 0, got {per_hop_ms!r}")
    applied: dict[str, float] = {}
    short: dict[str, float] = {}
    tables: dict[str, float] = {}
    for link_id, ms in configured_ms.items():
        applied[link_id] = max(0.0, ms - per_hop_ms)
        if 0 < ms < per_hop_ms:
            (tables if link_id in tabled else short)[link_id] = per_hop_ms - ms
    return Deduction(per_hop_ms, applied, short, tables)


def deduct_peers(table_ms: Mapping[str, float], base_ms: float, per_hop_ms: float
                 ) -> dict[str, float]:
    """A per-peer table's entries (real one-way ms; each frame pays its peer's entry on
    top of the element's own delay `base_ms`) less the part of the cost per hop that the
    element's own delay could not absorb, each at least 0: a frame through the element
    then takes its configured time, as on a link without a table."""
    if not math.isfinite(per_hop_ms) or per_hop_ms < 0:
        raise HopCostError(f"cost per hop must be a finite number >= 0, got {per_hop_ms!r}")
    rest = max(0.0, per_hop_ms - max(base_ms, 0.0))
    return {peer: max(0.0, ms - rest) for peer, ms in table_ms.items()}


def floor_warning(deduction: Deduction, time_scale: float, show: int = 4) -> str | None:
    """One line naming the links configured below the cost per hop, or None."""
    if not deduction.below_floor:
        return None
    names = sorted(deduction.below_floor)
    listed = ", ".join(names[:show]) + (f" and {len(names) - show} more" if len(names) > show
                                        else "")
    return (f"{len(names)} link(s) configured below the emulator's cost per hop "
            f"({deduction.per_hop_ms / time_scale:.4g} model ms at time scale "
            f"{time_scale:g}): {listed}; paths through them run slower than configured "
            "(raise time_scale)")


class TunnelCostDict(TypedDict):
    """`TunnelCost.to_dict`: one pair of servers' underlay, real ms."""

    servers: list[str]
    sent: int
    replies: int
    rtt_real_ms_min: float
    rtt_real_ms_p50: float
    rtt_real_ms_max: float
    one_way_real_ms: float
    throughput_mbps: float | None


@dataclass(frozen=True)
class TunnelCost:
    """What a cross-server link adds before its configured delay: the round trips of
    pings between the two servers over their LAN, which every tunnelled frame crosses
    once each way (VXLAN's own encapsulation adds microseconds beside it)."""

    servers: tuple[str, str]
    sent: int
    rtts_ms: tuple[float, ...]
    throughput_mbps: float | None = None  # one TCP stream over the LAN; None: not measured

    def __post_init__(self) -> None:
        if not self.rtts_ms:
            raise HopCostError(f"servers {self.servers[0]} and {self.servers[1]}: none of "
                               f"{self.sent} pings over their LAN was answered")
        if any(not math.isfinite(x) or x < 0 for x in self.rtts_ms):
            raise HopCostError(f"servers {self.servers[0]} and {self.servers[1]}: a round "
                               "trip that is not a finite number >= 0")
        mbps = self.throughput_mbps
        if mbps is not None and (not math.isfinite(mbps) or mbps <= 0):
            raise HopCostError(f"servers {self.servers[0]} and {self.servers[1]}: throughput "
                               f"{mbps} Mb/s is not a finite number > 0")

    @property
    def one_way_ms(self) -> float:
        """Half the median round trip: what one crossing of the LAN adds."""
        return statistics.median(self.rtts_ms) / 2.0

    def to_dict(self) -> TunnelCostDict:
        return {"servers": list(self.servers), "sent": self.sent,
                "replies": len(self.rtts_ms),
                "rtt_real_ms_min": round(min(self.rtts_ms), 5),
                "rtt_real_ms_p50": round(statistics.median(self.rtts_ms), 5),
                "rtt_real_ms_max": round(max(self.rtts_ms), 5),
                "one_way_real_ms": round(self.one_way_ms, 5),
                "throughput_mbps": None if self.throughput_mbps is None
                else round(self.throughput_mbps, 1)}
