"""Real-time scheduling of another process's threads (nodes.realtime), as the runner
gives the switch for a run and takes back at teardown."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nodes.realtime import process_ordinary, process_realtime

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
        changed = process_realtime(child.pid)
        assert sorted(changed) == tids
        assert all(os.sched_getscheduler(t) == os.SCHED_FIFO for t in tids)
        assert process_realtime(child.pid) == []  # already real-time: nothing to give back
        process_ordinary(changed)
        assert all(os.sched_getscheduler(t) == os.SCHED_OTHER for t in tids)
    finally:
        child.kill()
        child.wait()


def test_a_process_that_is_gone_changes_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_realtime(child.pid) == []
    process_ordinary([child.pid])  # no error for a thread that ended
