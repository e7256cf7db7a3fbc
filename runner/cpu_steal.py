"""The share of the CPU a hypervisor took from this machine while a run ran.

On a virtual machine the host may run other guests on our cores ("steal" time in
/proc/stat). Every live timing then stretches, whatever our own scheduling: at time
scale 5 the FN's achieved/nominal service tracked it (x1.002 at 0.04 % stolen, x1.06-1.08
at 14 %; docs/emulation.md). A run records it so that a reader can tell it apart.
"""

from __future__ import annotations

from pathlib import Path

CpuTimes = tuple[int, int]  # (steal, total) jiffies of all CPUs


def read_cpu_times(stat: Path = Path("/proc/stat")) -> CpuTimes:
    fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), sum(fields[:8])


def steal_share(before: CpuTimes, after: CpuTimes) -> float:
    """Stolen over all CPU time between two readings (0 where no time passed)."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0
