"""fogsdn.processes: stop signals held back from what Mininet forks while it builds."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from types import FrameType

from fogsdn.processes import stop_signals_deferred


def _blocked(pid: int) -> int:
    """The signal numbers `pid` has blocked, as a bit mask (bit n-1 for signal n)."""
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
                if ln.startswith("SigBlk:"))
    return int(line.split()[1], 16)


def _has(mask: int, sig: signal.Signals) -> bool:
    return bool(mask >> (sig - 1) & 1)


def test_children_forked_meanwhile_never_see_ctrl_c_and_the_runner_still_does() -> None:
    got: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        with stop_signals_deferred():
            child = subprocess.Popen(["sleep", "30"])
            os.kill(os.getpid(), signal.SIGTERM)  # as a Ctrl-C to the group would
            assert got == []  # held back
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
    finally:
        signal.signal(signal.SIGTERM, old)
