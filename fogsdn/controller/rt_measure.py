"""Response time as the network sees it: each connection's client SYN to the server's FIN.

Pure, so the pairing is tested with fakes. A connection is named by its client end
(address, port) as the client sent it. Conntrack keeps that port, except when a client
reuses a port towards the same worker while the old connection's entry is still there:
it then gives the new connection another source port, and the server's segments carry
that one. Those are paired by their acknowledgment number, which counts from the
client's initial sequence number. The client's own leg to the switch is sampled from the
handshake (docs/learning.md, "Response time measured by the controller").
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from socket import inet_ntoa

from fogsdn.core.timebase import Timebase

# why one in 16: docs/learning.md; here (stdlib only) for the command line's defaults
RT_SAMPLE_DEFAULT = 16

__all__ = ["RT_COLUMNS", "ConnKey", "ConnectionTimer", "Measurement", "PathStats", "RtRecorder",
           "Segment", "TCP_ACK", "TCP_FIN", "TCP_SYN", "parse_segment"]

TCP_FIN, TCP_SYN, TCP_ACK = 0x01, 0x02, 0x10
ETH_IPV4, ETH_VLAN = 0x0800, 0x8100
IP_TCP = 6
SEQ_MOD = 1 << 32
# the most bytes a client sends before the server's FIN: a FIN whose acknowledgment lies
# within this of a SYN's sequence number answers it (a false match: about 1 in 65,000
# per open connection of that client, and only for a FIN no port matched)
REQUEST_BYTES_MAX = 1 << 16
ConnKey = tuple[str, int]  # the client end of a connection: (address, port)
# controller-rt.csv, one row per timed connection (docs/learning.md)
RT_COLUMNS = "client,client_port,node,t_syn,t_fin,rt_ms,span_ms,leg_ms\n"


@dataclass(frozen=True)
class Segment:
    """What the controller needs of one TCP segment's copy."""

    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    seq: int
    flags: int
    ack: int | None = None  # the acknowledgment number, where the copy had it

    @property
    def client_syn(self) -> bool:
        return bool(self.flags & TCP_SYN) and not self.flags & TCP_ACK

    @property
    def synack(self) -> bool:
        return self.flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK

    @property
    def pure_ack(self) -> bool:
        """An ACK with no SYN, FIN, RST or PSH (the handshake's last segment)."""
        return self.flags & 0x1F == TCP_ACK

    @property
    def fin(self) -> bool:
        return bool(self.flags & TCP_FIN)


def parse_segment(data: bytes) -> Segment | None:
    """An Ethernet/IPv4/TCP frame's segment, None if it is not one or is cut short.
    Hand-parsed: os-ken's parser costs several times more, twice per request."""
    off = 14
    if len(data) < off:
        return None
    (eth_type,) = struct.unpack_from("!H", data, 12)
    if eth_type == ETH_VLAN and len(data) >= 18:
        (eth_type,) = struct.unpack_from("!H", data, 16)
        off = 18
    if eth_type != ETH_IPV4 or len(data) < off + 20 or data[off] >> 4 != 4:
        return None
    ihl = (data[off] & 0x0F) * 4
    if data[off + 9] != IP_TCP or ihl < 20:
        return None
    src, dst = inet_ntoa(data[off + 12:off + 16]), inet_ntoa(data[off + 16:off + 20])
    t = off + ihl
    if len(data) < t + 14:
        return None
    sport, dport, seq, ack = struct.unpack_from("!HHII", data, t)
    return Segment(src, sport, dst, dport, seq, data[t + 13], ack)


@dataclass(frozen=True)
class Measurement:
    """One connection's response time as the network saw it: SYN to the server's FIN."""

    client_ip: str
    client_port: int
    node: str
    t_syn: float  # the controller's clock (time.monotonic(), seconds)
    t_fin: float
    rt_ms: float  # model ms: span_ms + leg_ms, the client's response time
    span_ms: float = 0.0  # SYN to FIN at the switch
    leg_ms: float = 0.0  # the client's round trip to the switch (this connection's, or recent)


@dataclass
class _Open:
    seq: int
    t: float
    node: str | None
    t_synack: float | None = None
    leg: float | None = None  # seconds, from this connection's handshake


@dataclass
class ConnectionTimer:
    """Pairs each connection's first SYN with its server's first FIN.

    `ms_real`: real seconds per model ms. `max_open_s`: how long an open connection or
    an unpaired FIN is kept.
    """

    ms_real: float
    max_open_s: float = 30.0
    leg_window: int = 50  # leg samples kept per client
    open: dict[ConnKey, _Open] = field(default_factory=dict)
    legs: dict[str, deque[float]] = field(default_factory=dict)  # client -> recent legs (s)
    _early_fins: dict[ConnKey, tuple[float, str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("syn", "syn_retransmitted", "fin", "paired", "paired_by_ack", "fin_unmatched",
         "abandoned", "legs", "no_leg"), 0))

    def syn(self, key: ConnKey, seq: int, t: float, node: str | None = None) -> Measurement | None:
        """A client's SYN at `t` (`node`: where a per-request policy sent it); a
        measurement only when its FIN was handled first. A retransmission keeps the first
        stamp; a new sequence number on the same port abandons the old connection."""
        self.counts["syn"] += 1
        held = self.open.get(key)
        if held is not None and held.seq == seq:
            self.counts["syn_retransmitted"] += 1
            held.t = min(held.t, t)
            held.node = held.node or node
            return None
        if held is not None:
            self.counts["abandoned"] += 1  # the port was reused: the old one never ended
        early = self._early_fins.get(key)
        if early is not None and t <= early[0] <= t + self.max_open_s:
            del self._early_fins[key]
            return self._paired(key, t, early[0], early[1])
        self.open[key] = _Open(seq, t, node)
        return None

    def _answered_by(self, key: ConnKey, ack: int | None, most: int) -> ConnKey | None:
        """The open connection of `key`'s client whose SYN a server segment acknowledging
        `ack` answers (`most`: how many bytes past the SYN it may acknowledge), when the
        segment's port matched none: conntrack gave the connection another port."""
        if ack is None:
            return None
        for k, o in self.open.items():
            if k[0] == key[0] and (ack - o.seq - 1) % SEQ_MOD <= most:
                return k
        return None

    def synack(self, key: ConnKey, t: float, ack: int | None = None) -> None:
        """The server's SYN-ACK passed the switch toward the client at `t` (the first one)."""
        held = self.open.get(key)
        if held is None:
            found = self._answered_by(key, ack, 0)
            held = self.open[found] if found is not None else None
        if held is not None and held.t_synack is None and t >= held.t:
            held.t_synack = t

    def ack(self, key: ConnKey, t: float) -> None:
        """A pure ACK from the client at `t`: the first after the SYN-ACK samples its leg."""
        held = self.open.get(key)
        if held is None or held.t_synack is None or held.leg is not None or t < held.t_synack:
            return
        held.leg = t - held.t_synack
        self.counts["legs"] += 1
        self.legs.setdefault(key[0], deque(maxlen=self.leg_window)).append(held.leg)

    def client_leg_s(self, client_ip: str) -> float | None:
        """The mean of the client's recent leg samples (seconds), None before the first."""
        r = self.legs.get(client_ip)
        return sum(r) / len(r) if r else None

    def fin(self, key: ConnKey, t: float, node: str | None = None,
            ack: int | None = None) -> Measurement | None:
        """A server's FIN stamped at `t`, from `node` (its source address's node); `ack`,
        its acknowledgment number, pairs it where conntrack changed the client's port."""
        self.counts["fin"] += 1
        held = self.open.get(key)
        if held is None:
            found = self._answered_by(key, ack, REQUEST_BYTES_MAX)
            if found is not None and self.open[found].t <= t:
                self.counts["paired_by_ack"] += 1
                key, held = found, self.open[found]
        if held is None or held.t > t:
            self.counts["fin_unmatched"] += 1
            self._early_fins[key] = (t, node or "")
            return None
        del self.open[key]
        return self._paired(key, held.t, t, node or held.node or "", held.leg)

    def _paired(self, key: ConnKey, t_syn: float, t_fin: float, node: str,
                leg: float | None = None) -> Measurement:
        self.counts["paired"] += 1
        if leg is None:
            leg = self.client_leg_s(key[0])
        if leg is None:
            self.counts["no_leg"] += 1
            leg = 0.0
        span_ms, leg_ms = (t_fin - t_syn) / self.ms_real, leg / self.ms_real
        return Measurement(key[0], key[1], node, t_syn, t_fin, span_ms + leg_ms, span_ms, leg_ms)

    def expire(self, now: float) -> int:
        """Forget what is older than max_open_s; returns how many connections were abandoned."""
        cut = now - self.max_open_s
        stale = [k for k, o in self.open.items() if o.t < cut]
        for k in stale:
            del self.open[k]
        self.counts["abandoned"] += len(stale)
        for k in [k for k, (t, _) in self._early_fins.items() if t < cut]:
            del self._early_fins[k]
        return len(stale)


@dataclass
class PathStats:
    """Per node, the mean of the last `window` measured response times (O(1): the
    simulator asks it per request)."""

    window: int = 100
    _recent: dict[str, deque[float]] = field(default_factory=dict)
    _recent_sum: dict[str, float] = field(default_factory=dict)

    def add(self, node: str, rt_ms: float) -> None:
        r = self._recent.setdefault(node, deque())
        r.append(rt_ms)
        total = self._recent_sum.get(node, 0.0) + rt_ms
        if len(r) > self.window:
            total -= r.popleft()
        self._recent_sum[node] = total

    def recent(self, node: str) -> float | None:
        r = self._recent.get(node)
        return self._recent_sum[node] / len(r) if r else None


@dataclass
class RtRecorder:
    """The controller's side (no lock: one packet-in at a time): segments to the timer,
    pairings into `stats` and CSV rows. `mask`: `pipeline.sample_mask` (0: time all).
    """

    timer: ConnectionTimer
    vip: str
    node_of_ip: Mapping[str, str]
    mask: int = 0
    stats: PathStats = field(default_factory=PathStats)
    expire_every_s: float = 1.0
    last_expiry: float = 0.0  # when stale entries were last expired (the timer's clock)

    @classmethod
    def of_run(cls, time_scale: float, timeout_ms: float, vip: str,
               node_of_ip: Mapping[str, str], mask: int, now: float) -> RtRecorder:
        """A live run's recorder; a connection open past 2x the timeout, or 2 s, is abandoned."""
        timebase = Timebase(time_scale)
        timer = ConnectionTimer(timebase.real_s_per_model_ms,
                                max_open_s=max(2.0, 2 * timebase.real_s(timeout_ms)))
        return cls(timer, vip, node_of_ip, mask, last_expiry=now)

    def sampled(self, client_port: int) -> bool:
        """Whether the connection from `client_port` is one of those timed."""
        return not client_port & self.mask

    def observe(self, seg: Segment, t: float, node: str | None = None) -> Measurement | None:
        """One copied segment stamped at `t`; the measurement when it completes a pair."""
        m: Measurement | None = None
        if seg.client_syn and seg.dst_ip == self.vip:
            m = self.timer.syn((seg.src_ip, seg.src_port), seg.seq, t, node)
        elif seg.fin:
            m = self.timer.fin((seg.dst_ip, seg.dst_port), t, self.node_of_ip.get(seg.src_ip),
                               seg.ack)
        elif seg.synack:
            self.timer.synack((seg.dst_ip, seg.dst_port), t, seg.ack)
        elif seg.pure_ack:
            self.timer.ack((seg.src_ip, seg.src_port), t)
        if m is not None:
            self.stats.add(m.node, m.rt_ms)
        return m

    def expire_due(self, t: float) -> bool:
        """Expire the timer's stale entries at most once `expire_every_s`; True when it did."""
        if t - self.last_expiry <= self.expire_every_s:
            return False
        self.last_expiry = t
        self.timer.expire(t)
        return True

    def row(self, m: Measurement) -> str:
        """`m` as a line of controller-rt.csv (RT_COLUMNS), the client named where known."""
        client = self.node_of_ip.get(m.client_ip, m.client_ip)
        return (f"{client},{m.client_port},{m.node},{m.t_syn:.6f},{m.t_fin:.6f},"
                f"{m.rt_ms:.6f},{m.span_ms:.6f},{m.leg_ms:.6f}\n")
