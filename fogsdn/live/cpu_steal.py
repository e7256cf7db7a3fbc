"""The share of the CPU a hypervisor took from this machine while a run ran (steal), and
the share nobody used (idle): the two figures that tell a run's own artefacts apart
(docs/emulation.md, "The hypervisor's steal").
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
