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


def process_realtime(pid: int, priority: int = 1) -> list[int]:
    """SCHED_FIFO at `priority` for every thread of process `pid` now (threads it starts
    later inherit it); returns the thread ids changed, for `process_ordinary`. Used on
    the switch (ovs-vswitchd), whose forwarding and revalidator threads otherwise wait
    behind the real-time workers on two cores (docs/emulation.md)."""
    changed = []
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []
    for tid in tids:
        try:
            if os.sched_getscheduler(tid) == os.SCHED_OTHER:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
                changed.append(tid)
        except OSError:
            continue  # the thread ended, or this process may not
    return changed


def process_ordinary(tids: list[int]) -> None:
    """Back to SCHED_OTHER (the nice value is kept) for threads `process_realtime` changed."""
    for tid in tids:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            continue  # gone
