"""Link emulation: delay, jitter, loss, bandwidth and up/down on one link, changeable at run time.

Two mechanisms behind one interface (`LinkShaper`), chosen once per run: the kernel's
netem qdisc where the kernel has it, else our relay (`linkem_relay.c`, compiled on first
use). The glue puts an element with interfaces `intf_a` and `intf_b` between two nodes
and a shaper splices them; the semantics are in docs/links.md. The pure parts live in
`fogsdn.netem.link_params` and `fogsdn.netem.relay_control`; these are thin adapters.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from fogsdn.core.processes import proc_start_time
from fogsdn.netem.link_params import (
    LinkParams,
    Mechanism,
    decide_mechanism,
    link_seed,
    netem_qdisc_args,
)
from fogsdn.netem.relay_control import ControlBlock, relay_binary

_LINK_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


# ---- probing the kernel ----

def _in_netns(netns: str | None, argv: list[str]) -> list[str]:
    return argv if netns is None else ["ip", "netns", "exec", netns, *argv]


def _sh(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {(r.stderr or r.stdout).strip()}")
    return r


@functools.cache
def netem_available() -> bool:
    """Does this kernel have netem? Probed once on a veth pair in a throwaway netns."""
    if os.geteuid() != 0 or shutil.which("tc") is None:
        return False
    ns = f"fogsdn-netem-probe-{os.getpid()}"
    if _sh(["ip", "netns", "add", ns], check=False).returncode != 0:
        return False
    try:
        _sh(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        r = _sh(["tc", "-n", ns, "qdisc", "add", "dev", "p0", "root", "netem", "delay", "1ms"],
                check=False)
        return r.returncode == 0
    except RuntimeError:
        return False
    finally:
        _sh(["ip", "netns", "del", ns], check=False)


def choose_mechanism(prefer: str = "auto") -> Mechanism:
    """The mechanism for this run: netem if the kernel has it (auto), else our relay."""
    return decide_mechanism(prefer, prefer in ("auto", "netem") and netem_available())


# ---- the shapers ----

@dataclass
class Created:
    """What a shaper started and made, for fogsdn.live.cleanup's RunRecord."""

    pids: dict[str, tuple[int, int]] = field(default_factory=dict)  # label -> (pid, start)
    paths: list[str] = field(default_factory=list)


class LinkShaper(Protocol):
    mechanism: str

    def attach(self, link_id: str, intf_a: str, intf_b: str, params: LinkParams,
               netns_a: str | None = None, netns_b: str | None = None, peers: int = 0
               ) -> None: ...

    def update(self, link_id: str, params: LinkParams) -> None: ...

    def update_peers(self, link_id: str, delays_ms: Mapping[str, float]) -> None: ...

    def set_up(self, link_id: str, up: bool, carrier: bool = True) -> None: ...

    def stats(self, link_id: str) -> dict[str, int]: ...

    def created(self) -> Created: ...

    def processes(self) -> dict[str, subprocess.Popen[bytes]]: ...

    def close(self) -> None: ...


@dataclass
class _Link:
    intf_a: str
    intf_b: str
    netns_a: str | None
    netns_b: str | None
    params: LinkParams
    up: bool = True
    ctl: ControlBlock | None = None
    proc: subprocess.Popen[bytes] | None = None
    pid_start: tuple[int, int] | None = None
    parent_w: int | None = None
    log: Path | None = None


def _carrier(link: _Link, up: bool) -> None:
    """Take both element interfaces down (or up): the neighbours see carrier loss, as after
    a cable pull, so an OVS port on the other end reports PortStatus link-down."""
    state = "up" if up else "down"
    for intf, ns in ((link.intf_a, link.netns_a), (link.intf_b, link.netns_b)):
        _sh(_in_netns(ns, ["ip", "link", "set", "dev", intf, state]))


def _prepare_interface(intf: str, netns: str | None) -> None:
    """An element interface carries frames only: no IPv6 chatter of its own, no GRO
    (coalesced frames would be delayed, lost and counted as one)."""
    _sh(_in_netns(netns, ["sysctl", "-qw", f"net.ipv6.conf.{intf}.disable_ipv6=1"]), check=False)
    _sh(_in_netns(netns, ["ethtool", "-K", intf, "gro", "off"]), check=False)
    _sh(_in_netns(netns, ["ip", "link", "set", "dev", intf, "up"]))


class _AttachedLinks:
    """What every shaper keeps: its attached links by id, looked up with one error for an
    unknown id, and all detached (`_detach`, per mechanism) on close."""

    def __init__(self, state_dir: Path, seed: int) -> None:
        self.state_dir = Path(state_dir)
        self.seed = seed
        self._links: dict[str, _Link] = {}

    def _get(self, link_id: str) -> _Link:
        try:
            return self._links[link_id]
        except KeyError:
            raise ValueError(f"no attached link {link_id!r}") from None

    def _check_new(self, link_id: str) -> None:
        if not _LINK_ID.match(link_id):
            raise ValueError(f"link id must be 1-64 of [A-Za-z0-9_.:-], got {link_id!r}")
        if link_id in self._links:
            raise ValueError(f"link {link_id!r} is already attached")

    def _detach(self, link_id: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        for link_id in list(self._links):
            self._detach(link_id)


class UserspaceShaper(_AttachedLinks):
    """One relay process per link (see linkem_relay.c), controlled through shared memory."""

    mechanism = "userspace"

    def __init__(self, state_dir: Path, seed: int = 0, realtime: bool = True) -> None:
        super().__init__(state_dir, seed)
        # SCHED_FIFO priority 1 for the relays: on a loaded machine a relay then waits for no
        # ordinary process when a frame is due (p99 delay), and sleeps between frames anyway
        self.rt_priority = 1 if realtime else 0
        self._binary = relay_binary()

    def attach(self, link_id: str, intf_a: str, intf_b: str, params: LinkParams,
               netns_a: str | None = None, netns_b: str | None = None, peers: int = 0
               ) -> None:
        """`peers` > 0: the element also keeps a per-peer table of up to that many
        addresses (`update_peers`); side a must then be the host."""
        self._check_new(link_id)
        for intf, ns in ((intf_a, netns_a), (intf_b, netns_b)):
            _prepare_interface(intf, ns)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        link = _Link(intf_a, intf_b, netns_a, netns_b, params)
        link.ctl = ControlBlock(self.state_dir / f"linkem-{link_id}.ctl", params, peers=peers)
        link.log = self.state_dir / f"linkem-{link_id}.log"
        parent_r, link.parent_w = os.pipe()  # the relay exits when this pipe closes
        self._links[link_id] = link
        try:
            try:
                with open(link.log, "wb") as log:
                    link.proc = subprocess.Popen(
                        [str(self._binary), str(link.ctl.path), intf_a, intf_b, netns_a or "-",
                         netns_b or "-", str(link_seed(self.seed, link_id)), str(parent_r),
                         str(self.rt_priority)],
                        pass_fds=[parent_r], stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            finally:
                os.close(parent_r)  # only the relay keeps the read end
            start = proc_start_time(link.proc.pid)
            if start is not None:
                link.pid_start = (link.proc.pid, start)
            deadline = time.monotonic() + 5.0
            while not link.ctl.ready:
                if link.proc.poll() is not None or time.monotonic() > deadline:
                    why = link.log.read_text(errors="replace").strip() or "no output"
                    raise RuntimeError(f"link relay for {link_id!r} did not start: {why}")
                time.sleep(0.001)
        except BaseException:
            self._detach(link_id)
            raise

    def update(self, link_id: str, params: LinkParams) -> None:
        link = self._get(link_id)
        link.params = params
        assert link.ctl is not None
        link.ctl.write(params, link.up)

    def update_peers(self, link_id: str, delays_ms: Mapping[str, float]) -> None:
        """The link's whole per-peer table (IPv4 address -> real one-way ms), at once."""
        ctl = self._get(link_id).ctl
        assert ctl is not None
        ctl.write_peers(delays_ms)

    def set_up(self, link_id: str, up: bool, carrier: bool = True) -> None:
        """Down: the relay drops every frame at once (queued ones too); with `carrier`, the
        element's interfaces also go down. Up: the reverse, in the reverse order."""
        link = self._get(link_id)
        assert link.ctl is not None
        if up and carrier:
            _carrier(link, True)
        link.up = up
        link.ctl.write(link.params, up)
        if not up and carrier:
            _carrier(link, False)

    def stats(self, link_id: str) -> dict[str, int]:
        ctl = self._get(link_id).ctl
        assert ctl is not None
        return ctl.counters()

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        """The relay of each link, so that the runner notices one that dies."""
        return {lid: link.proc for lid, link in self._links.items() if link.proc is not None}

    def created(self) -> Created:
        out = Created()
        for link_id, link in self._links.items():
            if link.pid_start is not None:
                out.pids[f"linkem-{link_id}"] = link.pid_start
            for p in (link.ctl.path if link.ctl else None, link.log):
                if p is not None:
                    out.paths.append(str(p))
        return out

    def _detach(self, link_id: str) -> None:
        link = self._links.pop(link_id)
        if link.ctl is not None:
            link.ctl.request_stop()
        if link.parent_w is not None:
            os.close(link.parent_w)  # the relay sees the pipe close and exits
        if link.proc is not None:
            # our unreaped child: its PID cannot have been recycled, so signal it directly
            for ask in (None, link.proc.terminate, link.proc.kill):
                if ask is not None:
                    ask()
                try:
                    link.proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if link.ctl is not None:
            link.ctl.close()
        if link.log is not None:
            link.log.unlink(missing_ok=True)


class NetemShaper(_AttachedLinks):
    """The kernel's netem: frames from `intf_a`'s ingress are redirected (tc mirred) to
    `intf_b`'s egress, where a netem qdisc delays them, and the same from b to a."""

    mechanism = "netem"

    def __init__(self, state_dir: Path, seed: int = 0) -> None:
        super().__init__(state_dir, seed)  # netem's own random draws are not seeded

    def attach(self, link_id: str, intf_a: str, intf_b: str, params: LinkParams,
               netns_a: str | None = None, netns_b: str | None = None, peers: int = 0
               ) -> None:
        self._check_new(link_id)
        if peers:
            raise ValueError("per-peer delay tables need the userspace relay, not netem")
        if netns_a != netns_b:
            raise ValueError("the netem mechanism splices two interfaces of one namespace; "
                             f"got netns_a={netns_a!r}, netns_b={netns_b!r}")
        link = _Link(intf_a, intf_b, netns_a, netns_b, params)
        self._links[link_id] = link
        try:
            for src, dst in ((intf_a, intf_b), (intf_b, intf_a)):
                _prepare_interface(src, netns_a)
                _sh(_in_netns(netns_a, ["tc", "qdisc", "add", "dev", src, "clsact"]))
                _sh(_in_netns(netns_a, ["tc", "filter", "add", "dev", src, "ingress", "u32",
                                        "match", "u32", "0", "0", "action", "mirred", "egress",
                                        "redirect", "dev", dst]))
                _sh(_in_netns(netns_a, ["tc", "qdisc", "add", "dev", dst, "root", "netem",
                                        *netem_qdisc_args(params)]))
        except BaseException:
            self._detach(link_id)
            raise

    def update(self, link_id: str, params: LinkParams) -> None:
        link = self._get(link_id)
        link.params = params
        for dst in (link.intf_a, link.intf_b):
            _sh(_in_netns(link.netns_a, ["tc", "qdisc", "change", "dev", dst, "root", "netem",
                                         *netem_qdisc_args(params)]))

    def update_peers(self, link_id: str, delays_ms: Mapping[str, float]) -> None:
        raise ValueError("per-peer delay tables need the userspace relay, not netem")

    def set_up(self, link_id: str, up: bool, carrier: bool = True) -> None:
        """netem has no drop-all switch: down is always the interfaces going down."""
        link = self._get(link_id)
        link.up = up
        _carrier(link, up)

    def stats(self, link_id: str) -> dict[str, int]:
        """From the netem qdiscs: tx = frames netem sent on, dropped = its drops (loss and
        queue overflow together); frames lost while down are not counted."""
        link = self._get(link_id)
        out: dict[str, int] = {}
        for d, dst in (("ab", link.intf_b), ("ba", link.intf_a)):
            r = _sh(_in_netns(link.netns_a, ["tc", "-s", "-j", "qdisc", "show", "dev", dst]))
            qdiscs: list[dict[str, object]] = json.loads(r.stdout)
            q = next((q for q in qdiscs if q.get("kind") == "netem"), {})
            for key, field_name in (("tx_packets", "packets"), ("tx_bytes", "bytes"),
                                    ("dropped", "drops")):
                out[f"{d}_{key}"] = int(str(q.get(field_name, 0)))
        return out

    def processes(self) -> dict[str, subprocess.Popen[bytes]]:
        return {}  # the kernel does the work: nothing to watch

    def created(self) -> Created:
        return Created()  # qdiscs go with their interfaces; no processes

    def _detach(self, link_id: str) -> None:
        link = self._links.pop(link_id)
        for intf in (link.intf_a, link.intf_b):
            _sh(_in_netns(link.netns_a, ["tc", "qdisc", "del", "dev", intf, "root"]), check=False)
            _sh(_in_netns(link.netns_a, ["tc", "qdisc", "del", "dev", intf, "clsact"]),
                check=False)


def make_shaper(mechanism: str, state_dir: Path, seed: int = 0) -> LinkShaper:
    """A shaper for `mechanism` ("netem" or "userspace"; see choose_mechanism)."""
    if mechanism == "userspace":
        return UserspaceShaper(state_dir, seed)
    if mechanism == "netem":
        return NetemShaper(state_dir, seed)
    raise ValueError(f"link mechanism must be 'netem' or 'userspace', got {mechanism!r}")

