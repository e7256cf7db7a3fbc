"""The link relay's per-peer delay table: its encoding in the control block (pure),
and, live on two namespaces, that each peer gets its own delay, a new table applies
to the next frame, and a near peer's frames never wait behind a far one's. The live
tests need root; run them under the emulation lock."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fogsdn.netem.link_params import LinkParams
from fogsdn.netem.linkem import UserspaceShaper
from fogsdn.netem.relay_control import (
    CTL_SIZE,
    TABLE_ENTRY,
    ControlBlock,
    encode_peer_table,
)
from tools.rigs.linkem_testnet import Rig, namespace_rig

NEAR, FAR = "10.77.0.2", "10.77.0.3"  # two addresses of namespace B, behind one element


def decode_peer_table(block: bytes) -> dict[str, float]:
    """The table a control block holds now (address -> real ms), read as the relay reads
    it (struct ctl in linkem_relay.c: table_cap and table_len at bytes 80 and 88)."""
    cap, n = struct.unpack_from("<QQ", block, 80)
    t = np.frombuffer(block, dtype=TABLE_ENTRY, count=min(n, cap), offset=CTL_SIZE)
    return {socket.inet_ntoa(struct.pack("<I", int(e["ip"]))): int(e["delay_ns"]) / 1e6
            for e in t}


def test_table_encoding_is_the_relays_layout() -> None:
    raw = encode_peer_table({"10.0.1.2": 1.5, "10.0.0.101": 0.000001})
    t = np.frombuffer(raw, dtype=TABLE_ENTRY)
    assert TABLE_ENTRY.itemsize == 16 and len(raw) == 32
    # the four address bytes as on the wire, read as one little-endian word
    assert bytes(t["ip"][0].tobytes()) == bytes([10, 0, 1, 2])
    assert t["delay_ns"].tolist() == [1_500_000, 1]
    with pytest.raises(ValueError, match="finite"):
        encode_peer_table({"10.0.0.1": -1.0})


def test_control_block_table_roundtrip(tmp_path: Path) -> None:
    ctl = ControlBlock(tmp_path / "c.ctl", LinkParams(delay_ms=2.0), peers=3)
    try:
        assert (tmp_path / "c.ctl").stat().st_size == CTL_SIZE + 3 * TABLE_ENTRY.itemsize
        ctl.write_peers({"10.0.0.1": 4.0, "10.0.0.2": 0.25})
        ctl.write_peers({"10.0.0.2": 7.0})  # a whole new table replaces the old one
        block = (tmp_path / "c.ctl").read_bytes()
        assert decode_peer_table(block) == {"10.0.0.2": 7.0}
        assert int.from_bytes(block[96:104], "little") == 4  # its seqlock: two writes
        with pytest.raises(ValueError, match="holds 3"):
            ctl.write_peers({f"10.0.0.{i}": 1.0 for i in range(1, 5)})
    finally:
        ctl.close()


def test_a_block_without_table_keeps_the_old_size(tmp_path: Path) -> None:
    ctl = ControlBlock(tmp_path / "c.ctl", LinkParams())
    try:
        assert (tmp_path / "c.ctl").stat().st_size == CTL_SIZE
        assert decode_peer_table((tmp_path / "c.ctl").read_bytes()) == {}
    finally:
        ctl.close()


# -- live ----------------------------------------------------------------------------
@pytest.fixture
def two_peers(tmp_path: Path) -> Iterator[tuple[Rig, UserspaceShaper]]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with namespace_rig() as rig:
        subprocess.run(["ip", "-n", rig.ns_b, "addr", "add", f"{FAR}/24", "dev", "b0"],
                       check=True)
        shaper = UserspaceShaper(tmp_path, seed=3)
        try:
            yield rig, shaper
        finally:
            shaper.close()


def _ping(rig: Rig, target: str, count: int, interval_s: float) -> list[tuple[int, float]]:
    """(icmp_seq, RTT ms) of each reply, in the order the replies arrived."""
    r = subprocess.run(rig.exec_argv("a", ["chrt", "-f", "1", "ping", "-n", "-c", str(count),
                                           "-i", str(interval_s), "-W", "2", target]),
                       capture_output=True, text=True, timeout=60)
    return [(int(s), float(t)) for s, t in
            re.findall(r"icmp_seq=(\d+) ttl=\d+ time=([0-9.]+) ms", r.stdout)]


@pytest.mark.emulation
def test_each_peer_gets_its_own_delay_and_changes_apply(
        two_peers: tuple[Rig, UserspaceShaper]) -> None:
    rig, shaper = two_peers
    assert rig.intf_a and rig.intf_b
    shaper.attach("p", rig.intf_a, rig.intf_b, LinkParams(delay_ms=1.0), peers=8)
    shaper.update_peers("p", {NEAR: 2.0, FAR: 7.0})
    near = [t for _, t in _ping(rig, NEAR, 40, 0.01)]
    far = [t for _, t in _ping(rig, FAR, 40, 0.01)]
    assert len(near) == len(far) == 40
    # one way: the link's 1 ms plus the peer's; both directions pay both. Never less;
    # ping and the relay add up to ~0.5 ms on this machine kind (a bound of 1 ms)
    def about(rtts: list[float], configured: float) -> bool:
        return min(rtts) >= configured and float(np.median(rtts)) - configured <= 1.0

    assert about(near, 6.0), near
    assert about(far, 16.0), far
    shaper.update_peers("p", {NEAR: 0.5, FAR: 7.0})
    near = [t for _, t in _ping(rig, NEAR, 20, 0.01)]
    assert about(near, 3.0), near
    shaper.update_peers("p", {FAR: 7.0})  # a peer not in the table pays the link's alone
    near = [t for _, t in _ping(rig, NEAR, 20, 0.01)]
    assert about(near, 2.0), near


@pytest.mark.emulation
def test_a_near_peer_never_waits_behind_a_far_one(
        two_peers: tuple[Rig, UserspaceShaper]) -> None:
    rig, shaper = two_peers
    assert rig.intf_a and rig.intf_b
    shaper.attach("p", rig.intf_a, rig.intf_b, LinkParams(delay_ms=0.5), peers=8)
    shaper.update_peers("p", {NEAR: 0.5, FAR: 20.0})
    far: list[tuple[int, float]] = []
    t = threading.Thread(target=lambda: far.extend(_ping(rig, FAR, 200, 0.002)))
    t.start()  # the far peer's frames are always in flight (41 ms each round trip)
    near = _ping(rig, NEAR, 100, 0.003)
    t.join()
    # one FIFO per direction would hold each near frame behind the far frames before it
    # (some 40 ms); the first reply also waited for ARP (through the table too: 2 ms).
    # Scheduling adds a few ms to the odd reply, never the far peer's 20 ms per way. On a
    # quiet machine p90 is under 3.5 ms; a clean-clone CI run on a machine losing CPU to
    # its hypervisor measured 4.8, so the bound is the bug's signature, not the timing:
    # behind the far frames, nearly every near reply would take over 20 ms.
    rtts = [rtt for _, rtt in near[1:]]
    assert len(near) == 100 and max(rtts) < 20.0, near
    assert float(np.percentile(rtts, 90)) < 10.0, near
    assert len(far) == 200 and min(rtt for _, rtt in far) >= 41.0


@pytest.mark.emulation
def test_order_is_kept_per_peer_under_jitter(two_peers: tuple[Rig, UserspaceShaper]) -> None:
    rig, shaper = two_peers
    assert rig.intf_a and rig.intf_b
    shaper.attach("p", rig.intf_a, rig.intf_b, LinkParams(delay_ms=3.0, jitter_ms=2.5),
                  peers=8)
    shaper.update_peers("p", {NEAR: 1.0, FAR: 5.0})
    replies = _ping(rig, NEAR, 300, 0.001)  # 1 ms apart, jitter 5 ms wide: would reorder
    seqs = [s for s, _ in replies]
    assert len(seqs) == 300 and seqs == sorted(seqs)
