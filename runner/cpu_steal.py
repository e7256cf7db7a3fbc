"""The share of the CPU a hypervisor took from this machine while a run ran, and the
share nobody used (idle): the two figures that tell a run's own artefacts apart.

On a virtual machine the host may run other guests on our cores ("steal" time in
/proc/stat). Every live timing then stretches, whatever our own scheduling: at time
scale 5 the FN's achieved/nominal service tracked it (x1.002 at 0.04 % stolen, x1.06-1.08
at 14 %; docs/emulation.md). A run records it so that a reader can tell it apart. A run
with no idle CPU left has met this machine's floor: its clients, switch and nodes wait
for a core.
"""

from __future__ import annotations

from pathlib import Path

CpuTimes = tuple[int, int, int]  # (steal, idle, total) jiffies of all CPUs


def read_cpu_times(stat: Path = Path("/proc/stat")) -> CpuTimes:
    """user nice system idle iowait irq softirq steal: idle counts iowait too."""
    fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
    return (fields[7] if len(fields) > 7 else 0), fields[3] + fields[4], sum(fields[:8])


def steal_share(before: CpuTimes, after: CpuTimes) -> float:
    """Stolen over all CPU time between two readings (0 where no time passed)."""
    total = after[2] - before[2]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def idle_share(before: CpuTimes, after: CpuTimes) -> float:
    """Idle over all CPU time between two readings (1 where no time passed)."""
    total = after[2] - before[2]
    return (after[1] - before[1]) / total if total > 0 else 1.0
