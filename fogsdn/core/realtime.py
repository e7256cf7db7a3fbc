"""Real-time scheduling for the few threads whose timing is the measurement."""

from __future__ import annotations

import os


def go_realtime(priority: int = 1) -> bool:
    """SCHED_FIFO at `priority` for the calling thread only, so a timed wake-up waits for
    no ordinary process; False where it may not (not root, a refusing cgroup)."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError):
        return False
    return True


def process_realtime(pid: int, priority: int = 1) -> set[int]:
    """SCHED_FIFO at `priority` for every ordinary thread of process `pid` now (e.g.
    ovs-vswitchd, docs/emulation.md); returns the thread ids that were real-time already,
    for `process_ordinary` to leave alone."""
    already = set()
    for tid in _threads(pid):
        try:
            policy = os.sched_getscheduler(tid)
            if policy != os.SCHED_OTHER and not (
                    policy == os.SCHED_FIFO and os.sched_getparam(tid).sched_priority == priority):
                already.add(tid)  # someone else's real-time thread (at our priority: a
                # killed run's leftover, which goes back at this run's end)
            else:
                os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
        except OSError:
            continue  # the thread ended, or this process may not
    return already


def process_ordinary(pid: int, keep: set[int]) -> None:
    """Back to SCHED_OTHER (the nice value is kept) for every real-time thread of `pid`
    but those in `keep`: the ones `process_realtime` changed and those started since."""
    for tid in _threads(pid):
        if tid in keep:
            continue
        try:
            if os.sched_getscheduler(tid) == os.SCHED_FIFO:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            continue  # gone


def all_realtime(pid: int) -> bool:
    tids = _threads(pid)
    try:
        return bool(tids) and all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in tids)
    except OSError:
        return False


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []
