"""cbench-style controller benchmark: our os-ken app beside a minimal learning switch.

Why: every packet-in costs the Python controller about a millisecond (docs/architecture.md), and a
cluster change must reach the switch quickly, so we want both numbers measured here,
side by side with a yardstick, in one run:

1. Reactive path. Fake OpenFlow 1.3 switches (asyncio sockets, a minimal struct
   encoder/decoder below) connect to the controller, do the handshake (HELLO,
   FEATURES, PORT_DESC, ECHO, BARRIER; FLOW_MOD/GROUP_MOD accepted silently) and send
   ARP requests for the service address (sender MAC/IP varied) as PACKET_INs. Our
   controller answers each with a PACKET_OUT carrying the ARP reply; the baseline
   (`scripts/bench_apps/simple_switch_13.py`) learns MACs and answers each with a
   FLOW_MOD + PACKET_OUT. A reply is matched to its request by the requester's MAC
   (ARP target of a reply, ARP sender of a forwarded request). Latency mode: one
   outstanding PACKET_IN per switch; throughput mode: a window of N per switch.
2. Rule updates. OFN leave/join registrations (`register`, from controller.app) against our
   controller connected to a fake switch (which answers barriers) and, if root and
   Open vSwitch are there, to a userspace OVS bridge; round trip on the client side
   and the controller's own `latency_ms` (event to barrier reply).

    .venv/bin/python scripts/bench_controller.py [--duration 4] [--switches 4] [--window 32]

Frames: the ARP requests go to the service MAC as unicast (the baseline learns that
MAC from one gratuitous ARP first), so that both controllers see the same frames and
the baseline installs a flow for each; our controller ignores the Ethernet destination.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bootstrap  # noqa: E402  (first run: set-up; outside .venv: re-run inside it)

bootstrap.bootstrap(needs_network_stack=False, extras="")

from controller.fabric import Fabric  # noqa: E402
from controller.registration import register  # noqa: E402
from fogsdn.scenario import Role, load_scenario  # noqa: E402
from topologies.fog_star import fabric_of, fog_star_graph  # noqa: E402

SCENARIO = ROOT / "scenarios" / "default.yaml"
BASELINE_APP = "scripts.bench_apps.simple_switch_13"
CONTROLLERS: tuple[tuple[str, str | None], ...] = (("ours", None), ("baseline", BASELINE_APP))
OVS_BRIDGE = "fzbench0"
START_TIMEOUT_S = 20.0
PROBE_TIMEOUT_S = 0.5
DRAIN_TIMEOUT_S = 2.0
UPDATE_WARMUP = 10  # unmeasured registrations before each rule-update series
MAX_SWITCHES = 255  # the switch index is one byte of the requester MAC

# -- OpenFlow 1.3 wire format (only what a fake switch needs) ----------------------------
OFP_VERSION = 4
HEADER = struct.Struct("!BBHI")
T_HELLO, T_ERROR, T_ECHO_REQUEST, T_ECHO_REPLY = 0, 1, 2, 3
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


def _msg(mtype: int, xid: int, body: bytes = b"") -> bytes:
    return HEADER.pack(OFP_VERSION, mtype, HEADER.size + len(body), xid) + body


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def _arp_frame(dst: bytes, src: bytes, op: int, sha: bytes, spa: bytes, tha: bytes,
               tpa: bytes) -> bytes:
    return dst + src + ETH_ARP.to_bytes(2, "big") + ARP.pack(1, 0x0800, 6, 4, op, sha, spa,
                                                             tha, tpa)


def packet_in(xid: int, in_port: int, frame: bytes) -> bytes:
    """An OFPT_PACKET_IN (no buffer, table-miss) carrying a whole frame."""
    body = (PACKET_IN_HEAD.pack(OFP_NO_BUFFER, len(frame), 0, 0, 0)
            + MATCH_IN_PORT.pack(1, 12, OXM_IN_PORT, in_port) + b"\x00\x00" + frame)
    return _msg(T_PACKET_IN, xid, body)


def requester_of(packet_out: bytes | bytearray, off: int = 0) -> bytes | None:
    """The requester's MAC named by a PACKET_OUT's ARP frame, the key replies match on."""
    actions_len = int.from_bytes(packet_out[off + 16:off + 18], "big")
    data = off + 24 + actions_len
    if packet_out[data + 12:data + 14] != b"\x08\x06":
        return None
    op = int.from_bytes(packet_out[data + 20:data + 22], "big")
    start = data + 32 if op == 2 else data + 22  # reply: target; request: sender
    return bytes(packet_out[start:start + 6])


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no samples."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))]


# -- fake switches ------------------------------------------------------------------------
class Tally:
    """What one benchmark phase saw, shared by all its fake switches.

    Shared because a controller may answer on another switch's connection (ours does
    with several switches: see `misrouted`), and a reply must still count once.
    """

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

    def __init__(self, index: int, ports: Sequence[int], in_port: int, learn_port: int,
                 fabric: Fabric, tally: Tally, switches: list[FakeSwitch]) -> None:
        self.index = index
        self.dpid = 0xFB00 + index + 1
        self.ports = tuple(ports)
        self.in_port = in_port
        self.learn_port = learn_port
        self.fabric = fabric
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
        vip_mac = _mac(fabric.vip_mac)
        self.vip_ip = socket.inet_aton(fabric.vip)
        self.template = bytearray(packet_in(0, in_port, _arp_frame(
            vip_mac, bytes(6), 1, bytes(6), bytes(4), bytes(6), self.vip_ip)))

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(_msg(T_HELLO, self._next_xid()))

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
                out.append(_msg(T_ECHO_REPLY, xid, bytes(buf[off + 8:off + length])))
            elif mtype == T_BARRIER_REQUEST:
                out.append(_msg(T_BARRIER_REPLY, xid))
            elif mtype == T_FEATURES_REQUEST:
                out.append(_msg(T_FEATURES_REPLY, xid,
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
        return _msg(T_MULTIPART_REPLY, xid, struct.pack("!HH4x", MP_PORT_DESC, 0) + ports)

    def requester(self, seq: int) -> bytes:
        return bytes([0x02, self.index]) + seq.to_bytes(4, "big")

    def send_packet_ins(self, n: int) -> list[bytes]:
        """Send n ARP requests for the service address, each from a new requester."""
        if self.transport is None or n <= 0:
            return []
        msgs, keys = [], []
        tmpl, f = self.template, PI_FRAME_OFFSET
        now = time.perf_counter()
        for _ in range(n):
            self.seq += 1
            mac = self.requester(self.seq)
            ip = bytes([10, 128 + (self.index & 0x3F), (self.seq >> 8) & 0xFF,
                        1 + self.seq % 254])
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
        vip_mac = _mac(self.fabric.vip_mac)
        frame = _arp_frame(b"\xff" * 6, vip_mac, 2, vip_mac, self.vip_ip, b"\xff" * 6,
                           self.vip_ip)
        self.transport.write(packet_in(self._next_xid(), self.learn_port, frame))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


async def _connect(sw: FakeSwitch, port: int, timeout: float) -> None:
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


async def _probe(sw: FakeSwitch, timeout: float = START_TIMEOUT_S) -> None:
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


@dataclass(frozen=True)
class PhaseResult:
    controller: str
    mode: str
    switches: int
    window: int
    sent: int
    answered: int
    lost: int
    misrouted: int
    flow_mods: int
    measured_s: float
    responses_per_s: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    gen_cpu: float  # this process's CPU share while measuring (1.0: the generator saturated)
    ctl_cpu: float  # the controller's CPU share while measuring (NaN: unknown)


def _cpu_s(pid: int | None) -> float:
    """CPU seconds used so far by a process (Linux /proc), NaN if unknown."""
    if pid is None:
        return math.nan
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return math.nan


async def _phase(controller: str, mode: str, switches: list[FakeSwitch], tally: Tally,
                 window: int, duration_s: float, warmup_s: float,
                 limit: int | None, ctl_pid: int | None) -> PhaseResult:
    """One mode: keep `window` packet-ins outstanding per switch; measure after warm-up."""
    tally.reset()
    tally.limit = limit
    flow_mods0 = sum(sw.received[T_FLOW_MOD] for sw in switches)
    for sw in switches:
        sw.sent = 0
    tally.replenish = True
    t0 = time.perf_counter()
    tally.t_measure = t0 + warmup_s
    for sw in switches:
        sw.send_packet_ins(window if limit is None else min(window, limit))
    if limit is None:
        await asyncio.sleep(warmup_s)
        gen0, ctl0, w0 = time.process_time(), _cpu_s(ctl_pid), time.perf_counter()
        await asyncio.sleep(duration_s)
    else:
        gen0, ctl0, w0 = time.process_time(), _cpu_s(ctl_pid), time.perf_counter()
        total, deadline = limit * len(switches), t0 + warmup_s + duration_s
        while (tally.sent < total or tally.outstanding) and time.perf_counter() < deadline:
            await asyncio.sleep(0.002)
    t_stop = time.perf_counter()
    tally.t_stop = t_stop
    wall = max(t_stop - w0, 1e-9)
    gen_cpu, ctl_cpu = (time.process_time() - gen0) / wall, (_cpu_s(ctl_pid) - ctl0) / wall
    tally.replenish = False
    deadline = t_stop + DRAIN_TIMEOUT_S
    while tally.outstanding and time.perf_counter() < deadline:
        await asyncio.sleep(0.002)
    lost = len(tally.outstanding)
    tally.outstanding.clear()
    measured = max(t_stop - tally.t_measure, 1e-9)
    lat = tally.latencies_ms
    return PhaseResult(
        controller, mode, len(switches), window, tally.sent, tally.answered, lost,
        tally.misrouted, sum(sw.received[T_FLOW_MOD] for sw in switches) - flow_mods0,
        measured, tally.in_window / measured, percentile(lat, 50), percentile(lat, 99),
        sum(lat) / len(lat) if lat else math.nan, gen_cpu, ctl_cpu)


async def bench_packet_ins(port: int, fabric: Fabric, controller: str, switches: int,
                           modes: Sequence[tuple[str, int]], duration_s: float,
                           warmup_s: float, limit: int | None = None,
                           ctl_pid: int | None = None) -> list[PhaseResult]:
    """Connect `switches` fake switches to the controller on `port`, run each (mode, window)."""
    if not 1 <= switches <= MAX_SWITCHES:
        raise ValueError(f"switches: 1..{MAX_SWITCHES}, got {switches}")
    tally = Tally()
    ports = sorted(h.port for h in fabric.hosts)
    in_port = fabric.clients()[0].port
    learn_port = fabric.workers()[0].port
    fleet: list[FakeSwitch] = []
    fleet.extend(FakeSwitch(i, ports, in_port, learn_port, fabric, tally, fleet)
                 for i in range(switches))
    try:
        for sw in fleet:
            await _connect(sw, port, START_TIMEOUT_S)
        await asyncio.wait_for(asyncio.gather(*(sw.handshaken.wait() for sw in fleet)),
                               START_TIMEOUT_S)
        for sw in fleet:
            await _probe(sw)  # the datapath is in MAIN_DISPATCHER and the app answers
            sw.send_learn_seed()
            await _probe(sw)  # ... and has processed the seed (same connection, in order)
        return [await _phase(controller, mode, fleet, tally, window, duration_s, warmup_s, limit,
                             ctl_pid)
                for mode, window in modes]
    finally:
        for sw in fleet:
            sw.close()


def run_packet_in_bench(port: int, fabric: Fabric, controller: str, switches: int,
                        modes: Sequence[tuple[str, int]], duration_s: float, warmup_s: float,
                        limit: int | None = None, ctl_pid: int | None = None
                        ) -> list[PhaseResult]:
    """Synchronous entry point of `bench_packet_ins`."""
    return asyncio.run(bench_packet_ins(port, fabric, controller, switches, modes, duration_s,
                                        warmup_s, limit, ctl_pid))


# -- rule updates ---------------------------------------------------------------------------
@dataclass(frozen=True)
class UpdateResult:
    target: str
    updates: int
    acked: int
    group_mods: int  # -1 where not observed (a real switch)
    rtt_p50_ms: float
    rtt_p99_ms: float
    latency_p50_ms: float
    latency_p99_ms: float
    errors: tuple[str, ...] = ()


def warm_up(registration: Path, node: str, count: int, available: bool = True) -> None:
    """Unmeasured leave/join pairs (the first ones after start-up are slower); ends as begun."""
    for _ in range((count + 1) // 2):
        register(registration, node, not available)
        register(registration, node, available)


def rule_updates(target: str, registration: Path, node: str, count: int,
                 start_available: bool = True) -> UpdateResult:
    """Alternate leave/join of `node` `count` times; each waits for the barrier reply."""
    up = not start_available
    rtts: list[float] = []
    lats: list[float] = []
    errors: list[str] = []
    acked = 0
    for _ in range(count):
        t0 = time.monotonic()
        reply = register(registration, node, up)
        rtts.append((time.monotonic() - t0) * 1000.0)
        if reply.get("installed") is True:
            acked += 1
        elif len(errors) < 5:
            errors.append(json.dumps(reply))
        if "latency_ms" in reply:
            lats.append(float(reply["latency_ms"]))
        up = not up
    return UpdateResult(target, count, acked, -1, percentile(rtts, 50), percentile(rtts, 99),
                        percentile(lats, 50), percentile(lats, 99), tuple(errors))


def _wait_file(path: Path, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"controller exited (rc {proc.returncode}) before {path.name}")
        if path.exists() and (text := path.read_text().strip()):
            return text
        time.sleep(0.02)
    raise TimeoutError(f"no {path.name} within {timeout:.0f} s")


async def _fake_rule_updates(ctl: ControllerRun, fabric: Fabric, node: str, count: int,
                             warmup: int) -> UpdateResult:
    tally = Tally()
    fleet: list[FakeSwitch] = []
    ports = sorted(h.port for h in fabric.hosts)
    sw = FakeSwitch(0, ports, fabric.clients()[0].port, fabric.workers()[0].port, fabric,
                    tally, fleet)
    fleet.append(sw)
    ctl.ready.unlink(missing_ok=True)  # a ready file from an earlier switch would lie
    try:
        await _connect(sw, ctl.port, START_TIMEOUT_S)
        ready = await asyncio.to_thread(_wait_file, ctl.ready, ctl.proc, START_TIMEOUT_S)
        if ready != "ready":
            raise RuntimeError(f"controller: {ready}")
        await asyncio.to_thread(warm_up, ctl.registration, node, warmup)
        g0 = sw.received[T_GROUP_MOD]
        res = await asyncio.to_thread(rule_updates, "fake switch", ctl.registration, node,
                                      count)
        return UpdateResult(**{**asdict(res), "group_mods": sw.received[T_GROUP_MOD] - g0})
    finally:
        sw.close()


def run_fake_rule_updates(ctl: ControllerRun, fabric: Fabric, node: str, count: int,
                          warmup: int = 0) -> UpdateResult:
    """Rule updates against our controller driving one fake switch."""
    return asyncio.run(_fake_rule_updates(ctl, fabric, node, count, warmup))


def _ovs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ovs-vsctl", "--timeout=10", *args], capture_output=True, text=True)


def ovs_unusable() -> str | None:
    """Why a real OVS bridge cannot be used here, or None."""
    if shutil.which("ovs-vsctl") is None:
        return "ovs-vsctl not found"
    if os.geteuid() != 0:
        return "not root"
    if _ovs("show").returncode != 0:
        return "ovs-vsctl show failed (ovsdb-server/ovs-vswitchd not running?)"
    if _ovs("br-exists", OVS_BRIDGE).returncode == 0:
        return f"bridge {OVS_BRIDGE} already exists (another benchmark running?)"
    return None


def ovs_rule_updates(workdir: Path, fabric: Fabric, node: str, count: int,
                     warmup: int = 0) -> UpdateResult:
    """Rule updates against our controller driving a userspace OVS bridge (removed after)."""
    with running_controller(workdir, "ours-ovs", fabric) as ctl:
        try:
            r = _ovs("add-br", OVS_BRIDGE, "--", "set", "bridge", OVS_BRIDGE,
                     "datapath_type=netdev", "protocols=OpenFlow13", "fail-mode=secure",
                     "--", "set-controller", OVS_BRIDGE, f"tcp:127.0.0.1:{ctl.port}")
            if r.returncode != 0:
                raise RuntimeError(f"ovs-vsctl add-br: {r.stderr.strip()}")
            ready = _wait_file(ctl.ready, ctl.proc, START_TIMEOUT_S)
            if ready != "ready":
                raise RuntimeError(f"controller: {ready}")
            warm_up(ctl.registration, node, warmup)
            res = rule_updates("real OVS", ctl.registration, node, count)
        finally:
            _ovs("--if-exists", "del-br", OVS_BRIDGE)
        of_errors = [ln for ln in ctl.events.read_text().splitlines() if '"of_error"' in ln]
        if of_errors:
            res = UpdateResult(**{**asdict(res), "errors": (*res.errors, *of_errors[:3])})
        return res


# -- controller processes -------------------------------------------------------------------
@dataclass(frozen=True)
class ControllerRun:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    registration: Path
    ready: Path
    events: Path
    log: Path


def bench_fabric() -> tuple[Fabric, str]:
    """The default scenario's fog star (ports 1..n) and the OFN that leaves and joins."""
    sc = load_scenario(SCENARIO)
    ofn = next(n.name for n in sc.nodes if n.role is Role.OFN)
    return fabric_of(fog_star_graph(sc)), ofn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started, by its PID: terminate, then kill."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(3.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(3.0)


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


@contextmanager
def running_controller(workdir: Path, name: str, fabric: Fabric,
                       app: str | None = None) -> Iterator[ControllerRun]:
    """Start `controller.main` (our app, or `app`) on a free port; always stop it after."""
    d = workdir / name
    d.mkdir(parents=True, exist_ok=True)
    events, ready, registration = d / "events.jsonl", d / "ready", d / "reg.sock"
    conf = {  # what runner/emulate.py's _start_controller writes
        "fabric": fabric.to_dict(),
        "scenario": str(SCENARIO),
        "available": {h.name: True for h in fabric.workers()},
        "events": str(events),
        "ready": str(ready),
        "registration": str(registration),
    }
    (d / "controller.json").write_text(json.dumps(conf, indent=1))
    port = _free_port()
    cmd = [sys.executable, "-m", "controller.main", "--port", str(port)]
    if app is not None:
        cmd += ["--app", app]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1",
               FOGSDN_CONTROLLER_CONFIG=str(d / "controller.json"))
    log_path = d / "controller.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    run = ControllerRun(name, port, proc, registration, ready, events, log_path)
    try:
        yield run
    except BaseException:
        if tail := _tail(log_path):
            print(f"--- {name} controller log (tail) ---\n{tail}", file=sys.stderr)
        raise
    finally:
        _stop(proc)


# -- report ---------------------------------------------------------------------------------
def _f(x: float, nd: int = 2) -> str:
    return "-" if math.isnan(x) else f"{x:.{nd}f}"


def format_report(phases: Sequence[PhaseResult], updates: Sequence[UpdateResult],
                  skipped: Sequence[str]) -> str:
    lines = ["Reactive path (PACKET_IN -> PACKET_OUT), fake OpenFlow 1.3 switches",
             f"{'controller':<10} {'mode':<11} {'sw':>3} {'win':>4} {'sent':>7} {'answered':>8} "
             f"{'lost':>5} {'misrouted':>9} {'flow_mods':>9} {'resp/s':>9} {'p50 ms':>7} "
             f"{'p99 ms':>7} {'gen cpu':>7} {'ctl cpu':>7}"]
    for r in phases:
        lines.append(f"{r.controller:<10} {r.mode:<11} {r.switches:>3} {r.window:>4} "
                     f"{r.sent:>7} {r.answered:>8} {r.lost:>5} {r.misrouted:>9} "
                     f"{r.flow_mods:>9} {r.responses_per_s:>9.0f} {_f(r.p50_ms):>7} "
                     f"{_f(r.p99_ms):>7} {_f(r.gen_cpu):>7} {_f(r.ctl_cpu):>7}")
    by = {(r.controller, r.mode): r for r in phases}
    for mode in dict.fromkeys(r.mode for r in phases):
        o, b = by.get(("ours", mode)), by.get(("baseline", mode))
        if o and b:
            rate = o.responses_per_s / max(b.responses_per_s, 1e-9)
            lines.append(f"ratio ours/baseline, {mode}: resp/s x{rate:.2f}, "
                         f"p50 x{o.p50_ms / b.p50_ms:.2f}, p99 x{o.p99_ms / b.p99_ms:.2f}")
    if updates:
        lines += ["", "Rule update (OFN leave/join registration -> barrier reply), our controller",
                  f"{'target':<12} {'updates':>7} {'acked':>6} {'group_mods':>10} "
                  f"{'rtt p50':>8} {'rtt p99':>8} {'lat p50':>8} {'lat p99':>8}  (ms)"]
        for u in updates:
            gm = "-" if u.group_mods < 0 else str(u.group_mods)
            lines.append(f"{u.target:<12} {u.updates:>7} {u.acked:>6} {gm:>10} "
                         f"{_f(u.rtt_p50_ms):>8} {_f(u.rtt_p99_ms):>8} "
                         f"{_f(u.latency_p50_ms):>8} {_f(u.latency_p99_ms):>8}")
            lines += [f"  error: {e}" for e in u.errors]
    lines += [f"skipped: {s}" for s in skipped]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=4.0,
                    help="measured seconds per controller and mode (default 4)")
    ap.add_argument("--warmup", type=float, default=0.5,
                    help="unmeasured seconds before each mode (default 0.5)")
    ap.add_argument("--switches", type=int, default=4, help="fake switches (default 4)")
    ap.add_argument("--window", type=int, default=32,
                    help="outstanding PACKET_INs per switch in throughput mode (default 32)")
    ap.add_argument("--updates", type=int, default=200,
                    help="leave/join registrations per rule-update target (default 200)")
    ap.add_argument("--no-ovs", action="store_true", help="skip the real OVS bridge")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    a = ap.parse_args(argv)
    if not 1 <= a.switches <= MAX_SWITCHES or a.window < 1 or a.duration <= 0:
        ap.error(f"need 1 <= --switches <= {MAX_SWITCHES}, --window >= 1, --duration > 0")

    cmdline = shlex.join([sys.executable, *sys.argv]) if argv is None else shlex.join(argv)
    print(f"command: {cmdline}", flush=True)
    fabric, ofn = bench_fabric()
    modes = [("latency", 1), ("throughput", a.window)]
    phases: list[PhaseResult] = []
    updates: list[UpdateResult] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fzbench-") as tmp:
        work = Path(tmp)
        for name, app in CONTROLLERS:
            print(f"packet-ins: {name} ...", flush=True)
            with running_controller(work, name, fabric, app) as ctl:
                phases += run_packet_in_bench(ctl.port, fabric, name, a.switches, modes,
                                              a.duration, a.warmup, None, ctl.proc.pid)
        print("rule updates: fake switch ...", flush=True)
        with running_controller(work, "ours-updates", fabric) as ctl:
            updates.append(run_fake_rule_updates(ctl, fabric, ofn, a.updates, UPDATE_WARMUP))
        why = "--no-ovs" if a.no_ovs else ovs_unusable()
        if why is None:
            print(f"rule updates: real OVS bridge {OVS_BRIDGE} ...", flush=True)
            updates.append(ovs_rule_updates(work, fabric, ofn, a.updates, UPDATE_WARMUP))
        else:
            skipped.append(f"rule updates on real OVS: {why}")
    print()
    print(format_report(phases, updates, skipped))
    if a.json:
        a.json.write_text(json.dumps({"command": cmdline,
                                      "packet_in": [asdict(r) for r in phases],
                                      "rule_update": [asdict(u) for u in updates],
                                      "skipped": skipped}, indent=1))
    ok = all(r.lost == 0 for r in phases) and all(u.acked == u.updates for u in updates)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
