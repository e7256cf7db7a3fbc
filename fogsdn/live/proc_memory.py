"""The memory a run holds: the resident set of its whole process tree, sampled; and
the CPU time its kinds of process used (clients, fog daemons, relays, Open vSwitch).

The summed RSS says whether the live city fits a machine; it counts shared pages once
per process, so the proportional set (PSS) is kept beside it where the kernel gives it.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

PROC = Path("/proc")


def parse_stat_ppid(stat: str) -> int:
    """The parent PID from a /proc/PID/stat line (the name may hold spaces and ')')."""
    return int(stat[stat.rindex(")") + 2:].split()[1])


def parse_status_kb(status: str, key: str) -> int:
    """A `Key:   N kB` field of /proc/PID/status or smaps_rollup (0 when absent)."""
    for line in status.splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def parse_stat_cpu_ticks(stat: str) -> int:
    """utime + stime (clock ticks) from a /proc/PID/stat line."""
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


# what a process is, by a word of its command line (the first that matches)
KINDS = (("fogsdn.city.client_engine", "clients"), ("fogsdn.nodes.traffic_engine", "clients"),
         ("fog_daemon", "fog daemons"), ("linkem_relay", "link relays"),
         ("controller", "controller"), ("mininet:", "host shells"))
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def process_kind(cmdline: str) -> str:
    return next((kind for word, kind in KINDS if word in cmdline), "runner and other")


def descendants(root: int, parents: dict[int, int]) -> list[int]:
    """`root` and every process below it, from a pid -> parent pid map."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds a process has used so far; NaN where it is unknown or gone."""
    stat = None if pid is None else _read(PROC / str(pid) / "stat")
    return parse_stat_cpu_ticks(stat) * TICK_S if stat else math.nan


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # gone meanwhile, or not ours to read
        return None


def ovs_pid() -> int | None:
    try:
        return int(Path("/var/run/openvswitch/ovs-vswitchd.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def process_parents() -> dict[int, int]:
    stats = {int(d): _read(PROC / d / "stat") for d in os.listdir(PROC) if d.isdigit()}
    return {pid: parse_stat_ppid(stat) for pid, stat in stats.items() if stat is not None}


def tree_memory_kb(root: int) -> tuple[int, int, int]:
    """(RSS, PSS, processes) of `root`'s process tree now, kB."""
    rss = pss = 0
    pids = descendants(root, process_parents())
    for pid in pids:
        status = _read(PROC / str(pid) / "status")
        if status is not None:
            rss += parse_status_kb(status, "VmRSS")
        rollup = _read(PROC / str(pid) / "smaps_rollup")
        if rollup is not None:
            pss += parse_status_kb(rollup, "Pss")
    return rss, pss, len(pids)


class MemorySummary(TypedDict):
    """`MemoryPeak.summary`: the peaks in MB, and CPU seconds by kind of process."""

    peak_rss_mb: float
    peak_pss_mb: float
    peak_processes: int
    samples: int
    cpu_s: dict[str, float]  # `MemoryPeak.cpu_s`


@dataclass
class MemoryPeak:
    """The peak of a process tree's memory over the samples taken (`sample()`)."""

    root: int
    peak_rss_kb: int = 0
    peak_pss_kb: int = 0
    peak_processes: int = 0
    samples: int = 0
    last: float = 0.0  # time.monotonic() of the last sample
    # CPU: each process's last-seen ticks and kind; Open vSwitch's at the first sample
    _ticks: dict[int, tuple[str, int]] = field(default_factory=dict)
    _ovs: tuple[int, int, float] | None = None  # pid, ticks, time at the first sample
    _ovs_now: tuple[int, float] = (0, 0.0)
    _first: float = 0.0

    def sample(self) -> None:
        self.last = time.monotonic()
        if not self._first:
            self._first = self.last
        self._sample_cpu()
        rss, pss, n = tree_memory_kb(self.root)
        self.peak_rss_kb = max(self.peak_rss_kb, rss)
        self.peak_pss_kb = max(self.peak_pss_kb, pss)
        self.peak_processes = max(self.peak_processes, n)
        self.samples += 1

    def _sample_cpu(self) -> None:
        for pid in descendants(self.root, process_parents()):
            stat = _read(PROC / str(pid) / "stat")
            if stat is None:
                continue
            kind = self._ticks[pid][0] if pid in self._ticks else \
                process_kind((_read(PROC / str(pid) / "cmdline") or "").replace("\0", " "))
            self._ticks[pid] = (kind, parse_stat_cpu_ticks(stat))
        ovs = ovs_pid()
        if ovs is not None:
            stat = _read(PROC / str(ovs) / "stat")
            if stat is not None:
                ticks = parse_stat_cpu_ticks(stat)
                if self._ovs is None or self._ovs[0] != ovs:
                    self._ovs = (ovs, ticks, self.last)
                self._ovs_now = (ticks, self.last)

    def cpu_s(self) -> dict[str, float]:
        """CPU seconds by kind of process since each started (the runner's own since it
        started), and Open vSwitch's since the first sample; with the span sampled."""
        out: dict[str, float] = {}
        for kind, ticks in self._ticks.values():
            out[kind] = out.get(kind, 0.0) + ticks * TICK_S
        if self._ovs is not None:
            out["open vswitch"] = (self._ovs_now[0] - self._ovs[1]) * TICK_S
        out = {k: round(v, 1) for k, v in out.items()}
        out["span_s"] = round(self.last - self._first, 1)
        return out

    @property
    def peak_mb(self) -> float:
        return self.peak_rss_kb / 1024

    def summary(self) -> MemorySummary:
        return {"peak_rss_mb": round(self.peak_rss_kb / 1024, 1),
                "peak_pss_mb": round(self.peak_pss_kb / 1024, 1),
                "peak_processes": self.peak_processes, "samples": self.samples,
                "cpu_s": self.cpu_s()}
