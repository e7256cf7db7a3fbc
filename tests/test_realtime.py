"""Real-time scheduling of another process's threads (fogsdn.core.realtime), as the runner
gives the switch for a run and takes back at teardown."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fogsdn.core.realtime import all_realtime, process_ordinary, process_realtime

CHILD = ("import threading, time\n"
         "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
         "print('up', flush=True); time.sleep(30)\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO for another process needs root")
def test_every_thread_goes_fifo_and_comes_back_ordinary() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"up"
        tids = sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        assert len(tids) == 2
        assert process_realtime(child.pid) == set()  # none was real-time before
        assert all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in tids)
        assert all_realtime(child.pid)
        # at our own priority: a killed run's leftover, not kept
        assert process_realtime(child.pid) == set()
        os.sched_setscheduler(tids[1], os.SCHED_FIFO, os.sched_param(2))  # someone else's
        assert process_realtime(child.pid) == {tids[1]}
        # a thread real-time before we came stays so; the rest, and any thread started
        # since (it inherits SCHED_FIFO), go back
        process_ordinary(child.pid, {tids[1]})
        assert [os.sched_getscheduler(t) for t in tids] == [os.SCHED_OTHER, os.SCHED_FIFO]
        process_ordinary(child.pid, set())
        assert not all_realtime(child.pid)
        assert all(os.sched_getscheduler(t) == os.SCHED_OTHER for t in tids)
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone_changes_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_realtime(child.pid) == set() and not all_realtime(child.pid)
    process_ordinary(child.pid, set())  # no error for a process that ended
