"""Link emulation, pure parts (no root): parameters, mechanism choice, netem options, the
relay's control-block encoding, and that the relay compiles."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from fogsdn.netem.link_params import LinkParams, decide_mechanism, link_seed, netem_qdisc_args
from fogsdn.netem.linkem import choose_mechanism, make_shaper
from fogsdn.netem.relay_control import (
    CTL_SIZE,
    ControlBlock,
    decode_counters,
    encode_params,
    relay_binary,
)


@pytest.mark.parametrize("field, value", [
    ("delay_ms", -1.0), ("jitter_ms", -0.1), ("delay_ms", float("nan")),
    ("delay_ms", float("inf")), ("loss", -0.01), ("loss", 1.5), ("bw_mbps", 0.0),
    ("bw_mbps", -5.0), ("queue_pkts", 0), ("queue_pkts", 2.5),
])
def test_bad_link_params_name_the_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        LinkParams(**{field: value})


def test_good_link_params() -> None:
    p = LinkParams(delay_ms=5, jitter_ms=1, loss=1.0, bw_mbps=100)
    assert (p.delay_ms, p.loss, p.bw_mbps, p.queue_pkts) == (5, 1.0, 100, 1000)
    assert LinkParams() == LinkParams(0.0, 0.0, 0.0, None)


@pytest.mark.parametrize("prefer, netem_ok, expected", [
    ("auto", True, "netem"), ("auto", False, "userspace"),
    ("userspace", True, "userspace"), ("userspace", False, "userspace"),
    ("netem", True, "netem"),
])
def test_decide_mechanism(prefer: str, netem_ok: bool, expected: str) -> None:
    assert decide_mechanism(prefer, netem_ok) == expected


def test_netem_asked_for_but_missing_or_unknown_choice() -> None:
    with pytest.raises(ValueError, match="no netem"):
        decide_mechanism("netem", False)
    with pytest.raises(ValueError, match="mechanism"):
        choose_mechanism("ns3")
    with pytest.raises(ValueError, match="mechanism"):
        make_shaper("tbf", Path("/nonexistent"))


def test_netem_qdisc_args() -> None:
    assert netem_qdisc_args(LinkParams(delay_ms=5)) == [
        "limit", "1000", "delay", "5000us", "loss", "random", "0%"]
    assert netem_qdisc_args(LinkParams(delay_ms=0.25, jitter_ms=0.1, loss=0.015, bw_mbps=100,
                                       queue_pkts=50)) == [
        "limit", "50", "delay", "250us", "100us", "loss", "random", "1.5%",
        "rate", "100000kbit"]


def test_link_seed_is_stable_and_per_link() -> None:
    assert link_seed(7, "s1-s2") == link_seed(7, "s1-s2")
    assert len({link_seed(7, "s1-s2"), link_seed(7, "s2-s3"), link_seed(8, "s1-s2")}) == 3


def test_encode_params_units() -> None:
    delay, jitter, loss, rate, queue, up = struct.unpack(
        "<qqQQQQ", encode_params(LinkParams(delay_ms=1.5, jitter_ms=0.2, loss=0.25,
                                            bw_mbps=10, queue_pkts=7), up=False))
    assert (delay, jitter, loss, rate, queue, up) == (1_500_000, 200_000, 2**30, 10**7, 7, 0)
    # loss 1 must drop every frame: the relay compares a 32-bit draw < threshold
    assert struct.unpack_from("<Q", encode_params(LinkParams(loss=1.0), True), 16)[0] == 2**32
    assert struct.unpack_from("<Q", encode_params(LinkParams(), True), 24)[0] == 0  # no rate


def test_control_block_roundtrip(tmp_path: Path) -> None:
    ctl = ControlBlock(tmp_path / "l.ctl", LinkParams(delay_ms=2))
    raw = (tmp_path / "l.ctl").read_bytes()
    assert len(raw) == CTL_SIZE
    version = struct.unpack_from("<Q", raw, 8)[0]
    assert version % 2 == 0 and version > 0  # seqlock left even
    ctl.write(LinkParams(delay_ms=3), up=False)
    raw = (tmp_path / "l.ctl").read_bytes()
    assert struct.unpack_from("<Q", raw, 8)[0] == version + 2
    assert struct.unpack_from("<q", raw, 16)[0] == 3_000_000
    assert struct.unpack_from("<Q", raw, 56)[0] == 0  # down
    assert not ctl.ready
    ctl.close()
    assert not (tmp_path / "l.ctl").exists()


def test_decode_counters() -> None:
    block = bytearray(CTL_SIZE)
    struct.pack_into("<16Q", block, 128, *range(1, 17))
    c = decode_counters(bytes(block))
    assert c["ab_rx_packets"] == 1 and c["ab_tx_bytes"] == 4 and c["ba_rx_packets"] == 9
    assert c["ab_dropped"] == 5 + 6 + 7 + 8
    assert c["ba_dropped_error"] == 16 and c["ba_dropped"] == 13 + 14 + 15 + 16


def test_set_up_on_a_bare_machine_installs_what_the_relay_includes() -> None:
    """A fresh Debian root has no C headers (gcc only recommends them): the set-up's apt
    step must bring the package of each one the relay includes."""
    import re

    from bootstrap import missing_apt_packages

    from fogsdn.netem.relay_control import RELAY_SOURCE

    headers = re.findall(r"^#include <([^>]+)>", RELAY_SOURCE.read_text(), re.MULTILINE)
    assert "arpa/inet.h" in headers and "linux/if_packet.h" in headers
    needed = {"linux-libc-dev" if h.startswith("linux/") else "libc6-dev" for h in headers}
    bare = missing_apt_packages(which=lambda exe: None, exists=lambda path: False)
    assert needed | {"gcc"} <= set(bare), bare


def test_relay_compiles_and_checks_its_arguments() -> None:
    binary = relay_binary()
    assert binary.exists()
    r = subprocess.run([str(binary)], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr
