"""Real-time scheduling for the few threads whose timing is the measurement."""

from __future__ import annotations

import os


def go_realtime(priority: int = 1) -> bool:
    """SCHED_FIFO at `priority` for the calling thread (Linux schedules threads, so pid 0
    is this thread only), as the link relays run: on a loaded two-core machine a timed
    wake-up then waits for no ordinary process. False where it may not (not root, or a
    cgroup that refuses real-time tasks): the thread runs as before."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError):
        return False
    return True
