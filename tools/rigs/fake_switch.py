"""A minimal OpenFlow 1.3 switch, so that benchmarks and tests drive the controller
without Open vSwitch or root; each ARP PACKET_IN comes from a new requester MAC so that
every answer matches its request (docs/benchmarks.md, the controller benchmark).
"""

from __future__ import annotations

import asyncio
import math
import socket
import struct
import time
from collections import Counter

from fogsdn.core.fabric import Fabric

START_TIMEOUT_S = 20.0
PROBE_TIMEOUT_S = 0.5

# -- OpenFlow 1.3 wire format (only what a fake switch needs) ----------------------------
OFP_VERSION = 4
HEADER = struct.Struct("!BBHI")
T_HELLO, T_ECHO_REQUEST, T_ECHO_REPLY = 0, 2, 3
T_FEATURES_REQUEST, T_FEATURES_REPLY = 5, 6
T_PACKET_IN, T_PACKET_OUT, T_FLOW_MOD, T_GROUP_MOD = 10, 13, 14, 15
T_MULTIPART_REQUEST, T_MULTIPART_REPLY = 18, 19
T_BARRIER_REQUEST, T_BARRIER_REPLY = 20, 21
MP_PORT_DESC = 13
OFP_NO_BUFFER = 0xFFFFFFFF
OXM_IN_PORT = 0x80000004  # OFPXMC_OPENFLOW_BASIC, field IN_PORT, 4 bytes
PORT = struct.Struct("!I4x6s2x16sIIIIIIII")  # ofp_port, 64 bytes
FEATURES = struct.Struct("!QIBB2xII")
PACKET_IN_HEAD = struct.Struct("!IHBBQ")  # buffer_id, total_len, reason, table_id, cookie
MATCH_IN_PORT = struct.Struct("!HHII4x")  # OFPMT_OXM, length 12, in_port, pad to 8
ARP = struct.Struct("!HHBBH6s4s6s4s")
ETH_ARP = 0x0806
PI_FRAME_OFFSET = HEADER.size + PACKET_IN_HEAD.size + MATCH_IN_PORT.size + 2
PORT_FEATURES_10G = 1 << 6


def of_message(mtype: int, xid: int, body: bytes = b"") -> bytes:
    return HEADER.pack(OFP_VERSION, mtype, HEADER.size + len(body), xid) + body


def mac_bytes(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def arp_frame(dst: bytes, src: bytes, op: int, sha: bytes, spa: bytes, tha: bytes,
               tpa: bytes) -> bytes:
    return dst + src + ETH_ARP.to_bytes(2, "big") + ARP.pack(1, 0x0800, 6, 4, op, sha, spa,
                                                             tha, tpa)


def packet_in(xid: int, in_port: int, frame: bytes) -> bytes:
    """An OFPT_PACKET_IN (no buffer, table-miss) carrying a whole frame."""
    body = (PACKET_IN_HEAD.pack(OFP_NO_BUFFER, len(frame), 0, 0, 0)
            + MATCH_IN_PORT.pack(1, 12, OXM_IN_PORT, in_port) + b"\x00\x00" + frame)
    return of_message(T_PACKET_IN, xid, body)


def requester_of(packet_out: bytes | bytearray, off: int = 0) -> bytes | None:
    """The requester's MAC named by a PACKET_OUT's ARP frame, the key replies match on."""
    actions_len = int.from_bytes(packet_out[off + 16:off + 18], "big")
    data = off + 24 + actions_len
    if packet_out[data + 12:data + 14] != b"\x08\x06":
        return None
    op = int.from_bytes(packet_out[data + 20:data + 22], "big")
    start = data + 32 if op == 2 else data + 22  # reply: target; request: sender
    return bytes(packet_out[start:start + 6])


# -- fake switches ------------------------------------------------------------------------
class Tally:
    """What one benchmark phase saw, shared by all its fake switches: a controller may
    answer on another switch's connection (`misrouted`), and a reply counts once."""

    def __init__(self) -> None:
        self.outstanding: dict[bytes, tuple[float, FakeSwitch]] = {}
        self.replenish = False
        self.limit: int | None = None  # packet-ins per switch, None: until stopped
        self.reset()

    def reset(self) -> None:
        self.latencies_ms: list[float] = []
        self.sent = self.answered = self.misrouted = self.unmatched = 0
        self.in_window = 0
        self.t_measure = math.inf  # packet-ins sent from then on are measured
        self.t_stop = math.inf

    def answer(self, key: bytes | None, now: float, on: FakeSwitch) -> None:
        entry = self.outstanding.pop(key, None) if key is not None else None
        if entry is None:
            self.unmatched += 1
            return
        t_sent, origin = entry
        self.answered += 1
        if origin is not on:
            self.misrouted += 1
        if t_sent >= self.t_measure:
            self.latencies_ms.append((now - t_sent) * 1000.0)
        if self.t_measure <= now < self.t_stop:
            self.in_window += 1
        if self.replenish and (self.limit is None or origin.sent + origin.due < self.limit):
            origin.due += 1


class FakeSwitch(asyncio.Protocol):
    """A datapath that does the OpenFlow 1.3 handshake and sends ARP PACKET_INs."""

    def __init__(self, index: int, fabric: Fabric, tally: Tally,
                 switches: list[FakeSwitch]) -> None:
        self.index = index
        self.dpid = 0xFB00 + index + 1
        self.ports = tuple(sorted(h.port for h in fabric.hosts))
        self.learn_port = fabric.workers()[0].port  # where the service MAC is learnt
        self.tally = tally
        self.switches = switches  # all switches of the run: a reply may be due on another
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.received: Counter[int] = Counter()
        self.handshaken = asyncio.Event()
        self.lost = asyncio.Event()
        self.seq = 0
        self.sent = 0  # packet-ins of the current phase
        self.due = 0  # packet-ins to send after this read
        self.xid = 0
        self.vip_mac = mac_bytes(fabric.vip_mac)
        self.vip_ip = socket.inet_aton(fabric.vip)
        self.template = bytearray(packet_in(0, fabric.clients()[0].port, arp_frame(
            self.vip_mac, bytes(6), 1, bytes(6), bytes(4), bytes(6), self.vip_ip)))

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(of_message(T_HELLO, self._next_xid()))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        buf = self.buf
        buf += data
        off, out = 0, []
        while len(buf) - off >= HEADER.size:
            length = int.from_bytes(buf[off + 2:off + 4], "big")
            if length < HEADER.size or len(buf) - off < length:
                break
            mtype = buf[off + 1]
            xid = int.from_bytes(buf[off + 4:off + 8], "big")
            self.received[mtype] += 1
            if mtype == T_PACKET_OUT:
                self.tally.answer(requester_of(buf, off), now, self)
            elif mtype == T_ECHO_REQUEST:
                out.append(of_message(T_ECHO_REPLY, xid, bytes(buf[off + 8:off + length])))
            elif mtype == T_BARRIER_REQUEST:
                out.append(of_message(T_BARRIER_REPLY, xid))
            elif mtype == T_FEATURES_REQUEST:
                out.append(of_message(T_FEATURES_REPLY, xid,
                                FEATURES.pack(self.dpid, 256, 254, 0, 0x4F, 0)))
            elif mtype == T_MULTIPART_REQUEST:
                mp_type = int.from_bytes(buf[off + 8:off + 10], "big")
                if mp_type == MP_PORT_DESC:
                    out.append(self._port_desc(xid))
                    self.handshaken.set()
            off += length
        del buf[:off]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))
        for sw in self.switches:
            if sw.due:
                n, sw.due = sw.due, 0
                sw.send_packet_ins(n)

    # messages
    def _next_xid(self) -> int:
        self.xid = (self.xid + 1) & 0xFFFFFFFF
        return self.xid

    def _port_desc(self, xid: int) -> bytes:
        ports = b"".join(
            PORT.pack(p, bytes([0x02, 0xFE, self.index, 0, p >> 8, p & 0xFF]),
                      f"fk{self.index}-eth{p}".encode()[:15], 0, 0, PORT_FEATURES_10G,
                      0, 0, 0, 10_000_000, 10_000_000)
            for p in self.ports)
        return of_message(T_MULTIPART_REPLY, xid, struct.pack("!HH4x", MP_PORT_DESC, 0) + ports)

    def send_packet_ins(self, n: int) -> list[bytes]:
        """Send n ARP requests for the service address, each from a new requester."""
        if self.transport is None or n <= 0:
            return []
        msgs, keys = [], []
        tmpl, f = self.template, PI_FRAME_OFFSET
        now = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            mac = bytes([0x02, self.index]) + self.seq.to_bytes(4, "big")  # the requester
            ip = bytes([10, 128 + (self.index & 0x3F), (self.seq >> 8) & 0xFF, 1 + self.seq % 254])
            m = bytearray(tmpl)
            m[4:8] = self._next_xid().to_bytes(4, "big")
            m[f + 6:f + 12] = mac  # Ethernet source
            m[f + 22:f + 28] = mac  # ARP sender hardware address
            m[f + 28:f + 32] = ip  # ARP sender protocol address
            msgs.append(bytes(m))
            keys.append(mac)
            self.tally.outstanding[mac] = (now, self)
        self.sent += n
        self.tally.sent += n
        self.transport.write(b"".join(msgs))
        return keys

    def send_learn_seed(self) -> None:
        """A gratuitous ARP from the service MAC, so a learning switch knows its port."""
        if self.transport is None:
            return
        frame = arp_frame(b"\xff" * 6, self.vip_mac, 2, self.vip_mac, self.vip_ip,
                          b"\xff" * 6, self.vip_ip)
        self.transport.write(packet_in(self._next_xid(), self.learn_port, frame))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def fleet(fabric: Fabric, n: int) -> list[FakeSwitch]:
    """`n` fake switches on the fabric's ports, sharing one Tally."""
    tally = Tally()
    switches: list[FakeSwitch] = []
    switches.extend(FakeSwitch(i, fabric, tally, switches) for i in range(n))
    return switches


async def connect(sw: FakeSwitch, port: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + timeout
    while True:
        try:
            await loop.create_connection(lambda: sw, "127.0.0.1", port)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def probe(sw: FakeSwitch, timeout: float = START_TIMEOUT_S) -> None:
    """Send single packet-ins until one is answered: the app is handling this switch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        (key,) = sw.send_packet_ins(1)
        t_end = time.monotonic() + PROBE_TIMEOUT_S
        while time.monotonic() < t_end:
            if key not in sw.tally.outstanding:
                return
            if sw.lost.is_set():
                raise ConnectionError(f"switch {sw.index}: the controller closed the connection")
            await asyncio.sleep(0.005)
        sw.tally.outstanding.pop(key, None)
    raise TimeoutError(f"switch {sw.index}: no packet-in answered within {timeout:.0f} s")
