"""The userspace link relay (`linkem_relay.c`) from Python: building it, and the shared
control block through which a running relay takes new parameters and reports its
counters (layout: struct ctl in linkem_relay.c). `fogsdn.netem.linkem`'s
`UserspaceShaper` runs it.
"""

from __future__ import annotations

import mmap
import os
import shutil
import socket
import struct
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fogsdn.netem.link_params import LinkParams

DIRECTIONS = ("ab", "ba")  # a->b (enters at intf_a, leaves at intf_b) and b->a
COUNTERS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "dropped_loss",
            "dropped_down", "dropped_queue", "dropped_error")

ROOT = Path(__file__).resolve().parents[2]
RELAY_SOURCE = Path(__file__).resolve().parent / "linkem_relay.c"
RELAY_BINARY = ROOT / "build" / "linkem" / "linkem_relay"  # build/ is git-ignored


# ---- the relay's shared control block (layout: struct ctl in linkem_relay.c) ----

CTL_MAGIC = 0x666F67736C6E6B31
CTL_SIZE = 512
_OFF_VERSION, _OFF_PARAMS, _OFF_STOP, _OFF_READY, _OFF_COUNTERS = 8, 16, 64, 72, 128
_OFF_TABLE_CAP, _OFF_TABLE_LEN, _OFF_TABLE_VERSION = 80, 88, 96
# one entry of the per-peer table after CTL_SIZE: the address's four wire bytes read as
# one native word (struct table_entry), and the peer's one-way delay
TABLE_ENTRY = np.dtype([("ip", "<u4"), ("pad", "<u4"), ("delay_ns", "<i8")])
_PARAMS = struct.Struct("<qqQQQQ")  # delay_ns, jitter_ns, loss_x32, rate_bps, queue_pkts, up


def encode_params(params: LinkParams, up: bool) -> bytes:
    """The parameter words the relay reads, in its units (ns, loss as a 32-bit threshold)."""
    rate = 0 if params.bw_mbps is None else max(1, round(params.bw_mbps * 1e6))
    return _PARAMS.pack(round(params.delay_ms * 1e6), round(params.jitter_ms * 1e6),
                        round(params.loss * 2**32), rate, params.queue_pkts, int(up))


def encode_peer_table(delays_ms: Mapping[str, float]) -> bytes:
    """A per-peer table (IPv4 address -> one-way real ms) as the relay reads it."""
    t = np.zeros(len(delays_ms), dtype=TABLE_ENTRY)
    if delays_ms:
        t["ip"] = np.frombuffer(b"".join(socket.inet_aton(ip) for ip in delays_ms), "<u4")
        ms = np.fromiter(delays_ms.values(), dtype=np.float64, count=len(delays_ms))
        if not np.all(np.isfinite(ms) & (ms >= 0)):
            raise ValueError("peer delays must be finite numbers >= 0")
        t["delay_ns"] = np.rint(ms * 1e6).astype(np.int64)
    return t.tobytes()


def decode_counters(block: bytes) -> dict[str, int]:
    """Counters section of a control block -> {"ab_tx_packets": n, ...} plus dropped totals."""
    values = struct.unpack_from(f"<{2 * len(COUNTERS)}Q", block, _OFF_COUNTERS)
    out: dict[str, int] = {}
    for i, d in enumerate(DIRECTIONS):
        for j, name in enumerate(COUNTERS):
            out[f"{d}_{name}"] = values[i * len(COUNTERS) + j]
        out[f"{d}_dropped"] = sum(out[f"{d}_{n}"] for n in COUNTERS if n.startswith("dropped"))
    return out


class ControlBlock:
    """The mmapped file through which Python sets a running relay's parameters (seqlock)
    and reads its counters; a write takes effect for the next frame the relay receives."""

    def __init__(self, path: Path, params: LinkParams, up: bool = True, peers: int = 0
                 ) -> None:
        """`peers` > 0: room for a per-peer table of that many addresses after the block."""
        self.path = path
        self.peers = peers
        size = CTL_SIZE + peers * TABLE_ENTRY.itemsize
        with open(path, "wb") as f:
            f.write(bytes(size))
        self._fd = os.open(path, os.O_RDWR)
        self._mm = mmap.mmap(self._fd, size)
        struct.pack_into("<Q", self._mm, 0, CTL_MAGIC)
        struct.pack_into("<Q", self._mm, _OFF_TABLE_CAP, peers)
        self.write(params, up)

    def write_peers(self, delays_ms: Mapping[str, float]) -> None:
        """Replace the whole per-peer table (address -> real ms), one slice under its own
        seqlock: the relay applies it to the next frame it receives."""
        if len(delays_ms) > self.peers:
            raise ValueError(f"{len(delays_ms)} peers; this control block holds {self.peers}")
        table = encode_peer_table(delays_ms)
        (version,) = struct.unpack_from("<Q", self._mm, _OFF_TABLE_VERSION)
        struct.pack_into("<Q", self._mm, _OFF_TABLE_VERSION, version + 1)
        self._mm[CTL_SIZE:CTL_SIZE + len(table)] = table
        struct.pack_into("<Q", self._mm, _OFF_TABLE_LEN, len(delays_ms))
        struct.pack_into("<Q", self._mm, _OFF_TABLE_VERSION, version + 2)

    def write(self, params: LinkParams, up: bool) -> None:
        (version,) = struct.unpack_from("<Q", self._mm, _OFF_VERSION)
        struct.pack_into("<Q", self._mm, _OFF_VERSION, version + 1)  # odd: writing
        self._mm[_OFF_PARAMS:_OFF_PARAMS + _PARAMS.size] = encode_params(params, up)
        struct.pack_into("<Q", self._mm, _OFF_VERSION, version + 2)

    def request_stop(self) -> None:
        struct.pack_into("<Q", self._mm, _OFF_STOP, 1)

    @property
    def ready(self) -> bool:
        return bool(struct.unpack_from("<Q", self._mm, _OFF_READY)[0])

    def counters(self) -> dict[str, int]:
        return decode_counters(bytes(self._mm))

    def close(self) -> None:
        self._mm.close()
        os.close(self._fd)
        self.path.unlink(missing_ok=True)


# ---- building the relay ----

def relay_binary() -> Path:
    """The compiled relay, built from source on first use or when the source is newer."""
    src_mtime = RELAY_SOURCE.stat().st_mtime
    if RELAY_BINARY.exists() and RELAY_BINARY.stat().st_mtime >= src_mtime:
        return RELAY_BINARY
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise RuntimeError("the userspace link relay needs a C compiler (gcc or cc) to build "
                           f"{RELAY_SOURCE.name}; install gcc (Debian: apt-get install gcc)")
    RELAY_BINARY.parent.mkdir(parents=True, exist_ok=True)
    tmp = RELAY_BINARY.with_name(f".{RELAY_BINARY.name}.{os.getpid()}")
    r = subprocess.run([cc, "-O2", "-Wall", "-o", str(tmp), str(RELAY_SOURCE)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building the link relay failed ({cc}): {r.stderr.strip()[:500]}")
    tmp.replace(RELAY_BINARY)  # atomic: concurrent builders each install a whole binary
    return RELAY_BINARY
