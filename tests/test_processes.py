"""fogsdn.processes: stop signals held back from what Mininet forks while it builds."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path
from types import FrameType

from conftest import wait_until

from fogsdn.processes import stop_signals_deferred


def _blocked(pid: int) -> int:
    """The signal numbers `pid` has blocked, as a bit mask (bit n-1 for signal n)."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                if ln.startswith("SigBlk:"))
    return int(line.split()[1], 16)


def _has(mask: int, sig: signal.Signals) -> bool:
    return bool(mask >> (sig - 1) & 1)


def _pending(sig: signal.Signals) -> bool:
    """`sig` waits undelivered, for the process or for one of its threads."""
    for status in [Path("/proc/self/status"), *Path("/proc/self/task").glob("*/status")]:
        try:
            text = status.read_text()
        except OSError:  # a thread that has just ended
            continue
        for ln in text.splitlines():
            if ln.startswith(("ShdPnd:", "SigPnd:")) and _has(int(ln.split()[1], 16), sig):
                return True
    return False


def _let_python_handlers_run() -> None:
    """Python runs a signal's handler in the main thread between bytecodes: give it
    some (a loop's back edges) after the kernel has delivered it."""
    for _ in range(10_000):
        pass


def test_children_forked_meanwhile_never_see_ctrl_c_and_the_runner_still_does() -> None:
    got: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    # the runner has several threads, and a signal sent to the process goes to any one
    # that does not block it: this one has not blocked any
    other_may_end = threading.Event()
    other = threading.Thread(target=other_may_end.wait, name="not-blocking")
    other.start()
    old = signal.signal(signal.SIGTERM, handler)
    try:
        with stop_signals_deferred():
            child = subprocess.Popen(["sleep", "30"])
            assert not _has(_blocked(other.native_id), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)  # as a Ctrl-C to the group would
            wait_until(lambda: bool(got) or not _pending(signal.SIGTERM),
                       "the SIGTERM to reach the thread that does not block it", 10.0)
            _let_python_handlers_run()
            assert got == []  # held back, whichever thread the kernel chose
        _let_python_handlers_run()
        assert got == [signal.SIGTERM]  # delivered once the build is over
        mask = _blocked(child.pid)  # the child keeps the block across exec
        assert _has(mask, signal.SIGINT) and _has(mask, signal.SIGTERM)
        child.kill()
        child.wait(5)
        # what is forked after the build is signalled as usual
        after = subprocess.Popen(["sleep", "30"])
        mask = _blocked(after.pid)
        after.kill()
        after.wait(5)
        assert not _has(mask, signal.SIGINT) and not _has(mask, signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is handler  # the runner's, as before
    finally:
        signal.signal(signal.SIGTERM, old)
        other_may_end.set()
        other.join(5)
