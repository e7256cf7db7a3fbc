"""The memory a run holds: the resident set of its whole process tree, sampled.

Why: the live city at the paper's scale is some 260 processes (fog daemons, clients,
the hosts' shells, link relays, the controller); the figure that says whether it fits
a machine is their resident sets summed, at its peak. Shared pages (the Python
interpreter's, the libraries') count once per process, so the sum overstates what the
machine gives up; the proportional set (PSS, each shared page split among its users)
is kept beside it where the kernel gives it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # gone meanwhile, or not ours to read
        return None


def process_parents() -> dict[int, int]:
    out = {}
    for d in os.listdir(PROC):
        if d.isdigit():
            stat = _read(PROC / d / "stat")
            if stat is not None:
                out[int(d)] = parse_stat_ppid(stat)
    return out


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


@dataclass
class MemoryPeak:
    """The peak of a process tree's memory over the samples taken (`sample()`)."""

    root: int
    peak_rss_kb: int = 0
    peak_pss_kb: int = 0
    peak_processes: int = 0
    samples: int = 0
    last: float = 0.0  # time.monotonic() of the last sample

    def sample(self) -> None:
        self.last = time.monotonic()
        rss, pss, n = tree_memory_kb(self.root)
        self.peak_rss_kb = max(self.peak_rss_kb, rss)
        self.peak_pss_kb = max(self.peak_pss_kb, pss)
        self.peak_processes = max(self.peak_processes, n)
        self.samples += 1

    @property
    def peak_mb(self) -> float:
        return self.peak_rss_kb / 1024

    def summary(self) -> dict[str, Any]:
        return {"peak_rss_mb": round(self.peak_rss_kb / 1024, 1),
                "peak_pss_mb": round(self.peak_pss_kb / 1024, 1),
                "peak_processes": self.peak_processes, "samples": self.samples}
