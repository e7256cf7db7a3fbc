"""The controller benchmark's core, at a tiny size, against fake switches only (no root).

Why: the benchmark's figures mean something only if every PACKET_IN it sends is
answered and every rule update acknowledged; no timing is asserted (2 shared cores).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import tools.bench.controller as bc
import tools.rigs.fake_switch as fs
from fogsdn.core.fabric import Fabric

PACKET_INS = 50
UPDATES = 20


@pytest.fixture(scope="module")
def fabric() -> tuple[Fabric, str]:
    return bc.bench_fabric()


@pytest.mark.parametrize(("name", "app"), bc.CONTROLLERS)
def test_every_packet_in_is_answered(tmp_path: Path, fabric: tuple[Fabric, str], name: str,
                                     app: str | None) -> None:
    fab, _ = fabric
    with bc.running_controller(tmp_path, name, fab, app) as ctl:
        phases = bc.run_packet_in_bench(ctl.port, fab, name, 1, [("latency", 1),
                                                                 ("throughput", 8)],
                                        duration_s=20.0, warmup_s=0.0, limit=PACKET_INS)
    assert [p.mode for p in phases] == ["latency", "throughput"]
    for p in phases:
        assert (p.sent, p.answered, p.lost, p.misrouted) == (PACKET_INS, PACKET_INS, 0, 0)
        assert not math.isnan(p.p50_ms) and not math.isnan(p.p99_ms)
        # the baseline installs one flow per packet-in; ours answers with a packet-out only
        assert p.flow_mods == (PACKET_INS if app else 0)


def test_every_rule_update_is_acknowledged(tmp_path: Path,
                                           fabric: tuple[Fabric, str]) -> None:
    fab, ofn = fabric
    with bc.running_controller(tmp_path, "ours", fab) as ctl:
        res = bc.run_fake_rule_updates(ctl, fab, ofn, UPDATES)
    assert res.errors == ()
    assert (res.updates, res.acked) == (UPDATES, UPDATES)
    assert res.group_mods >= UPDATES  # every leave/join rewrote a select group
    assert not math.isnan(res.latency_p50_ms)  # the replies carried latency_ms


def test_packet_out_matching() -> None:
    """A reply is matched by the requester's MAC whichever way the controller answers."""
    me, vip_mac = bytes.fromhex("02000000002a"), bytes.fromhex("0200000000fa")
    ip, vip = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 250])
    for op, frame in ((2, fs.arp_frame(me, vip_mac, 2, vip_mac, vip, me, ip)),
                      (1, fs.arp_frame(vip_mac, me, 1, me, ip, bytes(6), vip))):
        out = fs.of_message(fs.T_PACKET_OUT, 7, bytes(16) + frame)  # 16-byte body head, no actions
        assert fs.requester_of(out) == me, op
    pi = fs.packet_in(1, 3, fs.arp_frame(vip_mac, me, 1, me, ip, bytes(6), vip))
    assert pi[fs.PI_FRAME_OFFSET + 6:fs.PI_FRAME_OFFSET + 12] == me
    assert bc.percentile([3.0, 1.0, 2.0], 50) == 2.0
